"""Reading one session's records for a replay: prompts, turns, calls, answers.

The prompts and turns say what to send and what the model answers; each call's events say
what its stand-ins give back; the approver's answers are marked "later" when the host gave
them at a pause (the replay pauses there too). What the log implies beyond single facts (the
policy's rules, the order between concurrent calls, where the session was stopped) is worked
out in :mod:`engine.replay.implied`. Pure: no trio, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import attrs

from events.modelturns import ModelRequested, ModelResponded, SystemPromptSet
from events.types import (
    TERMINAL_EVENTS,
    ActiveToolsSet,
    ApprovalRequested,
    ApprovalResolved,
    AssistantMessage,
    PolicyDecided,
    QuestionAnswered,
    QuestionAsked,
    Record,
    ResultHandlerFailed,
    SessionStarted,
    ToolCallBlocked,
    ToolCallDenied,
    ToolCallRequested,
    ToolCallRewritten,
    ToolExecutionStarted,
    ToolProgress,
    ToolRegistered,
    ToolSnapshot,
    ToolsActivated,
    UserMessage,
)

from ..core.reducers import LogInconsistency, fold
from .implied import (
    cut_turn,
    infer_limits,
    infer_max_depth,
    infer_max_turns,
    infer_rules,
    order_names,
    order_steps,
    waiters,
)
from .recorded import (
    Answer,
    RecordedCall,
    RecordedPrompt,
    RecordedSession,
    RecordedTurn,
    ReplayError,
    SessionAction,
    Verdict,
)

__all__ = ["read_log"]


def read_log(records: Iterable[Record]) -> RecordedSession:
    """Read one session's records for a replay. Raises :class:`ReplayError` if they are not
    one consistent session."""
    records = tuple(records)
    if not records:
        raise ReplayError("there are no records to replay")
    sessions = list(dict.fromkeys(r.session_id for r in records))
    if len(sessions) > 1:
        raise ReplayError(
            f"the records hold {len(sessions)} sessions ({', '.join(sessions[:5])}); "
            f"replay one session at a time"
        )
    try:
        fold(records)
    except LogInconsistency as exc:
        raise ReplayError(f"the log is inconsistent, so it cannot be replayed: {exc}") from exc
    first = records[0].event
    assert isinstance(first, SessionStarted)  # fold checked it

    initial, prompts, trailing = _plan(records)
    calls = _calls(records)
    _mark_later_answers(records, calls)
    registered: dict[str, ToolSnapshot] = {}
    for record in records:
        if isinstance(record.event, ToolRegistered):
            registered.setdefault(record.event.spec.name, record.event.spec)
    decision_deps, grant_deps = order_steps(calls)
    return RecordedSession(
        session_id=records[0].session_id,
        records=records,
        metadata=dict(first.metadata),
        system_prompt=_opening_prompt(records),
        initial_tools=initial,
        prompts=prompts,
        trailing=trailing,
        calls=calls,
        registered=registered,
        rules=infer_rules(calls),
        max_depth=infer_max_depth(first.settings, calls),
        max_turns=infer_max_turns(first.settings, prompts),
        limits=infer_limits(first.settings),
        model_view=first.settings.model_view if first.settings is not None else None,
        handler_names=order_names([[v.by for v in c.verdicts] for c in calls.values()]),
        result_handler_names=order_names(
            [[f.handler for f in c.result_failures] for c in calls.values()]),
        waiters=waiters(calls),
        cut_turn=cut_turn(prompts, calls),
        decision_deps=decision_deps,
        grant_deps=grant_deps,
        host_turns=_host_turns(prompts, trailing),
    )


# -- prompts and turns ---------------------------------------------------------------------


def _opening_prompt(records: Sequence[Record]) -> str | None:
    """The system prompt the session was opened with (recorded right after its start)."""
    event = records[1].event if len(records) > 1 else None
    return event.text if isinstance(event, SystemPromptSet) else None


def _plan(
    records: Sequence[Record],
) -> tuple[tuple[ToolSnapshot, ...], tuple[RecordedPrompt, ...], tuple[SessionAction, ...]]:
    """The tools registered at open, the prompts with their turns, and what comes after."""
    index = 1
    initial: list[ToolSnapshot] = []
    if index < len(records) and isinstance(records[index].event, SystemPromptSet):
        index += 1  # the system prompt the session was opened with (RecordedSession)
    while index < len(records):
        event = records[index].event
        if not isinstance(event, ToolRegistered) or any(
            s.name == event.spec.name for s in initial
        ):
            break
        initial.append(event.spec)
        index += 1
    prompts: list[RecordedPrompt] = []
    pending: list[SessionAction] = []
    requested: ModelRequested | None = None
    responded: ModelResponded | None = None
    for record in records[index:]:
        event = record.event
        if isinstance(event, ToolCallRequested) and event.origin == "host":
            if prompts and prompts[-1].turns and not pending:
                # asked for while the last message's batch ran: again once the replay has it
                turns = prompts[-1].turns
                last = attrs.evolve(turns[-1], during=(*turns[-1].during, event))
                prompts[-1] = attrs.evolve(prompts[-1], turns=(*turns[:-1], last))
            else:
                pending.append(event)
        elif isinstance(event, (ToolRegistered, ActiveToolsSet, SystemPromptSet)) or (
            isinstance(event, ToolsActivated) and event.call_id is None
        ):
            pending.append(event)
        elif isinstance(event, ModelRequested):
            requested, responded = event, None
        elif isinstance(event, ModelResponded):
            responded = event
        elif isinstance(event, UserMessage):
            prompts.append(RecordedPrompt(text=event.text, seq=record.seq, before=tuple(pending)))
            pending = []
        elif isinstance(event, AssistantMessage):
            if not prompts:
                raise ReplayError(
                    f"record seq {record.seq}: an assistant message before any user message"
                )
            turn = RecordedTurn(message=event, seq=record.seq, before=tuple(pending),
                                requested=requested, responded=responded)
            pending, requested, responded = [], None, None
            prompts[-1] = attrs.evolve(prompts[-1], turns=(*prompts[-1].turns, turn))
    return tuple(initial), tuple(prompts), tuple(pending)


def _host_turns(prompts: Sequence[RecordedPrompt],
                trailing: Sequence[SessionAction]) -> dict[str, int]:
    """Each host call, by the turn whose batch the replay has begun when it asks for it
    again (see :attr:`RecordedSession.host_turns`)."""
    found: dict[str, int] = {}
    last = 0
    for prompt in prompts:
        waiting = [a for a in prompt.before if isinstance(a, ToolCallRequested)]
        for turn in prompt.turns:
            number = turn.message.turn
            for action in (*waiting, *turn.before, *turn.during):
                if isinstance(action, ToolCallRequested):
                    found[action.call_id] = number
            waiting, last = [], number
        for action in waiting:
            found[action.call_id] = last + 1
    for action in trailing:
        if isinstance(action, ToolCallRequested):
            found[action.call_id] = last + 1
    return found


# -- calls -----------------------------------------------------------------------------------


def _calls(records: Sequence[Record]) -> dict[str, RecordedCall]:
    calls: dict[str, RecordedCall] = {}
    for record in records:
        event = record.event
        call_id = getattr(event, "call_id", None)
        if call_id is None:
            continue
        if isinstance(event, ToolCallRequested):
            calls[call_id] = RecordedCall(call_id=call_id, name=event.name,
                                          parent_id=event.parent_id, requested=event)
            if event.parent_id is not None and event.parent_id in calls:
                calls[event.parent_id].body.append(event)
        call = calls[call_id]
        call.events.append(event)
        if isinstance(event, ToolCallRewritten):
            if call.asked_seq is None:
                call.verdicts.append(Verdict(by=event.by, rewrite=event.arguments))
        elif isinstance(event, ToolCallBlocked):
            call.verdicts.append(Verdict(by=event.by, block=event.reason, error=event.error))
        elif isinstance(event, PolicyDecided):
            call.decided_seq = record.seq
            call.decision = event.decision
        elif isinstance(event, ApprovalRequested):
            call.asked_seq = record.seq
        elif isinstance(event, ApprovalResolved):
            edit = [e for e in call.events
                    if isinstance(e, ToolCallRewritten) and e.by == "approver"]
            call.answer = Answer(granted=event.granted, scope=event.scope, reason=event.reason,
                                 arguments=edit[-1].arguments if edit else None, seq=record.seq)
        elif isinstance(event, ToolExecutionStarted):
            call.started = True
        elif isinstance(event, (ToolProgress, ToolsActivated, QuestionAsked)):
            call.body.append(event)
        elif isinstance(event, QuestionAnswered):
            call.answers[event.question_id] = event
        elif isinstance(event, ResultHandlerFailed):
            call.result_failures.append(event)
        if isinstance(event, TERMINAL_EVENTS):
            call.terminal = event
            if isinstance(event, ToolCallDenied) and event.error is not None and call.answer:
                call.answer = attrs.evolve(call.answer, error=event.error)  # the approver raised
    return calls


def _mark_later_answers(records: Sequence[Record], calls: dict[str, RecordedCall]) -> None:
    """Which answers the host gave at a pause, and which of them it gave together.

    An answer records whether it was given at a pause (``ApprovalResolved.later``). Logs
    written before that was recorded show it by their shape: a top-level call's approver is
    asked while the batch is gated, one call after another, so if anything about another
    call lies between the request and the answer, the approver said "later" and the host
    answered at the pause; a nested call's answer is later if it came after such a pause
    began while the request was pending.
    """
    owner = [getattr(r.event, "call_id", None) for r in records]
    position = {r.seq: i for i, r in enumerate(records)}
    marked = {r.event.call_id: r.event.later for r in records
              if isinstance(r.event, ApprovalResolved)}
    answered = [c for c in calls.values() if c.answer is not None and c.asked_seq is not None]
    later = {c.call_id for c in answered if marked.get(c.call_id) is True}
    unmarked = [c for c in answered if marked.get(c.call_id) is None]
    for call in unmarked:
        assert call.answer is not None and call.asked_seq is not None
        if call.parent_id is None:
            between = owner[position[call.asked_seq] + 1 : position[call.answer.seq]]
            if any(o is not None and o != call.call_id for o in between):
                later.add(call.call_id)
    changed = True
    while changed:
        changed = False
        pauses = [calls[c].answer.seq for c in later]  # type: ignore[union-attr]
        for call in unmarked:
            assert call.answer is not None and call.asked_seq is not None
            if call.call_id not in later and any(
                call.asked_seq < p < call.answer.seq for p in pauses
            ):
                later.add(call.call_id)
                changed = True
    # answers given together: consecutive late answers with nothing about other calls between
    group = 0
    previous: str | None = None
    for index, record in enumerate(records):
        event = record.event
        if not isinstance(event, ApprovalResolved) or event.call_id not in later:
            continue
        call = calls[event.call_id]
        assert call.answer is not None
        if previous is not None:
            start = position[calls[previous].answer.seq]  # type: ignore[union-attr]
            between = owner[start + 1 : index]
            if any(o not in (None, previous, call.call_id) for o in between):
                group += 1
        call.answer = attrs.evolve(call.answer, later=True, group=group)
        previous = call.call_id
