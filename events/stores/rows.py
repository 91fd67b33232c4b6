"""The rows of a database store, read back: what :class:`~events.stores.SqliteStore` and
:class:`~events.stores.postgres.PostgresStore` share.

A database store keeps one row per record, ``(session_id, seq, line)``, the line being the
very bytes :class:`~events.stores.JsonlStore` writes (without its newline), sealed into the
session's hash chain. Reading a row back is the same for every database: decode the line,
check it is the record of the row's session and seq, and, for a keyed store, verify each
record's link and HMAC against the one before it, exactly as a keyed JSONL store verifies its
lines. ``where`` names the database in errors, where a file's path would stand; the seq
stands where a line number would.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..errors import CorruptLogError, UnverifiedRecordError
from ..integrity import GENESIS, LinkError, check_link
from ..types import Record
from .jsonlines import decode_stored

__all__ = ["check_rows", "decode_row"]


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
