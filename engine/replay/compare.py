"""Comparing a replayed log with the recorded one: per call, per transcript entry, per tool.

Concurrent calls may interleave differently when a session is driven again, so the global
order of records is never compared. What is compared:

- **each call**, by the engine's call id: the sequence of its own events, event by event (the
  type, then every field but the call id; an error's traceback text is ignored). Only the
  *first* divergence of a call is reported: what follows it is a consequence.
- **the transcript**, entry by entry, matched by what the entry is (the n-th user message, the
  assistant's message of turn n, the result of call c), not by position.
- **each tool's registrations**, by name, in order.

Record times and sequence numbers are never compared. Nothing here runs anything.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any, Literal

import attrs

from events.codec import converter, type_name
from events.types import TERMINAL_EVENTS, AssistantMessage, Record, ToolRegistered, UserMessage

from ..core.callids import from_host
from ..core.reducers import TranscriptEntry
from .recorded import root_of, turn_of

__all__ = ["Divergence", "DivergenceKind", "Scope", "compare_calls", "compare_tools",
           "compare_transcripts", "first_difference", "short_json"]

Scope = Literal["call", "transcript", "tool", "session"]
DivergenceKind = Literal["changed", "event", "missing", "extra", "only_recorded",
                         "only_replayed", "not_given", "error"]

#: Fields that are about the run, not the fact (an error's traceback text).
IGNORED_FIELDS = frozenset({"traceback"})
#: Facts a record written before version 3 may not hold (its upcaster fills them in only
#: where the old message said them): where the log has none, the replay's is not compared.
UNRECORDED_BEFORE_V3 = frozenset({"rule", "later", "detail"})

_WHAT = {
    "event": "another event",
    "missing": "an event the replay does not have",
    "extra": "an event the log does not have",
    "only_recorded": "a call only the log has: the replay never made it",
    "only_replayed": "a call only the replay has: the log never made it",
    "not_given": "not among the tools given: replayed from its recorded declaration",
}


@attrs.frozen(kw_only=True)
class Divergence:
    """One place where the replay differs from the log.

    ``scope`` says what was compared: a ``call`` (``subject`` is its id, ``tool`` its tool),
    a ``transcript`` entry (``subject`` names it, e.g. ``"result of 2.0"``), a ``tool``'s
    registration (``subject`` is its name), or the ``session`` (``kind="error"``: the replay
    itself stopped, or a step of it failed). ``index`` is the position of the event in the
    call's events (of the entry in the transcript, of the registration among the tool's).

    ``kind`` says how they differ, and what ``recorded`` and ``now`` hold:

    - ``changed``: one field of the same event; ``field`` is its path
      (``result.content[0].text``), ``recorded`` and ``now`` its two values;
    - ``event``: another event type at ``index``; both hold the whole event as the log writes
      it (``{"type": ..., "data": ...}``);
    - ``missing`` / ``extra``: an event (entry, registration) only the log / only the replay
      has; the other side is ``None``;
    - ``only_recorded`` / ``only_replayed``: a whole call on one side only (its request);
    - ``not_given``: a tool of the log that is not among the tools given in recorded mode;
    - ``error``: ``now`` says what went wrong.
    """

    scope: Scope
    kind: DivergenceKind
    subject: str
    tool: str | None = None
    index: int | None = None
    event: str | None = None
    field: str | None = None
    recorded: Any = None
    now: Any = None

    def to_json(self) -> dict[str, Any]:
        """The divergence as a JSON object (values as the log writes them)."""
        return {field.name: getattr(self, field.name) for field in attrs.fields(Divergence)}

    def where(self) -> str:
        """What differs: ``call 2.0 (delete_file), event 1 policy_decided``."""
        if self.scope == "call":
            text = f"call {self.subject}" + (f" ({self.tool})" if self.tool else "")
            if self.index is not None:
                text += f", event {self.index}" + (f" {self.event}" if self.event else "")
            return text
        if self.scope == "transcript":
            return f"transcript: {self.subject}" + (
                f" (entry {self.index})" if self.index is not None else "")
        if self.scope == "tool":
            return f"tool {self.subject}" + (
                f" (registration {self.index + 1})" if self.index is not None else "")
        return f"replay ({self.subject})"

    def describe(self) -> str:
        """The divergence in one line, for people."""
        if self.kind == "changed":
            return (f"{self.where()}: {self.field or 'the value'} was {short_json(self.recorded)}"
                    f", now {short_json(self.now)}")
        if self.kind == "error":
            return f"{self.where()}: {self.now}"
        text = f"{self.where()}: {_WHAT[self.kind]}"
        if self.kind == "event":
            text += f" (the log: {_type(self.recorded)}, the replay: {_type(self.now)})"
        return text


def _type(value: Any) -> str:
    return str(value.get("type")) if isinstance(value, dict) else str(value)


def short_json(value: Any, limit: int = 120) -> str:
    """A value as JSON, cut to ``limit`` characters."""
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


#: Fields of one event type that are about the run, not the fact: a suspended program's
#: dump holds the sandbox's timings, so its bytes differ from run to run (what it waits for
#: and what it printed are compared).
IGNORED_BY_TYPE = {"program_suspended": ("state", "sha256")}


def _event(event: Any) -> dict[str, Any]:
    """An event as the log writes it, without the fields that are never compared."""
    data = _plain(event)
    data.pop("call_id", None)
    kind = type_name(event)
    for name in IGNORED_BY_TYPE.get(kind, ()):
        data.pop(name, None)
    return {"type": kind, "data": data}


def _plain(value: Any) -> Any:
    """A value as JSON data, with the fields that are never compared removed."""
    data = converter.unstructure(value)
    return _strip(data)


def _strip(data: Any) -> Any:
    if isinstance(data, dict):
        return {k: _strip(v) for k, v in data.items() if k not in IGNORED_FIELDS}
    if isinstance(data, list):
        return [_strip(v) for v in data]
    return data


def first_difference(recorded: Any, now: Any, path: str = "") -> tuple[str, Any, Any] | None:
    """The first place two JSON values differ: ``(path, recorded part, replayed part)``.

    Paths read like ``result.content[0].text``; objects are walked in their field order.
    """
    if type(recorded) is not type(now) and not (
        isinstance(recorded, (int, float)) and isinstance(now, (int, float))
        and not isinstance(recorded, bool) and not isinstance(now, bool)
    ):
        return path, recorded, now
    if isinstance(recorded, dict):
        for key in [*recorded, *(k for k in now if k not in recorded)]:
            if key not in recorded or key not in now:
                return _join(path, key), recorded.get(key), now.get(key)
            found = first_difference(recorded[key], now[key], _join(path, key))
            if found is not None:
                return found
        return None
    if isinstance(recorded, list):
        for index, (a, b) in enumerate(zip(recorded, now)):
            found = first_difference(a, b, f"{path}[{index}]")
            if found is not None:
                return found
        if len(recorded) != len(now):
            index = min(len(recorded), len(now))
            return (f"{path}[{index}]", recorded[index] if index < len(recorded) else None,
                    now[index] if index < len(now) else None)
        return None
    return None if recorded == now else (path, recorded, now)


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def call_events(records: Iterable[Record]) -> dict[str, list[Any]]:
    """Each call's events in log order, by call id (calls in the order they were requested)."""
    calls: dict[str, list[Any]] = {}
    for record in records:
        call_id = getattr(record.event, "call_id", None)
        if call_id is not None:
            calls.setdefault(call_id, []).append(record.event)
    return calls


