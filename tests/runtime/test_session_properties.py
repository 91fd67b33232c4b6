"""Properties of whole scripted sessions (see :mod:`engine.testing.scripts` for what is drawn:
valid and invalid calls, nested and parallel ones, handlers, approvers, timeouts, and prompts
the host cancels part-way).

Every example runs the same script twice, on a :class:`MemoryStore` and on a
:class:`JsonlStore` in a temporary directory, with a counting clock and a fixed session id.
The properties are then checked on both runs, mostly by walking the log: the log is the truth,
so these checks say what any log the engine writes must look like.

Hypothesis makes trio's scheduler deterministic (it seeds the scheduler's random source at the
start of each example); the second run of an example restarts that source from the state the
first run started from, so the two runs interleave their concurrent calls the same way and
their logs can be compared record for record. (trio keeps the source in a private attribute;
should a later trio drop it, only that one cross-store comparison is skipped.) Tools sleep and
time out in virtual time (``MockClock``), so a run takes milliseconds.
"""

from __future__ import annotations

import os
import random
import tempfile
from collections import Counter
from collections.abc import Iterator
from functools import partial
from typing import Any

import attrs
import trio
from hypothesis import given
from hypothesis import strategies as st

from engine import (
    approve_all,
    at_once,
    deny_all,
)
from engine.core.policy import decide
from engine.core.reducers import ToolResultEntry, fold
from engine.replay.recorded import turn_of
from engine.testing import check_approvals, check_bodies, check_log
from engine.testing.scripts import (
    GRANTING,
    SessionScript,
    run_script,
    session_scripts,
)
from engine.testing.scripts import (
    SCRIPT_SESSION_ID as SESSION_ID,
)
from engine.testing.scripts import (
    ScriptRun as RunOutcome,
)
from events import JsonlStore, MemoryStore, decode_line, encode_line
from events.types import (
    TERMINAL_EVENTS,
    ApprovalRequested,
    ApprovalResolved,
    AssistantMessage,
    PolicyDecided,
    Record,
    ToolCallBlocked,
    ToolCallCancelled,
    ToolCallDenied,
    ToolCallFailed,
    ToolCallRequested,
    ToolCallRewritten,
    ToolExecutionStarted,
    ToolRegistered,
    UserMessage,
)
from tests.strategies import PROPERTY, virtual_clock


def _scheduler_random() -> random.Random | None:
    """trio's scheduler's random source (which Hypothesis seeds), if this trio has one."""
    rng = getattr(getattr(getattr(trio, "_core", None), "_run", None), "_r", None)
    return rng if isinstance(rng, random.Random) else None


class Runs:
    """One script run on both stores, plus the JSONL file read back by a fresh store."""

    def __init__(self, script: SessionScript) -> None:
        rng = _scheduler_random()
        start = rng.getstate() if rng is not None else None
        self.memory = trio.run(run_script, script, MemoryStore(), clock=virtual_clock())
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "session.jsonl")
            if rng is not None:
                rng.setstate(start)  # type: ignore[arg-type]
            store = JsonlStore(path)
            try:
                self.jsonl = trio.run(run_script, script, store, clock=virtual_clock())
            finally:
                store.close()
            reopened = JsonlStore(path)
            try:
                self.reread: list[Record] = trio.run(reopened.read, SESSION_ID)
            finally:
                reopened.close()
        self.same_schedule = rng is not None

    def both(self) -> Iterator[RunOutcome]:
        yield self.memory
        yield self.jsonl


# -- log walking helpers ----------------------------------------------------------------------


def requests(records: tuple[Record, ...]) -> dict[str, ToolCallRequested]:
    return {r.event.call_id: r.event for r in records if isinstance(r.event, ToolCallRequested)}


def terminals(records: tuple[Record, ...]) -> dict[str, list[Any]]:
    ends: dict[str, list[Any]] = {}
    for r in records:
        if isinstance(r.event, TERMINAL_EVENTS):
            ends.setdefault(r.event.call_id, []).append(r.event)
    return ends


def ids_of(records: tuple[Record, ...], kind: type[Any]) -> list[str]:
    return [r.event.call_id for r in records if isinstance(r.event, kind)]


def final_arguments(records: tuple[Record, ...]) -> dict[str, Any]:
    arguments: dict[str, Any] = {}
    for r in records:
        if isinstance(r.event, (ToolCallRequested, ToolCallRewritten)):
            arguments[r.event.call_id] = r.event.arguments
    return arguments


#: failures the engine decides before a tool body could run
NEVER_RAN = frozenset({"unavailable", "invalid_arguments", "duplicate_call_id", "truncated",
                       "depth_limit"})


# -- properties -------------------------------------------------------------------------------


