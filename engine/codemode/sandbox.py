"""The Monty sandbox, held for one program: a worker checked out, and its steps run in a
thread so that the session's other tasks go on meanwhile.

Monty (``pydantic-monty``, the ``codemode`` extra) runs a program in a worker subprocess and
stops it at every call of a function the host provides, at every OS call (files, environment,
clock) and at every wait for awaited calls, with a snapshot the host answers. Its step API is
blocking, so each step runs through ``trio.to_thread`` (measured: 0.07-0.18 ms a round trip).
The sandbox gets no OS access at all: every OS call is answered "not handled", so a program
that opens a file, reads the environment or the clock gets an exception; random numbers start
from a fixed seed and ``sleep`` returns at once, so that a program run again does the same.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable
from types import ModuleType
from typing import Any, Final, TypeVar

import trio

from ..core.errors import CodeModeUnavailable
from .limits import CodeLimits

__all__ = ["Printed", "Sandbox", "monty"]

T = TypeVar("T")

#: No clock (asked of the host, which refuses), sleeps that return at once, a fixed seed.
_OS_POLICY: Final[dict[str, Any]] = {"datetime": "call_host", "sleep": "zero",
                                     "random_start": {"seed": 0}}
#: How long past its duration limit a worker gets to stop a program itself before it is killed.
_GRACE: Final = 2.0


def monty() -> ModuleType:
    """The ``pydantic_monty`` module, or :class:`~engine.core.errors.CodeModeUnavailable`."""
    try:
        return importlib.import_module("pydantic_monty")
    except ImportError as exc:
        raise CodeModeUnavailable(
            "code mode needs the Monty sandbox, which is not installed: "
            "pip install 'toolledger[codemode]' (it pins the releases code mode is tested "
            "with)") from exc


class Printed:
    """What a program printed, kept up to ``limit`` characters; the rest is counted."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._parts: list[str] = []
        self._kept = 0
        self.dropped = 0

    def __call__(self, stream: str, text: str) -> None:
        room = self._limit - self._kept
        if room > 0:
            self._parts.append(text[:room])
            self._kept += min(room, len(text))
        self.dropped += max(0, len(text) - max(room, 0))

    def restore(self, kept: str, dropped: int) -> None:
        """Go on from what a paused program had printed (``kept``, and ``dropped`` cut)."""
        self._parts = [kept[:self._limit]]
        self._kept = len(self._parts[0])
        self.dropped = dropped + len(kept) - self._kept

    @property
    def kept(self) -> str:
        """The kept output, without a word about the cut."""
        return "".join(self._parts)

    @property
    def text(self) -> str:
        """The kept output, with a line saying how much was cut."""
        kept = "".join(self._parts)
        return kept + (f"\n[... {self.dropped} more characters of output were cut]"
                       if self.dropped else "")


class Sandbox:
    """One worker, checked out for one program; use as ``async with Sandbox(limits)``."""

    def __init__(self, limits: CodeLimits) -> None:
        self.module = monty()
        self._limits = limits
        self._stack = contextlib.ExitStack()
        self.session: Any = None

    async def __aenter__(self) -> Sandbox:
        await self.step(self._open)
        return self

    async def __aexit__(self, *exc: object) -> None:
        with trio.CancelScope(shield=True):
            await self.step(self._stack.close)

    def _open(self) -> None:
        m = self.module
        pool = self._stack.enter_context(m.Monty(
            min_processes=1, max_processes=1,
            request_timeout=self._limits.duration + 2 * _GRACE,
            feed_duration_limit_grace=_GRACE))
        self.session = self._stack.enter_context(pool.checkout(
            script_name="program.py", limits=self._limits.sandbox(), os_policy=_OS_POLICY))

    async def step(self, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``function(*args, **kwargs)`` in a thread: one blocking step of the worker. A
        cancellation waits for the step (bounded by the program's limits)."""
        return await trio.to_thread.run_sync(lambda: function(*args, **kwargs))
