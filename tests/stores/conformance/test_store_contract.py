"""The store contract: appends, reads, conflicts, malformed and unencodable batches."""

from __future__ import annotations

import math

import pytest

from events.errors import CodecError, ConflictError
from events.stores import EventStore
from events.types import AssistantMessage, Event, Record, ToolCallRequested

from tests.stores.conformance.backends import rec, recs, store


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
