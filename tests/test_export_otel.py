"""``toolledger export-otel``: a recorded session's spans, with the times its records carry,
written as JSON by the SDK; OTLP needs an exporter package, and says so."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
from opentelemetry.sdk.util import ns_to_iso_str

from conftest import counting_clock
from engine import Annotations, Session, ToolResult, text, tool
from engine.cli import main
from engine.models import FauxModel, faux_text, faux_tool_call
from events import JsonlStore

SAFE = Annotations(read_only=True, open_world=False)


@tool(input_schema={"type": "object"}, annotations=SAFE)
async def outer(call: Any, ctx: Any) -> ToolResult:
    """Calls inner."""
    await ctx.execute_tool("inner", {"n": 1})
    return ToolResult(content=[text("done")])


@tool(input_schema={"type": "object"}, annotations=SAFE)
async def inner(call: Any, ctx: Any) -> ToolResult:
    """A leaf."""
    return ToolResult(content=[text("leaf")])


@tool(input_schema={"type": "object"}, annotations=SAFE, timeout=1)
async def slow(call: Any, ctx: Any) -> ToolResult:
    """Too slow."""
    await trio.sleep_forever()
    raise AssertionError("unreachable")


@pytest.fixture
def log(tmp_path: Path, autojump_clock: Any) -> Path:
    path = tmp_path / "session.jsonl"

    async def record() -> None:
        store = JsonlStore(path)
        async with Session.open(store, session_id="s1", create=True, clock=counting_clock(),
                                tools=[outer, inner, slow], model=FauxModel([
                                    [faux_tool_call("outer", {"secret": "x"}),
                                     faux_tool_call("slow", {})],
                                    faux_text("ok")])) as session:
            await session.prompt("go")
        store.close()

    trio.run(record, clock=autojump_clock)
    return path


def test_the_json_file_holds_the_sessions_spans_at_their_recorded_times(
    log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "spans.json"
    assert main(["export-otel", str(log), "--json", str(out)]) == 0
    assert "6 spans from 1 session written to" in capsys.readouterr().out
    everything = json.loads(out.read_text())
    spans = {span["name"]: span for span in everything}
    assert sorted(spans) == ["chat faux", "execute_tool inner", "execute_tool outer",
                             "execute_tool slow", "invoke_agent"]
    agent, outer_span = spans["invoke_agent"], spans["execute_tool outer"]
    assert outer_span["parent_id"] == agent["context"]["span_id"]
    assert spans["execute_tool inner"]["parent_id"] == outer_span["context"]["span_id"]
    assert spans["execute_tool slow"]["attributes"]["error.type"] == "timeout"
    assert spans["execute_tool slow"]["status"]["status_code"] == "ERROR"
    assert agent["resource"]["attributes"]["service.name"] == "toolledger"
    assert "gen_ai.tool.call.arguments" not in outer_span["attributes"]

    lines = [json.loads(line) for line in log.read_text().splitlines()]
    user = next(line for line in lines if line["type"] == "user_message")
    failed = next(line for line in lines if line["type"] == "tool_call_failed")
    assert agent["start_time"] == ns_to_iso_str(int(round(user["time"] * 1e9)))
    assert spans["execute_tool slow"]["end_time"] == ns_to_iso_str(
        int(round(failed["time"] * 1e9)))

    # a chat span per model turn, under the prompt's span, from its request to its answer
    turns = sorted((span for span in everything if span["name"] == "chat faux"),
                   key=lambda span: span["start_time"])
    assert [turn["parent_id"] for turn in turns] == [agent["context"]["span_id"]] * 2
    assert turns[0]["kind"] == "SpanKind.CLIENT"
    assert turns[0]["attributes"]["gen_ai.operation.name"] == "chat"
    assert turns[0]["attributes"]["gen_ai.provider.name"] == "faux"
    assert turns[0]["attributes"]["gen_ai.response.finish_reasons"] == ["stop"]
    requested = [line["time"] for line in lines if line["type"] == "model_requested"]
    responded = [line["time"] for line in lines if line["type"] == "model_responded"]
    assert [turn["start_time"] for turn in turns] == [
        ns_to_iso_str(int(round(time * 1e9))) for time in requested]
    assert [turn["end_time"] for turn in turns] == [
        ns_to_iso_str(int(round(time * 1e9))) for time in responded]


def test_capture_content_puts_arguments_on_the_spans(log: Path, tmp_path: Path) -> None:
    out = tmp_path / "spans.json"
    assert main(["export-otel", str(log), "--session", "s1", "--capture-content",
                 "--json", str(out)]) == 0
    spans = {span["name"]: span for span in json.loads(out.read_text())}
    assert spans["execute_tool outer"]["attributes"]["gen_ai.tool.call.arguments"] == (
        '{"secret":"x"}')


def test_otlp_without_its_exporter_package_says_what_to_install(
    log: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.http.trace_exporter",
                        None)
    assert main(["export-otel", str(log), "--otlp-endpoint", "http://127.0.0.1:4318"]) == 1
    assert "install opentelemetry-exporter-otlp-proto-http" in capsys.readouterr().err


def test_an_unknown_session_is_a_usage_error(
    log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["export-otel", str(log), "--session", "nope", "--json",
                 str(tmp_path / "x.json")]) == 1
    assert "'nope' is not a session in it" in capsys.readouterr().err
