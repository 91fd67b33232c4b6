"""The docs say what the code does: the README's example runs, and the lifecycle diagram and
event catalogue in docs/events.md match the code."""

from __future__ import annotations

import json
import re
import runpy
from pathlib import Path

import pytest

from engine.lifecycle import diagram
from events.codec import EVENT_TYPES

ROOT = Path(__file__).resolve().parent.parent


def python_blocks(path: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", path.read_text(), re.S)


def test_readme_example_runs_and_writes_its_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "README.md").write_text("x" * 1234)
    script = tmp_path / "example.py"
    script.write_text(python_blocks(ROOT / "README.md")[0])
    monkeypatch.chdir(tmp_path)
    runpy.run_path(str(script), run_name="__main__")
    out = capsys.readouterr().out
    assert "tool_call: stat_file {'path': 'README.md'}" in out
    assert "completed {'size': 1234}" in out
    lines = (tmp_path / "session.jsonl").read_text().splitlines()
    types = [json.loads(line)["type"] for line in lines]
    assert types[0] == "session_started"
    assert "tool_call_completed" in types


def test_lifecycle_diagram_in_the_docs_is_the_table() -> None:
    text = (ROOT / "docs" / "events.md").read_text()
    block = re.search(r"```mermaid\n(.*?)\n```", text, re.S)
    assert block is not None
    assert block.group(1) == diagram()


def test_every_event_type_is_in_the_catalogue() -> None:
    text = (ROOT / "docs" / "events.md").read_text()
    missing = [name for name in EVENT_TYPES if f"| `{name}` |" not in text]
    assert missing == []
