"""toolledger's benchmarks: what a governed, fully recorded tool call costs.

Run them with ``python -m benchmarks`` from the repository's root (``--quick`` for a smoke run
with small sizes, ``--json`` for machine-readable output, ``--markdown`` for the table as
Markdown, ``--clock cpu`` to count CPU time instead of wall time, ``--only GROUP`` to run some
groups, ``--render RUN.json`` to print a saved run). Each figure is the median of several
repetitions with the minimum and maximum beside it, next to a baseline measured in the same
run. ``docs/performance.md`` explains what each figure includes, records the results, and
keeps the before/after of every optimisation.

One module per group: :mod:`~benchmarks.dispatch`, :mod:`~benchmarks.loop`,
:mod:`~benchmarks.fold`, :mod:`~benchmarks.stores` (and :mod:`~benchmarks.groupcommit`),
:mod:`~benchmarks.memory`,
:mod:`~benchmarks.concurrency`; what they run is in :mod:`~benchmarks.workload`, how they
measure in :mod:`~benchmarks.harness`.
"""

from __future__ import annotations

from collections.abc import Callable

from . import concurrency, dispatch, fold, groupcommit, loop, memory, stores
from .harness import Row, Settings

__all__ = ["GROUPS", "run"]

#: Every group of benchmarks, in the order the table shows them.
GROUPS: dict[str, Callable[[Settings], list[Row]]] = {
    "dispatch": dispatch.run,
    "agent loop": loop.run,
    "fold": fold.run,
    "stores": lambda settings: [*stores.run(settings), *groupcommit.run(settings)],
    "memory": memory.run,
    "concurrency": concurrency.run,
}


def run(settings: Settings, only: list[str] | None = None) -> list[Row]:
    """Run the chosen groups (all by default) and return the table's rows."""
    rows: list[Row] = []
    for name, group in GROUPS.items():
        if only and name not in only:
            continue
        rows.extend(group(settings))
    return rows
