"""The per-call transition table, and the reducers' refusal of logs it (or the session) forbids.

The table is checked exhaustively: every (state, event) pair is fed to ``next_stage`` with a
real event, and the answer must be the table's or a ``LifecycleError``. Then the reducers: each
kind of inconsistent record is refused with ``LogInconsistency`` and leaves the projection
exactly as it was (its snapshot is compared before and after), and the projection still
accepts the record that should have come.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

import attrs
import pytest

from engine.core.lifecycle import TRANSITIONS, CallStage, LifecycleError, event_key, next_stage
from engine.core.reducers import LogInconsistency, Projection, fold
from events.codec import EVENT_TYPES
from events.results import ErrorInfo, error_result
from events.types import (
    TERMINAL_EVENTS,
    ActiveToolsSet,
    ApprovalRequested,
    ApprovalResolved,
    AssistantMessage,
    Event,
    ModelToolCall,
    PolicyDecided,
    ProgramSuspended,
    QuestionAnswered,
    QuestionAsked,
    Record,
    ResultHandlerFailed,
    SessionStarted,
    ToolCallBlocked,
    ToolCallCancelled,
    ToolCallCompleted,
    ToolCallDenied,
    ToolCallFailed,
    ToolCallRequested,
    ToolCallRewritten,
    ToolExecutionStarted,
    ToolProgress,
    ToolRegistered,
    ToolSnapshot,
    ToolsActivated,
    UserMessage,
)

S = CallStage
CID = "1.0"
RESULT = error_result("x")


def _requested(call_id: str) -> Event:
    return ToolCallRequested(call_id=call_id, name="t", arguments={}, model_call_id="m0")


FORM = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}

#: One real event for every key the table can be asked about.
SAMPLES: dict[str, Callable[[str], Event]] = {
    "tool_call_requested": _requested,
    "tool_call_rewritten": lambda c: ToolCallRewritten(call_id=c, arguments={"a": 1}, by="h"),
    "policy_decided:allow": lambda c: PolicyDecided(call_id=c, decision="allow", reason="r"),
    "policy_decided:ask": lambda c: PolicyDecided(call_id=c, decision="ask", reason="r"),
    "policy_decided:deny": lambda c: PolicyDecided(call_id=c, decision="deny", reason="r"),
    "approval_requested": lambda c: ApprovalRequested(call_id=c, reason="r"),
    "approval_resolved:granted": lambda c: ApprovalResolved(call_id=c, granted=True),
    "approval_resolved:denied": lambda c: ApprovalResolved(call_id=c, granted=False),
    "tool_execution_started": lambda c: ToolExecutionStarted(call_id=c),
    "tool_progress": lambda c: ToolProgress(call_id=c, message="m"),
    "question_asked": lambda c: QuestionAsked(call_id=c, question_id=f"{c}#1", message="m",
                                              schema=FORM),
    "question_answered": lambda c: QuestionAnswered(call_id=c, question_id=f"{c}#1",
                                                    action="decline"),
    "program_suspended": lambda c: ProgramSuspended(
        call_id=c, waits_for=(), program_calls=(), state="", sha256="0" * 64, sandbox="s"),
    "tools_activated": lambda c: ToolsActivated(names=("t",), call_id=c),
    "result_handler_failed": lambda c: ResultHandlerFailed(
        call_id=c, handler="h", error=ErrorInfo(type="E", message="m")),
    "tool_call_completed": lambda c: ToolCallCompleted(call_id=c, result=RESULT),
    "tool_call_failed": lambda c: ToolCallFailed(
        call_id=c, kind="raised", message="m", result=RESULT),
    "tool_call_blocked": lambda c: ToolCallBlocked(call_id=c, reason="r", by="h", result=RESULT),
    "tool_call_denied": lambda c: ToolCallDenied(call_id=c, reason="r", by="policy", result=RESULT),
    "tool_call_cancelled": lambda c: ToolCallCancelled(call_id=c, reason="r", result=RESULT),
}
TERMINAL_KEYS = frozenset(
    {"tool_call_completed", "tool_call_failed", "tool_call_blocked", "tool_call_denied",
     "tool_call_cancelled"}
)
OPEN_STATES = [s for s in CallStage if s not in (S.NEW, S.CLOSED)]


def attrs_fields(cls: type[Any]) -> set[str]:
    return {field.name for field in attrs.fields(cls)}


def test_the_samples_cover_every_call_event_and_every_table_key() -> None:
    for key, make in SAMPLES.items():
        assert event_key(make(CID)) == key
    table_keys = {key for row in TRANSITIONS.values() for key in row}
    assert table_keys <= set(SAMPLES)
    call_event_types = {type(make(CID)) for make in SAMPLES.values()}
    assert {cls for cls in EVENT_TYPES.values() if "call_id" in attrs_fields(cls)} == call_event_types
    assert set(TRANSITIONS) == set(CallStage)


@pytest.mark.parametrize("state", list(CallStage), ids=lambda s: s.value)
@pytest.mark.parametrize("key", sorted(SAMPLES))
def test_next_stage_is_the_table_or_an_error(state: CallStage, key: str) -> None:
    event = SAMPLES[key](CID)
    if key in TRANSITIONS[state]:
        assert next_stage(state, event, call_id=CID) is TRANSITIONS[state][key]
    else:
        with pytest.raises(LifecycleError):
            next_stage(state, event, call_id=CID)


def test_every_terminal_event_closes_wherever_it_is_allowed() -> None:
    assert {type(SAMPLES[k](CID)) for k in TERMINAL_KEYS} == set(TERMINAL_EVENTS)
    seen: set[str] = set()
    for state, row in TRANSITIONS.items():
        for key, target in row.items():
            if key in TERMINAL_KEYS:
                seen.add(key)
                assert target is S.CLOSED, f"{key} from {state.value} leads to {target.value}"
            else:
                assert target is not S.CLOSED, f"non-terminal {key} closes from {state.value}"
    assert seen == TERMINAL_KEYS, "some terminal event is allowed nowhere"


def test_closed_accepts_nothing() -> None:
    assert dict(TRANSITIONS[S.CLOSED]) == {}
    for key, make in SAMPLES.items():
        with pytest.raises(LifecycleError):
            next_stage(S.CLOSED, make(CID), call_id=CID)


@pytest.mark.parametrize("state", [S.ASKING, S.ALLOWED, S.DENYING, S.RUNNING],
                         ids=lambda s: s.value)
def test_a_rewrite_after_the_policy_judged_is_refused(state: CallStage) -> None:
    # the only rewrite after the policy is the approver's edit, while the call awaits approval
    with pytest.raises(LifecycleError):
        next_stage(state, SAMPLES["tool_call_rewritten"](CID), call_id=CID)
    assert next_stage(S.AWAITING, SAMPLES["tool_call_rewritten"](CID)) is S.AWAITING
    assert next_stage(S.REQUESTED, SAMPLES["tool_call_rewritten"](CID)) is S.REQUESTED


@pytest.mark.parametrize("state", [s for s in CallStage if s not in (S.ALLOWED, S.RUNNING)],
                         ids=lambda s: s.value)
def test_started_without_allow_is_refused(state: CallStage) -> None:
    with pytest.raises(LifecycleError):
        next_stage(state, ToolExecutionStarted(call_id=CID), call_id=CID)


def test_a_running_call_may_start_again_only_as_a_rerun() -> None:
    # an idempotent body re-entered after a restart records its new start first
    assert next_stage(S.RUNNING, ToolExecutionStarted(call_id=CID)) is S.RUNNING


def test_only_allowed_leads_to_running() -> None:
    for state, row in TRANSITIONS.items():
        if S.RUNNING in row.values() and state is not S.RUNNING:
            assert state is S.ALLOWED


def test_every_state_is_reachable_from_new() -> None:
    reached = {S.NEW}
    queue = deque([S.NEW])
    while queue:
        for target in TRANSITIONS[queue.popleft()].values():
            if target not in reached:
                reached.add(target)
                queue.append(target)
    assert reached == set(CallStage)


def test_closed_is_reachable_from_every_state_but_closed() -> None:
    for start in CallStage:
        reached = {start}
        queue = deque([start])
        while queue:
            for target in TRANSITIONS[queue.popleft()].values():
                if target not in reached:
                    reached.add(target)
                    queue.append(target)
        assert S.CLOSED in reached


@pytest.mark.parametrize("state", OPEN_STATES, ids=lambda s: s.value)
def test_every_open_state_can_be_cancelled(state: CallStage) -> None:
    assert next_stage(state, SAMPLES["tool_call_cancelled"](CID), call_id=CID) is S.CLOSED


def test_an_approval_needs_a_request_and_a_denial_needs_a_verdict() -> None:
    for key in ("approval_resolved:granted", "approval_resolved:denied"):
        with pytest.raises(LifecycleError):
            next_stage(S.ASKING, SAMPLES[key](CID))
    with pytest.raises(LifecycleError):
        next_stage(S.REQUESTED, SAMPLES["tool_call_denied"](CID))


def test_the_error_names_the_call_the_event_and_what_is_allowed() -> None:
    with pytest.raises(LifecycleError) as info:
        next_stage(S.ALLOWED, ToolCallRewritten(call_id="3.1", arguments={}, by="h"),
                   call_id="3.1")
    message = str(info.value)
    assert "3.1" in message
    assert "tool_call_rewritten" in message
    assert "allowed" in message
    for key in TRANSITIONS[S.ALLOWED]:
        assert key in message


def test_the_error_for_a_closed_call_says_it_is_closed() -> None:
    with pytest.raises(LifecycleError) as info:
        next_stage(S.CLOSED, ToolProgress(call_id="2.0/1"), call_id="2.0/1")
    message = str(info.value)
    assert "2.0/1" in message
    assert "tool_progress" in message
    assert "closed" in message


# -- reducers ---------------------------------------------------------------------------------

SID = "s-1"
SNAPSHOT_TOOL = ToolSnapshot(name="t", description="", input_schema={"type": "object"})


class Log:
    """Builds records with contiguous seqs, and folds them into a projection as it goes."""

    def __init__(self, session_id: str = SID) -> None:
        self.session_id = session_id
        self.records: list[Record] = []
        self.projection = Projection()

    def next(self, event: Event, *, seq: int | None = None, session_id: str | None = None) -> Record:
        return Record(session_id=session_id or self.session_id,
                      seq=seq if seq is not None else len(self.records) + 1,
                      time=float(len(self.records)), event=event)

    def add(self, *events: Event) -> Log:
        for event in events:
            record = self.next(event)
            self.projection.apply(record)
            self.records.append(record)
        return self

    def refuses(self, record: Record, *words: str) -> None:
        before = self.projection.snapshot()
        with pytest.raises(LogInconsistency) as info:
            self.projection.apply(record)
        assert self.projection.snapshot() == before, "a refused record changed the projection"
        assert f"seq {record.seq}" in str(info.value)
        for word in words:
            assert word in str(info.value)


def started_with_batch(*calls: ModelToolCall) -> Log:
    """A session with tool ``t`` and a first assistant message asking for ``calls``."""
    return Log().add(
        SessionStarted(),
        ToolRegistered(spec=SNAPSHOT_TOOL),
        UserMessage(text="go"),
        AssistantMessage(turn=1, tool_calls=calls),
    )


def running_parent() -> Log:
    log = started_with_batch(ModelToolCall(id="m0", name="t", arguments={}))
    return log.add(
        _requested("1.0"),
        PolicyDecided(call_id="1.0", decision="allow", reason="r"),
        ToolExecutionStarted(call_id="1.0"),
    )


def nested(call_id: str, parent: str) -> ToolCallRequested:
    return ToolCallRequested(call_id=call_id, name="t", arguments={}, origin="nested",
                             parent_id=parent)


def test_a_seq_gap_is_refused() -> None:
    log = Log().add(SessionStarted(), UserMessage(text="a"))
    log.refuses(log.next(UserMessage(text="b"), seq=4), "expected seq 3")
    log.refuses(log.next(UserMessage(text="b"), seq=2), "expected seq 3")
    log.add(UserMessage(text="b"))  # the right record is still accepted
    assert log.projection.last_seq == 3


def test_a_record_of_another_session_is_refused() -> None:
    log = Log().add(SessionStarted())
    log.refuses(log.next(UserMessage(text="a"), session_id="other"), "another session")
    log.add(UserMessage(text="a"))


def test_a_log_must_start_with_session_started() -> None:
    log = Log()
    log.refuses(log.next(UserMessage(text="a")), "session_started")
    assert log.projection.session_id is None
    log.add(SessionStarted())
    log.refuses(log.next(SessionStarted()), "already started")


def test_a_nested_call_of_a_parent_that_is_not_running_is_refused() -> None:
    log = started_with_batch(ModelToolCall(id="m0", name="t", arguments={}))
    log.add(_requested("1.0"), PolicyDecided(call_id="1.0", decision="allow", reason="r"))
    log.refuses(log.next(nested("1.0/0", "1.0")), "not running")  # allowed, not started
    log.refuses(log.next(nested("9.9/0", "9.9")), "not running")  # no such parent
    log.add(ToolExecutionStarted(call_id="1.0"))
    log.add(nested("1.0/0", "1.0"))  # now it is running: accepted
    log.add(SAMPLES["tool_call_failed"]("1.0/0"), ToolCallCompleted(call_id="1.0", result=RESULT))
    log.refuses(log.next(nested("1.0/1", "1.0")), "not running")  # parent closed


def test_a_nested_call_must_be_named_after_its_parent_and_say_nested() -> None:
    log = running_parent()
    log.refuses(log.next(nested("2.0/0", "1.0")), "named after its parent")
    wrong_origin = ToolCallRequested(call_id="1.0/0", name="t", arguments={}, origin="model",
                                     parent_id="1.0")
    log.refuses(log.next(wrong_origin), "not running")
    log.add(nested("1.0/0", "1.0"))
    assert log.projection.children("1.0") == ("1.0/0",)


def test_a_top_level_call_the_assistant_did_not_ask_for_is_refused() -> None:
    log = Log().add(SessionStarted(), ToolRegistered(spec=SNAPSHOT_TOOL), UserMessage(text="go"))
    log.refuses(log.next(_requested("1.0")), "not asked for")  # no assistant message yet
    log.add(AssistantMessage(turn=1, tool_calls=(ModelToolCall(id="m0", name="t", arguments={}),)))
    log.refuses(log.next(_requested("1.1")), "not asked for")  # beyond the batch
    log.refuses(log.next(_requested("2.0")), "not asked for")  # another turn
    other_name = ToolCallRequested(call_id="1.0", name="u", arguments={}, model_call_id="m0")
    log.refuses(log.next(other_name), "does not match")
    other_id = ToolCallRequested(call_id="1.0", name="t", arguments={}, model_call_id="m9")
    log.refuses(log.next(other_id), "does not match")
    as_nested = ToolCallRequested(call_id="1.0", name="t", arguments={}, origin="nested",
                                  model_call_id="m0")
    log.refuses(log.next(as_nested), "not asked for")
    log.add(_requested("1.0"))
    log.refuses(log.next(_requested("1.0")), "already requested")


def test_a_second_terminal_event_is_refused() -> None:
    log = started_with_batch(ModelToolCall(id="m0", name="t", arguments={}))
    log.add(_requested("1.0"), ToolCallBlocked(call_id="1.0", reason="r", by="h", result=RESULT))
    for key in sorted(TERMINAL_KEYS):
        log.refuses(log.next(SAMPLES[key]("1.0")), "1.0", "closed")
    assert log.projection.calls["1.0"].status == "blocked"


def test_an_event_for_a_call_never_requested_is_refused() -> None:
    log = started_with_batch(ModelToolCall(id="m0", name="t", arguments={}))
    for key in sorted(k for k in SAMPLES if k != "tool_call_requested"):
        log.refuses(log.next(SAMPLES[key]("1.0")), "never requested")


def test_an_event_the_table_forbids_is_refused_with_the_call_named() -> None:
    log = running_parent()
    log.refuses(log.next(SAMPLES["tool_call_rewritten"]("1.0")), "1.0", "tool_call_rewritten")
    log.refuses(log.next(SAMPLES["approval_requested"]("1.0")), "approval_requested")
    log.add(ToolProgress(call_id="1.0", message="half"))
    assert log.projection.calls["1.0"].progress_count == 1


def test_a_new_assistant_message_while_calls_are_open_is_refused() -> None:
    log = running_parent()
    log.refuses(log.next(AssistantMessage(turn=2)), "before every call")
    log.refuses(log.next(AssistantMessage(turn=3)), "expected 2")


def test_an_active_set_with_unknown_names_is_refused() -> None:
    log = Log().add(SessionStarted(), ToolRegistered(spec=SNAPSHOT_TOOL))
    log.refuses(log.next(ActiveToolsSet(names=("t", "nope"))), "nope")
    log.add(ActiveToolsSet(names=()))
    assert log.projection.active_tools == frozenset()


def test_refused_approval_leaves_pending_and_grants_alone() -> None:
    log = started_with_batch(ModelToolCall(id="m0", name="t", arguments={}))
    log.add(_requested("1.0"), PolicyDecided(call_id="1.0", decision="ask", reason="r"),
            ApprovalRequested(call_id="1.0", reason="r"))
    assert log.projection.pending_approvals == ("1.0",)
    # a session-wide grant for the wrong call must not leak into the grants
    log.refuses(log.next(ApprovalResolved(call_id="1.1", granted=True, scope="session")))
    log.refuses(log.next(ToolExecutionStarted(call_id="1.0")))
    assert dict(log.projection.session_grants) == {}
    log.add(ApprovalResolved(call_id="1.0", granted=True, scope="session"))
    assert dict(log.projection.session_grants) == {"t": True}
    assert log.projection.pending_approvals == ()


def test_a_fold_stops_at_the_first_bad_record() -> None:
    log = running_parent()
    bad = log.next(ToolCallRewritten(call_id="1.0", arguments={}, by="h"))
    with pytest.raises(LogInconsistency):
        fold([*log.records, bad])
    assert fold(log.records).snapshot() == log.projection.snapshot()


def test_only_a_running_call_asks_and_each_question_is_answered_once_and_in_form() -> None:
    log = started_with_batch(ModelToolCall(id="m0", name="t", arguments={}))
    log.add(_requested("1.0"), PolicyDecided(call_id="1.0", decision="allow", reason="r"))
    log.refuses(log.next(SAMPLES["question_asked"]("1.0")), "question_asked", "allowed")
    log.add(ToolExecutionStarted(call_id="1.0"))
    log.refuses(log.next(SAMPLES["question_answered"]("1.0")), "did not ask")
    log.refuses(log.next(QuestionAsked(call_id="1.0", question_id="1.0#2", message="m",
                                       schema=FORM)), "next question is '1.0#1'")
    log.refuses(log.next(QuestionAsked(call_id="1.0", question_id="1.0#1", message="m",
                                       schema={"type": "object", "properties": {
                                           "deep": {"type": "object"}}})), "flat object")
    log.add(SAMPLES["question_asked"]("1.0"))
    assert log.projection.pending_questions == ("1.0#1",)
    log.refuses(log.next(QuestionAnswered(call_id="1.0", question_id="1.0#1", action="accept",
                                          content={"ok": "yes"})), "'ok' is not true or false")
    log.refuses(log.next(QuestionAnswered(call_id="1.0", question_id="1.0#1", action="decline",
                                          content={"ok": True})), "has no content")
    log.add(QuestionAnswered(call_id="1.0", question_id="1.0#1", action="accept",
                             content={"ok": True}))
    assert log.projection.pending_questions == ()
    log.refuses(log.next(SAMPLES["question_answered"]("1.0")), "answered already")
    [asked] = log.projection.calls["1.0"].questions
    assert asked.answer is not None and asked.answer.content == {"ok": True}


def test_a_call_that_ends_leaves_its_question_waiting_no_more() -> None:
    log = running_parent()
    log.add(SAMPLES["question_asked"]("1.0"))
    assert log.projection.pending_questions == ("1.0#1",)
    log.add(SAMPLES["tool_call_cancelled"]("1.0"))
    assert log.projection.pending_questions == ()
    assert log.projection.calls["1.0"].questions[0].pending
