"""What the projection hands out about calls: frozen views that never change, over live
records that the reducers change in place (and only they).

The live record is a fast path beside the frozen view (docs/performance.md, "One codec"): the
properties at the end check, for random sessions, that every view the projection hands out
equals the one a fold of frozen values builds, and that the two classes have the same fields.
"""

from __future__ import annotations

from typing import Any

import attrs
import pytest
import trio
from hypothesis import given

from engine.core.lifecycle import CallStage, next_stage
from engine.core.reducers import LogInconsistency, Projection
from engine.core.views import CallView, LiveCall
from events.results import error_result
from events.types import (
    TERMINAL_EVENTS,
    ApprovalResolved,
    ModelToolCall,
    PolicyDecided,
    ToolCallCompleted,
    ToolCallRequested,
    ToolCallRewritten,
    ToolExecutionStarted,
    ToolProgress,
)
from tests.strategies import SessionScript, run_script, session_scripts
from tests.core.test_lifecycle import _requested, started_with_batch
from tests.strategies import PROPERTY, virtual_clock

RESULT = error_result("x")


def requested_call():  # type: ignore[no-untyped-def]
    log = started_with_batch(ModelToolCall(id="m0", name="t", arguments={}))
    return log.add(_requested("1.0"))


def test_a_view_handed_out_keeps_the_call_as_it_was() -> None:
    log = requested_call()
    before = log.projection.calls["1.0"]
    log.add(ToolCallRewritten(call_id="1.0", arguments={"a": 1}, by="h"),
            PolicyDecided(call_id="1.0", decision="allow", reason="r"))
    after = log.projection.calls["1.0"]
    assert before.stage is CallStage.REQUESTED and before.arguments == {}
    assert before.policy is None and before.rewrites == ()
    assert after.stage is CallStage.ALLOWED and after.arguments == {"a": 1}
    assert after.requested_arguments == {} and len(after.rewrites) == 1
    assert after.policy == PolicyDecided(call_id="1.0", decision="allow", reason="r")


def test_views_are_frozen_and_one_per_state() -> None:
    log = requested_call()
    view = log.projection.calls["1.0"]
    assert isinstance(view, CallView)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        view.name = "other"  # type: ignore[misc]
    assert log.projection.calls["1.0"] is view  # nothing happened: the same view
    log.add(PolicyDecided(call_id="1.0", decision="allow", reason="r"))
    assert log.projection.calls["1.0"] is not view


def test_the_live_record_follows_every_event_and_matches_its_view() -> None:
    log = requested_call()
    live = log.projection.live_calls["1.0"]
    log.add(PolicyDecided(call_id="1.0", decision="allow", reason="r"),
            ToolExecutionStarted(call_id="1.0"),
            ToolProgress(call_id="1.0", message="half"),
            ToolProgress(call_id="1.0", message="most"))
    assert live.stage is CallStage.RUNNING and live.started and live.progress_count == 2
    assert live.last_progress is not None and live.last_progress.message == "most"
    assert live.status == "running" and not live.closed and live.result is None
    log.add(ToolCallCompleted(call_id="1.0", result=RESULT))
    assert live.closed and live.result is RESULT and live.status == "completed"
    view = log.projection.calls["1.0"]
    assert attrs.asdict(view, recurse=False) == {
        field.name: getattr(live, field.name) for field in attrs.fields(CallView)
    }


def test_a_refused_event_changes_neither_the_live_record_nor_its_view() -> None:
    log = requested_call()
    view = log.projection.calls["1.0"]
    log.refuses(log.next(ToolExecutionStarted(call_id="1.0")), "tool_execution_started")
    assert log.projection.live_calls["1.0"].stage is CallStage.REQUESTED
    assert log.projection.calls["1.0"] is view


def test_calls_is_a_read_only_mapping_of_views() -> None:
    log = requested_call()
    calls = log.projection.calls
    assert list(calls) == ["1.0"] and len(calls) == 1
    assert "1.0" in calls and "2.0" not in calls
    assert calls.get("2.0") is None
    with pytest.raises(KeyError):
        calls["2.0"]
    assert dict(calls) == {"1.0": calls["1.0"]}
    with pytest.raises(TypeError):
        calls["1.0"] = calls["1.0"]  # type: ignore[index]
    with pytest.raises(TypeError):
        log.projection.live_calls["1.0"] = log.projection.live_calls["1.0"]  # type: ignore[index]


# -- the live record against a fold of frozen values --------------------------------------------


def test_live_calls_and_call_views_have_the_same_fields() -> None:
    fields = tuple(field.name for field in attrs.fields(CallView))
    assert LiveCall.__slots__ == fields
    live = LiveCall("1.0", "t", {"a": 1}, "model", None, "m0")
    unset = [name for name in fields if not hasattr(live, name)]
    assert not unset, f"LiveCall.__init__ does not set CallView's field(s) {unset}"
    assert live.view() == CallView(call_id="1.0", name="t", arguments={"a": 1},
                                   requested_arguments={"a": 1}, origin="model", parent_id=None,
                                   model_call_id="m0")


def reference_view(view: CallView | None, event: Any) -> CallView:
    """A call after ``event``, as a new frozen value: what the live record must amount to."""
    if isinstance(event, ToolCallRequested):
        return CallView(call_id=event.call_id, name=event.name, arguments=event.arguments,
                        requested_arguments=event.arguments, origin=event.origin,
                        parent_id=event.parent_id, model_call_id=event.model_call_id)
    assert view is not None
    changes: dict[str, Any] = {"stage": next_stage(view.stage, event)}
    if isinstance(event, ToolCallRewritten):
        changes.update(arguments=event.arguments, rewrites=(*view.rewrites, event))
    elif isinstance(event, PolicyDecided):
        changes.update(policy=event)
    elif isinstance(event, ApprovalResolved):
        changes.update(approval=event)
    elif isinstance(event, ToolExecutionStarted):
        changes.update(started=True)
    elif isinstance(event, ToolProgress):
        changes.update(progress_count=view.progress_count + 1, last_progress=event)
    elif isinstance(event, TERMINAL_EVENTS):
        changes.update(terminal=event)
    return attrs.evolve(view, **changes)


@PROPERTY
@given(session_scripts())
def test_every_view_of_a_live_record_equals_the_fold_of_frozen_values(
        script: SessionScript) -> None:
    run = trio.run(run_script, script, clock=virtual_clock())
    projection = Projection()
    reference: dict[str, CallView] = {}
    for record in run.stored_records:
        projection.apply(record)
        call_id = getattr(record.event, "call_id", None)
        if call_id is None:
            continue
        reference[call_id] = reference_view(reference.get(call_id), record.event)
        view = projection.calls[call_id]
        assert view == reference[call_id], f"call {call_id} after record {record.seq}"
        assert (view.closed, view.result, view.status) == (
            reference[call_id].closed, reference[call_id].result, reference[call_id].status)
    assert dict(projection.calls) == reference
    assert dict(run.snapshot.calls) == reference  # the live session's own views
