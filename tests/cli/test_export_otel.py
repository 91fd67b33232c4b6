"""``toolledger export-otel``: a recorded session's spans, with the times its records carry,
written as JSON by the SDK or sent to a loopback OTLP/HTTP collector, which receives the same
spans; a collector that is not there is a failure, said as one."""

from __future__ import annotations

import json
import os
import socket
import stat
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest
import trio
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status
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


class Collector(HTTPServer):
    """An OTLP/HTTP traces endpoint on loopback, keeping each request it decodes."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), CollectorHandler)
        self.requests: list[ExportTraceServiceRequest] = []
        self.status = 200

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1/traces"


class CollectorHandler(BaseHTTPRequestHandler):
    server: Collector

    def do_POST(self) -> None:  # noqa: N802 (the name http.server calls)
        assert self.path == "/v1/traces"
        assert self.headers["Content-Type"] == "application/x-protobuf"
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.requests.append(ExportTraceServiceRequest.FromString(body))
        answer = ExportTraceServiceResponse().SerializeToString()
        self.send_response(self.server.status)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def collector() -> Iterator[Collector]:
    server = Collector()
    thread = threading.Thread(target=server.serve_forever)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        thread.join()
        server.server_close()


def _value(value: AnyValue) -> Any:
    if value.HasField("array_value"):
        return [_value(item) for item in value.array_value.values]
    return getattr(value, value.WhichOneof("value"))


def _from_otlp(request: ExportTraceServiceRequest) -> list[dict[str, Any]]:
    """The received spans in the shape of the ``--json`` file, ids and all, times in ns."""
    spans = []
    for resource_spans in request.resource_spans:
        resource = {item.key: _value(item.value) for item in resource_spans.resource.attributes}
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                spans.append({
                    "name": span.name,
                    "scope": scope_spans.scope.name,
                    "span_id": "0x" + span.span_id.hex(),
                    "trace_id": "0x" + span.trace_id.hex(),
                    "parent_id": "0x" + span.parent_span_id.hex() if span.parent_span_id else None,
                    "kind": "SpanKind." + Span.SpanKind.Name(span.kind).removeprefix("SPAN_KIND_"),
                    "start": span.start_time_unix_nano,
                    "end": span.end_time_unix_nano,
                    "attributes": {item.key: _value(item.value) for item in span.attributes},
                    "events": [(event.name, event.time_unix_nano) for event in span.events],
                    "status": Status.StatusCode.Name(span.status.code).removeprefix(
                        "STATUS_CODE_"),
                    "service": resource["service.name"],
                })
    return spans


def _comparable(spans: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """Each span with its parent named by (name, start), not by its random id."""
    by_id = {span["span_id"]: (span["name"], span["start"]) for span in spans}
    return sorted((span["name"], span["kind"], span["start"], span["end"],
                   by_id.get(span["parent_id"]), json.dumps(span["attributes"], sort_keys=True),
                   span["events"], span["status"], span["service"]) for span in spans)


def test_otlp_sends_the_spans_the_json_file_holds(
    log: Path, tmp_path: Path, collector: Collector, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "spans.json"
    assert main(["export-otel", str(log), "--json", str(out)]) == 0
    capsys.readouterr()
    assert main(["export-otel", str(log), "--otlp-endpoint", collector.url]) == 0
    assert f"6 spans from 1 session sent to {collector.url}" in capsys.readouterr().out

    [request] = collector.requests  # all the spans in one request
    received = _from_otlp(request)
    written = [{
        "name": span["name"],
        "scope": "toolledger",
        "span_id": span["context"]["span_id"],
        "trace_id": span["context"]["trace_id"],
        "parent_id": span["parent_id"],
        "kind": span["kind"],
        "start": span["start_time"],
        "end": span["end_time"],
        "attributes": span["attributes"],
        "events": [(event["name"], event["timestamp"]) for event in span["events"]],
        "status": span["status"]["status_code"],
        "service": span["resource"]["attributes"]["service.name"],
    } for span in json.loads(out.read_text())]
    as_iso = [{**span, "start": ns_to_iso_str(span["start"]), "end": ns_to_iso_str(span["end"]),
               "events": [(name, ns_to_iso_str(time)) for name, time in span["events"]]}
              for span in received]
    assert _comparable(as_iso) == _comparable(written)
    assert {span["scope"] for span in received} == {"toolledger"}
    assert len({span["trace_id"] for span in received}) == 1  # the session's one trace

    # the times are the records' own, to the nanosecond
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    spans = {span["name"]: span for span in received}
    user = next(line for line in lines if line["type"] == "user_message")
    assert spans["invoke_agent"]["start"] == int(round(user["time"] * 1e9))
    requested = [int(round(line["time"] * 1e9)) for line in lines
                 if line["type"] == "model_requested"]
    assert sorted(span["start"] for span in received if span["name"] == "chat faux") == requested
    assert spans["execute_tool slow"]["attributes"]["error.type"] == "timeout"
    assert spans["execute_tool outer"]["attributes"]["gen_ai.operation.name"] == "execute_tool"
    assert spans["execute_tool inner"]["parent_id"] == spans["execute_tool outer"]["span_id"]


def test_a_collector_that_is_not_there_fails_the_command(
    log: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as closed:  # a port that was just free, with nothing listening
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    # the exporter retries a refused connection with backoff until its timeout; one short
    # enough that no backoff fits in it makes this a single attempt
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "0.5")
    url = f"http://127.0.0.1:{port}/v1/traces"
    assert main(["export-otel", str(log), "--otlp-endpoint", url]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert f"6 spans from 1 session not exported to {url}: the collector could not be " \
           "reached or refused them" in captured.err


def test_a_collector_that_refuses_the_spans_fails_the_command(
    log: Path, collector: Collector, capsys: pytest.CaptureFixture[str]
) -> None:
    collector.status = 400  # a status the exporter does not retry
    assert main(["export-otel", str(log), "--otlp-endpoint", collector.url]) == 1
    assert len(collector.requests) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert f"6 spans from 1 session not exported to {collector.url}" in captured.err


def test_otlp_without_its_exporter_package_says_what_to_install(
    log: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.http.trace_exporter",
                        None)
    assert main(["export-otel", str(log), "--otlp-endpoint", "http://127.0.0.1:4318"]) == 1
    err = capsys.readouterr().err
    assert "needs OpenTelemetry's OTLP exporter" in err
    assert "install toolledger[otel-export]" in err


def test_an_unknown_session_is_a_usage_error(
    log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["export-otel", str(log), "--session", "nope", "--json",
                 str(tmp_path / "x.json")]) == 1
    assert "'nope' is not a session in it" in capsys.readouterr().err


@pytest.mark.parametrize("umask", [0o022, 0o000])
def test_the_json_file_is_created_owner_only_as_a_log_is(
    log: Path, tmp_path: Path, umask: int
) -> None:
    """Spans may carry what the log holds (with --capture-content, all of it): the file they
    are written to is created as a store creates a log, 0600 whatever the umask."""
    out = tmp_path / "spans.json"
    old = os.umask(umask)
    try:
        assert main(["export-otel", str(log), "--json", str(out), "--capture-content"]) == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE(out.stat().st_mode) == 0o600


def test_an_existing_json_file_keeps_its_mode(log: Path, tmp_path: Path) -> None:
    out = tmp_path / "spans.json"
    out.write_text("[]")
    out.chmod(0o640)
    assert main(["export-otel", str(log), "--json", str(out)]) == 0
    assert stat.S_IMODE(out.stat().st_mode) == 0o640
    assert json.loads(out.read_text())  # written over, not appended to
