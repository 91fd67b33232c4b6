"""The rows of a database store, read back: what :class:`~events.stores.SqliteStore` and
:class:`~events.stores.postgres.PostgresStore` share.

A database store keeps one row per record, ``(session_id, seq, line)``, the line being the
very bytes :class:`~events.stores.JsonlStore` writes (without its newline), sealed into the
session's hash chain. Reading a row back is the same for every database: decode the line,
check it is the record of the row's session and seq, and, for a keyed store, verify each
record's link and HMAC against the one before it, exactly as a keyed JSONL store verifies its
lines. ``where`` names the database in errors, where a file's path would stand; the seq
stands where a line number would.

A table of sessions keeps each session's last seq and head, and takes part in the chain: an
append chains onto the head it keeps, so before that the row must agree with the session's
last record (:func:`check_head`), and ``verify`` checks every row
(:class:`~events.integrity.ChainVerifier`'s ``rows``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import attrs

from ..errors import CorruptLogError, SessionRowError, UnverifiedRecordError
from ..integrity import (GENESIS, Anchor, ArtifactLoader, ChainVerifier, LinkError, VerifyReport,
                         check_link, row_problem, sealed_hash)
from ..types import Record
from .jsonlines import decode_stored

__all__ = ["NO_LIMIT", "check_head", "check_rows", "decode_row", "seq_bound", "session_of",
           "sid_of", "verify_tables"]

#: A seq past every record's: the bound of a read that has no limit.
NO_LIMIT = 2**62


def seq_bound(after: int, limit: int | None) -> int:
    """The last seq a read of the records after seq ``after``, at most ``limit`` of them,
    hands out (:data:`NO_LIMIT` without a limit)."""
    return NO_LIMIT if limit is None else after + limit


def sid_of(session_id: str) -> bytes:
    """A session id as the tables store it: UTF-8 with ``surrogatepass``."""
    return session_id.encode("utf-8", "surrogatepass")


def session_of(sid: bytes) -> str:
    """The session id a table stores as ``sid`` (see :func:`sid_of`)."""
    return bytes(sid).decode("utf-8", "surrogatepass")


def decode_row(where: str, session_id: str, seq: int, line: bytes) -> tuple[Record, str | None]:
    """The record in the row of ``session_id`` and ``seq``, and its chain hash (``None`` if
    unchained); :class:`~events.errors.CorruptLogError` if the line does not decode or holds
    another session's or seq's record."""
    record, digest = decode_stored(where, seq, line)
    if record.session_id != session_id or record.seq != seq:
        raise CorruptLogError(
            where, seq, f"the row of session {session_id!r} seq {seq} holds the record "
            f"of session {record.session_id!r} seq {record.seq}")
    return record, digest


def check_rows(
    where: str, key: bytes, session_id: str, after: int, rows: Iterable[tuple[int, bytes]]
) -> tuple[list[Record], str]:
    """The records of ``rows`` (in seq order, from seq ``after`` or ``after + 1``) past seq
    ``after``, each verified with ``key`` to link to the one before (the first to the row of
    seq ``after``, or to the genesis value), and the last one's hash.
    :class:`~events.errors.UnverifiedRecordError` names the first that does not verify."""
    prev = GENESIS
    records: list[Record] = []
    expected = after + 1
    for seq, raw in rows:
        line = bytes(raw)
        record, digest = decode_row(where, session_id, seq, line)
        if seq == after:
            prev = digest or GENESIS
            continue
        if seq != expected:
            raise UnverifiedRecordError(where, seq, f"seq {expected} is missing",
                                        session_id=session_id, seq=expected)
        try:
            verified = check_link(line, record.version, digest, prev, key, first=not records)
        except LinkError as exc:
            raise UnverifiedRecordError(where, seq, exc.problem, session_id=session_id,
                                        seq=seq, hint=exc.hint) from None
        assert verified is not None
        prev = verified
        records.append(record)
        expected += 1
    return records, prev


def check_head(
    where: str,
    session_id: str,
    row: Sequence[Any] | None,
    last: Sequence[Any] | None,
    key: bytes | None = None,
    records_from: Callable[[int], Iterable[tuple[int, bytes]]] | None = None,
) -> tuple[int, str]:
    """The last seq and head the session's row in the table of sessions keeps (``row``, or
    ``None`` if it has none), once they agree with its last record (``last``: its seq and the
    last :data:`~events.integrity.SEALED_TAIL` bytes of its line, or more; ``None`` if it has
    no record); ``(0, GENESIS)`` for a session with neither. Raises
    :class:`~events.errors.SessionRowError` naming the row otherwise: an append never chains
    onto a head its records do not end with.

    With a ``key``, the last record is verified first (its link to the one before, read with
    ``records_from(seq)``: the session's ``(seq, line)`` rows from that seq on), so a changed
    record is named as such (:class:`~events.errors.UnverifiedRecordError`), as a keyed
    read names it, before the row it no longer agrees with."""
    if key is not None and last is not None:
        assert records_from is not None
        before = int(last[0]) - 1
        check_rows(where, key, session_id, before, records_from(before))
    kept = (int(row[0]), str(row[1])) if row is not None else None
    found = (int(last[0]), sealed_hash(bytes(last[1])) or GENESIS) if last is not None else None
    problem = row_problem(kept, found)
    if problem is not None:
        said = kept or found
        assert said is not None
        raise SessionRowError(where, session_id, said[0], problem)
    return kept or (0, GENESIS)


def verify_tables(
    key: bytes | None,
    rows: dict[str, tuple[int, str]],
    orphans: Iterable[str],
    records_of: Callable[[str], Iterable[tuple[int, bytes]]],
    *,
    session: str | None = None,
    anchors: Iterable[Anchor] = (),
    artifacts: ArtifactLoader | None = None,
) -> VerifyReport:
    """A database store's ``verify``: the chain of every session (or of ``session``), its
    records read one session at a time (``records_of``: its ``(seq, line)`` rows in seq
    order), in the order of the table of sessions (``rows``: each session's last seq and
    head, checked against its records too) and then the sessions with records but no row
    (``orphans``), and the artifacts its records name (``artifacts``, as
    :class:`~events.integrity.ChainVerifier` reads them). A break has no line: rows have no
    line number."""
    verifier = ChainVerifier(key, session=session, anchors=anchors, rows=rows,
                             artifacts=artifacts)
    number = 0
    for session_id in [session] if session is not None else [*rows, *orphans]:
        for _, line in records_of(session_id):
            number += 1
            if not verifier.feed(number, bytes(line) + b"\n"):
                break
    report = verifier.report()
    if report.broken is not None and report.broken.line is not None:
        report = attrs.evolve(report, broken=attrs.evolve(report.broken, line=None))
    return report
