"""JSON values: the only data the engine records (arguments, structured content).

Arguments and results cross from untrusted code (the model, a handler, a tool) into the log,
so the engine checks them once and copies them where a callee could otherwise change what the
log holds. :func:`own_json` does both in one pass (the hot path of every call);
:func:`ensure_json` only checks, and names what is wrong and where.

A value nested deeper than :data:`MAX_DEPTH` levels is refused: no JSON anyone means is that
deep, and a value that contains itself (a list appended to itself) would otherwise never end.
The limit is set well below what the interpreter's stack allows, because a value the engine
accepts is walked again by code that recurses once or more per level (the codec's converter
spends three frames a level, the JSON encoder and decoder one each, a validator compiled from
a recursive schema one or two), and that walk may happen at the bottom of the deepest nested
call :data:`engine.core.limits.MAX_CALL_DEPTH` allows. tests/faults/test_fault_recursion.py runs
both limits together under a host that already uses 300 frames.
"""

from __future__ import annotations

import math
from typing import Any

from events.results import EmbeddedResource, FailureDetail, ToolResult

__all__ = [
    "MAX_DEPTH", "NotJson", "TooDeep", "copy_json", "ensure_json", "own_json", "own_result",
]

#: How deep a JSON value may nest (objects and arrays inside each other).
MAX_DEPTH = 100


class NotJson(ValueError):
    """A value that is not JSON. The message says what and where, for people; ``detail``
    says the same as data (path, problem, the type or repr at fault), and a failure records
    it as its :class:`~events.types.FailureDetail`."""

    def __init__(self, message: str, detail: FailureDetail) -> None:
        super().__init__(message)
        self.detail = detail


class TooDeep(NotJson):
    """A value nested deeper than :data:`MAX_DEPTH` (or one that contains itself)."""


# A path while the value is walked: (the parent's, key or index), or None at the root; turned
# into a tuple only for the one path a problem is reported at.
_Steps = Any


def _path(steps: _Steps) -> tuple[str | int, ...]:
    found: list[str | int] = []
    while steps is not None:
        steps, step = steps
        found.append(step)
    return tuple(reversed(found))


def ensure_json(value: Any) -> None:
    """Raise :class:`NotJson` (a ``ValueError``) unless ``value`` is plain JSON: dicts with
    string keys, lists, strings, finite numbers, booleans and ``None``, nested at most
    :data:`MAX_DEPTH` deep. Says what is wrong and where."""
    stack: list[tuple[Any, str, int, _Steps]] = [(value, "$", 0, None)]
    while stack:
        item, path, depth, steps = stack.pop()
        if item is None or isinstance(item, (str, bool, int)):
            continue
        if isinstance(item, float):
            if not math.isfinite(item):
                raise NotJson(f"{path}: {item!r} is not a JSON number", FailureDetail(
                    path=_path(steps), problem="number", value=repr(item)))
            continue
        if isinstance(item, (list, tuple, dict)) and depth >= MAX_DEPTH:
            where = path if len(path) <= 120 else f"{path[:60]}…{path[-60:]}"
            raise TooDeep(f"{where}: nested more than {MAX_DEPTH} levels deep (or contains "
                          f"itself)", FailureDetail(path=_path(steps), problem="depth",
                                                    limit=MAX_DEPTH))
        if isinstance(item, (list, tuple)):
            stack.extend((child, f"{path}[{i}]", depth + 1, (steps, i))
                         for i, child in enumerate(item))
            continue
        if isinstance(item, dict):
            for key, child in item.items():
                if not isinstance(key, str):
                    raise NotJson(f"{path}: object key {key!r} is not a string", FailureDetail(
                        path=_path(steps), problem="key", value=repr(key)))
                stack.append((child, f"{path}.{key}", depth + 1, (steps, key)))
            continue
        raise NotJson(f"{path}: a {type(item).__name__} is not a JSON value", FailureDetail(
            path=_path(steps), problem="type", type=type(item).__name__))


def copy_json(value: Any) -> Any:
    """A deep copy of a JSON value (tuples become lists), faster than ``copy.deepcopy``."""
    if isinstance(value, dict):
        return {key: child if type(child) in _SCALARS else copy_json(child)
                for key, child in value.items()}
    if isinstance(value, (list, tuple)):
        return [child if type(child) in _SCALARS else copy_json(child) for child in value]
    return value


_SCALARS = frozenset({str, int, bool, float, type(None)})


class _NotPlain(Exception):
    """Raised inside :func:`_own` when a value needs the careful path."""


_CHECKED = frozenset({str, int, bool, type(None)})  # scalars that need no check


def _own(value: Any, depth: int) -> Any:
    kind = type(value)
    if kind in _CHECKED:
        return value
    if kind is dict:
        if depth >= MAX_DEPTH:
            raise _NotPlain
        copied = {}
        for key, child in value.items():
            if type(key) is not str:
                raise _NotPlain
            copied[key] = child if type(child) in _CHECKED else _own(child, depth + 1)
        return copied
    if kind is list:
        if depth >= MAX_DEPTH:
            raise _NotPlain
        return [child if type(child) in _CHECKED else _own(child, depth + 1) for child in value]
    if kind is float and math.isfinite(value):
        return value
    raise _NotPlain


def own_json(value: Any) -> Any:
    """``ensure_json(value)`` then ``copy_json(value)``, in one pass: a private copy of a JSON
    value, or ``ValueError`` naming what is not JSON."""
    try:
        return _own(value, 0)
    except _NotPlain:
        pass  # tuples, subclasses of str/int/dict/list, or something that is not JSON
    ensure_json(value)
    return copy_json(value)


def own_result(result: ToolResult) -> ToolResult:
    """A copy of ``result`` that nobody else holds, after checking that it is JSON.

    Every result crossing between the engine and outside code (a tool's return, what a
    ``tool_result`` handler sees or patches in, a nested outcome handed to its parent) goes
    through here, so nobody can change a result the log holds. Raises ``ValueError`` naming
    what is not JSON.

    A result with nothing mutable in it (no structured content or a plain scalar, no embedded
    resource: its blocks are frozen values) is its own copy: it is returned as it is.
    """
    content = result.content
    embedded = False
    for block in content:
        if isinstance(block, EmbeddedResource):
            embedded = True
            break
    structured = result.structured_content
    if not embedded and type(result) is ToolResult and type(structured) in _CHECKED:
        return result
    structured = own_json(structured)
    if embedded:
        for block in content:
            if isinstance(block, EmbeddedResource):
                ensure_json(block.resource)
        content = tuple(
            EmbeddedResource(resource=copy_json(block.resource))
            if isinstance(block, EmbeddedResource)
            else block
            for block in content
        )
    return _result(content, structured, result.is_error)


_set = object.__setattr__


def _result(content: tuple[Any, ...], structured: Any, is_error: bool) -> ToolResult:
    """``ToolResult(content=..., structured_content=..., is_error=...)`` from the parts of
    one that was built (and so checked) already: its validators need not run again."""
    copied: ToolResult = object.__new__(ToolResult)
    _set(copied, "content", content)
    _set(copied, "structured_content", structured)
    _set(copied, "is_error", is_error)
    return copied
