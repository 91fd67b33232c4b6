"""The agent loop: one faux-model turn plus one tool call, in sessions of growing length.

A session of ``n`` calls is one prompt: the faux model answers ``n`` times with one ``echo``
call, then with text. The clock starts when the model gives its first answer and stops when it
is asked for the last one, so the figure is exactly ``n`` turns, each: record the assistant
message, request, gate, run and end its call (every event through the reducers into a
:class:`~events.JsonlStore`, the README's store, not durable; one row beside it on the memory
store as it comes), put the result in the transcript, ask the model again (with the
transcript and the declared tools). The faux model keeps every request it gets, as it does in
tests.

If anything cost more as the history grows (the transcript rebuilt or copied per turn, state
rescanned), the per-call figure of the long sessions would grow with them; the table shows it
for each length, and the ratio of the longest to the shortest.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from functools import partial

import trio

from engine import Session, ToolSpec, approve_all
from engine.core.approvals import Approver
from engine.models import FauxModel, FauxStep, ModelMessage, ModelRequest, faux_tool_call
from events.stores import EventStore
from events.types import ModelToolCall

from .harness import Figure, Row, Settings, interleave, paired
from .workload import ARGS, STORES, StoreKind, echo, open_store

__all__ = ["run"]

US = 1e6


def session_of(
    calls: int,
    *,
    tail: int = 0,
    store: StoreKind = "jsonl",
    clock: Callable[[], float] = time.perf_counter,
    tool: ToolSpec = echo,
    approver: Approver = approve_all,
) -> tuple[float, float]:
    """Microseconds per turn-with-one-call over a session of ``calls`` calls, and over its
    last ``tail`` calls (0: not measured); each call is of ``tool`` (``echo``, which the
    policy allows) under ``approver``."""
    stamps: dict[str, float] = {}

    def stamp(name: str, message: ModelMessage) -> Callable[[ModelRequest], ModelMessage]:
        def step(request: ModelRequest) -> ModelMessage:
            stamps[name] = clock()
            return message

        return step

    call = ModelMessage(tool_calls=(ModelToolCall(id="call_0", name=tool.name, arguments=ARGS),))
    script: list[FauxStep] = [faux_tool_call(tool.name, ARGS) for _ in range(calls + 1)]
    script[0] = stamp("first", call)
    if tail:
        script[calls - tail] = stamp("tail", call)
    script[calls] = stamp("last", ModelMessage(text="done"))

    async def main() -> None:
        with open_store(store) as log:
            await prompt(log)

    async def prompt(log: EventStore) -> None:
        model = FauxModel(script)
        async with Session.open(log, model=model, tools=[tool],
                                approver=approver, session_id="loop", create=True,
                                max_turns=calls + 1) as session:
            result = await session.prompt("go")
        if result.stop != "end_turn" or result.turns != calls + 1:
            raise RuntimeError(f"the loop benchmark's session ended with {result}")

    trio.run(main)
    whole = (stamps["last"] - stamps["first"]) / calls * US
    late = (stamps["last"] - stamps["tail"]) / tail * US if tail else 0.0
    return whole, late


class _GcTimer:
    """The time CPython's cyclic collector takes while it is installed (``gc.callbacks``)."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._started = 0.0
        self.seconds = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = self._clock()
        else:
            self.seconds += self._clock() - self._started

    def __enter__(self) -> _GcTimer:
        gc.callbacks.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self)


def _without_gc(measure: Callable[[], float]) -> float:
    """``measure()`` with CPython's cyclic garbage collector off (reference counting still
    frees everything this benchmark drops)."""
    gc.disable()
    try:
        return measure()
    finally:
        gc.enable()


