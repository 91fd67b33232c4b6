"""asyncio hosts: a prompt through engine.hosts.aio's bridge beside the same prompt under trio.run.

    PYTHONPATH=. python -m benchmarks.hosts [--quick] [--repeat N] [--markdown]

Each row is measured beside its baseline, interleaved (harness.py):

- a prompt of ``turns`` faux-model turns with one ``echo`` call each (memory store), timed
  from the call to ``prompt`` to its return: awaited from asyncio through
  :class:`engine.hosts.aio.Session` (asyncio.run; the session opened before the clock starts),
  beside :class:`engine.Session` awaited in trio.run. The difference per turn is what the
  bridge costs a turn: the model's request crossing to asyncio's loop and back (trio, idle
  meanwhile, is woken through guest mode's I/O thread), and trio's scheduler running as guest
  ticks on asyncio's loop.
- a prompt of one turn: the bridge's fixed cost per prompt (the crossing in and the answer
  out), beside trio.
- opening and closing the first session on an idle loop, which starts and ends the loop's
  guest run, beside opening and closing a session in trio (docs/hosts.md: one guest run per
  loop).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from typing import Any

import trio

from engine import Session, approve_all
from engine.hosts.aio import Session as AioSession
from engine.models import FauxModel, faux_text, faux_tool_call
from events import MemoryStore

from .harness import Figure, Row, Settings, interleave, paired
from .report import group_command, run_group
from .workload import ARGS, echo

US = 1e6


def script(turns: int) -> FauxModel:
    return FauxModel([*(faux_tool_call("echo", ARGS) for _ in range(turns)), faux_text("done")])


def options(turns: int) -> dict[str, Any]:
    return dict(model=script(turns), tools=[echo], approver=approve_all, max_turns=turns + 1)


def trio_prompt(turns: int, clock: Callable[[], float]) -> float:
    """Microseconds per turn of a prompt under trio.run."""
    async def main() -> float:
        async with Session.open(MemoryStore(), **options(turns)) as session:
            start = clock()
            await session.prompt("go")
            return clock() - start

    return trio.run(main) / turns * US


def aio_prompt(turns: int, clock: Callable[[], float]) -> float:
    """Microseconds per turn of the same prompt awaited from asyncio through the bridge."""
    async def main() -> float:
        async with AioSession.open(MemoryStore(), **options(turns)) as session:
            start = clock()
            await session.prompt("go")
            return clock() - start

    return asyncio.run(main()) / turns * US


def trio_open(clock: Callable[[], float]) -> float:
    async def main() -> float:
        start = clock()
        async with Session.open(MemoryStore(), model=script(0)):
            pass
        return clock() - start

    return trio.run(main) * US


def aio_open(clock: Callable[[], float]) -> float:
    async def main() -> float:
        start = clock()
        async with AioSession.open(MemoryStore(), model=script(0)):
            pass
        return clock() - start

    return asyncio.run(main()) * US


def run(settings: Settings) -> list[Row]:
    """The rows: a long prompt, a one-turn prompt, and opening the first session."""
    clock = settings.clock
    turns = settings.size(200, 10)
    rows = []
    for count, unit in ((turns, "µs/turn"), (1, "µs/prompt")):
        bridged, native = interleave(settings.reps(), [lambda: aio_prompt(count, clock),
                                                       lambda: trio_prompt(count, clock)])
        label = f"a prompt of {count} turns" if count > 1 else "a prompt of 1 turn"
        figure = Figure(name=f"{label}, from asyncio through engine.hosts.aio", unit=unit,
                        samples=tuple(bridged))
        baseline = Figure(name=f"{label}, in trio.run", unit=unit, samples=tuple(native))
        extra = paired(figure, baseline, lambda a, b: a - b)
        rows.append(Row(group="hosts", figure=figure, baseline=baseline,
                        comparison=f"{extra:+.1f} µs"))
    opened, native_open = interleave(settings.reps(), [lambda: aio_open(clock),
                                                        lambda: trio_open(clock)])
    figure = Figure(name="open and close the first session on a loop (starts trio)",
                    unit="µs/session", samples=tuple(opened))
    baseline = Figure(name="open and close a session in trio.run", unit="µs/session",
                      samples=tuple(native_open))
    rows.append(Row(group="hosts", figure=figure, baseline=baseline,
                    comparison=f"{paired(figure, baseline, lambda a, b: a - b):+.0f} µs"))
    return rows


def main(argv: list[str] | None = None) -> int:
    args = group_command("python -m benchmarks.hosts", __doc__, repeat=7).parse_args(argv)
    run_group(run, args, title="asyncio hosts")
    return 0


if __name__ == "__main__":
    sys.exit(main())
