"""OpenTelemetry spans by the GenAI conventions (engine.hosts.otel), through the SDK's in-memory
exporter: live from a session's records, and the same spans from its log afterwards."""

from __future__ import annotations

import asyncio
import functools
import json
from typing import Any

import pytest
import trio
from conftest import counting_clock
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from engine import Annotations, Session, ToolResult, text, tool
from engine.hosts.aio import Session as AioSession
from engine.hosts.otel import SpanBuilder, spans_from_records, trace_session
from engine.hosts.spantext import MODEL_FAILURES
from engine.models import (
    FauxModel,
    ModelError,
    ModelInfo,
    ModelMessage,
    faux_text,
    faux_tool_call,
)
from events import MemoryStore
from events.modelturns import ModelFailed, ModelRequested, ModelResponded, Usage
from events.types import ModelToolCall, Record, ToolCallRequested, ToolExecutionStarted

SAFE = Annotations(read_only=True, open_world=False)


def exporter() -> tuple[InMemorySpanExporter, TracerProvider]:
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    return spans, provider


@tool(input_schema={"type": "object"}, annotations=SAFE)
async def outer(call: Any, ctx: Any) -> ToolResult:
    """Calls inner, twice."""
    await ctx.execute_tool("inner", {"n": 1})
    await ctx.execute_tool("inner", {"n": 2})
    return ToolResult(content=[text("outer done")])


@tool(input_schema={"type": "object"}, annotations=SAFE)
async def inner(call: Any, ctx: Any) -> ToolResult:
    """A leaf."""
    return ToolResult(content=[text(f"inner {call.arguments['n']}")])


@tool(input_schema={"type": "object"}, annotations=SAFE, timeout=5)
async def slow(call: Any, ctx: Any) -> ToolResult:
    """Never finishes in time."""
    await trio.sleep_forever()
    raise AssertionError("unreachable")


@tool(input_schema={"type": "object"}, annotations=SAFE)
async def hang(call: Any, ctx: Any) -> ToolResult:
    """Waits until cancelled."""
    await trio.sleep_forever()
    raise AssertionError("unreachable")


def scene() -> FauxModel:
    return FauxModel([
        [faux_tool_call("outer", {"secret": "s3"}), faux_tool_call("slow", {})],
        faux_text("first done"),
        faux_tool_call("hang", {}),
        faux_text("never"),
    ])


async def run_scene(provider: TracerProvider, **options: Any) -> tuple[Any, ...]:
    """The scene, traced live: a prompt with a nested call and a timeout, then one cancelled
    while its tool hangs."""
    async with trio.open_nursery() as tracing:
        async with Session.open(MemoryStore(), model=scene(), tools=[outer, inner, slow, hang],
                                clock=counting_clock()) as session:
            tracing.start_soon(functools.partial(trace_session, session,
                                                 tracer_provider=provider, **options))
            await session.prompt("go")
            with trio.CancelScope() as scope:
                async with trio.open_nursery() as nursery:
                    start = len(session.records)

                    async def cancel_once_started() -> None:
                        async for record in session.follow(start):
                            if isinstance(record.event, ToolExecutionStarted):
                                scope.cancel()
                    nursery.start_soon(cancel_once_started)
                    await session.prompt("again")
            records = session.records
    return tuple(records)


def by_name(spans: Any) -> dict[str, ReadableSpan]:
    """The spans by name, chat spans left out (:func:`chats`)."""
    named = {}
    for span in spans:
        if span.name.startswith("chat "):
            continue
        key = span.name if span.name != "execute_tool inner" else (
            f"execute_tool inner {span.attributes['gen_ai.tool.call.id']}")
        key = key if key not in named else f"{key} 2"
        named[key] = span
    return named


def chats(spans: Any) -> list[ReadableSpan]:
    """The chat spans, in the order they started."""
    return sorted((span for span in spans if span.name.startswith("chat ")),
                  key=lambda span: span.start_time)


async def test_a_prompt_makes_an_invoke_agent_span_with_an_execute_tool_span_per_call(
    autojump_clock: Any,
) -> None:
    spans, provider = exporter()
    records = await run_scene(provider)
    named = by_name(spans.get_finished_spans())
    assert sorted(named) == ["execute_tool hang", "execute_tool inner 1.0/0",
                             "execute_tool inner 1.0/1", "execute_tool outer",
                             "execute_tool slow", "invoke_agent", "invoke_agent 2"]
    agent, outer_span = named["invoke_agent"], named["execute_tool outer"]
    # the prompt's span names the provider its turns asked
    assert agent.attributes == {"gen_ai.operation.name": "invoke_agent",
                                "gen_ai.conversation.id": records[0].session_id,
                                "gen_ai.provider.name": "faux"}
    # the provider's id of the call, as the model wrote it, and the engine's beside it
    asked = next(r.event for r in records if isinstance(r.event, ToolCallRequested)
                 and r.event.call_id == "1.0")
    assert asked.model_call_id is not None and asked.model_call_id != "1.0"
    assert outer_span.attributes == {
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "outer",
        "gen_ai.tool.call.id": asked.model_call_id, "toolledger.call.id": "1.0",
        "gen_ai.tool.type": "function", "gen_ai.tool.description": "Calls inner, twice."}
    assert outer_span.status.status_code is StatusCode.UNSET
    # a top-level call is a child of its prompt's span, a nested call of its parent call's
    assert outer_span.parent is not None and outer_span.parent.span_id == agent.context.span_id
    for nested in ("execute_tool inner 1.0/0", "execute_tool inner 1.0/1"):
        parent = named[nested].parent
        assert parent is not None and parent.span_id == outer_span.context.span_id
        assert named[nested].context.trace_id == agent.context.trace_id
    # spans start and end at their records' times
    times = {getattr(r.event, "call_id", None): r.time for r in records}
    assert outer_span.end_time == int(times["1.0"] * 1e9)
    assert agent.start_time == int(records[[type(r.event).__name__ for r in records].index(
        "UserMessage")].time * 1e9)
    assert [event.name for event in outer_span.events] == ["policy_decided",
                                                            "execution_started"]


