"""What the projection hands out about calls: frozen views that never change, over live
records that the reducers change in place (and only they)."""

from __future__ import annotations

import attrs
import pytest

from engine.lifecycle import CallState
from engine.reducers import LogInconsistency
from engine.views import CallView
from events.results import error_result
from events.types import (
    ModelToolCall,
    PolicyDecided,
    ToolCallCompleted,
    ToolCallRewritten,
    ToolExecutionStarted,
    ToolProgress,
)

from tests.test_lifecycle import _requested, started_with_batch

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
    assert before.state is CallState.REQUESTED and before.arguments == {}
    assert before.verdict is None and before.rewrites == ()
    assert after.state is CallState.ALLOWED and after.arguments == {"a": 1}
    assert after.requested_arguments == {} and len(after.rewrites) == 1
    assert after.verdict == PolicyDecided(call_id="1.0", decision="allow", reason="r")


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
    assert live.state is CallState.RUNNING and live.started and live.progress_count == 2
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
    assert log.projection.live_calls["1.0"].state is CallState.REQUESTED
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
