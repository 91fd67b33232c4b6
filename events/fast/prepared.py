"""Events encoded once per content, for the records every session opens with.

Every session that opens with a tool records its ``tool_registered``: the tool's name,
description and schemas, the same for every session that registers that tool; and every new
session its ``session_started``, the same for every session opened with the same settings.
A store encodes each record and proves that it reads back
(:func:`~events.codec.encode_stored`), which for such an event is mostly the walk of its
schemas, three times (unstructured, read back, written): the same work for the same JSON,
session after session.

A store owns an :class:`Encodings`, which does that work once per content for the classes of
:data:`REPEATED`. It prints the event exactly (:func:`marshal.dumps`, which writes every value
with its exact type: ``1``, ``1.0`` and ``True`` print apart, a list apart from a tuple, and a
subclass of ``dict`` or ``str`` does not print at all), and looks the print up: an event that
prints as one encoded before is the same data, value for value and type for type, so its data
is that one's JSON; another is encoded now (:func:`~events.codec.proven_data`, the data proven
by the reader of its class) and remembered. The key is the event itself, printed: nothing a
caller builds, so a new field is in it without anyone naming it. The bytes are the
reference's (``tests/core/test_registration.py`` holds them to ``encode_stored(record,
fast=False)``). An event that does not print, or whose class has no fast reader, takes the
ordinary path. Pure: no I/O.
"""

from __future__ import annotations

import marshal
import typing
from collections.abc import Callable
from operator import attrgetter
from typing import Any, Final

import attrs

from ..codec import proven_data
from ..types import SessionStarted, ToolRegistered

__all__ = ["REPEATED", "Encodings"]

#: The event classes whose records repeat, content for content, from session to session.
REPEATED: Final[frozenset[type[Any]]] = frozenset({SessionStarted, ToolRegistered})


class Encodings:
    """The proven JSON data of the repeated events (:data:`REPEATED`) one store has written,
    by their exact print; at most ``maxsize`` of them (when full, the oldest is dropped)."""

    __slots__ = ("_memo", "maxsize")

    #: the classes it remembers; any other event is encoded every time
    kinds: Final = REPEATED

    def __init__(self, maxsize: int = 1024) -> None:
        if maxsize < 1:
            raise ValueError(f"maxsize must be at least 1, not {maxsize!r}")
        self.maxsize = maxsize
        self._memo: dict[tuple[type[Any], bytes], str] = {}

    def __len__(self) -> int:
        return len(self._memo)

    def data(self, event: Any) -> str | None:
        """``proven_data(event)``: the event's data as JSON, proven to read back, or ``None``
        if its reader does not prove it; from the memo when an event that prints alike was
        encoded before."""
        cls = type(event)
        if cls not in REPEATED:
            return proven_data(event)
        try:
            key = (cls, marshal.dumps(_values(event), 2))
        except ValueError:  # does not print: encoded every time
            return proven_data(event)
        memo = self._memo
        data = memo.get(key)
        if data is None:
            data = proven_data(event)
            if data is None:
                return None  # no reader proves it: the codec's reference will encode it
            if len(memo) >= self.maxsize:
                memo.pop(next(iter(memo)), None)
            memo[key] = data
        return data


class _Plan(typing.NamedTuple):
    """How to print the events of one class: its fields' values at once, and which of them
    hold attrs instances (by index, with the classes each may hold)."""

    values: Callable[[Any], Any]
    parts: tuple[tuple[int, tuple[type[Any], ...]], ...]


def _make_plan(cls: type[Any]) -> _Plan:
    fields = attrs.fields(cls)
    hints = typing.get_type_hints(cls)
    parts = []
    for index, field in enumerate(fields):
        hint = hints[field.name]
        classes = tuple(arg for arg in (typing.get_args(hint) or (hint,))
                        if isinstance(arg, type) and attrs.has(arg))
        if classes:
            parts.append((index, classes))
    names = [field.name for field in fields]
    get = attrgetter(*names)
    values = get if len(names) > 1 else (lambda obj: (get(obj),))
    return _Plan(values, tuple(parts))


def _plans() -> dict[type[Any], _Plan]:
    """A plan for every attrs class a repeated event is made of, worked out at import: a fixed
    table, never written after."""
    plans: dict[type[Any], _Plan] = {}
    todo = list(REPEATED)
    while todo:
        cls = todo.pop()
        if cls not in plans:
            plans[cls] = plan = _make_plan(cls)
            todo.extend(kind for _, classes in plan.parts for kind in classes)
    return plans


_PLANS: Final = _plans()


def _values(obj: Any) -> list[Any]:
    """The values of an attrs instance's fields, in order, each attrs instance among them
    (where the class declares one) replaced by its own values with the index of its class;
    ``ValueError`` for an attrs instance of another class than the field's."""
    plan = _PLANS[type(obj)]
    values = list(plan.values(obj))
    for index, classes in plan.parts:
        value = values[index]
        if value is not None:
            kind = type(value)
            if kind not in classes:
                raise ValueError(f"{kind.__name__} in a field of {classes}")
            values[index] = (classes.index(kind), _values(value))
    return values
