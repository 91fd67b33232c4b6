"""Invariants of a log's shape: the fold, one terminal event per call, nesting, and the
transcript. Part of :mod:`engine.testing.invariants` (read the overview there)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import attrs

from events.codec import type_name
from events.modelturns import ModelFailed, ModelRequested, ModelResponded
from events.types import (
    TERMINAL_EVENTS,
    AssistantMessage,
    Record,
    ToolCallBlocked,
    ToolCallCancelled,
    ToolCallDenied,
    ToolCallFailed,
    ToolCallRequested,
    ToolExecutionStarted,
    ToolProgress,
    UserMessage,
)

from ..core.callids import from_host, host_call_id
from ..core.reducers import LogInconsistency, Projection, fold
from ..core.views import StateSnapshot, ToolResultEntry

__all__ = [
    "check_fold",
    "check_model_turns",
    "check_nesting",
    "check_progress",
    "check_terminals",
    "check_transcript",
    "expected_transcript",
]

_TOP_LEVEL_ID = re.compile(r"(\d+)\.(\d+)")


def _fail(message: str) -> AssertionError:
    return AssertionError(message)


def _kind(event: Any) -> str:
    try:
        return type_name(event)
    except KeyError:
        return type(event).__name__


def _ending(event: Any) -> str:
    """A terminal event in words: "blocked by h", "failed (timeout)", …"""
    if isinstance(event, ToolCallBlocked):
        return f"blocked by {event.by} ({event.reason})"
    if isinstance(event, ToolCallDenied):
        return f"denied by the {event.by} ({event.reason})"
    if isinstance(event, ToolCallFailed):
        return f"failed ({event.kind}: {event.message})"
    if isinstance(event, ToolCallCancelled):
        return f"cancelled ({event.reason})"
    return "completed"


def _requests(records: Iterable[Record]) -> dict[str, ToolCallRequested]:
    return {r.event.call_id: r.event for r in records if isinstance(r.event, ToolCallRequested)}


def _terminals(records: Iterable[Record]) -> dict[str, Any]:
    ends: dict[str, Any] = {}
    for record in records:
        if isinstance(record.event, TERMINAL_EVENTS):
            ends.setdefault(record.event.call_id, record.event)
    return ends


# -- the fold ------------------------------------------------------------------------------------


def check_fold(records: Sequence[Record], state: Projection | StateSnapshot) -> None:
    """Folding ``records`` from scratch gives ``state`` (a live session's ``session.state``,
    or a snapshot of it)."""
    expected = state.snapshot() if isinstance(state, Projection) else state
    try:
        folded = fold(records).snapshot()
    except LogInconsistency as exc:
        raise _fail(f"the log does not fold: {exc}") from exc
    if folded == expected:
        return
    differ = [field.name for field in attrs.fields(StateSnapshot)
              if getattr(folded, field.name) != getattr(expected, field.name)]
    details = []
    if "calls" in differ:
        ids = sorted(set(folded.calls) | set(expected.calls))
        bad = [c for c in ids if folded.calls.get(c) != expected.calls.get(c)]
        details.append(f"calls that differ: {', '.join(bad[:5])}")
        first = bad[0]
        details.append(f"call {first} folded: {folded.calls.get(first)!r}; "
                       f"live: {expected.calls.get(first)!r}")
    for name in differ:
        if name != "calls":
            details.append(f"{name} folded: {getattr(folded, name)!r}; "
                           f"live: {getattr(expected, name)!r}")
    raise _fail(f"a fold of the log differs from the live state in {', '.join(differ)}: "
                + "; ".join(details))


# -- one terminal event per call ------------------------------------------------------------


def check_terminals(records: Sequence[Record], *, closed: bool = False) -> None:
    """Every call event is about a requested call; each call has at most one terminal event
    and nothing after it. With ``closed`` (the engine closed the log: a prompt ended without a
    pause, or was cancelled), every call each assistant message asked for was requested and
    has exactly one terminal event, and so has every other call but the host's (and those
    under them), which may still run or wait in the host's tasks."""
    requested: dict[str, int] = {}
    ended: dict[str, tuple[int, Any]] = {}
    asked: list[str] = []
    for record in records:
        event = record.event
        if isinstance(event, AssistantMessage):
            asked.extend(f"{event.turn}.{i}" for i in range(len(event.tool_calls)))
        call_id = getattr(event, "call_id", None)
        if call_id is None:
            continue
        if isinstance(event, ToolCallRequested):
            if call_id in requested:
                raise _fail(f"call {call_id} was requested twice (seq {requested[call_id]} and "
                            f"seq {record.seq})")
            requested[call_id] = record.seq
            continue
        if call_id not in requested:
            raise _fail(f"seq {record.seq}: {_kind(event)} is about call {call_id}, which was "
                        f"never requested")
        if call_id in ended:
            seq, first = ended[call_id]
            raise _fail(f"seq {record.seq}: {_kind(event)} for call {call_id} after its terminal "
                        f"event {_kind(first)} at seq {seq}: a call ends exactly once")
        if isinstance(event, TERMINAL_EVENTS):
            ended[call_id] = (record.seq, event)
    if closed:
        never = [c for c in asked if c not in requested]
        if never:
            raise _fail(f"the log was closed with call(s) the assistant asked for never "
                        f"requested: {', '.join(never)}")
        # a host call is its caller's to wait for: a prompt's end says nothing about it
        left = [c for c in requested if c not in ended and not from_host(c)]
        if left:
            raise _fail(f"the log was closed (the prompt ended or was cancelled) with call(s) "
                        f"left open: {', '.join(left)}; each needs exactly one terminal event")


