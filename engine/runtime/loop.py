"""The agent loop: the user's message, the model, its calls as a batch, and again.

:class:`AgentLoop` is what :meth:`Session.prompt <engine.runtime.session.Session.prompt>` and
:meth:`~engine.runtime.session.Session.resume` run, and it reads top to bottom like the loop it
is, in the task that called it: record the user's message, ask the model, record its answer,
settle its tool calls as a batch (:mod:`engine.runtime.batch`), repeat until a message without
calls or ``max_turns``. The model, the ``tool_call`` handlers and the approver run in that task,
so they see the caller's context variables; the tool bodies run in copies of them
(:mod:`engine.runtime.copied`). The session holds one loop and hands it what the loop reads
of the session: its setup as it is now (a handler added or a tool registered counts from the
next batch) and its pending approval requests.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import attrs
import trio

from events.types import AssistantMessage, ModelToolCall, UserMessage

from ..core.approvals import ApprovalRequest
from ..core.questions import Question
from ..core.environment import Environment
from ..core.errors import AlreadyRunning, NoModel, SessionClosed, SessionPaused
from ..core.jsonvalues import own_json
from ..core.limits import Limits, admit, clip_name, not_json_marker
from ..models import Model
from .asking import ask_model, kept_content
from .batch import Batch
from .deltas import Deltas
from .inflight import InFlight
from .recorder import Recorder

__all__ = ["AgentLoop", "PromptResult"]


@attrs.frozen(kw_only=True)
class PromptResult:
    """How a prompt (or a resume) ended: ``"end_turn"`` (a message without calls),
    ``"max_turns"``, or ``"paused"`` with the approval requests (``pending``) and the
    tools' questions (``questions``) that wait for an answer."""

    stop: Literal["end_turn", "max_turns", "paused"]
    turns: int
    text: str
    pending: tuple[ApprovalRequest, ...] = ()
    questions: tuple[Question, ...] = ()


def _admissible(arguments: Any, limits: Limits) -> Any:
    """A private copy of a model's arguments; a marker naming the problem if they are not JSON
    (the log holds only JSON; the call then fails saying why), a size marker if they are too
    large."""
    try:
        arguments = own_json(arguments)
    except ValueError as exc:
        return not_json_marker(exc)
    return admit(arguments, limits)