def compare_calls(
    recorded: Sequence[Record], replayed: Sequence[Record], *, cut_turn: int | None = None
) -> list[Divergence]:
    """The first divergence of every call that differs (see the module docstring).

    ``cut_turn``: the log ends in the middle of that turn's batch, so a call of it that the
    log holds open may go on in the replay, and one the log never got to may be there. The
    same holds for a host call the log holds open, and the calls under it."""
    before, after = call_events(recorded), call_events(replayed)
    older = {id(record.event) for record in recorded if record.version < 3}

    # a host call the log leaves open was cut short too (the process stopped, or the session
    # closed on it): the replay may carry it, and its nested calls, further
    open_hosts = {call_id for call_id, events in before.items()
                  if from_host(call_id) and "/" not in call_id
                  and not any(isinstance(e, TERMINAL_EVENTS) for e in events)}

    def cut(call_id: str) -> bool:
        if from_host(call_id):
            return root_of(call_id) in open_hosts
        return cut_turn is not None and turn_of(call_id) == cut_turn

    divergences: list[Divergence] = []
    for call_id in [*before, *(c for c in after if c not in before)]:
        events, again = before.get(call_id), after.get(call_id)
        name = (events or again or [None])[0]
        tool = getattr(name, "name", None)
        if events is None:
            if cut(call_id):
                continue
            divergences.append(Divergence(scope="call", kind="only_replayed", subject=call_id,
                                          tool=tool, now=_event(again[0]) if again else None))
            continue
        if again is None:
            divergences.append(Divergence(scope="call", kind="only_recorded", subject=call_id,
                                          tool=tool, recorded=_event(events[0])))
            continue
        if cut(call_id) and not any(isinstance(e, TERMINAL_EVENTS) for e in events):
            again = again[: len(events)]
        found = _first_event_divergence(call_id, tool, events, again, older)
        if found is not None:
            divergences.append(found)
    return divergences