# -- nesting -------------------------------------------------------------------------------------


def check_nesting(records: Sequence[Record]) -> None:
    """A model call has an id ``"{turn}.{index}"`` of the current assistant message, a host
    call ``"h{n}"`` with ``n`` counting the host's calls; a nested
    call is requested only while its parent runs (started, not ended), is named
    ``"{parent}/{n}"`` with ``n`` counting its parent's nested calls, and ends before its
    parent does."""
    running: set[str] = set()
    state: dict[str, str] = {}
    children: Counter[str] = Counter()
    open_calls: dict[str, None] = {}
    message: AssistantMessage | None = None
    hosted = 0
    for record in records:
        event = record.event
        where = f"seq {record.seq}"
        if isinstance(event, AssistantMessage):
            message = event
        elif isinstance(event, ToolCallRequested):
            call_id = event.call_id
            if event.parent_id is None and event.origin == "host":
                if call_id != host_call_id(hosted):
                    raise _fail(f"{where}: host call {call_id!r} should be named "
                                f"{host_call_id(hosted)!r} (the host's calls are numbered in "
                                f"order)")
                hosted += 1
            elif event.parent_id is None:
                match = _TOP_LEVEL_ID.fullmatch(call_id)
                if event.origin != "model" or match is None:
                    raise _fail(f"{where}: top-level call {call_id!r} (origin {event.origin}) "
                                f"is not a model call named '{{turn}}.{{index}}'")
                turn, index = int(match.group(1)), int(match.group(2))
                if message is None or message.turn != turn or index >= len(message.tool_calls):
                    raise _fail(f"{where}: call {call_id} is not a call of the current "
                                f"assistant message")
            else:
                parent = event.parent_id
                if event.origin != "nested":
                    raise _fail(f"{where}: call {call_id} has parent {parent} but origin "
                                f"{event.origin!r}")
                if parent not in running:
                    raise _fail(f"{where}: nested call {call_id} ({event.name}) was requested "
                                f"while its parent {parent} was "
                                f"{state.get(parent, 'never requested')}, not running")
                expected = f"{parent}/{children[parent]}"
                if call_id != expected:
                    raise _fail(f"{where}: nested call {call_id} should be named {expected} "
                                f"(the parent's nested calls are numbered in order)")
                children[parent] += 1
            state[call_id] = "requested, not started"
            open_calls[call_id] = None
        elif isinstance(event, ToolExecutionStarted):
            running.add(event.call_id)
            state[event.call_id] = "running"
        elif isinstance(event, TERMINAL_EVENTS):
            call_id = event.call_id
            below = [c for c in open_calls if c.startswith(call_id + "/")]
            if below:
                raise _fail(f"{where}: call {call_id} ended ({_kind(event)}) while its nested "
                            f"call(s) {', '.join(below)} were still open")
            running.discard(call_id)
            open_calls.pop(call_id, None)
            state[call_id] = f"ended at seq {record.seq}"


# -- progress ------------------------------------------------------------------------------------


def check_progress(records: Sequence[Record]) -> None:
    """A progress update is written only while its call runs (started, not ended); a
    forwarded one names, as its ``source``, a call nested under it (at any depth) that was
    requested before it."""
    running: set[str] = set()
    requested: set[str] = set()
    for record in records:
        event = record.event
        if isinstance(event, ToolCallRequested):
            requested.add(event.call_id)
        elif isinstance(event, ToolExecutionStarted):
            running.add(event.call_id)
        elif isinstance(event, TERMINAL_EVENTS):
            running.discard(event.call_id)
        elif isinstance(event, ToolProgress):
            call_id, source = event.call_id, event.source
            if call_id not in running:
                raise _fail(f"seq {record.seq}: progress of call {call_id}, which was not "
                            f"running (updates after the tool returned are dropped)")
            if source is not None and (not source.startswith(f"{call_id}/")
                                       or source not in requested):
                raise _fail(f"seq {record.seq}: call {call_id} forwarded progress from "
                            f"{source!r}, which is not a call requested under it")


