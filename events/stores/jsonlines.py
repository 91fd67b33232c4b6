"""The lines of a JSONL log, read without a store: what :class:`~events.stores.JsonlStore`
and the command line share.

A log is one record a line (see :mod:`events.stores.jsonl`). Here: splitting a file into
lines, telling a torn last line from a whole record that lacks only its newline, decoding a
line into an error that names the file and line, and the two readers that need no store:
:func:`read_jsonl` (every record, read-only) and :func:`verify_jsonl` (the hash chain).
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator, Sequence
from typing import BinaryIO

from ..codec import EVENT_TYPES, decode_stored_line, loads_strict
from ..errors import CodecError, CorruptLogError
from ..fast.envelope import read_envelope
from ..integrity import Anchor, ArtifactLoader, ChainVerifier, VerifyReport
from ..types import SCHEMA_VERSION, Record
from .artifactfiles import ArtifactFiles

__all__ = [
    "check_seq",
    "decode",
    "decode_stored",
    "file_lines",
    "index_fields",
    "is_torn",
    "read_jsonl",
    "verify_jsonl",
]

# How every line a store writes begins: a torn line is a prefix of a line, so it begins so too.
_LINE_START = b'{"v":'


def read_jsonl(path: str | os.PathLike[str]) -> list[Record]:
    """Every record of every session in the file at ``path``, in file order. For the CLI.

    Read-only: it checks lines like :class:`JsonlStore` (raising the same
    :class:`~events.errors.CorruptLogError`) but ignores a torn last line instead of cutting
    it off (a whole last record that lacks only its newline is read). Holds ``LOCK_SH`` while
    reading, so it never sees half of a batch being written. It does not check the chain.
    """
    name = os.fspath(path)
    records: list[Record] = []
    last: dict[str, int] = {}
    with open(name, "rb") as file:
        fcntl.flock(file.fileno(), fcntl.LOCK_SH)  # released when the file closes
        for line, (_, raw) in enumerate(file_lines(file, 0), start=1):
            if not raw.endswith(b"\n") and is_torn(name, line, raw):
                break
            record = decode(name, line, raw)
            check_seq(name, line, record.session_id, record.seq, last.get(record.session_id, 0))
            last[record.session_id] = record.seq
            records.append(record)
    return records


def verify_jsonl(
    path: str | os.PathLike[str],
    key: bytes | None = None,
    *,
    session: str | None = None,
    anchors: Sequence[Anchor] = (),
    artifacts: ArtifactLoader | None = None,
) -> VerifyReport:
    """Check the hash chain of every session (or of ``session``) in the file at ``path``,
    and every artifact its records name: in the folder beside it, or through ``artifacts``
    (``(session_id, call_id, sha256) -> bytes or None``).

    Streams the file: memory grows with the number of sessions, not of records. The lock is
    held only to learn the file's size; what is appended afterwards is not checked. A torn
    last line counts as a broken link (see :class:`~events.integrity.ChainVerifier`); a whole
    last record that lacks only its newline is checked like any other (a store keeps it).
    """
    if artifacts is None:
        artifacts = ArtifactFiles(os.fspath(path)).get
    verifier = ChainVerifier(key, session=session, anchors=anchors, artifacts=artifacts)
    with open(os.fspath(path), "rb") as file:
        fcntl.flock(file.fileno(), fcntl.LOCK_SH)  # a batch being written is not half-read
        try:
            size = os.fstat(file.fileno()).st_size
        finally:
            fcntl.flock(file.fileno(), fcntl.LOCK_UN)
        for number, (offset, raw) in enumerate(file_lines(file, 0), start=1):
            if offset >= size:
                break
            if not verifier.feed(number, raw[: size - offset]):
                break
    return verifier.report()


def file_lines(file: BinaryIO, start: int) -> Iterator[tuple[int, bytes]]:
    """Each line from byte ``start`` on with its offset; only the last may lack ``"\\n"``."""
    file.seek(start)
    offset = start
    for raw in file:
        yield offset, raw
        offset += len(raw)


def is_torn(path: str, line: int, raw: bytes) -> bool:
    """Whether a last line that lacks its newline is torn: not a whole JSON value, so not a
    record (a whole one is kept). A line that is not even the start of a record is no torn
    write of a store but a file that is not a log (or a changed byte): corruption."""
    try:
        loads_strict(raw)
    except ValueError as exc:
        if not _LINE_START.startswith(raw[: len(_LINE_START)]):
            raise CorruptLogError(
                path,
                line,
                f"not valid JSON ({exc}), and not the start of a record either: this is not a "
                f"toolledger log, or its last line was overwritten",
            ) from exc
        return True
    return False


def decode(path: str, line: int, raw: bytes) -> Record:
    """The record on line ``line`` of ``path``; :class:`CorruptLogError` naming it if none."""
    return decode_stored(path, line, raw)[0]


def decode_stored(path: str, line: int, raw: bytes) -> tuple[Record, str | None]:
    """:func:`decode`, and the line's chain hash (``None`` if it has none)."""
    try:
        return decode_stored_line(raw)
    except CodecError as exc:
        raise CorruptLogError(path, line, str(exc)) from exc


def index_fields(path: str, line: int, raw: bytes) -> tuple[str, int, int, str | None]:
    """The session, seq, schema version and chain hash (``None`` if none) of line ``line``:
    what indexing it needs, without building its event.

    A line of today's schema is read by its envelope alone (:mod:`events.fast.envelope`): its
    JSON is checked whole, and its envelope as the codec checks it, but what the codec checks
    inside the event's data is left to the line's first read, which decodes it. Any other line
    is decoded by the codec here, and :class:`CorruptLogError` names it if it is no record.
    (The opening scan calls :func:`read_envelope` itself, and this only for what it refuses:
    a call less a line.)
    """
    fields = read_envelope(raw, SCHEMA_VERSION, EVENT_TYPES)
    if fields is not None:
        return fields
    record, stored = decode_stored(path, line, raw)  # the reference, which says what is wrong
    return record.session_id, record.seq, record.version, stored


def check_seq(path: str, line: int, session_id: str, seq: int, last: int) -> None:
    """:class:`CorruptLogError` unless ``seq`` follows seq ``last`` of ``session_id``."""
    if seq != last + 1:
        raise CorruptLogError(
            path,
            line,
            f"session {session_id!r} has seq {seq} after seq {last}; "
            f"a session's seqs must run 1, 2, 3, ...",
        )
