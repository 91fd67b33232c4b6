"""Dispatch: one tool call through the whole governed path, against a bare ``await``.

The engine's figure is a nested call (``ctx.execute_tool``) made in a loop by a driver tool:
availability, input validation, ``tool_call`` handlers, the policy, the body, output
validation, ``tool_result`` handlers, every event stamped, checked by the lifecycle table,
folded into the session's state and stored, with the write-ahead flushes: in a
:class:`~events.JsonlStore` (the README's store, not durable) first, then in the memory store
as it comes and in the one that checks nothing. The baselines run the same body in the same trio loop: a bare
``await tool(**args)``, and fastjsonschema's validation of the arguments then the ``await``.
One variant calls the same tool written as a typed function, to show what inferring costs per
call beside the ``(call, ctx)`` form.

One more figure shows the floor under the engine's: the four events of a nested call
(requested, policy decided, started, completed) recorded through the session's recorder into
each store, flushed as the engine flushes them, with nothing else around them (no
validation, no handlers, no body, no copies, no coroutines of the call's path).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from typing import Any

import trio

from engine import Session, approve_all
from engine.core.reducers import fold
from engine.models import FauxModel, faux_text, faux_tool_call
from engine.runtime.recorder import Recorder
from events.callevents import Origin
from events.results import ToolResult
from events.types import (
    AssistantMessage,
    Event,
    ModelToolCall,
    PolicyDecided,
    Record,
    SessionStarted,
    ToolCallCompleted,
    ToolCallRequested,
    ToolExecutionStarted,
    UserMessage,
)

from .harness import Figure, Row, Settings, fmt, interleave, paired
from .stores import encoded_floor, written_floor
from .workload import (
    ARGS,
    RESULT,
    STORES,
    StoreKind,
    call_handlers,
    driver,
    echo,
    open_store,
    plain_echo,
    plain_validator,
    result_handlers,
    typed_echo,
)

__all__ = ["run"]

US = 1e6


def engine_dispatch(
    calls: int,
    *,
    handlers: int = 0,
    results: int = 0,
    store: StoreKind = "jsonl",
    clock: Callable[[], float] = time.perf_counter,
    target: str = "echo",
) -> float:
    """Microseconds per nested call of ``target`` (``echo``, or ``typed_echo``: the same tool
    as a typed function), in a fresh session."""
    laps: list[float] = []

    async def main() -> None:
        model = FauxModel([faux_tool_call("drive"), faux_text("done")])
        tools = [echo, typed_echo, driver(calls, laps, clock, target)]
        with open_store(store) as log:
            await run_session(log, model, tools)

    async def run_session(log: Any, model: FauxModel, tools: list[Any]) -> None:
        async with Session.open(log, model=model, tools=tools, approver=approve_all,
                                session_id="dispatch", create=True) as session:
            for handler in call_handlers(handlers):
                session.on_tool_call(handler)
            for result_handler in result_handlers(results):
                session.on_tool_result(result_handler)
            await session.prompt("go")

    trio.run(main)
    return laps[0] / calls * US


def recording_only(
    calls: int, store: StoreKind = "jsonl", clock: Callable[[], float] = time.perf_counter
) -> float:
    """Microseconds per call to record a nested call's four events and nothing else."""
    laps: list[float] = []

    async def main() -> None:
        with open_store(store) as log:
            await record_calls(log)

    async def record_calls(log: Any) -> None:
        recorder = Recorder(log, "floor", fold([]), [], time.time)
        record, flush = recorder.record, recorder.flush
        record(SessionStarted(metadata={}))
        record(UserMessage(text="go"))
        record(AssistantMessage(turn=1, tool_calls=(
            ModelToolCall(id="call_0", name="drive", arguments={}),)))
        record(ToolCallRequested(call_id="1.0", name="drive", arguments={},
                                 model_call_id="call_0"))
        record(PolicyDecided(call_id="1.0", decision="allow", reason="read-only"))
        record(ToolExecutionStarted(call_id="1.0"))
        await flush()
        start = clock()
        for n in range(calls):
            call_id = f"1.0/{n}"
            record(ToolCallRequested(call_id=call_id, name="echo", arguments=ARGS,
                                     origin="nested", parent_id="1.0"))
            record(PolicyDecided(call_id=call_id, decision="allow", reason="read-only"))
            record(ToolExecutionStarted(call_id=call_id))
            await flush()  # before the body runs
            record(ToolCallCompleted(call_id=call_id, result=RESULT))  # with the next flush
        await flush()
        laps.append(clock() - start)
        if len(recorder.history) != 6 + 4 * calls or recorder.projection.open_calls != ("1.0",):
            raise RuntimeError("the recording benchmark did not record what it says")

    trio.run(main)
    return laps[0] / calls * US


