"""Long outputs in a session: the model reads a cut, the log keeps the whole (in the record,
or as an artifact the store holds), the read tool gives the model the rest, a nested call's
caller gets the whole, and a replay gives recorded tools back what they returned."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
from conftest import SESSION_ID, run_session

from engine import (Annotations, Limits, ModelView, Session, ToolContext, approve_all,
                    read_output, tool)
from engine.core.views import ToolResultEntry
from engine.models import FauxModel, faux_text, faux_tool_call
from engine.models.faux import faux_message
from engine.models.protocol import ModelRequest
from engine.replay import redrive
from events import JsonlStore, MemoryStore
from events.artifacts import artifact_name
from events.types import Record, SessionStarted, ToolCallCompleted, ToolCallFailed

SAFE = Annotations(read_only=True, open_world=False)
BUILD_LOG = "".join(f"step {i}: compiled\n" for i in range(2_000))


@tool(annotations=SAFE, model_view=ModelView(max_lines=10))
async def build() -> str:
    """Run the build."""
    return BUILD_LOG


@tool(annotations=SAFE)
async def dump(size: int) -> str:
    """Print ``size`` characters."""
    return "".join(f"{i:09d}\n" for i in range(size // 10))


def completed(records: list[Record], call_id: str) -> ToolCallCompleted:
    [event] = [r.event for r in records
               if isinstance(r.event, ToolCallCompleted) and r.event.call_id == call_id]
    return event


def tool_text(request: ModelRequest, call_id: str) -> str:
    [entry] = [e for e in request.transcript
               if isinstance(e, ToolResultEntry) and e.call_id == call_id]
    return entry.result.text


def read_the_gap(request: ModelRequest) -> Any:
    """The model's next step: read what the cut of call 1.0 left out, as its marker says."""
    marker = tool_text(request, "1.0")
    offset, length = map(int, re.search(r"offset=(\d+), length=(\d+)", marker).groups())  # type: ignore[union-attr]
    return faux_message([faux_tool_call("read_output", {"call_id": "1.0", "offset": offset,
                                                        "length": min(length, 16_000)})])


async def test_the_model_reads_a_cut_the_log_keeps_the_whole_and_reads_on() -> None:
    state, records, model = await run_session(
        [build, read_output], [faux_tool_call("build"), read_the_gap, faux_text("done")],
        approver=approve_all)
    seen = tool_text(model.requests[1], "1.0")
    assert len(seen.splitlines()) <= 10 and seen.startswith("step 0: compiled\n")
    assert seen.endswith("step 1999: compiled\n") and 'read_output(call_id="1.0"' in seen
    end = completed(records, "1.0")
    assert end.result.text == seen  # the record holds what the model read ...
    assert end.kept is not None and end.kept.whole is not None  # ... and the whole
    assert end.kept.whole.text == BUILD_LOG
    read = completed(records, "2.0").result.text
    gap_start = int(re.search(r"offset=(\d+)", seen).group(1))  # type: ignore[union-attr]
    assert read.split("\n", 1)[1] == BUILD_LOG[gap_start:gap_start + 16_000]
    assert state.calls["2.0"].status == "completed"


async def test_a_session_view_cuts_the_tools_that_set_none_and_is_recorded() -> None:
    view = ModelView(max_bytes=2_000)
    state, records, model = await run_session(
        [dump], [faux_tool_call("dump", {"size": 50_000}), faux_text("done")],
        approver=approve_all, model_view=view)
    started = records[0].event
    assert isinstance(started, SessionStarted) and started.settings is not None
    assert started.settings.model_view == view
    seen = tool_text(model.requests[1], "1.0")
    assert len(seen.encode()) <= 2_000 and "the log keeps the whole result" in seen
    kept = completed(records, "1.0").kept
    assert kept is not None and kept.whole is not None and len(kept.whole.text) == 50_000


async def test_a_result_within_the_view_is_read_whole_and_kept_once() -> None:
    state, records, model = await run_session(
        [dump], [faux_tool_call("dump", {"size": 100}), faux_text("done")],
        approver=approve_all, model_view=ModelView(max_lines=50))
    end = completed(records, "1.0")
    assert end.kept is None and len(end.result.text) == 100


