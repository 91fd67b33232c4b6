"""The embedded default store: one JSON Lines file, readable with ``jq`` and ``grep``.

Each line is one record (:func:`~events.codec.encode_line` plus ``"\\n"``); one file may hold
many sessions, since each record names its own. The file is append-only: the only changes ever
made to existing bytes are cutting off a torn last line and restoring a missing last newline.

Crash safety. A batch is written with one ``write`` of all its lines. A crash in the middle
of that write leaves a last line with no newline that is not a whole JSON value: a *torn*
line, which was never acknowledged to its writer. A store that may write drops it (the file is
truncated to the end of the last complete line) and records the dropped bytes in
:attr:`JsonlStore.dropped_tail`; nothing is warned. A last line that lacks only its newline
(it parses) is not torn: it is checked like any line, kept, and its newline restored. Any
other bad line (bad JSON, an envelope the codec refuses, such as an unknown event type or a
newer schema version, a seq that breaks its session's run, a last line that is not even the
start of a record, as in a file that is not a log) is :class:`~events.errors.CorruptLogError`
naming the file and line, and the file is left exactly as it was.

Opening builds no event: a line of today's schema is indexed by its envelope alone
(:func:`~events.stores.jsonlines.index_fields`), its whole JSON checked; older lines are
decoded by the codec. What the codec checks inside an event's data is checked when the line is
read: a line refused only for that opens, and every read that reaches it raises the same
:class:`~events.errors.CorruptLogError` naming the file and line (the session's lines before
it read as ever); if the next line of its session breaks the seq run, opening names the bad
line. Caveat: a crash can leave complete lines of a batch before the torn one; those are
kept (no line marks a batch's end). An I/O error during the write (a full disk) does not: the
file is cut back to where it was.

Integrity. Every line is sealed into its session's hash chain (:mod:`events.integrity`): its
last field, ``"hash"``, covers the previous record of the session and this line's bytes; with
``key`` it is an HMAC. Each session's head (the hash of its last line) is kept in the index; on
open it is read from the session's last line (a version 1 line, written before the chain
existed, has none: the session's next record starts a chain from the genesis value).
Without a key, reading ignores the hash beyond checking its form (:func:`verify_jsonl` checks
the chain); a line is decoded when it is read. With a key the store trusts nothing it has not
checked: every line it indexes, and
again every line it hands out, must link to its session's previous line with an HMAC of the
key (:func:`~events.integrity.check_link`); anything else, unchained version 1 records
included, is :class:`~events.errors.UnverifiedRecordError` naming the record.

Several processes may share one file. Appends hold ``fcntl.flock(LOCK_EX)``; under it the
store first indexes whatever other processes appended, so a stale writer anywhere gets
:class:`~events.errors.ConflictError`. Readers notice a grown file (its size) and index its
new tail under ``LOCK_SH``. The ``async`` methods never wait for a lock on the event loop: they
try it without waiting, and if another process holds it they wait in a worker thread (see
:mod:`events.stores.locks`). A session has one owner at a time: :meth:`JsonlStore.claim` locks
a byte of the log far past its end (a lock file of the session's own where the system has no
open-file-description locks). Unix only (``fcntl``).

This module holds the store's appends, reads and claims; the scan that indexes the file's
lines (on opening, and when another process appended) is :mod:`events.stores.jsonlindex`.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from functools import partial
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence

import trio

from ..errors import CorruptLogError
from ..integrity import GENESIS, Anchor, VerifyReport
from ..types import Record
from ..fast.prepared import Encodings
from .artifactfiles import ArtifactFiles
from .base import Claim, InlineStore, check_batch, check_conflict, encode_bodies, seal_lines
from .following import POLL_INTERVAL, Appended, follow_session
from .jsonlindex import JsonlIndex, SessionIndex, file_size, write_all
from .jsonlines import decode_stored, read_jsonl, verify_jsonl
from .verifyapart import ChecksApart, Kind
from .locks import (byte_claims_hold, claim_byte, claim_file, locked_elsewhere, open_for_claims,
                    try_lock)
from .modes import open_creating

__all__ = ["JsonlStore", "read_jsonl", "verify_jsonl"]

# Bytes read per pread when a session's lines sit next to each other in the file.
_MAX_RUN = 1 << 20


class JsonlStore(ChecksApart, JsonlIndex, InlineStore):
    """An :class:`~events.stores.EventStore` in one JSON Lines file at ``path``.

    The file is opened (created if missing, owner-only: :mod:`events.stores.modes`) and
    scanned in ``__init__``, so a corrupt log is refused when the store is made, not at some
    later ``await`` (all but a line refused only for its event's data, which the scan does not
    build: that is refused when read, see above). The scan keeps per session the offset of
    each line; reads seek to those lines and decode only them.

    The ``async`` methods do their file I/O inline when they can: local appends and indexed
    reads are short, and handing them to a thread would cost more than it saves. What may
    take long is waited for off the event loop: a lock another process holds (tried first
    without waiting; then waited for in a worker thread, cancellably) and, with ``durable``,
    the ``fsync`` (in a worker thread, not cancellable: the batch is written by then). The
    index changes only in the loop's thread, all at once, so tasks in one event loop never
    see a half-done change; the store is not thread-safe. The constructor and :meth:`head`
    are synchronous and may wait for a lock held elsewhere (briefly: locks are held only
    while indexing a tail and writing one batch); build the store with
    ``await trio.to_thread.run_sync(JsonlStore, path)`` if even that must not hold the loop.

    Durability: every batch goes to the OS in one unbuffered ``write`` (no user-space buffer
    to flush), so it survives a crash of this process. With ``durable=True`` each append also
    ``fsync``\\ s the file (and the directory when opening), so it survives power loss too.

    ``key`` (non-empty bytes) makes each line's hash an HMAC-SHA256, so that only a holder of
    the key can write a chain that verifies, and makes the store verify every line: when it
    indexes it (opening, or finding lines another process appended) and again when
    :meth:`read` hands it out, so an edit made in between is caught too. A line that does not
    verify (changed, sealed without the key or with another, not chained at all) raises
    :class:`~events.errors.UnverifiedRecordError` naming it; nothing past it is indexed, read
    or chained onto. Use one key for a whole file.

    ``read_only=True`` opens the file for reading only (it must exist): the store never
    changes it, neither cutting a torn line nor restoring a newline, and refuses to append.

    ``poll_interval`` (seconds) is how often a follower (:meth:`follow`) checks whether the
    file grew (one ``fstat``): how soon it sees what other processes append. Appends through
    this store object wake followers at once.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        durable: bool = False,
        key: bytes | None = None,
        read_only: bool = False,
        poll_interval: float = POLL_INTERVAL,
    ) -> None:
        if key is not None and (not isinstance(key, bytes) or not key):
            raise ValueError("the HMAC key must be non-empty bytes")
        super().__init__(os.fspath(path), durable=durable, key=key, read_only=read_only)
        self.poll_interval = poll_interval
        self._appended = Appended()
        self.encodings = Encodings()
        #: the whole of results too large for the log, in ``<path>.artifacts/``
        self.artifacts = ArtifactFiles(self.path, durable=durable)
        if read_only:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        else:  # a new log is owner-only (see events.stores.modes)
            fd = open_creating(self.path, os.O_RDWR | os.O_APPEND)
        try:
            if durable and not read_only:
                _fsync_dir(self.path)
            with _locked(fd, fcntl.LOCK_SH if read_only else fcntl.LOCK_EX):
                self._refresh_locked(fd, repair=not read_only)
                #: how this store claims sessions: by a byte of the log, or by lock files
                self._byte_claims = byte_claims_hold(self.path)
            stat = os.fstat(fd)
            self._file = (stat.st_dev, stat.st_ino)  # what its byte claims are kept by
            #: the descriptor byte claims are taken on: the store's own, if open for writing
            self._claims = -1 if read_only else fd
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    def append_nowait(self, session_id: str, records: Sequence[Record], expected_seq: int) -> None:
        """Append a batch, all or nothing, without waiting; see :meth:`EventStore.append`.

        Raises :class:`trio.WouldBlock`, having stored nothing, when it would have to wait:
        the store is ``durable`` (an ``fsync`` waits for the disk), or another process holds
        the file's lock. ``await append()`` waits then, off the event loop.
        """
        fd = self._ensure_open()
        if self.read_only:
            raise ValueError(f"the JsonlStore for {self.path} is read-only: it cannot append")
        if self.durable:
            raise trio.WouldBlock
        check_batch(session_id, records, expected_seq)
        bodies = encode_bodies(records, self.encodings)  # before the lock: an unencodable batch stores nothing
        if not self._append_inline(fd, session_id, bodies, expected_seq):
            raise trio.WouldBlock

    async def append_waiting(
        self, session_id: str, records: Sequence[Record], expected_seq: int
    ) -> None:
        """The append when :meth:`append_nowait` cannot be done now (``append`` calls it then):
        the wait for the lock and the ``fsync`` run in worker threads, so the event loop goes
        on meanwhile. Cancellation lands only while it waits for the lock, before anything is
        written."""
        fd = self._ensure_open()
        check_batch(session_id, records, expected_seq)
        bodies = encode_bodies(records, self.encodings)
        async with locked_elsewhere(self.path, fd, fcntl.LOCK_EX):
            fd = self._ensure_open()  # it may have been closed while we waited
            self._holding += 1
            try:
                written = self._write_locked(fd, session_id, bodies, expected_seq)
                if written is None:
                    return
                if self.durable:
                    try:  # not abandoned on cancellation: the batch is written, it must be synced
                        await trio.to_thread.run_sync(os.fsync, fd)
                    except BaseException:
                        _cut(fd, written[0])
                        raise
                self._commit(session_id, *written)
            finally:
                self._holding -= 1

    def _append_inline(
        self, fd: int, session_id: str, bodies: list[bytes], expected_seq: int
    ) -> bool:
        """The append, now, if the lock is free; ``False`` (nothing done) if it is not."""
        if not try_lock(fd, fcntl.LOCK_EX):
            return False
        try:
            written = self._write_locked(fd, session_id, bodies, expected_seq)
            if written is not None:
                self._commit(session_id, *written)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
        return True

    def _write_locked(
        self, fd: int, session_id: str, bodies: list[bytes], expected_seq: int
    ) -> tuple[int, list[bytes], str] | None:
        """Under ``LOCK_EX``: index other writers' lines, check the conflict, seal and write
        the batch; where it starts, its lines and the session's new head, or ``None`` for an
        empty batch. Not synced, and the index is not updated yet: see :meth:`_commit`."""
        self._refresh_locked(fd, repair=True)
        check_conflict(session_id, expected_seq, self._last_seq(session_id))
        if not bodies:
            return None
        # The head is only certain under the lock: another process may have appended.
        index = self._index.get(session_id)
        lines, head = seal_lines(bodies, index.head if index else GENESIS, self._key)
        start = self._size
        try:
            write_all(fd, b"".join(lines))
        except BaseException:
            _cut(fd, start)
            raise
        return start, lines, head

    def _commit(self, session_id: str, start: int, lines: list[bytes], head: str) -> None:
        """Index a batch :meth:`_write_locked` wrote (and, if durable, synced)."""
        index = self._index.get(session_id)
        if index is None:
            index = self._index[session_id] = SessionIndex()
        offsets, lengths, numbers = index.offsets, index.lengths, index.lines
        number = self._lines
        for line in lines:
            number += 1
            offsets.append(start)
            lengths.append(len(line))
            numbers.append(number)
            start += len(line)
        self._lines = number
        self._size = start
        index.head = head
        self._appended.notify()

    async def read(self, session_id: str, after: int = 0, limit: int | None = None
                   ) -> list[Record]:
        """The session's records with ``seq > after``, in seq order; ``[]`` if unknown. At
        most ``limit`` if given: :meth:`follow` reads a long session a part at a time, so its
        first record comes before the whole session is decoded."""
        fd = self._ensure_open()
        if file_size(fd) != self._size:  # another process appended: index its lines first
            fd = await self._catch_up()
        index = self._index.get(session_id)
        if index is None:
            return []
        first, count = max(after, 0), len(index.offsets)
        if limit is not None:
            count = min(count, first + limit)
        records: list[Record] = []
        # with a key, each line handed out is checked again: it must link to the line before
        prev = self._prev_hash(fd, index, session_id, first) if self._key and first < count else ""
        while first < count:
            # Read a run of adjacent lines with one pread, then split it.
            start = index.offsets[first]
            end, stop = start + index.lengths[first], first + 1
            while stop < count and index.offsets[stop] == end and end - start < _MAX_RUN:
                end += index.lengths[stop]
                stop += 1
            block = os.pread(fd, end - start, start)
            pos = 0
            for i in range(first, stop):
                raw = block[pos : pos + index.lengths[i]]
                pos += index.lengths[i]
                record, digest = self._decode_indexed(raw, session_id, i + 1, index.lines[i])
                if self._key is not None:
                    prev = self._check_link(index.lines[i], raw, session_id, i + 1,
                                            record.version, digest, prev)
                records.append(record)
            first = stop
        return records

    async def last_seq(self, session_id: str) -> int:
        """The seq of the session's last record; 0 for an unknown session."""
        await self._catch_up()
        return self._last_seq(session_id)

    def follow(self, session_id: str, after: int = 0) -> AsyncIterator[Record]:
        """The session's records with ``seq > after``, then each one appended, until the
        caller stops (see :meth:`EventStore.follow`): appends through this store wake it at
        once; what other processes append it finds by checking the file's size every
        ``poll_interval`` seconds. It holds no lock while it waits."""
        return follow_session(self.read, self.last_seq, self._appended, session_id, after,
                              poll_interval=self.poll_interval)

    async def sessions(self) -> list[str]:
        """Every session id, in order of first appearance in the file."""
        await self._catch_up()
        return list(self._index)

    def head(self, session_id: str) -> str | None:
        """The hash of the session's last record: keep it somewhere the log's writer cannot
        reach, to detect later that records were cut off the end. ``None`` for an unknown
        session or one whose last record is not chained (version 1)."""
        self._refresh(self._ensure_open())
        index = self._index.get(session_id)
        return index.head if index is not None and index.head != GENESIS else None

    async def verify(
        self, *, session: str | None = None, anchors: Iterable[Anchor] = ()
    ) -> VerifyReport:
        """Check the hash chain of every session (or of ``session``) in the file, with the
        store's key if it has one: :func:`verify_jsonl`, for what the store holds. In a
        worker thread, as the database stores check: a big file takes seconds, which the
        event loop would otherwise spend on nothing else (the thread still shares the
        interpreter's lock with it; :meth:`verify_apart` does not). A cancelled check is
        left to end there."""
        self._ensure_open()
        report: VerifyReport = await trio.to_thread.run_sync(partial(
            verify_jsonl, self.path, self._key, session=session, anchors=tuple(anchors),
            artifacts=self.artifacts.get), abandon_on_cancel=True)
        return report

    def _opened_as(self) -> tuple[Kind, str]:
        return "jsonl", self.path

    async def put_artifact(self, session_id: str, call_id: str, sha256: str,
                           data: bytes) -> None:
        """Keep the whole of a long result in a file beside the log (in a worker thread: it
        may be large); see :class:`~events.stores.base.ArtifactStore`."""
        self._ensure_open()
        if self.read_only:
            raise ValueError(f"the JsonlStore for {self.path} is read-only: it keeps no "
                             f"artifacts")
        await trio.to_thread.run_sync(self.artifacts.put, session_id, call_id, sha256, data)

    async def get_artifact(self, session_id: str, call_id: str, sha256: str) -> bytes | None:
        """The bytes of an artifact beside the log; ``None`` if there are none."""
        self._ensure_open()
        return await trio.to_thread.run_sync(self.artifacts.get, session_id, call_id, sha256)

    @property
    def keyed(self) -> bool:
        """Whether the store was given a key: it seals with it, and every record it hands out
        was verified with it."""
        return self._key is not None

    def claim(self, session_id: str) -> Claim:
        """Own ``session_id`` until the claim is released: an exclusive lock on one byte of
        the log far past its end, through the store's own descriptor (on Linux, on a
        filesystem whose ``flock`` does not meet byte-range locks; elsewhere on the session's
        own lock file, ``<path>.owners/<digest>.lock``), which any claim of it in any process
        (this one included) respects; :class:`~events.errors.SessionInUse` at once if it is
        held (see :mod:`events.stores.locks`). The kernel drops the lock if the process dies;
        a byte claim also ends when the store closes."""
        self._ensure_open()
        if self._byte_claims:
            fd = self._claims if self._claims >= 0 else self._open_claims()
            return claim_byte(fd, self._file, session_id, lambda: self._claims == fd)
        return claim_file(self.path, session_id)

    def close(self) -> None:
        """Close the file (which ends the store's byte claims). Idempotent; the store refuses
        to be used afterwards."""
        if self._claims >= 0:
            claims, self._claims = self._claims, -1
            if claims != self._fd:
                os.close(claims)
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)
            self._appended.notify()  # a waiting follower's next read says the store is closed

    @staticmethod
    def scan(path: str | os.PathLike[str]) -> list[Record]:
        """Every record in the file, in file order; see :func:`read_jsonl`."""
        return read_jsonl(path)

    # -- internals ------------------------------------------------------------------------

    def _open_claims(self) -> int:
        """The descriptor a read-only store takes its byte claims on (an exclusive lock needs
        one open for writing; nothing is written through it), kept until the store closes."""
        self._claims = open_for_claims(self.path, self._file)
        return self._claims

    def _decode_indexed(
        self, raw: bytes, session_id: str, seq: int, line: int
    ) -> tuple[Record, str | None]:
        record, digest = decode_stored(self.path, line, raw)
        if record.session_id != session_id or record.seq != seq:
            raise CorruptLogError(
                self.path, line, "the line changed since it was indexed (edited in place?)"
            )
        return record, digest

    def _prev_hash(self, fd: int, index: SessionIndex, session_id: str, first: int) -> str:
        """The hash the session's line of seq ``first + 1`` must link to, as its previous line
        now says (whatever it says: the link's HMAC covers it)."""
        if first == 0:
            return GENESIS
        i = first - 1
        raw = os.pread(fd, index.lengths[i], index.offsets[i])
        _, digest = self._decode_indexed(raw, session_id, first, index.lines[i])
        return digest or GENESIS


@contextlib.contextmanager
def _locked(fd: int, operation: int) -> Iterator[None]:
    fcntl.flock(fd, operation)
    try:
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)



def _cut(fd: int, size: int) -> None:
    """A batch failed to be written (or synced): the caller will believe nothing was stored,
    so make it so."""
    with contextlib.suppress(OSError):
        os.ftruncate(fd, size)



def _fsync_dir(path: str) -> None:
    fd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
