"""The approvers benchmark (python -m benchmarks.approvers) runs, and says what it measured."""

from __future__ import annotations

import pytest

from benchmarks import approvers


def test_the_approvers_benchmark_runs_each_approver_beside_the_undeclared_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert approvers.main(["--quick", "--markdown"]) == 0
    out = capsys.readouterr().out
    for name in approvers.APPROVERS:
        assert f"agent loop, 20 calls needing approval, {name}" in out
    assert out.count("calls needing approval, grants (may answer later)") == 3  # 1 + 2 baselines
