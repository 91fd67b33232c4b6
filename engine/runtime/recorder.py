"""The recorder: the one way a live session writes its log.

:meth:`Recorder.record` stamps an event (sequence number, injected clock), folds it into the
session's projection (which checks it against the lifecycle table) and queues it; nothing is
written yet. :meth:`Recorder.flush` writes the queue to the store as one atomic batch. The
runtime flushes before anything leaves the process (before a tool body runs, before an
approver is asked, before the model is asked, before a host call returns, when a prompt
ends), so the log is ahead of every side effect: write-ahead, with one store round-trip per
step instead of one per event.

A call's end is written by whoever hands its result on, when it does:

- a nested call's with its parent's next flush (its result stays in the process, with the
  parent);
- a host call's before ``call_tool`` returns it (:mod:`engine.runtime.hostcalls`);
- a model's call run in a task of its own as it ends (:mod:`engine.runtime.batch`): its siblings may
  run on for long, and a result the log has lost would make it "interrupted" on resume;
- a model's call the prompt's own task runs (a batch of one call that cannot wait for the
  host) with the loop's next flush, before the model is asked (with ``model_requested``) or
  as the prompt returns: nothing runs in between, so it saves a store round-trip a turn.

A store that writes inline (:class:`~events.stores.base.InlineStore`: the memory and JSONL
stores) is written through its ``append_nowait``: the write cannot be interrupted half-way, so
it needs neither the lock that orders flushes nor a cancel shield, and a flush costs no trip
through the event loop. When such a store would have to wait (``trio.WouldBlock``: another
process holds the JSONL file's lock, or a durable store must ``fsync``), the flush awaits its
``append`` instead, under the lock, unshielded: that wait is cancellable and writes nothing
when cancelled, and the batch stays queued for the next flush. A flush is a cancellation point
either way: a cancelled task is cancelled before it writes, never during the write. What must
be written whatever happens to the task goes through :meth:`Recorder.flush_finally`: the
end of a prompt or a host call, the session's close, and a body's ``tool_execution_started``
(the log says started only of a body that was entered, so that write is never left queued
for a later flush by a cancellation).

Followers (:meth:`Recorder.follow`) read the in-memory history at their own pace; recording
never waits for them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence

import trio

from events.stores import EventStore
from events.stores.base import append_nowait
from events.types import Event, Record

from ..core.errors import SessionBroken
from ..core.history import History
from ..core.reducers import Projection

__all__ = ["Recorder", "SessionBroken"]


class Recorder:
    """Stamps, folds, queues and flushes one session's events."""

    def __init__(
        self,
        store: EventStore,
        session_id: str,
        projection: Projection,
        history: Sequence[Record],
        clock: Callable[[], float],
    ) -> None:
        self.store = store
        self.session_id = session_id
        self.projection = projection
        # of each record made here, only what History needs to build it again
        self._events: list[Event] = []
        self._times: list[float] = []
        #: every record of the session: those read from the store, then those recorded
        self.history = History(session_id, history, self._events, self._times)
        self._clock = clock
        self._outbox: list[Record] = []
        self._append_nowait = append_nowait(store)
        # orders the flushes that must wait for the store; made by the first that must
        self._lock: trio.Lock | None = None
        self._wakeup: trio.Event | None = None
        self._closed = False
        self._broken: BaseException | None = None

    def record(self, event: Event) -> Record:
        """Stamp ``event``, fold it into the projection and queue it for the store."""
        if self._broken is not None:
            raise SessionBroken(f"the log could not be written: {self._broken}") from self._broken
        now = self._clock()
        record = Record(
            session_id=self.session_id,
            seq=self.projection.last_seq + 1,
            time=now,
            event=event,
        )
        self.projection.apply(record)
        self._outbox.append(record)
        self._events.append(event)
        self._times.append(now)
        if self._wakeup is not None:
            self._wakeup.set()
            self._wakeup = None
        return record

    async def flush(self) -> None:
        """Write every queued record to the store, as one batch per call. When it returns,
        everything recorded before it was called is in the store: a write another task has
        begun, which may hold this task's records, is waited for."""
        lock = self._lock
        if not self._outbox:
            if lock is not None and lock.locked():
                async with lock:  # the write under way ends first (the lock is fair)
                    pass
            return
        if self._append_nowait is not None and (lock is None or not lock.locked()):
            await trio.lowlevel.checkpoint_if_cancelled()
            if self._write_now():
                return
            # the store must wait (a lock held elsewhere, an fsync): wait below
        if self._lock is None:
            self._lock = trio.Lock()
        async with self._lock:
            batch, self._outbox = self._outbox, []
            if not batch:
                return
            try:
                if self._append_nowait is not None:
                    # an inline store's append waits only before it writes anything, and a
                    # cancelled wait puts the batch back in the queue, for the next flush
                    await self.store.append(self.session_id, batch, batch[0].seq - 1)
                else:
                    # a write that has begun finishes: cancelling it would lose the batch,
                    # which the session's state already holds. The cancellation lands at the
                    # next checkpoint instead.
                    with trio.CancelScope(shield=True):
                        await self.store.append(self.session_id, batch, batch[0].seq - 1)
            except trio.Cancelled:  # only the inline store's wait can be cancelled
                self._outbox[:0] = batch
                raise
            except BaseException as exc:
                self._broken = exc
                raise

    def _write_now(self) -> bool:
        """Write the queue to an inline store at once, if it takes no wait (no flush of
        another task's under way, and the store need not wait): whether it did."""
        lock = self._lock
        if self._append_nowait is None or (lock is not None and lock.locked()):
            return False
        batch = self._outbox
        try:
            self._append_nowait(self.session_id, batch, batch[0].seq - 1)
        except trio.WouldBlock:
            return False
        except BaseException as exc:
            self._outbox = []
            self._broken = exc
            raise
        self._outbox = []
        return True

    def written_at_once(self) -> bool:
        """Whether everything recorded is in the store now, without waiting: the queue
        written to an inline store that need not wait, or nothing queued and no write under
        way. If not, :meth:`flush_finally` writes it; a caller that asks first makes no
        coroutine for the common case (a body's ``started``, on every call)."""
        if self._outbox:
            return self._write_now()
        return self._lock is None or not self._lock.locked()

    async def flush_finally(self) -> None:
        """:meth:`flush`, shielded from cancellation: what a prompt's or a host call's end,
        the session's close, and a body's ``started`` write whatever happens to the task.
        With nothing queued and no write under way there is nothing to shield (a flush then
        returns at once), and an inline store that can write at once is written without a
        cancel scope (a scope costs more than the write)."""
        if self.written_at_once():
            return
        with trio.CancelScope(shield=True):
            await self.flush()

    def close(self) -> None:
        """No more records: followers finish once they have read everything."""
        self._closed = True
        if self._wakeup is not None:
            self._wakeup.set()
            self._wakeup = None

    async def follow(self, after: int = 0) -> AsyncIterator[Record]:
        """Every record with ``seq > after``, then each new one as it is recorded, until the
        session closes. A slow reader misses nothing and slows nobody down."""
        index = after
        while True:
            while index < len(self.history):
                yield self.history[index]
                index += 1
            if self._closed:
                return
            if self._wakeup is None:
                self._wakeup = trio.Event()
            await self._wakeup.wait()
