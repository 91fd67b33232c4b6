"""The JSONL file's own promises: torn lines, corruption, several writers on one file. The
contract every store keeps is checked in ``tests/stores/conformance/``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import events.stores.jsonl as jsonl_module
import events.stores.jsonlines as jsonlines_module
from events.codec import decode_line, encode_line
from events.errors import CodecError, ConflictError, CorruptLogError
from events.integrity import GENESIS
from events.stores.base import seal_lines
from events.stores import JsonlStore, read_jsonl
from events.types import Record, UserMessage

from tests.stores.conformance.backends import rec, recs


# -- the JSONL file ------------------------------------------------------------------------


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "log.jsonl"


def write_lines(path: Path, records: list[Record]) -> None:
    with path.open("ab") as file:
        for record in records:
            file.write(encode_line(record).encode("utf-8") + b"\n")


@pytest.mark.trio
async def test_reopen_sees_everything(path: Path) -> None:
    with JsonlStore(path) as store:
        await store.append("a", recs("a", 1, 2), expected_seq=0)
        await store.append("b", recs("b", 1, 1), expected_seq=0)
        await store.append("a", recs("a", 3, 3), expected_seq=2)
    with JsonlStore(path) as store:
        assert await store.sessions() == ["a", "b"]
        assert await store.read("a") == recs("a", 1, 3)
        assert await store.last_seq("b") == 1
        await store.append("b", recs("b", 2, 2), expected_seq=1)
    assert read_jsonl(path) == recs("a", 1, 2) + recs("b", 1, 1) + recs("a", 3, 3) + [rec("b", 2)]
    assert JsonlStore.scan(path) == read_jsonl(path)


@pytest.mark.trio
async def test_torn_last_line_is_dropped_on_open(path: Path) -> None:
    write_lines(path, recs("s", 1, 2))
    whole = path.read_bytes()
    torn = encode_line(rec("s", 3)).encode()[:25]
    path.write_bytes(whole + torn)
    assert read_jsonl(path) == recs("s", 1, 2)  # read-only: ignored, not cut
    assert path.read_bytes() == whole + torn
    with JsonlStore(path) as store:
        assert store.dropped_tail == torn
        assert path.read_bytes() == whole
        assert await store.read("s") == recs("s", 1, 2)
        await store.append("s", recs("s", 3, 4), expected_seq=2)
    assert read_jsonl(path) == recs("s", 1, 4)
    with JsonlStore(path) as store:
        assert store.dropped_tail == b""


@pytest.mark.trio
async def test_torn_line_left_by_another_writer_is_cut_before_the_next_append(path: Path) -> None:
    with JsonlStore(path) as store:
        await store.append("s", recs("s", 1, 1), expected_seq=0)
        with path.open("ab") as file:  # a writer in another process died mid-write
            file.write(b'{"v":1,"session_id":"s","se')
        assert await store.read("s") == [rec("s", 1)]  # readers skip it
        await store.append("s", recs("s", 2, 2), expected_seq=1)
        assert store.dropped_tail == b'{"v":1,"session_id":"s","se'
    assert read_jsonl(path) == recs("s", 1, 2)


def corrupt(path: Path, line: int, replacement: bytes) -> bytes:
    lines = path.read_bytes().splitlines(keepends=True)
    lines[line - 1] = replacement
    path.write_bytes(b"".join(lines))
    return path.read_bytes()


def modified(record: Record, **changes: Any) -> bytes:
    obj = json.loads(encode_line(record))
    obj.update(changes)
    return json.dumps(obj).encode() + b"\n"


CORRUPTIONS: dict[str, tuple[int, Callable[[], bytes], str]] = {
    "not json": (2, lambda: b"not json\n", "not valid JSON"),
    "blank line": (3, lambda: b"\n", "not valid JSON"),
    "unknown type": (2, lambda: modified(rec("s", 2), type="bogus"), "unknown event type"),
    "newer version": (3, lambda: modified(rec("s", 3), v=99), "newer"),
    "seq gap": (3, lambda: modified(rec("s", 3), seq=5), "seq 5 after seq 2"),
    "new session not at 1": (2, lambda: modified(rec("s", 2), session_id="t"), "after seq 0"),
    "complete invalid last line": (4, lambda: b'{"v":1,"sess\n', "not valid JSON"),
    # bytes that are not UTF-8 inside the event's data, which the opening scan does not build
    "not UTF-8 in data": (2, lambda: encode_line(rec("s", 2)).encode().replace(b"#", b"\xff")
                          + b"\n", "not valid JSON"),
    "data not an object": (2, lambda: modified(rec("s", 2), data=[]), "must be an object"),
    # what Python writes for an infinite float, inside the data the opening scan skips
    "not JSON inside data": (2, lambda: modified(rec("s", 2), data={"text": float("inf")}),
                             "not valid JSON"),
    "malformed hash": (3, lambda: modified(rec("s", 3), hash="F" * 64), "'hash'"),
}


def bad_data(record: Record) -> bytes:
    """``record``'s line, with data its event type refuses: a whole envelope, a bad event."""
    return modified(record, data={"text": 7})


