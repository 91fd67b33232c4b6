"""Progress over MCP, both ways, with the official SDK's client and server.

Served: a client that asks for progress (a ``progress_callback``, which sends a progress token)
gets the call's updates as ``notifications/progress``, in order, before the result; in memory,
over stdio with ``toolledger serve``, and from an asyncio host. Mounted: a server's
notifications become ``tool_progress`` records of the call, heard by its parent and the host
like local progress. And the two together: a session served over MCP and mounted in another.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import trio
from hypothesis import given
from hypothesis import strategies as st
from mcp import Client, StdioServerParameters

from engine import Annotations, Limits, Session, ToolResult, approve_all, text, tool
from engine.hosts.aio import Session as AioSession
from engine.mcp import mcp_server, mount
from engine.mcp.progress import ServedNumbers, served_message
from engine.models import FauxModel, faux_text, faux_tool_call
from engine.testing.invariants import check_log
from events import JsonlStore, MemoryStore
from events.results import ImageContent
from events.types import ToolProgress
from mcp_reporting import TOOLS, reporter
from tests.strategies import PROPERTY

ROOT = Path(__file__).resolve().parents[2]
REPORTING = Path(__file__).resolve().parents[1] / "mcp_reporting.py"
SAFE = Annotations(read_only=True, open_world=False)

#: what a client hears of ``review``: its own update, then the forwarded ones; the second
#: nested call's numbers do not grow past the first's, so they are counted on, without a total
SERVED = [(0, None, "reviewing"), (1, 3, "checks 1/3"), (2, 3, "checks 2/3"),
          (3, 3, "checks 3/3"), (4, None, "lint 1/2"), (5, None, "lint 2/2")]


class Heard:
    """A client's progress callback, and what it heard."""

    def __init__(self) -> None:
        self.updates: list[tuple[float, float | None, str | None]] = []

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.updates.append((progress, total, message))


def numbers(records: Any, call_id: str) -> list[tuple[float | None, float | None, str | None]]:
    return [(e.progress, e.total, e.message) for e in (r.event for r in records)
            if isinstance(e, ToolProgress) and e.call_id == call_id]


# -- served ---------------------------------------------------------------------------------


async def test_a_served_tools_progress_reaches_the_client_that_asked_in_memory() -> None:
    async with Session.open(MemoryStore(), tools=TOOLS, approver=approve_all) as session:
        async with Client(mcp_server(session)) as client:
            heard = Heard()
            result = await client.call_tool("review", {}, progress_callback=heard)
            assert not result.is_error and heard.updates == SERVED
            quiet = await client.call_tool("review", {})  # no token: nothing is sent
            assert not quiet.is_error
        assert session.calls["h0"].progress_count == 6
        check_log(session.records)


async def test_a_served_tools_progress_reaches_the_client_over_stdio(tmp_path: Path) -> None:
    log = tmp_path / "served.jsonl"
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "engine.cli", "serve", "mcp_reporting:session"],
        cwd=str(REPORTING.parent), env={"PYTHONPATH": str(ROOT), "SERVED_LOG": str(log)})
    heard = Heard()
    async with Client(params) as client:
        result = await client.call_tool("review", {}, progress_callback=heard)
    assert not result.is_error and heard.updates == SERVED
    store = JsonlStore(str(log))
    try:
        [session_id] = await store.sessions()
        records = await store.read(session_id)
    finally:
        store.close()
    assert numbers(records, "h0") == [(None, None, "reviewing"), *(
        (n, 3, f"checks {n}/3") for n in (1, 2, 3)), *((n, 2, f"lint {n}/2") for n in (1, 2))]


def test_an_asyncio_host_serves_progress_too() -> None:
    async def main() -> None:
        async with AioSession.open(MemoryStore(), tools=TOOLS,
                                   approver=approve_all) as session:
            async with Client(mcp_server(session)) as client:
                heard = Heard()
                result = await client.call_tool("review", {}, progress_callback=heard)
                assert not result.is_error and heard.updates == SERVED

    asyncio.run(main())


@PROPERTY
@given(st.lists(st.tuples(st.one_of(st.none(), st.integers(-3, 10), st.floats(-1, 10)),
                          st.one_of(st.none(), st.integers(1, 10)))))
def test_the_progress_sent_grows_with_every_notification_and_keeps_a_growing_number(
        updates: list[tuple[float | None, float | None]]) -> None:
    served = ServedNumbers()
    sent: list[float] = []
    for given_progress, total in updates:
        update = ToolProgress(call_id="h0", progress=given_progress, total=total)
        progress, sent_total = served.of(update)
        if given_progress is not None and (not sent or given_progress > sent[-1]):
            assert (progress, sent_total) == (given_progress, total)  # the tool's own numbers
        else:
            assert sent_total is None
        assert not sent or progress > sent[-1]  # MCP: it grows with every notification
        sent.append(progress)


