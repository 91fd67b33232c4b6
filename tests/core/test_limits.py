"""Size limits: oversized arguments or results end their call with a clear error and never
reach the log; the session goes on."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import run_session
from hypothesis import given
from hypothesis import strategies as st
from strategies import instances_of, json_values

from engine import Annotations, Limits, Rewrite, ToolResult, text, tool
from engine.core.limits import OVERSIZED, encoded_result_size, json_size, result_size
from engine.models import faux_text, faux_tool_call
from events.codec import encode_line
from events.results import (
    AudioContent,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
)
from events.types import Record, ToolCallCompleted, ToolCallFailed, ToolCallRequested

SAFE = Annotations(read_only=True, open_world=False)
# no artifacts: a result past max_result_bytes is past every limit
LIMITS = Limits(max_argument_bytes=1_000, max_result_bytes=2_000, max_artifact_bytes=2_000)
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
    return max(len(encode_line(r).encode()) for r in records)


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
    size = result_size(ToolResult(content=[text("x" * 10_000)]))
    assert f"{size} bytes, over the limit of 2000" in end.result.text
    assert end.detail is not None and end.detail.size == size
    assert biggest_record(records) < 3_000


BIG = "q" * 20_000

#: Results whose bulk is in a field other than a block's text or data: each is recorded
#: whole, so each counts.
BULKY_RESULTS = {
    "a resource link's description": ToolResult(content=[ResourceLink(
        uri="file:///a", name="a", description=BIG)]),
    "a resource link's title": ToolResult(content=[ResourceLink(uri="file:///a", name="a",
                                                                title=BIG)]),
    "a resource link's MIME type": ToolResult(content=[ResourceLink(
        uri="file:///a", name="a", mime_type=BIG)]),
    "an image's MIME type": ToolResult(content=[ImageContent(data="iVBO", mime_type=BIG)]),
    "an audio clip's MIME type": ToolResult(content=[AudioContent(data="UklG",
                                                                  mime_type=BIG)]),
    "the text of non-ASCII characters, escaped": ToolResult(content=[text("\u2603" * 1_500)]),
    "the JSON text block structured content gets": ToolResult(
        structured_content={"blob": "b" * 1_200}),
    "an embedded resource's fields": ToolResult(content=[EmbeddedResource(
        resource={"uri": "file:///a", "text": "t", "extra": BIG})]),
}


@pytest.mark.parametrize("bulky", BULKY_RESULTS, ids=list(BULKY_RESULTS))
async def test_every_field_a_result_records_counts_towards_the_limit(bulky: str) -> None:
    returned = BULKY_RESULTS[bulky]

    @tool(input_schema=ANY_OBJECT, annotations=SAFE)
    async def bulky_tool(call: Any, ctx: Any) -> ToolResult:
        return returned

    state, records, _ = await run_session([bulky_tool],
                                          [faux_tool_call("bulky_tool"), faux_text("after")],
                                          limits=LIMITS)
    end = failure(records, "1.0")
    assert end.kind == "too_large" and end.returned is None
    assert end.detail is not None and end.detail.size is not None and end.detail.size > 2_000
    assert biggest_record(records) < 3_000  # the log did not take it
    assert state.transcript[-1].text == "after"  # type: ignore[union-attr]


def _completed(result: ToolResult) -> bytes:
    event = ToolCallCompleted(call_id="1.0", result=result)
    return encode_line(Record(session_id="s", seq=1, time=0.0, event=event)).encode()


@given(instances_of(ToolResult))
def test_the_counted_size_bounds_the_bytes_a_result_adds_to_its_record(
    result: ToolResult,
) -> None:
    # whatever fields a result has (a field added tomorrow is drawn too), the bytes it adds
    # to the record that keeps it are no more than the size the limit counts
    empty = ToolResult()
    grown = len(_completed(result)) - len(_completed(empty))
    assert grown <= result_size(result) - result_size(empty)


# text blocks only, the results the arithmetic measures (any text, escapes included)
TEXT_RESULTS = st.builds(
    ToolResult,
    content=st.lists(st.builds(TextContent, text=st.text()), max_size=4).map(tuple),
    structured_content=json_values,
    is_error=st.booleans(),
)


@given(TEXT_RESULTS | instances_of(ToolResult))
def test_the_size_is_the_encoded_forms_whichever_way_it_is_measured(result: ToolResult) -> None:
    # a result of text blocks is measured by arithmetic, any other by encoding it: both give
    # the size of the form the codec writes
    assert result_size(result) == encoded_result_size(result)


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


async def test_a_progress_message_counts_its_bytes_not_its_characters() -> None:
    refused: list[str] = []

    @tool(input_schema=ANY_OBJECT, annotations=SAFE)
    async def chatty(call: Any, ctx: Any) -> ToolResult:
        try:
            ctx.report_progress("\u2603" * 1_500)  # 1 500 characters, 4 500 bytes of UTF-8
        except ValueError as exc:
            refused.append(str(exc))
        return ToolResult(content=[text("done")])

    state, records, _ = await run_session([chatty], [faux_tool_call("chatty"), faux_text("ok")],
                                          limits=LIMITS)
    assert refused and "limit of 2000 bytes" in refused[0]
    assert biggest_record(records) < 3_000
