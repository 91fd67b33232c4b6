"""Size limits: oversized arguments or results end their call with a clear error and never
reach the log; the session goes on."""

from __future__ import annotations

from typing import Any

import pytest

from engine import Annotations, Limits, Rewrite, ToolResult, text, tool
from engine.limits import OVERSIZED, json_size
from engine.models import faux_text, faux_tool_call
from events.types import ToolCallFailed, ToolCallRequested

from conftest import run_session

SAFE = Annotations(read_only=True, open_world=False)
LIMITS = Limits(max_argument_bytes=1_000, max_result_bytes=2_000)
ANY_OBJECT: dict[str, Any] = {"type": "object"}


def make_tools(runs: list[str]) -> list[Any]:
    @tool(input_schema=ANY_OBJECT, annotations=SAFE)
    async def echo(call: Any, ctx: Any) -> ToolResult:
        runs.append(call.call_id)
        size = call.arguments.get("reply", 0)
        return ToolResult(content=[text("x" * size)])

    @tool(input_schema=ANY_OBJECT, annotations=SAFE)
    async def relay(call: Any, ctx: Any) -> ToolResult:
        outcome = await ctx.execute_tool("echo", {"blob": "y" * 5_000})
        return ToolResult(content=[text(outcome.result.text)],
                          structured_content={"nested_error": outcome.is_error})

    return [echo, relay]


def failure(records: list[Any], call_id: str) -> ToolCallFailed:
    [event] = [r.event for r in records
               if isinstance(r.event, ToolCallFailed) and r.event.call_id == call_id]
    return event


def biggest_record(records: list[Any]) -> int:
    from events.codec import encode_line
    return max(len(encode_line(r)) for r in records)


async def test_oversized_model_arguments_are_not_recorded_and_the_call_fails() -> None:
    runs: list[str] = []
    state, records, _ = await run_session(
        make_tools(runs),
        [[faux_tool_call("echo", {"blob": "z" * 50_000}), faux_tool_call("echo", {})],
         faux_text("after")],
        limits=LIMITS)
    assert runs == ["1.1"]  # the oversized call never ran; its sibling did
    end = failure(records, "1.0")
    assert end.kind == "too_large"
    assert "50011 bytes, over the limit of 1000" in end.message
    [requested] = [r.event for r in records
                   if isinstance(r.event, ToolCallRequested) and r.event.call_id == "1.0"]
    assert requested.arguments == {OVERSIZED: json_size({"blob": "z" * 50_000})}
    assert biggest_record(records) < 3_000  # nothing near 50 kB was written
    assert state.transcript[-1].text == "after"  # type: ignore[union-attr]


async def test_an_oversized_result_fails_its_call_and_is_not_kept() -> None:
    runs: list[str] = []
    state, records, _ = await run_session(
        make_tools(runs), [faux_tool_call("echo", {"reply": 10_000}), faux_text("after")],
        limits=LIMITS)
    end = failure(records, "1.0")
    assert end.kind == "too_large" and end.returned is None
    assert "10000 bytes, over the limit of 2000" in end.result.text
    assert biggest_record(records) < 3_000


async def test_oversized_nested_arguments_fail_the_nested_call_only() -> None:
    runs: list[str] = []
    state, records, _ = await run_session(
        make_tools(runs), [faux_tool_call("relay"), faux_text("after")], limits=LIMITS)
    assert failure(records, "1.0/0").kind == "too_large"
    assert state.calls["1.0"].status == "completed"
    assert state.calls["1.0"].result.structured_content == {"nested_error": True}  # type: ignore[union-attr]
    assert runs == []


async def test_a_rewrite_over_the_limit_blocks_the_call() -> None:
    runs: list[str] = []

    def inflate(event: Any) -> Any:
        return Rewrite({"blob": "w" * 5_000})

    state, records, _ = await run_session(
        make_tools(runs), [faux_tool_call("echo", {}), faux_text("after")],
        limits=LIMITS, on_tool_call=[inflate])
    assert state.calls["1.0"].status == "blocked"
    assert "over the size limit" in state.calls["1.0"].result.text  # type: ignore[union-attr]
    assert runs == []


@pytest.mark.parametrize("bad", [0, -1, 1.5])
def test_limits_must_be_positive_byte_counts(bad: Any) -> None:
    with pytest.raises(ValueError, match="positive number of bytes"):
        Limits(max_argument_bytes=bad)
