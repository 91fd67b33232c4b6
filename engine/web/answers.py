"""Recording a person's answer from the console: to a call waiting for approval, or to a
tool's question.

Every answer is checked here first, against the log as it stands: the call or question must
still wait, an edit of the arguments must fit the tool's input schema as the log registered it,
a form's content must fit the question's schema. A refused answer records nothing and says
why (:class:`Refused`). Then it goes one of two ways:

- a session this process runs through a :class:`~engine.web.desk.WebDesk` gets it at once:
  its waiting approver or asker returns it, and the session records it;
- any other session is opened here with no tools and no model (the console runs nothing),
  answered through the normal session controls (``resolve_approval``,
  ``answer_question``), and closed at once. Opening claims the session, so an answer never
  races its owner: a session open elsewhere refuses the claim (``SessionInUse``) and the
  console says to answer it there. The session goes on where its tools are, when it is
  resumed there.
"""

from __future__ import annotations

from typing import Any, Literal

from events.errors import SessionInUse
from events.stores import EventStore

from ..core.approvals import ApprovalAnswer
from ..core.errors import CallError
from ..core.forms import content_problem
from ..core.questions import Answer
from ..core.schemas import SchemaError, compile_schema
from ..runtime.session import Session
from .desk import WebDesk
from .state import Folded

__all__ = ["Refused", "record_approval", "record_question"]


class Refused(Exception):
    """An answer the console did not record, and why: shown to the person on the page."""


def edit_problem(folded: Folded, call_id: str, arguments: Any) -> str | None:
    """What is wrong with ``arguments`` as the call's edited arguments, or ``None``."""
    name = folded.projection.calls[call_id].name
    snapshot = folded.projection.tools.get(name)
    if not isinstance(arguments, dict):
        return "the arguments are a JSON object, e.g. {\"path\": \"notes.md\"}"
    if snapshot is None:
        return None  # the log registered no schema: the session validates when it runs
    try:
        validator = compile_schema(snapshot.input_schema, where=f"tool {name!r} input_schema")
    except SchemaError as exc:
        return str(exc)
    violation = validator.violation(arguments)
    return None if violation is None else f"the edited arguments do not fit {name}'s " \
                                          f"input schema: {violation}"


async def record_approval(store: EventStore, desk: WebDesk | None, folded: Folded,
                          call_id: str, answer: ApprovalAnswer) -> None:
    """Record ``answer`` to the call's pending approval (see the module docstring)."""
    projection = folded.projection
    if call_id not in projection.pending_approvals:
        raise Refused(f"call {call_id} does not wait for an approval (any more): reload the "
                      f"page to see where it is")
    if answer.granted and answer.arguments is not None:
        problem = edit_problem(folded, call_id, answer.arguments)
        if problem is not None:
            raise Refused(problem)
    if desk is not None and desk.approve(folded.session_id, call_id, answer):
        return
    async with _Opened(store, folded.session_id) as session:
        try:
            await session.resolve_approval(call_id, answer.granted, answer.scope,
                                           arguments=answer.arguments, reason=answer.reason)
        except CallError as exc:
            raise Refused(str(exc)) from None


async def record_question(store: EventStore, desk: WebDesk | None, folded: Folded,
                          question_id: str, answer: Answer) -> None:
    """Record ``answer`` to the pending question (see the module docstring)."""
    asked = folded.projection.question(question_id)
    if asked is None or question_id not in folded.projection.pending_questions:
        raise Refused(f"question {question_id} does not wait for an answer (any more): reload "
                      f"the page to see where it is")
    if answer.accepted:
        problem = content_problem(asked.asked.schema, answer.content)
        if problem is not None:
            raise Refused(problem)
    if desk is not None and desk.answer(folded.session_id, question_id, answer):
        return
    async with _Opened(store, folded.session_id) as session:
        try:
            await session.answer_question(question_id, answer.action, answer.content,
                                          reason=answer.reason)
        except CallError as exc:
            raise Refused(str(exc)) from None


class _Opened:
    """The session opened with no tools and no model, for the one answer; a session its owner
    has open is a :class:`Refused` saying where to answer instead."""

    def __init__(self, store: EventStore, session_id: str) -> None:
        self._context = Session.open(store, session_id=session_id)

    async def __aenter__(self) -> Session:
        try:
            return await self._context.__aenter__()
        except SessionInUse:
            raise Refused("the session is open in another process, which owns it now: answer "
                          "there (its approver or asker), or here once it has paused and "
                          "closed") from None

    async def __aexit__(self, *exc: Any) -> Literal[False]:
        await self._context.__aexit__(*exc)
        return False