def call_batches(calls: int, *, name: str = "echo", arguments: dict[str, Any] = ARGS,
                 result: ToolResult = RESULT, origin: Origin = "nested",
                 parent_id: str | None = "1.0") -> list[tuple[Record, ...]]:
    """The records of ``calls`` calls of one tool, as a session writes them: one append a
    call, with the call's four events (requested, policy decided, started, completed; the
    engine writes a call's end with the next call's start, the same count of appends). A
    nested call of ``parent_id`` by default; a host call's is ``origin="host"``, no parent."""
    batches: list[tuple[Record, ...]] = []
    seq = 6
    for n in range(calls):
        call_id = f"{parent_id}/{n}" if parent_id is not None else f"h{n + 1}"
        events: tuple[Event, ...] = (
            ToolCallRequested(call_id=call_id, name=name, arguments=arguments, origin=origin,
                              parent_id=parent_id),
            PolicyDecided(call_id=call_id, decision="allow", reason="read-only"),
            ToolExecutionStarted(call_id=call_id),
            ToolCallCompleted(call_id=call_id, result=result),
        )
        batches.append(tuple(Record(session_id="floor", seq=seq + i, time=1_767_225_600.0 + seq,
                                    event=event) for i, event in enumerate(events, 1)))
        seq += len(events)
    return batches


def log_floor(batches: list[tuple[Record, ...]], store: StoreKind,
              clock: Callable[[], float] = time.perf_counter) -> float:
    """Microseconds per batch (per call) of what its log cannot skip, nothing else: on the
    file, the records encoded, proven, sealed and written with an append's system calls; on
    the memory store that checks, the records encoded and proven
    (:mod:`benchmarks.stores`' floors)."""
    floor = written_floor if store == "jsonl" else encoded_floor
    return floor(batches, clock) / len(batches) * US


def bare_await(calls: int, clock: Callable[[], float] = time.perf_counter) -> float:
    laps: list[float] = []

    async def main() -> None:
        args = ARGS
        start = clock()
        for _ in range(calls):
            await plain_echo(**args)
        laps.append(clock() - start)

    trio.run(main)
    return laps[0] / calls * US


def validate_then_await(calls: int, clock: Callable[[], float] = time.perf_counter) -> float:
    laps: list[float] = []
    validate = plain_validator()

    async def main() -> None:
        args = ARGS
        start = clock()
        for _ in range(calls):
            validate(args)
            await plain_echo(**args)
        laps.append(clock() - start)

    trio.run(main)
    return laps[0] / calls * US


#: The variant whose tool is a typed function (``typed_echo``), beside ``echo`` on the same store.
TYPED = f"{STORES['jsonl']}, a typed tool"

#: The targets, by store: a nested call's cost over a bare ``await``.
TARGETS: dict[StoreKind, float] = {"jsonl": 20.0, "memory": 11.0}


#: the floor under each target, in words: what the call's log cannot skip
FLOORS: dict[StoreKind, str] = {
    "jsonl": "a call's four records encoded, proven, sealed and written, nothing else",
    "memory": "a call's four records encoded and proven, nothing else",
}


