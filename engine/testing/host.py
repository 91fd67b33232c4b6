"""The host's side of :class:`~engine.testing.machine.SessionMachine`: what a host plugs into
a session and does around it, scripted.

- :class:`ScriptModel`: the model, replaying the script of the current prompt;
- :func:`scripted_answer`: the approver's answer, drawn per tool (:data:`MACHINE_ANSWERS`);
- :class:`HeldSession`: the session, kept open in a task of the machine's trio loop between
  steps, closed and opened again on a restart;
- :func:`drive`: a prompt or a resume, cancelled after a drawn number of records, or not.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, aclosing
from typing import Any

import trio

from events.types import Record

from ..core.approvals import LATER, ApprovalAnswer, ApprovalRequest
from ..core.questions import Answer, Question
from ..models import FauxModel, FauxStep, ModelMessage, ModelRequest
from ..runtime.session import PromptResult, Session

__all__ = ["MACHINE_ANSWERS", "QUESTION_ANSWERS", "HeldSession", "ScriptModel", "drive",
           "scripted_answer", "scripted_reply"]

#: what the machine's own approver may answer (drawn per tool at each prompt)
MACHINE_ANSWERS: tuple[str, ...] = (
    "grant", "grant_session", "deny", "deny_session", "later", "later", "raise", "edit",
)


#: what the machine's own asker may answer a question (drawn at each prompt)
QUESTION_ANSWERS: tuple[str, ...] = (
    "accept", "decline", "cancel", "later", "later", "raise", "misfit",
)


def scripted_reply(answer: str, question: Question, count: int = 0) -> Any:
    """What the asker says to ``question`` when the script says ``answer`` (one of
    :data:`QUESTION_ANSWERS`): ``"misfit"`` accepts content that does not fit the form."""
    if answer == "later":
        return LATER
    if answer == "raise":
        raise RuntimeError(f"the asker crashed on {question.question_id}")
    if answer == "misfit":
        return Answer(action="accept", content={"count": "many"})
    if answer == "accept":
        return Answer(action="accept", content={"count": count})
    return Answer(action=answer)  # type: ignore[arg-type]


class ScriptModel:
    """The machine's model: replays the script of the current prompt (a
    :class:`~engine.models.FauxModel`, ``faux`` to begin with), then ends each turn with text
    once it runs out, so a prompt after a cancelled one always gets an answer."""

    def __init__(self, faux: FauxModel | None = None) -> None:
        self._faux = faux if faux is not None else FauxModel([])
        #: every request received, in order
        self.requests: list[ModelRequest] = []

    def load(self, steps: Sequence[FauxStep]) -> None:
        """The script for what follows (replacing what is left of the last one)."""
        self._faux = FauxModel(steps)

    async def complete(self, request: ModelRequest) -> ModelMessage:
        """The next scripted message, or a text message when the script is used up."""
        self.requests.append(request)
        if self._faux.remaining:
            return await self._faux.complete(request)
        return ModelMessage(text="(end of script)")


def scripted_answer(answer: str, request: ApprovalRequest, edit: Any = None) -> Any:
    """What the approver says to ``request`` when the script says ``answer`` (one of
    :data:`MACHINE_ANSWERS`); ``edit`` is the arguments an ``"edit"`` grants instead."""
    if answer == "later":
        return LATER
    if answer == "raise":
        raise RuntimeError(f"the approver crashed on {request.name}")
    if answer == "edit":
        return ApprovalAnswer(granted=True, arguments=edit if edit is not None else {},
                              reason="edited")
    if answer.endswith("_session"):
        return ApprovalAnswer(granted=answer == "grant_session", scope="session")
    return answer == "grant"


class HeldSession:
    """One session kept open between steps, in a task of a trio loop's nursery: :meth:`open`
    starts that task, which opens the session with ``opener`` and waits; :meth:`close` lets
    it leave the session's block and raises what the block raised."""

    def __init__(self, opener: Callable[[], AbstractAsyncContextManager[Session]],
                 on_open: Callable[[Session], None]) -> None:
        self._opener = opener
        self._on_open = on_open
        #: the open session, or ``None``
        self.session: Session | None = None
        self._closing: trio.Event | None = None
        self._gone: trio.Event | None = None
        self._error: BaseException | None = None

    async def open(self, nursery: trio.Nursery) -> None:
        """Open the session in a new task of ``nursery``; returns once it is open."""
        await nursery.start(self._hold)

    async def close(self) -> None:
        """Close the session (if open) and wait until its block has ended."""
        if self._closing is None or self._gone is None:
            return
        self._closing.set()
        await self._gone.wait()
        self._closing = self._gone = None
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    async def _hold(self, *, task_status: trio.TaskStatus[None]) -> None:
        closing, gone = trio.Event(), trio.Event()
        self._closing, self._gone = closing, gone
        try:
            async with self._opener() as session:
                self.session = session
                self._on_open(session)
                task_status.started()
                await closing.wait()
        except BaseException as exc:  # reported by the step that closes the session
            self._error = exc
            if not closing.is_set():
                raise
        finally:
            self.session = None
            gone.set()


async def drive(session: Session, action: Callable[[], Awaitable[PromptResult]],
                cancel_at: int | None) -> bool:
    """Run ``action`` (a prompt or a resume of ``session``), cancelled once ``cancel_at`` more
    records are written (``None``: not cancelled). True if the log must have no open call
    after it: the action ended (not paused), or was cancelled (the engine closed every call of
    the batch)."""
    start = session.state.last_seq
    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:
            if cancel_at is not None:
                nursery.start_soon(_cancel_after, session, start + cancel_at, scope)
            result = await action()
            nursery.cancel_scope.cancel()
        assert result.stop in ("end_turn", "max_turns", "paused"), result
        return result.stop != "paused"
    return True


async def _cancel_after(session: Session, seq: int, scope: trio.CancelScope) -> None:
    records: AsyncIterator[Record] = session.follow(after=seq)
    async with aclosing(records) as stream:  # type: ignore[type-var]
        async for _ in stream:
            scope.cancel()
            return