@PROPERTY
@given(session_scripts())
def test_a_fold_of_the_stored_log_equals_the_live_state(script: SessionScript) -> None:
    runs = Runs(script)
    for run in runs.both():
        assert fold(run.stored_records).snapshot() == run.snapshot
    assert fold(runs.reread).snapshot() == runs.jsonl.snapshot


@PROPERTY
@given(session_scripts())
def test_the_store_round_trip_preserves_every_event(script: SessionScript) -> None:
    runs = Runs(script)
    for record in runs.memory.stored_records:
        assert decode_line(encode_line(record)) == record
    for run in runs.both():
        assert run.stored_records == run.live_records, "the store lost or changed records"
    assert tuple(runs.reread) == runs.jsonl.stored_records, "a reopened file reads differently"
    if runs.same_schedule:
        assert runs.jsonl.stored_records == runs.memory.stored_records, (
            "the same script on the same clock wrote different logs to the two stores")


@PROPERTY
@given(session_scripts())
def test_every_call_ends_exactly_once(script: SessionScript) -> None:
    runs = Runs(script)
    for run in runs.both():
        records = run.stored_records
        ends = terminals(records)
        requested = requests(records)
        assert set(ends) == set(requested)
        assert all(len(events) == 1 for events in ends.values()), {
            c: [type(e).__name__ for e in events] for c, events in ends.items() if len(events) > 1}
        assert run.open_calls == ()
        assert run.pending_approvals == ()


@PROPERTY
@given(session_scripts())
def test_only_a_timeout_or_the_host_cancels_a_call(script: SessionScript) -> None:
    # a call that fails never cancels its siblings; what cancels is a tool's timeout (exactly
    # the nested calls still open below the call that timed out, each with its own cancelled
    # event, before the call that timed out ends) or the host cancelling a prompt (every open
    # call of the batch then, nested ones included, deepest first)
    runs = Runs(script)
    for run in runs.both():
        records = run.stored_records
        ends = terminals(records)
        cancelled = ids_of(records, ToolCallCancelled)
        for call_id in cancelled:
            turn = turn_of(call_id)  # 0 for the host's calls, which no prompt cancels
            ancestors = [call_id.rsplit("/", k)[0] for k in range(1, call_id.count("/") + 1)]
            timed_out = any(isinstance(ends[a][0], ToolCallFailed) and ends[a][0].kind == "timeout"
                            for a in ancestors)
            assert timed_out or turn in run.cancelled_turns, (
                f"{call_id} was cancelled without a timeout above it or a cancelled prompt")
        position = {id(r): i for i, r in enumerate(records)}
        for record in records:
            event = record.event
            if isinstance(event, ToolCallFailed) and event.kind == "timeout":
                below = [c for c in ends if c.startswith(event.call_id + "/")]
                for child in below:  # every call below ended before the timed-out call did
                    end_record = next(r for r in records
                                      if isinstance(r.event, TERMINAL_EVENTS)
                                      and r.event.call_id == child)
                    assert position[id(end_record)] < position[id(record)]


@PROPERTY
@given(session_scripts())
def test_nested_calls_start_only_under_a_running_parent(script: SessionScript) -> None:
    runs = Runs(script)
    for run in runs.both():
        running: set[str] = set()
        children: Counter[str] = Counter()
        for record in run.stored_records:
            event = record.event
            if isinstance(event, ToolCallRequested) and event.parent_id is not None:
                assert event.origin == "nested"
                assert event.parent_id in running, f"{event.call_id}: parent not running"
                assert event.call_id == f"{event.parent_id}/{children[event.parent_id]}"
                children[event.parent_id] += 1
            elif isinstance(event, ToolCallRequested):
                assert event.origin in ("model", "host")
                assert "/" not in event.call_id
            elif isinstance(event, ToolExecutionStarted):
                running.add(event.call_id)
            elif isinstance(event, TERMINAL_EVENTS):
                running.discard(event.call_id)
                assert not any(c.startswith(event.call_id + "/") for c in running), (
                    f"{event.call_id} ended while a nested call of it was still running")
        assert running == set()


@PROPERTY
@given(session_scripts())
def test_the_transcript_has_one_result_per_top_level_call_in_order(
    script: SessionScript,
) -> None:
    runs = Runs(script)
    for run in runs.both():
        records = run.stored_records
        ends = terminals(records)
        expected: list[Any] = []
        for record in records:
            event = record.event
            if isinstance(event, UserMessage):
                expected.append(event)
            elif isinstance(event, AssistantMessage):
                expected.append(event)
                for index, asked in enumerate(event.tool_calls):
                    call_id = f"{event.turn}.{index}"
                    expected.append(ToolResultEntry(
                        call_id=call_id, model_call_id=asked.id, name=asked.name,
                        result=ends[call_id][0].result))
        assert list(run.transcript) == expected
        top_level = [c for c, req in requests(records).items() if req.origin == "model"]
        entries = [e.call_id for e in run.transcript if isinstance(e, ToolResultEntry)]
        assert sorted(entries) == sorted(top_level)  # the host's calls are not in it
        assert len(entries) == len(set(entries))
        assert not any("/" in call_id for call_id in entries)


