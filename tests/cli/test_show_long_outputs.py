"""`show` names the cut a model read and prints the whole (`--output CALL`); `verify` and
`copy` cover the artifacts a log's records name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio

from engine import Annotations, Limits, ModelView, Session, approve_all, tool
from engine.cli import main
from engine.models import FauxModel, faux_text, faux_tool_call
from events import JsonlStore

SAFE = Annotations(read_only=True, open_world=False)
WHOLE = "".join(f"{i:09d}\n" for i in range(30_000))


@tool(annotations=SAFE)
async def dump() -> str:
    """Print a lot."""
    return WHOLE


@tool(annotations=SAFE, model_view=ModelView(max_lines=4))
async def short() -> str:
    """Print a little, of which the model reads less."""
    return "one\ntwo\nthree\nfour\nfive\nsix\n"


def write_log(path: Path) -> None:
    async def session() -> None:
        model = FauxModel([[faux_tool_call("dump"), faux_tool_call("short")], faux_text("ok")])
        with JsonlStore(path) as store:
            async with Session.open(store, model=model, tools=[dump, short],
                                    approver=approve_all, session_id="s", create=True,
                                    limits=Limits(max_result_bytes=20_000)) as opened:
                await opened.prompt("go")

    trio.run(session)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def test_show_says_what_the_model_read_and_prints_the_whole(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    log = tmp_path / "log.jsonl"
    write_log(log)
    status, out, _ = run(capsys, "show", str(log))
    said = " ".join(out.split())  # as the terminal wrapped it
    assert status == 0
    assert said.count("the model read a cut of this result") == 2
    assert "as the artifact" in said and "kept in the log" in said
    assert "--output 1.0" in said and "--output 1.1" in said
    status, out, _ = run(capsys, "show", str(log), "--output", "1.0")
    assert status == 0 and out == WHOLE + "\n"
    status, out, _ = run(capsys, "show", str(log), "--output", "1.1", "--json")
    assert status == 0 and json.loads(out)["content"][0]["text"].startswith("one\ntwo\nthree")
    status, _, err = run(capsys, "show", str(log), "--output", "9.9")
    assert status != 0 and "is not a call" in err


def test_a_changed_artifact_fails_show_verify_and_copy(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    log = tmp_path / "log.jsonl"
    write_log(log)
    status, out, _ = run(capsys, "copy", str(log), f"sqlite:///{tmp_path / 'copy.db'}")
    assert status == 0
    status, out, _ = run(capsys, "show", f"sqlite:///{tmp_path / 'copy.db'}", "--output", "1.0")
    assert status == 0 and out == WHOLE + "\n"  # the copy carried the artifact
    [artifact] = (tmp_path / "log.jsonl.artifacts").rglob("*.json")
    artifact.write_bytes(artifact.read_bytes().replace(b"000000001", b"999999999"))
    status, out, err = run(capsys, "show", str(log), "--output", "1.0")
    assert status == 1 and "does not match its hash" in err
    status, out, _ = run(capsys, "verify", str(log))
    assert status == 1 and "artifact of call 1.0" in out
    status, _, err = run(capsys, "copy", str(log), f"sqlite:///{tmp_path / 'again.db'}")
    assert status == 1 and "artifact" in err
