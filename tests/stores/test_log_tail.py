"""The end of a log file: only a torn write is cut; a whole record that lacks only its newline
is kept; a file that is not a log is never cut; and `fork` only reads the log it copies."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import trio

from engine.cli import main
from events import JsonlStore
from events.codec import encode_line
from events.errors import CorruptLogError
from events.stores import read_jsonl
from events.stores.jsonl import verify_jsonl
from events.types import Record, SessionStarted, UserMessage

KEY = b"the host's HMAC key, kept away from the log"
T0 = 1_767_225_600.0


def records(session: str, count: int) -> list[Record]:
    first = Record(session_id=session, seq=1, time=T0, event=SessionStarted(metadata={}))
    return [first] + [
        Record(session_id=session, seq=n, time=T0 + n, event=UserMessage(text=f"#{n}"))
        for n in range(2, count + 1)
    ]


def write_log(path: Path, session: str = "s", count: int = 3, key: bytes | None = None) -> bytes:
    async def run() -> None:
        with JsonlStore(path, key=key) as store:
            await store.append(session, records(session, count), 0)

    trio.run(run)
    return path.read_bytes()


def read_all(path: Path, session: str = "s", **kwargs: Any) -> list[Record]:
    async def run() -> list[Record]:
        with JsonlStore(path, **kwargs) as store:
            return await store.read(session)

    return trio.run(run)


@pytest.mark.parametrize("key", [None, KEY], ids=["plain", "keyed"])
def test_a_whole_last_record_without_its_newline_is_kept_and_the_newline_restored(
    tmp_path: Path, key: bytes | None
) -> None:
    log = tmp_path / "log.jsonl"
    whole = write_log(log, key=key)
    log.write_bytes(whole[:-1])  # the record is all there; only its newline is missing
    assert read_jsonl(log) == records("s", 3)  # read-only: read, not changed
    assert verify_jsonl(log, key).ok
    assert log.read_bytes() == whole[:-1]
    with JsonlStore(log, key=key) as store:
        assert store.dropped_tail == b""
        assert log.read_bytes() == whole  # kept, and its newline back
        assert trio.run(store.read, "s") == records("s", 3)
    assert verify_jsonl(log, key).ok and verify_jsonl(log, key).records == 3


def test_a_torn_last_line_is_still_cut(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    whole = write_log(log)
    torn = encode_line(Record(session_id="s", seq=4, time=T0, event=UserMessage(text="x")))
    log.write_bytes(whole + torn.encode()[:-3])
    with JsonlStore(log) as store:
        assert store.dropped_tail == torn.encode()[:-3]
    assert log.read_bytes() == whole


def test_a_whole_last_record_that_is_invalid_is_corruption_not_torn(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    whole = write_log(log)
    bad = b'{"v":2,"session_id":"s","seq":4,"type":"bogus"}'
    log.write_bytes(whole + bad)
    with pytest.raises(CorruptLogError) as info:
        JsonlStore(log)
    assert info.value.line == 4 and "unknown event type" in info.value.problem
    assert log.read_bytes() == whole + bad


@pytest.mark.parametrize("content", [b"my notes", b"\x89PNG\r\n\x1a\n\x00", b"notes\nmore"])
def test_a_file_that_is_not_a_log_is_refused_and_never_cut(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "notes.txt"
    path.write_bytes(content)
    with pytest.raises(CorruptLogError) as info:
        JsonlStore(path)
    assert info.value.line == 1
    assert path.read_bytes() == content


def test_a_read_only_store_never_changes_the_file(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    whole = write_log(log)
    torn = b'{"v":2,"session_id":"s","se'
    for tail in (whole[:-1], whole + torn):
        log.write_bytes(tail)
        with JsonlStore(log, read_only=True, key=None) as store:
            assert trio.run(store.read, "s") == records("s", 3)
            with pytest.raises(ValueError, match="read-only"):
                store.append_nowait("s", records("t", 1), 0)
        assert log.read_bytes() == tail
    with pytest.raises(FileNotFoundError):
        JsonlStore(tmp_path / "missing.jsonl", read_only=True)


def test_a_read_only_store_follows_a_writer_that_restores_the_newline(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    whole = write_log(log)
    log.write_bytes(whole[:-1])
    trio.run(follow, log)


async def follow(log: Path) -> None:
    with JsonlStore(log, read_only=True) as reader:
        assert await reader.read("s") == records("s", 3)
        with JsonlStore(log) as writer:  # restores the newline, then appends
            more = Record(session_id="s", seq=4, time=T0 + 4, event=UserMessage(text="#4"))
            await writer.append("s", [more], 3)
        assert await reader.read("s") == [*records("s", 3), more]
        assert await reader.read("s", after=2) == [records("s", 3)[2], more]


def spy_on_opens(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[int]]:
    """The flags each path was opened with by ``os.open``."""
    opened: dict[str, list[int]] = {}
    real = os.open

    def spy(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        opened.setdefault(os.fspath(path), []).append(flags)
        return real(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", spy)
    return opened


def test_fork_into_another_log_only_reads_the_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    src, dst = tmp_path / "src.jsonl", tmp_path / "dst.jsonl"
    whole = write_log(src)
    src.write_bytes(whole[:-1])  # its last record lacks its newline
    src.chmod(0o444)
    opened = spy_on_opens(monkeypatch)
    assert main(["fork", str(src), "--at", "3", "--into", str(dst), "--id", "f"]) == 0, (
        capsys.readouterr().err
    )
    assert src.read_bytes() == whole[:-1]  # not a byte changed
    assert all(flags & (os.O_WRONLY | os.O_RDWR) == 0 for flags in opened[str(src)])
    assert [r.seq for r in read_all(dst, "f")] == [1, 2, 3]


@pytest.mark.parametrize("content", [b"my notes", b"notes\nmore\n"])
def test_fork_refuses_to_overwrite_a_target_that_is_not_a_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes
) -> None:
    src, dst = tmp_path / "src.jsonl", tmp_path / "notes.txt"
    write_log(src)
    dst.write_bytes(content)
    assert main(["fork", str(src), "--at", "2", "--into", str(dst)]) == 1
    err = capsys.readouterr().err
    assert "not a toolledger log" in err and str(dst) in err
    assert dst.read_bytes() == content
