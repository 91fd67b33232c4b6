"""Counting tool bodies, and the deterministic clock and ids a test session wants.

The invariants about gating ("a blocked, denied or unavailable call never runs its body")
need to know which bodies ran. :func:`counted` wraps any :class:`~engine.ToolSpec` so that each
run of its body is written down in a :class:`BodyRuns`, by the engine's call id, before the
body starts: a body that raises or hangs still counts. Nothing here needs Hypothesis.

Example::

    runs = BodyRuns()
    tools = [counted(spec, runs) for spec in my_tools]
    async with Session.open(store, model=model, tools=tools) as session:
        await session.prompt("go")
    assert runs["1.0"] == 1
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import attrs

from events.results import ToolResult

from ..core.toolcontext import ToolContext
from ..core.tools import ToolCall, ToolSpec

__all__ = ["BodyRuns", "counted", "counting_clock", "sequential_ids"]


class BodyRuns(Mapping[str, int]):
    """How many times each tool body ran, by the engine's call id (a read-only mapping:
    ``runs["1.0"]`` is 0 for a call whose body never ran).

    ``arguments`` keeps the arguments each body run received (the last run's), ``order`` the
    call ids in the order their bodies started.
    """

    def __init__(self) -> None:
        self._runs: Counter[str] = Counter()
        #: the arguments the last run of each call's body received
        self.arguments: dict[str, Any] = {}
        #: call ids in the order their bodies started (a re-run appears again)
        self.order: list[str] = []

    def record(self, call: ToolCall) -> None:
        """Write down one run of ``call``'s body (the wrapper of :func:`counted` does it)."""
        self._runs[call.call_id] += 1
        self.arguments[call.call_id] = call.arguments
        self.order.append(call.call_id)

    def __getitem__(self, call_id: str) -> int:
        return self._runs[call_id]

    def __contains__(self, call_id: object) -> bool:
        return call_id in self._runs

    def __iter__(self) -> Iterator[str]:
        return iter(self._runs)

    def __len__(self) -> int:
        return len(self._runs)

    def __repr__(self) -> str:
        return f"BodyRuns({dict(self._runs)!r})"


def counted(spec: ToolSpec, runs: BodyRuns) -> ToolSpec:
    """``spec`` with a body that records each run in ``runs``, then runs the original body.

    The declaration (name, schemas, annotations, exposure, …) is unchanged, so the log is the
    same as with ``spec`` itself. Example::

        runs = BodyRuns()
        spec = counted(stat_file, runs)
    """
    execute = spec.execute

    async def counting(call: ToolCall, ctx: ToolContext) -> ToolResult:
        runs.record(call)
        return await execute(call, ctx)

    counting.__name__ = getattr(execute, "__name__", spec.name)
    counting.__qualname__ = getattr(execute, "__qualname__", spec.name)
    return attrs.evolve(spec, execute=counting)


def counting_clock(start: float = 0.0, step: float = 1.0) -> Callable[[], float]:
    """A clock for ``Session.open(clock=...)`` that ticks ``step`` seconds per reading, so
    record times are the same on every run. Example: ``counting_clock()()`` is ``1.0``."""
    ticks = itertools.count(1)
    return lambda: start + step * next(ticks)


def sequential_ids(prefix: str = "session") -> Callable[[], str]:
    """Session ids for ``Session.open(new_session_id=...)``: ``"session-1"``, ``"session-2"``,
    … the same on every run."""
    numbers = itertools.count(1)
    return lambda: f"{prefix}-{next(numbers)}"
