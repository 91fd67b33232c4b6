"""Checkpoints of an SQLite store's WAL, in a worker thread instead of inside an append.

In WAL mode a commit appends pages to the ``-wal`` file; a *checkpoint* copies them back into
the database file so the WAL can start again from its beginning. SQLite runs one itself, by
default, in the commit that takes the WAL past 1 000 pages, and a checkpoint waits for the
disk twice (the WAL synced, then the database file) even at ``synchronous=NORMAL``, where a
commit never does. An inline append (:meth:`SqliteStore.append_nowait
<events.stores.SqliteStore.append_nowait>`) commits on the event loop's thread, so every few
hundred appends one of them, and the loop with it, would wait for the disk for as long as two
syncs take.

So the store's inline connection has ``wal_autocheckpoint=0``, and :class:`Checkpointer`
counts the pages its commits add; past :data:`WAL_PAGES` it starts a ``PASSIVE`` checkpoint
in a worker thread, on a connection of its own: it copies what no reader still needs and never
waits for a lock, while appends go on. Nothing of what a setting promises changes: a committed
batch is in the WAL either way, and a checkpoint syncs the WAL before it copies anything.
A checkpoint that fails (the disk is full, say) loses nothing, the pages stay in the WAL,
and the next one tries again. Other connections (the store's group commit, other processes)
keep SQLite's own checkpoints: they commit off the loop already.
"""

from __future__ import annotations

import threading

import trio
import trio.lowlevel
from outcome import Error, Outcome

from .sqlite_connect import connect

__all__ = ["PAGES_PER_COMMIT", "WAL_PAGES", "Checkpointer"]

#: the pages committed inline after which a checkpoint starts (SQLite's own default)
WAL_PAGES = 1000
#: the pages a commit adds to the WAL beside its rows' (measured: 300 commits of a call's
#: four records, about 1.3 KB each, left 1 394 frames in the WAL)
PAGES_PER_COMMIT = 4


class Checkpointer:
    """The checkpoints of one store's inline commits: when to start one, and the thread it
    runs in (at most one at a time)."""

    def __init__(self, path: str, busy_timeout: float, *, durable: bool,
                 page_size: int) -> None:
        self._path = path
        self._busy_timeout = busy_timeout
        self._durable = durable
        self._page_size = page_size
        self._pages = 0  # committed since the last checkpoint began
        self._ended = threading.Event()  # set while no checkpoint runs
        self._ended.set()
        #: why the last checkpoint failed, or ``None``
        self.error: BaseException | None = None
        #: checkpoints begun (for tests and benchmarks)
        self.started = 0

    def committed(self, written: int) -> None:
        """After an inline commit of ``written`` bytes of rows: count the pages it added to
        the WAL (its rows', and about :data:`PAGES_PER_COMMIT` more: the B-trees' pages it
        moved, the session's row), and start a checkpoint once they pass :data:`WAL_PAGES`
        and none is running."""
        self._pages += PAGES_PER_COMMIT + written // self._page_size
        if self._pages < WAL_PAGES or not self._ended.is_set():
            return
        self._pages = 0
        self._ended.clear()
        self.started += 1
        trio.lowlevel.start_thread_soon(self._checkpoint, self._deliver)

    def _checkpoint(self) -> None:
        conn = connect(self._path, self._busy_timeout, durable=self._durable)
        try:
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        finally:
            conn.close()

    def _deliver(self, result: Outcome[None]) -> None:
        """In the worker thread, once the checkpoint is over."""
        self.error = result.error if isinstance(result, Error) else None
        self._ended.set()

    def wait(self) -> None:
        """Block until no checkpoint runs (the store calls it when it closes, so that its
        connections outlive the checkpoint's)."""
        self._ended.wait()
