"""JSON values: the only data the engine records (arguments, structured content).

Arguments and results cross from untrusted code (the model, a handler, a tool) into the log,
so the engine checks them once and copies them where a callee could otherwise change what the
log holds.
"""

from __future__ import annotations

import math
from typing import Any

from events.results import EmbeddedResource, ToolResult

__all__ = ["copy_json", "ensure_json", "own_result"]


def ensure_json(value: Any) -> None:
    """Raise ``ValueError`` unless ``value`` is plain JSON: dicts with string keys, lists,
    strings, finite numbers, booleans and ``None``. Says what is wrong and where."""
    stack: list[tuple[Any, str]] = [(value, "$")]
    while stack:
        item, path = stack.pop()
        if item is None or isinstance(item, (str, bool, int)):
            continue
        if isinstance(item, float):
            if not math.isfinite(item):
                raise ValueError(f"{path}: {item!r} is not a JSON number")
            continue
        if isinstance(item, (list, tuple)):
            stack.extend((child, f"{path}[{i}]") for i, child in enumerate(item))
            continue
        if isinstance(item, dict):
            for key, child in item.items():
                if not isinstance(key, str):
                    raise ValueError(f"{path}: object key {key!r} is not a string")
                stack.append((child, f"{path}.{key}"))
            continue
        raise ValueError(f"{path}: a {type(item).__name__} is not a JSON value")


def copy_json(value: Any) -> Any:
    """A deep copy of a JSON value (tuples become lists), faster than ``copy.deepcopy``."""
    if isinstance(value, dict):
        return {key: copy_json(child) for key, child in value.items()}
    if isinstance(value, (list, tuple)):
        return [copy_json(child) for child in value]
    return value


def own_result(result: ToolResult) -> ToolResult:
    """A copy of ``result`` that nobody else holds, after checking that it is JSON.

    Every result crossing between the engine and outside code (a tool's return, what a
    ``tool_result`` handler sees or patches in, a nested outcome handed to its parent) goes
    through here, so nobody can change a result the log holds. Raises ``ValueError`` naming
    what is not JSON.
    """
    ensure_json(result.structured_content)
    content = result.content
    if any(isinstance(block, EmbeddedResource) for block in content):
        for block in content:
            if isinstance(block, EmbeddedResource):
                ensure_json(block.resource)
        content = tuple(
            EmbeddedResource(resource=copy_json(block.resource))
            if isinstance(block, EmbeddedResource)
            else block
            for block in content
        )
    return ToolResult(
        content=content,
        structured_content=copy_json(result.structured_content),
        is_error=result.is_error,
    )
