"""The asyncio-host benchmark (python -m benchmarks.hosts) runs, and says what it measured."""

from __future__ import annotations

import pytest

from benchmarks import hosts


def test_the_hosts_benchmark_runs_its_rows_beside_their_baselines(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert hosts.main(["--quick", "--markdown"]) == 0
    out = capsys.readouterr().out
    for row in ("a prompt of 10 turns, from asyncio through engine.hosts.aio",
                "a prompt of 1 turn, from asyncio through engine.hosts.aio",
                "open and close the first session on a loop"):
        assert row in out
    assert out.count("in trio.run") == 3
