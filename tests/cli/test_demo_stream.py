"""The demo's command runner streams its output as progress, a line at a time, while the
command runs; the model reads only the result."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
from conftest import events_of
from hypothesis import given
from hypothesis import strategies as st
from tests.strategies import PROPERTY

from engine import Session, approve_all
from engine.demo import demo_tools, prepare_workspace
from engine.demo.process import LONGEST_LINE, MAX_OUTPUT, Lines
from events import MemoryStore
from events.results import TextContent
from events.types import Record, ToolCallCompleted, ToolProgress


def streamed(updates: list[ToolProgress]) -> list[str]:
    return [block.text for u in updates for block in u.content if isinstance(block, TextContent)]


async def run_command(tmp_path: Path, code: str, on_progress: Any = None,
                      ) -> tuple[list[Record], Any]:
    """``python -c code`` through the demo's run_command, called by the host."""
    workspace = prepare_workspace(tmp_path / "ws")
    store = MemoryStore()
    async with Session.open(store, tools=demo_tools(workspace), approver=approve_all,
                            session_id="s", create=True) as session:
        if on_progress is not None:
            session.on_progress(on_progress)
        outcome = await session.call_tool("run_command", {"argv": [sys.executable, "-c", code]})
    return await store.read("s"), outcome


async def test_the_runner_streams_each_line_in_order_before_the_result(tmp_path: Path) -> None:
    code = ("import sys\n"
            "for n in range(3):\n"
            "    print(f'line {n}', flush=True)\n"
            "print('oops', file=sys.stderr, flush=True)\n"
            "sys.stdout.write('no newline at the end')\n")
    records, outcome = await run_command(tmp_path, code)
    updates = events_of(records, ToolProgress)
    stdout = [u for u in updates if u.data is None]
    assert streamed(stdout) == ["line 0\n", "line 1\n", "line 2\n", "no newline at the end"]
    assert [(u.data, streamed([u])) for u in updates if u.data is not None] == [
        ({"stream": "stderr"}, ["oops\n"])]
    ended = next(i for i, r in enumerate(records) if isinstance(r.event, ToolCallCompleted))
    assert not any(isinstance(r.event, ToolProgress) for r in records[ended:])
    result = outcome.structured_content
    assert result["stdout"] == "".join(streamed(stdout)) and result["stderr"] == "oops\n"
    assert "line 0" not in str([u.message for u in updates])  # the output is content only


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs a named pipe")
async def test_the_host_hears_a_line_while_the_command_still_runs(tmp_path: Path) -> None:
    # the command prints a line, then waits on a named pipe that the host opens only when it
    # hears that line: it can end only if the host heard the line while it ran
    fifo = tmp_path / "go"
    os.mkfifo(fifo)
    heard: list[str] = []

    def hear(update: ToolProgress) -> None:
        heard.extend(streamed([update]))
        if heard == ["waiting\n"]:
            with open(fifo, "w") as pipe:
                pipe.write("go")

    code = (f"print('waiting', flush=True)\n"
            f"print('got', open({str(fifo)!r}).read(), flush=True)\n")
    with trio.fail_after(30):
        _, outcome = await run_command(tmp_path, code, hear)
    assert heard == ["waiting\n", "got go\n"]
    assert outcome.structured_content["exit_code"] == 0


async def test_output_past_what_the_result_keeps_is_not_streamed(tmp_path: Path) -> None:
    code = f"print('x' * {MAX_OUTPUT // 2 - 1}); print('y' * {MAX_OUTPUT}); print('z')"
    records, _ = await run_command(tmp_path, code)
    updates = events_of(records, ToolProgress)
    pieces = streamed(updates)
    assert len("".join(pieces)) == MAX_OUTPUT
    assert all(len(piece) <= LONGEST_LINE for piece in pieces)
    assert "z" not in "".join(pieces)
    assert updates[-1].message == (f"stdout: more than {MAX_OUTPUT} characters; the rest is "
                                   f"not streamed")


@PROPERTY
@given(data=st.binary(max_size=300) | st.text(alphabet="ab\n\u00e9\u20ac",
                                              max_size=300).map(str.encode),
       cuts=st.lists(st.integers(0, 300), max_size=6))
def test_lines_joined_are_the_stream_and_do_not_depend_on_how_it_was_read(
        data: bytes, cuts: list[int]) -> None:
    def pieces(chunks: list[bytes]) -> list[str]:
        lines = Lines()
        out = [piece for chunk in chunks for piece in lines.feed(chunk)]
        return out + lines.end()

    edges = sorted({0, len(data), *(min(c, len(data)) for c in cuts)})
    read = pieces([data[a:b] for a, b in zip(edges, edges[1:])])
    assert "".join(read) == data.decode("utf-8", errors="replace")
    assert read == pieces([data])  # the same updates, however the bytes came
    assert all(piece for piece in read)
    assert all(piece.endswith("\n") or len(piece) == LONGEST_LINE for piece in read[:-1])


def test_a_long_line_is_streamed_in_pieces_without_waiting_for_its_end() -> None:
    lines = Lines()
    assert lines.feed(b"a" * (LONGEST_LINE + 5)) == ["a" * LONGEST_LINE]
    assert lines.feed(b"b\n") == ["aaaaab\n"]
    assert lines.end() == []