async def test_each_model_turn_is_a_chat_span_under_its_prompts_span(
    autojump_clock: Any,
) -> None:
    spans, provider = exporter()
    records = await run_scene(provider)
    finished = spans.get_finished_spans()
    named, turns = by_name(finished), chats(finished)
    # two turns in the first prompt; the second prompt's first turn, then it was cancelled
    assert [span.name for span in turns] == ["chat faux"] * 3
    first, second = named["invoke_agent"], named["invoke_agent 2"]
    assert [span.parent.span_id for span in turns if span.parent] == [
        first.context.span_id, first.context.span_id, second.context.span_id]
    assert all(span.kind is SpanKind.CLIENT for span in turns)
    assert dict(turns[0].attributes or {}) == {
        "gen_ai.operation.name": "chat", "gen_ai.provider.name": "faux",
        "gen_ai.request.model": "faux", "gen_ai.conversation.id": records[0].session_id,
        "gen_ai.response.finish_reasons": ("stop",)}
    assert turns[0].status.status_code is StatusCode.UNSET
    # from the request's record to the answer's
    requested = [r.time for r in records if isinstance(r.event, ModelRequested)]
    responded = [r.time for r in records if isinstance(r.event, ModelResponded)]
    assert [span.start_time for span in turns] == [int(round(t * 1e9)) for t in requested]
    assert [span.end_time for span in turns] == [int(round(t * 1e9)) for t in responded]
    # the turn's span ends before its calls start
    assert (turns[0].end_time or 0) <= (named["execute_tool outer"].start_time or 0)


def usage_and_failure() -> FauxModel:
    """A turn that answers with its usage, then one the provider refuses (429), then the
    answer the host's resume got."""

    def rate_limited(request: Any) -> ModelMessage:
        raise ModelError("rate_limited", "Rate limit reached", status=429,
                         request_id="req_2")

    model = FauxModel([
        ModelMessage(tool_calls=[ModelToolCall(id="c1", name="inner", arguments={"n": 1})],
                     stop_reason="tool_calls", model="gpt-test-2025", response_id="resp_1",
                     usage=Usage(input_tokens=120, output_tokens=7, cached_tokens=100)),
        rate_limited,
        ModelMessage(text="done", model="gpt-test-2025", response_id="resp_3"),
    ])
    model.info = ModelInfo(provider="openai", model="gpt-test", api="chat", settings={
        "temperature": 0.2, "max_completion_tokens": 256, "stop": "END", "user": "u1"})
    return model


async def run_usage_and_failure(provider: TracerProvider) -> tuple[Record, ...]:
    async with trio.open_nursery() as tracing:
        async with Session.open(MemoryStore(), model=usage_and_failure(), tools=[inner],
                                clock=counting_clock()) as session:
            tracing.start_soon(functools.partial(trace_session, session,
                                                 tracer_provider=provider))
            with pytest.raises(ModelError):
                await session.prompt("go")
            await session.resume()
            return tuple(session.records)


async def test_a_chat_span_has_the_answers_model_id_and_usage(autojump_clock: Any) -> None:
    spans, provider = exporter()
    await run_usage_and_failure(provider)
    answered = chats(spans.get_finished_spans())[0]
    assert answered.name == "chat gpt-test"
    attributes = dict(answered.attributes or {})
    del attributes["gen_ai.conversation.id"]
    assert attributes == {
        "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-test", "gen_ai.request.temperature": 0.2,
        "gen_ai.request.max_tokens": 256, "gen_ai.request.stop_sequences": ("END",),
        "gen_ai.response.model": "gpt-test-2025", "gen_ai.response.id": "resp_1",
        "gen_ai.response.finish_reasons": ("tool_calls",),
        "gen_ai.usage.input_tokens": 120, "gen_ai.usage.output_tokens": 7,
        "gen_ai.usage.cache_read.input_tokens": 100}


