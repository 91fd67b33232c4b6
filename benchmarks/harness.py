"""Measuring: repetitions, medians, and rows that carry their baseline.

Every figure is a list of samples, one per repetition; the table shows the median with the
minimum and maximum beside it. A row's baseline is measured in the same run, interleaved with
it (engine, baseline, engine, baseline, ...), so that a noisy neighbour on a shared machine
slows both alike instead of only one of them; and the comparison in the table (a difference
or a ratio) is the median of the per-repetition comparisons, each between two samples taken
one after the other.

The clock is wall time (``time.perf_counter``) unless ``--clock cpu`` asks for the process's
CPU time (``time.process_time``): on a machine shared with other work, CPU time does not count
the moments the process waited for a core. Waiting for the disk (``fsync``) is not CPU time,
so the durable store is always measured in wall time.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any, Literal

import attrs

__all__ = ["Figure", "Row", "Settings", "interleave", "paired", "row_from_json"]

Better = Literal["lower", "higher"]
Clock = Literal["wall", "cpu"]


@attrs.frozen(kw_only=True)
class Figure:
    """One quantity measured several times: its samples, its unit, which way is better."""

    name: str
    unit: str
    samples: tuple[float, ...]
    better: Better = "lower"

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def low(self) -> float:
        return min(self.samples)

    @property
    def high(self) -> float:
        return max(self.samples)

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "unit": self.unit,
            "median": self.median,
            "min": self.low,
            "max": self.high,
            "samples": list(self.samples),
            "better": self.better,
        }


@attrs.frozen(kw_only=True)
class Row:
    """A line of the table: a figure, its baseline (if any), how they compare, the target."""

    group: str
    figure: Figure
    baseline: Figure | None = None
    #: how the figure compares with its baseline, e.g. "+7.9 µs" or "0.41×"
    comparison: str = ""
    #: the issue's target for this row, in words, and whether the median meets it
    target: str = ""
    met: bool | None = None
    note: str = ""
    #: for a target not met: the floor under it, measured in the same run, in words (what the
    #: row's figure must include and alone misses the target), e.g. "+22.1 µs: a call's four
    #: records encoded, proven, sealed and written"; empty when no floor stops the target
    floor: str = ""

    def as_json(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "figure": self.figure.as_json(),
            "baseline": None if self.baseline is None else self.baseline.as_json(),
            "comparison": self.comparison,
            "target": self.target,
            "met": self.met,
            "note": self.note,
            "floor": self.floor,
        }


def _figure_from_json(data: dict[str, Any]) -> Figure:
    return Figure(name=data["name"], unit=data["unit"], samples=tuple(data["samples"]),
                  better=data.get("better", "lower"))


def row_from_json(data: dict[str, Any]) -> Row:
    """A row as :meth:`Row.as_json` wrote it."""
    baseline = data.get("baseline")
    return Row(
        group=data["group"],
        figure=_figure_from_json(data["figure"]),
        baseline=None if baseline is None else _figure_from_json(baseline),
        comparison=data.get("comparison", ""),
        target=data.get("target", ""),
        met=data.get("met"),
        note=data.get("note", ""),
        floor=data.get("floor", ""),
    )


@attrs.frozen(kw_only=True)
class Settings:
    """How big, how often, with which clock: ``quick`` shrinks every size for a smoke run."""

    quick: bool = False
    repeat: int = 7
    clock_name: Clock = "wall"

    @property
    def clock(self) -> Callable[[], float]:
        return time.process_time if self.clock_name == "cpu" else time.perf_counter

    def size(self, full: int, quick: int) -> int:
        return quick if self.quick else full

    def reps(self, full: int | None = None, quick: int = 2) -> int:
        if self.quick:
            return quick
        return self.repeat if full is None else full


def interleave(reps: int, measures: Sequence[Callable[[], float]]) -> list[list[float]]:
    """Run each measure once per repetition, in turn (A B C, A B C, ...); their samples.

    Each sample starts after a full collection, so that what the previous one left behind
    (and the collector's counters) does not land on its time."""
    samples: list[list[float]] = [[] for _ in measures]
    for _ in range(reps):
        for index, measure in enumerate(measures):
            gc.collect()
            samples[index].append(measure())
    return samples


def paired(figure: Figure, baseline: Figure, how: Callable[[float, float], float]) -> float:
    """The median of ``how(sample, baseline sample)`` over the repetitions."""
    return statistics.median(how(a, b) for a, b in zip(figure.samples, baseline.samples))


def fmt(value: float, unit: str) -> str:
    """A value in its unit, with as many digits as it deserves."""
    if unit.endswith("/s"):
        if value >= 1e6:
            return f"{value / 1e6:.2f} M"
        if value >= 1e3:
            return f"{value / 1e3:.1f} k"
        return f"{value:.0f}"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"
