"""What is fixed for a session: the one value every step of a call consults.

An :class:`Environment` holds the session's setup — its tools, policy rules, limits, handlers,
approver, asker, nesting depth and clock — as one frozen value that is passed, explicitly, to what
uses it. Nothing changes it in place: registering a tool or adding a handler makes a new
environment (:meth:`Environment.evolve`). Each step of a call reads the session's setup as
it is when the step begins (:attr:`Environment.newest`): a call is gated with the tools and
handlers registered when it is gated, and its body is the version registered when it starts,
whether it is the first call of a new batch or a nested call of a body that started before the
change (the log shows the new registration before the call, and the call follows the log). A
step that has begun keeps what it read: a body that runs is not swapped for a newer version.
What *changes* while calls run (which run here, which wait, who is asking) is
:class:`engine.runtime.inflight.InFlight`'s, and what happened is the log's. Pure: no trio, no I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from events.results import ModelView

from .approvals import Approver, answers_at_once, deny_all
from .handlers import ToolCallHandler, ToolResultHandler
from .cutting import check_view
from .limits import MAX_CALL_DEPTH, Limits
from .policy import PolicyRules
from .questions import Asker, asks_at_once, decline_all
from .registry import Registry

__all__ = ["Environment"]


class _Newest:
    """The newest environment of one session's lineage (every :meth:`Environment.evolve` of
    the first one shares it), so that an older one can tell what the session has now."""

    __slots__ = ("env",)

    def __init__(self) -> None:
        self.env: Environment | None = None


@attrs.frozen(kw_only=True)
class Environment:
    """One session's setup, as the runtime reads it (see the module's docstring)."""

    registry: Registry = attrs.field(factory=Registry)
    rules: PolicyRules = PolicyRules()
    limits: Limits = Limits()
    approver: Approver = deny_all
    #: who answers a running tool's questions (``ctx.ask``)
    asker: Asker = decline_all
    max_depth: int = 8
    max_turns: int = 50
    #: how much of a result the model reads, for a tool that sets none (docs/tools.md, "Long
    #: outputs"); ``None``: all of it, unless it is too large for the log
    model_view: ModelView | None = None
    #: the wall clock a record's time comes from: the runtime's choice, so the core reads none
    clock: Callable[[], float] = attrs.field(kw_only=True)
    call_handlers: tuple[ToolCallHandler, ...] = ()
    result_handlers: tuple[ToolResultHandler, ...] = ()
    #: whether a call of this session may wait for the host: its approver or its asker may
    #: answer :data:`~engine.core.approvals.LATER` (:func:`~engine.core.approvals.answers_at_once`,
    #: :func:`~engine.core.questions.asks_at_once`). Unlike whether the policy asks about some
    #: tool, this holds for as long as the session is open: nothing changes the approver or
    #: the asker, while a tool may be registered at any time.
    may_defer: bool = attrs.field(init=False)
    _newest: _Newest = attrs.field(factory=_Newest, alias="_newest", eq=False, repr=False)

    @may_defer.default
    def _may_defer(self) -> bool:
        return not (answers_at_once(self.approver) and asks_at_once(self.asker))

    def __attrs_post_init__(self) -> None:
        if self.max_depth < 0 or self.max_turns < 1:
            raise ValueError("max_depth must be >= 0 and max_turns >= 1")
        check_view(self.model_view, "model_view")
        if self.max_depth > MAX_CALL_DEPTH:
            raise ValueError(f"max_depth={self.max_depth} is deeper than nested calls can go: "
                             f"use at most {MAX_CALL_DEPTH} (engine.core.limits.MAX_CALL_DEPTH)")
        self._newest.env = self  # made by evolve: the session's setup from now on

    @property
    def newest(self) -> Environment:
        """The session's setup now: this environment, or the one its latest
        :meth:`evolve` made (a tool registered, a handler added since)."""
        newest = self._newest.env
        assert newest is not None
        return newest

    def evolve(self, **changes: Any) -> Environment:
        """A copy with ``changes``: how a session changes its setup. The copy becomes
        :attr:`newest` for this environment and every other of its lineage."""
        return attrs.evolve(self, **changes)