@pytest.mark.trio
@pytest.mark.parametrize("key", [None, b"k"])
async def test_a_line_refused_only_for_its_data_is_refused_when_read_naming_it(
    path: Path, key: bytes | None
) -> None:
    bodies = [encode_line(r).encode() for r in recs("s", 1, 3)]
    bodies[1] = bad_data(rec("s", 2))[:-1]
    bodies.append(encode_line(rec("t", 1)).encode())  # another session, read as ever
    sealed = seal_lines(bodies[:3], GENESIS, key)[0] + seal_lines(bodies[3:], GENESIS, key)[0]
    path.write_bytes(b"".join(sealed))
    with pytest.raises(CodecError) as codec:
        decode_line(bodies[1])
    with JsonlStore(path, key=key) as store:  # the opening scan builds no event
        assert await store.sessions() == ["s", "t"]
        assert await store.read("s", limit=1) == [rec("s", 1)]
        for _ in range(2):  # and again: the store does not skip it
            with pytest.raises(CorruptLogError) as info:
                await store.read("s")
            assert (info.value.path, info.value.line) == (str(path), 2)
            assert str(codec.value) in info.value.problem
        if key is None:  # (a keyed store decodes the line before too, for the link)
            assert await store.read("s", after=2) == [rec("s", 3)]
        assert await store.read("t") == [rec("t", 1)]
        assert await store.last_seq("s") == 3


def test_a_line_refused_for_its_data_before_a_seq_break_is_the_one_named(path: Path) -> None:
    write_lines(path, recs("s", 1, 1))
    with path.open("ab") as file:  # a bad line put before the good line whose seq it copies
        file.write(bad_data(rec("s", 2)))
    write_lines(path, recs("s", 2, 3))
    before = path.read_bytes()
    with pytest.raises(CorruptLogError) as info:
        JsonlStore(path)
    assert info.value.line == 2 and "malformed 'user_message' record" in info.value.problem
    assert path.read_bytes() == before


@pytest.mark.parametrize("name", CORRUPTIONS)
def test_bad_line_is_corruption_and_changes_nothing(path: Path, name: str) -> None:
    write_lines(path, recs("s", 1, 4))
    line, replacement, problem = CORRUPTIONS[name]
    before = corrupt(path, line, replacement()) + b'{"v":1,"torn'  # a torn tail is kept too
    path.write_bytes(before)
    with pytest.raises(CorruptLogError) as info:
        JsonlStore(path)
    assert info.value.line == line
    assert info.value.path == str(path)
    assert problem in info.value.problem
    assert f"{path}:{line}:" in str(info.value)
    assert path.read_bytes() == before
    with pytest.raises(CorruptLogError) as again:
        read_jsonl(path)
    assert again.value.line == line


@pytest.mark.trio
async def test_corruption_appended_by_another_process_is_reported_on_read(path: Path) -> None:
    with JsonlStore(path) as store:
        await store.append("s", recs("s", 1, 1), expected_seq=0)
        with path.open("ab") as file:
            file.write(b"garbage\n")
        for _ in range(2):  # and again: the store does not skip it
            with pytest.raises(CorruptLogError) as info:
                await store.read("s")
            assert info.value.line == 2


@pytest.mark.trio
async def test_a_file_that_shrinks_is_corruption(path: Path) -> None:
    with JsonlStore(path) as store:
        await store.append("s", recs("s", 1, 2), expected_seq=0)
        os.truncate(path, 3)
        with pytest.raises(CorruptLogError, match="shrank"):
            await store.last_seq("s")


