"""What every fault test checks once the fault has happened: the log is still a log.

A fault may stop a call, a prompt or the whole session; it must never leave a log that does not
open, does not fold, keeps a call open after the engine closed it, or disagrees with the state
the session showed. :func:`assert_consistent` checks exactly that on any store;
:func:`assert_chain_verifies` adds the hash chain of a JSONL file.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

import trio
from conftest import HYPOTHESIS_PROFILE

from engine import Annotations
from engine.core.reducers import Projection, ToolResultEntry, fold
from events import EventStore, Record, verify_jsonl
from events.types import TERMINAL_EVENTS, ToolCallRequested

SAFE = Annotations(read_only=True, open_world=False)
#: Seconds of virtual (autojumped) time after which a test counts as hung.
DEADLOCK = 600

#: Kill runs of the SIGKILL test, per Hypothesis profile (TOOLLEDGER_HYPOTHESIS_PROFILE).
KILL_RUNS = {"ci": 50, "nightly": 500}[HYPOTHESIS_PROFILE]


def leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside ``exc``, exception groups flattened (``[exc]`` for a plain one)."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in leaves(inner)]
    return [exc]


def capture(run: Callable[[], Any]) -> BaseException | None:
    """Run ``run`` and hand back what it raised, whatever it was (``None`` if nothing).

    Tests that make tools raise ``KeyboardInterrupt`` or ``SystemExit`` run through this, so a
    regression that lets one escape fails that test instead of stopping the whole suite."""
    try:
        run()
    except BaseException as exc:  # noqa: BLE001 - that is the point
        return exc
    return None


def terminal_counts(records: Iterable[Record]) -> tuple[list[str], Counter[str]]:
    """The ids of every requested call, in order, and how many terminal events each has."""
    requested: list[str] = []
    ended: Counter[str] = Counter()
    for record in records:
        if isinstance(record.event, ToolCallRequested):
            requested.append(record.event.call_id)
        elif isinstance(record.event, TERMINAL_EVENTS):
            ended[record.event.call_id] += 1
    return requested, ended


def check_records(records: list[Record], live: Projection | None = None) -> Projection:
    """The checks of :func:`assert_consistent` on records already read."""
    assert [r.seq for r in records] == list(range(1, len(records) + 1)), "a gap in the seqs"
    state = fold(records)  # the lifecycle table accepts every record, in order
    assert state.open_calls == (), f"calls left open: {state.open_calls}"
    assert state.pending_approvals == (), f"approvals left pending: {state.pending_approvals}"
    assert state.model_asked is None, f"model turn {state.model_asked} left unanswered"
    requested, ended = terminal_counts(records)
    assert len(set(requested)) == len(requested), "a call id was requested twice"
    for call_id in requested:
        assert ended[call_id] == 1, f"call {call_id} has {ended[call_id]} terminal events"
    assert set(ended) <= set(requested), "a terminal event for a call never requested"
    top_level = [cid for cid in requested if "/" not in cid]
    in_transcript = [e.call_id for e in state.transcript if isinstance(e, ToolResultEntry)]
    assert sorted(in_transcript) == sorted(top_level), "the transcript lost or doubled a result"
    if live is not None:
        assert state.snapshot() == live.snapshot(), "the stored log folds to another state"
    return state


async def assert_consistent(
    store: EventStore, session_id: str, live: Projection | None = None
) -> Projection:
    """The session's log in ``store`` opens and folds, no call or approval is left open, every
    call has exactly one terminal event and one transcript result if it is top-level, and (given
    ``live``) the fold equals the live state. Returns the fold."""
    return check_records(await store.read(session_id), live)


def assert_chain_verifies(path: str | os.PathLike[str]) -> None:
    """``toolledger verify`` would pass: every chained record of the file verifies."""
    report = verify_jsonl(path)
    assert report.ok, f"verify failed: {report.broken}"


async def checkpoints(count: int) -> None:
    """Yield to the scheduler ``count`` times (a body that works without sleeping)."""
    for _ in range(count):
        await trio.lowlevel.checkpoint()
