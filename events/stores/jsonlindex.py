"""The index of a JSON Lines log: the scan that reads its lines into where each session's are.

:class:`~events.stores.JsonlStore` is built on :class:`JsonlIndex`. The index is what the
store knows about its file: for each session the offset, length and line number of every
record, and the session's head (the hash its next line chains onto). It is filled by one scan
that reads complete lines past what it has indexed, checks each (its JSON, its envelope, its
seq, with a key its link in the session's hash chain: see :mod:`events.stores.jsonl`) and adds
it, or stops at a torn last line. It builds no event: a line of today's schema is read by its
envelope alone (:func:`~events.stores.jsonlines.index_fields`), and what the codec checks
inside an event's data is checked when the line is first read. The same scan opens the file
and, later, catches up with what other processes appended; a store's own appends add their
lines without reading them back. Here the file is only read (and, when the caller may repair
it, a torn last line cut off or a missing newline restored); appending, reading records out
and claiming sessions are the store's.
"""

from __future__ import annotations

import fcntl
import os
from array import array
from itertools import accumulate, groupby

from ..codec import EVENT_TYPES
from ..errors import CorruptLogError, UnverifiedRecordError
from ..fast.envelope import read_envelope, read_envelopes
from ..integrity import GENESIS, LinkError, check_link
from ..types import SCHEMA_VERSION
from .jsonlines import check_seq, decode_stored, index_fields, is_torn
from .locks import locked_elsewhere, try_lock

__all__ = ["BLOCK", "JsonlIndex", "SessionIndex", "file_size", "write_all"]

#: How many bytes of a log the opening scan reads at once (see :meth:`JsonlIndex._index_blocks`):
#: a block and what is made of it stay in the processor's cache. Measured on a 190 MB log,
#: blocks of 128-256 KiB open it in 0.85-0.89 s, of 8 MiB in 1.4 s, line by line in 1.2 s.
BLOCK = 1 << 18


class SessionIndex:
    """Where a session's lines are: entry ``i`` is the line of seq ``i + 1``.

    Arrays of machine ints (24 bytes a record), not decoded records: memory stays small for
    big logs, and :meth:`JsonlStore.read` decodes only what it is asked for.
    """

    def __init__(self) -> None:
        self.offsets = array("q")  # byte offset of the line
        self.lengths = array("q")  # its length, newline included
        self.lines = array("q")  # its 1-based line number, for error messages
        self.head = GENESIS  # the hash of the last line; GENESIS if it has none


