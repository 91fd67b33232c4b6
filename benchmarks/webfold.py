"""The web console's background fold of a long session: its own work, on the CPU clock.

``python -m benchmarks.webfold [--quick] [--json | --markdown]`` (``--clock`` is ignored:
always the CPU clock): the session of
``benchmarks.web`` (100 000 model calls, some 700 000 records) on a JSONL file and on SQLite,
folded as the console's background fold folds it — read a part of ``engine.web.folding.PART``
records at a time (the stores' ``read(limit=...)``), each part folded with Python's cyclic
collector held off — beside the same with the collector running, and beside the fold before
the background fold (the whole session read with one ``read``, then folded), each sample of
each in turn in one process. CPU seconds of the process (the machine is shared: wall time
says more about the neighbours than about the fold).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext

import trio

from engine.web import folding
from engine.web.state import Folded
from events import JsonlStore, SqliteStore
from events.stores.base import EventStore

from .__main__ import command
from .harness import Figure, Row, Settings, interleave, paired
from .web import _template, _write, session_records

__all__ = ["main", "run"]


def _fold(make: Callable[[], EventStore], how: str) -> float:
    """CPU seconds to fold the session ``how``: ``held`` (as the console does), ``running``
    (the collector left on) or ``whole`` (one read, then the fold)."""
    with make() as store:  # type: ignore[attr-defined]
        async def main() -> float:
            folded = Folded("big")
            start = time.process_time()
            if how == "whole":
                for record in await store.read("big"):
                    folded.apply(record)
                return time.process_time() - start
            while True:
                held: AbstractContextManager[None] = (
                    folding._collector_held() if how == "held" else nullcontext())
                with held:
                    records = await store.read("big", folded.last_seq,  # type: ignore[call-arg]
                                               folding.PART)
                    for record in records:
                        folded.apply(record)
                if not records:
                    return time.process_time() - start

        return trio.run(main)


def run(settings: Settings) -> list[Row]:
    """The table's rows: per store, the console's fold against the other two."""
    calls = settings.size(100_000, 2_000)
    records = session_records("big", calls, _template())
    rows = []
    with tempfile.TemporaryDirectory() as directory:
        stores: dict[str, Callable[[], EventStore]] = {
            "JSONL": lambda: JsonlStore(os.path.join(directory, "big.jsonl")),
            "SQLite": lambda: SqliteStore(os.path.join(directory, "big.db")),
        }
        for name, make in stores.items():
            with make() as store:  # type: ignore[attr-defined]
                _write(store, records)
            held, running, whole = interleave(settings.reps(3, 2), [
                lambda m=make: _fold(m, "held"), lambda m=make: _fold(m, "running"),
                lambda m=make: _fold(m, "whole")])
            figure = Figure(name=f"fold of {len(records):,} records, {name}: in parts, "
                                 "the collector held", unit="s", samples=tuple(held))
            for samples, what in ((running, "in parts, the collector running"),
                                  (whole, "one read, then the fold")):
                base = Figure(name=f"the same, {what}", unit="s", samples=tuple(samples))
                ratio = paired(figure, base, lambda a, b: a / b)
                rows.append(Row(group="web fold", figure=figure, baseline=base,
                                comparison=f"{ratio:.2f}×"))
    return rows


def main(argv: list[str] | None = None) -> int:
    return command("python -m benchmarks.webfold", __doc__, run, argv, clock="cpu")


if __name__ == "__main__":
    sys.exit(main())
