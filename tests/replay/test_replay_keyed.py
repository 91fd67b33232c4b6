"""Replaying a keyed log: nothing runs live from records that were not verified.

A log is input. Live replay runs real tool bodies on the strength of what the log says (a
grant, above all), so it first has the log verified with its key, and refuses what does not
verify, naming the first bad record; without a key it runs nothing live unless told to
(``--unverified``, ``unverified=True``). Recorded replay runs no tool and works without a key,
saying that the log was not verified. The tool of these tests counts its runs in a file, so a
test sees that a refused replay never ran it.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import trio

from engine import LATER, ApprovalRequest, Session
from engine.cli import main
from engine.models import FauxModel, faux_text, faux_tool_call
from engine.replay import ReplayError, UnverifiedLogError, VerifiedRecords, read_verified, redrive
from events import JsonlStore, MemoryStore, Record
from events.stores import read_jsonl
from events.types import ApprovalResolved
from tests.stores.test_keyed_store import KEY, SID, T0, forge

#: A --setup module whose one tool, ``rm_rf``, is destructive (it always asks) and writes a
#: line to the file ``RUNS`` each time its body runs.
TOOLS = """
from pathlib import Path

from engine import Annotations, ToolResult, text, tool
from engine.replay import ReplaySetup

RUNS = Path({runs!r})


@tool(input_schema={{"type": "object", "properties": {{"path": {{"type": "string"}}}}}},
      annotations=Annotations(destructive=True))
async def rm_rf(call, ctx):
    \"\"\"Remove a tree.\"\"\"
    with RUNS.open("a") as file:
        file.write(call.call_id + "\\n")
    return ToolResult(content=[text("gone")])


def setup():
    return ReplaySetup(tools=[rm_rf])
"""


@pytest.fixture
def tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The setup module, importable as ``keyed_replay_tools`` (``--setup
    keyed_replay_tools:setup``)."""
    (tmp_path / "keyed_replay_tools.py").write_text(TOOLS.format(runs=str(tmp_path / "runs")))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "keyed_replay_tools", raising=False)
    return importlib.import_module("keyed_replay_tools")


def runs(tmp_path: Path) -> list[str]:
    """The calls whose ``rm_rf`` body ran, in order."""
    path = tmp_path / "runs"
    return path.read_text().split() if path.exists() else []


async def later(request: ApprovalRequest) -> Any:
    return LATER


async def write_log(log: Path, tools: ModuleType, grant: bool) -> int:
    """A keyed log: ``rm_rf`` waits for an approval; with ``grant`` the key holder grants it
    and the call runs. Returns the log's last seq."""
    with JsonlStore(log, key=KEY) as store:
        script = [faux_tool_call("rm_rf", {"path": "/"}), faux_text("done")]
        async with Session.open(store, model=FauxModel(script), tools=[tools.rm_rf],
                                approver=later, session_id=SID, create=True) as session:
            assert (await session.prompt("clean up")).stop == "paused"
            if grant:
                await session.resolve_approval("1.0", True)
                assert (await session.resume()).text == "done"
        return await store.last_seq(SID)


@pytest.fixture
def forged(tmp_path: Path, tools: ModuleType) -> tuple[Path, int]:
    """A keyed log of a paused ``rm_rf``, and a grant appended by someone without the key
    (sealed with plain SHA-256); the grant's line number."""
    log = tmp_path / "log.jsonl"
    last = trio.run(write_log, log, tools, False)
    granted = ApprovalResolved(call_id="1.0", granted=True, reason="forged", later=True)
    line = forge(log, Record(session_id=SID, seq=last + 1, time=T0, event=granted))
    assert runs(tmp_path) == []
    return log, line


@pytest.fixture
def honest(tmp_path: Path, tools: ModuleType) -> Path:
    log = tmp_path / "log.jsonl"
    trio.run(write_log, log, tools, True)
    assert runs(tmp_path) == ["1.0"]
    return log


@pytest.fixture
def key_file(tmp_path: Path) -> Path:
    path = tmp_path / "ledger.key"
    path.write_bytes(KEY)
    return path


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def error(err: str) -> str:
    [line] = err.strip().splitlines()
    assert line.startswith("toolledger: error: ")
    return line


LIVE = ("--tools", "live", "--setup", "keyed_replay_tools:setup")


# -- the command ----------------------------------------------------------------------------


def test_live_replay_with_the_key_refuses_a_forged_grant_and_runs_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, forged: tuple[Path, int], key_file: Path
) -> None:
    log, line = forged
    status, out, err = cli(capsys, "replay", str(log), *LIVE, "--key-file", str(key_file))
    assert (status, out) == (1, "")
    message = error(err)
    assert f"{log}:{line}" in message and f"seq {line}" in message
    assert "not verified" in message and "plain SHA-256" in message
    assert runs(tmp_path) == []  # the forged grant ran nothing


def test_live_replay_without_a_key_refuses_and_says_what_to_do(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, forged: tuple[Path, int]
) -> None:
    log, _ = forged
    status, out, err = cli(capsys, "replay", str(log), *LIVE)
    assert (status, out) == (1, "")
    message = error(err)
    assert "not verified" in message
    assert "--key-file" in message and "--key-env" in message and "--unverified" in message
    assert runs(tmp_path) == []