async def test_a_served_tools_streamed_output_reaches_the_client_as_messages() -> None:
    lines = ["collecting 2 tests\n", "PASS test_mean\n", "FAIL test_sum\n"]

    @tool(annotations=SAFE)
    async def run_tests(call: Any, ctx: Any) -> ToolResult:
        """Run the tests, streaming their output."""
        for line in lines:
            ctx.report_progress(content=[text(line)])
            await trio.lowlevel.checkpoint()
        ctx.report_progress("2 tests ran", content="1 failed\n")
        return ToolResult(content=[text("1 passed, 1 failed")])

    @tool(annotations=SAFE)
    async def review(call: Any, ctx: Any) -> ToolResult:
        """Run the tests as a nested call, passing their output on."""
        tests = await ctx.execute_tool("run_tests", {}, on_progress=ctx.forward_progress)
        return ToolResult(content=list(tests.content))

    async with Session.open(MemoryStore(), tools=[run_tests, review],
                            approver=approve_all) as session:
        async with Client(mcp_server(session)) as client:
            for name in ("run_tests", "review"):  # its own output, and a nested call's
                heard = Heard()
                result = await client.call_tool(name, {}, progress_callback=heard)
                assert result.content[0].text == "1 passed, 1 failed"  # the result alone
                assert heard.updates == [
                    *((n, None, line) for n, line in enumerate(lines)),
                    (3, None, "2 tests ran\n1 failed\n")]
        check_log(session.records)


@PROPERTY
@given(message=st.one_of(st.none(), st.text(max_size=5)),
       chunks=st.lists(st.text(max_size=5), max_size=3), image=st.booleans())
def test_a_served_message_is_the_updates_message_then_the_text_it_streamed(
        message: str | None, chunks: list[str], image: bool) -> None:
    blocks: list[Any] = [text(chunk) for chunk in chunks]
    if image:
        blocks.insert(len(blocks) // 2, ImageContent(data="AA==", mime_type="image/png"))
    sent = served_message(ToolProgress(call_id="h0", message=message, content=tuple(blocks)))
    streamed = "".join(chunks)
    if not streamed:
        assert sent == message  # as before content was streamed
    else:
        assert sent == (f"{message}\n{streamed}" if message else streamed)


# -- mounted ---------------------------------------------------------------------------------


async def test_a_mounted_servers_progress_becomes_the_calls_records_heard_by_all() -> None:
    parent_heard: list[Any] = []
    host_heard: list[Any] = []

    @tool(annotations=SAFE)
    async def tally(call: Any, ctx: Any) -> ToolResult:
        """Count on the server, passing its progress on."""

        def hear(update: ToolProgress) -> None:
            parent_heard.append((update.call_id, update.progress, update.total, update.message))
            ctx.forward_progress(update)

        outcome = await ctx.execute_tool("count", {"n": 3}, on_progress=hear)
        return ToolResult(content=[text(outcome.result.text)])

    model = FauxModel([faux_tool_call("tally", {}), faux_text("done")])
    async with Session.open(MemoryStore(), model=model, tools=[tally],
                            approver=approve_all) as session:
        session.on_progress(lambda u: host_heard.append((u.call_id, u.source, u.message)))
        async with mount(session, reporter(), hints={"count": SAFE}):
            await session.prompt("count")
        records = session.records
        assert session.calls["1.0/0"].status == "completed"
    steps = [(n, 3, f"step {n} of 3") for n in (1, 2, 3)]
    assert numbers(records, "1.0/0") == steps
    assert numbers(records, "1.0") == steps  # forwarded as the parent's own, numbers and all
    assert parent_heard == [("1.0/0", *step) for step in steps]
    assert host_heard == [entry for n in (1, 2, 3) for entry in (
        ("1.0/0", None, f"step {n} of 3"), ("1.0", "1.0/0", f"step {n} of 3"))]
    check_log(records, closed=True)


async def test_a_mounted_servers_progress_over_stdio_arrives_in_order_before_the_result(
) -> None:
    # as a module from the root, so that ``events`` is the package, not the tests' folder
    params = StdioServerParameters(command=sys.executable, args=["-m", "tests.mcp_reporting"],
                                   cwd=str(ROOT))
    async with Session.open(MemoryStore(), approver=approve_all) as session:
        async with mount(session, params):
            counted = await session.call_tool("count", {"n": 20})
            rambled = await session.call_tool("ramble", {"n": 3})
        records = session.records
    assert counted.result.text == "counted to 20" and rambled.result.text == "said"
    assert numbers(records, "h0") == [(n, 20, f"step {n} of 20") for n in range(1, 21)]
    assert numbers(records, "h1") == [(n * 10, None, f"thing {n}") for n in (1, 2, 3)]
    check_log(records)


async def test_a_servers_update_the_session_cannot_record_is_left_out() -> None:
    async with Session.open(MemoryStore(), approver=approve_all,
                            limits=Limits(max_result_bytes=1000)) as session:
        async with mount(session, reporter()):
            outcome = await session.call_tool("shout", {"size": 5000})
        assert outcome.result.text == "hoarse"
        assert numbers(session.records, "h0") == [(2, 2, "done shouting")]


# -- both ways ---------------------------------------------------------------------------------


async def test_a_session_served_over_mcp_and_mounted_in_another_passes_its_progress_on() -> None:
    async with Session.open(MemoryStore(), tools=TOOLS, approver=approve_all) as served:
        async with Session.open(MemoryStore(), approver=approve_all) as mounting:
            async with mount(mounting, mcp_server(served), prefix="far_"):
                heard: list[Any] = []
                outcome = await mounting.call_tool("far_review", {}, on_progress=heard.append)
            assert outcome.result.text == "reviewed"
            assert [(u.progress, u.total, u.message) for u in heard] == SERVED
            assert numbers(mounting.records, "h0") == SERVED
