"""Answers from the console to a session that runs in this process: :class:`WebDesk`.

A host that mounts the console (:func:`engine.web.console_app`) and runs sessions itself opens
them through the desk: ``async with desk.open(store, model=..., tools=...) as session``. The
desk gives each session an approver and an asker that wait (a person answers in the browser)
and knows which session each waiting request belongs to, so that the console's answer reaches
the waiting call at once: the session records it as its approver's or asker's own answer, and
the call goes on, whether the model asked for it or a tool did. A session the desk does not
run is answered through its log instead (:mod:`engine.web.answers`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio

from events.stores import EventStore

from ..core.approvals import ApprovalAnswer, ApprovalRequest
from ..core.questions import Answer, Question
from ..runtime.session import Session

__all__ = ["WebDesk"]


class _Waiting:
    """One request or question waiting for the person, and the answer once given."""

    def __init__(self) -> None:
        self.done = trio.Event()
        self.answer: Any = None

    def give(self, answer: Any) -> None:
        self.answer = answer
        self.done.set()


class _Seat:
    """The approver and asker of one session the desk runs."""

    def __init__(self) -> None:
        self.session_id: str | None = None
        self.approvals: dict[str, _Waiting] = {}
        self.questions: dict[str, _Waiting] = {}

    async def approver(self, request: ApprovalRequest) -> ApprovalAnswer:
        waiting = self.approvals[request.call_id] = _Waiting()
        try:
            await waiting.done.wait()
        finally:
            del self.approvals[request.call_id]
        answer: ApprovalAnswer = waiting.answer
        return answer

    async def asker(self, question: Question) -> Answer:
        waiting = self.questions[question.question_id] = _Waiting()
        try:
            await waiting.done.wait()
        finally:
            del self.questions[question.question_id]
        answer: Answer = waiting.answer
        return answer


class WebDesk:
    """The sessions this process runs whose approvals and questions the console answers (see
    the module docstring). Pass it to :func:`~engine.web.console_app` as ``desk=``."""

    def __init__(self) -> None:
        self._seats: dict[str, _Seat] = {}

    @asynccontextmanager
    async def open(self, store: EventStore, **options: Any) -> AsyncIterator[Session]:
        """:meth:`Session.open <engine.runtime.session.Session.open>` with ``options``, and
        with the desk's approver and asker: a person answers in the console while the
        session waits. ``approver=`` and ``asker=`` are the desk's to give."""
        for taken in ("approver", "asker"):
            if taken in options:
                raise TypeError(f"WebDesk.open() gives the session its {taken}: leave "
                                f"{taken}= out (the console answers), or open the session with "
                                f"Session.open() to use your own")
        seat = _Seat()
        async with Session.open(store, approver=seat.approver, asker=seat.asker,
                                **options) as session:
            seat.session_id = session.session_id
            self._seats[session.session_id] = seat
            try:
                yield session
            finally:
                del self._seats[session.session_id]

    def runs(self, session_id: str) -> bool:
        """Whether the desk runs the session now (its requests are answered at once)."""
        return session_id in self._seats

    def approve(self, session_id: str, call_id: str, answer: ApprovalAnswer) -> bool:
        """Give ``answer`` to the call's waiting approver; ``False`` if none waits here."""
        waiting = self._waiting(session_id, "approvals", call_id)
        if waiting is None:
            return False
        waiting.give(answer)
        return True

    def answer(self, session_id: str, question_id: str, answer: Answer) -> bool:
        """Give ``answer`` to the question's waiting asker; ``False`` if none waits here."""
        waiting = self._waiting(session_id, "questions", question_id)
        if waiting is None:
            return False
        waiting.give(answer)
        return True

    def _waiting(self, session_id: str, kind: str, key: str) -> _Waiting | None:
        seat = self._seats.get(session_id)
        if seat is None:
            return None
        waiting: dict[str, _Waiting] = getattr(seat, kind)
        found = waiting.get(key)
        return found if found is not None and not found.done.is_set() else None
