"""Events encoded once per content, for the records every session opens with.

Every session that opens with a tool records its ``tool_registered``: the tool's name,
description and schemas, the same for every session that registers that tool; and every new
session its ``session_started``, the same for every session opened with the same settings.
A store encodes each record and proves that it reads back
(:func:`~events.codec.encode_stored`), which for such an event is mostly the walk of its
schemas, three times (unstructured, read back, written): the same work for the same JSON,
session after session.

:func:`prepare` does that work once per content. It prints the event exactly
(:func:`marshal.dumps`, which writes every value with its exact type: ``1``, ``1.0`` and
``True`` print apart, a list apart from a tuple, and a subclass of ``dict`` or ``str`` does not
print at all), and looks the print up: an event that prints as one encoded before is the same
data, value for value and type for type, so its data is that one's JSON; another is encoded
now (:func:`~events.codec.proven_data`, the data proven by the reader of its class) and
remembered. Either way the codec writes the event's data as that JSON the first time it
encodes the event, without walking it again; the bytes are the reference's
(``tests/core/test_registration.py`` holds them to ``encode_stored(record, fast=False)``).

A caller that has printed what an event is made of already may pass that print as the
event's ``key``, which spares printing the event again: it vouches that events of one class
prepared with equal keys encode alike, type for type (the engine keys a tool's registration
by the print it checked the tool's schemas by and the print of the rest of the spec:
:meth:`engine.core.registry.Registry.recorded`). Keys and the module's own prints are remembered
apart, and the data is still the event's own, proven, the first time a key is met.

An event is prepared just before it is recorded: its JSON is what it held when it was
prepared, so an event changed in place before its first encoding would be written as it was
prepared. Later encodings of it (another store's, say) take the ordinary path. An event that
does not print, whose class has no fast reader, or that cannot be weakly referenced is left to
the ordinary path. Pure: no I/O.
"""

from __future__ import annotations

import marshal
import typing
import weakref
from collections.abc import Callable
from operator import attrgetter
from typing import Any, Final

import attrs

from ..codec import PREPARED, proven_data

__all__ = ["prepare"]

_MEMO_MAX: Final = 1024
#: The data of every event prepared, as JSON, by its class, whether the caller keyed it, and
#: its key or print. Bounded: when full, the oldest entry is dropped.
_MEMO: dict[tuple[type[Any], bool, bytes], str] = {}


def prepare(event: Any, key: bytes | None = None) -> None:
    """Have ``event`` (made just now, about to be recorded) encoded from the JSON of an equal
    event prepared before, or encode it now for the next one. ``key``: the caller's print of
    all the event is made of, if it has one. See the module's docstring."""
    cls = type(event)
    try:
        memo = (cls, True, key) if key is not None else (
            cls, False, marshal.dumps(_values(event), 2))
        ref = _Ref(event, _forget)
        ref.key = id(event)
    except (ValueError, TypeError):  # does not print (TypeError: no weak reference to it)
        return
    data = _MEMO.get(memo)
    if data is None:
        data = proven_data(event)
        if data is None:
            return  # no reader proves it: the codec's reference will encode it
        if len(_MEMO) >= _MEMO_MAX:
            _MEMO.pop(next(iter(_MEMO)), None)
        _MEMO[memo] = data
    PREPARED[id(event)] = (ref, data)


class _Plan(typing.NamedTuple):
    """How to print the events of one class: its fields' values at once, and which of them
    hold attrs instances (by index, with the classes each may hold)."""

    values: Callable[[Any], Any]
    parts: tuple[tuple[int, tuple[type[Any], ...]], ...]


_PLANS: dict[type[Any], _Plan] = {}


def _plan(cls: type[Any]) -> _Plan:
    plan = _PLANS.get(cls)
    if plan is None:
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
        plan = _PLANS[cls] = _Plan(values, tuple(parts))
    return plan


def _values(obj: Any) -> list[Any]:
    """The values of an attrs instance's fields, in order, each attrs instance among them
    (where the class declares one) replaced by its own values with the index of its class;
    ``ValueError`` for an attrs instance of another class than the field's."""
    plan = _plan(type(obj))
    values = list(plan.values(obj))
    for index, classes in plan.parts:
        value = values[index]
        if value is not None:
            kind = type(value)
            if kind not in classes:
                raise ValueError(f"{kind.__name__} in a field of {classes}")
            values[index] = (classes.index(kind), _values(value))
    return values


class _Ref(weakref.ref[Any]):
    """A weak reference to a prepared event that remembers the event's id, its entry's key."""

    __slots__ = ("key",)
    key: int


def _forget(ref: _Ref, prepared: dict[int, tuple[weakref.ref[Any], str]] = PREPARED) -> None:
    """Drop an event's entry when the event goes (unless its id is a newer event's since).
    The table is bound here: an event that goes as the interpreter shuts down may find the
    module's names cleared."""
    entry = prepared.get(ref.key)
    if entry is not None and entry[0] is ref:
        del prepared[ref.key]
