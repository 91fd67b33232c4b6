"""The demo's code-mode scene: one program reads, tests, writes the fix (asking for
approval) and reviews it, each call a nested call of run_code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.cli import main
from engine.core.reducers import fold
from engine.demo import FIXED_CALC, LOG_NAME
from engine.testing.invariants import check_log
from events.stores import read_jsonl

pytest.importorskip("pydantic_monty")


@pytest.mark.parametrize(("approve", "fixed"), [("all", True), ("none", False)])
def test_the_code_scene_writes_the_fix_only_when_approved(
        approve: str, fixed: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["demo", "--code", "--approve", approve, "--workdir", str(tmp_path), "--json"])
    out = capsys.readouterr().out
    assert status == 0
    assert json.loads(out)["log"] == str(tmp_path / LOG_NAME)
    records = read_jsonl(tmp_path / LOG_NAME)
    check_log(records, closed=True)
    state = fold(records)
    calls = {view.call_id: view for view in state.calls.values()}
    assert [calls[c].name for c in state.children("1.0")] == [
        "read_file", "failing_tests", "write_file", "review_diff"]
    assert calls["1.0/2"].status == ("completed" if fixed else "denied")
    assert calls["1.0/2"].policy is not None and calls["1.0/2"].policy.decision == "ask"
    assert ((tmp_path / "calc.py").read_text() == FIXED_CALC) is fixed
    assert calls["1.0"].result is not None
    assert calls["1.0"].result.structured_content["result"] is fixed
    printed = calls["1.0"].result.structured_content["printed"]
    assert ("wrote 178 bytes" in printed) is fixed
    assert ("not written: write_file was not approved" in printed) is not fixed


def test_the_code_scene_runs_the_scripted_model_only(capsys: pytest.CaptureFixture[str],
                                                     tmp_path: Path) -> None:
    status = main(["demo", "--code", "--model", "openai:x", "--workdir", str(tmp_path)])
    assert status != 0
    assert "--code runs the scripted program" in capsys.readouterr().err
