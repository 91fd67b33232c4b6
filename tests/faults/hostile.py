"""Generators of hostile inputs the fault suite feeds the engine: JSON values too deep for any
recursive walk (or that contain themselves), and regular expressions that backtrack for ever.

Each strategy draws the class of input, not one example of it, so that the next member of the
class is found by a property rather than by a person.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from engine.jsonvalues import MAX_DEPTH

__all__ = ["deep_values", "nest"]


def nest(depth: int, shape: str = "list", leaf: Any = 1) -> Any:
    """A JSON value ``depth`` containers deep: ``[[...[1]...]]``, ``{"a": {"a": ...}}``, or
    lists and objects taking turns (``shape="mixed"``)."""
    value = leaf
    for level in range(depth):
        as_list = shape == "list" or (shape == "mixed" and level % 2 == 0)
        value = [value] if as_list else {"a": value}
        if shape == "wide" and level % 2:
            value = [0, value, "x"]
    return value


def _self_containing(kind: str) -> Any:
    if kind == "list":
        value: Any = []
        value.append(value)
        return value
    if kind == "dict":
        loop: dict[str, Any] = {}
        loop["me"] = loop
        return loop
    inner: list[Any] = []
    outer = {"a": [1, {"b": inner}]}
    inner.append(outer)  # the cycle is a few levels down
    return outer


def deep_values() -> st.SearchStrategy[Any]:
    """Values the engine must refuse with a ``ValueError`` naming the depth: nested from just
    past :data:`~engine.jsonvalues.MAX_DEPTH` to far past the interpreter's recursion limit,
    in lists, objects or both, or containing themselves."""
    nested = st.builds(nest, st.integers(MAX_DEPTH + 1, 5_000),
                       st.sampled_from(["list", "dict", "mixed", "wide"]))
    looped = st.sampled_from(["list", "dict", "deeper"]).map(_self_containing)
    return st.one_of(nested, looped)