def run(settings: Settings) -> list[Row]:
    calls = settings.size(20_000, 500)
    clock = settings.clock
    engine_dispatch(200)  # warm up: schema compilation, first imports
    variants: list[tuple[str, StoreKind, Callable[[], float]]] = [
        *((STORES[kind], kind, partial(engine_dispatch, calls, store=kind, clock=clock))
          for kind in STORES),
        (f"{STORES['jsonl']}, 3 tool_call handlers", "jsonl",
         partial(engine_dispatch, calls, handlers=3, clock=clock)),
        (f"{STORES['jsonl']}, 3 tool_call + 3 tool_result handlers", "jsonl",
         partial(engine_dispatch, calls, handlers=3, results=3, clock=clock)),
        (TYPED, "jsonl", partial(engine_dispatch, calls, clock=clock, target="typed_echo")),
    ]
    recorded = list(STORES)
    floored = list(FLOORS)
    measures = [measure for _, _, measure in variants] + [
        *(partial(recording_only, calls, kind, clock) for kind in recorded),
        *(partial(log_floor, call_batches(calls), kind, clock) for kind in floored),
        lambda: bare_await(calls, clock),
        lambda: validate_then_await(calls, clock),
    ]
    samples = interleave(settings.reps(), measures)
    bare = Figure(name="bare await tool(**args)", unit="µs/call", samples=tuple(samples[-2]))
    validated = Figure(name="fastjsonschema validate, then await", unit="µs/call",
                       samples=tuple(samples[-1]))
    floor_samples = samples[len(variants) + len(recorded):-2]
    floors = {kind: Figure(name=FLOORS[kind], unit="µs/call", samples=tuple(values))
              for kind, values in zip(floored, floor_samples)}
    rows: list[Row] = []
    untyped = Figure(name="", unit="µs/call", samples=tuple(samples[0]))
    for (name, kind, _), values in zip(variants, samples):
        figure = Figure(name=f"engine call, {name}", unit="µs/call", samples=tuple(values))
        overhead = paired(figure, bare, lambda a, b: a - b)
        typed = paired(figure, untyped, lambda a, b: a - b) if name == TYPED else None
        limit = TARGETS.get(kind) if name == STORES[kind] else None
        met = (overhead <= limit) if limit is not None else None
        # whatever else a call does, its log's work is part of its cost over the bare await
        floor = floors.get(kind)
        stopped = met is False and floor is not None and limit is not None and (
            floor.median > limit)
        rows.append(Row(
            group="dispatch",
            figure=figure,
            baseline=bare,
            comparison=f"+{overhead:.1f} µs",
            target=f"≤ +{limit:g} µs over bare await" if limit is not None else "",
            met=met,
            floor=f"{fmt(floor.median, floor.unit)} {floor.unit}: {floor.name}"
            if stopped and floor is not None else "",
            note="" if typed is None else (
                f"{typed:+.1f} µs beside the same tool in the (call, ctx) form: its argument "
                f"structured, its return value made a result (with its JSON as text)"),
        ))
    overhead = paired(validated, bare, lambda a, b: a - b)
    rows.append(Row(group="dispatch", figure=validated, baseline=bare,
                    comparison=f"+{overhead:.2f} µs"))
    for kind, values in zip(recorded, samples[len(variants):]):
        figure = Figure(name=f"a call's four events recorded, nothing else, {STORES[kind]}",
                        unit="µs/call", samples=tuple(values))
        rows.append(Row(group="dispatch", figure=figure, baseline=bare,
                        comparison=f"+{paired(figure, bare, lambda a, b: a - b):.1f} µs",
                        note=f"the recorder's path alone, on {STORES[kind]}: the events "
                             f"stamped, checked by the lifecycle, folded and stored"))
    for kind, figure in floors.items():
        rows.append(Row(group="dispatch", figure=figure,
                        note=f"the floor under the engine call on {STORES[kind]}: what its "
                             f"log cannot skip, in the same run"))
    return rows
