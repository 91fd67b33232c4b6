"""An approver of the host's, declared to answer at once or not: what a turn costs under each.

    PYTHONPATH=. python -m benchmarks.approvers [--quick] [--repeat N] [--clock cpu]
                                                 [--markdown] [--instructions]

Each figure is the agent loop's (:func:`benchmarks.loop.session_of`: a session of ``turns``
faux-model turns with one call each, on a ``JsonlStore``), with ``guarded_echo``, a tool the
policy asks the approver about, under:

- ``grants``, an approver of the host's that grants every call: the runtime cannot tell that
  it never answers ``LATER``, so every call runs in a task of the session's nursery (the
  baseline);
- ``at_once(grants)``, the same approver declared (``engine.at_once``): a batch of one call
  runs in the prompt's own task;
- ``approve_all``, which the runtime knows answers at once: what the declared approver should
  cost.

The three are measured in turn (harness.py). ``--instructions`` counts, under valgrind, the
user-space instructions of one turn under each (a session of 2 500 turns less one of 500, each
in a fresh process with the cyclic collector off), a figure the machine's load does not move.
"""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Callable
from functools import partial

from engine import ApprovalRequest, approve_all, at_once
from engine.core.approvals import Approver

from .harness import Figure, Row, Settings, interleave, paired
from .instructions import HERE, LARGE, SMALL
from .instructions import run as run_counted
from .loop import session_of
from .report import group_command, run_group
from .workload import guarded_echo

__all__ = ["APPROVERS", "grants", "main", "run"]


async def grants(request: ApprovalRequest) -> bool:
    """Grant every call: an approver of the host's, which may answer later for all the
    runtime knows."""
    return True


#: The approvers compared, by the name each row gives them; the first is the baseline.
APPROVERS: dict[str, Approver] = {
    "grants (may answer later)": grants,
    "at_once(grants)": at_once(grants),
    "approve_all": approve_all,
}

# one session of argv[2] turns under the approver named argv[1], in a fresh process
PROBE = """
import gc, sys
gc.disable()
from benchmarks import approvers
approvers.turns(approvers.APPROVERS[sys.argv[1]], int(sys.argv[2]))
"""


def turns(approver: Approver, count: int,
          clock: Callable[[], float] = time.perf_counter) -> float:
    """Microseconds per turn of a session of ``count`` turns that each call ``guarded_echo``
    under ``approver``."""
    return session_of(count, tool=guarded_echo, approver=approver, clock=clock)[0]


def run(settings: Settings) -> list[Row]:
    """One row per approver, each beside the undeclared one."""
    count = settings.size(2_000, 20)
    turns(grants, 200)  # warm up
    samples = interleave(settings.reps(5, 2), [partial(turns, approver, count, settings.clock)
                                               for approver in APPROVERS.values()])
    figures = [Figure(name=f"agent loop, {count:,} calls needing approval, {name}",
                      unit="µs/turn", samples=tuple(values))
               for name, values in zip(APPROVERS, samples)]
    baseline = figures[0]
    rows = [Row(group="approvers", figure=baseline)]
    for figure in figures[1:]:
        rows.append(Row(group="approvers", figure=figure, baseline=baseline,
                        comparison=f"{paired(figure, baseline, lambda a, b: a - b):+.1f} µs"))
    return rows


def instructions(small: int = SMALL, large: int = LARGE) -> dict[str, int]:
    """Instructions of one turn under each approver, counted by valgrind."""
    counted: dict[str, int] = {}
    for name in APPROVERS:
        low, high = (run_counted(HERE, PROBE, name, str(size))[0] for size in (small, large))
        counted[name] = (high - low) // (large - small)
    return counted


def main(argv: list[str] | None = None) -> int:
    parser = group_command("python -m benchmarks.approvers", __doc__, repeat=5)
    parser.add_argument("--instructions", action="store_true",
                        help="also count a turn's instructions under valgrind (minutes)")
    args = parser.parse_args(argv)
    if args.instructions and shutil.which("valgrind") is None:
        parser.error("valgrind is not on the PATH (Debian: apt-get install valgrind)")
    run_group(run, args, title=f"approvers, {args.clock} clock")
    if args.instructions:
        counted = instructions(*((20, 100) if args.quick else (SMALL, LARGE)))
        base = counted[next(iter(APPROVERS))]
        for name, count in counted.items():
            print(f"{name:<30} {count:>10,} instructions per turn ({count - base:+,})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
