"""What a new user meets first at the command line: help with no command, ``--version``, counts
in words, a denial said once, a hint that works as printed, and help that says what a log is."""

from __future__ import annotations

import importlib.metadata
import os
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from engine import Annotations, Session, ToolResult, deny_all, text, tool
from engine.cli import main
from engine.cli._common import PROG, command_name
from engine.models import FauxModel, faux_text, faux_tool_call
from engine.present.render import counted
from events import JsonlStore


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def test_no_command_prints_the_help_and_succeeds(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run(capsys)
    assert status == 0 and not err
    assert out.startswith(f"usage: {PROG}")
    for command in ("demo", "show", "verify", "replay", "export-otel"):
        assert f"    {command}" in out


def test_version_names_the_installed_distribution(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "--version")
    assert status == 0
    assert out.strip() == f"{PROG} {importlib.metadata.version(PROG)}"


@pytest.mark.parametrize("count,word", [(0, "0 turns"), (1, "1 turn"), (2, "2 turns")])
def test_counts_are_words(count: int, word: str) -> None:
    assert counted(count, "turn") == word


def _log_of_one_refused_call(path: Path, *, calls: bool = True) -> None:
    @tool(annotations=Annotations(destructive=True))
    async def wipe(call: Any, ctx: Any) -> ToolResult:
        """Wipes."""
        return ToolResult(content=[text("wiped")])

    async def session() -> None:
        steps = [faux_tool_call("wipe", {})] if calls else []
        model = FauxModel([*steps, faux_text("done")])
        store = JsonlStore(path)
        try:
            async with Session.open(store, model=model, tools=[wipe], approver=deny_all,
                                    session_id="one", create=True) as opened:
                await opened.prompt("go")
        finally:
            store.close()

    trio.run(session)


def test_show_counts_one_turn_and_says_a_refusal_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "one.jsonl"
    _log_of_one_refused_call(log)
    status, out, _ = run(capsys, "show", str(log))
    assert status == 0
    assert "2 turns" in out and "1 turns" not in out
    [approval] = [line for line in out.splitlines() if line.strip().startswith("approval")]
    assert approval.rstrip().endswith("asked → denied once, by the approver")
    assert "the approver refused" not in out


def test_show_says_one_turn_in_the_singular(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "one.jsonl"
    _log_of_one_refused_call(log, calls=False)
    status, out, _ = run(capsys, "show", str(log))
    assert status == 0
    assert "  ·  1 turn" in out and "1 turns" not in out


def test_export_otel_takes_any_store(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "export-otel", "--help")
    assert status == 0
    assert "store URL" in " ".join(out.split()) and "JSONL log file" not in out


def test_the_hint_names_the_command_as_it_can_be_typed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = Path(sys.executable).parent / PROG
    if not script.exists():
        pytest.skip(f"no {PROG} script beside this interpreter")
    monkeypatch.setenv("PATH", str(tmp_path))  # not on PATH: the script itself
    monkeypatch.chdir(script.parents[2])
    assert command_name() == str(script.relative_to(script.parents[2]))
    monkeypatch.chdir(tmp_path)  # elsewhere: its whole path
    assert command_name() == str(script)
    monkeypatch.setenv("PATH", f"{script.parent}{os.pathsep}{tmp_path}")
    assert command_name() == PROG  # on PATH: its name
