"""The store contract, checked once against every backend: the conformance suite.

Every test here runs against each backend in :data:`BACKENDS` (memory, JSONL, SQLite): a new
store is one more entry in :func:`make_store` (and, for a shared or keyed store, in
:func:`reopen` and :func:`forge_row`), and passing this module is what makes it a store.
The JSONL file's own promises (torn lines, corruption) are in ``tests/test_stores.py``."""

from __future__ import annotations

import json
import math
import sqlite3
import os
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Awaitable, Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.lowlevel
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from events.codec import EVENT_TYPES, decode_line, encode_line, encode_line_bytes, type_name
from events.errors import CodecError, ConflictError, SessionInUse, UnverifiedRecordError
from events.integrity import GENESIS, seal_bytes, unseal
from events.results import ToolResult, text
from events.stores import EventStore, JsonlStore, MemoryStore, SqliteStore, read_jsonl
from events.stores.base import encode_bodies
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

from tests.strategies import instances_of

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


#: the backends whose log outlives the store object, shared by several of them and processes
SHARED = ["jsonl", "sqlite"]
LOGS = {"jsonl": "log.jsonl", "sqlite": "log.db"}


def make_store(kind: str, directory: Path) -> EventStore:
    if kind == "memory":
        return MemoryStore()
    return reopen(kind, directory)


def reopen(kind: str, directory: Path, key: bytes | None = None) -> EventStore:
    """Another store object on the log in ``directory`` (for the :data:`SHARED` kinds)."""
    path = directory / LOGS[kind]
    if kind == "sqlite":
        return SqliteStore(path, key=key)
    return JsonlStore(path, key=key)


def forge_row(kind: str, directory: Path, record: Record, key: bytes | None) -> None:
    """Put ``record`` in place of the stored one of its seq, chained after the one before it
    and sealed with ``key`` (plain SHA-256 without one): what someone with write access to
    the file or the database can do."""
    path = directory / LOGS[kind]
    if kind == "sqlite":
        with closing(sqlite3.connect(path, isolation_level=None)) as db:
            sid = record.session_id.encode("utf-8", "surrogatepass")
            rows = dict(db.execute("SELECT seq, line FROM records WHERE session_id = ?", (sid,)))
            prev = (unseal(rows[record.seq - 1]) or pytest.fail("not sealed"))[1] \
                if record.seq > 1 else GENESIS
            line, _ = seal_bytes(encode_line_bytes(record)[1], prev, key)
            db.execute("UPDATE records SET line = ? WHERE session_id = ? AND seq = ?",
                       (line, sid, record.seq))
        return
    lines = path.read_bytes().splitlines()
    mine = [i for i, raw in enumerate(lines) if json.loads(raw)["session_id"] == record.session_id]
    index = mine[record.seq - 1]
    prev = (unseal(lines[mine[record.seq - 2]]) or pytest.fail("not sealed"))[1] \
        if record.seq > 1 else GENESIS
    lines[index], _ = seal_bytes(encode_line_bytes(record)[1], prev, key)
    path.write_bytes(b"\n".join(lines) + b"\n")


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




# -- every event type, unicode, large payloads --------------------------------------------

EVENT_CLASSES = sorted(EVENT_TYPES.values(), key=type_name)


def run_on(kind: str, body: Callable[[EventStore], Awaitable[None]]) -> None:
    """``body`` on a fresh store of ``kind`` (for Hypothesis, which cannot use fixtures)."""

    async def main(directory: Path) -> None:
        with closing(make_store(kind, directory)) as store:
            await body(store)

    with tempfile.TemporaryDirectory() as directory:
        trio.run(main, Path(directory))


