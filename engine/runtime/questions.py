"""A running tool asks the person: ``ctx.ask``, on the record, answered now or later.

:func:`ask` is what ``ctx.ask(message, schema)`` does (:mod:`engine.runtime.context`). It checks the
form (:func:`engine.core.forms.form_schema`), records ``question_asked`` and writes it, and puts
the question to the session's asker in the body's task, as the gate puts a call to the
approver (:mod:`engine.runtime.gate`). An answer is checked against the form and recorded
(``question_answered``) before the body reads it; an asker that fails, answers what is not an
answer, or accepts content that does not fit, cancels the question (recorded with its error:
fail closed). :data:`~engine.core.approvals.LATER` leaves the question pending: the body waits
here (:meth:`~engine.runtime.inflight.InFlight.park`) until the host answers it
(:func:`answer`, from ``session.answer_question``), and the prompt returns ``paused`` once
nothing else can move.

A body that runs again (after a restart, or in a replay) asks its questions again: each is
matched to one its earlier run recorded with the same message and form
(:class:`~engine.core.questions.AskedBefore`), and answered from the log, or waits for the
host if it is still pending; the asker is not asked again. A question no recorded one matches
is new.
"""

from __future__ import annotations

import inspect
from typing import Any

from events.results import ErrorInfo
from events.types import QuestionAnswered, QuestionAsked

from ..core.approvals import LATER
from ..core.environment import Environment
from ..core.errors import InvalidAnswer, QuestionNotPending
from ..core.forms import content_problem, form_schema
from ..core.jsonvalues import copy_json, own_json
from ..core.limits import json_size
from ..core.outputs import describe, error_info, text_limit
from ..core.questions import (
    Answer,
    AskedBefore,
    Question,
    as_reply,
    broken_asker_promise,
    question_id,
)
from ..core.tools import ToolCall
from .inflight import InFlight
from .recorder import Recorder

__all__ = ["answer", "ask", "pending_questions"]

#: What the tool reads when its asker did not answer (raised, or answered wrongly).
ASKER_FAILED = "the asker failed"


async def ask(env: Environment, recorder: Recorder, inflight: InFlight, call: ToolCall,
              before: AskedBefore, message: Any, schema: Any) -> Answer:
    """Ask the person ``message`` with the form ``schema`` for the running ``call``, and
    return the answer (see the module's docstring)."""
    if not isinstance(message, str):
        raise TypeError(f"ctx.ask() takes the message for the person as text, not "
                        f"{type(message).__name__}")
    form = form_schema(schema)  # SchemaError: the tool's own mistake, raised in its body
    limit = env.limits.max_result_bytes
    if json_size(message) + json_size(form) > limit:
        raise ValueError(f"a question (its message and form) over the size limit of {limit} "
                         f"bytes")
    call_id = call.call_id
    asked = before.match(message, form)
    if asked is not None:  # asked by an earlier run of this body
        if asked.answer is not None:
            return _answer_of(asked.answer)
        qid = asked.question_id
    else:
        projection = recorder.projection
        qid = question_id(call_id, len(projection.live_calls[call_id].questions) + 1)
        recorder.record(QuestionAsked(call_id=call_id, question_id=qid, message=message,
                                      schema=form))
        await recorder.flush()
        question = Question(question_id=qid, call_id=call_id, name=call.name,
                            message=message, schema=copy_json(form), origin=call.origin,
                            parent_id=call.parent_id)
        answered = await _put(env, recorder, inflight, question)
        if answered is not None:
            return answered
    await inflight.park(call_id, question=qid)  # until the host answers (answer, below)
    found = recorder.projection.question(qid)
    assert found is not None and found.answer is not None
    return _answer_of(found.answer)


