"""Compare this checkout with another one, in one run: dispatch and the agent loop.

``python -m benchmarks.compare OTHER [--rounds N]``, where ``OTHER`` is the root of another
checkout of toolledger (``git worktree add /tmp/before <commit>`` makes one). Each round times,
in a fresh process per figure and with the CPU-time clock, 3 000 nested calls and a session of
2 000 turns on a JSONL store (the README's, not durable), for the other checkout and then for
this one, so that both sides of a comparison
share the machine's mood; the table gives each side's median and the median of the per-round
ratios (this checkout / the other), with their range. This is how the optimisation steps in
docs/performance.md were compared: on a shared machine, a ratio measured this way moves far
less than two figures measured minutes apart.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent

# Run inside the checkout being measured (its own benchmarks package and engine), on the
# README's store: a JsonlStore, not durable. Benchmarks from before they took a store measured
# on the memory store; this hands them a JsonlStore in its place.
ON_JSONL = """
import inspect, os, tempfile
import benchmarks.dispatch as dispatch, benchmarks.loop as loop
from events import JsonlStore
if "store" not in inspect.signature(dispatch.engine_dispatch).parameters:
    directory = tempfile.TemporaryDirectory()
    count = iter(range(1 << 30))
    def jsonl(check_encodable=True):
        return JsonlStore(os.path.join(directory.name, f"{next(count)}.jsonl"))
    dispatch.MemoryStore = loop.MemoryStore = jsonl
"""

PROBE = ON_JSONL + """
import statistics, sys, time
what, reps = sys.argv[1], int(sys.argv[2])
dispatch.engine_dispatch(200)
loop.session_of(200)
clock = time.process_time
if what == "dispatch":
    values = [dispatch.engine_dispatch(3000, clock=clock) for _ in range(reps)]
else:
    values = [loop.session_of(2000, clock=clock)[0] for _ in range(reps)]
print(statistics.median(values))
"""

FIGURES = {"dispatch": "µs per nested call", "loop": "µs per agent-loop turn"}


def checkout(parser: argparse.ArgumentParser, path: Path) -> Path:
    """``path`` resolved, if it is the root of a toolledger checkout; else a usage error."""
    root = path.resolve()
    if not (root / "engine").is_dir() or not (root / "benchmarks").is_dir():
        parser.error(f"{root} is not the root of a toolledger checkout")
    return root


def measure(root: Path, what: str, reps: int) -> float:
    """The median of ``reps`` samples of ``what``, in a fresh process on ``root``'s code."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    out = subprocess.run([sys.executable, "-c", PROBE, what, str(reps)], cwd=root, env=env,
                         check=True, capture_output=True, text=True)
    return float(out.stdout)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.compare", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("other", type=Path, help="the root of the checkout to compare with")
    parser.add_argument("--rounds", type=int, default=5, help="rounds (5)")
    parser.add_argument("--reps", type=int, default=3, help="samples per figure and round (3)")
    args = parser.parse_args(argv)
    other = checkout(parser, args.other)
    if args.rounds < 1 or args.reps < 1:
        parser.error("--rounds and --reps must be at least 1")
    samples: dict[tuple[str, str], list[float]] = {}
    for _ in range(args.rounds):
        for what in FIGURES:
            for side, root in (("other", other), ("this", HERE)):
                samples.setdefault((what, side), []).append(measure(root, what, args.reps))
    print(f"{'figure':<30} {'other':>10} {'this':>10} {'this / other':>22}")
    for what, unit in FIGURES.items():
        before, after = samples[(what, "other")], samples[(what, "this")]
        ratios = [b / a for a, b in zip(before, after)]
        print(f"{unit:<30} {statistics.median(before):>10.1f} {statistics.median(after):>10.1f} "
              f"{statistics.median(ratios):>8.3f}× ({min(ratios):.3f}–{max(ratios):.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