def run(settings: Settings) -> list[Row]:
    lengths = (20, 200, 2_000) if settings.quick else (20, 2_000, 100_000)
    tail = settings.size(1_000, 200)
    clock = settings.clock
    session_of(200)  # warm up
    late: list[float] = []
    collecting: list[float] = []

    def measure(length: int, store: StoreKind = "jsonl") -> float:
        # a short session is run several times per sample, so that a sample is not one tick
        inner = max(1, 2_000 // length)
        longest = length == lengths[-1] and store == "jsonl"
        values = []
        for _ in range(inner):
            with _GcTimer(clock) as collector:
                whole, end = session_of(length, tail=tail if longest else 0, store=store,
                                        clock=clock)
            values.append(whole)
            if longest and gc.isenabled():
                late.append(end)
                collecting.append(collector.seconds / length * US)
        return sorted(values)[len(values) // 2]

    shortest_gc_off = partial(_without_gc, partial(measure, lengths[0]))
    longest_gc_off = partial(_without_gc, partial(measure, lengths[-1]))
    # every round runs each length once, so that they share the machine's mood
    samples = interleave(settings.reps(5, 2), [partial(measure, length) for length in lengths]
                         + [partial(measure, lengths[0], "memory"),
                            partial(measure, lengths[0], "unchecked"), shortest_gc_off,
                            longest_gc_off])
    figures = [Figure(name=f"agent loop, {length:,} calls", unit="µs/turn", samples=tuple(values))
               for length, values in zip(lengths, samples)]
    on_memory, unchecked = (
        Figure(name=f"agent loop, {lengths[0]:,} calls, {STORES[kind]}", unit="µs/turn",
               samples=tuple(samples[len(lengths) + i]))
        for i, kind in enumerate(("memory", "unchecked")))
    shortest = figures[0]
    rows: list[Row] = []
    for figure in figures:
        ratio = paired(figure, shortest, lambda a, b: a / b)
        target = ""
        met: bool | None = None
        if figure is figures[-1]:
            target, met = f"≤ 1.1× the {lengths[0]}-call session", ratio <= 1.1
        rows.append(Row(
            group="agent loop",
            figure=figure,
            baseline=None if figure is shortest else shortest,
            comparison="" if figure is shortest else f"{ratio:.2f}×",
            target=target,
            met=met,
        ))
        if figure is shortest:
            rows.append(Row(group="agent loop", figure=on_memory, baseline=shortest,
                            comparison=f"{paired(on_memory, shortest, lambda a, b: a / b):.2f}×",
                            note="the same session on the memory store"))
            # the earlier round's target, on the store it was set for: what a turn costs
            # with its records kept but not encoded
            rows.append(Row(group="agent loop", figure=unchecked, baseline=shortest,
                            comparison=f"{paired(unchecked, shortest, lambda a, b: a / b):.2f}×",
                            target="≤ 50 µs per turn", met=unchecked.median <= 50.0,
                            note="the same session on the memory store that checks nothing: "
                                 "the engine's own work a turn"))
    late_figure = Figure(name=f"agent loop, last {tail:,} of {lengths[-1]:,} calls",
                         unit="µs/turn", samples=tuple(late))
    rows.append(Row(group="agent loop", figure=late_figure, baseline=shortest,
                    comparison=f"{paired(late_figure, shortest, lambda a, b: a / b):.2f}×",
                    note="the cost of one turn late in the longest session"))
    short_off = Figure(name=f"agent loop, {lengths[0]:,} calls, cyclic GC off", unit="µs/turn",
                       samples=tuple(samples[-2]))
    long_off = Figure(name=f"agent loop, {lengths[-1]:,} calls, cyclic GC off", unit="µs/turn",
                      samples=tuple(samples[-1]))
    collector = Figure(name=f"agent loop, {lengths[-1]:,} calls: cyclic GC passes",
                       unit="µs/turn", samples=tuple(collecting))
    rows.append(Row(group="agent loop", figure=collector,
                    note="the time CPython's cyclic collector took during that session "
                    "(gc.callbacks), included in its figure"))
    rows.append(Row(group="agent loop", figure=short_off))
    rows.append(Row(group="agent loop", figure=long_off, baseline=short_off,
                    comparison=f"{paired(long_off, short_off, lambda a, b: a / b):.2f}×",
                    note="without the collector's full passes over a heap that grows with the "
                    "session: the engine's own cost per turn"))
    return rows