@PROPERTY
@given(session_scripts())
def test_the_host_gets_what_the_log_says_about_its_calls(script: SessionScript) -> None:
    runs = Runs(script)
    for run in runs.both():
        records = run.stored_records
        hosted = [c for c, req in requests(records).items() if req.origin == "host"]
        assert hosted == [f"h{n}" for n in range(len(script.host_calls))]
        assert sorted(run.harness.host_outcomes) == sorted(hosted)
        ends = terminals(records)
        for call_id, outcome in run.harness.host_outcomes.items():
            assert outcome.result == ends[call_id][0].result


@PROPERTY
@given(session_scripts())
def test_calls_that_were_stopped_never_ran_their_body(script: SessionScript) -> None:
    runs = Runs(script)
    for run in runs.both():
        records = run.stored_records
        check_bodies(records, run.harness.body_runs)
        started = ids_of(records, ToolExecutionStarted)
        assert len(started) == len(set(started))
        ends = terminals(records)
        for call_id in started:
            # a started call's body ran once, unless the host cancelled it before it could
            if call_id not in run.harness.body_runs:
                assert isinstance(ends[call_id][0], ToolCallCancelled), call_id
            else:
                assert run.harness.body_runs[call_id] == 1
        for call_id, (end,) in ends.items():
            stopped = isinstance(end, (ToolCallBlocked, ToolCallDenied)) or (
                isinstance(end, ToolCallFailed) and end.kind in NEVER_RAN)
            if stopped:
                assert call_id not in run.harness.body_runs, f"{call_id} ran although {end}"
                assert call_id not in started


@PROPERTY
@given(session_scripts())
def test_approval_is_asked_exactly_when_the_policy_says_ask(script: SessionScript) -> None:
    runs = Runs(script)
    for run in runs.both():
        records = run.stored_records
        check_approvals(records, rules=script.rules, asked=run.harness.approver_asked)
        asks = [r.event.call_id for r in records
                if isinstance(r.event, PolicyDecided) and r.event.decision == "ask"]
        requested = ids_of(records, ApprovalRequested)
        ends = terminals(records)
        # no await separates the verdict from the request: even a cancellation cannot
        assert requested == asks
        resolved = {r.event.call_id: r.event for r in records
                    if isinstance(r.event, ApprovalResolved)}
        for call_id in set(requested) - set(resolved):  # cancelled while the approver was asked
            assert isinstance(ends[call_id][0], ToolCallCancelled), call_id
        names = {c: req.name for c, req in requests(records).items()}
        for call_id, resolution in resolved.items():
            answer = run.harness.expected_answer(names[call_id])
            assert resolution.granted is (answer in GRANTING), (call_id, answer, resolution)
            assert resolution.scope == ("session" if answer.endswith("_session") else "once")
            (end,) = ends[call_id]
            if not resolution.granted:
                assert isinstance(end, ToolCallDenied) and end.by == "approver"


@PROPERTY
@given(session_scripts())
def test_the_policy_judges_with_the_rules_and_the_grants_the_log_held(
    script: SessionScript,
) -> None:
    runs = Runs(script)
    for run in runs.both():
        records = run.stored_records
        annotations: dict[str, Any] = {}
        names: dict[str, str] = {}
        grants: dict[str, ApprovalResolved] = {}
        for record in records:
            event = record.event
            if isinstance(event, ToolRegistered):
                annotations[event.spec.name] = event.spec.annotations
            elif isinstance(event, ToolCallRequested):
                names[event.call_id] = event.name
            elif isinstance(event, PolicyDecided):
                name = names[event.call_id]
                verdict = decide(name, annotations[name], rules=script.rules,
                                 session_grants=grants)
                assert (event.decision, event.reason) == (verdict.decision, verdict.reason)
            elif isinstance(event, ApprovalResolved) and event.scope == "session":
                grants[names[event.call_id]] = event  # a refusal's reason is quoted
        for call_id, (end,) in terminals(records).items():
            verdicts = [r.event for r in records
                        if isinstance(r.event, PolicyDecided) and r.event.call_id == call_id]
            if verdicts and verdicts[0].decision == "deny":
                assert isinstance(end, ToolCallDenied) and end.by == "policy"


