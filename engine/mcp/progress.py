"""Progress over MCP, both ways: MCP's ``notifications/progress`` and a call's ``tool_progress``.

**Served** (:class:`ProgressNotifier`): a client that sends a progress token with its
``tools/call`` gets the host call's updates (what its tool reports, and what it forwards of its
nested calls') as ``notifications/progress``, in order and before the call's result:

- ``message`` is the update's message (left out when it has none); ``data`` stays in the log;
- ``progress`` is the update's ``progress`` when the tool gave one that is greater than the
  last one sent, and then ``total`` is the update's ``total``; otherwise (no number, or one
  that does not grow, as a second nested call's forwarded ``1 of 2`` after the first's
  ``3 of 3``) it is one more than the last one sent (0 for the first), without a total, since
  MCP asks that ``progress`` grow with every notification.

The update is heard synchronously in the session's task (``call_tool(...,
on_progress=...)``), and sent from a task of the request's own, in the server's event loop
(trio, or asyncio when the session is an :class:`engine.hosts.aio.Session`), through a memory
stream that hearing never waits on. A notification that cannot be sent (the client has gone) ends
the sending, never the call.

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

from events.types import ToolProgress

from ..core.toolcontext import ToolContext

__all__ = ["ProgressNotifier", "reported_to"]


class ProgressNotifier:
    """The notifications of one served ``tools/call``: :meth:`heard` takes the host call's
    updates, :meth:`send_all` sends them, in order, until :meth:`close`. Use it as::

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(notifier.send_all)
            try:
                outcome = await session.call_tool(..., on_progress=notifier.heard)
            finally:
                notifier.close()  # the task group waits until every update is sent
    """

    def __init__(self, request: Any) -> None:
        self._session = request.session  # the SDK's session, scoped to the request
        self._send, self._receive = anyio.create_memory_object_stream[ToolProgress](math.inf)
        self._last: float | None = None

    def heard(self, update: ToolProgress) -> None:
        """Take an update of the call (never waits, from any task of the process: the
        session's trio tasks too when the server runs on asyncio)."""
        try:
            self._send.send_nowait(update)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass  # the call has ended, or the sending did: nothing more is sent

    def close(self) -> None:
        """No more updates: :meth:`send_all` returns once it has sent what it took."""
        self._send.close()

    def numbers(self, update: ToolProgress) -> tuple[float, float | None]:
        """The ``progress`` and ``total`` sent for ``update`` (the module docstring says why)."""
        given, last = update.progress, self._last
        if given is not None and (last is None or given > last):
            self._last = given
            return given, update.total
        self._last = 0 if last is None else last + 1
        return self._last, None

    async def send_all(self) -> None:
        """Send each update taken as a ``notifications/progress``, until :meth:`close`."""
        async with self._receive:
            async for update in self._receive:
                progress, total = self.numbers(update)
                try:
                    await self._session.report_progress(progress, total, update.message)
                except Exception:
                    return  # the client cannot hear it: the call goes on without
                             # (closing the stream makes heard() drop the rest)


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
