"""Progress, live: who in this process hears a call's updates, as they are recorded.

A tool reports progress with ``ctx.report_progress`` (or forwards a nested call's with
``ctx.forward_progress``). The update is recorded (``tool_progress``) and then, in the task that
reported it and before ``report_progress`` returns, handed to

1. the session's progress handlers (``session.on_progress``): every call's updates, nested
   calls' included;
2. the caller of the call, if it asked to hear them: ``ctx.execute_tool(...,
   on_progress=...)`` for a nested call, ``session.call_tool(..., on_progress=...)`` for a
   host call.

Both are plain functions, called synchronously: an update reaches them in the order of the
log, before the tool goes on, and a caller that forwards an update records its own in turn,
which goes the same way (so a grandparent hears what its child forwarded, and the handlers
see the child's record, then the forwarded one). Each is handed its own copy of the update: a
listener that changes its ``data`` (or a resource its ``content`` embeds) changes nothing in
the log. A listener that wants to do I/O hands the update on (a memory channel, a queue) and does it in a task of its own.

What a listener raises is not the reporting tool's failure: the tool goes on, and its log
does not change.

- A caller's listener is the caller's own code: once it raised, it hears nothing more, and
  its exception is raised to the caller when the call it listened to has ended, by the
  ``execute_tool`` or ``call_tool`` that gave it (the call's result stays in the log).
- A session's handler has no caller to raise to: as trio does with an instrument that
  raises, it is removed, and the exception is logged (logger ``engine.progress``).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from typing import Any

import attrs

from events.results import EmbeddedResource, ToolResult
from events.types import ToolProgress

from ..core.jsonvalues import copy_json, own_result

__all__ = ["ProgressListener", "ProgressRoutes", "listener_checked"]

#: What hears progress: called with each update (a copy of the recorded ``tool_progress``
#: event), synchronously; what it returns is ignored.
ProgressListener = Callable[[ToolProgress], Any]

_log = logging.getLogger("engine.progress")


def listener_checked(listener: Any, given: str) -> ProgressListener | None:
    """``listener`` if it can hear progress (``None`` stays ``None``); else a ``TypeError``
    that says what ``given`` takes instead. An ``async def`` is refused: an update is handed
    on synchronously, so its coroutine would never run."""
    if listener is None:
        return None
    if not callable(listener):
        raise TypeError(f"{given} takes a function called with each progress update, "
                        f"not {type(listener).__name__}")
    if inspect.iscoroutinefunction(listener) or inspect.iscoroutinefunction(
            getattr(listener, "__call__", None)):
        raise TypeError(f"{given} is called synchronously, as each update is recorded: give "
                        f"a plain function (an async one's coroutine would never run); to do "
                        f"async work, send the update to a memory channel and await it in a "
                        f"task of your own")
    checked: ProgressListener = listener
    return checked


def _copy(update: ToolProgress) -> ToolProgress:
    """A listener's own copy: the log's data, and the resources its content embeds, are not
    handed out."""
    embedded = any(isinstance(block, EmbeddedResource) for block in update.content)
    if update.data is None and not embedded:
        return update  # frozen, and nothing in it can change
    content = own_result(ToolResult(content=update.content)).content if embedded else (
        update.content)
    return attrs.evolve(update, data=copy_json(update.data), content=content)


class _Listening:
    """One caller's listener for one call, and the first thing it raised."""

    __slots__ = ("error", "listener")

    def __init__(self, listener: ProgressListener) -> None:
        self.listener = listener
        self.error: Exception | None = None


class ProgressRoutes:
    """The progress listeners of one session in this process (see the module docstring)."""

    def __init__(self) -> None:
        self._handlers: list[ProgressListener] = []
        self._callers: dict[str, _Listening] = {}

    def add_handler(self, handler: ProgressListener) -> None:
        """Hand every update of the session's calls to ``handler`` from now on."""
        self._handlers.append(handler)

    def listen(self, call_id: str, listener: ProgressListener | None) -> None:
        """The caller of ``call_id`` hears its updates until :meth:`unlisten`."""
        if listener is not None:
            self._callers[call_id] = _Listening(listener)

    def unlisten(self, call_id: str) -> Exception | None:
        """The caller of ``call_id`` hears no more of it; what its listener raised, if it did,
        for the caller to raise."""
        listening = self._callers.pop(call_id, None)
        return None if listening is None else listening.error

    def reported(self, update: ToolProgress) -> None:
        """``update`` was just recorded: hand it to the session's handlers, then to its
        call's caller."""
        for handler in self._handlers:
            try:
                _heard(handler(_copy(update)))
            except Exception:
                self._handlers = [h for h in self._handlers if h is not handler]
                _log.exception("the progress handler %r raised on an update of call %s: it "
                               "was removed and hears no more updates", handler,
                               update.call_id)
        listening = self._callers.get(update.call_id)
        if listening is not None and listening.error is None:
            try:
                _heard(listening.listener(_copy(update)))
            except Exception as exc:
                listening.error = exc


def _heard(returned: Any) -> None:
    """A listener's return value: an awaitable means an async function slipped through (a
    lambda that calls one, say); its work would never run."""
    if inspect.isawaitable(returned):
        close = getattr(returned, "close", None)
        if close is not None:
            close()  # no "never awaited" warning on top of this error
        raise TypeError("a progress listener returned an awaitable: it is called "
                        "synchronously, so give a plain function")
