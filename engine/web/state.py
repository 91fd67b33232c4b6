"""What the console knows of each session: its projection, and what a page shows beside it.

:class:`Folded` is one session folded as far as the console has read it (kept up to date by
:class:`~engine.web.folding.Sessions`): its :class:`~engine.core.reducers.Projection` and what
the projection does not keep: when each call was asked, started and ended (timings), the
model a session last asked, its progress updates and the time of its last record.
"""

from __future__ import annotations

from typing import Literal, get_args

import attrs

from events.callevents import ToolExecutionStarted, ToolProgress
from events.modelturns import ModelRequested
from events.types import Record, TerminalEvent, ToolCallRequested

from ..core.reducers import Projection

__all__ = ["Folded", "State", "Summary", "summary"]

State = Literal["running", "waiting", "paused", "closed"]

_ENDS = get_args(TerminalEvent)  # the events that end a call


@attrs.define
class Folded:
    """One session as far as the store held it when last read."""

    session_id: str
    projection: Projection = attrs.field(factory=Projection)
    first_time: float | None = None
    last_time: float | None = None
    model: str | None = None
    asked: dict[str, float] = attrs.field(factory=dict)
    started: dict[str, float] = attrs.field(factory=dict)
    ended: dict[str, float] = attrs.field(factory=dict)
    progress: dict[str, list[ToolProgress]] = attrs.field(factory=dict)
    #: The top-level calls' ids, in the order they were requested: a page of the call tree
    #: takes its slice, and builds the views of those calls only.
    roots: list[str] = attrs.field(factory=list)
    #: While a background fold reads the session: the seq it reads up to (the store's last
    #: when it looked); what the page shows is then as far as read. None once it is read.
    reading: int | None = None

    @property
    def last_seq(self) -> int:
        return self.projection.last_seq

    def apply(self, record: Record) -> None:
        """Fold one more record, and note its time where a call or the model changed."""
        self.projection.apply(record)
        if self.first_time is None:
            self.first_time = record.time
        self.last_time = record.time
        event = record.event
        if isinstance(event, ToolCallRequested):
            self.asked[event.call_id] = record.time
            if event.parent_id is None:
                self.roots.append(event.call_id)
        elif isinstance(event, ToolExecutionStarted):
            self.started[event.call_id] = record.time
        elif isinstance(event, ToolProgress):
            self.progress.setdefault(event.call_id, []).append(event)
        elif isinstance(event, _ENDS):
            self.ended[event.call_id] = record.time
        elif isinstance(event, ModelRequested):
            self.model = event.model


@attrs.frozen
class Summary:
    """A session's line in the list."""

    session_id: str
    state: State
    waiting_for: str | None
    last_time: float | None
    model: str | None
    calls: int
    records: int
    #: The records the log holds while the console is still reading it (else None): the
    #: state and counts are then as far as read.
    reading: int | None = None


def summary(folded: Folded, live: bool = False) -> Summary:
    """What the list shows of ``folded``. ``live``: a host that mounted the console runs the
    session now, so what waits is answered at once (``waiting``); a session that waits for a
    person and that no host runs here is ``paused`` until it is resumed."""
    projection = folded.projection
    waits = [f"approval of {projection.calls[c].name} ({c})"
             for c in projection.pending_approvals]
    waits += [f"an answer to {q}" for q in projection.pending_questions]
    if waits:
        state: State = "waiting" if live else "paused"
        waiting_for: str | None = "a person: " + ", ".join(waits)
    elif projection.open_calls or projection.model_asked is not None:
        state, waiting_for = "running", None
    else:
        state, waiting_for = "closed", None
    return Summary(session_id=folded.session_id, state=state, waiting_for=waiting_for,
                   last_time=folded.last_time, model=folded.model,
                   calls=len(projection.calls), records=projection.last_seq,
                   reading=folded.reading)
