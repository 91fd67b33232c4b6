"""Dispatch: one tool call through the whole governed path, against a bare ``await``.

The engine's figure is a nested call (``ctx.execute_tool``) made in a loop by a driver tool:
availability, input validation, ``tool_call`` handlers, the policy, the body, output
validation, ``tool_result`` handlers, every event stamped, checked by the lifecycle table,
folded into the session's state and stored in a :class:`~events.MemoryStore`, with the
write-ahead flushes. The baselines run the same body in the same trio loop: a bare
``await tool(**args)``, and fastjsonschema's validation of the arguments then the ``await``.

One more figure shows the floor under the engine's: the four events of a nested call
(requested, policy decided, started, completed) recorded through the session's recorder into
the same store, flushed as the engine flushes them, with nothing else around them (no
validation, no handlers, no body, no copies, no coroutines of the call's path).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import trio

from engine import Session, approve_all
from engine.models import FauxModel, faux_text, faux_tool_call
from engine.recorder import Recorder
from engine.reducers import fold
from events import MemoryStore
from events.types import (
    AssistantMessage,
    ModelToolCall,
    PolicyDecided,
    SessionStarted,
    ToolCallCompleted,
    ToolCallRequested,
    ToolExecutionStarted,
    UserMessage,
)

from .harness import Figure, Row, Settings, interleave, paired
from .workload import ARGS, RESULT, call_handlers, driver, echo, plain_echo, plain_validator, result_handlers

__all__ = ["run"]

US = 1e6


def engine_dispatch(
    calls: int,
    *,
    handlers: int = 0,
    results: int = 0,
    checked: bool = False,
    clock: Callable[[], float] = time.perf_counter,
) -> float:
    """Microseconds per nested call, in a fresh session."""
    laps: list[float] = []

    async def main() -> None:
        store = MemoryStore(check_encodable=checked)
        model = FauxModel([faux_tool_call("drive"), faux_text("done")])
        tools = [echo, driver(calls, laps, clock)]
        async with Session.open(store, model=model, tools=tools, approver=approve_all,
                                session_id="dispatch", create=True) as session:
            for handler in call_handlers(handlers):
                session.on_tool_call(handler)
            for result_handler in result_handlers(results):
                session.on_tool_result(result_handler)
            await session.prompt("go")

    trio.run(main)
    return laps[0] / calls * US


def recording_only(calls: int, clock: Callable[[], float] = time.perf_counter) -> float:
    """Microseconds per call to record a nested call's four events and nothing else."""
    laps: list[float] = []

    async def main() -> None:
        recorder = Recorder(MemoryStore(check_encodable=False), "floor", fold([]), [], time.time)
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


def run(settings: Settings) -> list[Row]:
    calls = settings.size(20_000, 500)
    clock = settings.clock
    engine_dispatch(200)  # warm up: schema compilation, first imports
    variants: list[tuple[str, Callable[[], float]]] = [
        ("no handlers", lambda: engine_dispatch(calls, clock=clock)),
        ("3 tool_call handlers", lambda: engine_dispatch(calls, handlers=3, clock=clock)),
        ("3 tool_call + 3 tool_result handlers",
         lambda: engine_dispatch(calls, handlers=3, results=3, clock=clock)),
        ("no handlers, store checks encoding",
         lambda: engine_dispatch(calls, checked=True, clock=clock)),
    ]
    measures = [measure for _, measure in variants] + [
        lambda: recording_only(calls, clock),
        lambda: bare_await(calls, clock),
        lambda: validate_then_await(calls, clock),
    ]
    samples = interleave(settings.reps(), measures)
    bare = Figure(name="bare await tool(**args)", unit="µs/call", samples=tuple(samples[-2]))
    validated = Figure(name="fastjsonschema validate, then await", unit="µs/call",
                       samples=tuple(samples[-1]))
    rows: list[Row] = []
    for (name, _), values in zip(variants, samples):
        figure = Figure(name=f"engine call, {name}", unit="µs/call", samples=tuple(values))
        overhead = paired(figure, bare, lambda a, b: a - b)
        is_target = name == "no handlers"
        rows.append(Row(
            group="dispatch",
            figure=figure,
            baseline=bare,
            comparison=f"+{overhead:.1f} µs",
            target="≤ +10 µs over bare await" if is_target else "",
            met=(overhead <= 10.0) if is_target else None,
            note="MemoryStore() as it comes (check_encodable=True): every record is encoded "
            "and decoded again, to refuse what the file store would" if "checks" in name else "",
        ))
    overhead = paired(validated, bare, lambda a, b: a - b)
    rows.append(Row(group="dispatch", figure=validated, baseline=bare,
                    comparison=f"+{overhead:.2f} µs"))
    floor = Figure(name="a call's four events recorded, nothing else", unit="µs/call",
                   samples=tuple(samples[-3]))
    rows.append(Row(group="dispatch", figure=floor, baseline=bare,
                    comparison=f"+{paired(floor, bare, lambda a, b: a - b):.1f} µs",
                    note="the floor under every engine call above: its log alone"))
    return rows
