"""The code-mode benchmark runs, and says what it compares."""

from __future__ import annotations

import pytest

from benchmarks.codemode import run
from benchmarks.harness import Settings

pytest.importorskip("pydantic_monty")


def test_the_quick_benchmark_compares_a_program_with_model_turns_and_direct_calls() -> None:
    rows = run(Settings(quick=True), latency=0.01)
    names = [row.figure.name for row in rows]
    assert names == ["5 calls as 5 model turns (0.01 s a turn)",
                     "5 calls from one program (2 turns)",
                     "tokens sent, 5 model turns", "tokens sent, one program",
                     "per direct nested call (20 in a body)",
                     "per call from a program (20 in a loop)"]
    assert [row.baseline.name if row.baseline else None for row in rows][1::2] == names[0::2]
    assert all(sample > 0 for row in rows for sample in row.figure.samples)
