"""Facts carry their data: a decision records the machine-readable reason for it, and replay
reads those fields, never a message.

- A session's start records its settings; a failure records the limit it hit, the type it
  got, where and why a value was not JSON; an answer records whether the host gave it at a
  pause.
- Random scripted sessions re-driven from their logs give the live run's events, call by call,
  and its transcript, even when every message the engine wrote in the log is replaced by words
  that mean nothing: so no part of the replay reads one.
- engine/replay uses no regular expression and evaluates no text (checked on its syntax tree).
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import trio
from conftest import by_call
from hypothesis import HealthCheck, Phase, given, settings
from trio.testing import MockClock

from engine import LATER, Annotations, Limits, Session, ToolResult, approve_all, text, tool
from engine.core.limits import result_size
from engine.core.reducers import TranscriptEntry, fold
from engine.models import FauxModel, faux_text, faux_tool_call
from engine.replay import redrive
from events import MemoryStore, Record
from events.codec import converter
from events.fast.readers import FAST
from events.results import error_result
from events.stores import read_jsonl
from events.types import (
    ApprovalRequested,
    ApprovalResolved,
    FailureDetail,
    PolicyDecided,
    SessionSettings,
    SessionStarted,
    ToolCallCancelled,
    ToolCallDenied,
    ToolCallFailed,
)
from tests.corpus.scenarios import SCENARIOS
from tests.corpus.scenarios import record as record_scenario
from tests.strategies import SessionScript, counting_clock, run_script, session_scripts

ROOT = Path(__file__).resolve().parents[2]
SAFE = Annotations(read_only=True, open_world=False)
PROPERTY = settings(max_examples=100, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow],
                    phases=[phase for phase in Phase if phase is not Phase.explain])


def virtual(function: Any, *args: Any) -> Any:
    return trio.run(function, *args, clock=MockClock(autojump_threshold=0))


async def session_log(tools: Sequence[Any], script: Sequence[Any], **options: Any) -> list[Record]:
    store = MemoryStore()
    options.setdefault("approver", approve_all)
    async with Session.open(store, model=FauxModel(script), tools=tools, session_id="s",
                            create=True, clock=counting_clock(), **options) as session:
        await session.prompt("go")
    return await store.read("s")


def failures(records: Sequence[Record]) -> dict[str, ToolCallFailed]:
    return {r.event.call_id: r.event for r in records if isinstance(r.event, ToolCallFailed)}


# -- what is recorded ------------------------------------------------------------------------


def test_a_session_records_the_settings_it_was_opened_with() -> None:
    async def main() -> None:
        records = await session_log([], [faux_text("hi")], max_turns=7, max_depth=3,
                                    limits=Limits(max_argument_bytes=50, max_result_bytes=60))
        first = records[0].event
        assert isinstance(first, SessionStarted)
        assert first.settings == SessionSettings(max_turns=7, max_depth=3,
                                                 max_argument_bytes=50, max_result_bytes=60,
                                                 max_artifact_bytes=Limits().max_artifact_bytes)

    virtual(main)


@tool(annotations=SAFE)
async def sloppy(call: Any, ctx: Any) -> Any:
    kind = call.arguments.get("kind")
    if kind == "set":
        return ToolResult(structured_content={"items": [1, {"a.b": {2, 3}}]})
    if kind == "deep":
        value: Any = 1
        for _ in range(101):
            value = [value]
        return ToolResult(structured_content=value)
    if kind == "big":
        return ToolResult(content=[text("x" * 500)])
    if kind == "raw":
        return b"bytes"
    if kind == "nested":
        await ctx.execute_tool("sloppy", {"kind": float("inf")})
        await ctx.execute_tool("sloppy", {"kind": "x" * 300})
        await ctx.execute_tool("dig", {})
    return ToolResult(content=[text("ok")])


@tool(annotations=SAFE)
async def dig(call: Any, ctx: Any) -> ToolResult:
    outcome = await ctx.execute_tool("dig", {})
    return ToolResult(content=[text(outcome.result.text)])


def test_a_failure_records_the_limit_type_or_path_its_message_names() -> None:
    async def main() -> None:
        kinds = ["set", "deep", "big", "raw", "nested"]
        records = await session_log(
            [sloppy, dig], [[faux_tool_call("sloppy", {"kind": k}) for k in kinds],
                            faux_text("done")],
            max_depth=2, limits=Limits(max_argument_bytes=200, max_result_bytes=400,
                                                   max_artifact_bytes=400))
        failed = failures(records)
        assert failed["1.0"].detail == FailureDetail(path=("items", 1, "a.b"), problem="type",
                                                     type="set")
        assert failed["1.1"].detail == FailureDetail(path=(0,) * 100, problem="depth",
                                                     limit=100)
        assert failed["1.2"].kind == "too_large"
        # the size of the whole result as its record would hold it, not of its text alone
        big = result_size(ToolResult(content=[text("x" * 500)]))
        assert big > 500 and failed["1.2"].detail == FailureDetail(limit=400, size=big)
        assert failed["1.3"].detail == FailureDetail(type="bytes")
        assert failed["1.4/0"].kind == "invalid_arguments"
        assert failed["1.4/0"].detail == FailureDetail(path=("kind",), problem="number",
                                                       value="inf")
        assert failed["1.4/1"].detail == FailureDetail(limit=200, size=len('{"kind":""}') + 300)
        assert failed["1.4/2/0/0"].detail == FailureDetail(limit=2)
        # what a person reads says the same
        assert "$.items[1].a.b: a set is not a JSON value" in failed["1.0"].message
        assert "over the limit of 400" in failed["1.2"].message
        # and it all replays, from the fields
        report = await redrive(records, clock=counting_clock())
        assert report.ok, [d.describe() for d in report.divergences]

    virtual(main)


@tool(annotations=Annotations(destructive=True))
async def wipe(call: Any, ctx: Any) -> ToolResult:
    return ToolResult(content=[text("wiped")])


def test_an_answer_records_whether_the_host_gave_it_at_a_pause() -> None:
    async def later(request: Any) -> Any:
        return LATER if request.call_id == "1.1" else True

    async def main() -> None:
        store = MemoryStore()
        model = FauxModel([[faux_tool_call("wipe"), faux_tool_call("wipe")], faux_text("ok")])
        async with Session.open(store, model=model, tools=[wipe], approver=later,
                                session_id="s", create=True, clock=counting_clock()) as session:
            result = await session.prompt("go")
            assert result.stop == "paused"
            await session.resolve_approval("1.1", True)
            await session.resume()
        records = await store.read("s")
        answers = {r.event.call_id: r.event.later for r in records
                   if isinstance(r.event, ApprovalResolved)}
        assert answers == {"1.0": False, "1.1": True}
        assert (await redrive(records, clock=counting_clock())).ok

    virtual(main)


def test_the_fast_reader_reads_the_new_fields_as_the_converter_does() -> None:
    result = {"content": [], "structured_content": None, "is_error": True}
    failed = {"call_id": "1.0", "kind": "too_large", "message": "m", "result": result,
              "error": None, "returned": None}
    for data in (failed, failed | {"detail": {"limit": 3, "size": 4}},
                 failed | {"detail": {"type": "bytes"}}):
        assert FAST[ToolCallFailed](data) == converter.structure(data, ToolCallFailed)
    resolved = {"call_id": "1.0", "granted": True, "scope": "once", "reason": None}
    for data in (resolved, resolved | {"later": True}, resolved | {"later": False}):
        assert FAST[ApprovalResolved](data) == converter.structure(data, ApprovalResolved)


# -- replay reads fields only ----------------------------------------------------------------


BLIND = "(words that mean nothing)"


def blinded(records: Sequence[Record]) -> list[Record]:
    """The log with every message the engine wrote for people replaced by :data:`BLIND`.

    Kept: the data the replay hands back to a stand-in as it is (a handler's block reason or
    an approver's reason, a result the model saw, an error the stand-in raises again, and the
    message of a failure whose result a ``tool_result`` handler changed, which is what that
    handler saw)."""
    out = []
    for record in records:
        event = record.event
        if isinstance(event, (PolicyDecided, ApprovalRequested, ToolCallCancelled)) or (
                isinstance(event, ToolCallDenied) and event.by == "policy"):
            event = attrs.evolve(event, reason=BLIND)
        elif isinstance(event, ToolCallFailed) and event.result == error_result(event.message):
            event = attrs.evolve(event, message=BLIND)
        out.append(attrs.evolve(record, event=event))
    return out


def transcript(records: Sequence[Record]) -> list[TranscriptEntry]:
    return list(fold(records).transcript)


def assert_replays_as_lived(records: Sequence[Record], **setup: Any) -> None:
    blind = blinded(records)
    assert blind != list(records) or not any(isinstance(r.event, PolicyDecided) for r in records)

    async def again() -> Any:
        with trio.fail_after(1_000_000):  # virtual seconds: a replay that hangs fails here
            return await redrive(blind, clock=counting_clock(), **setup)

    report = virtual(again)
    assert by_call(report.replayed) == by_call(records)
    assert transcript(report.replayed) == transcript(records)


@PROPERTY
@given(session_scripts())
def test_a_random_session_replays_as_it_ran_without_reading_a_message(
    script: SessionScript,
) -> None:
    run = virtual(run_script, script, MemoryStore())
    assert_replays_as_lived(run.stored_records)


def test_failures_that_name_a_limit_a_type_or_a_path_replay_without_reading_a_message(
    tmp_path: Path,
) -> None:
    path = tmp_path / "facts.jsonl"
    trio.run(lambda: record_scenario(SCENARIOS["facts"], path, session_id="facts"))
    records = read_jsonl(path)
    kinds = {event.kind for event in failures(records).values()}
    assert {"not_serialisable", "invalid_output", "invalid_arguments", "depth_limit"} <= kinds
    assert_replays_as_lived(records)


def test_replay_has_no_regular_expression_and_evaluates_no_text() -> None:
    """What replay needs is a field; a regular expression in engine/replay could only be
    reading words (and ``ast`` evaluating them)."""
    for source in sorted((ROOT / "engine" / "replay").glob("*.py")):
        tree = ast.parse(source.read_text(), filename=str(source))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                names = {(node.module or "").split(".")[0]} if node.level == 0 else set()
            else:
                continue
            assert not names & {"re", "regex", "ast", "parse"}, (
                f"{source.name}:{node.lineno} imports {sorted(names)}")
