"""The code tool: the one tool the model is told about while codemode tools are active.

Its body runs the model's program (:mod:`.program`) with the active codemode tools callable,
and returns what the program printed and the value of its last expression; a program that
fails (a syntax error, an exception it did not catch, a limit) ends the call as an error
result with the same output. It is declared ``idempotent``: all it does to the world it does
through nested calls, which the log answers when the body runs again. A program whose calls
wait for a person's approval stops with its state recorded, and the body run again by the next
``resume()`` goes on from it, in this process or another (see docs/codemode.md).
"""

from __future__ import annotations

import json
from typing import Any, Final

from events.results import ToolResult, text
from events.types import Annotations

from ..core.codemode import CODE_TOOL, program_functions
from ..core.toolcontext import ToolContext
from ..core.tools import ToolCall, ToolSpec
from .limits import CodeLimits
from .program import ProgramEnd, run_program
from .sandbox import monty

__all__ = ["code_tool"]

_INPUT: Final = {
    "type": "object",
    "properties": {"code": {"type": "string", "description": "The Python program to run."}},
    "required": ["code"],
    "additionalProperties": False,
}
#: The program does nothing to the world by itself: every tool it calls is gated on its own.
_ANNOTATIONS: Final = Annotations(read_only=True, open_world=False, idempotent=True)
_WHAT: Final = {"syntax": "The program has a syntax error",
                "raised": "The program raised an exception",
                "crashed": "The program was stopped",
                "refused": "The program's recorded state was refused"}


def code_tool(*, limits: CodeLimits | None = None, description: str = "") -> ToolSpec:
    """The code tool, to register with a session whose ``codemode`` tools the model should
    call from programs. ``limits`` hold each program (:class:`CodeLimits`' defaults when not
    given); ``description`` is said before how to call the tools.

    Raises :class:`~engine.core.errors.CodeModeUnavailable` when the ``codemode`` extra is not
    installed."""
    monty()
    held = limits if limits is not None else CodeLimits()

    async def run_code(call: ToolCall, ctx: ToolContext) -> ToolResult:
        active = [ctx.tools[name] for name in ctx.tools if name in ctx.active_tools]
        end = await run_program(str(call.arguments["code"]), ctx, program_functions(active),
                                held)
        return _result(end)

    return ToolSpec(name=CODE_TOOL, description=description, input_schema=_INPUT,
                    execute=run_code, annotations=_ANNOTATIONS, exposure="model-only")


def _result(end: ProgramEnd) -> ToolResult:
    printed = f"Printed output:\n{end.printed}" if end.printed else "Printed output: none"
    if end.error is not None:
        return ToolResult(
            content=[text(f"{_WHAT[end.error]}:\n{end.message}\n\n{printed}")],
            structured_content={"error": end.error, "message": end.message,
                                "printed": end.printed},
            is_error=True)
    shown: Any = end.value
    value = shown if isinstance(shown, str) else json.dumps(shown, ensure_ascii=False)
    return ToolResult(content=[text(f"Result: {value}\n\n{printed}")],
                      structured_content={"result": end.value, "printed": end.printed})

