"""A live session's history: the records it hands out are the records it made and read, while
it keeps only the events and times of those it made (engine/core/history.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine import Annotations, Session, ToolResult, approve_all, text, tool
from engine.core.history import History
from engine.models import FauxModel, faux_text, faux_tool_call
from events import JsonlStore
from events.types import SCHEMA_VERSION, Record, UserMessage

SAFE = Annotations(read_only=True, open_world=False)


@tool(input_schema={"type": "object"}, annotations=SAFE)
async def ping(call: Any, ctx: Any) -> ToolResult:
    """Answers pong."""
    return ToolResult(content=[text("pong")])


def records_of(session_id: str, times: list[float], version: int = SCHEMA_VERSION) -> list[Record]:
    return [Record(session_id=session_id, seq=seq, time=time, event=UserMessage(text=f"m{seq}"),
                   version=version)
            for seq, time in enumerate(times, start=1)]


@given(times=st.lists(st.one_of(st.floats(allow_nan=False), st.integers()), max_size=12),
       read=st.integers(min_value=0, max_value=12), version=st.sampled_from([1, SCHEMA_VERSION]))
def test_a_history_hands_out_the_records_it_was_given(times: list[float], read: int,
                                                      version: int) -> None:
    records = records_of("s", times)
    read = min(read, len(records))
    # a record read from a log keeps the version it was written in
    read_records = [Record(session_id=r.session_id, seq=r.seq, time=r.time, event=r.event,
                           version=version) for r in records[:read]]
    expected = read_records + records[read:]
    events: list[Any] = []
    made: list[float] = []
    history = History("s", read_records, events, made)
    for record in records[read:]:  # as the recorder keeps them
        events.append(record.event)
        made.append(record.time)

    assert len(history) == len(expected)
    assert list(history) == expected
    assert list(reversed(history)) == expected[::-1]
    for index in range(-len(expected), len(expected)):
        got = history[index]
        assert got == expected[index]
        assert type(got.time) is type(expected[index].time)  # an int clock stays an int
    assert history[1:] == expected[1:]
    assert history[::-2] == expected[::-2]
    with pytest.raises(IndexError):
        history[len(expected)]


async def test_a_reopened_session_hands_out_what_its_log_holds(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path / "log.jsonl")
    ticks = iter(range(1000))

    def clock() -> float:
        return next(ticks)

    script = [faux_tool_call("ping", {}), faux_text("one"), faux_tool_call("ping", {}),
              faux_text("two")]
    model = FauxModel(script)
    async with Session.open(store, model=model, tools=[ping], approver=approve_all,
                            session_id="s", create=True, clock=clock) as session:
        await session.prompt("first")
    async with Session.open(store, model=model, tools=[ping], approver=approve_all,
                            session_id="s", clock=clock) as session:
        await session.prompt("second")
        held = session.records
        followed = [record async for record in _until(session, len(held))]
    stored = await store.read("s")
    assert list(held) == stored == followed


async def _until(session: Session, last: int) -> Any:
    async for record in session.follow():
        yield record
        if record.seq == last:
            return
