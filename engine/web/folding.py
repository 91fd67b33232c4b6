"""Folding the sessions the console shows, without making a page wait for a long log.

A page needs its session folded (:class:`~engine.web.state.Folded`). :class:`Sessions` keeps
each session's fold and reads only the records appended since (``store.read(after=...)``), so
a refresh costs what changed. A session that is far behind the store — a console that has not
read it yet, opening a session of 100 000 calls (some 700 000 records: seconds to read and
decode) — is not folded on the page's path:

- a **background fold** (one per session, in the console's nursery: see :meth:`Sessions.running`)
  reads it a part at a time (:data:`PART` records: the stores' ``read`` takes a ``limit``),
  folds each part, and lets the other tasks run between parts;
- a page waits for that fold up to a short deadline (:data:`WAIT`), then shows what is folded:
  the session's first calls are complete (they are at the log's start), and ``Folded.reading``
  says how far the fold has to go, so the page says it is still reading and withholds its
  controls. It stops waiting sooner once the fold has read the calls the page shows and its
  pace says it will not end by the deadline: a session that takes seconds to read shows its
  first calls at once, not after the whole wait; one that ends within the wait is shown
  whole;
- every request for the session while it runs waits on that same fold (the per-session lock
  guards starting it), and the live update follows its progress;
- a fold that fails (a log that breaks half-way) hands its error to every request waiting on
  it, and the next request starts again where it broke, so the page is the console's error
  page, not a hang.

Without the nursery (a console whose lifespan nobody ran), a session is folded on the page's
path, whole, as before.

While it reads and folds one part, the fold holds off Python's cyclic garbage collector: the
records it decodes die at once (reference counting frees them), and what it keeps is the
session's projection, which the collector would otherwise scan again and again as it grows
(it found nothing to free, and took some 40% of a 700 000-record fold: docs/performance.md,
"The web console over big logs"). The collector runs again between parts.
"""

from __future__ import annotations

import gc
import inspect
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

from typing import Any

import attrs
import trio

from events.stores import EventStore

from .state import Folded

__all__ = ["BEHIND", "PART", "WAIT", "Sessions"]

#: A session more records behind the store than this is folded in the background.
BEHIND = 5_000
#: How long (seconds) a page waits for a background fold before it shows what is folded.
WAIT = 0.5
#: How many records a background fold reads and folds at once: some 5 ms of work, which a
#: page's request waits at most between each two of its own steps (trio runs every ready task
#: in turn). Parts of 2 000 (20 ms) made a page wait some 0.5 s while a fold ran.
PART = 500


@contextmanager
def _collector_held() -> Iterator[None]:
    """Hold off the cyclic garbage collector for the block (see the module docstring)."""
    held = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if held:
            gc.enable()


@attrs.define(eq=False)
class _Fold:
    """A background fold under way: ``done`` once it ends, ``error`` if it failed."""

    done: trio.Event = attrs.field(factory=trio.Event)
    error: Exception | None = None
    #: set, and replaced by a new event, as each part is folded (and at the end)
    progressed: trio.Event = attrs.field(factory=trio.Event)
    #: seconds a record took to read and fold in the fastest part so far; None before one
    pace: float | None = None

    def ends_by(self, deadline: float, left: int) -> bool:
        """Whether ``left`` more records end by ``deadline`` (trio's clock) at the pace of
        the fastest part so far; true until a part has been folded. The fastest, not the
        average: a part that waited (for a gated store, for a busy loop) says little of how
        fast the rest goes, and a page that guesses wrong should wait, not give up early."""
        return self.pace is None or trio.current_time() + self.pace * left <= deadline

    def part_folded(self, records: int, seconds: float) -> None:
        if records:
            pace = seconds / records
            self.pace = pace if self.pace is None else min(self.pace, pace)
        progressed, self.progressed = self.progressed, trio.Event()
        progressed.set()


class Sessions:
    """Each session of one store, folded on demand and kept: see the module docstring.

    ``behind`` and ``wait``: :data:`BEHIND` and :data:`WAIT` unless given (tests make a small
    session count as long)."""

    def __init__(self, store: EventStore, *, behind: int | None = None,
                 wait: float | None = None) -> None:
        self.store = store
        self.behind = BEHIND if behind is None else behind
        self.wait = WAIT if wait is None else wait
        self._folded: dict[str, Folded] = {}
        self._locks: dict[str, trio.Lock] = {}
        self._folds: dict[str, _Fold] = {}
        # the embedded and database stores read a part at a time; another store reads whole
        self._parts = "limit" in inspect.signature(store.read).parameters
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

    async def get(self, session_id: str, deadline: float | None = None, roots: int = 0
                  ) -> Folded:
        """The session folded up to the store's last record (an unknown id folds empty); or,
        if a background fold still runs at ``deadline`` (trio's clock; :data:`WAIT` from now
        unless given), as far as it has read: then its ``reading`` is not None. Before the
        deadline it stops waiting once the fold will not end in time (see the module
        docstring) and has read ``roots`` top-level calls (what the page shows)."""
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
            while not fold.done.is_set() and (len(folded.roots) < roots or fold.ends_by(
                    deadline, (folded.reading or folded.last_seq) - folded.last_seq)):
                await fold.progressed.wait()
        if fold.error is not None:
            raise fold.error
        return folded

    async def _fold(self, folded: Folded, fold: _Fold) -> None:
        """Fold the session a part at a time until it has read what the store holds (what
        was appended meanwhile too), then end."""
        sid = folded.session_id
        read: Any = self.store.read
        try:
            while True:
                began = trio.current_time()
                with _collector_held():
                    records = await (read(sid, folded.last_seq, PART) if self._parts
                                     else read(sid, folded.last_seq))
                    for record in records:
                        folded.apply(record)
                fold.part_folded(len(records), trio.current_time() - began)
                if not records:
                    break  # the store holds no more than that, whatever its last seq says
                if folded.reading is not None and folded.last_seq >= folded.reading:
                    last = await self.store.last_seq(sid)
                    if folded.last_seq >= last:
                        break
                    folded.reading = last  # appended while we read: read that too
                await trio.lowlevel.checkpoint()  # pages are served between parts
        except Exception as exc:  # noqa: BLE001 - every waiting page shows it
            fold.error = exc
        finally:
            folded.reading = None
            del self._folds[sid]
            fold.done.set()
            fold.part_folded(0, 0.0)  # wake the pages waiting for a part