@pytest.mark.trio
async def test_two_stores_on_one_file(path: Path) -> None:
    with JsonlStore(path) as one, JsonlStore(path) as two:
        await one.append("s", recs("s", 1, 2), expected_seq=0)
        with pytest.raises(ConflictError) as info:  # two never read: its append re-indexes
            await two.append("s", [rec("s", 1)], expected_seq=0)
        assert info.value.actual_seq == 2
        assert await two.read("s") == recs("s", 1, 2)
        await two.append("s", recs("s", 3, 3), expected_seq=2)
        await two.append("t", recs("t", 1, 1), expected_seq=0)
        with pytest.raises(ConflictError):  # one is stale now
            await one.append("s", [rec("s", 3)], expected_seq=2)
        assert await one.read("s", after=1) == recs("s", 2, 3)
        assert await one.last_seq("t") == 1
        assert await one.sessions() == ["s", "t"]
    assert read_jsonl(path) == recs("s", 1, 3) + recs("t", 1, 1)


def test_processes_appending_concurrently_stay_consistent(path: Path) -> None:
    writer = textwrap.dedent(
        """
        import sys, trio
        from events.errors import ConflictError
        from events.stores import JsonlStore
        from events.types import Record, UserMessage

        async def main(path, name):
            store = JsonlStore(path)
            done = 0
            while done < 30:
                last = await store.last_seq("shared")
                batch = [Record(session_id="shared", seq=last + i, time=0.0,
                                event=UserMessage(text=f"{name} {done + i}")) for i in (1, 2)]
                try:
                    await store.append("shared", batch, expected_seq=last)
                except ConflictError:
                    continue
                done += 2
            store.close()

        trio.run(main, sys.argv[1], sys.argv[2])
        """
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    procs = [
        subprocess.Popen([sys.executable, "-c", writer, str(path), f"w{n}"], env=env)
        for n in range(4)
    ]
    assert [proc.wait(timeout=60) for proc in procs] == [0, 0, 0, 0]
    records = read_jsonl(path)
    assert [r.seq for r in records] == list(range(1, 121))
    texts = [r.event.text for r in records if isinstance(r.event, UserMessage)]
    for n in range(4):  # each writer's batches landed whole and in its order
        mine = [t for t in texts if t.startswith(f"w{n} ")]
        assert mine == [f"w{n} {i}" for i in range(1, 31)]


@pytest.mark.trio
async def test_durable_store(path: Path) -> None:
    with JsonlStore(path, durable=True) as store:
        await store.append("s", recs("s", 1, 3), expected_seq=0)
        assert await store.read("s") == recs("s", 1, 3)
    with JsonlStore(path, durable=True) as store:
        assert await store.read("s", after=1) == recs("s", 2, 3)


@pytest.mark.trio
async def test_failed_write_is_rolled_back(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with JsonlStore(path) as store:
        await store.append("s", recs("s", 1, 1), expected_seq=0)
        before = path.read_bytes()

        def half_then_fail(fd: int, data: bytes) -> None:
            os.write(fd, data[: len(data) // 2])
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(jsonl_module, "write_all", half_then_fail)
        with pytest.raises(OSError):
            await store.append("s", recs("s", 2, 4), expected_seq=1)
        monkeypatch.undo()
        assert path.read_bytes() == before
        assert await store.last_seq("s") == 1
        await store.append("s", recs("s", 2, 2), expected_seq=1)
    assert read_jsonl(path) == recs("s", 1, 2)


@pytest.mark.trio
async def test_reads_long_runs_across_chunks(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jsonl_module, "_MAX_RUN", 200)  # force several preads per read
    with JsonlStore(path) as store:
        await store.append("a", recs("a", 1, 10), expected_seq=0)
        await store.append("b", recs("b", 1, 1), expected_seq=0)
        await store.append("a", recs("a", 11, 20), expected_seq=10)
        assert await store.read("a") == recs("a", 1, 20)
        assert await store.read("a", after=7) == recs("a", 8, 20)


@pytest.mark.trio
async def test_opening_builds_no_event_and_a_read_decodes_what_it_hands_out(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_lines(path, recs("a", 1, 6) + recs("b", 1, 2) + recs("a", 7, 8))
    decoded: list[bytes] = []
    real = jsonl_module.decode_stored

    def counting(name: str, line: int, raw: bytes) -> tuple[Record, str | None]:
        decoded.append(raw)
        return real(name, line, raw)

    monkeypatch.setattr(jsonl_module, "decode_stored", counting)  # reads
    monkeypatch.setattr(jsonlines_module, "decode_stored", counting)  # the opening scan's
    with JsonlStore(path) as store:
        assert decoded == []  # today's lines are indexed by their envelopes alone
        assert await store.read("a", after=2) == recs("a", 3, 8)
        assert len(decoded) == 6
        assert await store.read("b") == recs("b", 1, 2)
        assert await store.read("a") == recs("a", 1, 8)
        assert len(decoded) == 6 + 2 + 8
