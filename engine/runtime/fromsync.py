"""Trio code run to the end from sync code: a script, a notebook cell, a sync web handler.

:func:`run_from_sync` starts a trio run for one call and returns its result (or raises its
exception, as itself). Where depends on what the calling thread runs:

- **nothing** (a script): ``trio.run`` in this thread, so Ctrl-C is trio's own
  ``KeyboardInterrupt``, raised into the run, which closes what it had open on the way out;
- **an asyncio loop** (a notebook: Jupyter runs each cell inside its kernel's loop, and
  ``trio.run`` would take over the loop's signal wakeup): ``trio.run`` in a worker thread of
  its own while this thread waits, in a copy of this thread's context. A ``KeyboardInterrupt``
  that reaches the waiting thread (the notebook's interrupt button) cancels the run, waits
  for it to end, and is raised;
- **trio** (a trio task, or a trio guest run's tick): refused, saying to await the call
  instead; a run inside a run is not possible.

A run per call, not one kept alive in a thread: a trio run's tasks cannot outlive it, so a run
per call leaves nothing behind between calls (no thread, no open session, no claim on a log),
and a session's state is in its log, which the next call reads back.
"""

from __future__ import annotations

import asyncio
import contextvars
import signal
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import trio

__all__ = ["run_from_sync"]

T = TypeVar("T")


def run_from_sync(fn: Callable[[], Awaitable[T]], *, doing: str) -> T:
    """``await fn()`` in a trio run of its own, from sync code (see the module's docstring);
    ``doing`` names the call in the refusal from trio code (``"Session.run_sync()"``)."""
    try:
        trio.lowlevel.current_trio_token()
    except RuntimeError:
        pass  # not in trio: the way is free
    else:
        raise RuntimeError(
            f"{doing} runs trio to the end from sync code, and this is trio code: open the "
            f"session with `async with Session.open(...)` and `await session.prompt(...)` "
            f"instead")
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return trio.run(fn)
    return _in_a_thread(fn)


def _in_a_thread(fn: Callable[[], Awaitable[T]]) -> T:
    """``trio.run(fn)`` in a worker thread, in a copy of this thread's context, while this
    thread waits; an interrupt of the wait cancels the run and is raised once it has ended."""
    context = contextvars.copy_context()
    scope = trio.CancelScope()
    started, ended = threading.Event(), threading.Event()
    tokens: list[trio.lowlevel.TrioToken] = []
    outcome: list[Any] = []
    raised: list[BaseException] = []

    async def main() -> None:
        tokens.append(trio.lowlevel.current_trio_token())
        started.set()
        with scope:
            outcome.append(await fn())

    def run() -> None:
        try:
            _let_interrupts_through(None)
            context.run(trio.run, main)
        except BaseException as exc:  # the caller's to see, in the caller's thread
            raised.append(exc)
        finally:
            started.set()
            ended.set()

    worker = threading.Thread(target=run, name="toolledger-run", daemon=True)
    held = _hold_interrupts()
    try:
        try:
            worker.start()  # whole: an interrupt meanwhile is raised after it
        finally:
            _let_interrupts_through(held)
        ended.wait()
    except KeyboardInterrupt:
        if worker.is_alive() or started.is_set():  # the run is under way: end it first
            started.wait()
            if tokens:
                try:
                    tokens[0].run_sync_soon(scope.cancel)
                except trio.RunFinishedError:
                    pass  # it ended meanwhile
            ended.wait()  # a second interrupt stops waiting for the run's end
        raise
    worker.join()
    if raised:
        raise raised[0]
    result: T = outcome[0]  # only an interrupt cancels the run, and it was raised above
    return result


def _hold_interrupts() -> set[int | signal.Signals] | None:
    """Hold SIGINT back from this thread (it stays pending), so that a ``KeyboardInterrupt``
    cannot land inside ``Thread.start()``, between a thread started and the caller knowing
    it; the mask as it was, for :func:`_let_interrupts_through`. ``None`` where threads have
    no signal masks (Windows)."""
    if not hasattr(signal, "pthread_sigmask"):
        return None
    return signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})


def _let_interrupts_through(held: set[int | signal.Signals] | None) -> None:
    """Restore the mask :func:`_hold_interrupts` returned (a pending SIGINT arrives now); with
    ``None``, let SIGINT through in this thread (a new thread inherits its creator's mask,
    and so would the processes it starts)."""
    if not hasattr(signal, "pthread_sigmask"):
        return
    if held is None:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    else:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
