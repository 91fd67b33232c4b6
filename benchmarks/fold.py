"""Fold: rebuild a session's state, transcript and call tree from its JSONL log.

The log is written once per run by a real session (model calls, each of them making one nested
call, so the call tree has depth; a ``tool_call`` handler rewrites some arguments). The
figure decodes each stored line (JSON, the envelope and version checks, the event's strict
structuring) and folds the record into a fresh :class:`~engine.Projection` (the lifecycle
table checks each call event); the baseline is ``json.loads`` over the same lines. A second
figure reads the file through :class:`~events.JsonlStore` first (its index, ``pread``). A
third decodes with the converter alone (``decode_record(obj, fast=False)``: the codec without
its fast readers), against the first: what the readers in :mod:`events.fast.readers` pay for.
A fourth parses each line with the ``json`` module's scanner alone (``loads_reference``), against
the first: what msgspec's parser (:mod:`events.fast.parse`) pays for.
"""

from __future__ import annotations

import json
import os
import tempfile

import trio

from engine import (
    Annotations,
    Rewrite,
    Session,
    ToolCallDraft,
    ToolContext,
    ToolResult,
    approve_all,
    fold,
    text,
    tool,
)
from engine.core.tools import ToolCall
from events import JsonlStore, decode_line
from events.codec import decode_record, loads_strict
from events.jsontext import loads_reference

from .harness import Figure, Row, Settings, interleave, paired
from .workload import ARGS, ScriptModel, echo

__all__ = ["run", "write_log"]


@tool(annotations=Annotations(read_only=True))
async def relay(call: ToolCall, ctx: ToolContext) -> ToolResult:
    """Echo through a nested call."""
    outcome = await ctx.execute_tool("echo", ARGS)
    return ToolResult(content=(text(outcome.result.text),), structured_content={"n": 1})


def write_log(path: str, calls: int) -> str:
    """Run a session of ``calls`` model calls into a JSONL store at ``path``; its id."""

    def rewrite(draft: ToolCallDraft) -> Rewrite | None:
        if draft.name == "echo" and draft.call_id.endswith("7.0"):
            return Rewrite({"text": "rewritten"})
        return None

    async def main() -> None:
        with JsonlStore(path) as store:
            model = ScriptModel(calls, [("echo", ARGS), ("relay", {})])
            async with Session.open(store, model=model, tools=[echo, relay],
                                    approver=approve_all, session_id="fold", create=True,
                                    max_turns=calls + 1) as session:
                session.on_tool_call(rewrite)
                await session.prompt("go")

    trio.run(main)
    return "fold"


def run(settings: Settings) -> list[Row]:
    calls = settings.size(5_000, 300)
    clock = settings.clock
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "log.jsonl")
        session_id = write_log(path, calls)
        with open(path, "rb") as file:
            lines = file.readlines()
        events = len(lines)

        def loads() -> float:
            start = clock()
            for line in lines:
                json.loads(line)
            return events / (clock() - start)

        def decode_and_fold() -> float:
            start = clock()
            projection = fold(decode_line(line) for line in lines)
            projection.transcript, projection.calls  # noqa: B018 (what a reader asks for)
            elapsed = clock() - start
            assert projection.last_seq == events
            return events / elapsed

        def converter_alone() -> float:
            start = clock()
            projection = fold(decode_record(loads_strict(line), fast=False) for line in lines)
            projection.transcript, projection.calls  # noqa: B018
            elapsed = clock() - start
            assert projection.last_seq == events
            return events / elapsed

        def json_scanner() -> float:
            start = clock()
            projection = fold(decode_record(loads_reference(line)) for line in lines)
            projection.transcript, projection.calls  # noqa: B018
            elapsed = clock() - start
            assert projection.last_seq == events
            return events / elapsed

        def from_file() -> float:
            start = clock()
            with JsonlStore(path) as store:
                records = trio.run(store.read, session_id)
            projection = fold(records)
            elapsed = clock() - start
            assert projection.last_seq == events
            return events / elapsed

        decode_and_fold()  # warm up
        samples = interleave(settings.reps(), [decode_and_fold, loads, from_file,
                                               converter_alone, json_scanner])
    baseline = Figure(name="json.loads over the same lines", unit="events/s",
                      samples=tuple(samples[1]), better="higher")
    rows = []
    for name, values, target in (  # the file a user has first, then the lines in memory
        (f"open JsonlStore, read, fold {events:,} lines", samples[2], True),
        (f"fold {events:,} lines (decode + reduce)", samples[0], False),
    ):
        figure = Figure(name=name, unit="events/s", samples=tuple(values), better="higher")
        ratio = paired(figure, baseline, lambda a, b: a / b)
        rows.append(Row(group="fold", figure=figure, baseline=baseline,
                        comparison=f"{ratio:.2f}×",
                        target="≥ 1.0× json.loads (issue 28)" if target else "",
                        met=ratio >= 1.0 if target else None))
    fast = rows[1].figure
    alone = Figure(name="fold, events decoded by the converter alone", unit="events/s",
                   samples=tuple(samples[3]), better="higher")
    rows.append(Row(group="fold", figure=alone, baseline=fast,
                    comparison=f"{paired(alone, fast, lambda a, b: a / b):.2f}×",
                    note="without the fast readers (events/fast/readers.py)"))
    scanner = Figure(name="fold, lines parsed by json's scanner alone", unit="events/s",
                     samples=tuple(samples[4]), better="higher")
    rows.append(Row(group="fold", figure=scanner, baseline=fast,
                    comparison=f"{paired(scanner, fast, lambda a, b: a / b):.2f}×",
                    note="without msgspec's parser (events/fast/parse.py): the codec before "
                         "\"A compiled codec\""))
    return rows