@PROPERTY
@given(session_scripts())
def test_tools_and_handlers_see_what_the_log_says(script: SessionScript) -> None:
    runs = Runs(script)
    for run in runs.both():
        records = run.stored_records
        harness = run.harness
        ends = terminals(records)
        # a body gets the final arguments: the request's, or the last rewrite's
        arguments = final_arguments(records)
        for call_id, seen in harness.body_arguments.items():
            assert seen == arguments[call_id]
        # ctx.execute_tool never raises for a tool failure, and hands back the child's result
        assert harness.nested_raised == []
        for call_id, outcome in harness.nested_outcomes.items():
            assert outcome.result == ends[call_id][0].result
            assert outcome.is_error is ends[call_id][0].result.is_error
        # every block and rewrite names a handler that does that to this tool
        specs = dict(enumerate(script.call_handlers))
        names = {c: req.name for c, req in requests(records).items()}
        for record in records:
            event = record.event
            if isinstance(event, ToolCallBlocked):
                kind, index = event.by.split("_handler_")
                assert kind in ("block", "raise")
                assert specs[int(index)].kind == kind
                assert names[event.call_id] in specs[int(index)].names
            elif isinstance(event, ToolCallRewritten) and event.by == "approver":
                answer = harness.expected_answer(names[event.call_id])
                assert answer in ("edit", "edit_bad")
                assert event.arguments == ({"n": 7} if answer == "edit" else {"n": "seven"})
            elif isinstance(event, ToolCallRewritten):
                kind, index = event.by.split("_handler_")
                assert specs[int(index)].kind == kind == "rewrite"
                assert names[event.call_id] in specs[int(index)].names


# -- where a lone call runs does not show in the log ------------------------------------------


def by_call(records: tuple[Record, ...]) -> tuple[dict[str, list[Any]], list[Any]]:
    """The events of each call in the order written, by call id; and the session's own
    events (messages, model turns, registrations), in order."""
    calls: dict[str, list[Any]] = {}
    rest: list[Any] = []
    for record in records:
        call_id = getattr(record.event, "call_id", None)
        if call_id is None:
            rest.append(record.event)
        else:
            calls.setdefault(call_id, []).append(record.event)
    return calls, rest


def answering_at_once(script: SessionScript, approving: str) -> tuple[SessionScript, Any]:
    """The script and an approver that never answers later: ``approve_all`` or ``deny_all``
    (``approving`` "grant" or "deny"; the script's own approver then answers the same), or the
    script's own approver declared with ``at_once`` ("declared": it answers as drawn, grants,
    refusals, for the session, edits, and raises)."""
    if approving == "declared":
        return script, at_once(script.build().approver)
    script = attrs.evolve(script, answers={name: approving for name in script.answers})
    return script, approve_all if approving == "grant" else deny_all


@PROPERTY
@given(session_scripts(cancellations=False), st.sampled_from(["grant", "deny", "declared"]))
def test_a_lone_call_in_the_prompt_s_task_writes_what_a_task_of_the_session_s_would(
    script: SessionScript, approving: str,
) -> None:
    """Under an approver that never answers later (``approve_all``, ``deny_all``, or one
    declared with ``at_once``), a batch of one call runs in the prompt's own task; under the
    script's own approver, undeclared and answering the same, every call runs in a task of the
    session's nursery (engine/runtime/batch.py). Each call's events, the session's own events and the
    transcript are the same, down to the traceback of an approver that raised. (Only the
    order of the calls of a parallel batch, which the scheduler picks, may differ between the
    runs: the scheduler passes the other run saves move its random choices. For the same
    reason the host's cancellations are left out: a prompt cancelled "now" stops a call at its
    next checkpoint, and which of the call's steps that is depends on those passes, on either
    path; tests/runtime/test_caller_task.py cancels a lone call in the prompt's task.)"""
    script, approver = answering_at_once(attrs.evolve(script, host_calls=()), approving)
    inline = trio.run(partial(run_script, script, approver=approver), clock=virtual_clock())
    in_tasks = trio.run(run_script, script, clock=virtual_clock())
    assert by_call(inline.stored_records) == by_call(in_tasks.stored_records)
    assert inline.transcript == in_tasks.transcript
    assert inline.cancelled_turns == in_tasks.cancelled_turns


@PROPERTY
@given(session_scripts(), st.sampled_from(["grant", "deny", "declared"]))
def test_a_lone_call_in_the_prompt_s_task_keeps_every_invariant_when_the_host_cancels(
    script: SessionScript, approving: str,
) -> None:
    """The same scripts with the host's cancellations, every lone call in the prompt's task:
    whatever a cancellation stops, the log keeps every invariant (one terminal event a call,
    the model's turns answered, nesting, availability, the approver's answers, the transcript
    the log folds to, each body run at most once)."""
    script, approver = answering_at_once(script, approving)
    run = trio.run(partial(run_script, script, approver=approver), clock=virtual_clock())
    check_log(run.stored_records, state=fold(run.stored_records), transcript=run.transcript,
              body_runs=run.harness.body_runs, rules=script.rules, closed=True)
