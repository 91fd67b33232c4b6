"""`show --json`, `transcript`, and tools' own renderers in `show`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.cli import main

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "v1"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def test_show_json_has_the_transcript_and_every_call(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "show", str(CORPUS / "reference.jsonl"), "--json")
    assert status == 0
    [session] = json.loads(out)
    assert session["session_id"] == "reference"
    assert [c["call_id"] for c in session["calls"]] == ["1.0", "1.0/0", "1.0/1"]
    assert [c["parent_id"] for c in session["calls"]] == [None, "1.0", "1.0"]
    assert [e["kind"] for e in session["transcript"]] == [
        "user", "assistant", "tool_result", "assistant"]
    assert session["calls"][0]["policy"]["decision"] == "allow"


def test_transcript_prints_only_what_the_model_saw(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "transcript", str(CORPUS / "reference.jsonl"))
    assert status == 0
    assert "review_diff" in out and "run_checks" not in out  # nested calls are not in it
    status, out, _ = run(capsys, "transcript", str(CORPUS / "mixed.jsonl"), "--json")
    [session] = json.loads(out)
    results = [e for e in session["transcript"] if e["kind"] == "tool_result"]
    assert [r["call_id"] for r in results] == [
        "1.0", "1.1", "1.2", "1.3", "1.4", "2.0", "2.1", "2.2", "3.0", "3.1"]


PLUGIN = """
from rich.text import Text
from engine.present.render import register_renderer

def squares(view):
    return Text(f"SQUARE VIEW {view.result.structured_content['square']}")

def broken(view):
    raise RuntimeError("no view today")

register_renderer("square", squares)
register_renderer("explode", broken)
"""


def test_a_tool_renderer_shows_in_show_and_a_failing_one_falls_back(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "squares_view.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    status, out, _ = run(capsys, "show", str(CORPUS / "mixed.jsonl"), "--plugin", "squares_view")
    assert status == 0
    assert "SQUARE VIEW 49" in out and "SQUARE VIEW 10000" in out
    assert "the renderer for explode failed (RuntimeError: no view today)" in out
    assert "explode failed: RuntimeError: boom" in out  # the default view is still there


def test_show_plugin_that_does_not_import_is_one_clear_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, out, err = run(capsys, "show", str(CORPUS / "mixed.jsonl"), "--plugin", "no.such.mod")
    assert status == 1
    assert err.startswith("toolledger: error: --plugin:") and err.count("\n") == 1


def test_demo_json_is_the_session_and_where_its_log_is(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    status, out, _ = run(capsys, "demo", "--approve", "none", "--workdir", str(tmp_path), "--json")
    assert status == 0
    session = json.loads(out)
    assert session["log"] == str(tmp_path / "session.jsonl") and session["approve"] == "none"
    statuses = {c["name"]: c["status"] for c in session["calls"] if c["parent_id"] is None}
    assert statuses["write_file"] == "denied" and statuses["read_file"] == "completed"