class JsonlIndex:
    """What a :class:`~events.stores.JsonlStore` knows of its file, and the scan that keeps
    it current: per session, where its lines are and its head.

    The index changes only under the file's lock (:meth:`_refresh_locked`), all at once per
    line, so after a :class:`~events.errors.CorruptLogError` it still describes the valid
    prefix. The store opens the file and sets ``_fd``; this class never writes a record.
    """

    def __init__(self, path: str, *, durable: bool, key: bytes | None, read_only: bool) -> None:
        self.path = path
        self.durable = durable
        self.read_only = read_only
        self._key = key
        self._verified = 0  # lines verified with the key, for the hint of a first mismatch
        #: The bytes of the last torn line this store cut off (``b""`` if none): by opening,
        #: or by an append finding one left by a writer that crashed since.
        self.dropped_tail: bytes = b""
        self._index: dict[str, SessionIndex] = {}
        self._size = 0  # bytes indexed: the end of the last complete line
        self._lines = 0  # complete lines indexed
        # the session of the last line, if a read-only store indexed it without its newline
        self._open_line: str | None = None
        self._fd = -1
        self._holding = 0  # appends of this store that hold the lock across an await

    def _ensure_open(self) -> int:
        if self._fd < 0:
            raise ValueError(f"the JsonlStore for {self.path} is closed")
        return self._fd

    def _last_seq(self, session_id: str) -> int:
        index = self._index.get(session_id)
        return len(index.offsets) if index is not None else 0

    def _refresh(self, fd: int) -> None:
        """Index what other processes appended, if the file changed size. Blocking: for the
        synchronous methods (:meth:`head`); the ``async`` ones use :meth:`_catch_up`."""
        if file_size(fd) != self._size:
            if not try_lock(fd, fcntl.LOCK_SH):
                if self._holding:  # our own append, in flight: the index is whole without it
                    return
                fcntl.flock(fd, fcntl.LOCK_SH)
            try:
                self._refresh_locked(fd, repair=False)
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)

    async def _catch_up(self) -> int:
        """:meth:`_refresh`, waiting for the lock off the loop if another holder has it;
        returns the store's descriptor."""
        fd = self._ensure_open()
        if file_size(fd) == self._size:
            return fd
        if try_lock(fd, fcntl.LOCK_SH):
            try:
                self._refresh_locked(fd, repair=False)
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
            return fd
        async with locked_elsewhere(self.path, fd, fcntl.LOCK_SH):
            fd = self._ensure_open()  # it may have been closed while we waited
            self._refresh_locked(fd, repair=False)
        return fd

    def _refresh_locked(self, fd: int, *, repair: bool) -> None:
        """Index the complete lines past ``self._size``; the caller holds a lock.

        Lines are committed one by one, so after a :class:`CorruptLogError` the index still
        describes the valid prefix, and the next call meets the same bad line again. A last
        line without its newline is repaired only with ``repair`` (the caller holds
        ``LOCK_EX`` on a writable file): a torn one is cut off, a whole record gets its newline
        back. Otherwise a read-only store indexes a whole record as it is, and a writable one
        leaves it for its next append (which must not write after it before it ends).
        """
        size = file_size(fd)
        if size < self._size:
            raise CorruptLogError(
                self.path,
                self._lines,
                f"the file shrank to {size} bytes, below the {self._size} already read: "
                f"something other than an append changed it",
            )
        if size == self._size:
            return
        if self._open_line is not None:  # the file grew: a writer restored that newline first
            if os.pread(fd, 1, self._size) != b"\n":
                raise CorruptLogError(
                    self.path,
                    self._lines,
                    "the last line, a whole record read without its newline, was continued by "
                    "other bytes: something other than an append changed it",
                )
            self._index[self._open_line].lengths[-1] += 1
            self._size += 1
            self._open_line = None
        if self._key is None:
            self._index_blocks(fd, size)
        path, key, sessions = self.path, self._key, self._index
        # The session of the line before, with its index: a log's lines come in runs of one
        # session, so a run looks it up once, not once a line.
        current: str | None = None
        index: SessionIndex | None = None
        offset = self._size
        with open(fd, "rb", closefd=False) as file:
            file.seek(offset)
            for raw in file:  # each line; only the last may lack its newline
                line = self._lines + 1
                if not raw.endswith(b"\n") and is_torn(path, line, raw):
                    if repair:
                        os.ftruncate(fd, offset)
                        if self.durable:
                            os.fsync(fd)
                        self.dropped_tail = raw
                    return
                session_id, seq, version, digest = (
                    read_envelope(raw, SCHEMA_VERSION, EVENT_TYPES)
                    or index_fields(path, line, raw))
                if session_id != current:
                    current, index = session_id, sessions.get(session_id)
                last = len(index.offsets) if index is not None else 0
                if seq != last + 1:
                    if index is not None and last:  # is the line before not even a record?
                        self._decode_previous(fd, index)
                    check_seq(path, line, session_id, seq, last)
                if key is not None:
                    digest = self._check_link(line, raw, session_id, seq, version, digest,
                                              index.head if index is not None else GENESIS)
                    self._verified += 1
                if not raw.endswith(b"\n"):  # a whole record that lacks only its newline
                    if not repair and not self.read_only:
                        return
                    if repair:
                        write_all(fd, b"\n")
                        if self.durable:
                            os.fsync(fd)
                        raw += b"\n"
                    else:
                        self._open_line = session_id
                if index is None:
                    index = sessions[session_id] = SessionIndex()
                length = len(raw)
                index.offsets.append(offset)
                index.lengths.append(length)
                index.lines.append(line)
                index.head = digest or GENESIS
                self._lines = line
                offset = self._size = offset + length

    def _index_blocks(self, fd: int, size: int) -> None:
        """Index the whole lines past ``self._size`` a block at a time (:data:`BLOCK`
        bytes, or more for a longer line, cut after its last newline) while :func:`~events.fast.envelope.read_envelopes`
        answers for a block and its seqs run on; then stop, and the line-by-line scan of
        :meth:`_refresh_locked` goes on from there: it takes the last line (which may lack
        its newline), a block the fast reader leaves (an older version, a line without a
        hash, a bad line: it names what is wrong), and a store with a key (each link is
        checked). The index is what the line-by-line scan would have made of those lines,
        and is committed a run of one session's lines at a time."""
        sessions = self._index
        while self._size < size:
            start, want = self._size, BLOCK
            while True:  # a line longer than a block: read a block twice as long
                block = os.pread(fd, min(want, size - start), start)
                cut = block.rfind(b"\n") + 1
                if cut or len(block) < want:
                    break
                want *= 2
            if not cut:  # the last line, without its newline
                return
            read = read_envelopes(block[:cut], SCHEMA_VERSION, EVENT_TYPES)
            if read is None:
                return
            ids, seqs, digests, lengths = read
            offsets = list(accumulate(lengths, initial=start))
            first = self._lines + 1  # the line number of the block's first line
            done = 0
            for session_id, run in groupby(ids):
                count = len(list(run))
                index = sessions.get(session_id)
                last = len(index.offsets) if index is not None else 0
                end = done + count
                if seqs[done:end] != list(range(last + 1, last + count + 1)):
                    return  # the line-by-line scan names the line and what it expected
                if index is None:
                    index = sessions[session_id] = SessionIndex()
                index.offsets.extend(offsets[done:end])
                index.lengths.extend(lengths[done:end])
                index.lines.extend(range(first + done, first + end))
                index.head = digests[end - 1]
                done = end
                self._lines = first + end - 1
                self._size = offsets[end]

    def _decode_previous(self, fd: int, index: SessionIndex) -> None:
        """:class:`CorruptLogError` naming the session's last indexed line if the codec
        refuses it. A line the codec refuses only for its event's data is indexed and refused
        when read; but when the next line of its session breaks the seq run (as a bad line
        put before a good one does), the bad line is what the error must name."""
        raw = os.pread(fd, index.lengths[-1], index.offsets[-1])
        decode_stored(self.path, index.lines[-1], raw)

    def _check_link(
        self, line: int, raw: bytes, session_id: str, seq: int, version: int,
        digest: str | None, prev: str
    ) -> str:
        """The hash of line ``line`` (``raw``, the record of ``session_id`` and ``seq`` in
        schema ``version``), if it links to ``prev`` with the store's key; else
        :class:`UnverifiedRecordError` naming it."""
        assert self._key is not None
        body = raw[:-1] if raw.endswith(b"\n") else raw
        try:
            verified = check_link(body, version, digest, prev, self._key,
                                  first=self._verified == 0)
        except LinkError as exc:
            raise UnverifiedRecordError(self.path, line, exc.problem, session_id=session_id,
                                        seq=seq, hint=exc.hint) from None
        assert verified is not None  # with a key, check_link refuses an unchained record
        return verified



def file_size(fd: int) -> int:
    """The file's size: its end, found by ``lseek`` (a quarter of what ``fstat`` costs in
    Python, which builds a whole stat result). The store's descriptor appends and reads with
    ``pread`` or seeks first, so where its offset is left does not matter."""
    return os.lseek(fd, 0, os.SEEK_END)




def write_all(fd: int, data: bytes) -> None:
    written = os.write(fd, data)
    if written == len(data):
        return
    view = memoryview(data)[written:]
    while view:
        written = os.write(fd, view)
        view = view[written:]


