"""Approvers: who answers when the policy says ask.

An approver is any async callable ``(ApprovalRequest) -> bool | ApprovalAnswer | LATER``.
``True`` grants this call once; an :class:`ApprovalAnswer` can also grant or refuse every
later call of the tool for the session (``scope="session"``) and edit the arguments (recorded
as a rewrite by the approver, then validated again). :data:`LATER` leaves the request pending:
the session pauses, and the host answers with ``session.resolve_approval`` (in this process
or another one). An approver that raises, or answers anything else, refuses: fail closed.

The model is told the reason of a refusal ("NAME was not approved: REASON"), or only "NAME was
not approved" when none was given; of an approver that failed, only that it failed (the log
keeps the exception). See :mod:`engine.core.refusals`.

Ready-made: :func:`approve_all`, :func:`deny_all` (the default: safe), and
:func:`terminal_approver`, which asks a person at the terminal. :func:`at_once` declares that
an approver of the host's never answers :data:`LATER`, which lets the runtime run a batch of
one call in the prompt's own task (:func:`answers_at_once`).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any, Literal, TypeVar, Union, cast

import attrs
from attrs.validators import in_, instance_of, optional

from events.renamed import renamed_attribute
from events.types import Annotations, Origin

from .handlers import handler_name

__all__ = [
    "LATER",
    "ApprovalAnswer",
    "ApprovalRequest",
    "Approver",
    "AtOnce",
    "answers_at_once",
    "approve_all",
    "as_answer",
    "at_once",
    "broken_promise",
    "deny_all",
]


@attrs.frozen(kw_only=True)
class ApprovalRequest:
    """What the approver is asked about: one call, by the engine's id, with the final
    arguments and the policy's reason."""

    call_id: str
    name: str
    arguments: Any
    reason: str
    annotations: Annotations
    origin: Origin
    parent_id: str | None


@attrs.frozen(kw_only=True)
class ApprovalAnswer:
    """An approver's full answer (the policy *decides*, an approver *answers*: the words of
    docs/concepts.md). Checked when built: ``granted`` must be a real ``bool`` (a
    truthy string must not grant anything)."""

    granted: bool = attrs.field(validator=instance_of(bool))
    scope: Literal["once", "session"] = attrs.field(default="once", validator=in_(("once", "session")))
    arguments: Any = None
    reason: str | None = attrs.field(default=None, validator=optional(instance_of(str)))


class _Later:
    def __repr__(self) -> str:
        return "LATER"


#: An approver's answer that leaves the request pending, for the host to resolve later.
LATER: Any = _Later()

Reply = Union[bool, ApprovalAnswer, _Later]
#: An approver: an async function of the request (or a plain one, which runs in the session's
#: loop and must answer at once: it may not block) that replies ``True``, ``False``, an
#: :class:`ApprovalAnswer` or :data:`LATER`.
Approver = Callable[[ApprovalRequest], Union[Awaitable[Reply], Reply]]


def as_answer(reply: Any) -> ApprovalAnswer:
    """What an approver returned, as an :class:`ApprovalAnswer`. Anything but ``True``,
    ``False`` or an answer is a ``TypeError``: the engine treats it as an approver that
    failed, which refuses."""
    if isinstance(reply, ApprovalAnswer):
        return reply
    if reply is True or reply is False:
        return ApprovalAnswer(granted=reply)
    raise TypeError(f"the approver answered {reply!r}: answer True, False or an "
                    "ApprovalAnswer (or LATER)")


async def approve_all(request: ApprovalRequest) -> bool:
    """Grant every call. For tests, demos and trusted sandboxes."""
    return True


async def deny_all(request: ApprovalRequest) -> bool:
    """Refuse every call that needs approval. The default approver: safe."""
    return False


class AtOnce:
    """An approver declared to answer every request when it is asked, never :data:`LATER`
    (made by :func:`at_once`). It is the approver it wraps, called as is: the same answers,
    the same exceptions, in the same task and context."""

    approver: Callable[[Any], Any]

    def __init__(self, approver: Callable[[Any], Any]) -> None:
        functools.update_wrapper(self, approver, updated=())  # its name, docstring, __wrapped__
        self.approver = approver

    def __call__(self, request: Any) -> Any:
        # the approver's own awaitable, not one of this wrapper's: what it answers or raises
        # reaches the gate exactly as it would undeclared (the log keeps the same traceback)
        return self.approver(request)

    def __repr__(self) -> str:
        return f"at_once({self.approver!r})"


H = TypeVar("H", bound=Callable[..., Any])


def at_once(approver: H) -> H:
    """Declare that ``approver`` answers every request when it is asked, never :data:`LATER`
    (a policy function that returns ``True``, ``False`` or an :class:`ApprovalAnswer`). Use
    it as a decorator or around an approver (an asker too: one that always answers a
    question at once, :mod:`engine.core.questions`)::

        @at_once
        async def approver(request):
            return request.name != "delete_file"

        Session.open(store, model=model, tools=tools, approver=approver)

    The approver is called as it is; what changes is what the runtime may rely on: under an
    approver that answers at once, no call can wait for the host, so a batch of one call runs
    in the prompt's own task (:func:`answers_at_once`), which saves a turn two passes of
    trio's scheduler. A declared approver that answers ``LATER`` all the same has broken its
    word: the call is refused as if the approver had raised (:func:`broken_promise`, recorded
    like any approver's error), and the session goes on. ``approve_all``, ``deny_all`` and an
    approver already declared come back as they are."""
    return approver if answers_at_once(approver) else cast(H, AtOnce(approver))


def answers_at_once(approver: Approver) -> bool:
    """Whether ``approver`` answers every request when it is asked, never :data:`LATER`:
    :func:`approve_all`, :func:`deny_all` and an approver the host declared with
    :func:`at_once`. Any other approver may answer later, as far as the runtime can tell.

    Only an approver that answers later makes a call wait for the host, and a session's
    approver is fixed while it is open (its tools and handlers are not: a tool the policy asks
    about may be registered while a call runs). So under one of these no call of the session
    can ever wait for the host, whatever happens while it runs: :mod:`engine.runtime.batch` then runs
    a batch of one call in the prompt's own task. The gate holds the approver to it
    (:func:`broken_promise`)."""
    return approver is approve_all or approver is deny_all or isinstance(approver, AtOnce)


def broken_promise(approver: Approver) -> TypeError:
    """The error of an approver that answers at once (:func:`answers_at_once`) and answered
    :data:`LATER`: the gate raises it where the approver answered, so the call is refused and
    the log keeps it as any approver's error. Waiting instead could hang the prompt: a call
    in the prompt's own task, or one of its nested calls, would wait for a host that is
    waiting for it."""
    return TypeError(
        f"the approver {handler_name(approver)} answered LATER, but it was declared to answer "
        "at once (engine.at_once): answer True, False or an ApprovalAnswer, or pass the "
        "approver without at_once to let it answer later")


#: Names this module had before, for code written against them (each warns).
_RENAMED = {"ApprovalDecision": "ApprovalAnswer", "as_decision": "as_answer"}


def __getattr__(name: str) -> Any:
    return renamed_attribute(__name__, _RENAMED, globals(), name)
