"""`show` and `tail` print what tools reported as they ran: each progress update, the output
it streamed, and the nested call a forwarded one came from."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio
from conftest import counting_clock

from engine import Annotations, Session, ToolResult, approve_all, text, tool
from engine.cli import main
from engine.models import FauxModel, faux_text, faux_tool_call
from events import JsonlStore

SAFE = Annotations(read_only=True, open_world=False)


@tool(annotations=SAFE)
async def run_tests(call: Any, ctx: Any) -> ToolResult:
    """Run the tests, streaming their output."""
    ctx.report_progress("collecting", progress=0, total=2)
    ctx.report_progress(content="PASS test_add\nFAIL test_mean: \x1b[31m1.5\n")
    ctx.report_progress(content=[text("2 tests ran")])
    return ToolResult(content=[text("1 passed, 1 failed")])


@tool(annotations=SAFE)
async def review(call: Any, ctx: Any) -> ToolResult:
    """Run the tests as a nested call, passing their output on."""
    tests = await ctx.execute_tool("run_tests", {}, on_progress=ctx.forward_progress)
    return ToolResult(content=list(tests.content))


@pytest.fixture
def log(tmp_path: Path) -> Path:
    path = tmp_path / "run.jsonl"

    async def record() -> None:
        with JsonlStore(path) as store:
            model = FauxModel([faux_tool_call("review", {}), faux_text("one test fails")])
            async with Session.open(store, model=model, tools=[run_tests, review],
                                    approver=approve_all, session_id="s", create=True,
                                    clock=counting_clock()) as session:
                await session.prompt("test it")

    trio.run(record)
    return path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(list(argv)) == 0
    out, _ = capsys.readouterr()
    return out


def test_show_prints_each_update_its_output_and_where_a_forwarded_one_came_from(
        log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = run(capsys, "show", str(log))
    section = out[out.index("Progress (6 updates"):]
    assert [line.rstrip() for line in section.splitlines()[1:]] == [
        "1.0/0  run_tests  collecting (0/2)",
        "1.0    review     from 1.0/0: collecting (0/2)",
        "1.0/0  run_tests  │ PASS test_add",
        "                  │ FAIL test_mean: \\x1b[31m1.5",  # escaped, never obeyed
        "1.0    review     from 1.0/0: (its output, above)",
        "1.0/0  run_tests  │ 2 tests ran",
        "1.0    review     from 1.0/0: (its output, above)",
    ]
    transcript = out[out.index("Transcript"):out.index("Calls")]
    assert "PASS test_add" not in transcript  # the model read the result only
    assert "1 passed, 1 failed" in transcript


def test_show_prints_no_progress_section_for_a_session_without_updates(
        capsys: pytest.CaptureFixture[str]) -> None:
    corpus = Path(__file__).resolve().parents[1] / "corpus" / "v1" / "reference.jsonl"
    assert "Progress (" not in run(capsys, "show", str(corpus))


def test_tail_prints_the_streamed_output_under_its_record(
        log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = run(capsys, "tail", str(log)).splitlines()
    streamed = next(i for i, line in enumerate(lines)
                    if "tool_progress" in line and '"message": null' in line)
    assert '"content"' not in lines[streamed]
    assert [line.strip() for line in lines[streamed + 1:streamed + 3]] == [
        "│ PASS test_add", "│ FAIL test_mean: \\x1b[31m1.5"]
    forwarded = lines[streamed + 3]
    assert '"call_id": "1.0"' in forwarded and '"source": "1.0/0"' in forwarded
    assert "tool_progress" in lines[streamed + 4] and "│" not in forwarded
    # --json prints the records as they are, content included
    records = [json.loads(line) for line in run(capsys, "tail", str(log), "--json").splitlines()]
    contents = [r["data"]["content"] for r in records
                if r["type"] == "tool_progress" and "content" in r["data"]]
    assert contents[0] == [{"type": "text", "text": "PASS test_add\nFAIL test_mean: \x1b[31m1.5\n"}]