def test_live_replay_with_a_wrong_key_refuses_at_the_first_record(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, honest: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LEDGER_KEY", "not the key")
    status, _, err = cli(capsys, "replay", str(honest), *LIVE, "--key-env", "LEDGER_KEY")
    assert status == 1
    message = error(err)
    assert f"{honest}:1:" in message and "key is probably wrong" in message
    assert runs(tmp_path) == ["1.0"]  # only the original run


def test_live_replay_of_an_honest_keyed_log_with_its_key_runs_the_tools(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, honest: Path, key_file: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    status, out, err = cli(capsys, "replay", str(honest), *LIVE, "--key-file", str(key_file))
    assert (status, err) == (0, ""), out
    assert "no divergence" in out and "not verified" not in out
    assert runs(tmp_path) == ["1.0", "1.0"]  # the replay ran the body again
    monkeypatch.setenv("LEDGER_KEY", KEY.decode())
    status, out, _ = cli(capsys, "replay", str(honest), *LIVE, "--key-env", "LEDGER_KEY",
                         "--json")
    data = json.loads(out)
    assert status == 0 and data["verified"] is True
    assert [s["verified"] for s in data["sessions"]] == [True]
    assert runs(tmp_path) == ["1.0", "1.0", "1.0"]


def test_unverified_live_replay_runs_only_when_asked_and_says_so(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, honest: Path
) -> None:
    status, out, err = cli(capsys, "replay", str(honest), *LIVE, "--unverified")
    assert (status, err) == (0, ""), out
    assert "not verified" in out
    assert runs(tmp_path) == ["1.0", "1.0"]
    status, out, _ = cli(capsys, "replay", str(honest), *LIVE, "--unverified", "--json")
    assert status == 0 and json.loads(out)["verified"] is False


def test_unverified_is_not_given_with_a_key(
    capsys: pytest.CaptureFixture[str], honest: Path, key_file: Path
) -> None:
    status, _, err = cli(capsys, "replay", str(honest), *LIVE, "--unverified",
                         "--key-file", str(key_file))
    assert status == 2 and "not allowed with" in err


def test_recorded_replay_needs_no_key_but_says_the_log_was_not_verified(
    capsys: pytest.CaptureFixture[str], honest: Path, key_file: Path
) -> None:
    status, out, err = cli(capsys, "replay", str(honest))
    assert (status, err) == (0, "")
    assert "no divergence" in out and "not verified" in out
    status, out, _ = cli(capsys, "replay", str(honest), "--json")
    assert status == 0 and json.loads(out)["verified"] is False
    status, out, _ = cli(capsys, "replay", str(honest), "--key-file", str(key_file))
    assert status == 0 and "not verified" not in out


def test_recorded_replay_with_the_key_refuses_a_forged_log_too(
    capsys: pytest.CaptureFixture[str], forged: tuple[Path, int], key_file: Path
) -> None:
    log, line = forged
    status, _, err = cli(capsys, "replay", str(log), "--key-file", str(key_file))
    assert status == 1 and f"{log}:{line}" in error(err)


# -- the API --------------------------------------------------------------------------------


async def test_redrive_runs_no_live_tool_from_records_that_were_not_verified(
    tmp_path: Path, tools: ModuleType, forged: tuple[Path, int]
) -> None:
    log, _ = forged
    with pytest.raises(UnverifiedLogError) as info:
        await redrive(read_jsonl(log), tools=[tools.rm_rf], tool_mode="live")
    assert isinstance(info.value, ReplayError)
    assert "read_verified" in str(info.value) and "unverified=True" in str(info.value)
    assert runs(tmp_path) == []
    report = await redrive(read_jsonl(log))  # recorded: nothing runs, and it says so
    assert report.verified is False and runs(tmp_path) == []
    assert any("not verified" in note for note in report.notes)


async def test_read_verified_reads_only_through_a_keyed_store(
    tmp_path: Path, tools: ModuleType, honest: Path
) -> None:
    with JsonlStore(honest) as plain, pytest.raises(UnverifiedLogError, match="key"):
        await read_verified(plain, SID)
    with pytest.raises(UnverifiedLogError, match="key"):
        await read_verified(MemoryStore(), SID)
    with JsonlStore(honest, key=KEY) as store:
        records = await read_verified(store, SID)
    assert isinstance(records, VerifiedRecords) and records.session_id == SID
    report = await redrive(records, tools=[tools.rm_rf], tool_mode="live")
    assert report.ok and report.verified, report.divergences
    assert runs(tmp_path) == ["1.0", "1.0"]


async def test_redrive_runs_live_tools_from_unverified_records_only_when_told(
    tmp_path: Path, tools: ModuleType, honest: Path
) -> None:
    report = await redrive(read_jsonl(honest), tools=[tools.rm_rf], tool_mode="live",
                           unverified=True)
    assert report.ok and not report.verified
    assert any("not verified" in note for note in report.notes)
    assert runs(tmp_path) == ["1.0", "1.0"]
