"""``toolledger export-otel``: a recorded session's spans, with their original times.

The spans are the ones :func:`engine.hosts.otel.trace_session` makes live, built by the same table
(:data:`engine.hosts.otel.SPAN_RULES`) from the log, each starting and ending at its records'
times: a session that ran before tracing was switched on can be traced after the fact. The
SDK makes them (the ``otel-export`` extra, which brings the OTLP exporter too): ``--json``
writes them to a file as the SDK's JSON, ``--otlp-endpoint`` sends them to a collector through
OTLP over HTTP, all in one request, and says whether the collector took them.
"""

from __future__ import annotations

import argparse
import json
import os
from typing import TYPE_CHECKING

from rich.console import Console
from rich.text import Text

from events.stores.modes import open_creating

from ..core.visible import visible
from ._common import (
    LOG_HELP,
    UsageError,
    counted,
    fold_sessions,
    read_sessions,
    refuse_writing_over,
)

if TYPE_CHECKING:
    from opentelemetry.sdk.trace.export import SpanExporter

__all__ = ["add_parser", "run"]


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Declare the command and its options."""
    export = commands.add_parser(
        "export-otel",
        help="the OpenTelemetry spans of the sessions of a log, at their recorded times",
        description=(
            "Build each session's spans from its records (invoke_agent per prompt, "
            "execute_tool per call, by the OpenTelemetry GenAI conventions), each with the "
            "start and end times its records carry, and write them to a JSON file or send "
            "them to an OTLP/HTTP endpoint. Text that tools, handlers, approvers and the "
            "model wrote (arguments, results, error messages, reasons) is left out unless "
            "--capture-content is given. The log is only read."
        ),
    )
    export.add_argument("log", metavar="LOG", help=LOG_HELP)
    export.add_argument("--session", metavar="ID",
                        help="only this session (its full id, or a prefix that names one)")
    target = export.add_mutually_exclusive_group(required=True)
    target.add_argument("--json", metavar="FILE", help="write the spans to FILE, as a JSON list")
    target.add_argument("--otlp-endpoint", metavar="URL",
                        help="send the spans to this OTLP/HTTP traces endpoint "
                             "(e.g. http://localhost:4318/v1/traces)")
    export.add_argument("--capture-content", action="store_true",
                        help="put on the spans the text others wrote: the calls' arguments "
                             "and results, error messages, block and refusal reasons")
    export.add_argument("--service-name", metavar="NAME", default="toolledger",
                        help="the service.name of the spans' resource (default: toolledger)")
    export.set_defaults(run=run)


def run(args: argparse.Namespace, console: Console) -> int:
    """Build the spans of the log's sessions and write or send them."""
    if args.json is not None:
        refuse_writing_over("--json", args.json, [args.log], output_is_log=False,
                            instead="write the spans to another file")
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
            InMemorySpanExporter,
        )

        from ..hosts.otel import SCOPE, SEMCONV_VERSION, spans_from_records
    except ImportError as exc:
        raise UsageError(f"export-otel needs OpenTelemetry's SDK ({exc}): install "
                         f"toolledger[otel-export]") from exc
    sessions = read_sessions(args.log, args.session)
    fold_sessions(args.log, sessions)  # an inconsistent log is refused, naming the record
    exporter = _otlp_exporter(args.otlp_endpoint) if args.otlp_endpoint is not None else None
    collected = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": args.service_name}))
    provider.add_span_processor(SimpleSpanProcessor(collected))
    tracer = provider.get_tracer(SCOPE, schema_url=f"https://opentelemetry.io/schemas/"
                                                   f"{SEMCONV_VERSION}")
    for records in sessions.values():
        spans_from_records(records, tracer, capture_content=args.capture_content)
    provider.shutdown()
    spans = collected.get_finished_spans()
    what = f"{counted(len(spans), 'span')} from {counted(len(sessions), 'session')}"
    if exporter is None:
        # spans may carry what the log holds: created owner-only, as a store creates a log
        fd = open_creating(args.json, os.O_WRONLY | os.O_TRUNC)
        with open(fd, "w", encoding="utf-8") as file:
            json.dump([json.loads(span.to_json(indent=None)) for span in spans], file, indent=1)
        console.print(Text(f"{what} written to {visible(args.json, newlines=False)}"),
                      soft_wrap=True)
        return 0
    where = visible(args.otlp_endpoint, newlines=False)
    try:
        result = exporter.export(spans)  # one request, retried by the exporter until its timeout
    finally:
        exporter.shutdown()
    if result is not SpanExportResult.SUCCESS:
        raise UsageError(f"{what} not exported to {where}: the collector could not be reached "
                         f"or refused them (the OTLP exporter logs why)")
    console.print(Text(f"{what} sent to {where}"), soft_wrap=True)
    return 0


def _otlp_exporter(endpoint: str) -> SpanExporter:
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    except ImportError as exc:
        raise UsageError(f"--otlp-endpoint needs OpenTelemetry's OTLP exporter ({exc}): "
                         f"install toolledger[otel-export] (or write the spans to a file with "
                         f"--json FILE)") from exc
    return OTLPSpanExporter(endpoint=endpoint)
