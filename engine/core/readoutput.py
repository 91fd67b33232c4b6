"""The read tool over long outputs: the model reads on where a cut left off.

A result the model read cut (:mod:`engine.core.cutting`) says in its marker which characters
were left out, and, when the session has this tool, how to read them:
``read_output(call_id="3.0", offset=4000, length=8000)``. The tool reads the whole result of
an earlier call of the session (``ctx.whole_result``: from its record, or from the artifact the
store keeps) and returns that slice of its text, as the cut counted it.

It is a normal tool: registered by the host (``tools=[..., read_output]``), recorded, gated and
replayed like any other. It declares itself read-only, not destructive, idempotent and
closed-world (it reads what the session already holds), so the default policy runs it without
asking; its own view is wide enough that the session's does not cut what it returns. Pure: the
reading is the ctx's.
"""

from __future__ import annotations

from typing import Any, Final

from events.results import ModelView, ToolResult, text
from events.types import Annotations

from .cutting import READ_OUTPUT, model_text
from .tools import ToolCall, ToolSpec

__all__ = ["MAX_READ", "read_output"]

#: The most characters one read returns.
MAX_READ: Final = 16_000

_INPUT = {
    "type": "object",
    "properties": {
        "call_id": {"type": "string", "minLength": 1, "maxLength": 256,
                    "description": "the call whose output to read, as the cut's marker names it"},
        "offset": {"type": "integer", "minimum": 0,
                   "description": "the first character to read (0: the start)"},
        "length": {"type": "integer", "minimum": 1, "maximum": MAX_READ,
                   "description": f"how many characters to read (at most {MAX_READ})"},
    },
    "required": ["call_id"],
    "additionalProperties": False,
}


async def _read(call: ToolCall, ctx: Any) -> ToolResult:
    arguments = call.arguments
    call_id: str = arguments["call_id"]
    offset: int = arguments.get("offset", 0)
    length: int = arguments.get("length", MAX_READ // 2)
    whole = await ctx.whole_result(call_id)
    body = model_text(whole)
    end = min(len(body), offset + length)
    if offset >= len(body):
        said = (f"[the output of call {call_id} has {len(body)} characters: nothing at "
                f"offset {offset}]")
        return ToolResult(content=[text(said)], structured_content={
            "call_id": call_id, "offset": offset, "end": offset, "total": len(body)})
    more = (f"; read on with offset={end}" if end < len(body) else "; that is its end")
    header = f"[characters {offset} to {end} of {len(body)} of call {call_id}'s output{more}]"
    return ToolResult(content=[text(f"{header}\n{body[offset:end]}")], structured_content={
        "call_id": call_id, "offset": offset, "end": end, "total": len(body)})


#: The read tool: register it with a session (``tools=[..., read_output]``) for the model to
#: read what a cut left out of a long output.
read_output: Final = ToolSpec(
    name=READ_OUTPUT,
    description=("Read more of a long tool output that was cut short: give the call id and "
                 "the character offset its marker names, and how many characters to read."),
    input_schema=_INPUT,
    annotations=Annotations(title="Read output", read_only=True, destructive=False,
                            idempotent=True, open_world=False),
    # a read is at most MAX_READ characters, 4 bytes each: never cut again
    model_view=ModelView(max_bytes=4 * MAX_READ + 1_000),
    execute=_read,
)
