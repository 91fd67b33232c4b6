"""Progress over MCP, both ways: MCP's ``notifications/progress`` and a call's ``tool_progress``.

**Served** (:class:`ProgressNotifier`, :class:`ServedNumbers`): a client that sends a progress token with its
``tools/call`` gets the host call's updates (what its tool reports, and what it forwards of its
nested calls') as ``notifications/progress``, in order and before the call's result:

- ``message`` is the update's message, then the text it streamed (its ``content``'s text
  blocks, joined as they are), on a line of its own after a message (:func:`served_message`);
  left out when it has neither. ``data`` and the content's other blocks stay in the log;
- ``progress`` is the update's ``progress`` when the tool gave one that is greater than the
  last one sent, and then ``total`` is the update's ``total``; otherwise (no number, or one
  that does not grow, as a second nested call's forwarded ``1 of 2`` after the first's
  ``3 of 3``) it is one more than the last one sent (0 for the first), without a total, since
  MCP asks that ``progress`` grow with every notification.

The update is heard synchronously in the session's task (``call_tool(...,
on_progress=...)``), and sent from a task of the request's own, in the server's event loop
(trio, or asyncio when the session is an :class:`engine.hosts.aio.Session`), through a memory
stream that hearing never waits on (under trio that task starts at the call's first update).
A notification that cannot be sent (the client has gone) ends the sending, never the call.

**Mounted** (:func:`reported_to`): a mounted tool's call asks the server for progress, and each
notification the server sends becomes a ``tool_progress`` of the call
(``ctx.report_progress(message, progress=..., total=...)``), heard by its parent and the host
like any update. A notification is input from the server: one the session refuses (a message
over the size limit) is left out, and the call goes on.
"""

from __future__ import annotations

import math
from typing import Any

import anyio
import trio

from events.results import TextContent
from events.types import ToolProgress

from ..core.toolcontext import ToolContext

__all__ = ["ProgressNotifier", "ServedNumbers", "reported_to", "served_message"]


class ProgressNotifier:
    """The notifications of one served ``tools/call``: :meth:`heard` takes the host call's
    updates, and a task of ``tasks`` sends them, in order; :meth:`close` ends the sending once
    what was heard is sent. Use it as::

        async with anyio.create_task_group() as tasks:
            notifier = ProgressNotifier(request, tasks)
            try:
                outcome = await session.call_tool(..., on_progress=notifier.heard)
            finally:
                notifier.close()  # the task group waits until every update is sent

    Under trio the session hears in the server's own loop, so the sending task starts at the
    call's first update, and a call that reports none costs no task (a served call is timed
    against the SDK's own server: docs/performance.md). Under asyncio the session is an
    :class:`engine.hosts.aio.Session`, which hears in trio's guest run, where no asyncio task
    can be started: there the task starts with the call.
    """

    def __init__(self, request: Any, tasks: Any) -> None:
        self._session = request.session  # the SDK's session, scoped to the request
        self._tasks = tasks
        self._send: Any = None  # the sending task's stream, once it has started
        if not _in_trio():
            self._start()

    def _start(self) -> None:
        self._send, receive = anyio.create_memory_object_stream[ToolProgress](math.inf)
        self._tasks.start_soon(self._send_all, receive)

    def heard(self, update: ToolProgress) -> None:
        """Take an update of the call (never waits)."""
        if self._send is None:
            self._start()
        try:
            self._send.send_nowait(update)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass  # the call has ended, or the sending did: nothing more is sent

    def close(self) -> None:
        """No more updates: the sending ends once it has sent what it took."""
        if self._send is not None:
            self._send.close()

    async def _send_all(self, receive: Any) -> None:
        """Send each update taken as a ``notifications/progress``, until :meth:`close`."""
        numbers = ServedNumbers()
        async with receive:
            async for update in receive:
                progress, total = numbers.of(update)
                try:
                    await self._session.report_progress(progress, total,
                                                        served_message(update))
                except Exception:
                    return  # the client cannot hear it: the call goes on without
                             # (closing the stream makes heard() drop the rest)


def served_message(update: ToolProgress) -> str | None:
    """The ``message`` a served update's notification carries: the update's message, then
    the text it streamed (the text blocks of its ``content``, joined as they are, so a client
    that joins the messages of streamed lines gets the output back), after a newline when
    there are both; ``None`` when there is neither."""
    streamed = "".join(block.text for block in update.content if isinstance(block, TextContent))
    if not streamed:
        return update.message
    return f"{update.message}\n{streamed}" if update.message else streamed


class ServedNumbers:
    """The ``progress`` and ``total`` one served call's notifications carry, update by update
    (the module docstring says how): ``progress`` grows with every one."""

    def __init__(self) -> None:
        self._last: float | None = None

    def of(self, update: ToolProgress) -> tuple[float, float | None]:
        """The ``progress`` and ``total`` sent for ``update``, the next of the call's."""
        given, last = update.progress, self._last
        if given is not None and (last is None or given > last):
            self._last = given
            return given, update.total
        self._last = 0 if last is None else last + 1
        return self._last, None


def _in_trio() -> bool:
    """Whether this runs in a trio task (else in asyncio's, with trio as its guest)."""
    try:
        trio.lowlevel.current_task()
    except RuntimeError:
        return False
    return True


def reported_to(ctx: ToolContext) -> Any:
    """A progress callback for the SDK client's ``call_tool``: each notification the server
    sends for the call becomes a ``tool_progress`` of the running call ``ctx`` belongs to."""

    async def report(progress: float, total: float | None, message: str | None) -> None:
        try:
            ctx.report_progress(message, progress=_finite(progress), total=_finite(total))
        except (TypeError, ValueError):
            pass  # what the session cannot record is left out (the module docstring)

    return report


def _finite(value: float | None) -> float | None:
    """A number the server sent as it is, ``None`` if it is not finite (``NaN`` on the wire)."""
    return value if value is None or math.isfinite(value) else None
