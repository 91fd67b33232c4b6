"""What a store holds and gives back unchanged: any plan of batches, every event type,
unicode (lone surrogates included) and records of megabytes."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.lowlevel
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from events.codec import EVENT_TYPES, decode_line, encode_line, type_name
from events.errors import CodecError
from events.results import ToolResult, text
from events.stores import EventStore, JsonlStore, read_jsonl
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
from tests.stores.conformance.backends import BACKENDS, T0, make_store, rec, run_on, store


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
