"""The ``toolledger replay`` command: re-drive a logged session from the command line."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import trio
from rich.console import Console

from engine import approve_all
from engine.cli import build_parser, main
from engine.cli import replay as replay_cli
from engine.demo import run_demo
from tests.replay.replaying import CORPUS, CORPUS_LOGS


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def one_line_error(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("toolledger: error: ") and "Traceback" not in err
    return lines[0]


def write_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, source: str) -> None:
    (tmp_path / f"{name}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))


@pytest.mark.parametrize("name", CORPUS_LOGS)
def test_replay_command_exits_0_when_nothing_diverged(
    capsys: pytest.CaptureFixture[str], name: str
) -> None:
    status, out, err = cli(capsys, "replay", str(CORPUS / f"{name}.jsonl"))
    assert (status, err) == (0, "")
    assert "no divergence" in out


def test_replay_command_with_a_setup_that_denies_exits_1_and_prints_the_report(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_module(tmp_path, monkeypatch, "deny_deletes", (
        "from engine import PolicyRules\n"
        "from engine.replay import ReplaySetup\n"
        "setup = ReplaySetup(rules=PolicyRules(deny=['delete_file']))\n"))
    log = str(CORPUS / "mixed.jsonl")
    status, out, err = cli(capsys, "replay", log, "--setup", "deny_deletes:setup")
    assert (status, err) == (1, "")
    assert "call 2.0 (delete_file), event 1 policy_decided" in out
    status, out, _ = cli(capsys, "replay", log, "--setup", "deny_deletes:setup", "--json")
    data = json.loads(out)
    assert status == 1 and data["ok"] is False and data["tools"] == "recorded"
    [session] = data["sessions"]
    assert session["session_id"] == "mixed"
    assert {(d["subject"], d["field"]) for d in session["divergences"] if d["scope"] == "call"} \
        == {("2.0", "decision"), ("2.2", "decision"), ("3.0", "reason")}
    status, out, _ = cli(capsys, "replay", log, "--json")
    assert status == 0 and json.loads(out)["ok"] is True


def test_replay_command_runs_live_tools_from_a_setup_function(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_module(tmp_path, monkeypatch, "demo_live_setup", (
        "import tempfile\n"
        "from engine.demo import demo_tools, prepare_workspace\n"
        "from engine.replay import ReplaySetup\n"
        "def setup():\n"
        f"    workspace = prepare_workspace({str(tmp_path / 'ws')!r})\n"
        "    return ReplaySetup(tools=demo_tools(workspace))\n"))
    # a fresh demo's log: its tools stream their output, which an older demo's log lacks
    run = trio.run(run_demo, tmp_path / "recorded", approve_all)
    status, out, err = cli(capsys, "replay", str(run.log_path),
                           "--tools", "live", "--setup", "demo_live_setup:setup", "--unverified")
    assert (status, err) == (0, ""), out
    assert "live tools" in out and "no divergence" in out
    assert (tmp_path / "ws" / "calc.py").read_text().count("len(values)\n") == 1


def test_replay_command_replays_every_session_of_a_log_or_the_one_named(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    log = tmp_path / "two.jsonl"
    log.write_text((CORPUS / "reference.jsonl").read_text() + (CORPUS / "mixed.jsonl").read_text())
    status, out, _ = cli(capsys, "replay", str(log), "--json")
    assert status == 0
    assert [s["session_id"] for s in json.loads(out)["sessions"]] == ["reference", "mixed"]
    status, out, _ = cli(capsys, "replay", str(log), "--session", "mix", "--json")
    assert [s["session_id"] for s in json.loads(out)["sessions"]] == ["mixed"]


@pytest.mark.parametrize(("setup", "says"), [
    ("no_colon_here", "expected MODULE:NAME"),
    ("no_such_module_for_replay:setup", "no module named 'no_such_module_for_replay'"),
    ("bad_setups:missing", "has no 'missing'"),
    ("bad_setups:number", "is a int, not a ReplaySetup"),
    ("bad_setups:raises", "calling raises() failed: RuntimeError: no workspace"),
    ("broken_setup_module:setup", "importing broken_setup_module failed: SyntaxError"),
])
def test_a_bad_setup_is_one_clear_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    setup: str, says: str,
) -> None:
    write_module(tmp_path, monkeypatch, "bad_setups", (
        "number = 3\n"
        "def raises():\n"
        "    raise RuntimeError('no workspace')\n"))
    write_module(tmp_path, monkeypatch, "broken_setup_module", "def (:\n")
    status, out, err = cli(capsys, "replay", str(CORPUS / "reference.jsonl"), "--setup", setup)
    assert status == 1 and out == ""
    line = one_line_error(err)
    assert "--setup" in line and says in line


def test_replay_command_user_errors_are_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    status, _, err = cli(capsys, "replay", str(tmp_path / "missing.jsonl"))
    assert status == 1 and "missing.jsonl" in one_line_error(err)
    status, _, err = cli(capsys, "replay", str(CORPUS / "reference.jsonl"), "--tools", "live",
                         "--unverified")
    assert status == 1 and "--setup" in one_line_error(err)
    status, _, err = cli(capsys, "replay", str(CORPUS / "reference.jsonl"), "--session", "zzz")
    assert status == 1 and "zzz" in one_line_error(err)


def test_replay_command_help_reads_well(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = cli(capsys, "replay", "--help")
    assert status == 0
    for option in ("--session", "--tools", "--setup", "--json", "Exit status"):
        assert option in out


@pytest.mark.parametrize("terminal", [True, False])
def test_a_long_replay_shows_a_progress_bar_only_on_a_terminal(
    monkeypatch: pytest.MonkeyPatch, terminal: bool
) -> None:
    monkeypatch.setattr(replay_cli, "LONG_REPLAY_RECORDS", 10)
    args = build_parser().parse_args(["replay", str(CORPUS / "mixed.jsonl")])
    out = io.StringIO()
    console = Console(file=out, force_terminal=terminal, width=60)
    assert args.run(args, console) == 0
    assert ("replaying" in out.getvalue()) is terminal
    assert "no divergence" in out.getvalue()
