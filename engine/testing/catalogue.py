"""A catalogue of small tools that between them do everything a tool can do to the engine.

Each body is counted in a :class:`~engine.testing.BodyRuns` (by the engine's call id), and
nothing in a body reads a clock or a random source, so a session over these tools writes the
same log on every run (given an injected clock and session id, and trio's scheduler seeded by
Hypothesis). Every tool but ``nest`` takes ``{"n": int}``:

========== ================================================================================
read_a/b   return text; ``read_a`` reports progress and yields to the scheduler
wipe       returns text (meant to be given dangerous annotations)
boom       raises ``RuntimeError``
soft_fail  returns ``is_error=True`` with content and structured content
shaped     declares an output schema; odd ``n`` returns output that violates it, and
           ``n`` divisible by 3 returns structured content without content
seq_step   ``execution_mode="sequential"``: its batch runs one call after another
slow       ``timeout=5``: odd ``n`` sleeps forever (times out), even ``n`` sleeps 1 s
hidden     exposure ``hidden``: the model may not call it unless the host activated it, a
           nested call may
model_only exposure ``model-only``: a nested call may not call it
nest       ``{"plan": [{"name", "arguments"}, ...]}``: makes those nested calls in order
           (arguments :data:`NOT_JSON` become a value that is not JSON; a step with
           ``"forward": true`` forwards the child's progress as its own); ``timeout=4``, so a
           slow child makes it time out and cancels the child running then
========== ================================================================================

Tools sleep, so run them under ``trio.testing.MockClock(autojump_threshold=0)``: virtual time
keeps the runs fast and deterministic. Example::

    runs = BodyRuns()
    tools = catalogue_tools({name: Annotations(read_only=True) for name in TOOL_NAMES}, runs)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import trio

from events.results import ToolResult, text
from events.types import Annotations

from ..core.toolcontext import CallOutcome, ToolContext
from ..core.tools import ToolCall, ToolSpec, tool
from .tools import BodyRuns

__all__ = [
    "INT_SCHEMA",
    "INT_TOOLS",
    "NEST_TIMEOUT",
    "NOT_JSON",
    "PLAN_SCHEMA",
    "SHAPED_OUTPUT",
    "SLOW_TIMEOUT",
    "TOOL_NAMES",
    "UNKNOWN_TOOL",
    "QUESTION_FORM",
    "NestRecord",
    "ask_tool",
    "catalogue_tools",
    "nest_tool",
]

#: a name no catalogue tool has: calling it is "not available"
UNKNOWN_TOOL = "no_such_tool"
#: the tools that take ``{"n": int}``
INT_TOOLS: tuple[str, ...] = (
    "read_a", "read_b", "wipe", "boom", "soft_fail", "shaped", "seq_step", "slow", "hidden",
    "model_only",
)
#: every tool of the catalogue
TOOL_NAMES: tuple[str, ...] = (*INT_TOOLS, "nest")
INT_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {"n": {"type": "integer"}},
    "required": ["n"],
    "additionalProperties": False,
}
PLAN_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {"plan": {"type": "array", "items": {"type": "object"}}},
    "required": ["plan"],
}
SHAPED_OUTPUT: Mapping[str, Any] = {
    "type": "object",
    "properties": {"size": {"type": "integer"}},
    "required": ["size"],
}
#: arguments that ``nest`` turns into a value that is not JSON (a set) before calling
NOT_JSON = "__not_json__"
#: timeouts of ``slow`` and ``nest`` (virtual seconds: run under ``trio.testing.MockClock``)
SLOW_TIMEOUT = 5.0
NEST_TIMEOUT = 4.0


class NestRecord:
    """What ``nest`` saw: each nested call's outcome by id, and anything ``ctx.execute_tool``
    raised other than a cancellation (it must raise nothing else)."""

    def __init__(self) -> None:
        self.outcomes: dict[str, CallOutcome] = {}
        self.raised: list[BaseException] = []


def nest_tool(
    runs: BodyRuns,
    *,
    name: str = "nest",
    annotations: Annotations = Annotations(read_only=True, open_world=False),
    timeout: float | None = NEST_TIMEOUT,
    record: NestRecord | None = None,
) -> ToolSpec:
    """A tool whose arguments are a plan of nested calls, ``{"plan": [{"name": ...,
    "arguments": ...}, ...]}``; it makes them in order with ``ctx.execute_tool`` and returns
    which failed. Arguments equal to :data:`NOT_JSON` become a set (not JSON); a step with
    ``"forward": true`` forwards the progress of its call (``ctx.forward_progress``)."""
    seen = record if record is not None else NestRecord()

    async def nest(call: ToolCall, ctx: ToolContext) -> ToolResult:
        runs.record(call)
        errors: list[bool] = []
        for step in call.arguments["plan"]:
            arguments = step.get("arguments")
            if arguments == NOT_JSON:
                arguments = {"n": {1, 2}}
            try:
                outcome = await ctx.execute_tool(
                    str(step.get("name", "")), arguments,
                    on_progress=ctx.forward_progress if step.get("forward") is True else None)
            except Exception as exc:  # execute_tool must not raise for a tool failure
                seen.raised.append(exc)
                raise
            seen.outcomes[outcome.call_id] = outcome
            errors.append(outcome.is_error)
        return ToolResult(content=[text(f"nested {len(errors)}")],
                          structured_content={"errors": errors})

    spec: ToolSpec = tool(name=name, description="makes the nested calls its plan lists",
                          input_schema=PLAN_SCHEMA, annotations=annotations,
                          timeout=timeout)(nest)
    return spec


#: the form ``ask`` puts to the person
QUESTION_FORM: Mapping[str, Any] = {
    "type": "object",
    "properties": {"count": {"type": "integer", "minimum": 0, "title": "How many"}},
    "required": ["count"],
}


def ask_tool(
    runs: BodyRuns,
    *,
    name: str = "ask",
    annotations: Annotations = Annotations(read_only=True, open_world=False, idempotent=True),
) -> ToolSpec:
    """A tool that asks the person how many (``ctx.ask`` with :data:`QUESTION_FORM`) for
    ``{"n": int}`` and returns what it was told: ``"accept 3"``, ``"decline"``, ... Idempotent
    by default, so a body waiting on a question runs again after a restart and reads the
    recorded answer."""

    async def ask(call: ToolCall, ctx: ToolContext) -> ToolResult:
        runs.record(call)
        n = call.arguments.get("n") if isinstance(call.arguments, dict) else None
        answer = await ctx.ask(f"How many for {n}?", QUESTION_FORM)
        count = answer.content["count"] if answer.content is not None else None
        told = f"{answer.action} {count}" if answer.accepted else answer.action
        return ToolResult(content=[text(told)])

    spec: ToolSpec = tool(name=name, description="asks the person how many",
                          input_schema=INT_SCHEMA, annotations=annotations)(ask)
    return spec


def catalogue_tools(
    annotations: Mapping[str, Annotations],
    runs: BodyRuns,
    *,
    record: NestRecord | None = None,
) -> list[ToolSpec]:
    """The catalogue's tools (see the module docstring), with the given annotations by name
    (a name left out has none: MCP's defaults, so it needs approval)."""

    def n_of(call: ToolCall) -> int:
        runs.record(call)
        arguments = call.arguments
        n = arguments.get("n") if isinstance(arguments, dict) else None
        return n if isinstance(n, int) else 0

    def spec(name: str, **kwargs: Any) -> Callable[[Any], ToolSpec]:
        def wrap(execute: Any) -> ToolSpec:
            built: ToolSpec = tool(name=name, description=f"the {name} tool",
                                   input_schema=INT_SCHEMA,
                                   annotations=annotations.get(name, Annotations()),
                                   **kwargs)(execute)
            return built
        return wrap

    @spec("read_a")
    async def read_a(call: ToolCall, ctx: ToolContext) -> ToolResult:
        n = n_of(call)
        ctx.report_progress(f"reading {n}", {"n": n})
        await trio.lowlevel.checkpoint()
        return ToolResult(content=[text(f"read_a {n}")])

    @spec("read_b")
    async def read_b(call: ToolCall, ctx: ToolContext) -> ToolResult:
        return ToolResult(content=[text(f"read_b {n_of(call)}")])

    @spec("wipe")
    async def wipe(call: ToolCall, ctx: ToolContext) -> ToolResult:
        return ToolResult(content=[text(f"wiped {n_of(call)}")])

    @spec("boom")
    async def boom(call: ToolCall, ctx: ToolContext) -> ToolResult:
        raise RuntimeError(f"boom {n_of(call)}")

    @spec("soft_fail")
    async def soft_fail(call: ToolCall, ctx: ToolContext) -> ToolResult:
        n = n_of(call)
        return ToolResult(content=[text(f"{n} tests failed")],
                          structured_content={"failed": n}, is_error=True)

    @spec("shaped", output_schema=SHAPED_OUTPUT)
    async def shaped(call: ToolCall, ctx: ToolContext) -> ToolResult:
        n = n_of(call)
        structured = {"size": n} if n % 2 == 0 else {"size": f"{n} bytes"}
        content = [] if n % 3 == 0 else [text(f"size {n}")]
        return ToolResult(content=content, structured_content=structured)

    @spec("seq_step", execution_mode="sequential")
    async def seq_step(call: ToolCall, ctx: ToolContext) -> ToolResult:
        n = n_of(call)
        await trio.lowlevel.checkpoint()
        return ToolResult(content=[text(f"step {n}")])

    @spec("slow", timeout=SLOW_TIMEOUT)
    async def slow(call: ToolCall, ctx: ToolContext) -> ToolResult:
        n = n_of(call)
        if n % 2:
            await trio.sleep_forever()
        await trio.sleep(1)
        return ToolResult(content=[text(f"slow {n}")])

    @spec("hidden", exposure="hidden")
    async def hidden(call: ToolCall, ctx: ToolContext) -> ToolResult:
        return ToolResult(content=[text(f"hidden {n_of(call)}")])

    @spec("model_only", exposure="model-only")
    async def model_only(call: ToolCall, ctx: ToolContext) -> ToolResult:
        return ToolResult(content=[text(f"model only {n_of(call)}")])

    nest = nest_tool(runs, annotations=annotations.get("nest", Annotations()), record=record)
    return [read_a, read_b, wipe, boom, soft_fail, shaped, seq_step, slow, hidden, model_only,
            nest]
