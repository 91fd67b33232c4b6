"""The tasks a tool's body started, and a way to wait until all of them are blocked.

A body that runs again after a restart may ask for a nested call that differs from a recorded
one of the same tool (:mod:`engine.core.nested`): a sibling of the request may be about to ask
for the recorded call. Only the body's own tasks can be that sibling, so only they are waited
for — never the rest of the host's program, which may have a task that never blocks.

"The body's tasks" are the task the body runs in, while it runs, and every task spawned under a
nursery the body opened, at any depth (a nested call's body runs in its parent's tasks, so its
tasks count too). They are read from trio's task tree when needed (``Task.child_nurseries``,
``Nursery.child_tasks``): nothing is counted while the body runs and nothing is kept after.

"Blocked" is trio's meaning: not scheduled to run (waiting for I/O, time, an event, a lock, a
thread, another task). Which tasks are scheduled is learnt from a :class:`trio.abc.Instrument`
installed only while a request waits, so a body that never waits costs nothing."""

from __future__ import annotations

from collections.abc import Iterator

import trio

__all__ = ["BodyTasks"]


class _Scheduled(trio.abc.Instrument):
    """Which tasks are scheduled to run, from the moment it is installed: a task is scheduled
    from ``task_scheduled`` until its next step begins (or it exits)."""

    def __init__(self) -> None:
        self.tasks: set[trio.lowlevel.Task] = set()

    def task_scheduled(self, task: trio.lowlevel.Task) -> None:
        self.tasks.add(task)

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self.tasks.discard(task)

    def task_exited(self, task: trio.lowlevel.Task) -> None:
        self.tasks.discard(task)


class BodyTasks:
    """The tasks of one run of a body. Made in the task that runs the body, just before the
    body starts: nurseries that task had already opened are not the body's."""

    __slots__ = ("_before", "_root", "_waiting")

    def __init__(self) -> None:
        self._root = trio.lowlevel.current_task()
        # The nurseries the task had open are the first ones of its list for as long as the
        # body runs: the body runs inside them, and a task's nurseries close in the order
        # opposite to their opening. So the body's are those after the first ``_before``.
        self._before = len(self._root.child_nurseries)
        self._waiting: set[trio.lowlevel.Task] | None = None  # tasks in wait_blocked now

    def tasks(self) -> Iterator[trio.lowlevel.Task]:
        """The body's tasks now: its own task and every task under a nursery it opened."""
        yield self._root
        stack = self._root.child_nurseries[self._before:]
        while stack:
            nursery = stack.pop()
            for task in nursery.child_tasks:
                yield task
                stack.extend(task.child_nurseries)

    async def wait_blocked(self) -> None:
        """Return once every task of the body is blocked, but the caller's and those waiting
        here too (they wait for each other's siblings, not for each other).

        Checkpoints until then (cancellable, like any checkpoint). The first two passes of
        trio's scheduler let every task that was scheduled before the watch began take a step
        under it; after them, a task the watch does not hold as scheduled is blocked."""
        me = trio.lowlevel.current_task()
        scheduled = _Scheduled()
        trio.lowlevel.add_instrument(scheduled)
        if self._waiting is None:
            self._waiting = set()
        waiting = self._waiting
        waiting.add(me)
        try:
            await trio.lowlevel.checkpoint()
            await trio.lowlevel.checkpoint()
            while any(task in scheduled.tasks and task not in waiting for task in self.tasks()):
                await trio.lowlevel.checkpoint()
        finally:
            waiting.discard(me)
            trio.lowlevel.remove_instrument(scheduled)