def _first_event_divergence(
    call_id: str, tool: str | None, events: Sequence[Any], again: Sequence[Any],
    older: set[int],
) -> Divergence | None:
    for index in range(max(len(events), len(again))):
        if index >= len(again):
            return Divergence(scope="call", kind="missing", subject=call_id, tool=tool,
                              index=index, event=type_name(events[index]),
                              recorded=_event(events[index]))
        if index >= len(events):
            return Divergence(scope="call", kind="extra", subject=call_id, tool=tool,
                              index=index, event=type_name(again[index]),
                              now=_event(again[index]))
        was, now = type_name(events[index]), type_name(again[index])
        if was != now:
            return Divergence(scope="call", kind="event", subject=call_id, tool=tool,
                              index=index, event=was, recorded=_event(events[index]),
                              now=_event(again[index]))
        plain_was, plain_now = _event(events[index])["data"], _event(again[index])["data"]
        if id(events[index]) in older:
            for field in UNRECORDED_BEFORE_V3 - plain_was.keys():
                plain_now.pop(field, None)
        found = first_difference(plain_was, plain_now)
        if found is not None:
            path, a, b = found
            return Divergence(scope="call", kind="changed", subject=call_id, tool=tool,
                              index=index, event=was, field=path, recorded=a, now=b)
    return None


def _entry_key(entry: TranscriptEntry, users: int) -> str:
    if isinstance(entry, UserMessage):
        return f"user message {users}"
    if isinstance(entry, AssistantMessage):
        return f"assistant message of turn {entry.turn}"
    return f"result of {entry.call_id}"


def _keyed(entries: Iterable[TranscriptEntry]) -> dict[str, tuple[int, TranscriptEntry]]:
    keyed: dict[str, tuple[int, TranscriptEntry]] = {}
    users = 0
    for index, entry in enumerate(entries):
        if isinstance(entry, UserMessage):
            users += 1
        keyed[_entry_key(entry, users)] = (index, entry)
    return keyed


def compare_transcripts(
    recorded: Iterable[TranscriptEntry],
    replayed: Iterable[TranscriptEntry],
    *,
    open_ended: bool = False,
) -> list[Divergence]:
    """Every transcript entry that differs, is missing or is extra (matched by what it is).
    ``open_ended``: the log was cut short, so entries after its last one are not extra."""
    before, after = _keyed(recorded), _keyed(replayed)
    end = len(before)
    divergences: list[Divergence] = []
    for key, (index, entry) in before.items():
        if key not in after:
            divergences.append(Divergence(scope="transcript", kind="missing", subject=key,
                                          index=index, recorded=_plain(entry)))
            continue
        found = first_difference(_plain(entry), _plain(after[key][1]))
        if found is not None:
            path, a, b = found
            divergences.append(Divergence(scope="transcript", kind="changed", subject=key,
                                          index=index, field=path or None, recorded=a, now=b))
    for key, (index, entry) in after.items():
        if key not in before and not (open_ended and index >= end):
            divergences.append(Divergence(scope="transcript", kind="extra", subject=key,
                                          index=index, now=_plain(entry)))
    return divergences


def registrations(records: Iterable[Record]) -> dict[str, list[Any]]:
    """Each tool's registered snapshots, in order, by name."""
    tools: dict[str, list[Any]] = {}
    for record in records:
        if isinstance(record.event, ToolRegistered):
            tools.setdefault(record.event.spec.name, []).append(record.event.spec)
    return tools


def compare_tools(recorded: Sequence[Record], replayed: Sequence[Record]) -> list[Divergence]:
    """The first difference in each tool's registrations (a changed declaration, mostly)."""
    before, after = registrations(recorded), registrations(replayed)
    divergences: list[Divergence] = []
    for name in [*before, *(n for n in after if n not in before)]:
        was, now = before.get(name, []), after.get(name, [])
        for index in range(max(len(was), len(now))):
            if index >= len(now):
                divergences.append(Divergence(scope="tool", kind="missing", subject=name,
                                              index=index, event="tool_registered",
                                              recorded=_plain(was[index])))
                break
            if index >= len(was):
                divergences.append(Divergence(scope="tool", kind="extra", subject=name,
                                              index=index, event="tool_registered",
                                              now=_plain(now[index])))
                break
            found = first_difference(_plain(was[index]), _plain(now[index]))
            if found is not None:
                path, a, b = found
                divergences.append(Divergence(scope="tool", kind="changed", subject=name,
                                              index=index, event="tool_registered",
                                              field=path, recorded=a, now=b))
                break
    return divergences