async def _put(env: Environment, recorder: Recorder, inflight: InFlight,
               question: Question) -> Answer | None:
    """Put ``question`` to the session's asker; record and return its answer, or ``None``
    if it said LATER (the question stays pending)."""
    qid = question.question_id
    error: ErrorInfo | None = None
    # a host call that brought its own asker (a served MCP call: its client) answers the
    # questions of its whole tree; a host call waits in the host's task, so it may wait
    asker = inflight.askers.get(question.call_id.split("/", 1)[0], env.asker)
    inflight.ask(qid)  # not pending for the host while the asker decides
    try:
        reply = asker(question)
        if inspect.isawaitable(reply):  # a plain function answers as it returns
            reply = await reply
        if reply is LATER:
            if env.may_defer or asker is not env.asker:
                return None
            raise broken_asker_promise(asker)
        given = as_reply(reply)
        if given.accepted and (problem := content_problem(question.schema,
                                                          own_json(dict(given.content or {})))):
            raise ValueError(f"the asker accepted with content that does not fit the "
                             f"question's form: {problem}")
    except Exception as exc:  # the asker did not answer: cancelled, fail closed
        given = Answer(action="cancel", reason=f"{ASKER_FAILED} ({describe(exc)})")
        error = error_info(exc, text_limit(env.limits))
    finally:
        inflight.asked(qid)
    event = _record(recorder, question.call_id, qid, given, error=error, later=False)
    await recorder.flush()
    return _answer_of(event)


def _record(recorder: Recorder, call_id: str, qid: str, given: Answer, *,
            error: ErrorInfo | None, later: bool) -> QuestionAnswered:
    content = own_json(dict(given.content)) if given.content is not None else None
    event = QuestionAnswered(call_id=call_id, question_id=qid, action=given.action,
                             content=content, reason=given.reason, error=error, later=later)
    recorder.record(event)
    return event


def _answer_of(event: QuestionAnswered) -> Answer:
    """What the body reads: the recorded answer, as its own copy."""
    content = copy_json(event.content) if event.content is not None else None
    return Answer(action=event.action, content=content, reason=event.reason)


def answer(recorder: Recorder, inflight: InFlight, qid: str, given: Answer) -> None:
    """Record the host's answer to the pending question ``qid`` (``session.answer_question``)
    and let a body waiting on it in this process go on. Raises
    :class:`~engine.core.errors.QuestionNotPending` for a question that does not wait, and
    :class:`~engine.core.errors.InvalidAnswer` for content that does not fit its form; nothing
    is recorded then."""
    projection = recorder.projection
    asked = projection.question(qid)
    pending = ", ".join(projection.pending_questions) or "none"
    if asked is None:
        raise QuestionNotPending(f"no call of this session asked a question {qid!r}; "
                                 f"pending: {pending}")
    if inflight.asking(qid):
        raise QuestionNotPending(f"question {qid}: its asker is still deciding; answer a "
                                 f"question only once it is pending "
                                 f"(session.pending_questions())")
    if qid not in projection.pending_questions:
        status = "answered" if asked.answer is not None else "no longer asked: its call ended"
        raise QuestionNotPending(f"question {qid} is not waiting for an answer (it is "
                                 f"{status}); pending: {pending}")
    if given.accepted:
        problem = content_problem(asked.asked.schema, own_json(dict(given.content or {})))
        if problem is not None:
            raise InvalidAnswer(f"question {qid}: {problem}; answer with content that fits "
                                f"its form (session.pending_questions() shows the schema), "
                                f"or decline or cancel it")
    _record(recorder, asked.asked.call_id, qid, given, error=None, later=True)
    inflight.unpark(qid)  # a body waiting here goes on


def pending_questions(recorder: Recorder, inflight: InFlight) -> tuple[Question, ...]:
    """The questions waiting for the host's answer, in the order they were asked (not those
    whose asker is deciding now)."""
    projection = recorder.projection
    found = []
    for qid in projection.pending_questions:
        if inflight.asking(qid):
            continue
        asked = projection.question(qid)
        assert asked is not None
        call = projection.live_calls[asked.asked.call_id]
        found.append(Question(question_id=qid, call_id=call.call_id, name=call.name,
                              message=asked.asked.message, schema=copy_json(asked.asked.schema),
                              origin=call.origin, parent_id=call.parent_id))
    return tuple(found)
