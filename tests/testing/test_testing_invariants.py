"""The invariants of engine.testing, each a property of every log the engine writes, and each
shown to fail, with a clear message, on a log that breaks it.

The properties run scripted sessions (:func:`engine.testing.session_scripts`: valid and invalid
calls, unknown, hidden and model-only tools, handlers that block, rewrite or raise, approvers
that grant, refuse or raise, tools that raise, time out or fail softly, nested and parallel
calls, and prompts the host cancels part-way) in virtual time on a MemoryStore, and check the
log with :mod:`engine.testing.invariants`. The state machine (tests/testing/test_testing_machine.py)
checks them all after every step of a live session.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from engine import Annotations, ApprovalRequest, Session, ToolResult, fold, text, tool
from engine.core.reducers import ToolResultEntry
from engine.models import FauxModel, faux_text, faux_tool_call
from engine.testing import (
    BodyRuns,
    check_approvals,
    check_availability,
    check_bodies,
    check_codec,
    check_fold,
    check_log,
    check_model_turns,
    check_nesting,
    check_progress,
    check_store_round_trip,
    check_stored,
    check_terminals,
    check_transcript,
    counted,
    counting_clock,
    run_script,
    session_scripts,
)
from engine.testing.machine import ScriptModel
from engine.testing.scripts import ScriptRun, SessionScript
from events import JsonlStore, MemoryStore
from events.modelturns import ModelRequested, ModelResponded
from events.types import (
    ApprovalRequested,
    ApprovalResolved,
    PolicyDecided,
    Record,
    ToolCallCompleted,
    ToolCallRequested,
    ToolExecutionStarted,
    ToolProgress,
    ToolRegistered,
)

# one scripted session per example; the profile sets how many (tests/conftest.py)
PROPERTY = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow],
                    phases=[phase for phase in Phase if phase is not Phase.explain])


def virtual(script: SessionScript, store: Any = None) -> ScriptRun:
    """Run a script in virtual time (its tools sleep and time out)."""
    return trio.run(run_script, script, store if store is not None else MemoryStore(),
                    clock=trio.testing.MockClock(autojump_threshold=0))


# -- each invariant, as a property of every log the engine writes ----------------------------


@PROPERTY
@given(session_scripts())
def test_a_fold_of_the_log_equals_the_live_state(script: SessionScript) -> None:
    run = virtual(script)
    check_fold(run.stored_records, run.snapshot)


@PROPERTY
@given(session_scripts())
def test_every_requested_call_has_exactly_one_terminal_event(script: SessionScript) -> None:
    run = virtual(script)
    check_terminals(run.stored_records, closed=True)  # every prompt ended or was cancelled


@PROPERTY
@given(session_scripts())
def test_every_child_was_requested_while_its_parent_ran(script: SessionScript) -> None:
    check_nesting(virtual(script).stored_records)


@PROPERTY
@given(session_scripts())
def test_every_progress_update_is_written_while_its_call_runs(script: SessionScript) -> None:
    check_progress(virtual(script).stored_records)


@PROPERTY
@given(session_scripts())
def test_the_transcript_holds_exactly_the_top_level_calls_in_order(script: SessionScript) -> None:
    run = virtual(script)
    check_transcript(run.stored_records, run.transcript)


@PROPERTY
@given(session_scripts())
def test_a_blocked_denied_or_unavailable_call_never_runs_its_body(script: SessionScript) -> None:
    run = virtual(script)
    check_bodies(run.stored_records, run.harness.body_runs)
    check_availability(run.stored_records)


@PROPERTY
@given(session_scripts())
def test_approval_is_asked_exactly_when_the_policy_says_ask(script: SessionScript) -> None:
    run = virtual(script)
    check_approvals(run.stored_records, rules=script.rules, asked=run.harness.approver_asked)


@PROPERTY
@given(session_scripts())
def test_every_event_survives_the_codec_and_each_store_round_trip(script: SessionScript) -> None:
    run = virtual(script)
    check_codec(run.stored_records)
    check_stored(run.live_records, run.stored_records)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "log.jsonl")
        for store in (MemoryStore(), JsonlStore(path)):
            try:
                trio.run(check_store_round_trip, run.stored_records, store)
            finally:
                store.close()
        reopened = JsonlStore(path)  # a new process reading the file
        try:
            check_stored(run.stored_records,
                         trio.run(reopened.read, run.stored_records[0].session_id))
        finally:
            reopened.close()


@PROPERTY
@given(session_scripts(cancellations=False), st.data())
def test_a_cancellation_at_any_step_leaves_a_consistent_log(
    script: SessionScript, data: st.DataObject
) -> None:
    # run the script once to see how long its first prompt's log is, then again with the host
    # cancelling that prompt once the session has recorded a drawn number of records
    whole = virtual(script)
    length = len(whole.stored_records)
    cut = data.draw(st.integers(0, length), label="cancel after records")
    harness = script.build()
    store = MemoryStore()

    async def main() -> None:
        model = ScriptModel(harness.model)  # after the script: text, so a new prompt ends
        async with Session.open(store, model=model, tools=harness.tools,
                                approver=harness.approver, rules=script.rules,
                                max_depth=script.max_depth, clock=counting_clock(),
                                session_id="s", create=True) as session:
            for handler in harness.call_handlers:
                session.on_tool_call(handler)
            for result_handler in harness.result_handlers:
                session.on_tool_result(result_handler)
            with trio.CancelScope() as scope:
                async with trio.open_nursery() as nursery:
                    async def cancel() -> None:
                        async for record in session.follow(after=cut):
                            scope.cancel()
                            return
                    nursery.start_soon(cancel)
                    await session.prompt("go")
                    nursery.cancel_scope.cancel()
            check_log(await store.read("s"), state=session.state, transcript=session.transcript,
                      body_runs=harness.body_runs, rules=script.rules,
                      asked=harness.approver_asked, closed=True)
            # and the session goes on: a new prompt is accepted and ends every call it makes
            await session.prompt("again")
            check_log(await store.read("s"), state=session.state, body_runs=harness.body_runs,
                      rules=script.rules, asked=harness.approver_asked, closed=True)

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


# -- each invariant fails on a log that breaks it --------------------------------------------

SAFE = Annotations(read_only=True, open_world=False)


@attrs.frozen
class Sample:
    records: tuple[Record, ...]
    state: Any
    transcript: tuple[Any, ...]
    runs: BodyRuns
    asked: tuple[str, ...]


def sample_session() -> Sample:
    """A real log: ``read``, ``wipe`` (granted), ``outer`` (a nested ``read``) and ``wipe``
    (refused), in one batch."""
    runs = BodyRuns()

    @tool(annotations=SAFE)
    async def read(call: Any, ctx: Any) -> ToolResult:
        return ToolResult(content=[text("read")])

    @tool(annotations=Annotations(destructive=True))
    async def wipe(call: Any, ctx: Any) -> ToolResult:
        return ToolResult(content=[text("wiped")])

    @tool(annotations=SAFE)
    async def outer(call: Any, ctx: Any) -> ToolResult:
        inner = await ctx.execute_tool("read")
        return ToolResult(content=[text(f"outer saw {inner.result.text}")])

    asked: list[str] = []

    async def approver(request: ApprovalRequest) -> bool:
        asked.append(request.call_id)
        return request.call_id == "1.1"

    async def main() -> Sample:
        model = FauxModel([[faux_tool_call("read"), faux_tool_call("wipe"),
                            faux_tool_call("outer"), faux_tool_call("wipe")], faux_text("done")])
        store = MemoryStore()
        tools = [counted(t, runs) for t in (read, wipe, outer)]
        async with Session.open(store, model=model, tools=tools, approver=approver,
                                clock=counting_clock(), session_id="s", create=True) as session:
            await session.prompt("go")
            return Sample(tuple(await store.read("s")), session.state.snapshot(),
                          tuple(session.transcript), runs, tuple(asked))

    return trio.run(main)


@pytest.fixture(scope="module")
def sample() -> Sample:
    return sample_session()


def index(records: tuple[Record, ...], kind: type[Any], call_id: str) -> int:
    return next(i for i, r in enumerate(records)
                if isinstance(r.event, kind) and r.event.call_id == call_id)


def test_the_sample_log_keeps_every_invariant(sample: Sample) -> None:
    assert [sample.state.calls[c].status for c in ("1.0", "1.1", "1.2", "1.2/0", "1.3")] == [
        "completed", "completed", "completed", "completed", "denied"]
    check_log(sample.records, state=sample.state, transcript=sample.transcript,
              body_runs=sample.runs, asked=sample.asked, closed=True)


def test_check_fold_fails_when_the_live_state_is_not_the_fold(sample: Sample) -> None:
    with pytest.raises(AssertionError, match="differs from the live state in last_seq"):
        check_fold(sample.records[:-1], sample.state)
    with pytest.raises(AssertionError, match="does not fold"):
        check_fold(sample.records[1:], sample.state)


def test_check_terminals_fails_on_a_second_end_and_on_an_open_call(sample: Sample) -> None:
    records = list(sample.records)
    end = index(sample.records, ToolCallCompleted, "1.0")
    with pytest.raises(AssertionError, match="for call 1.0 after its terminal event"):
        check_terminals([*records, records[end]])
    without = records[:end] + records[end + 1:]
    check_terminals(without)  # an open call is fine while the session may go on
    with pytest.raises(AssertionError, match=r"left open: 1\.0"):
        check_terminals(without, closed=True)


def test_check_nesting_fails_when_a_child_is_requested_before_its_parent_runs(
    sample: Sample,
) -> None:
    records = list(sample.records)
    child = index(sample.records, ToolCallRequested, "1.2/0")
    started = index(sample.records, ToolExecutionStarted, "1.2")
    moved = records[:started] + [records[child]] + [
        r for i, r in enumerate(records[started:], start=started) if i != child]
    with pytest.raises(AssertionError, match=r"nested call 1\.2/0 \(read\) was requested while "
                                             r"its parent 1\.2 was requested, not started"):
        check_nesting(moved)
    renamed = [attrs.evolve(r, event=attrs.evolve(r.event, call_id="1.2/5"))
               if i == child else r for i, r in enumerate(records)]
    with pytest.raises(AssertionError, match=r"should be named 1\.2/0"):
        check_nesting(renamed)


def test_check_progress_fails_on_an_update_of_a_call_that_does_not_run_or_a_forged_source(
    sample: Sample,
) -> None:
    records = list(sample.records)

    def update(call_id: str, source: str | None = None) -> Record:
        return Record(session_id="s", seq=0, time=0.0,
                      event=ToolProgress(call_id=call_id, message="m", source=source))

    child = index(sample.records, ToolCallRequested, "1.2/0")
    check_progress(records[:child + 1] + [update("1.2", "1.2/0")] + records[child + 1:])
    with pytest.raises(AssertionError, match=r"forwarded progress from '1\.3'"):
        check_progress(records[:child + 1] + [update("1.2", "1.3")] + records[child + 1:])
    with pytest.raises(AssertionError, match=r"forwarded progress from '1\.2/0'"):
        check_progress(records[:child] + [update("1.2", "1.2/0")] + records[child:])
    end = index(sample.records, ToolCallCompleted, "1.0")
    with pytest.raises(AssertionError, match=r"progress of call 1\.0, which was not running"):
        check_progress(records[:end + 1] + [update("1.0")] + records[end + 1:])


def test_check_transcript_fails_on_a_nested_entry_and_on_the_wrong_order(sample: Sample) -> None:
    entries = list(sample.transcript)
    results = [i for i, e in enumerate(entries) if isinstance(e, ToolResultEntry)]
    swapped = list(entries)
    swapped[results[0]], swapped[results[1]] = swapped[results[1]], swapped[results[0]]
    with pytest.raises(AssertionError, match=r"transcript entry 2 is the result of call 1\.1"):
        check_transcript(sample.records, swapped)
    nested = [*entries, attrs.evolve(entries[results[0]], call_id="1.2/0")]
    with pytest.raises(AssertionError, match=r"nested call\(s\) 1\.2/0"):
        check_transcript(sample.records, nested)
    with pytest.raises(AssertionError, match="lacks entries"):
        check_transcript(sample.records, entries[:-1])


def test_check_bodies_fails_when_a_denied_call_ran(sample: Sample) -> None:
    runs = BodyRuns()
    runs.record(attrs.evolve(_call("1.3"), name="wipe"))
    with pytest.raises(AssertionError, match=r"call 1\.3 \(wipe\) ran its body although it was "
                                             r"denied by the approver"):
        check_bodies(sample.records, runs)
    twice = BodyRuns()
    twice.record(_call("1.0"))
    twice.record(_call("1.0"))
    with pytest.raises(AssertionError, match="ran its body 2 times"):
        check_bodies(sample.records, twice)


def _call(call_id: str) -> Any:
    from engine.core.tools import ToolCall

    return ToolCall(call_id=call_id, name="read", arguments={})


def test_check_availability_fails_when_a_hidden_tool_was_run_for_the_model(
    sample: Sample,
) -> None:
    hidden = [attrs.evolve(r, event=ToolRegistered(spec=attrs.evolve(r.event.spec,
                                                                     exposure="hidden")))
              if isinstance(r.event, ToolRegistered) and r.event.spec.name == "read" else r
              for r in sample.records]
    with pytest.raises(AssertionError, match=r"call 1\.0 \(read, a model call\) went past the "
                                             r"availability check .* exposure is 'hidden'"):
        check_availability(hidden)


def test_check_approvals_fails_on_a_decision_the_policy_would_not_give(sample: Sample) -> None:
    records = list(sample.records)
    decided = index(sample.records, PolicyDecided, "1.1")
    lenient = [attrs.evolve(r, event=attrs.evolve(r.event, decision="allow"))
               if i == decided else r for i, r in enumerate(records)]
    with pytest.raises(AssertionError, match=r"the policy said allow .* for call 1\.1 \(wipe\); "
                                             r".* it says ask"):
        check_approvals(lenient)
    asked = index(sample.records, ApprovalRequested, "1.1")
    resolved = index(sample.records, ApprovalResolved, "1.1")
    unasked = [r for i, r in enumerate(records) if i not in (asked, resolved)]
    with pytest.raises(AssertionError, match=r"the policy said ask for call 1\.1 \(wipe\), but "
                                             r"its next event is tool_execution_started"):
        check_approvals(unasked)
    with pytest.raises(AssertionError, match=r"approval of call\(s\) 1\.3, but the approver was "
                                             r"never asked"):
        check_approvals(records, asked=["1.1"])


def test_check_codec_fails_on_a_value_json_cannot_keep(sample: Sample) -> None:
    first = next(r for r in sample.records if isinstance(r.event, ToolCallRequested))
    tupled = attrs.evolve(first, event=attrs.evolve(first.event, arguments={"xs": (1, 2)}))
    with pytest.raises(AssertionError, match="changes through the codec"):
        check_codec([tupled])


def test_check_stored_and_the_store_round_trip_fail_on_a_store_that_loses_a_record(
    sample: Sample,
) -> None:
    with pytest.raises(AssertionError, match="recorded 9 records and its store holds 8"
                       if len(sample.records) == 9 else "its store holds"):
        check_stored(sample.records, sample.records[:-1])

    class Forgetful(MemoryStore):
        async def read(self, session_id: str, after: int = 0) -> list[Record]:
            return (await super().read(session_id, after))[:-1]

    with pytest.raises(AssertionError, match="its store holds"):
        trio.run(check_store_round_trip, sample.records, Forgetful())


def test_the_invariants_read_a_jsonl_log_as_well(sample: Sample, tmp_path: Path) -> None:
    store = JsonlStore(str(tmp_path / "log.jsonl"))
    try:
        trio.run(check_store_round_trip, sample.records, store)
    finally:
        store.close()
    reopened = JsonlStore(str(tmp_path / "log.jsonl"))
    try:
        records = trio.run(reopened.read, "s")
    finally:
        reopened.close()
    check_log(records, state=fold(records), closed=True)


@pytest.mark.parametrize("idempotent", [True, None])
def test_a_newer_version_cannot_make_a_half_run_call_safe_to_run_again(
    idempotent: bool | None,
) -> None:
    # the first process starts `nest` (not idempotent), whose nested call waits for approval;
    # the next process registers a new version of `nest` and resumes: whatever the new version
    # says, the call started under a version that was not idempotent, so it is not run again
    from engine import LATER
    from engine.testing import nest_tool
    from engine.testing.machine import ScriptModel

    runs = BodyRuns()

    @tool(input_schema={"type": "object"})
    async def ask_me(call: Any, ctx: Any) -> ToolResult:
        return ToolResult(content=[text("ran")])

    async def later(request: ApprovalRequest) -> Any:
        return LATER

    async def main() -> list[Record]:
        store = MemoryStore()
        nest = nest_tool(runs)
        tools = [counted(ask_me, runs), nest]
        model = ScriptModel(FauxModel([faux_tool_call("nest", {"plan": [{"name": "ask_me"}]})]))
        clock = counting_clock()
        async with Session.open(store, model=model, tools=tools, approver=later,
                                session_id="s", create=True, clock=clock) as session:
            assert (await session.prompt("go")).stop == "paused"
        async with Session.open(store, model=model, tools=tools, approver=later,
                                session_id="s", create=True, clock=clock) as session:
            await session.register(attrs.evolve(nest, annotations=Annotations(
                read_only=True, open_world=False, idempotent=idempotent)))
            await session.resume()
            return list(session.records)

    records = trio.run(main)
    check_log(records, body_runs=runs)
    assert runs["1.0"] == 1
    twice = BodyRuns()
    twice.record(_call("1.0"))
    twice.record(_call("1.0"))
    with pytest.raises(AssertionError, match="ran its body 2 times"):
        check_bodies(records, twice)


def test_check_model_turns_fails_on_an_unasked_answer_and_an_unanswered_request(
    sample: Sample,
) -> None:
    records = list(sample.records)
    asked = next(i for i, r in enumerate(records) if isinstance(r.event, ModelRequested))
    answered = asked + 1
    assert isinstance(records[answered].event, ModelResponded)
    with pytest.raises(AssertionError, match="which was not asked for"):
        check_model_turns(records[:asked] + records[asked + 1:])
    with pytest.raises(AssertionError, match="instead of its assistant message"):
        check_model_turns(records[:answered + 1] + records[answered + 2:])
    cut = records[:answered]  # the process stopped while the model was asked
    check_model_turns(cut)
    with pytest.raises(AssertionError, match="never answered or failed"):
        check_model_turns(cut, closed=True)
