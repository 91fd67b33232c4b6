"""Which records a replay may run live tools from: verified ones, or any when told so.

A log is input. A live replay runs real tool bodies on the strength of what the log says: that
a call was requested, and above all that it was granted. Anyone who can write a log file can
append a grant; only the holder of the log's HMAC key can seal one that verifies. So a replay
runs live tools only from records a store given the key handed out (such a store checks every
record's link and HMAC before it hands it out, and refuses the first that fails, naming it):
:class:`VerifiedRecords`, which :func:`read_verified` gives. Records from anywhere else (a
file read without the key, a list built in memory) replay live only with an explicit
``unverified=True`` (``--unverified``), never silently. Recorded replay runs no tool body, so
it takes any records; its report says whether they were verified.

What a verified log proves, and what it does not (a cut-off tail), is in docs/integrity.md.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from events.stores import EventStore
from events.stores.base import is_keyed
from events.types import Record

from .recorded import ReplayError
from .report import ToolMode

__all__ = ["UnverifiedLogError", "VerifiedRecords", "check_live", "read_verified"]


class UnverifiedLogError(ReplayError):
    """Live tools were to run from records nothing verified, and no one said that they may.
    Nothing ran. The message says how to verify them, or how to opt in."""


def _tuple(records: Iterable[Record]) -> tuple[Record, ...]:
    return tuple(records)


@attrs.frozen(kw_only=True)
class VerifiedRecords:
    """One session's records as a store given the log's key handed them out: every record's
    link and HMAC checked. :func:`~engine.replay.redrive` runs live tools from these without
    being told ``unverified=True``. :func:`read_verified` makes them; build one by hand only
    from records a keyed store handed out (as ``toolledger replay`` does with the store it
    opened with the key): the value vouches for its records, it cannot check them."""

    session_id: str
    records: tuple[Record, ...] = attrs.field(converter=_tuple)


async def read_verified(store: EventStore, session_id: str) -> VerifiedRecords:
    """The records of ``session_id``, read through ``store``, which must be given the log's
    key (``JsonlStore(path, key=...)``, ``open_store(url, key=...)``): it verifies each record
    it hands out and raises :class:`~events.errors.UnverifiedRecordError`, naming the first
    that fails. A store without a key vouches for nothing: :class:`UnverifiedLogError`.
    Example::

        with JsonlStore("session.jsonl", key=key) as store:
            records = await read_verified(store, session_id)
        report = await redrive(records, tools=my_tools, tool_mode="live")
    """
    if not is_keyed(store):
        raise UnverifiedLogError(
            f"a {type(store).__name__} without a key verifies nothing it reads: open the "
            f"store with the log's key (key=...) to read verified records"
        )
    return VerifiedRecords(session_id=session_id, records=await store.read(session_id))


def check_live(tool_mode: ToolMode, *, verified: bool, unverified: bool, remedy: str) -> None:
    """The rule, shared by :func:`~engine.replay.redrive` and ``toolledger replay``: live
    tools run only from ``verified`` records, or from any when the caller said ``unverified``.
    Else :class:`UnverifiedLogError`, ending with ``remedy`` (how to verify, or opt in, in the
    caller's own terms)."""
    if tool_mode == "live" and not verified and not unverified:
        raise UnverifiedLogError(
            "live replay runs the real tools, and the log was not verified: nothing shows "
            "that its records (a grant, say) are what its writer wrote, so no tool was run. "
            + remedy
        )


def unverified_note(tool_mode: ToolMode) -> str:
    """The report's note for a replay of records that were not verified."""
    ran = ("live tools ran from it, as asked (unverified)" if tool_mode == "live"
           else "no tool ran (recorded tools)")
    return (f"the log was not verified (it was not read with its key): nothing shows that its "
            f"records are what its writer wrote; {ran}")


def records_of(records: Iterable[Record] | VerifiedRecords) -> tuple[tuple[Record, ...], bool]:
    """The records, and whether they were verified."""
    if isinstance(records, VerifiedRecords):
        return records.records, True
    return tuple(records), False