async def test_a_result_over_the_log_limit_is_an_artifact_beside_the_log(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    limits = Limits(max_result_bytes=20_000)
    model = FauxModel([faux_tool_call("dump", {"size": 300_000}), read_the_gap,
                       faux_text("done")])
    with JsonlStore(path) as store:
        async with Session.open(store, model=model, tools=[dump, read_output], limits=limits,
                                approver=approve_all, session_id="s", create=True):
            pass
        async with Session.open(store, model=model, tools=[dump, read_output], limits=limits,
                                approver=approve_all, session_id="s") as session:
            await session.prompt("go")
        records = await store.read("s")
        end = completed(records, "1.0")
        assert end.kept is not None and end.kept.whole is None and end.kept.size > 300_000
        assert max(len(line) for line in path.read_bytes().splitlines()) < 30_000
        artifact = path.parent / f"{path.name}.artifacts" / artifact_name("s", "1.0",
                                                                          end.kept.sha256)
        assert artifact.exists() and (os.stat(artifact).st_mode & 0o777) == 0o600
        assert (await store.verify()).ok
        read = completed(records, "2.0").result.text
        offset = int(re.search(r"offset=(\d+)", end.result.text).group(1))  # type: ignore[union-attr]
        whole = "".join(f"{i:09d}\n" for i in range(30_000))
        assert read.split("\n", 1)[1] == whole[offset:offset + 16_000]  # from the artifact
        # a replay gives the recorded tool the whole result back: nothing diverges
        report = await redrive(records, artifacts=store)
        assert report.ok, [d.describe() for d in report.divergences]


async def test_the_read_tool_says_when_the_artifact_is_gone(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    limits = Limits(max_result_bytes=20_000)
    with JsonlStore(path) as store:
        state, records, _ = await run_session(
            [dump, read_output], [faux_tool_call("dump", {"size": 300_000}), faux_tool_call(
                "read_output", {"call_id": "1.0", "offset": 0, "length": 10}),
                faux_text("done")], approver=approve_all, limits=limits, store=store)
    assert completed(records, "2.0").result.text.split("\n", 1)[1] == "000000000\n"
    with JsonlStore(path) as store:
        for name in (path.parent / f"{path.name}.artifacts").rglob("*.json"):
            name.unlink()
        model = FauxModel([faux_tool_call("read_output", {"call_id": "1.0"}),
                           faux_text("done")])
        async with Session.open(store, model=model, tools=[dump, read_output], limits=limits,
                                approver=approve_all, session_id=SESSION_ID) as session:
            await session.prompt("again")
            last = [c for c in session.state.calls.values() if c.name == "read_output"][-1]
            failed = last.result
        assert failed is not None and failed.is_error and "is missing" in failed.text
        assert not (await store.verify()).ok


async def test_a_store_that_keeps_no_artifacts_fails_the_call_as_too_large() -> None:
    class Plain(MemoryStore):
        put_artifact = None  # type: ignore[assignment]

    state, records, _ = await run_session(
        [dump], [faux_tool_call("dump", {"size": 300_000}), faux_text("done")],
        approver=approve_all, limits=Limits(max_result_bytes=20_000), store=Plain())
    [failed] = [r.event for r in records if isinstance(r.event, ToolCallFailed)]
    assert failed.kind == "too_large" and failed.detail is not None
    assert failed.detail.limit == 20_000


async def test_a_nested_call_hands_its_caller_the_whole_result() -> None:
    @tool(annotations=SAFE)
    async def relay(ctx: ToolContext) -> str:
        """Build, as a nested call, and count what came back."""
        outcome = await ctx.execute_tool("build", {})
        return str(len(outcome.result.text))

    state, records, _ = await run_session(
        [build, relay], [faux_tool_call("relay"), faux_text("done")], approver=approve_all)
    assert completed(records, "1.0/0").kept is None  # the model did not read it: not cut
    assert completed(records, "1.0").result.text == str(len(BUILD_LOG))


def test_a_view_is_a_tools_own_and_refused_when_too_small() -> None:
    with pytest.raises(ValueError, match="at least"):
        @tool(annotations=SAFE, model_view=ModelView(max_bytes=50))
        async def tiny() -> str:
            """Tiny."""
            return ""
    assert build.snapshot().model_view == ModelView(max_lines=10)