async def test_a_failed_turn_is_a_chat_span_with_its_error_type(autojump_clock: Any) -> None:
    spans, provider = exporter()
    records = await run_usage_and_failure(provider)
    finished = spans.get_finished_spans()
    answered, failed, retried = chats(finished)
    assert failed.attributes["error.type"] == "rate_limited"  # type: ignore[index]
    assert failed.status.status_code is StatusCode.ERROR
    # our own wording: the provider's message is content (docs/hosts.md, "What a span carries")
    assert failed.status.description == MODEL_FAILURES["rate_limited"]
    assert "gen_ai.response.id" not in (failed.attributes or {})
    failed_at = next(r.time for r in records if isinstance(r.event, ModelFailed))
    assert failed.end_time == int(round(failed_at * 1e9))
    # the resumed turn asks again: its own span, under the same (paused, resumed) prompt
    assert retried.attributes["gen_ai.response.id"] == "resp_3"  # type: ignore[index]
    assert retried.status.status_code is StatusCode.UNSET
    agent = by_name(finished)["invoke_agent"]
    assert {span.parent.span_id for span in (answered, failed, retried) if span.parent} == {
        agent.context.span_id}

    later, later_provider = exporter()
    spans_from_records(records, later_provider.get_tracer("t"))
    assert shape(later.get_finished_spans()) == shape(finished)
    captured, captured_provider = exporter()
    spans_from_records(records, captured_provider.get_tracer("t"), capture_content=True)
    assert chats(captured.get_finished_spans())[1].status.description == "Rate limit reached"


async def test_a_timeout_and_a_cancellation_set_error_type_explicitly(
    autojump_clock: Any,
) -> None:
    spans, provider = exporter()
    await run_scene(provider)
    named = by_name(spans.get_finished_spans())
    timed_out, cancelled = named["execute_tool slow"], named["execute_tool hang"]
    assert timed_out.attributes["error.type"] == "timeout"  # type: ignore[index]
    assert timed_out.status.status_code is StatusCode.ERROR
    assert cancelled.attributes["error.type"] == "cancelled"  # type: ignore[index]
    assert cancelled.status.status_code is StatusCode.ERROR
    # the cancelled prompt's span ends when the session closes
    assert named["invoke_agent 2"].end_time == cancelled.end_time


async def test_arguments_and_results_are_recorded_only_when_opted_in(
    autojump_clock: Any,
) -> None:
    spans, provider = exporter()
    await run_scene(provider)
    assert not any("s3" in json.dumps(dict(span.attributes or {}))
                   for span in spans.get_finished_spans())

    spans, provider = exporter()
    await run_scene(provider, capture_content=True)
    outer_span = by_name(spans.get_finished_spans())["execute_tool outer"]
    attributes = dict(outer_span.attributes or {})
    assert attributes["gen_ai.tool.call.arguments"] == '{"secret":"s3"}'
    result = json.loads(str(attributes["gen_ai.tool.call.result"]))
    assert result["content"][0]["text"] == "outer done"


def shape(spans: Any) -> list[tuple[Any, ...]]:
    """What a span says, without its ids: name, times, attributes, events, parent's name."""
    names = {span.context.span_id: span.name for span in spans}
    return sorted((span.name, span.start_time, span.end_time, dict(span.attributes or {}),
                   [(e.name, e.timestamp) for e in span.events],
                   names.get(span.parent.span_id) if span.parent else None,
                   span.status.status_code) for span in spans)


async def test_the_spans_from_the_log_are_the_live_spans(autojump_clock: Any) -> None:
    live, provider = exporter()
    records = await run_scene(provider, capture_content=True)
    later, later_provider = exporter()
    spans_from_records(records, later_provider.get_tracer("t"), capture_content=True)
    assert shape(later.get_finished_spans()) == shape(live.get_finished_spans())


def test_records_before_tracing_began_make_no_span_unless_still_open() -> None:
    spans, provider = exporter()

    async def main() -> None:
        async with Session.open(MemoryStore(), model=FauxModel([
                faux_tool_call("inner", {"n": 1}), faux_text("one"), faux_text("two")]),
                tools=[inner], clock=counting_clock()) as session:
            await session.prompt("before")
            builder = SpanBuilder(provider.get_tracer("t"))
            history = session.records
            for record in history:
                builder.feed(record, emit=False)
            await session.prompt("after")
            for record in session.records[len(history):]:
                builder.feed(record)
            builder.close()

    trio.run(main)
    assert [span.name for span in spans.get_finished_spans()] == ["chat faux", "invoke_agent"]


def test_an_asyncio_host_traces_its_session_from_an_asyncio_task() -> None:
    spans, provider = exporter()

    async def main() -> None:
        async with AioSession.open(MemoryStore(), tools=[outer, inner], model=FauxModel(
                [faux_tool_call("outer", {}), faux_text("ok")])) as session:
            tracer = asyncio.create_task(trace_session(session, tracer_provider=provider))
            await session.prompt("go")
        await tracer

    asyncio.run(main())
    assert sorted(span.name for span in spans.get_finished_spans()) == [
        "chat faux", "chat faux", "execute_tool inner", "execute_tool inner",
        "execute_tool outer", "invoke_agent"]
