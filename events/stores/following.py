"""Following a session: every record already stored, then each new one as it is appended.

One loop serves every embedded store (:func:`follow_session`). It reads what is new with the
store's own ``read(after=...)`` (so a keyed store verifies what it hands out, as always), at
most :data:`CHUNK` records at a time (a session of 700 000 records is not decoded whole
before its first record is handed out), and between reads it waits for one of two things:

- **an append through this store object** (:class:`Appended`): the store calls
  :meth:`Appended.notify` after each batch it stores, which wakes the followers at once;
- **an append by someone else** (another store object on the same log, another process): no
  signal crosses processes for a file or an SQLite database, so a follower of a shared store
  also wakes every ``poll_interval`` seconds and asks the store whether the session grew. That
  check is cheap by design: :meth:`~events.stores.JsonlStore.last_seq` is an ``fstat`` of the
  file while nothing was appended, :meth:`~events.stores.SqliteStore.last_seq` one lookup of
  the session's row. A store nobody else can append to (:class:`~events.stores.MemoryStore`)
  never polls.

A follower holds no lock and no transaction while it waits or while its caller works on a
record, so it never slows a writer down; it reads at its own pace and misses nothing, since
each read starts after the last seq it handed out. It stops when its caller stops iterating
or is cancelled; a store closed under it makes its next read raise, as any use of a closed
store does.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Awaitable, Callable

import trio

from ..types import Record

__all__ = ["CHUNK", "POLL_INTERVAL", "Appended", "follow_session"]

#: The most records a follower reads at once: a long session is read (and decoded) a part at
#: a time, so that its first record comes at once and the loop runs between parts.
CHUNK = 2_000
#: How often (seconds) a follower of a shared store checks for records others appended,
#: unless the store is made with another ``poll_interval``.
POLL_INTERVAL = 0.1


class Appended:
    """Wakes the followers of one store object when it appends. Cheap when nobody follows:
    :meth:`notify` is one attribute check then."""

    __slots__ = ("_event",)

    def __init__(self) -> None:
        self._event: trio.Event | None = None

    def notify(self) -> None:
        """Something was appended (or the store closed): wake every waiting follower."""
        event, self._event = self._event, None
        if event is not None:
            event.set()

    def event(self) -> trio.Event:
        """The event the next :meth:`notify` sets. Take it *before* checking for new records,
        so that an append between the check and the wait is not missed."""
        if self._event is None:
            self._event = trio.Event()
        return self._event


async def follow_session(
    read: Callable[[str, int, int | None], Awaitable[list[Record]]],
    last_seq: Callable[[str], Awaitable[int]],
    appended: Appended,
    session_id: str,
    after: int = 0,
    *,
    poll_interval: float | None,
) -> AsyncIterator[Record]:
    """Every record of ``session_id`` with ``seq > after``, then each new one as it is stored,
    until the caller stops iterating or is cancelled (see the module docstring).

    ``read`` is the store's own read, of at most :data:`CHUNK` records at once (its third
    argument); ``last_seq`` the store's own; ``appended`` its wake-ups;
    ``poll_interval`` how often (seconds) to check for records others appended, or ``None``
    for a store only this object appends to.
    """
    seen = max(after, 0)
    wait = math.inf if poll_interval is None else poll_interval
    while True:
        changed = appended.event()
        if await last_seq(session_id) > seen:
            records = await read(session_id, seen, CHUNK)
            for record in records:
                yield record
                seen = record.seq
            if records:
                await trio.lowlevel.checkpoint()  # a long backlog: let others run between parts
                continue
            # The last seq said more than the records hold (a database's table of sessions
            # changed by hand: verify names it): wait, never spin, as if nothing had moved.
        with trio.move_on_after(wait):
            await changed.wait()
