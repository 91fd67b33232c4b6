"""Concurrency: many sessions in one trio loop, against one long session.

``sessions × calls`` sessions run at once in one nursery, each opened on one shared
:class:`~events.MemoryStore` (its own session id, its own scripted model: ``calls`` turns with
one ``echo`` call each), prompted once and closed. The baseline is one session of
``sessions × calls`` calls. Both figures are wall time per call, opening and closing the
sessions included.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import trio

from engine import Session, approve_all
from events import MemoryStore

from .harness import Figure, Row, Settings, interleave, paired
from .workload import ScriptModel, echo

__all__ = ["run"]

US = 1e6


async def one_session(store: MemoryStore, session_id: str, calls: int) -> None:
    async with Session.open(store, model=ScriptModel(calls), tools=[echo], approver=approve_all,
                            session_id=session_id, create=True, max_turns=calls + 1) as session:
        result = await session.prompt("go")
    if result.turns != calls + 1:
        raise RuntimeError(f"session {session_id} ended with {result}")


def many(sessions: int, calls: int, clock: Callable[[], float] = time.perf_counter) -> float:
    async def main() -> float:
        store = MemoryStore(check_encodable=False)
        start = clock()
        async with trio.open_nursery() as nursery:
            for index in range(sessions):
                nursery.start_soon(one_session, store, f"s{index}", calls)
        return clock() - start

    return trio.run(main) / (sessions * calls) * US


def run(settings: Settings) -> list[Row]:
    sessions = settings.size(1_000, 50)
    calls = 10
    many(10, calls)  # warm up
    clock = settings.clock
    ours, theirs = interleave(settings.reps(5, 2), [lambda: many(sessions, calls, clock),
                                                    lambda: many(1, sessions * calls, clock)])
    figure = Figure(name=f"{sessions:,} sessions × {calls} calls, one trio loop",
                    unit="µs/call", samples=tuple(ours))
    baseline = Figure(name=f"1 session × {sessions * calls:,} calls", unit="µs/call",
                      samples=tuple(theirs))
    ratio = paired(figure, baseline, lambda a, b: a / b)
    return [Row(group="concurrency", figure=figure, baseline=baseline,
                comparison=f"{ratio:.2f}×")]
