"""The official MCP client calls a session's tools through engine.mcp's server: in memory, and
over stdio with ``toolledger serve`` in a subprocess.

Each ``tools/call`` is a host call of the session (``"h{n}"`` in its log); the client reads
annotations and schemas under MCP's names, results with ``structuredContent`` and ``isError``,
tool failures and refusals as error results, and an unknown tool as a protocol error.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from functools import partial
from pathlib import Path
from typing import Any

import mcp_types
import pytest
import trio
import trio.testing
from mcp import Client, MCPError, StdioServerParameters

from engine import LATER, Annotations, ApprovalRequest, Session, ToolResult, text, tool
from engine.hosts.aio import Session as AioSession
from engine.hosts.approvalsocket import pending_approvals
from engine.mcp import mcp_server
from engine.models import FauxModel
from events import JsonlStore, MemoryStore
from tests.frameworks_served import Served

ROOT = Path(__file__).resolve().parents[2]


@tool(input_schema={"type": "object", "properties": {"path": {"type": "string"}},
                    "required": ["path"]},
      output_schema={"type": "object", "properties": {"size": {"type": "integer"}},
                     "required": ["size"]},
      annotations=Annotations(title="Stat", read_only=True))
async def stat(call: Any, ctx: Any) -> ToolResult:
    """Size of a file."""
    return ToolResult(content=[text("3 bytes")], structured_content={"size": 3})


@tool(annotations=Annotations(read_only=True))
async def explode(call: Any, ctx: Any) -> ToolResult:
    """Fail."""
    raise ValueError("boom")


@tool
async def wipe(call: Any, ctx: Any) -> ToolResult:
    """Wipe everything (declares nothing: needs approval)."""
    return ToolResult(content=[text("wiped")])


@tool(annotations=Annotations(read_only=True), exposure="hidden")
async def secret(call: Any, ctx: Any) -> ToolResult:
    """Only for other tools."""
    return ToolResult(content=[text("psst")])


@tool(annotations=Annotations(read_only=True), exposure="deferred")
async def later_tool(call: Any, ctx: Any) -> ToolResult:
    """Waits to be activated for the model; the host may call it."""
    return ToolResult(content=[text("deferred")])


TOOLS = [stat, explode, wipe, secret, later_tool]


class Later:
    """An approver that answers "later", and says when it was asked."""

    def __init__(self) -> None:
        self.asked = trio.Event()

    async def __call__(self, request: ApprovalRequest) -> Any:
        self.asked.set()
        return LATER


def dump(model: Any) -> Any:
    return model.model_dump(by_alias=True, exclude_none=True, mode="json")


async def test_the_listing_declares_each_tool_as_registered_and_exposure_decides() -> None:
    async with Session.open(MemoryStore(), model=FauxModel([]), tools=TOOLS) as session:
        async with Client(mcp_server(session)) as client:
            assert client.server_info is not None and client.server_info.name == "toolledger"
            listed = {tool.name: dump(tool) for tool in (await client.list_tools()).tools}
            assert set(listed) == {"stat", "explode", "wipe", "later_tool"}  # not hidden
            assert listed["stat"] == {
                "name": "stat", "title": "Stat", "description": "Size of a file.",
                "inputSchema": stat.input_schema, "outputSchema": stat.output_schema,
                "annotations": {"title": "Stat", "readOnlyHint": True},
            }
            assert "annotations" not in listed["wipe"]  # unset: MCP's defaults
            await session.set_active_tools(["stat"])
            listed_now = {tool.name for tool in
                          (await client.list_tools(cache_mode="refresh")).tools}
            assert listed_now == {"stat", "later_tool"}


async def test_results_errors_refusals_and_unknown_tools() -> None:
    async with Session.open(MemoryStore(), model=FauxModel([]), tools=TOOLS) as session:
        async with Client(mcp_server(session)) as client:
            done = await client.call_tool("stat", {"path": "a"})
            assert done.structured_content == {"size": 3} and not done.is_error
            assert dump(done)["content"] == [{"type": "text", "text": "3 bytes"}]
            failed = await client.call_tool("explode", {})
            assert failed.is_error and "boom" in failed.content[0].text
            invalid = await client.call_tool("stat", {"path": 5})
            assert invalid.is_error and "Invalid arguments" in invalid.content[0].text
            denied = await client.call_tool("wipe", {})  # the default approver refuses
            assert denied.is_error and "not approved" in denied.content[0].text
            for unknown in ("nosuch", "secret"):
                with pytest.raises(MCPError) as raised:
                    await client.call_tool(unknown, {})
                assert raised.value.error.code == mcp_types.INVALID_PARAMS
        calls = session.calls
    assert [calls[f"h{n}"].origin for n in range(4)] == ["host"] * 4
    assert [calls[f"h{n}"].status for n in range(4)] == [
        "completed", "failed", "failed", "denied"]
    assert "h4" not in calls  # unknown tools are not calls


async def test_an_approval_answered_later_holds_the_clients_call_until_the_host_answers(
) -> None:
    later = Later()
    results: list[Any] = []
    async with Session.open(MemoryStore(), model=FauxModel([]), tools=TOOLS,
                            approver=later) as session:
        async with Client(mcp_server(session)) as client:
            async with trio.open_nursery() as nursery:
                async def call() -> None:
                    results.append(await client.call_tool("wipe", {}))

                nursery.start_soon(call)
                await later.asked.wait()
                assert [request.call_id for request in session.pending_approvals()] == ["h0"]
                assert results == []
                await session.resolve_approval("h0", granted=True)
    [result] = results
    assert not result.is_error and result.content[0].text == "wiped"


async def test_a_client_that_gives_up_ends_the_call_as_cancelled() -> None:
    later = Later()
    async with Session.open(MemoryStore(), model=FauxModel([]), tools=TOOLS,
                            approver=later) as session:
        async with Client(mcp_server(session)) as client:
            with trio.CancelScope() as scope:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(client.call_tool, "wipe", {})
                    await later.asked.wait()
                    scope.cancel()
            await trio.testing.wait_all_tasks_blocked()  # the server hears of it
            assert session.calls["h0"].status == "cancelled"
    assert session.pending_approvals() == ()


async def test_concurrent_calls_run_at_once() -> None:
    arrived = 0
    everyone = trio.Event()

    @tool(annotations=Annotations(read_only=True))
    async def meet(call: Any, ctx: Any) -> ToolResult:
        """Wait until three calls are in."""
        nonlocal arrived
        arrived += 1
        if arrived == 3:
            everyone.set()
        await everyone.wait()
        return ToolResult(content=[text(str(call.arguments["n"]))])

    results: dict[int, Any] = {}
    async with Session.open(MemoryStore(), model=FauxModel([]), tools=[meet]) as session:
        async with Client(mcp_server(session)) as client:
            with trio.fail_after(60):  # a guard against a hang, not a measurement
                async with trio.open_nursery() as nursery:
                    for n in range(3):
                        async def call(n: int = n) -> None:
                            results[n] = await client.call_tool("meet", {"n": n})

                        nursery.start_soon(call)
    assert {n: result.content[0].text for n, result in results.items()} == {
        0: "0", 1: "1", 2: "2"}
    assert sorted(session.calls) == ["h0", "h1", "h2"]


async def test_toolledger_serve_over_stdio_with_the_official_client(tmp_path: Path) -> None:
    log = tmp_path / "served.jsonl"
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "engine.cli", "serve", "mcp_served:session",
                                      "--name", "served"],
        cwd=str(Path(__file__).resolve().parents[1]),
        env={"PYTHONPATH": str(ROOT), "SERVED_LOG": str(log)})
    async with Client(params) as client:
        assert client.server_info is not None and client.server_info.name == "served"
        assert [tool.name for tool in (await client.list_tools()).tools] == ["stat", "wipe"]
        done = await client.call_tool("stat", {"path": "x"})
        assert done.structured_content == {"size": 1}
        denied = await client.call_tool("wipe", {})
        assert denied.is_error
    records = [record async for record in _records(log)]
    assert [r.event.call_id for r in records if type(r.event).__name__ == "ToolCallRequested"] \
        == ["h0", "h1"]


async def _records(path: Path) -> Any:
    store = JsonlStore(str(path))
    try:
        for session_id in await store.sessions():
            for record in await store.read(session_id):
                yield record
    finally:
        store.close()




@pytest.mark.parametrize(("target", "says"), [
    ("nocolon", "is not MODULE:NAME"),
    ("no_such_module_here:session", "no module named 'no_such_module_here'"),
    ("mcp_served:nothing", "mcp_served has no function 'nothing'"),
    ("mcp_served:stat", "mcp_served:stat is a ToolSpec, not a function"),
    ("os:getcwd", "returned str, not an async context manager"),
])
def test_toolledger_serve_says_what_is_wrong_with_its_target(
    target: str, says: str, capsys: pytest.CaptureFixture[str],
) -> None:
    from engine.cli import main

    assert main(["serve", target]) == 1
    err = capsys.readouterr().err
    assert err.startswith("toolledger: error: ") and says in err and err.count("\n") == 1


def test_an_asyncio_host_serves_an_engine_aio_session() -> None:
    async def main() -> None:
        async with AioSession.open(MemoryStore(), model=FauxModel([]), tools=TOOLS) as session:
            async with Client(mcp_server(session)) as client:
                listed = {tool.name for tool in (await client.list_tools()).tools}
                assert listed == {"stat", "explode", "wipe", "later_tool"}
                done = await client.call_tool("stat", {"path": "a"})
                assert done.structured_content == {"size": 3} and not done.is_error
                denied = await client.call_tool("wipe", {})
                assert denied.is_error and "not approved" in denied.content[0].text
            assert [session.calls[f"h{n}"].status for n in range(2)] == ["completed", "denied"]

    asyncio.run(main())


async def test_a_client_that_goes_away_while_a_call_waits_ends_the_server_quietly(
    tmp_path: Path,
) -> None:
    """Its process ended (its pipes closed) with a call waiting for approval: the call ends
    as cancelled in the log, and the server ends with status 0 and nothing on stderr, though
    the answer to that call has nowhere to go."""
    served = Served(str(tmp_path / "served.jsonl"), approvals=str(tmp_path / "a.sock"))
    process = await trio.lowlevel.open_process(
        [served.command, *served.args], cwd=served.cwd, env={**os.environ, **served.env},
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdin and process.stdout and process.stderr
    try:
        with trio.fail_after(60):  # a guard against a hang, not a measurement
            for message in [
                {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                 "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                            "clientInfo": {"name": "gone", "version": "1"}}},
                {"jsonrpc": "2.0", "method": "notifications/initialized"},
                {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                 "params": {"name": "delete_note", "arguments": {"title": "todo"}}},
            ]:
                await process.stdin.send_all(json.dumps(message).encode() + b"\n")
            answered = b""
            while b"\n" not in answered:  # it is up, and its socket with it
                answered += await process.stdout.receive_some()
            assert json.loads(answered.partition(b"\n")[0])["id"] == 1
            [request] = await trio.to_thread.run_sync(
                partial(pending_approvals, served.approvals or "", wait=True),
                abandon_on_cancel=True)
            assert request.call_id == "h0"
            await process.stdout.aclose()  # the client is gone
            await process.stdin.aclose()
            stderr = b""
            while chunk := await process.stderr.receive_some():
                stderr += chunk
            assert (await process.wait(), stderr.decode()) == (0, "")
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    calls = await trio.to_thread.run_sync(served.calls)
    assert calls["h0"].status == "cancelled"
