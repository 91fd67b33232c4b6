"""``toolledger approvals``, ``approve`` and ``deny`` answer a served session's approvals from
another process: what they print (a request's text shown, never obeyed), what they answer, and
one line with exit 1 for each mistake, with nothing recorded.

The session is served in this test's trio loop (``serve_approvals``), and the commands run in a
worker thread, as at another terminal."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from engine import LATER, Annotations, Session, ToolResult, text, tool
from engine.cli import main
from engine.hosts.approvalsocket import serve_approvals
from events import MemoryStore

PATH_ARGUMENT = {"type": "object", "properties": {"path": {"type": "string"}},
                 "required": ["path"]}


@tool(input_schema=PATH_ARGUMENT, annotations=Annotations(destructive=True))
async def remove(call: Any, ctx: Any) -> ToolResult:
    """Remove a file."""
    return ToolResult(content=[text(f"removed {call.arguments['path']}")])


def later(request: Any) -> Any:
    return LATER


async def toolledger(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Run the command in a worker thread: its status, stdout and stderr."""
    status = await trio.to_thread.run_sync(partial(main, list(argv)))
    out, err = capsys.readouterr()
    return status, out, err


async def test_list_approve_and_deny(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    socket = str(tmp_path / "a.sock")
    outcomes: dict[str, Any] = {}
    async with Session.open(MemoryStore(), tools=[remove], approver=later) as session:
        async with serve_approvals(session, socket), trio.open_nursery() as nursery:
            assert await toolledger(capsys, "approvals", socket) == (
                0, "Nothing waits for an answer.\n", "")
            for path in ("a.txt", "\x1b[2Jb.txt"):
                async def call(path: str = path) -> None:
                    outcomes[path] = await session.call_tool("remove", {"path": path})

                nursery.start_soon(call)
                await session.wait_pending_approvals()
            while len(session.pending_approvals()) < 2:
                await trio.testing.wait_all_tasks_blocked()

            status, out, err = await toolledger(capsys, "approvals", socket, "--wait")
            assert (status, err) == (0, "")
            assert out.splitlines()[:3] == ["h0  remove", '    args    {"path": "a.txt"}',
                                            "    reason  remove needs approval: "
                                            "read_only=False (default), destructive=True, "
                                            "open_world=True (default)"]
            assert '{"path": "\\u001b[2Jb.txt"}' in out and "\x1b" not in out  # shown, not obeyed
            status, out, _ = await toolledger(capsys, "approvals", socket, "--json")
            assert [(r["call_id"], r["arguments"], r["origin"]) for r in json.loads(out)] == [
                ("h0", {"path": "a.txt"}, "host"), ("h1", {"path": "\x1b[2Jb.txt"}, "host")]
            assert "\x1b" not in out

            assert await toolledger(capsys, "approve", socket, "h0", "--arguments",
                                    '{"path": "c.txt"}') == (0, "h0 approved\n", "")
            assert await toolledger(capsys, "deny", socket, "h1", "--scope", "session",
                                    "--reason", "not that one") == (
                0, "h1 denied for the session\n", "")
    assert outcomes["a.txt"].result.text == "removed c.txt"  # the person's edit
    assert outcomes["\x1b[2Jb.txt"].result.text == "remove was not approved: not that one"
    assert session.calls["h0"].arguments == {"path": "c.txt"}


@pytest.mark.parametrize(("argv", "says"), [
    (["approve", "{socket}", "h7"], "call h7 is not waiting for an approval (it is unknown)"),
    (["deny", "{socket}", "h0"], "call h0 is not waiting for an approval (it is completed)"),
    (["approve", "{socket}", "h1", "--arguments", "not json"], "--arguments is not JSON"),
    (["approvals", "{missing}"], "nobody answers approvals at"),
])
async def test_mistakes_are_one_line_and_record_nothing(
    argv: list[str], says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    socket = str(tmp_path / "a.sock")
    async with Session.open(MemoryStore(), tools=[remove], approver=later) as session:
        async with serve_approvals(session, socket), trio.open_nursery() as nursery:
            nursery.start_soon(session.call_tool, "remove", {"path": "a"})
            await session.wait_pending_approvals()
            await session.resolve_approval("h0", granted=True)
            nursery.start_soon(session.call_tool, "remove", {"path": "b"})
            while len(session.calls) < 2 or not session.pending_approvals():
                await trio.testing.wait_all_tasks_blocked()
            recorded = len(session.records)
            filled = [arg.format(socket=socket, missing=str(tmp_path / "none.sock"))
                      for arg in argv]
            status, out, err = await toolledger(capsys, *filled)
            assert (status, out) == (1, "")
            assert err.startswith("toolledger: error: ") and says in err
            assert err.count("\n") == 1
            assert len(session.records) == recorded
            await session.resolve_approval("h1", granted=False)
