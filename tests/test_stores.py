"""The store contract, checked once against every backend, then the JSONL file's own promises."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import events.stores.jsonl as jsonl_module
from events.codec import decode_line, encode_line
from events.errors import CodecError, ConflictError, CorruptLogError
from events.results import ToolResult, text
from events.stores import EventStore, JsonlStore, MemoryStore, SqliteStore, read_jsonl
from events.types import (
    AssistantMessage,
    Event,
    ModelToolCall,
    Record,
    SessionStarted,
    ToolCallCompleted,
    ToolCallRequested,
    UserMessage,
)

T0 = 1_767_225_600.0


def rec(session: str, seq: int, event: Event | None = None) -> Record:
    return Record(
        session_id=session,
        seq=seq,
        time=T0 + seq,
        event=event if event is not None else UserMessage(text=f"{session} #{seq}"),
    )


def recs(session: str, first: int, last: int) -> list[Record]:
    return [rec(session, seq) for seq in range(first, last + 1)]


BACKENDS = ["memory", "jsonl", "sqlite"]


def make_store(kind: str, directory: Path) -> EventStore:
    if kind == "memory":
        return MemoryStore()
    if kind == "sqlite":
        return SqliteStore(directory / "log.db")
    return JsonlStore(directory / "log.jsonl")


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[EventStore]:
    made = make_store(request.param, tmp_path)
    yield made
    made.close()


# -- the contract, for every backend -------------------------------------------------------


def test_is_an_event_store(store: EventStore) -> None:
    assert isinstance(store, EventStore)


@pytest.mark.trio
async def test_unknown_session_is_empty(store: EventStore) -> None:
    assert await store.read("nope") == []
    assert await store.last_seq("nope") == 0
    assert await store.sessions() == []


@pytest.mark.trio
async def test_append_read_after_last_seq(store: EventStore) -> None:
    await store.append("s", recs("s", 1, 3), expected_seq=0)
    await store.append("s", recs("s", 4, 5), expected_seq=3)
    assert await store.read("s") == recs("s", 1, 5)
    assert await store.read("s", after=2) == recs("s", 3, 5)
    assert await store.read("s", after=5) == []
    assert await store.read("s", after=99) == []
    assert await store.last_seq("s") == 5
    assert await store.sessions() == ["s"]


@pytest.mark.trio
async def test_stale_expected_seq_conflicts_and_stores_nothing(store: EventStore) -> None:
    await store.append("s", recs("s", 1, 2), expected_seq=0)
    with pytest.raises(ConflictError) as info:
        await store.append("s", [rec("s", 1)], expected_seq=0)
    assert (info.value.session_id, info.value.expected_seq, info.value.actual_seq) == ("s", 0, 2)
    with pytest.raises(ConflictError):  # ahead of the log is stale too
        await store.append("s", [rec("s", 6)], expected_seq=5)
    with pytest.raises(ConflictError):  # a new session starts at 0
        await store.append("new", [rec("new", 2)], expected_seq=1)
    assert await store.read("s") == recs("s", 1, 2)
    assert await store.sessions() == ["s"]


@pytest.mark.trio
async def test_empty_batch_is_a_no_op_but_checks_the_conflict(store: EventStore) -> None:
    await store.append("s", [], expected_seq=0)
    assert await store.sessions() == []
    await store.append("s", recs("s", 1, 1), expected_seq=0)
    await store.append("s", [], expected_seq=1)
    with pytest.raises(ConflictError):
        await store.append("s", [], expected_seq=0)
    assert await store.read("s") == recs("s", 1, 1)


BAD_BATCHES: dict[str, tuple[list[Record], str]] = {
    "gap": ([rec("s", 2), rec("s", 4)], "expected 3"),
    "duplicate": ([rec("s", 2), rec("s", 2)], "expected 3"),
    "wrong start": ([rec("s", 3)], "expected 2"),
    "other session": ([rec("s", 2), rec("t", 3)], "belongs to session 't'"),
}


@pytest.mark.trio
@pytest.mark.parametrize("name", BAD_BATCHES)
async def test_malformed_batch_is_refused_and_stores_nothing(store: EventStore, name: str) -> None:
    await store.append("s", [rec("s", 1)], expected_seq=0)
    batch, message = BAD_BATCHES[name]
    with pytest.raises(ValueError, match=message):
        await store.append("s", batch, expected_seq=1)
    assert await store.read("s") == [rec("s", 1)]
    assert await store.sessions() == ["s"]


@pytest.mark.trio
async def test_negative_expected_seq_is_refused(store: EventStore) -> None:
    with pytest.raises(ValueError, match="expected_seq"):
        await store.append("s", [], expected_seq=-1)


@pytest.mark.trio
@pytest.mark.parametrize(
    "bad",
    [
        ToolCallRequested(call_id="1.0", name="t", arguments={"x": math.nan}),
        ToolCallRequested(call_id="1.0", name="t", arguments=[math.inf]),
        ToolCallRequested(call_id="1.0", name="t", arguments=object()),
        AssistantMessage(turn=True),  # encodes, but would never decode: refused
    ],
    ids=["nan", "inf", "object", "bool-for-int"],
)
async def test_batch_is_atomic_when_a_record_cannot_be_stored(
    store: EventStore, bad: Event
) -> None:
    batch = [rec("s", 1), rec("s", 2), rec("s", 3, bad), rec("s", 4)]
    with pytest.raises(CodecError, match="seq 3"):
        await store.append("s", batch, expected_seq=0)
    assert await store.read("s") == []
    assert await store.last_seq("s") == 0
    assert await store.sessions() == []
    await store.append("s", recs("s", 1, 2), expected_seq=0)
    assert await store.read("s") == recs("s", 1, 2)


@pytest.mark.trio
async def test_sessions_interleave(store: EventStore) -> None:
    await store.append("b", recs("b", 1, 2), expected_seq=0)
    await store.append("a", recs("a", 1, 1), expected_seq=0)
    await store.append("b", recs("b", 3, 3), expected_seq=2)
    await store.append("c", recs("c", 1, 3), expected_seq=0)
    await store.append("a", recs("a", 2, 4), expected_seq=1)
    assert await store.sessions() == ["b", "a", "c"]
    assert await store.read("a") == recs("a", 1, 4)
    assert await store.read("b", after=1) == recs("b", 2, 3)
    assert await store.read("c") == recs("c", 1, 3)
    assert [await store.last_seq(s) for s in "abc"] == [4, 3, 3]


@pytest.mark.trio
async def test_close_is_idempotent_and_final(store: EventStore) -> None:
    store.close()
    store.close()
    with pytest.raises(ValueError, match="closed"):
        await store.read("s")
    with pytest.raises(ValueError, match="closed"):
        await store.append("s", [rec("s", 1)], expected_seq=0)


# -- round trips (Hypothesis) --------------------------------------------------------------

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)
events_strategy: st.SearchStrategy[Event] = st.one_of(
    st.builds(UserMessage, text=st.text()),
    st.builds(ToolCallRequested, call_id=st.text(max_size=8), name=st.text(), arguments=json_values),
    st.builds(
        AssistantMessage,
        turn=st.integers(min_value=1, max_value=1000),
        text=st.text(),
        tool_calls=st.lists(
            st.builds(ModelToolCall, id=st.text(max_size=8), name=st.text(), arguments=json_values),
            max_size=3,
        ).map(tuple),
    ),
    st.builds(
        ToolCallCompleted,
        call_id=st.text(max_size=8),
        result=st.builds(
            ToolResult,
            content=st.lists(st.text().map(text), max_size=3).map(tuple),
            structured_content=json_values,
            is_error=st.booleans(),
        ),
    ),
    st.builds(SessionStarted, metadata=st.dictionaries(st.text(max_size=8), json_values)),
)
times = st.floats(min_value=0, max_value=4e9, allow_nan=False)


@given(
    session=st.text(),
    seq=st.integers(min_value=1, max_value=2**62),
    time=times,
    event=events_strategy,
)
def test_codec_round_trip(session: str, seq: int, time: float, event: Event) -> None:
    record = Record(session_id=session, seq=seq, time=time, event=event)
    line = encode_line(record)
    assert "\n" not in line
    assert decode_line(line) == record
    assert decode_line(line.encode("utf-8")) == record


# Each step: which session (of three) gets a batch of events.
steps = st.lists(
    st.tuples(st.sampled_from(["s-1", "s-2", "λ session"]), st.lists(events_strategy, max_size=4)),
    max_size=8,
)


@pytest.mark.parametrize("kind", BACKENDS)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=steps, time=times)
def test_store_round_trip(kind: str, plan: list[tuple[str, list[Event]]], time: float) -> None:
    async def main(directory: Path) -> None:
        store = make_store(kind, directory)
        in_order: list[Record] = []
        by_session: dict[str, list[Record]] = {}
        for session, batch_events in plan:
            if not batch_events:  # a no-op: does not start the session
                await store.append(session, [], expected_seq=len(by_session.get(session, ())))
                continue
            mine = by_session.setdefault(session, [])
            last = len(mine)
            batch = [
                Record(session_id=session, seq=last + i, time=time, event=event)
                for i, event in enumerate(batch_events, start=1)
            ]
            await store.append(session, batch, expected_seq=last)
            mine.extend(batch)
            in_order.extend(batch)
        assert await store.sessions() == list(by_session)
        for session, recorded in by_session.items():
            assert await store.read(session) == recorded
            assert await store.last_seq(session) == len(recorded)
        store.close()
        if kind == "jsonl":
            assert read_jsonl(directory / "log.jsonl") == in_order
            with JsonlStore(directory / "log.jsonl") as reopened:
                for session, recorded in by_session.items():
                    assert await reopened.read(session) == recorded

    with tempfile.TemporaryDirectory() as directory:
        trio.run(main, Path(directory))


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
}


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
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
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

        monkeypatch.setattr(jsonl_module, "_write_all", half_then_fail)
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
