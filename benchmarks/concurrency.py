"""Concurrency: many sessions in one trio loop, against one long session; and what opening and
closing a session costs.

``sessions × calls`` sessions run at once in one nursery, each opened on one shared store (a
:class:`~events.JsonlStore`, the README's, first; the memory store as it comes beside it), with
its own session id and its own scripted model (``calls`` turns with one ``echo`` call each),
prompted once and closed. The baseline is one session of ``sessions × calls`` calls on the
same kind of store. Both figures are time per call, opening and closing the sessions
included. "open and close a session" is ``Session.open`` of a new session (its claim, its
first records written) and the end of its block, with no prompt, one session after another;
what the file adds is the claim (a byte of the log locked, see :mod:`events.stores.locks`),
and the floor under every store is the same on ``MemoryStore(check_encodable=False)``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial

import trio

from engine import Session, approve_all
from events.stores import EventStore

from .harness import Figure, Row, Settings, interleave, paired
from .workload import STORES, ScriptModel, StoreKind, echo, open_store

__all__ = ["run"]

US = 1e6


async def one_session(store: EventStore, session_id: str, calls: int) -> None:
    async with Session.open(store, model=ScriptModel(calls), tools=[echo], approver=approve_all,
                            session_id=session_id, create=True, max_turns=calls + 1) as session:
        result = await session.prompt("go")
    if result.turns != calls + 1:
        raise RuntimeError(f"session {session_id} ended with {result}")


def many(sessions: int, calls: int, kind: StoreKind = "jsonl",
         clock: Callable[[], float] = time.perf_counter) -> float:
    async def main(store: EventStore) -> float:
        start = clock()
        async with trio.open_nursery() as nursery:
            for index in range(sessions):
                nursery.start_soon(one_session, store, f"s{index}", calls)
        return clock() - start

    with open_store(kind) as store:
        return trio.run(main, store) / (sessions * calls) * US


def open_close(sessions: int, kind: StoreKind = "jsonl",
               clock: Callable[[], float] = time.perf_counter) -> float:
    """Microseconds to open a new session and close it, no prompt."""

    async def main(store: EventStore) -> float:
        model = ScriptModel(0)
        start = clock()
        for index in range(sessions):
            async with Session.open(store, model=model, tools=[echo], approver=approve_all,
                                    session_id=f"s{index}", create=True):
                pass
        return clock() - start

    with open_store(kind) as store:
        return trio.run(main, store) / sessions * US


def claim_release(sessions: int, clock: Callable[[], float] = time.perf_counter) -> float:
    """Microseconds to claim a session of a JSONL log and release it: the file lock that makes
    one process its owner (:meth:`~events.JsonlStore.claim`), and nothing else."""
    with open_store("jsonl") as store:
        start = clock()
        for index in range(sessions):
            store.claim(f"s{index}").release()
        return (clock() - start) / sessions * US


def run(settings: Settings) -> list[Row]:
    sessions = settings.size(1_000, 50)
    calls = 10
    many(10, calls)  # warm up
    clock = settings.clock
    kinds: tuple[StoreKind, ...] = ("jsonl", "memory")
    measures: list[Callable[[], float]] = []
    for kind in kinds:
        measures += [partial(many, sessions, calls, kind, clock),
                     partial(many, 1, sessions * calls, kind, clock),
                     partial(open_close, sessions, kind, clock)]
    samples = interleave(settings.reps(5, 2), [*measures, partial(claim_release, sessions, clock),
                                               partial(open_close, sessions, "unchecked", clock)])
    rows = []
    for index, kind in enumerate(kinds):
        ours, theirs, opening = samples[3 * index: 3 * index + 3]
        figure = Figure(name=f"{sessions:,} sessions × {calls} calls, one trio loop, "
                        f"{STORES[kind]}", unit="µs/call", samples=tuple(ours))
        baseline = Figure(name=f"1 session × {sessions * calls:,} calls, {STORES[kind]}",
                          unit="µs/call", samples=tuple(theirs))
        ratio = paired(figure, baseline, lambda a, b: a / b)
        rows.append(Row(group="concurrency", figure=figure, baseline=baseline,
                        comparison=f"{ratio:.2f}×"))
        opened = Figure(name=f"open and close a session, {STORES[kind]}", unit="µs/session",
                        samples=tuple(opening))
        rows.append(Row(group="concurrency", figure=opened,
                        target="≤ 100 µs" if kind == "jsonl" else "",
                        met=opened.median <= 100.0 if kind == "jsonl" else None))
        if kind == "jsonl":
            claimed = Figure(name="claim and release a session, JsonlStore", unit="µs/session",
                             samples=tuple(samples[-2]))
            rows.append(Row(group="concurrency", figure=claimed,
                            note="what owning a session of the file adds: a byte of the log "
                            "locked (OFD lock), or its lock file where there are none"))
    unchecked = Figure(name=f"open and close a session, {STORES['unchecked']}",
                       unit="µs/session", samples=tuple(samples[-1]))
    rows.append(Row(group="concurrency", figure=unchecked,
                    note="the floor under opening a session on any store: the engine's own "
                    "work, the session's first records kept but not encoded"))
    return rows
