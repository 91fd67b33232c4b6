"""Invariants of every log the engine writes, as functions that raise ``AssertionError``.

Each check reads a log (the list of :class:`~events.types.Record`\\ s a session wrote, as its
store returns them) and says, when it fails, which record broke which rule. They restate
DESIGN's rules from the log alone, independently of the reducers (except :func:`check_fold`,
whose point is the reducers), so a bug in the engine's own bookkeeping cannot hide itself:

========================== ======================================================================
:func:`check_fold`         folding the log from scratch gives the live session's state
:func:`check_terminals`    one terminal event per call, nothing about a call after it; with
                           ``closed=True`` (the prompt ended, or was cancelled) none left open
:func:`check_nesting`      a nested call is requested only while its parent runs, is named
                           ``"{parent}/{n}"`` in order, and ends before its parent does
:func:`check_progress`     a progress update is written while its call runs; a forwarded
                           one names a call nested under it, requested before it
:func:`check_transcript`   the transcript holds the messages and exactly the top-level calls'
                           results, in the assistant's order, and no nested call
:func:`check_model_turns`  each model turn asked for, then answered (its assistant message
                           next) or failed, once; with ``closed=True`` none left unanswered
:func:`check_bodies`       a blocked, denied or unavailable call never ran its body (count
                           body runs with :class:`~engine.testing.BodyRuns`)
:func:`check_availability` the exposure table, recomputed from the log: a call its caller may
                           not make fails at once, and never gets further
:func:`check_approvals`    the policy's decisions, recomputed with :func:`engine.core.policy.decide`
                           and the session grants folded so far; approval asked exactly when it
                           said ask; no call runs without "allow" or a granted approval
:func:`check_codec`        every record survives the codec unchanged
:func:`check_stored`       the store holds exactly the records the session recorded
========================== ======================================================================

:func:`check_log` runs them all; :func:`check_session` reads a live session and its store and
runs them all; :func:`check_store_round_trip` writes a log into a store and reads it back.
The checks live in three modules, by what they look at: :mod:`engine.testing.shape` (the fold,
terminal events, nesting, the transcript), :mod:`engine.testing.gating` (bodies, availability,
approvals) and :mod:`engine.testing.storage` (the codec and the stores).
Example::

    async with Session.open(store, model=model, tools=tools, rules=rules) as session:
        await session.prompt("go")
        await check_session(session, store, rules=rules, closed=True)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from events.stores import EventStore
from events.types import Record

from ..core.policy import PolicyRules
from ..core.reducers import Projection, fold
from ..core.views import StateSnapshot
from ..runtime.session import Session
from .gating import NEVER_RAN, check_approvals, check_availability, check_bodies
from .shape import (
    check_fold,
    check_model_turns,
    check_nesting,
    check_progress,
    check_terminals,
    check_transcript,
    expected_transcript,
)
from .storage import check_codec, check_store_round_trip, check_stored

__all__ = [
    "NEVER_RAN",
    "check_approvals",
    "check_availability",
    "check_bodies",
    "check_codec",
    "check_fold",
    "check_log",
    "check_model_turns",
    "check_nesting",
    "check_progress",
    "check_session",
    "check_store_round_trip",
    "check_stored",
    "check_terminals",
    "check_transcript",
    "expected_transcript",
]


# -- all of them --------------------------------------------------------------------------------


def check_log(
    records: Sequence[Record],
    *,
    state: Projection | StateSnapshot | None = None,
    transcript: Iterable[Any] | None = None,
    body_runs: Mapping[str, int] | None = None,
    rules: PolicyRules = PolicyRules(),
    asked: Sequence[str] | None = None,
    closed: bool = False,
    registry_complete: bool = True,
) -> None:
    """Every invariant that applies: those of the log alone, plus the fold (given the live
    ``state``), the transcript (given it), the bodies (given ``body_runs``) and the approver
    (given ``asked``)."""
    records = list(records)
    check_codec(records)
    check_terminals(records, closed=closed)
    check_model_turns(records, closed=closed)
    check_nesting(records)
    check_progress(records)
    check_availability(records, registry_complete=registry_complete)
    check_approvals(records, rules=rules, asked=asked)
    if state is not None:
        check_fold(records, state)
    check_transcript(records, transcript if transcript is not None else fold(records).transcript)
    if body_runs is not None:
        check_bodies(records, body_runs)


async def check_session(
    session: Session,
    store: EventStore,
    *,
    body_runs: Mapping[str, int] | None = None,
    rules: PolicyRules = PolicyRules(),
    asked: Sequence[str] | None = None,
    closed: bool = False,
) -> None:
    """Every invariant, on a live session and the store it writes to (call it between
    prompts: while a prompt runs the log is still being written). ``rules`` must be the ones
    the session was opened with; ``closed=True`` after a prompt that ended or was cancelled
    (not paused)."""
    stored = await store.read(session.session_id)
    check_stored(session.records, stored)
    check_log(stored, state=session.state, transcript=session.transcript, body_runs=body_runs,
              rules=rules, asked=asked, closed=closed)
