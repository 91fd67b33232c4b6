"""A lock on a log held by someone else, let go when a test's other task says so: the holder
the lock tests of the stores and of the faults share."""

from __future__ import annotations

import fcntl
import os
import threading
from pathlib import Path

import trio
import trio.testing

__all__ = ["PATIENCE", "HeldElsewhere", "other_task"]

#: how long a holder waits for the loop before it gives up (only a frozen loop makes it wait)
PATIENCE = 10.0


class HeldElsewhere:
    """An exclusive lock on the log, held through a descriptor of its own until
    :meth:`let_go` (or :data:`PATIENCE` seconds, if the loop never gets to say so)."""

    def __init__(self, path: Path) -> None:
        self.fd = os.open(path, os.O_RDONLY)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        self._go = threading.Event()
        self._thread = threading.Thread(target=self._hold)
        self._thread.start()

    def _hold(self) -> None:
        self._go.wait(PATIENCE)
        fcntl.flock(self.fd, fcntl.LOCK_UN)

    def let_go(self) -> None:
        self._go.set()

    def join(self) -> None:
        self._go.set()
        self._thread.join()
        os.close(self.fd)


async def other_task(order: list[str], held: HeldElsewhere) -> None:
    await trio.testing.wait_all_tasks_blocked()  # everyone else waits: for the lock, say
    order.append("another task ran")
    held.let_go()
