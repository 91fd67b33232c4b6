"""Memory: bytes per recorded call, held by a live session and by a folded log.

Measured with :mod:`tracemalloc` (Python allocations only), after a full collection, as the
growth from a session that has just opened to the same session after ``n`` turns with one
``echo`` call each: what the session keeps of its records (their events and times), its state
(the call tree, the transcript), everything else it keeps, and what its store keeps. On a
:class:`~events.JsonlStore`, the README's, first, the store keeps nothing in memory but its
index; on :class:`~events.MemoryStore` ``()`` beside it, the store keeps the records
themselves. The model keeps nothing (:class:`~benchmarks.workload.ScriptModel`). The folded
figure is what a projection folded from the session's JSONL lines holds once the lines and the
records are dropped. The baseline is the size of the JSONL log itself, per call.
"""

from __future__ import annotations

import gc
import os
import tempfile
import tracemalloc

import trio

from engine import Session, approve_all, fold
from events import JsonlStore, decode_line
from events.stores import EventStore

from .harness import Figure, Row, Settings
from .workload import STORES, ScriptModel, StoreKind, echo, open_store

__all__ = ["run"]


def _traced() -> int:
    gc.collect()
    return tracemalloc.get_traced_memory()[0]


def live_session(calls: int, kind: StoreKind = "jsonl") -> float:
    """Bytes per call held by a live session (and its store) on a store of ``kind``."""
    grown: list[int] = []

    async def main(store: EventStore) -> None:
        async with Session.open(store, model=ScriptModel(calls), tools=[echo],
                                approver=approve_all, session_id="memory", create=True,
                                max_turns=calls + 1) as session:
            before = _traced()
            await session.prompt("go")
            grown.append(_traced() - before)

    with open_store(kind) as store:
        tracemalloc.start()
        try:
            trio.run(main, store)
        finally:
            tracemalloc.stop()
    return grown[0] / calls


def log_lines(calls: int) -> list[bytes]:
    """The JSONL lines of a session of ``calls`` echo calls."""
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "log.jsonl")

        async def main() -> None:
            with JsonlStore(path) as store:
                async with Session.open(store, model=ScriptModel(calls), tools=[echo],
                                        approver=approve_all, session_id="memory", create=True,
                                        max_turns=calls + 1) as session:
                    await session.prompt("go")

        trio.run(main)
        with open(path, "rb") as file:
            return file.readlines()


def folded(lines: list[bytes], calls: int) -> float:
    """Bytes per call held by a projection folded from ``lines``."""
    tracemalloc.start()
    try:
        before = _traced()
        projection = fold(decode_line(line) for line in lines)
        after = _traced()
    finally:
        tracemalloc.stop()
    assert projection.last_seq == len(lines)
    return (after - before) / calls


def run(settings: Settings) -> list[Row]:
    calls = settings.size(5_000, 300)
    reps = settings.reps(3, 1)
    lines = log_lines(calls)
    log = Figure(name="the JSONL log's bytes", unit="B/call",
                 samples=(sum(map(len, lines)) / calls,))
    live, on_memory = (
        Figure(name=f"live session, {STORES[kind]}, {calls:,} calls", unit="B/call",
               samples=tuple(live_session(calls, kind) for _ in range(reps)))
        for kind in ("jsonl", "memory"))
    fold_figure = Figure(name="projection folded from the log", unit="B/call",
                         samples=tuple(folded(lines, calls) for _ in range(reps)))
    return [
        Row(group="memory", figure=live, baseline=log,
            comparison=f"{live.median / log.median:.2f}×", target="≤ 2 KiB (2 048 B) per call",
            met=live.median <= 2048),
        Row(group="memory", figure=on_memory, baseline=log,
            comparison=f"{on_memory.median / log.median:.2f}×",
            note="the store keeps every record too"),
        Row(group="memory", figure=fold_figure, baseline=log,
            comparison=f"{fold_figure.median / log.median:.2f}×"),
    ]
