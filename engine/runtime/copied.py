"""A tool body runs in a copy of its caller's context, on every path.

A body may run in a task of the session's nursery, in the task that called ``prompt()`` (a lone
call), in its parent's task (a nested call) or in the host's (``session.call_tool``). On each
path :func:`in_copy` runs it in a copy of the context variables it was called with
(:func:`contextvars.copy_context`): the body sees every value its caller set, and a value it
sets stays in its copy, so it never reaches the caller, a sibling, or the caller's next call.

The copy lives in this task, with no task started for it: each step of the body (each
``send`` or ``throw`` into its coroutine) runs inside :meth:`contextvars.Context.run`, and what
the body starts (a nursery's tasks, a thread) inherits its copy, as from any context.
"""

from __future__ import annotations

import contextvars
import types
from collections.abc import Awaitable, Callable, Generator
from typing import Any, TypeVar

__all__ = ["in_copy"]

T = TypeVar("T")


def in_copy(fn: Callable[..., Awaitable[T]], *args: Any) -> Awaitable[T]:
    """``await in_copy(fn, *args)`` is ``await fn(*args)`` run in a copy of the current
    context: what ``fn`` sets in a context variable is never seen outside it."""
    context = contextvars.copy_context()
    awaitable = context.run(fn, *args)
    return _driven(context, awaitable.__await__())


@types.coroutine
def _driven(context: contextvars.Context, steps: Generator[Any, Any, T]) -> Generator[Any, Any, T]:
    """Drive ``steps`` (an awaitable's iterator) to its end, each step inside ``context``;
    what it yields goes to the event loop, and what the loop sends or throws comes back in."""
    sent: Any = None
    thrown: BaseException | None = None
    while True:
        try:
            if thrown is None:
                yielded = context.run(steps.send, sent)
            else:
                error, thrown = thrown, None
                try:
                    yielded = context.run(steps.throw, error)
                finally:
                    del error  # no cycle through the traceback's frames
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        try:
            sent = yield yielded
        except GeneratorExit:
            context.run(steps.close)
            raise
        except BaseException as exc:  # a cancellation, say: the body's to handle
            sent, thrown = None, exc
