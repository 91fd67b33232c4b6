"""Folding the sessions the console shows, without making a page wait for a long log.

A page needs its session folded (:class:`~engine.web.state.Folded`). :class:`Sessions` keeps
each session's fold and reads only the records appended since (``store.read(after=...)``), so
a refresh costs what changed. A session that is far behind the store — a console that has not
read it yet, opening a session of 100 000 calls (some 700 000 records: seconds to read and
decode) — is not folded on the page's path:

- a **background fold** (one per session, in the console's nursery: see :meth:`Sessions.running`)
  reads it through the store's ``follow``, a part at a time, and folds each record;
- a page waits for that fold up to a short deadline (:data:`WAIT`), then shows what is folded:
  the session's first calls are complete (they are at the log's start), and ``Folded.reading``
  says how far the fold has to go, so the page says it is still reading and withholds its
  controls;
- every request for the session while it runs waits on that same fold (the per-session lock
  guards starting it), and the live update follows its progress;
- a fold that fails (a log that breaks half-way) hands its error to every request waiting on
  it, and the next request starts again where it broke, so the page is the console's error
  page, not a hang.

Without the nursery (a console whose lifespan nobody ran), a session is folded on the page's
path, whole, as before.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import attrs
import trio

from events.stores import EventStore

from .state import Folded

__all__ = ["BEHIND", "WAIT", "Sessions"]

#: A session more records behind the store than this is folded in the background.
BEHIND = 5_000
#: How long (seconds) a page waits for a background fold before it shows what is folded.
WAIT = 0.5


@attrs.define(eq=False)
class _Fold:
    """A background fold under way: ``done`` once it ends, ``error`` if it failed."""

    done: trio.Event = attrs.field(factory=trio.Event)
    error: Exception | None = None


class Sessions:
    """Each session of one store, folded on demand and kept: see the module docstring.

    ``behind`` and ``wait``: :data:`BEHIND` and :data:`WAIT` unless given (tests make a small
    session count as long)."""

    def __init__(self, store: EventStore, *, behind: int = BEHIND, wait: float = WAIT) -> None:
        self.store = store
        self.behind = behind
        self.wait = wait
        self._folded: dict[str, Folded] = {}
        self._locks: dict[str, trio.Lock] = {}
        self._folds: dict[str, _Fold] = {}
        #: where background work runs while :meth:`running`'s block does; None outside it
        self.nursery: trio.Nursery | None = None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Fold long sessions in the background while the block runs; leaving it cancels
        every fold under way. The console's lifespan runs this block."""
        async with trio.open_nursery() as nursery:
            self.nursery = nursery
            try:
                yield
            finally:
                self.nursery = None
                nursery.cancel_scope.cancel()

    async def ids(self) -> list[str]:
        """Every session id, newest first (the store lists them oldest first)."""
        return list(reversed(await self.store.sessions()))

    async def get(self, session_id: str, deadline: float | None = None) -> Folded:
        """The session folded up to the store's last record (an unknown id folds empty); or,
        if a background fold still runs at ``deadline`` (trio's clock; :data:`WAIT` from now
        unless given), as far as it has read: then its ``reading`` is not None."""
        if deadline is None:
            deadline = trio.current_time() + self.wait
        lock = self._locks.setdefault(session_id, trio.Lock())
        async with lock:
            folded = self._folded.get(session_id)
            if folded is None:
                folded = self._folded[session_id] = Folded(session_id)
            fold = self._folds.get(session_id)
            if fold is None:
                last = await self.store.last_seq(session_id)
                if last <= folded.last_seq:
                    return folded
                if last - folded.last_seq <= self.behind or self.nursery is None:
                    for record in await self.store.read(session_id, folded.last_seq):
                        folded.apply(record)
                    return folded
                fold = self._folds[session_id] = _Fold()
                folded.reading = last
                self.nursery.start_soon(self._fold, folded, fold)
        with trio.move_on_at(deadline):
            await fold.done.wait()
        if fold.error is not None:
            raise fold.error
        return folded

    async def _fold(self, folded: Folded, fold: _Fold) -> None:
        """Fold the session through the store's ``follow`` until it has read what the store
        holds (what was appended meanwhile too), then end."""
        sid = folded.session_id
        records = self.store.follow(sid, folded.last_seq)
        try:
            async for record in records:
                folded.apply(record)
                if folded.reading is not None and record.seq >= folded.reading:
                    last = await self.store.last_seq(sid)
                    if record.seq >= last:
                        break
                    folded.reading = last  # appended while we read: read that too
        except Exception as exc:  # noqa: BLE001 - every waiting page shows it
            fold.error = exc
        finally:
            folded.reading = None
            del self._folds[sid]
            fold.done.set()
            aclose = getattr(records, "aclose", None)
            if aclose is not None:
                with trio.CancelScope(shield=True):
                    await aclose()