@pytest.mark.parametrize("kind", BACKENDS)
@pytest.mark.parametrize("cls", EVENT_CLASSES, ids=type_name)
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_event_type_round_trips(kind: str, cls: type[Any], data: st.DataObject) -> None:
    events = data.draw(st.lists(instances_of(cls), min_size=1, max_size=3), label="events")
    batch = [Record(session_id="s", seq=i, time=T0, event=event)
             for i, event in enumerate(events, start=1)]
    try:
        encode_bodies(batch)
    except CodecError:
        writable = False
    else:
        writable = True

    async def body(store: EventStore) -> None:
        if writable:
            await store.append("s", batch, expected_seq=0)
            assert await store.read("s") == batch
        else:  # refused alike by every store, and nothing stored
            with pytest.raises(CodecError):
                await store.append("s", batch, expected_seq=0)
            assert await store.sessions() == []

    run_on(kind, body)


UNICODE = ["λ session", "emoji 🦜 and 𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "NUL \x00 inside", "right-to-left שלום", "\u2028\u2029"]


@pytest.mark.trio
async def test_unicode_round_trips(store: EventStore) -> None:
    for text_ in UNICODE:
        session = f"s {text_}"
        records = [rec(session, 1, UserMessage(text=text_)), rec(session, 2)]
        await store.append(session, records, expected_seq=0)
        assert await store.read(session) == records
    assert await store.sessions() == [f"s {text_}" for text_ in UNICODE]


@pytest.mark.trio
async def test_lone_surrogates_round_trip(store: EventStore) -> None:
    # what os.fsdecode makes of a file name that is not UTF-8: JSON escapes it, and it is kept
    session = "s \udcff"
    records = [rec(session, 1, UserMessage(text="half a pair: \ud800")), rec(session, 2)]
    await store.append(session, records, expected_seq=0)
    assert await store.read(session) == records
    assert await store.read(session, after=1) == records[1:]
    assert await store.last_seq(session) == 2
    assert await store.sessions() == [session]


@pytest.mark.trio
async def test_large_payloads_round_trip(store: EventStore) -> None:
    big = "x" * (4 << 20) + "é"  # 4 MiB and a bit, in one record
    many = {f"k{i}": list(range(50)) for i in range(2_000)}
    records = [
        rec("s", 1, UserMessage(text=big)),
        rec("s", 2, ToolCallRequested(call_id="1.0", name="t", arguments=many)),
    ]
    await store.append("s", records, expected_seq=0)
    await store.append("s", [rec("s", 3)], expected_seq=2)
    assert await store.read("s") == [*records, rec("s", 3)]
    assert await store.read("s", after=1) == [records[1], rec("s", 3)]


# -- claims --------------------------------------------------------------------------------


def test_a_session_has_one_owner(store: EventStore) -> None:
    claim = store.claim("s")
    with pytest.raises(SessionInUse):
        store.claim("s")
    with store.claim("other"):  # another session is free
        pass
    claim.release()
    claim.release()  # again: a no-op
    with store.claim("s"):  # free again
        with pytest.raises(SessionInUse):
            store.claim("s")


@pytest.mark.parametrize("kind", SHARED)
def test_a_claim_holds_against_another_store_on_the_same_log(kind: str, tmp_path: Path) -> None:
    with closing(make_store(kind, tmp_path)) as first, closing(reopen(kind, tmp_path)) as second:
        with first.claim("s"):
            with pytest.raises(SessionInUse):
                second.claim("s")
        with second.claim("s"):
            pass


@pytest.mark.parametrize("kind", SHARED)
def test_a_claim_holds_against_another_process(kind: str, tmp_path: Path) -> None:
    make_store(kind, tmp_path).close()
    script = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from events.errors import SessionInUse
        from tests.test_store_conformance import reopen
        store = reopen({kind!r}, Path({str(tmp_path)!r}))
        try:
            store.claim("s")
        except SessionInUse:
            sys.exit(3)
        sys.exit(0)
    """)
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    with closing(make_store(kind, tmp_path)) as store, store.claim("s"):
        held = subprocess.run([sys.executable, "-c", script], env=env, timeout=60)
    free = subprocess.run([sys.executable, "-c", script], env=env, timeout=60)
    assert (held.returncode, free.returncode) == (3, 0)


# -- concurrent readers, several store objects on one log ----------------------------------


@pytest.mark.trio
async def test_concurrent_readers_see_whole_batches_in_order(
    store: EventStore, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    kind = request.node.callspec.params["store"]
    others = [reopen(kind, tmp_path) for _ in range(2)] if kind in SHARED else []
    readers = [store, *others]
    seen: list[list[int]] = []
    written = trio.Event()

    async def read_until_done(reader: EventStore) -> None:
        while True:
            done = written.is_set()
            records = await reader.read("s")
            seqs = [r.seq for r in records]
            assert seqs == list(range(1, len(seqs) + 1))  # a prefix, nothing missing
            assert len(seqs) % 4 == 0  # whole batches only
            seen.append(seqs)
            if done:
                return
            await trio.lowlevel.checkpoint()

    try:
        async with trio.open_nursery() as nursery:
            for reader in readers:
                for _ in range(2):
                    nursery.start_soon(read_until_done, reader)
            for batch in range(25):
                await store.append("s", recs("s", 4 * batch + 1, 4 * batch + 4), 4 * batch)
                await trio.lowlevel.checkpoint()
            written.set()
        assert all(len(s) == 100 for s in seen[-2 * len(readers):])
        for other in others:
            assert await other.last_seq("s") == 100
            assert await other.sessions() == ["s"]
    finally:
        for other in others:
            other.close()


@pytest.mark.trio
@pytest.mark.parametrize("kind", SHARED)
async def test_a_stale_store_on_the_same_log_conflicts(kind: str, tmp_path: Path) -> None:
    with closing(make_store(kind, tmp_path)) as first, closing(reopen(kind, tmp_path)) as second:
        await first.append("s", recs("s", 1, 2), expected_seq=0)
        with pytest.raises(ConflictError):
            await second.append("s", [rec("s", 1)], expected_seq=0)
        await second.append("s", [rec("s", 3)], expected_seq=2)
        assert await first.read("s") == recs("s", 1, 3)
    with closing(reopen(kind, tmp_path)) as third:
        assert await third.read("s") == recs("s", 1, 3)


# -- keyed integrity -----------------------------------------------------------------------

KEY = b"the host's HMAC key, kept away from the log"


@pytest.mark.trio
@pytest.mark.parametrize("kind", SHARED)
@pytest.mark.parametrize("forger_key", [None, b"another key"], ids=["unkeyed", "wrong key"])
async def test_a_keyed_store_refuses_a_forged_record(
    kind: str, forger_key: bytes | None, tmp_path: Path
) -> None:
    with closing(reopen(kind, tmp_path, key=KEY)) as store:
        await store.append("s", recs("s", 1, 3), expected_seq=0)
        assert store.keyed and await store.read("s") == recs("s", 1, 3)
        forged = rec("s", 2, UserMessage(text="s #X"))  # as long as the real one
        forge_row(kind, tmp_path, forged, key=forger_key)
        for after in (0, 1):  # reading from the start, and from just before it
            with pytest.raises(UnverifiedRecordError) as info:
                await store.read("s", after=after)
            assert (info.value.session_id, info.value.seq) == ("s", 2)
        with pytest.raises(UnverifiedRecordError) as info:  # seq 3 no longer links to it
            await store.read("s", after=2)
        assert info.value.seq == 3
    # the same forgery, seen by a store opened afterwards
    with pytest.raises(UnverifiedRecordError):
        with closing(reopen(kind, tmp_path, key=KEY)) as again:
            await again.read("s")


@pytest.mark.trio
@pytest.mark.parametrize("kind", SHARED)
async def test_a_keyed_store_never_chains_onto_a_forged_record(kind: str, tmp_path: Path) -> None:
    with closing(reopen(kind, tmp_path, key=KEY)) as store:
        await store.append("s", recs("s", 1, 2), expected_seq=0)
    forge_row(kind, tmp_path, rec("s", 2, UserMessage(text="s #X")), key=None)
    with pytest.raises(UnverifiedRecordError):
        with closing(reopen(kind, tmp_path, key=KEY)) as store:
            await store.append("s", [rec("s", 3)], expected_seq=2)
    with closing(reopen(kind, tmp_path)) as plain:  # nothing was appended after it
        assert await plain.last_seq("s") == 2
