"""Generators of hostile inputs the fault suite feeds the engine: JSON values too deep for any
recursive walk (or that contain themselves), and regular expressions that backtrack for ever.

Each strategy draws the class of input, not one example of it, so that the next member of the
class is found by a property rather than by a person.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from hypothesis import strategies as st

from engine.core.jsonvalues import MAX_DEPTH

__all__ = ["Frozen", "deep_values", "hostile_patterns", "nest", "watchdog"]


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
    past :data:`~engine.core.jsonvalues.MAX_DEPTH` to far past the interpreter's recursion limit,
    in lists, objects or both, or containing themselves."""
    nested = st.builds(nest, st.integers(MAX_DEPTH + 1, 5_000),
                       st.sampled_from(["list", "dict", "mixed", "wide"]))
    looped = st.sampled_from(["list", "dict", "deeper"]).map(_self_containing)
    return st.one_of(nested, looped)


# -- regular expressions that backtrack for ever -------------------------------------------------

#: (pattern, the unit an attack repeats, the tail that makes it fail, how many repeats), each
#: with a backtracking cost that grows exponentially (nested quantifiers, alternatives that
#: overlap under a quantifier) or polynomially (overlapping neighbours, and the unanchored
#: searches that are quadratic or worse in any backtracking engine) with the repeats. With
#: Python's ``re`` each takes longer than anyone waits: hours to ages of the universe.
_EXPONENTIAL = (60, 200)
_BACKTRACKING = [
    (r"^(a+)+$", "a", "!", _EXPONENTIAL), (r"^(a*)*$", "a", "!", _EXPONENTIAL),
    (r"^(a|a)*$", "a", "!", _EXPONENTIAL), (r"^(a|aa)+$", "a", "!", _EXPONENTIAL),
    (r"^(\w+\s?)*$", "ab ", "!", _EXPONENTIAL), (r"^([a-z0-9]+)*@", "a1", "!", _EXPONENTIAL),
    (r"^(\d+)*[a-z]$", "1", "!", _EXPONENTIAL), (r"(x+x+)+y", "x", "", _EXPONENTIAL),
    (r"^(a+)+b?$", "a", "!", _EXPONENTIAL),
    (r"^(.*a){12}$", "a", "!", (2_000, 4_000)), (r".*x.*y", "x", "", (20_000, 40_000)),
    (r"a+b", "a", "", (600_000, 900_000)),
]


@st.composite
def hostile_patterns(draw: st.DrawFn) -> tuple[str, str]:
    """A pattern and a string that make a backtracking engine run for longer than anyone
    waits, yet are plain JSON Schema: a linear-time engine answers at once."""
    pattern, unit, tail, (low, high) = draw(st.sampled_from(_BACKTRACKING))
    return pattern, unit * draw(st.integers(low, high)) + tail


class Frozen(BaseException):
    """Raised in the main thread by :func:`watchdog` when its time is up (a BaseException, so
    that no `except Exception` that fails closed can take it for an answer)."""


@contextmanager
def watchdog(seconds: float) -> Iterator[None]:
    """Fail, rather than hang, if the block has not finished after ``seconds`` (a guard against
    a loop frozen by a check that never ends, not a measure of speed). Python's ``re`` looks for
    signals while it backtracks, so the alarm does interrupt it."""
    def alarm(signum: int, frame: Any) -> None:
        raise Frozen(f"still running after {seconds} s: the check froze the loop")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
