"""Instructions per call, counted by valgrind: a figure the machine's load does not move.

``python -m benchmarks.instructions [CHECKOUT ...]`` (default: this one) runs, under
``valgrind --tool=callgrind``, a driver of 500 and of 2 500 nested calls, and an agent-loop
session of 500 and of 2 500 turns, on a JSONL store (the README's), each in a fresh process with CPython's cyclic collector off;
the difference between the two sizes, divided by 2 000, is the count of one nested call and of
one turn, without start-up and warm-up (``--sizes`` changes the two sizes). Counts are of user-space instructions only (not the
kernel's, nor the time a cache miss or a system call takes), so they rank changes to the
Python code steadily where wall and CPU time on a shared machine move by a third between runs;
docs/performance.md gives them for each optimisation. Needs ``valgrind`` on the ``PATH``.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from .compare import ON_JSONL, checkout

HERE = Path(__file__).resolve().parent.parent
SMALL, LARGE = 500, 2_500

# on a JsonlStore, as benchmarks.compare measures
PROBE = ON_JSONL + """
import gc, sys
gc.disable()
what, size = sys.argv[1], int(sys.argv[2])
dispatch.engine_dispatch(size) if what == "dispatch" else loop.session_of(size)
"""


def count(root: Path, what: str, size: int) -> int:
    """User-space instructions of one process that runs ``what`` at ``size`` on ``root``."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
         sys.executable, "-c", PROBE, what, str(size)],
        cwd=root, env=env, capture_output=True, text=True, check=True)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise RuntimeError(f"valgrind printed no count:\n{done.stderr[-2000:]}")
    return int(found.group(1))


def per_call(root: Path, what: str, small: int = SMALL, large: int = LARGE) -> int:
    """Instructions of one nested call (``"dispatch"``) or one turn (``"loop"``)."""
    return (count(root, what, large) - count(root, what, small)) // (large - small)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.instructions",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkouts", nargs="*", type=Path, default=[HERE],
                        help="roots of toolledger checkouts (default: this one)")
    parser.add_argument("--sizes", nargs=2, type=int, default=[SMALL, LARGE],
                        metavar=("SMALL", "LARGE"), help=f"the two sizes ({SMALL} {LARGE})")
    args = parser.parse_args(argv)
    small, large = args.sizes
    if not 0 < small < large:
        parser.error("--sizes needs 0 < SMALL < LARGE")
    roots = [checkout(parser, root) for root in args.checkouts]
    if shutil.which("valgrind") is None:
        parser.error("valgrind is not on the PATH (Debian: apt-get install valgrind)")
    print(f"{'checkout':<40} {'instructions per nested call':>30} {'per agent-loop turn':>22}")
    for root in roots:
        dispatch, loop = (per_call(root, what, small, large) for what in ("dispatch", "loop"))
        print(f"{str(root):<40} {dispatch:>30,} {loop:>22,}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
