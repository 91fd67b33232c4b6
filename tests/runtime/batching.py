"""What the tests of batches, cancellation and followers share: where a record is in a log, and
the annotations and deadlock bound they use.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import trio
import trio.testing

from engine import (
    Annotations,
    Session,
)
from engine.core.reducers import ToolResultEntry
from events.types import (
    TERMINAL_EVENTS,
    Record,
)

SAFE = Annotations(read_only=True, open_world=False)
DEADLOCK = 60  # seconds of (virtual, autojumped) time after which a test counts as hung


# -- helpers ---------------------------------------------------------------------------------


def index_of(records: Sequence[Record], kind: type[Any] | tuple[type[Any], ...], call_id: str) -> int:
    """Position of the first record of ``kind`` about ``call_id``."""
    for i, record in enumerate(records):
        if isinstance(record.event, kind) and getattr(record.event, "call_id", None) == call_id:
            return i
    raise AssertionError(f"no {kind} for call {call_id}")


def events_of(records: Sequence[Record], call_id: str) -> list[Any]:
    return [r.event for r in records if getattr(r.event, "call_id", None) == call_id]


class Watcher:
    """Follows a session and sets a trio event when a matching record appears.

    Run :meth:`run` in a nursery that encloses the session's ``open`` block; it ends when the
    session closes.
    """

    def __init__(self) -> None:
        self._waits: list[tuple[Callable[[Record], bool], trio.Event]] = []
        self.seen: list[Record] = []

    def when(self, predicate: Callable[[Record], bool]) -> trio.Event:
        event = trio.Event()
        self._waits.append((predicate, event))
        return event

    def terminal(self, call_id: str) -> trio.Event:
        return self.when(lambda r: isinstance(r.event, TERMINAL_EVENTS)
                         and r.event.call_id == call_id)

    async def run(self, session: Session) -> None:
        async for record in session.follow():
            self.seen.append(record)
            for predicate, event in self._waits:
                if predicate(record):
                    event.set()


def assert_all_cancelled_in_transcript(session: Session, turn: int, count: int) -> None:
    """The transcript shows one error result per call of turn ``turn``, in order."""
    entries = [e for e in session.transcript if isinstance(e, ToolResultEntry)
               and e.call_id.startswith(f"{turn}.")]
    assert [e.call_id for e in entries] == [f"{turn}.{i}" for i in range(count)]
    for entry in entries:
        assert entry.result.is_error
        assert "cancelled" in entry.result.text
    assert all("/" not in e.call_id for e in session.transcript
               if isinstance(e, ToolResultEntry))
