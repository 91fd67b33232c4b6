"""A bounded memo, owned by the object whose work it remembers.

Nothing in the engine keeps a process-wide cache: a tool spec remembers the check of its own
schemas, a registry the annotation rule's decision for its own tools, a store the encodings of
its own repeated records. Each holds a :class:`Memo`, which goes when its owner goes and holds
at most ``maxsize`` entries (when full, the oldest is dropped). Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["Memo"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Memo(Generic[K, V]):
    """What ``make(key)`` gave for the last ``maxsize`` keys asked for, oldest first."""

    __slots__ = ("_entries", "maxsize")

    def __init__(self, maxsize: int) -> None:
        if maxsize < 1:
            raise ValueError(f"maxsize must be at least 1, not {maxsize!r}")
        self.maxsize = maxsize
        self._entries: dict[K, V] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: K, make: Callable[[K], V]) -> V:
        """The value remembered for ``key``, or ``make(key)``, remembered (if it returns: an
        exception remembers nothing)."""
        entries = self._entries
        try:
            return entries[key]
        except KeyError:
            pass
        value = make(key)
        if len(entries) >= self.maxsize:
            entries.pop(next(iter(entries)), None)
        entries[key] = value
        return value
