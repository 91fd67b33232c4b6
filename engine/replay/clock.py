"""The clock a recorded re-drive runs on: virtual time that jumps ahead when nothing runs."""

from __future__ import annotations

import trio

__all__ = ["AUTOJUMP_AFTER", "virtual_clock"]

#: In recorded mode nothing waits for the world, so time is virtual: it jumps ahead whenever
#: every task has waited this long (seconds), and a recorded timeout replays at once.
AUTOJUMP_AFTER = 0.05


def virtual_clock() -> trio.abc.Clock:
    """A new clock for ``trio.run`` of a recorded re-drive (the command's and the console's).

    ``trio.testing`` is imported here, not at the top: it imports pytest when pytest is
    installed, some 70 ms that every ``toolledger`` command paid at start."""
    import trio.testing

    return trio.testing.MockClock(autojump_threshold=AUTOJUMP_AFTER)
