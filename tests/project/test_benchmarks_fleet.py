"""The fleet benchmark (python -m benchmarks.fleet) runs, and prints a row for each way it
measures (no timing is asserted). It starts worker processes and DBOS twice, near a minute on
a busy machine, so it is marked slow: ``pytest -m slow`` runs it (docs/contributing.md)."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("dbos")

from benchmarks import fleet  # noqa: E402


@pytest.mark.slow
def test_the_fleet_benchmark_runs_each_fleet_beside_one_process(
    postgres_server: Any, capsys: pytest.CaptureFixture[str],
) -> None:
    assert fleet.main(["--quick", "--postgres", postgres_server.url]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| ") and "ms" in line]
    assert [row.split(" | ")[0] for row in rows] == [
        "| one process, 4 threads, no DBOS", "| 1 worker process (DBOS)",
        "| 2 worker processes (DBOS)"]
    assert "store: " in rows[0] and "append" in rows[0] and "(+" in rows[1]
