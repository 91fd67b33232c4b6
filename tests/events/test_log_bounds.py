"""A log is input: nothing a line says, however deep or however large a number it names, may
crash a command or make it allocate more than the line is worth."""

from __future__ import annotations

import re
import tracemalloc
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
from trio.testing import MockClock

from engine import Annotations, PolicyRules, Session, ToolResult, approve_all, tool
from engine.cli import main
from engine.models import FauxModel, faux_text, faux_tool_call
from engine.replay import redrive
from engine.replay.stubs import MAX_REBUILT_ITEMS, not_json_value
from events import JsonlStore, MemoryStore, Record
from events.types import (
    FailureDetail,
    PolicyDecided,
    SessionStarted,
    ToolCallFailed,
    UserMessage,
)

SAFE = Annotations(read_only=True, open_world=False)


def deep_line(seq: int, depth: int) -> bytes:
    arguments = "[" * depth + "]" * depth
    return (
        f'{{"v":2,"session_id":"s","seq":{seq},"time":0.0,"type":"tool_call_requested",'
        f'"data":{{"call_id":"1.0","name":"x","arguments":{arguments},"origin":"model",'
        f'"parent_id":null,"model_call_id":null}}}}\n'
    ).encode()


@pytest.mark.parametrize("depth", [100_000, 3_000])
def test_verify_session_names_a_line_nested_too_deep_instead_of_crashing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], depth: int
) -> None:
    log = tmp_path / "log.jsonl"

    async def write() -> None:
        with JsonlStore(log) as store:
            await store.append("s", [Record(session_id="s", seq=1, time=0.0,
                                            event=UserMessage(text="hi"))], 0)

    trio.run(write)
    with log.open("ab") as file:
        file.write(deep_line(2, depth))
    for argv in (["verify", str(log), "--session", "s"], ["verify", str(log), "--session", "s",
                                                           "--json"]):
        assert main(argv) == 1
        out = capsys.readouterr().out
        assert "nested too deeply" in out and (f"{log}:2" in out or '"line": 2' in out)


def a_set_at(*path: str | int) -> FailureDetail:
    return FailureDetail(path=path, problem="type", type="set")


def test_a_recorded_path_too_long_to_rebuild_is_not_rebuilt() -> None:
    tracemalloc.start()
    try:
        for detail in (
            a_set_at(4_000_000_000),
            a_set_at("a", MAX_REBUILT_ITEMS + 1),
            a_set_at(*[60_000] * 40),  # small indices, many of them
            a_set_at(10**5000),  # a number as long as a line may make it
            a_set_at(*["a"] * 100_000),  # deeper than any JSON value
            a_set_at("a", -5),  # no list has that index
        ):
            value = not_json_value(detail)
            assert value is not None
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * MAX_REBUILT_ITEMS + (4 << 20)
    # within the bound, the value is rebuilt exactly
    assert not_json_value(a_set_at("a", 2))["a"][:2] == [None, None]


def test_replaying_an_edited_not_serialisable_detail_allocates_no_more_than_the_bound() -> None:
    @tool(annotations=SAFE)
    async def sloppy(call: Any, ctx: Any) -> ToolResult:
        return ToolResult(structured_content={"items": [1, {2, 3}]})

    async def main_() -> None:
        store = MemoryStore()
        async with Session.open(store, model=FauxModel([faux_tool_call("sloppy"),
                                                        faux_text("done")]),
                                tools=[sloppy], approver=approve_all, session_id="s", create=True) as session:
            await session.prompt("go")
        records = await store.read("s")
        edited = []
        for record in records:
            event = record.event
            if isinstance(event, ToolCallFailed) and event.kind == "not_serialisable":
                assert event.detail == a_set_at("items", 1)
                record = attrs.evolve(record, event=attrs.evolve(
                    event, detail=a_set_at("items", 50_000_000)))
            edited.append(record)
        tracemalloc.start()
        try:
            report = await redrive(edited)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak < 64 << 20  # a list of 50 million would be 400 MB
        assert not report.ok  # the replay cannot say the same thing: a divergence, not a crash
        assert any(re.search("not JSON", d.describe()) for d in report.divergences)

    trio.run(main_, clock=MockClock(autojump_threshold=0))


def edit_messages(records: list[Record], kind: type, field: str, change: Any) -> list[Record]:
    out = []
    for record in records:
        if isinstance(record.event, kind):
            event = attrs.evolve(record.event, **{field: change(getattr(record.event, field))})
            record = attrs.evolve(record, event=event)
        out.append(record)
    return out


async def record(tools: list[Any], script: list[Any], **options: Any) -> list[Record]:
    store = MemoryStore()
    async with Session.open(store, model=FauxModel(script), tools=tools, approver=approve_all,
                            session_id="s", create=True, **options) as session:
        await session.prompt("go")
    return await store.read("s")


@tool(annotations=SAFE)
async def rm_x(call: Any, ctx: Any) -> ToolResult:
    return ToolResult(structured_content={"ok": True})


@tool(annotations=SAFE)
async def dig(call: Any, ctx: Any) -> ToolResult:
    outcome = await ctx.execute_tool("dig", {})
    return ToolResult(structured_content={"deeper": not outcome.is_error})


@pytest.mark.parametrize("tail", ["+'a'" * 100_000, "'" + "(" * 100_000])
def test_replaying_an_edited_rule_reason_does_not_crash(tail: str) -> None:
    async def main_() -> None:
        records = await record([rm_x], [faux_tool_call("rm_x"), faux_text("done")],
                               rules=PolicyRules(deny=["rm_*"]))
        edited = edit_messages(records, PolicyDecided, "reason", lambda r: r + tail)
        assert any(isinstance(r.event, PolicyDecided) and r.event.reason.endswith(tail)
                   for r in edited)
        report = await redrive(edited)  # the rule is not read from a forged reason: no crash
        assert report is not None

    trio.run(main_, clock=MockClock(autojump_threshold=0))


@pytest.mark.parametrize("depth", [10**5000, 123456789, 2, -1], ids=["huge", "big", "2", "-1"])
def test_replaying_an_edited_depth_limit_uses_only_a_depth_the_log_can_show(depth: int) -> None:
    async def main_() -> None:
        records = await record([dig], [faux_tool_call("dig"), faux_text("done")], max_depth=1)
        assert any(isinstance(r.event, ToolCallFailed) and r.event.kind == "depth_limit"
                   for r in records)
        # as a log that does not record its settings: the failure's detail is what is left
        edited = edit_messages(records, SessionStarted, "settings", lambda _: None)
        assert (await redrive(edited)).ok
        edited = edit_messages(edited, ToolCallFailed, "detail",
                               lambda d: d if d is None else FailureDetail(limit=depth))
        report = await redrive(edited)
        assert not report.ok  # a limit the failing call is not deeper than: not believed
        # settings edited past what a session can be opened with are held to it: the replay
        # runs (and differs), it does not stop
        edited = edit_messages(records, SessionStarted, "settings",
                               lambda s: attrs.evolve(s, max_depth=depth))
        report = await redrive(edited)
        assert not report.ok and all(d.scope != "session" for d in report.divergences)

    trio.run(main_, clock=MockClock(autojump_threshold=0))
