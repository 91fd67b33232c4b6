"""Streaming a tool's output: progress with content. Whoever watches (the session's progress
handlers, ``follow()``, a parent that listens) sees each chunk as the tool reports it, before
the call's result; the model reads only the result, so the transcript is what it would be
without the stream."""

from __future__ import annotations

from typing import Any

import pytest
import trio
from conftest import SESSION_ID, counting_clock, events_of
from hypothesis import given
from hypothesis import strategies as st
from tests.strategies import PROPERTY

from engine import Annotations, Session, ToolResult, approve_all, text, tool
from engine.core.limits import Limits
from engine.models import FauxModel, faux_text, faux_tool_call
from engine.testing.invariants import check_log
from events import MemoryStore
from events.codec import decode_record, encode_record
from events.results import EmbeddedResource, ImageContent, TextContent
from events.types import Record, ToolCallCompleted, ToolProgress

SAFE = Annotations(read_only=True, open_world=False)


def streaming(name: str, chunks: list[str], *, stream: bool = True) -> Any:
    """A tool that streams ``chunks`` (or, with ``stream=False``, reports nothing) and then
    returns them joined."""

    @tool(name=name, annotations=SAFE)
    async def body(call: Any, ctx: Any) -> ToolResult:
        for chunk in chunks:
            if stream:
                ctx.report_progress(content=[text(chunk)])
            await trio.lowlevel.checkpoint()
        return ToolResult(content=[text("".join(chunks))])

    return body


def streamed_text(updates: list[ToolProgress]) -> str:
    return "".join(block.text for update in updates for block in update.content
                   if isinstance(block, TextContent))


async def run(tools: list[Any], script: list[Any]) -> tuple[list[Record], list[Any], FauxModel]:
    """One prompt; the records, and what the host heard live (each update, then the call's
    terminal as it was followed)."""
    store, heard, model = MemoryStore(), [], FauxModel(script)

    async def follow(session: Session) -> None:
        async for record in session.follow():
            if isinstance(record.event, ToolCallCompleted):
                heard.append(("completed", record.event.call_id))

    async with trio.open_nursery() as nursery:
        async with Session.open(store, model=model, tools=tools, approver=approve_all,
                                session_id=SESSION_ID, create=True,
                                clock=counting_clock()) as session:
            session.on_progress(heard.append)
            nursery.start_soon(follow, session)
            await session.prompt("go")
    records = await store.read(SESSION_ID)
    check_log(records, closed=True)
    return records, heard, model


async def test_the_host_sees_each_chunk_as_it_comes_and_before_the_result() -> None:
    lines = ["collecting\n", "PASS test_mean\n", "FAIL test_sum\n"]
    records, heard, _ = await run([streaming("run", lines)],
                                  [faux_tool_call("run", {}), faux_text("done")])
    live = [u for u in heard if isinstance(u, ToolProgress)]
    assert [u.content for u in live] == [(text(line),) for line in lines]
    assert [u.message for u in live] == [None] * 3
    # the host heard every chunk before the record that ends the call was followed
    assert heard.index(("completed", "1.0")) > max(heard.index(u) for u in live)
    assert events_of(records, ToolProgress) == live


async def test_the_model_reads_the_result_only_the_transcript_is_as_without_the_stream(
) -> None:
    lines = ["one\n", "two\n"]
    script = [faux_tool_call("run", {}), faux_text("done")]
    streamed, _, model = await run([streaming("run", lines)], script)
    quiet, _, unstreamed = await run([streaming("run", lines, stream=False)], script)
    assert len(events_of(streamed, ToolProgress)) == 2 and not events_of(quiet, ToolProgress)
    assert [r.transcript for r in model.requests] == [r.transcript for r in unstreamed.requests]


async def test_a_parent_forwards_streamed_content_as_it_is_and_says_whose_it_was() -> None:
    @tool(annotations=SAFE)
    async def parent(call: Any, ctx: Any) -> ToolResult:
        await ctx.execute_tool("run", {}, on_progress=ctx.forward_progress)
        return ToolResult(content=[text("ok")])

    records, heard, _ = await run([parent, streaming("run", ["a\n", "b\n"])],
                                  [faux_tool_call("parent", {}), faux_text("done")])
    updates = events_of(records, ToolProgress)
    assert [(u.call_id, u.source, streamed_text([u])) for u in updates] == [
        ("1.0/0", None, "a\n"), ("1.0", "1.0/0", "a\n"),
        ("1.0/0", None, "b\n"), ("1.0", "1.0/0", "b\n")]


async def test_content_takes_a_string_for_one_text_block_and_any_content_block() -> None:
    image = ImageContent(data="iVBORw0KGgo=", mime_type="image/png")
    resource = {"uri": "file:///out.txt", "text": "whole"}

    @tool(annotations=SAFE)
    async def run(call: Any, ctx: Any) -> ToolResult:
        ctx.report_progress("shot", content=[image])
        ctx.report_progress(content="plain\n")
        ctx.report_progress("nothing streamed", content="")
        block = EmbeddedResource(resource=resource)
        ctx.report_progress(content=(block,))
        resource["text"] = "changed after it was reported"
        return ToolResult(content=[text("ok")])

    records, _ = await run_one(run)
    assert [(u.message, u.content) for u in events_of(records, ToolProgress)] == [
        ("shot", (image,)), (None, (text("plain\n"),)), ("nothing streamed", ()),
        (None, (EmbeddedResource(resource={"uri": "file:///out.txt", "text": "whole"}),))]