# -- the transcript ------------------------------------------------------------------------------


def _describe_entry(entry: Any) -> str:
    if isinstance(entry, ToolResultEntry):
        return f"the result of call {entry.call_id} ({entry.name}): {entry.result.text!r}"
    if isinstance(entry, UserMessage):
        return f"user message {entry.text!r}"
    if isinstance(entry, AssistantMessage):
        return f"assistant message of turn {entry.turn}"
    return repr(entry)


def expected_transcript(records: Sequence[Record]) -> list[Any]:
    """The transcript DESIGN prescribes for ``records``: user and assistant messages, and
    after each assistant message the results of its calls in the assistant's order (a result
    waits for the results of the calls before it)."""
    requests = _requests(records)
    expected: list[Any] = []
    order: list[str] = []
    calls: dict[str, Any] = {}
    waiting: dict[str, Any] = {}
    for record in records:
        event = record.event
        if isinstance(event, UserMessage):
            expected.append(event)
        elif isinstance(event, AssistantMessage):
            expected.append(event)
            order = [f"{event.turn}.{i}" for i in range(len(event.tool_calls))]
            calls = dict(zip(order, event.tool_calls))
            waiting = {}
        elif isinstance(event, TERMINAL_EVENTS) and event.call_id in calls:
            request = requests.get(event.call_id)
            if request is None or request.parent_id is not None:
                continue
            asked = calls[event.call_id]
            waiting[event.call_id] = ToolResultEntry(call_id=event.call_id,
                                                     model_call_id=asked.id, name=asked.name,
                                                     result=event.result)
            while order and order[0] in waiting:
                expected.append(waiting.pop(order.pop(0)))
    return expected


def check_transcript(records: Sequence[Record], transcript: Iterable[Any]) -> None:
    """``transcript`` (``session.transcript``) holds the messages and exactly one result per
    top-level call, in the assistant's order, and no nested call."""
    actual = list(transcript)
    nested = [e.call_id for e in actual if isinstance(e, ToolResultEntry) and "/" in e.call_id]
    if nested:
        raise _fail(f"the transcript holds nested call(s) {', '.join(nested)}: only top-level "
                    f"calls belong there")
    seen = Counter(e.call_id for e in actual if isinstance(e, ToolResultEntry))
    twice = [c for c, n in seen.items() if n > 1]
    if twice:
        raise _fail(f"the transcript holds call(s) {', '.join(twice)} more than once")
    expected = expected_transcript(records)
    for index, (want, got) in enumerate(zip(expected, actual)):
        if want != got:
            raise _fail(f"transcript entry {index} is {_describe_entry(got)}; the log says it "
                        f"is {_describe_entry(want)}")
    if len(actual) != len(expected):
        longer, what = (actual, "has more") if len(actual) > len(expected) else (expected, "lacks")
        raise _fail(f"the transcript {what} entries than the log says, from entry "
                    f"{min(len(actual), len(expected))}: "
                    f"{_describe_entry(longer[min(len(actual), len(expected))])}")


def check_model_turns(records: Sequence[Record], *, closed: bool = False) -> None:
    """Each model turn is asked for, then answered or failed, once: a ``model_responded`` is
    followed at once by the assistant message of its turn, a ``model_failed`` by no message
    of its turn, and nothing answers a turn that was not asked for. A request left unanswered
    is a process that stopped while it waited: allowed, unless ``closed`` (a prompt that
    ended, failed or was cancelled leaves none). Logs written before model turns were
    recorded have assistant messages without any, which is allowed."""
    asked: tuple[int, int] | None = None  # (seq, turn) of a request not yet answered
    answered: int | None = None  # the turn whose answer came just before
    for record in records:
        event = record.event
        if isinstance(event, ModelRequested):
            asked, answered = (record.seq, event.turn), None
            continue
        if isinstance(event, (ModelResponded, ModelFailed)):
            if asked is None or asked[1] != event.turn:
                raise _fail(f"record seq {record.seq}: {_kind(event)} for turn {event.turn}, "
                            f"which was not asked for")
            answered = event.turn if isinstance(event, ModelResponded) else None
            asked = None
            continue
        if answered is not None and not (isinstance(event, AssistantMessage)
                                         and event.turn == answered):
            raise _fail(f"record seq {record.seq}: {_kind(event)} follows model_responded for "
                        f"turn {answered} instead of its assistant message")
        answered = None
    if closed and asked is not None:
        raise _fail(f"record seq {asked[0]}: the model turn {asked[1]} was asked for and never "
                    f"answered or failed, in a log the engine closed")
