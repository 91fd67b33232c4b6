"""What the benchmarks run: one small tool, its baselines, handlers, and scripted models.

The tool is ``echo``: a JSON-Schema input (one required string) and output (one required
string), read-only, so the policy allows it without asking. ``typed_echo`` is the same tool
written as a typed function (``text: str -> Echoed``): its schemas are inferred, its argument
structured and its return value made a result on each call. Its body returns a result built
once, outside the timed code, and so do the baselines' bodies: the figures measure what the
engine does around a tool, not the work of building a result (which any stack would pay the
same; building a ``ToolResult`` from scratch costs about 1.5 µs more). ``guarded_echo`` is the
same tool without hints: the policy asks the approver about each of its calls.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Literal, TypedDict

import fastjsonschema

from engine import (
    Annotations,
    ResultPatch,
    ToolCallDraft,
    ToolContext,
    ToolResult,
    ToolResultDraft,
    text,
    tool,
)
from engine.core.tools import ToolCall, ToolSpec
from engine.models import ModelMessage, ModelRequest
from events import JsonlStore, MemoryStore
from events.stores import EventStore
from events.types import ModelToolCall

__all__ = [
    "ARGS",
    "ECHO_INPUT",
    "RESULT",
    "STORES",
    "ScriptModel",
    "StoreKind",
    "call_handlers",
    "driver",
    "echo",
    "guarded_echo",
    "open_store",
    "plain_echo",
    "plain_validator",
    "result_handlers",
    "typed_echo",
]

ECHO_INPUT: dict[str, Any] = {
    "type": "object",
    "properties": {"text": {"type": "string"}},
    "required": ["text"],
    "additionalProperties": False,
}
ECHO_OUTPUT: dict[str, Any] = {
    "type": "object",
    "properties": {"echo": {"type": "string"}},
    "required": ["echo"],
}
ARGS: dict[str, Any] = {"text": "hello"}
RESULT = ToolResult(content=(text("hello"),), structured_content={"echo": "hello"})


@tool(input_schema=ECHO_INPUT, output_schema=ECHO_OUTPUT, annotations=Annotations(read_only=True))
async def echo(call: ToolCall, ctx: ToolContext) -> ToolResult:
    """Say the text back."""
    return RESULT


class Echoed(TypedDict):
    echo: str


@tool(annotations=Annotations(read_only=True))
async def typed_echo(text: str) -> Echoed:
    """Say the text back: ``echo`` as a typed function."""
    return {"echo": text}


@tool(input_schema=ECHO_INPUT, output_schema=ECHO_OUTPUT)
async def guarded_echo(call: ToolCall, ctx: ToolContext) -> ToolResult:
    """Say the text back, once approved."""
    return RESULT


async def plain_echo(text: str) -> ToolResult:
    """The same tool as a bare coroutine: the baseline of a dispatch."""
    return RESULT


def plain_validator() -> Callable[[Any], Any]:
    """fastjsonschema's compiled validator for echo's input."""
    return fastjsonschema.compile(ECHO_INPUT)


def driver(calls: int, laps: list[float], clock: Callable[[], float],
           target: str = "echo") -> ToolSpec:
    """A tool that dispatches ``calls`` nested calls of ``target`` (``echo`` or
    ``typed_echo``) and notes how long they took.

    A nested call takes the whole path of one call (availability, input validation,
    ``tool_call`` handlers, policy, execution, output validation, ``tool_result`` handlers,
    every event through the reducers into the store), without a model turn around it.
    """

    @tool(name="drive", annotations=Annotations(read_only=True))
    async def drive(call: ToolCall, ctx: ToolContext) -> ToolResult:
        errors = 0
        start = clock()
        for _ in range(calls):
            outcome = await ctx.execute_tool(target, ARGS)
            errors += outcome.is_error
        laps.append(clock() - start)
        if errors:
            raise RuntimeError(f"{errors} of {calls} {target} calls failed: the benchmark is "
                               f"broken")
        return RESULT

    return drive


def call_handlers(count: int) -> list[Callable[[ToolCallDraft], None]]:
    """``count`` ``tool_call`` handlers that look at the call and let it through."""

    def make(index: int) -> Callable[[ToolCallDraft], None]:
        def look(draft: ToolCallDraft) -> None:
            if draft.name == f"never-{index}":
                raise AssertionError("unreachable")

        return look

    return [make(i) for i in range(count)]


def result_handlers(count: int) -> list[Callable[[ToolResultDraft], ResultPatch | None]]:
    """``count`` ``tool_result`` handlers that look at the result and keep it."""

    def make(index: int) -> Callable[[ToolResultDraft], ResultPatch | None]:
        def look(draft: ToolResultDraft) -> ResultPatch | None:
            if draft.result.is_error and index < 0:
                raise AssertionError("unreachable")
            return None

        return look

    return [make(i) for i in range(count)]


class ScriptModel:
    """A scripted model that keeps nothing: ``calls`` turns with one tool call each, then a
    text message. The calls cycle through ``steps`` (tool name, arguments), ``echo`` by
    default. For the memory, fold and concurrency benchmarks, where the faux model's record of
    every request would be counted as the session's."""

    def __init__(self, calls: int, steps: Sequence[tuple[str, Any]] = (("echo", ARGS),)) -> None:
        self._left = calls
        self._turn = 0
        self._steps = list(steps)

    async def complete(self, request: ModelRequest) -> ModelMessage:
        self._turn += 1
        if self._left <= 0:
            return ModelMessage(text="done")
        self._left -= 1
        name, arguments = self._steps[(self._turn - 1) % len(self._steps)]
        call = ModelToolCall(id=f"call_{self._turn}", name=name, arguments=arguments)
        return ModelMessage(tool_calls=(call,))


StoreKind = Literal["jsonl", "memory", "unchecked"]

#: The stores a figure is measured on, headline first: the README's (a JSONL file, not
#: durable), the memory store as it comes (it encodes and proves every record reads back, as
#: the file does), and the memory store that checks nothing (for the floor under the others).
STORES: dict[StoreKind, str] = {
    "jsonl": "JsonlStore",
    "memory": "MemoryStore()",
    "unchecked": "MemoryStore(check_encodable=False)",
}


@contextlib.contextmanager
def open_store(kind: StoreKind) -> Iterator[EventStore]:
    """A fresh store of ``kind`` (a JSONL file in a temporary directory), closed afterwards."""
    if kind != "jsonl":
        yield MemoryStore(check_encodable=kind == "memory")
        return
    with tempfile.TemporaryDirectory() as directory:
        store = JsonlStore(os.path.join(directory, "log.jsonl"))
        try:
            yield store
        finally:
            store.close()
