"""What is fixed for a session: the one value every step of a call consults.

An :class:`Environment` holds the session's setup — its tools, policy rules, limits, handlers,
approver, nesting depth and clock — as one frozen value that is passed, explicitly, to what
uses it. Nothing changes it in place: registering a tool or adding a handler makes a new
environment (:meth:`Environment.evolve`), which the next batch and its calls use; a call that
already runs keeps the environment it started with. What *changes* while calls run (which run
here, which wait, who is asking) is :class:`engine.inflight.InFlight`'s, and what happened is
the log's. Pure: no trio, no I/O.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import attrs

from .approvals import Approver, deny_all
from .handlers import ToolCallHandler, ToolResultHandler
from .limits import MAX_CALL_DEPTH, Limits
from .policy import PolicyRules, decide
from .registry import Registry

__all__ = ["Environment"]


@attrs.frozen(kw_only=True)
class Environment:
    """One session's setup, as the runtime reads it (see the module's docstring)."""

    registry: Registry = attrs.field(factory=Registry)
    rules: PolicyRules = PolicyRules()
    limits: Limits = Limits()
    approver: Approver = deny_all
    max_depth: int = 8
    max_turns: int = 50
    clock: Callable[[], float] = time.time
    call_handlers: tuple[ToolCallHandler, ...] = ()
    result_handlers: tuple[ToolResultHandler, ...] = ()
    #: whether the policy may ask about a call of some registered tool (session grants aside:
    #: they only ever turn an ask into an answer). If not, no call can wait for the host.
    may_ask: bool = attrs.field(init=False)

    @may_ask.default
    def _may_ask(self) -> bool:
        return any(decide(name, spec.annotations, rules=self.rules).decision == "ask"
                   for name, spec in self.registry.specs.items())

    def __attrs_post_init__(self) -> None:
        if self.max_depth < 0 or self.max_turns < 1:
            raise ValueError("max_depth must be >= 0 and max_turns >= 1")
        if self.max_depth > MAX_CALL_DEPTH:
            raise ValueError(f"max_depth={self.max_depth} is deeper than nested calls can go: "
                             f"use at most {MAX_CALL_DEPTH} (engine.limits.MAX_CALL_DEPTH)")

    def evolve(self, **changes: Any) -> Environment:
        """A copy with ``changes``: how a session changes its setup between batches."""
        return attrs.evolve(self, **changes)
