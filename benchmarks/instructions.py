"""Instructions per call, counted by valgrind: a figure the machine's load does not move.

``python -m benchmarks.instructions [CHECKOUT ...]`` (default: this one) runs, under
``valgrind --tool=callgrind``, a driver of 500 and of 2 500 nested calls, and an agent-loop
session of 500 and of 2 500 turns, on a JSONL store (the README's; ``--store memory`` or
``--store unchecked`` for ``MemoryStore()`` or the one that checks nothing), each in a fresh process with CPython's cyclic collector off;
the difference between the two sizes, divided by 2 000, is the count of one nested call and of
one turn, without start-up and warm-up (``--sizes`` changes the two sizes). Counts are of user-space instructions only (not the
kernel's, nor the time a cache miss or a system call takes), so they rank changes to the
Python code steadily where wall and CPU time on a shared machine move by a third between runs;
docs/performance.md gives them for each optimisation. ``--fold`` adds the instructions per line
of opening a JSONL log of 1 000 model calls, reading and folding it (two rounds less one, over
its lines). Needs ``valgrind`` on the ``PATH``.
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
kind = sys.argv[3] if len(sys.argv) > 3 else "jsonl"
if kind == "jsonl":
    dispatch.engine_dispatch(size) if what == "dispatch" else loop.session_of(size)
else:
    dispatch.engine_dispatch(size, store=kind) if what == "dispatch" else loop.session_of(
        size, store=kind)
"""


# opening a JSONL log of ``calls`` model calls (benchmarks.fold's), reading and folding it,
# ``reps`` times; prints the number of lines
FOLD_PROBE = """
import gc, os, sys, tempfile
gc.disable()
import trio
from benchmarks.fold import write_log
from engine import fold
from events import JsonlStore
calls, reps = int(sys.argv[1]), int(sys.argv[2])
with tempfile.TemporaryDirectory() as directory:
    path = os.path.join(directory, "log.jsonl")
    session_id = write_log(path, calls)
    for _ in range(reps):
        with JsonlStore(path) as store:
            records = trio.run(store.read, session_id)
        projection = fold(records)
        projection.transcript, projection.calls  # noqa: B018 (what a reader asks for)
print(projection.last_seq)
"""


def run(root: Path, probe: str, *args: str) -> tuple[int, str]:
    """User-space instructions of one process that runs ``probe`` with ``args`` on ``root``,
    and what it printed."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
         sys.executable, "-c", probe, *args],
        cwd=root, env=env, capture_output=True, text=True, check=True)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise RuntimeError(f"valgrind printed no count:\n{done.stderr[-2000:]}")
    return int(found.group(1)), done.stdout


def count(root: Path, what: str, size: int, store: str = "jsonl") -> int:
    """User-space instructions of one process that runs ``what`` at ``size`` on ``root``, on
    a store of kind ``store`` (:data:`benchmarks.workload.STORES`)."""
    return run(root, PROBE, what, str(size), store)[0]


def per_line(root: Path, calls: int = 1_000) -> int:
    """Instructions per line of opening a JSONL log, reading and folding it (the fold
    benchmark's first row): two rounds less one, over the log's lines."""
    once, lines = run(root, FOLD_PROBE, str(calls), "1")
    twice, _ = run(root, FOLD_PROBE, str(calls), "2")
    return (twice - once) // int(lines)


def per_call(root: Path, what: str, small: int = SMALL, large: int = LARGE,
             store: str = "jsonl") -> int:
    """Instructions of one nested call (``"dispatch"``) or one turn (``"loop"``)."""
    return (count(root, what, large, store) - count(root, what, small, store)) // (large - small)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.instructions",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkouts", nargs="*", type=Path, default=[HERE],
                        help="roots of toolledger checkouts (default: this one)")
    parser.add_argument("--sizes", nargs=2, type=int, default=[SMALL, LARGE],
                        metavar=("SMALL", "LARGE"), help=f"the two sizes ({SMALL} {LARGE})")
    parser.add_argument("--store", choices=("jsonl", "memory", "unchecked"), default="jsonl",
                        help="the store the calls and turns are recorded to: a JSONL file (the "
                             "README's, by default), MemoryStore() (memory), or "
                             "MemoryStore(check_encodable=False) (unchecked: the engine's own "
                             "work, nothing encoded)")
    parser.add_argument("--fold", action="store_true",
                        help="also count the instructions per line of opening, reading and "
                             "folding a JSONL log of 1 000 model calls")
    args = parser.parse_args(argv)
    small, large = args.sizes
    if not 0 < small < large:
        parser.error("--sizes needs 0 < SMALL < LARGE")
    roots = [checkout(parser, root) for root in args.checkouts]
    if shutil.which("valgrind") is None:
        parser.error("valgrind is not on the PATH (Debian: apt-get install valgrind)")
    fold = f" {'per line opened and folded':>28}" if args.fold else ""
    print(f"{'checkout':<40} {'instructions per nested call':>30} {'per agent-loop turn':>22}"
          + fold)
    for root in roots:
        dispatch, loop = (per_call(root, what, small, large, args.store)
                          for what in ("dispatch", "loop"))
        fold = f" {per_line(root):>28,}" if args.fold else ""
        print(f"{str(root):<40} {dispatch:>30,} {loop:>22,}" + fold)
    return 0


if __name__ == "__main__":
    sys.exit(main())