async def run_one(body: Any, **session: Any) -> tuple[list[Record], Any]:
    """``body`` called once by the host; the records, and the call's outcome."""
    store = MemoryStore()
    async with Session.open(store, tools=[body], approver=approve_all, session_id=SESSION_ID,
                            create=True, **session) as opened:
        outcome = await opened.call_tool(body.name, {})
    return await store.read(SESSION_ID), outcome


async def test_bad_content_is_refused_with_what_to_write_and_nothing_is_recorded() -> None:
    refused: list[str] = []

    @tool(annotations=SAFE)
    async def run(call: Any, ctx: Any) -> ToolResult:
        for bad in (["a line"], 42, [{"type": "text", "text": "x"}], "x" * 300,
                    [text("y" * 300)]):
            try:
                ctx.report_progress(content=bad)
            except (TypeError, ValueError) as exc:
                refused.append(f"{type(exc).__name__}: {exc}")
        ctx.report_progress(content="z" * 100)  # within the limit
        return ToolResult(content=[text("ok")])

    records, outcome = await run_one(run, limits=Limits(max_result_bytes=200))
    assert not outcome.is_error
    assert refused == [
        "TypeError: content[0] is a str, not a content block: use text('...'), ImageContent, "
        "AudioContent, ResourceLink or EmbeddedResource",
        "TypeError: report_progress(content=...) takes a string or a list of content blocks "
        "([text('...')]), not int",
        "TypeError: content[0] is a dict, not a content block: use text('...'), ImageContent, "
        "AudioContent, ResourceLink or EmbeddedResource",
        *["ValueError: progress content over the size limit of 200 bytes: stream it in "
          "smaller pieces, one update each"] * 2]
    assert [streamed_text([u]) for u in events_of(records, ToolProgress)] == ["z" * 100]


def test_an_update_that_streams_nothing_is_the_line_an_older_toolledger_wrote() -> None:
    quiet = Record(session_id="s", seq=1, time=0.0,
                   event=ToolProgress(call_id="1.0", message="m"))
    assert "content" not in encode_record(quiet)["data"]
    streamed = Record(session_id="s", seq=2, time=0.0,
                      event=ToolProgress(call_id="1.0", content=(text("out\n"),)))
    assert encode_record(streamed)["data"]["content"] == [{"type": "text", "text": "out\n"}]
    assert decode_record(encode_record(streamed)) == streamed


@PROPERTY
@given(chunks=st.lists(st.text(max_size=20), max_size=8), forward=st.booleans())
def test_content_chunks_concatenated_are_what_the_tool_streamed(chunks: list[str],
                                                                forward: bool) -> None:
    """Through the log (written and read back), the host's handler and a parent that
    listens, the chunks of one call join to exactly what its tool streamed."""

    @tool(annotations=SAFE)
    async def parent(call: Any, ctx: Any) -> ToolResult:
        await ctx.execute_tool("run", {},
                               on_progress=ctx.forward_progress if forward else heard.append)
        return ToolResult(content=[text("ok")])

    @tool(name="run", annotations=SAFE)
    async def run_(call: Any, ctx: Any) -> ToolResult:
        for chunk in chunks:
            ctx.report_progress(content=chunk)
        return ToolResult(content=[text("ok")])

    heard: list[ToolProgress] = []
    host: list[ToolProgress] = []

    async def main() -> list[Record]:
        store = MemoryStore()
        async with Session.open(store, tools=[parent, run_], approver=approve_all,
                                session_id=SESSION_ID, create=True) as session:
            session.on_progress(host.append)
            await session.call_tool("parent", {})
        return await store.read(SESSION_ID)

    records = [decode_record(encode_record(r)) for r in trio.run(main)]
    whole = "".join(chunks)
    own = [u for u in events_of(records, ToolProgress) if u.call_id == "h0/0"]
    assert streamed_text(own) == whole
    assert len(own) == len(chunks)  # one update a chunk, an empty one without content
    assert streamed_text([u for u in host if u.call_id == "h0/0"]) == whole
    if forward:
        assert streamed_text(events_of(records, ToolProgress, "h0")) == whole
    else:
        assert streamed_text(heard) == whole


@pytest.mark.parametrize("content", [(), [], ""])
async def test_no_content_is_an_update_without_any(content: Any) -> None:
    @tool(annotations=SAFE)
    async def run(call: Any, ctx: Any) -> ToolResult:
        ctx.report_progress("half", content=content)
        return ToolResult(content=[text("ok")])

    records, _ = await run_one(run)
    assert [u.content for u in events_of(records, ToolProgress)] == [()]


async def test_a_listener_that_changes_an_embedded_resource_changes_nothing_in_the_log() -> None:
    @tool(annotations=SAFE)
    async def run(call: Any, ctx: Any) -> ToolResult:
        ctx.report_progress(content=[EmbeddedResource(resource={"uri": "file:///a", "text": "a"})])
        return ToolResult(content=[text("ok")])

    def meddle(update: ToolProgress) -> None:
        for block in update.content:
            assert isinstance(block, EmbeddedResource)
            block.resource["text"] = "changed by a listener"

    store = MemoryStore()
    async with Session.open(store, tools=[run], approver=approve_all, session_id=SESSION_ID,
                            create=True) as session:
        session.on_progress(meddle)
        await session.call_tool("run", {}, on_progress=meddle)
        [kept] = events_of(session.records, ToolProgress)
    [stored] = events_of(await store.read(SESSION_ID), ToolProgress)
    for update in (kept, stored):
        assert update.content == (EmbeddedResource(resource={"uri": "file:///a", "text": "a"}),)
