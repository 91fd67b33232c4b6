"""Invariants of storage: every record survives the codec, and the store gives back what the
session recorded. Part of :mod:`engine.testing.invariants` (read the overview there)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from events.codec import decode_line, decode_record, encode_line, encode_record
from events.stores import EventStore
from events.types import Record

from .shape import _fail, _kind

__all__ = ["check_codec", "check_store_round_trip", "check_stored"]

# -- the codec and the stores --------------------------------------------------------------------


def check_codec(records: Iterable[Record]) -> None:
    """Every record reads back equal from its JSON line and from its JSON-able dict."""
    for record in records:
        for how, again in (("line", decode_line(encode_line(record))),
                           ("dict", decode_record(encode_record(record)))):
            if again != record:
                raise _fail(f"record seq {record.seq} ({_kind(record.event)}) changes through "
                            f"the codec ({how}): {record!r} reads back as {again!r}")


def check_stored(live: Sequence[Record], stored: Sequence[Record]) -> None:
    """The store holds exactly the records the session recorded (``session.records``)."""
    for index, (mine, theirs) in enumerate(zip(live, stored)):
        if mine != theirs:
            raise _fail(f"record {index + 1} differs between the session and its store: "
                        f"{mine!r} was stored as {theirs!r}")
    if len(live) != len(stored):
        raise _fail(f"the session recorded {len(live)} records and its store holds "
                    f"{len(stored)}")


async def check_store_round_trip(records: Sequence[Record], store: EventStore) -> None:
    """Write ``records`` (one session's log, from seq 1) into ``store`` (which must not hold
    that session yet) and read them back: every record comes back unchanged, ``read(after=)``
    and ``last_seq`` agree, and the session is listed. Use it to test your own store::

        await check_store_round_trip(records, MyStore(...))
    """
    if not records:
        return
    session_id = records[0].session_id
    await store.append(session_id, list(records), 0)
    back = await store.read(session_id)
    check_stored(records, back)
    middle = len(records) // 2
    tail = await store.read(session_id, after=middle)
    if list(tail) != list(records[middle:]):
        raise _fail(f"read(after={middle}) does not return the records after seq {middle}")
    if (last := await store.last_seq(session_id)) != records[-1].seq:
        raise _fail(f"last_seq is {last}, the log ends at seq {records[-1].seq}")
    if session_id not in await store.sessions():
        raise _fail(f"the store does not list session {session_id!r}")
