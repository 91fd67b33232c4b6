"""A live session's records, kept as few objects as the facts allow.

A session keeps every record it has read or made, for :meth:`~engine.runtime.session.Session.records`
and its in-process followers. A :class:`~events.types.Record` is an event with its session id,
its seq, its time and its version; of those, a record the session makes now differs from the
one before only by its event and its time: the session id is the session's, the seq is the
next one, the version is :data:`~events.types.SCHEMA_VERSION`. So :class:`History` keeps the
records read from the store as the store handed them, and of each record made since only its
event and its time, and builds a record again when one is asked for (equal to the one that
was made, field for field).

Why: the envelope is one more object a record that CPython's cyclic collector tracks, and a
long session keeps all of them. Each full collection walks every tracked object the process
holds, so the envelopes made up over a quarter of what a turn of a 100 000-call session paid
the collector (docs/performance.md, "A long session's records, without their envelopes").
The event, which the session needs anyway, and the time, a float the collector does not
track, are all that is kept. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import overload

from events.types import Event, Record

__all__ = ["History"]


class History(Sequence[Record]):
    """The records of one session, read-only: those read from its log, then those recorded
    since, from the events and times the session's recorder keeps of them (it appends to
    ``events`` and ``times``, one of each per record, in order)."""

    __slots__ = ("_session_id", "_read", "_base", "_events", "_times")

    def __init__(self, session_id: str, read: Sequence[Record], events: list[Event],
                 times: list[float]) -> None:
        self._session_id = session_id
        self._read = tuple(read)
        #: the seq of the last record read (records are contiguous from 1)
        self._base = self._read[-1].seq if self._read else 0
        self._events = events
        self._times = times

    def __len__(self) -> int:
        return len(self._read) + len(self._events)

    @overload
    def __getitem__(self, index: int) -> Record: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Record]: ...

    def __getitem__(self, index: int | slice) -> Record | Sequence[Record]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        size = len(self)
        if index < 0:
            index += size
        if not 0 <= index < size:
            raise IndexError("history index out of range")
        read = len(self._read)
        if index < read:
            return self._read[index]
        made = index - read
        return Record(session_id=self._session_id, seq=self._base + made + 1,
                      time=self._times[made], event=self._events[made])

    def __iter__(self) -> Iterator[Record]:
        return (self[index] for index in range(len(self)))

    def __reversed__(self) -> Iterator[Record]:
        return (self[index] for index in range(len(self) - 1, -1, -1))