class AgentLoop:
    """One session's agent loop: at most one prompt or resume at a time, and whether the last
    one paused.

    Each run is handed what it reads of the session: ``env`` gives the session's setup as it
    is now, ``pending`` its approval requests waiting for an answer, which a paused result
    carries. The loop keeps neither, so it holds no reference back to its session (a closed
    session is freed without the cyclic collector)."""

    def __init__(self, *, recorder: Recorder, batch: Batch, inflight: InFlight, deltas: Deltas,
                 model: Model | None) -> None:
        self._recorder = recorder
        self._batch = batch
        self._inflight = inflight
        self._deltas = deltas
        self._model = model
        self._prompting = False
        #: the last prompt or resume returned "paused": resume() comes first
        self.paused = False

    async def prompt(self, text: str, *, env: Callable[[], Environment],
                     pending: Callable[[], tuple[ApprovalRequest, ...]],
                     questions: Callable[[], tuple[Question, ...]] = tuple) -> PromptResult:
        """Record the user's ``text`` and run the loop (see ``Session.prompt``); refused while
        the session is paused."""
        self._enter()
        try:
            if self.paused or self._batch.open():
                raise SessionPaused(self._why_paused())
            self._recorder.record(UserMessage(text=text))
            return await self._loop_while_open(env, pending, questions)
        finally:
            self._prompting = False

    async def resume(self, *, env: Callable[[], Environment],
                     pending: Callable[[], tuple[ApprovalRequest, ...]],
                     questions: Callable[[], tuple[Question, ...]] = tuple) -> PromptResult:
        """Run the loop from where the log stands (see ``Session.resume``)."""
        self._enter()
        try:
            return await self._loop_while_open(env, pending, questions)
        finally:
            self._prompting = False

    def _why_paused(self) -> str:
        pending = self._recorder.projection.pending_approvals
        if pending:
            return (f"the session is paused: its last batch waits for approvals "
                    f"({', '.join(pending)}); answer them with resolve_approval(), then call "
                    f"resume() to finish the batch before a new prompt")
        asked = self._recorder.projection.pending_questions
        if asked:
            return (f"the session is paused: its last batch waits for answers to questions "
                    f"({', '.join(asked)}); answer them with answer_question(), then call "
                    f"resume() to finish the batch before a new prompt")
        return ("the session is paused: its last batch has not been finished since it paused "
                "(answered calls may still run, or a stopped process left calls open); call "
                "resume() to finish it, so the model sees its results, before a new prompt")

    def _enter(self) -> None:
        if self._model is None:
            raise NoModel("this session was opened without a model: it serves its tools and takes "
                          "host calls; open it with Session.open(..., model=...) to prompt it")
        if self._prompting:
            raise AlreadyRunning("a prompt is already running in this session: await it first")
        self._prompting = True

    async def _loop_while_open(
        self, env: Callable[[], Environment], pending: Callable[[], tuple[ApprovalRequest, ...]],
        questions: Callable[[], tuple[Question, ...]],
    ) -> PromptResult:
        """:meth:`_loop` under a scope the session's closing cancels, as it does a host
        call's: a prompt from a task outside ``Session.open``'s block stops when the block
        ends (the log stays as a stopped process would leave it) and raises, instead of
        running on, unowned, after the session closed. What the prompt recorded is written
        as it ends, whatever happened."""
        scope = trio.CancelScope()
        self._inflight.prompting(scope)
        try:
            with scope:
                return await self._loop(env, pending, questions)
        finally:
            try:
                # what it recorded is written before the session's closing goes on (which
                # waits for this, then makes its last flush and releases its claim)
                await self._recorder.flush_finally()
            finally:
                self._inflight.prompting(None)
        raise SessionClosed(
            "the session closed while this prompt ran (from a task outside Session.open's "
            "block): its log stays as a stopped process would leave it; open the session "
            "again and call resume() to go on")

    async def _loop(self, setup: Callable[[], Environment],
                    pending: Callable[[], tuple[ApprovalRequest, ...]],
                    questions: Callable[[], tuple[Question, ...]]) -> PromptResult:
        """The agent loop, in the caller's task: settle the batch, ask the model, record its
        answer, repeat."""
        self.paused = False
        turns = 0
        state = self._recorder.projection
        while True:
            env = setup()  # a tool registered or a handler added counts from the next batch
            if await self._batch.settle(env) == "paused":
                self.paused = True
                return PromptResult(stop="paused", turns=turns, text="",
                                    pending=pending(), questions=questions())
            last = state.last_message
            if turns and turns >= env.max_turns:
                return PromptResult(stop="max_turns", turns=turns, text="")
            if not turns and last is not None and not last.tool_calls and isinstance(
                state.transcript[-1], AssistantMessage
            ):
                return PromptResult(stop="end_turn", turns=0, text=last.text)
            assert self._model is not None  # _enter refused a session without one
            reply = await ask_model(self._model, self._recorder, self._deltas)
            turns += 1
            limits = env.limits
            self._recorder.record(AssistantMessage(
                turn=state.turn + 1, text=reply.text, stop_reason=reply.stop_reason,
                tool_calls=tuple(ModelToolCall(
                    id=clip_name(call.id), name=clip_name(call.name),
                    arguments=_admissible(call.arguments, limits),
                    model_name=None if call.model_name is None else clip_name(call.model_name))
                    for call in reply.tool_calls),
                provider_content=kept_content(reply, limits),
            ))
            if not reply.tool_calls:
                return PromptResult(stop="end_turn", turns=turns, text=reply.text)
