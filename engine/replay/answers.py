"""Stand-ins that answer a replay from the log: the model, the approver and, unless today's
are given, the handlers.

- :class:`RecordedModel` answers each turn with the recorded assistant message of that turn,
  and past the prompt's last recorded message raises :class:`RecordedTurnsEnded` (the
  recorded prompt stopped there: it was cancelled, or the process stopped). It names itself
  as the recorded request named the model, and answers with the recorded response's model,
  id and usage, so the replay's model turns read as the log's. A turn that failed and was
  asked again is answered by the answer it got (failures are not replayed).
- :class:`RecordedApprover` answers by the engine's call id with the recorded answer: granted
  or refused, once or for the session, with the approver's edited arguments. A call that did
  not ask then is refused (the divergence shows in the call's events). An answer the host
  gave at a pause is "later" again (about a host call, which no prompt pauses for, the
  replay's host answers it once the call waits); one the log never got waits. An approver that raised
  raises again (the recorded type and message).
- :class:`RecordedAsker` answers a tool's question by its id with the recorded answer, if the
  call asked the same question then (message and form); an answer the host gave at a pause is
  "later" again (the driver gives it at the pause), one the log never got waits, an asker that
  failed fails again. A question the log does not have is cancelled: the divergence shows in
  the call's events.
- :func:`recorded_call_handlers` and :func:`recorded_result_handlers` stand in for the
  handlers the session had: each gives, call by call, the verdict the log holds under its
  name (a rewrite, a block, a handler that raised: it raises again), so the replay asks
  nobody's code about handlers unless today's are given.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import trio

from events.results import error_result
from events.types import QuestionAsked, ToolCallCompleted, ToolCallFailed

from ..core.approvals import LATER, ApprovalAnswer, ApprovalRequest
from ..core.callids import from_host
from ..core.nested import canonical
from ..core.questions import Answer as QuestionAnswer
from ..core.questions import Question
from ..core.handlers import (
    Block,
    ResultPatch,
    Rewrite,
    ToolCallDraft,
    ToolCallHandler,
    ToolResultDraft,
    ToolResultHandler,
)
from ..models import ModelInfo, ModelMessage, ModelRequest
from .recorded import RecordedPrompt, RecordedSession, RecordedTurn
from .stubs import recorded_exception
from .watch import Watch

__all__ = [
    "RecordedApprover",
    "RecordedAsker",
    "RecordedModel",
    "RecordedTurnsEnded",
    "recorded_call_handlers",
    "recorded_result_handlers",
    "sequencing_handler",
]


class RecordedTurnsEnded(Exception):
    """The model was asked for a turn the recorded prompt does not have."""


class RecordedModel:
    """Answers each turn with the recorded assistant message (see the module docstring).

    ``before_turn`` runs before a turn is answered: the driver replays there the session
    changes (tools registered, active tools set) the log holds before that message.
    """

    def __init__(self, before_turn: Callable[[RecordedTurn], Awaitable[None]]) -> None:
        self._before_turn = before_turn
        self._turns: tuple[RecordedTurn, ...] = ()
        self._next = 0

    @property
    def info(self) -> ModelInfo:
        """The model the next turn's recorded request named (what the session records)."""
        turn = self._turns[self._next] if self._next < len(self._turns) else None
        asked = turn.requested if turn is not None else None
        if asked is None:
            return ModelInfo(provider="replay", model="recorded")
        return ModelInfo(provider=asked.provider, model=asked.model, api=asked.api,
                         settings=asked.settings, stream=asked.stream)

    def begin(self, prompt: RecordedPrompt) -> None:
        """The prompt whose turns come next."""
        self._turns = prompt.turns
        self._next = 0

    async def complete(self, request: ModelRequest) -> ModelMessage:
        """The next recorded message of the current prompt."""
        if self._next >= len(self._turns):
            raise RecordedTurnsEnded("the log has no more assistant messages in this prompt")
        turn = self._turns[self._next]
        self._next += 1
        await self._before_turn(turn)
        message, answer = turn.message, turn.responded
        return ModelMessage(text=message.text, tool_calls=message.tool_calls,
                            stop_reason=message.stop_reason,
                            provider_content=message.provider_content,
                            model=answer.model if answer is not None else None,
                            response_id=answer.response_id if answer is not None else None,
                            usage=answer.usage if answer is not None else None)


