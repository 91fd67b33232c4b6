"""Askers: who answers when a running tool asks the person something.

A tool body asks with ``await ctx.ask(message, schema)``: a :class:`Question` with a flat form
(:mod:`engine.core.forms`). The session's asker answers it, as its approver answers approvals:
an async callable (or a plain one, which must answer at once) ``(Question) -> Answer | LATER``.
An :class:`Answer` accepts with content that fits the form, declines, or cancels (MCP's three
actions). :data:`~engine.core.approvals.LATER` leaves the question pending: the session pauses,
and the host answers with ``session.answer_question`` (in this process or another one).

An asker that raises, answers anything but an answer or ``LATER``, or accepts with content that
does not fit the form, has not answered: the question is recorded as cancelled, with the
asker's error, and the tool reads ``Answer(action="cancel")`` (fail closed: nothing was
accepted).

Ready-made: :func:`decline_all` (the default: nobody is there to ask, so every question is
declined at once, recorded), and ``engine.present.terminal_asker``, a form at the terminal.
:func:`~engine.core.approvals.at_once` declares an asker that never answers ``LATER``, as it
does an approver.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal, Union

import attrs
from attrs.validators import in_, instance_of, optional

from events.types import Origin

from .approvals import AtOnce, _Later
from .handlers import handler_name
from .nested import canonical
from .views import AskedQuestion

__all__ = [
    "ACTIONS",
    "Action",
    "Answer",
    "AskedBefore",
    "Asker",
    "Question",
    "as_reply",
    "asks_at_once",
    "broken_asker_promise",
    "decline_all",
    "question_id",
]

Action = Literal["accept", "decline", "cancel"]
#: What a person may do with a question, as MCP's elicitation says it: accept (with content),
#: decline (an explicit no), cancel (dismissed without a choice).
ACTIONS: tuple[Action, ...] = ("accept", "decline", "cancel")


def question_id(call_id: str, number: int) -> str:
    """The id of the ``number``-th question (from 1) that call ``call_id`` asked."""
    return f"{call_id}#{number}"


def _content(answer: Answer, attribute: Any, content: Any) -> None:
    if answer.action == "accept":
        if not isinstance(content, Mapping):
            raise TypeError("an accepting Answer takes content=, a dict of the form's fields "
                            f"(not {type(content).__name__})")
    elif content is not None:
        raise ValueError(f"only an accepting Answer has content; a {answer.action!r} has none")


@attrs.frozen(kw_only=True)
class Answer:
    """The person's answer to a question: ``action`` is ``"accept"`` (with ``content``, a dict
    of the form's fields), ``"decline"`` or ``"cancel"``. ``reason``, for a decline or a cancel,
    is why, if known (no asker, an asker that failed, a client that cannot show forms): the
    tool may pass it on."""

    action: Action = attrs.field(validator=in_(ACTIONS))
    content: Mapping[str, Any] | None = attrs.field(default=None, validator=_content)
    reason: str | None = attrs.field(default=None, validator=optional(instance_of(str)))

    @property
    def accepted(self) -> bool:
        """Whether the person accepted (then :attr:`content` holds the form's fields)."""
        return self.action == "accept"


@attrs.frozen(kw_only=True)
class Question:
    """What the asker is asked: by the question's id (``"{call_id}#{n}"``), the call that
    asks and its tool, the message for the person and the form (a checked flat schema)."""

    question_id: str
    call_id: str
    name: str
    message: str
    schema: Mapping[str, Any]
    origin: Origin
    parent_id: str | None


Reply = Union[Answer, _Later]
#: An asker: an async function of the question (or a plain one, which runs in the session's
#: loop and must answer at once) that replies with an :class:`Answer` or :data:`LATER`.
Asker = Callable[[Question], Union[Awaitable[Reply], Reply]]


def as_reply(reply: Any) -> Answer:
    """What an asker returned, as an :class:`Answer`; anything else is a ``TypeError`` (the
    question is then cancelled, the asker's error recorded)."""
    if isinstance(reply, Answer):
        return reply
    raise TypeError(f"the asker answered {reply!r}: answer an engine.Answer (accept with "
                    f"content, decline or cancel) or LATER")


#: Why :func:`decline_all` declines: what the tool reads in ``answer.reason``.
NO_ASKER = "nobody can be asked: the session has no asker"


async def decline_all(question: Question) -> Answer:
    """Decline every question at once: the default asker, for a session where nobody is
    there to ask. The tool reads a decline with a reason, and can tell the model."""
    return Answer(action="decline", reason=NO_ASKER)


def asks_at_once(asker: Asker) -> bool:
    """Whether ``asker`` answers every question when it is asked, never :data:`LATER`:
    :func:`decline_all`, and an asker declared with :func:`~engine.core.approvals.at_once`.
    Only an asker that may answer later can make a body wait for the host."""
    return asker is decline_all or isinstance(asker, AtOnce)


def broken_asker_promise(asker: Asker) -> TypeError:
    """The error of an asker declared to answer at once that answered :data:`LATER`: the
    question is cancelled, as if the asker had raised (a body waiting for the host could hang
    a prompt whose calls run in its own task)."""
    return TypeError(
        f"the asker {handler_name(asker)} answered LATER, but it was declared to answer at "
        "once (engine.at_once): answer an Answer, or pass the asker without at_once to let it "
        "answer later")


class AskedBefore:
    """The questions an earlier run of a body asked, for a run that asks them again (a body
    that runs again after a restart, or in a replay): each question asked now takes the first
    recorded one with the same message and form (as canonical JSON), once. Whatever order
    concurrent tasks of the body ask in, each gets its own; a question none matches is new,
    and the asker is asked. A first run has none."""

    __slots__ = ("_left",)

    def __init__(self, recorded: tuple[AskedQuestion, ...]) -> None:
        self._left = [(_key(q.asked.message, q.asked.schema), q) for q in recorded]

    def match(self, message: str, schema: Any) -> AskedQuestion | None:
        """The recorded question this one is, taken (``None``: a new question)."""
        if not self._left:
            return None
        key = _key(message, schema)
        for index, (recorded, asked) in enumerate(self._left):
            if recorded == key:
                del self._left[index]
                return asked
        return None


def _key(message: str, schema: Any) -> str:
    return canonical([message, schema])
