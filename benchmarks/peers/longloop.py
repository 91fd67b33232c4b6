"""The long agent loop as an outside harness times it: whole runs, differences of lengths.

An outside harness does not stamp the model's first and last answers (as
:mod:`benchmarks.loop` does): it times one ``trio.run`` of a whole session of ``K`` calls
(opened, prompted, closed) and of an empty one, and takes ``(run(K) − run(0)) / K`` per call.
That is what a user who times a long session from outside sees, opening, closing and
deallocating included, on the store the session was given; the sizes are the issue's, 200 and
20 000 calls (20 and 2 000 with ``--quick``), on ``MemoryStore()`` and on the README's
``JsonlStore``, with the scripted :class:`~engine.models.FauxModel` (which keeps every request
it gets, as in tests).

Beside each figure, the time CPython's cyclic collector took in the same runs
(``gc.callbacks``) and how many full passes it made: a session keeps every record it wrote,
and a full pass walks all of it, so that is where a long session's turns cost more than a
short one's (docs/performance.md, "The engine's own work, second round").
"""

from __future__ import annotations

import gc
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from functools import partial

import trio

from engine import Session, approve_all
from engine.models import FauxModel, faux_text, faux_tool_call
from events import JsonlStore, MemoryStore
from events.stores.base import EventStore

from ..harness import Figure, Row, Settings, interleave, paired
from .ledger import add
from .tool import ARGS

__all__ = ["long_loop"]

US = 1e6

#: the stores a long loop is timed on, by the name the table gives them
STORES: dict[str, Callable[[str], EventStore]] = {
    "MemoryStore()": lambda directory: MemoryStore(),
    "JsonlStore": lambda directory: JsonlStore(os.path.join(directory, "session.jsonl")),
}


class _Collector:
    """The time CPython's cyclic collector takes while installed, and its full passes."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._started = 0.0
        self.seconds = 0.0
        self.full = 0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = self._clock()
            return
        self.seconds += self._clock() - self._started
        self.full += info["generation"] == 2


def _run(store: str, calls: int, clock: Callable[[], float], collector: _Collector) -> float:
    """Seconds of one ``trio.run`` of a whole session in which the faux model calls ``add``
    ``calls`` times, then answers: opened, prompted and closed, its store closed after."""
    script = [faux_tool_call("add", ARGS) for _ in range(calls)] + [faux_text("done")]
    with tempfile.TemporaryDirectory(prefix="longloop-") as directory:
        events = STORES[store](directory)

        async def main() -> None:
            async with Session.open(events, model=FauxModel(script), tools=[add],
                                    approver=approve_all, session_id="long", create=True,
                                    max_turns=calls + 1) as session:
                result = await session.prompt("go")
            if result.stop != "end_turn" or result.turns != calls + 1:
                raise RuntimeError(f"the long loop's session ended with {result}")

        gc.callbacks.append(collector)
        try:
            start = clock()
            trio.run(main)
            took = clock() - start
        finally:
            gc.callbacks.remove(collector)
            events.close()
    return took


def per_call(store: str, calls: int, clock: Callable[[], float] = time.perf_counter,
             collected: list[tuple[float, int]] | None = None) -> float:
    """Microseconds per call as an outside harness measures it: ``(run(calls) − run(0)) /
    calls``, each one ``trio.run``. ``collected`` gets the collector's microseconds per call
    in the long run and its full passes."""
    empty = _run(store, 0, clock, _Collector(clock))
    collector = _Collector(clock)
    whole = _run(store, calls, clock, collector)
    if collected is not None:
        collected.append((collector.seconds / calls * US, collector.full))
    return (whole - empty) / calls * US


def sampled(store: str, calls: int, inner: int, clock: Callable[[], float] = time.perf_counter,
            collected: list[tuple[float, int]] | None = None, *, collector: bool = True
            ) -> float:
    """The median of ``inner`` measures of :func:`per_call` (of :func:`without_collector`
    if not ``collector``): a short run is over in milliseconds, so one would be one tick of a
    busy machine."""
    measure = partial(per_call, collected=collected) if collector else without_collector
    values = sorted(measure(store, calls, clock) for _ in range(inner))
    return values[len(values) // 2]


def without_collector(store: str, calls: int, clock: Callable[[], float] = time.perf_counter
                      ) -> float:
    """:func:`per_call` with CPython's cyclic collector off (reference counting still frees
    everything a run drops: a run leaves no cycles per call behind)."""
    gc.disable()
    try:
        return per_call(store, calls, clock)
    finally:
        gc.enable()


def long_loop(settings: Settings, stacks: Sequence[str] = ("toolledger",)) -> list[Row]:
    """The long-loop rows: per call at the short and the long length on each store, the
    ratio of the two, and the collector's share of the long one (toolledger's only: the
    peers' loops are the agent-loop group's)."""
    if "toolledger" not in stacks:
        return []
    short, long = (20, 2_000) if settings.quick else (200, 20_000)
    clock = settings.clock

    def inner(length: int) -> int:  # the short runs of a sample: a tenth of the long one's calls
        return max(1, long // length // 10)
    rows: list[Row] = []
    for store in STORES:
        per_call(store, short, clock)  # warm up: imports, schemas, the first session
        collected: dict[int, list[tuple[float, int]]] = {short: [], long: []}
        samples = interleave(settings.reps(3, 1), [
            partial(sampled, store, length, inner(length), clock, collected[length])
            for length in (short, long)])
        figures = [Figure(name=f"toolledger long loop, {length:,} calls, {store}",
                          unit="µs/call", samples=tuple(values))
                   for length, values in zip((short, long), samples)]
        ratio = paired(figures[1], figures[0], lambda a, b: a / b)
        passes = sorted(collected[long])
        spent, full = passes[len(passes) // 2]
        rows.append(Row(group="long loop", figure=figures[0],
                        note="(run(K) − run(0)) / K, one trio.run per timed block; a sample "
                             f"is the median of {inner(short)} such measures"))
        rows.append(Row(
            group="long loop", figure=figures[1], baseline=figures[0],
            comparison=f"{ratio:.2f}× its {short:,}-call run",
            target=f"≤ 1.1× the {short:,}-call run", met=ratio <= 1.1,
            note=f"the cyclic collector: {spent:.1f} µs a call, {full} full passes"))
    # the same harness with the collector off, on the first store: what is left of the
    # difference between the lengths when no pass walks what the session keeps
    store = next(iter(STORES))
    samples = interleave(settings.reps(3, 1), [
        partial(sampled, store, length, inner(length), clock, collector=False)
        for length in (short, long)])
    off = [Figure(name=f"toolledger long loop, {length:,} calls, {store}, cyclic GC off",
                  unit="µs/call", samples=tuple(values))
           for length, values in zip((short, long), samples)]
    ratio = paired(off[1], off[0], lambda a, b: a / b)
    rows.append(Row(group="long loop", figure=off[0]))
    rows.append(Row(group="long loop", figure=off[1], baseline=off[0],
                    comparison=f"{ratio:.2f}× its {short:,}-call run",
                    note="without the collector's passes: the engine's own cost per call at "
                         "either length"))
    return rows
