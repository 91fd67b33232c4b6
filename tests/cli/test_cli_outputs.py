"""No command writes over its input: an output that names a log the command only reads (the
same file under another spelling, a symbolic or a hard link, another kind of URL, one of an
SQLite database's files) or the key file it reads is refused, with one line and exit 1, and
the input is left byte for byte as it was."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
import trio

from engine import Session
from engine.cli import main
from engine.models import FauxModel, faux_text
from events.stores import EventStore, JsonlStore, SqliteStore

KEY = b"k" * 32


def write_log(store: EventStore) -> None:
    """A real session (the commands refuse a log that does not fold) into ``store``."""

    async def write() -> None:
        with store:
            async with Session.open(store, session_id="alpha", create=True,
                                    model=FauxModel([faux_text("hello")])) as session:
                await session.prompt("hi")

    trio.run(write)


#: Each command that reads a log and writes an output, as argv for (log, output).
COMMANDS: dict[str, Callable[[str, str], list[str]]] = {
    "export-otel": lambda log, out: ["export-otel", log, "--json", out],
    "copy": lambda log, out: ["copy", log, out],
    "fork": lambda log, out: ["fork", log, "--at", "2", "--into", out],
}

#: Ways to name the file ``log`` (in directory ``tmp``) again.
SPELLINGS: dict[str, Callable[[Path, Path], str]] = {
    "the same path": lambda tmp, log: str(log),
    "another spelling": lambda tmp, log: str(tmp / "sub" / ".." / log.name),
    "a relative path": lambda tmp, log: os.path.relpath(log),
    "a symbolic link": lambda tmp, log: str(_linked(tmp / "link", log, os.symlink)),
    "a hard link": lambda tmp, log: str(_linked(tmp / "hard", log, os.link)),
}


def _linked(link: Path, target: Path, make: Callable[[Path, Path], None]) -> Path:
    make(target, link)
    return link


def refused(capsys: pytest.CaptureFixture[str], argv: list[str], *kept: Path) -> str:
    """Run ``argv``; it must fail with one line, and leave each of ``kept`` as it was."""
    before = {path: path.read_bytes() for path in kept}
    status = main(argv)
    out, err = capsys.readouterr()
    assert status == 1, (out, err)
    assert err.count("\n") == 1 and "only reads" in err and "nothing was written" in err, err
    assert {path: path.read_bytes() for path in kept} == before
    return err


@pytest.mark.parametrize("spelling", SPELLINGS)
@pytest.mark.parametrize("command", COMMANDS)
def test_an_output_that_is_the_input_log_is_refused(
    command: str, spelling: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    log = tmp_path / "runs.jsonl"
    write_log(JsonlStore(log))
    output = SPELLINGS[spelling](tmp_path, log)
    err = refused(capsys, COMMANDS[command](str(log), output), log)
    assert str(log) in err


@pytest.mark.parametrize("command", ["copy", "fork"])
def test_a_url_naming_the_input_file_is_refused(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "runs.jsonl"
    write_log(JsonlStore(log))
    for output in (f"jsonl://{log}", f"sqlite:///{log}"):
        refused(capsys, COMMANDS[command](str(log), output), log)


@pytest.mark.parametrize("companion", ["", "-wal", "-shm", "-journal"])
@pytest.mark.parametrize("command", COMMANDS)
def test_an_output_that_is_one_of_a_databases_files_is_refused(
    command: str, companion: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    database = tmp_path / "runs.db"
    write_log(SqliteStore(str(database)))
    present = [database] + [path for path in (Path(f"{database}{suffix}")
                                              for suffix in ("-wal", "-shm", "-journal"))
                            if path.exists()]
    output = f"{database}{companion}"
    err = refused(capsys, COMMANDS[command](f"sqlite:///{database}", output), *present)
    assert output in err
    assert not any(Path(f"{database}{suffix}").exists() for suffix in ("-wal", "-shm",
                                                                       "-journal")
                   if Path(f"{database}{suffix}") not in present)


@pytest.mark.parametrize("command", ["copy", "fork"])
def test_an_output_that_is_the_key_file_is_refused(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log, key_file = tmp_path / "runs.jsonl", tmp_path / "log.key"
    write_log(JsonlStore(log, key=KEY))
    key_file.write_bytes(KEY)
    err = refused(capsys, [*COMMANDS[command](str(log), str(key_file)),
                           "--key-file", str(key_file)], log, key_file)
    assert "key file" in err


def test_the_same_database_url_is_refused_before_connecting(
    capsys: pytest.CaptureFixture[str]
) -> None:
    url = "postgresql://nobody@127.0.0.1:1/runs"
    refused(capsys, ["copy", url, url])
    refused(capsys, ["fork", url, "--at", "2", "--into", url.replace("postgresql", "postgres")])


def test_another_output_is_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "runs.jsonl"
    write_log(JsonlStore(log))
    before = log.read_bytes()
    for command, output in (("export-otel", "spans.json"), ("copy", "copy.jsonl"),
                            ("fork", "fork.jsonl")):
        assert main(COMMANDS[command](str(log), str(tmp_path / output))) == 0
        assert (tmp_path / output).stat().st_size > 0
    assert log.read_bytes() == before
