"""What a tool body is given besides its arguments, as the core sees it: a Protocol.

The runtime implements it (:class:`engine.runtime.context.CallContext`); a tool declares its
``ctx`` parameter as :class:`ToolContext`, and code that only reads a call's outcome uses
:class:`CallOutcome`. Keeping both here lets the pure core (tool specs, the registry) name what a
body receives without importing the runtime.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol, TypeVar

import attrs

from events.fast.fastinit import fast_init
from events.results import ContentBlock, ToolResult
from events.types import ToolProgress, ToolSnapshot

from .questions import Answer

__all__ = ["BodySuspended", "CallOutcome", "ToolContext"]

T = TypeVar("T")


@fast_init
@attrs.frozen(kw_only=True)
class CallOutcome:
    """What ``ctx.execute_tool`` gives back: the nested call's id, its result, and how it
    ended (``status``: ``completed``, ``failed``, ``blocked``, ``denied`` or ``cancelled``, as
    the call's view says it; empty when whoever made the outcome did not say)."""

    call_id: str
    result: ToolResult
    status: str = ""

    @property
    def is_error(self) -> bool:
        """True for every failure: unknown tool, bad arguments, blocked, denied, raised, …"""
        return self.result.is_error

    @property
    def content(self) -> tuple[ContentBlock, ...]:
        """The result's content blocks."""
        return self.result.content

    @property
    def structured_content(self) -> Any:
        """The result's structured content (``None`` if there is none)."""
        return self.result.structured_content


class BodySuspended(Exception):
    """Raised by a body that recorded its own state and stopped, to go on at the next
    ``resume()`` (the code tool's program: docs/codemode.md, "Pause and resume"). The call
    stays running in the log, with no terminal event. Only the runtime's ctx may let a body
    stop so (``CallContext.suspend``); raised by any other body, it is a failure as any
    exception is."""


class ToolContext(Protocol):
    """Handed to ``execute(call, ctx)``: the running call's ids, nested calls and progress.

    Valid only while that call runs. The engine's implementation is
    :class:`engine.runtime.context.CallContext`; a test may hand a body any object with these
    members."""

    @property
    def call_id(self) -> str:
        """The engine's id of the running call."""
        ...

    @property
    def session_id(self) -> str:
        """The session the call belongs to."""
        ...

    async def execute_tool(self, name: str, arguments: Any = None, *,
                           on_progress: Callable[[ToolProgress], Any] | None = None,
                           ) -> CallOutcome:
        """Run another tool as a nested call of this one; never raises for a tool failure.
        ``on_progress`` is called with each progress update the nested call reports, as it
        is recorded."""
        ...

    @property
    def tools(self) -> Mapping[str, ToolSnapshot]:
        """Every registered tool, by name."""
        ...

    @property
    def active_tools(self) -> frozenset[str]:
        """The names of the tools the model can see now."""
        ...

    def activate(self, names: Iterable[str]) -> tuple[str, ...]:
        """Make deferred tools visible to the model; returns the names newly activated."""
        ...

    def report_progress(self, message: str | None = None, data: Any = None, *,
                        progress: float | None = None, total: float | None = None,
                        content: str | Iterable[ContentBlock] = ()) -> None:
        """Record progress of the running call (``progress`` of ``total``, if given), and
        stream output (``content``) for whoever watches; the model never reads it."""
        ...

    def forward_progress(self, update: ToolProgress) -> None:
        """Record a nested call's progress update as the running call's own."""
        ...

    async def whole_result(self, call_id: str) -> ToolResult:
        """The whole result of an earlier call of this session that completed, also one the
        model read cut (docs/tools.md, "Long outputs"): from its record, or from the
        artifact the store keeps."""
        ...

    async def ask(self, message: str, schema: Any) -> Answer:
        """Ask the person ``message``, with ``schema`` the flat form an answer fills in (see
        :mod:`engine.core.forms`), and return their answer: accept with content, decline or
        cancel. The session's asker answers, now or later (docs/tools.md)."""
        ...

    async def run_in_thread(self, function: Callable[..., T], *args: Any) -> T:
        """``function(*args)`` in a worker thread, for blocking code: the call's timeout or
        cancellation stops the wait at once (the thread runs on, and what it returns then is
        dropped). A sync typed tool's body runs here."""
        ...
