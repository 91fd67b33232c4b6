"""What a span may carry: no text a tool, handler, approver or model wrote, unless content
capture is on. A secret put in each place such text can come from (a tool's exception, its
error result, a handler's block reason and exception, an approver's refusal, a result
handler's exception, a provider's error, an unknown tool's name, the arguments) is on no
span's name, attribute, event or status by default, live or rebuilt from the log, and is on
its call's span with ``capture_content=True``."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any, get_args

import pytest
import trio
from conftest import counting_clock
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from engine import (
    Annotations,
    ApprovalAnswer,
    ApprovalRequest,
    Block,
    Session,
    ToolCallDraft,
    ToolResult,
    ToolResultDraft,
    text,
    tool,
)
from engine.cli import main
from engine.hosts.otel import spans_from_records, trace_session
from engine.hosts.spantext import CALL_FAILURES, MODEL_FAILURES, said_by_default
from engine.models import FauxModel, ModelError, faux_text, faux_tool_call
from events import JsonlStore, MemoryStore
from events.modelturns import ModelFailureKind
from events.types import FailureKind, Record

SAFE = Annotations(read_only=True, open_world=False)

#: One secret per place a span could pick text up from.
SECRETS = {place: f"sekrit-{place}-4f9c" for place in (
    "raise", "result", "block", "handler", "refuse", "result_handler", "model", "name",
    "argument", "progress")}


@tool(input_schema={"type": "object"}, annotations=SAFE)
async def leaky(call: Any, ctx: Any) -> ToolResult:
    """Raises with a secret in its message."""
    ctx.report_progress(f"reading {SECRETS['progress']}")
    raise ValueError(f"bad token {SECRETS['raise']}")


@tool(input_schema={"type": "object"}, annotations=SAFE)
async def erring(call: Any, ctx: Any) -> ToolResult:
    """Returns an error result with a secret in its text."""
    return ToolResult(content=[text(f"refused: {SECRETS['result']}")], is_error=True)


@tool(input_schema={"type": "object"}, annotations=SAFE)
async def guarded(call: Any, ctx: Any) -> ToolResult:
    """A handler blocks it."""
    raise AssertionError("blocked before it runs")


@tool(input_schema={"type": "object"}, annotations=SAFE)
async def fenced(call: Any, ctx: Any) -> ToolResult:
    """A handler raises about it (which blocks it)."""
    raise AssertionError("blocked before it runs")


@tool(input_schema={"type": "object"})
async def risky(call: Any, ctx: Any) -> ToolResult:
    """Dangerous by default: the approver refuses it."""
    raise AssertionError("refused before it runs")


@tool(input_schema={"type": "object"}, annotations=SAFE)
async def patched(call: Any, ctx: Any) -> ToolResult:
    """Its result handler raises."""
    return ToolResult(content=[text("fine")])


@tool(input_schema={"type": "object", "properties": {"n": {"type": "integer"}}},
      annotations=SAFE)
async def typed(call: Any, ctx: Any) -> ToolResult:
    """Takes a number; is given a secret."""
    raise AssertionError("invalid arguments never run")


TOOLS = [leaky, erring, guarded, fenced, risky, patched, typed]


def gate(draft: ToolCallDraft) -> Block | None:
    if draft.name == "guarded":
        return Block(f"not with {SECRETS['block']}")
    if draft.name == "fenced":
        raise RuntimeError(f"the gate broke on {SECRETS['handler']}")
    return None


def result_gate(draft: ToolResultDraft) -> None:
    raise RuntimeError(f"cannot patch {SECRETS['result_handler']}")


async def approver(request: ApprovalRequest) -> ApprovalAnswer:
    return ApprovalAnswer(granted=False, reason=f"never with {SECRETS['refuse']}")


def script() -> FauxModel:
    def provider_error(request: Any) -> Any:
        raise ModelError("server_error", f"upstream said {SECRETS['model']}", status=500)

    return FauxModel([
        [faux_tool_call("leaky", {}), faux_tool_call("erring", {}),
         faux_tool_call("guarded", {}), faux_tool_call("fenced", {}),
         faux_tool_call("risky", {}), faux_tool_call("patched", {}),
         faux_tool_call("typed", {"n": SECRETS["argument"]}),
         faux_tool_call(f"ghost-{SECRETS['name']}", {})],
        provider_error,
        faux_text("done"),
    ])


async def run_session(store: Any, provider: TracerProvider | None = None,
                      **options: Any) -> list[Record]:
    """The script: one batch of calls that each end with someone else's text, a turn the
    provider fails, and the answer ``resume()`` gets; traced live if ``provider`` is given."""
    async with trio.open_nursery() as tracing:
        async with Session.open(store, model=script(), tools=TOOLS, approver=approver,
                                session_id="s1", create=True,
                                clock=counting_clock()) as session:
            session.on_tool_call(gate)
            session.on_tool_result(result_gate)
            if provider is not None:
                tracing.start_soon(functools.partial(trace_session, session,
                                                     tracer_provider=provider, **options))
            with pytest.raises(ModelError):
                await session.prompt("go")
            await session.resume()
            records = list(session.records)
    return records


def exporter() -> tuple[InMemorySpanExporter, TracerProvider]:
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    return spans, provider


def found(spans: Any) -> set[str]:
    """The places whose secret some span carries, anywhere: name, attributes, events (names
    and attributes), status, links, resource."""
    everything = "\n".join(span.to_json() for span in spans)
    return {place for place, secret in SECRETS.items() if secret in everything}


def calls(spans: Any) -> dict[str, ReadableSpan]:
    return {str(span.attributes["toolledger.call.id"]): span
            for span in spans if span.attributes.get("gen_ai.operation.name") == "execute_tool"}


async def test_by_default_no_span_carries_text_someone_else_wrote(autojump_clock: Any) -> None:
    live, provider = exporter()
    records = await run_session(MemoryStore(), provider)
    assert {type(r.event).__name__ for r in records} >= {
        "ToolCallFailed", "ToolCallCompleted", "ToolCallBlocked", "ToolCallDenied",
        "ResultHandlerFailed", "ModelFailed", "ToolProgress"}
    assert all(secret in json.dumps([repr(r) for r in records])
               for secret in SECRETS.values())  # the log holds every one of them
    assert found(live.get_finished_spans()) == set()
    later, later_provider = exporter()
    spans_from_records(records, later_provider.get_tracer("t"))
    assert found(later.get_finished_spans()) == set()

    # what they carry instead: the error's type and fixed wording
    by_call = calls(live.get_finished_spans())
    raised = by_call["1.0"]
    assert raised.attributes["error.type"] == "ValueError"  # type: ignore[index]
    assert raised.status.status_code is StatusCode.ERROR
    assert raised.status.description == CALL_FAILURES["raised"]
    for call_id, error_type in (("1.1", "tool_error"), ("1.2", "blocked"), ("1.3", "blocked"),
                                ("1.4", "denied"), ("1.6", "invalid_arguments"),
                                ("1.7", "unavailable")):
        span = by_call[call_id]
        assert span.attributes["error.type"] == error_type  # type: ignore[index]
        assert span.status.description == said_by_default(
            next(r.event for r in records if getattr(r.event, "call_id", None) == call_id
                 and type(r.event).__name__.startswith("ToolCall")
                 and type(r.event).__name__ not in ("ToolCallRequested", "ToolCallRewritten")))
    assert by_call["1.7"].name == "execute_tool"
    assert "gen_ai.tool.name" not in (by_call["1.7"].attributes or {})
    [handler_failed] = [event for event in by_call["1.5"].events
                        if event.name == "result_handler_failed"]
    assert handler_failed.attributes == {"handler": "result_gate",
                                         "exception.type": "RuntimeError"}


async def test_content_capture_puts_the_text_on_its_calls_span(autojump_clock: Any) -> None:
    live, provider = exporter()
    records = await run_session(MemoryStore(), provider, capture_content=True)
    spans = live.get_finished_spans()
    assert found(spans) == set(SECRETS) - {"progress"}  # progress makes no span
    by_call = calls(spans)
    assert SECRETS["raise"] in str(by_call["1.0"].status.description)
    assert SECRETS["result"] in str(by_call["1.1"].attributes["gen_ai.tool.call.result"])
    assert SECRETS["block"] in str(by_call["1.2"].status.description)
    assert SECRETS["handler"] in str(by_call["1.3"].status.description)
    assert SECRETS["refuse"] in str(by_call["1.4"].status.description)
    [handler_failed] = [event for event in by_call["1.5"].events
                        if event.name == "result_handler_failed"]
    assert SECRETS["result_handler"] in str(handler_failed.attributes)
    assert SECRETS["argument"] in str(by_call["1.6"].attributes["gen_ai.tool.call.arguments"])
    assert by_call["1.7"].name == f"execute_tool ghost-{SECRETS['name']}"
    [failed_turn] = [span for span in spans
                     if span.name.startswith("chat ") and span.status.status_code is
                     StatusCode.ERROR]
    assert SECRETS["model"] in str(failed_turn.status.description)

    later, later_provider = exporter()
    spans_from_records(records, later_provider.get_tracer("t"), capture_content=True)
    assert found(later.get_finished_spans()) == found(spans)


def test_export_otel_leaves_the_text_out_unless_asked(tmp_path: Path,
                                                      autojump_clock: Any) -> None:
    log, out = tmp_path / "session.jsonl", tmp_path / "spans.json"

    async def record() -> None:
        store = JsonlStore(log)
        await run_session(store)
        store.close()

    trio.run(record, clock=autojump_clock)
    assert main(["export-otel", str(log), "--json", str(out)]) == 0
    assert not any(secret in out.read_text() for secret in SECRETS.values())
    assert main(["export-otel", str(log), "--json", str(out), "--capture-content"]) == 0
    assert SECRETS["raise"] in out.read_text()


def test_every_kind_of_failure_has_its_own_wording() -> None:
    assert set(CALL_FAILURES) == set(get_args(FailureKind))
    assert set(MODEL_FAILURES) == set(get_args(ModelFailureKind))
    assert len(set(CALL_FAILURES.values())) == len(CALL_FAILURES)