class RecordedApprover:
    """Answers approvals from the log (see the module docstring)."""

    def __init__(self, book: RecordedSession, watch: Watch, *,
                 answer_later: Callable[[str], None] | None = None) -> None:
        self._book = book
        self._watch = watch
        self._answer_later = answer_later

    async def __call__(self, request: ApprovalRequest) -> bool | ApprovalAnswer | Any:
        call = self._book.calls.get(request.call_id)
        if call is None or call.asked_seq is None or call.name != request.name:
            return ApprovalAnswer(
                granted=False,
                reason=f"replay: call {request.call_id} did not ask for approval in the log",
            )
        answer = call.answer
        if answer is None:
            if request.call_id not in self._book.waiters:
                return LATER  # the log ends with this approval pending
            self._watch.mark_waiting(request.call_id)
            await trio.sleep_forever()
        assert answer is not None
        if answer.later:
            if self._answer_later is not None and from_host(request.call_id):
                self._answer_later(request.call_id)  # no prompt pauses for a host call
            return LATER
        if answer.error is not None:  # the approver raised then: it raises again
            raise recorded_exception(answer.error.type, answer.error.message)
        if answer.scope == "session":
            await self._watch.until(lambda: self._watch.before_grant(request.call_id))
        return ApprovalAnswer(granted=answer.granted, scope=answer.scope,
                              arguments=answer.arguments if answer.granted else None,
                              reason=answer.reason)


class RecordedAsker:
    """Answers the tools' questions from the log (see the module docstring)."""

    def __init__(self, book: RecordedSession) -> None:
        self._book = book

    async def __call__(self, question: Question) -> QuestionAnswer | Any:
        call = self._book.calls.get(question.call_id)
        asked = [step for step in call.body if isinstance(step, QuestionAsked)
                 and step.question_id == question.question_id] if call is not None else []
        if not asked or canonical([asked[0].message, asked[0].schema]) != canonical(
                [question.message, dict(question.schema)]):
            return QuestionAnswer(action="cancel", reason=f"replay: call {question.call_id} "
                                  f"did not ask this question in the log")
        assert call is not None
        answer = call.answers.get(question.question_id)
        if answer is None or answer.later:
            return LATER  # pending where the log ends, or answered by the host at a pause
        if answer.error is not None:  # the asker failed then: it fails again
            raise recorded_exception(answer.error.type, answer.error.message)
        return QuestionAnswer(action=answer.action, content=answer.content,
                              reason=answer.reason)


def recorded_call_handlers(book: RecordedSession) -> list[ToolCallHandler]:
    """One stand-in per handler name the log holds verdicts from, in an order that keeps
    every call's order of verdicts; each gives its recorded verdict about each call."""
    cursor: dict[str, int] = {}

    def stand_in(name: str) -> ToolCallHandler:
        def handler(draft: ToolCallDraft) -> Block | Rewrite | None:
            call = book.calls.get(draft.call_id)
            if call is None:
                return None
            at = cursor.get(draft.call_id, 0)
            if at >= len(call.verdicts) or call.verdicts[at].by != name:
                return None
            cursor[draft.call_id] = at + 1
            verdict = call.verdicts[at]
            if verdict.error is not None:  # the handler raised then: it raises again
                raise recorded_exception(verdict.error.type, verdict.error.message)
            if verdict.block is not None:
                return Block(verdict.block)
            return Rewrite(verdict.rewrite)

        handler.__qualname__ = handler.__name__ = name
        return handler

    return [stand_in(name) for name in book.handler_names]


def recorded_result_handlers(book: RecordedSession) -> list[ToolResultHandler]:
    """Stand-ins for the ``tool_result`` handlers: one per name that raised in the log
    (raising again, with the recorded type and message), then one that patches a result the
    handlers changed into the recorded one, if it reaches them as it did then."""
    cursor: dict[str, int] = {}

    def failing(name: str) -> ToolResultHandler:
        def handler(draft: ToolResultDraft) -> ResultPatch | None:
            call = book.calls.get(draft.call_id)
            if call is None:
                return None
            at = cursor.get(draft.call_id, 0)
            if at >= len(call.result_failures) or call.result_failures[at].handler != name:
                return None
            cursor[draft.call_id] = at + 1
            error = call.result_failures[at].error
            raise recorded_exception(error.type, error.message)

        handler.__qualname__ = handler.__name__ = name
        return handler

    def patch(draft: ToolResultDraft) -> ResultPatch | None:
        call = book.calls.get(draft.call_id)
        terminal = call.terminal if call is not None else None
        if isinstance(terminal, ToolCallCompleted):
            seen = terminal.returned
        elif isinstance(terminal, ToolCallFailed) and terminal.result != error_result(
            terminal.message
        ):
            seen = error_result(terminal.message)
        else:
            return None
        if seen is None or draft.result != seen:
            return None
        target = terminal.result
        return ResultPatch(content=target.content, structured_content=target.structured_content,
                           is_error=target.is_error)

    patch.__qualname__ = patch.__name__ = "replay.recorded_result"
    return [*(failing(name) for name in book.result_handler_names), patch]


def sequencing_handler(watch: Watch) -> ToolCallHandler:
    """A last ``tool_call`` handler that holds a nested call's policy decision until the
    session-wide answers the log holds before it are given (it never blocks or rewrites)."""

    async def hold(draft: ToolCallDraft) -> None:
        if not watch.before_decision(draft.call_id):
            await watch.until(lambda: watch.before_decision(draft.call_id))
        return None

    hold.__qualname__ = hold.__name__ = "replay.sequence"
    return hold
