"""What the log holds of a body that stopped with its state recorded (the code tool's program:
``program_suspended``), read when the body runs again to go on from it.

:func:`last_suspension` finds the latest state a call recorded and the nested calls it had
requested by then; :func:`nested_after` pairs the body's new requests only with the calls
recorded after that point (:mod:`engine.core.nested`), since the ones before belong to the
state. Only a resume asks, so reading the log backwards costs nothing that matters.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from events.types import ProgramSuspended, ToolCallRequested

from ..core.nested import NestedCalls
from .recorder import Recorder

__all__ = ["last_suspension", "nested_after"]


def last_suspension(
    recorder: Recorder, call_id: str,
) -> tuple[ProgramSuspended, tuple[str, ...], Mapping[str, str]] | None:
    """The latest state ``call_id``'s body recorded, with the nested calls requested before
    it (in order) and their tools' names; ``None`` if it never stopped so."""
    history = recorder.history
    for index in range(len(history) - 1, -1, -1):
        event = history[index].event
        if type(event) is ProgramSuspended and event.call_id == call_id:
            before = {r.event.call_id: r.event.name for r in history[:index]
                      if type(r.event) is ToolCallRequested and r.event.parent_id == call_id}
            return event, tuple(before), before
    return None


def nested_after(recorder: Recorder, call_id: str, taken: Iterable[str]) -> NestedCalls:
    """The pairing of a body's requests with its recorded nested calls but ``taken``."""
    skip = frozenset(taken)
    projection = recorder.projection
    calls = projection.live_calls
    return NestedCalls(call_id, (
        (child, calls[child].name, calls[child].requested_arguments)
        for child in projection.children(call_id) if child not in skip), taken=skip)
