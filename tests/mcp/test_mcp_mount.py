"""Mounting MCP servers built with the official SDK: in memory, and over stdio in a subprocess.

The session calls the server's tools like its own: the policy reads MCP's defaults, or the
server's hints if the host trusts them, or the host's own, every call is logged with the
server's identity on the tool's registration, and whatever goes wrong on the server's side
(an error result, output that breaks the schema, no answer, a process that died) ends that
call alone, as a result the model reads.
"""

from __future__ import annotations

import subprocess
import sys
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio

from engine import LATER, Annotations, SchemaError, Session, ToolResult, approve_all, text, tool
from engine.mcp import mount
from engine.models import FauxModel, faux_text, faux_tool_call
from events import MemoryStore
from events.types import ToolCallCompleted, ToolCallDenied, ToolCallFailed, ToolRegistered

from mcp import StdioServerParameters
from mcp_servers import calculator, remote_ref_server
from tests.mcp.serverurl import server_url

SERVERS = Path(__file__).resolve().parents[1] / "mcp_servers.py"


def stdio_calculator() -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=[str(SERVERS)])


def ends(session: Session) -> dict[str, Any]:
    """Each call's terminal event, by the engine's call id."""
    out: dict[str, Any] = {}
    for record in session.records:
        event = record.event
        if isinstance(event, (ToolCallCompleted, ToolCallFailed, ToolCallDenied)):
            out[event.call_id] = event
    return out


async def test_mounted_tools_are_registered_with_prefix_hints_and_the_servers_identity() -> None:
    async with Session.open(MemoryStore(), model=FauxModel([])) as session:
        async with mount(session, calculator(), prefix="calc.") as mounted:
            assert mounted.server == "calculator" and mounted.version == "1.2.0"
            assert mounted.tools["add"] == "calc.add"
            snapshots = {r.event.spec.name: r.event.spec for r in session.records
                         if isinstance(r.event, ToolRegistered)}
    add, note = snapshots["calc.add"], snapshots["calc.write_note"]
    # the server's hints are recorded, not trusted: MCP's defaults (destructive, open-world)
    assert add.annotations == Annotations(title="Add")
    assert add.source is not None and add.source.hints == Annotations(title="Add", read_only=True)
    assert note.annotations == Annotations()
    assert add.output_schema is not None and add.output_schema["required"] == ["total"]
    assert add.input_schema["required"] == ["a", "b"]
    assert add.source is not None
    assert (add.source.server, add.source.version, add.source.tool) == (
        "calculator", "1.2.0", "add")


async def test_calls_are_governed_by_the_servers_hints_and_logged_like_local_ones() -> None:
    model = FauxModel([
        [faux_tool_call("calc.add", {"a": 2, "b": 3}),
         faux_tool_call("calc.write_note", {"text": "hi"}),
         faux_tool_call("calc.add", {"a": "two", "b": 3})],
        faux_text("done"),
    ])
    async with Session.open(MemoryStore(), model=model) as session:  # approver: deny_all
        async with mount(session, calculator(), prefix="calc.", trust_hints=True):
            await session.prompt("go")
        done = ends(session)
    assert isinstance(done["1.0"], ToolCallCompleted)  # read-only, as the server says
    assert done["1.0"].result.structured_content == {"total": 5}
    # no hints: destructive by MCP's default, so the policy asks, and deny_all refuses
    assert isinstance(done["1.1"], ToolCallDenied)
    # our schema rules check the arguments before the server is asked
    assert isinstance(done["1.2"], ToolCallFailed) and done["1.2"].kind == "invalid_arguments"


async def test_the_host_overrides_the_servers_hints() -> None:
    model = FauxModel([
        [faux_tool_call("write_note", {"text": "hi"}), faux_tool_call("add", {"a": 1, "b": 1})],
        faux_text("done"),
    ])
    async with Session.open(MemoryStore(), model=model) as session:
        async with mount(session, calculator(), trust_hints=False,
                         hints={"write_note": Annotations(read_only=True)}):
            await session.prompt("go")
        done = ends(session)
        tools = session.state.tools
    assert tools["write_note"].annotations == Annotations(read_only=True)
    assert tools["add"].annotations == Annotations(title="Add")  # the server's hints dropped
    assert isinstance(done["1.0"], ToolCallCompleted)
    assert done["1.0"].result.content[0].text == "noted: hi"
    assert isinstance(done["1.1"], ToolCallDenied)


async def test_a_servers_error_result_is_the_calls_error_result() -> None:
    model = FauxModel([faux_tool_call("fail", {}), faux_text("done")])
    async with Session.open(MemoryStore(), model=model, approver=approve_all) as session:
        async with mount(session, calculator()):
            await session.prompt("go")
        done = ends(session)
    assert isinstance(done["1.0"], ToolCallCompleted)
    assert done["1.0"].result.is_error
    assert "the disk is full" in done["1.0"].result.content[0].text


async def test_a_server_that_does_not_answer_times_out_and_the_session_goes_on(
    autojump_clock: Any,
) -> None:
    model = FauxModel([faux_tool_call("hang", {}), faux_tool_call("add", {"a": 1, "b": 2}),
                       faux_text("done")])
    async with Session.open(MemoryStore(), model=model, approver=approve_all) as session:
        async with mount(session, calculator(), timeout=5):
            result = await session.prompt("go")
        done = ends(session)
    assert result.stop == "end_turn"
    assert isinstance(done["1.0"], ToolCallFailed) and done["1.0"].kind == "timeout"
    assert isinstance(done["2.0"], ToolCallCompleted)


async def test_a_collision_with_another_tool_is_refused_and_nothing_is_registered() -> None:
    @tool
    async def add(call: Any, ctx: Any) -> ToolResult:
        """A local add."""
        return ToolResult(content=[text("local")])

    async with Session.open(MemoryStore(), model=FauxModel([]), tools=[add]) as session:
        # the message names both tools, and what to do
        with pytest.raises(ValueError, match="'calculator' 1.2.0 .*'add'.* a tool the host"
                                             ".* prefix="):
            async with mount(session, calculator()):
                pass
        assert set(session.state.tools) == {"add"}
        async with mount(session, calculator(), prefix="calc.", only=["add"]):
            assert set(session.state.tools) == {"add", "calc.add"}


async def test_a_schema_our_rules_refuse_stops_the_mount_until_the_tool_is_left_out() -> None:
    async with Session.open(MemoryStore(), model=FauxModel([])) as session:
        with pytest.raises(SchemaError, match="fetchy"):
            async with mount(session, remote_ref_server()):
                pass
        assert not session.state.tools
        async with mount(session, remote_ref_server(), only=["plain"]) as mounted:
            assert mounted.tools == {"plain": "plain"}


async def test_a_paused_call_runs_on_a_new_connection_after_a_restart() -> None:
    store = MemoryStore()
    server = calculator()
    model = FauxModel([faux_tool_call("write_note", {"text": "later"})])

    async def later(request: Any) -> Any:
        return LATER

    async with Session.open(store, model=model, approver=later, session_id="s",
                            create=True) as session:
        async with mount(session, server):
            assert (await session.prompt("go")).stop == "paused"
    registrations = sum(isinstance(r.event, ToolRegistered) for r in await store.read("s"))

    async with Session.open(store, model=FauxModel([faux_text("done")]), session_id="s",
                            approver=approve_all) as session:
        async with mount(session, server):
            await session.resolve_approval("1.0", granted=True)
            assert (await session.resume()).stop == "end_turn"
        done = ends(session)
    assert done["1.0"].result.content[0].text == "noted: later"
    # the same server, the same tools: nothing registered again
    assert sum(isinstance(r.event, ToolRegistered) for r in await store.read("s")) == registrations


# -- over stdio, a subprocess ------------------------------------------------------------------

async def test_stdio_output_that_breaks_the_schema_is_invalid_output() -> None:
    model = FauxModel([faux_tool_call("calc.bad_count", {}),
                       faux_tool_call("calc.add", {"a": 1, "b": 2}), faux_text("done")])
    async with Session.open(MemoryStore(), model=model, approver=approve_all) as session:
        async with mount(session, stdio_calculator(), prefix="calc.") as mounted:
            assert mounted.server == "calculator"
            await session.prompt("go")
        done = ends(session)
    assert isinstance(done["1.0"], ToolCallFailed) and done["1.0"].kind == "invalid_output"
    # the session's own check, which keeps the value, as for a local tool
    assert "data.count must be bigger than or equal to 0" in done["1.0"].message
    assert done["1.0"].returned.structured_content == {"count": -1}
    assert done["1.0"].result.is_error
    assert done["2.0"].result.structured_content == {"total": 3}


async def test_stdio_a_server_that_dies_mid_call_fails_that_call_and_the_next_reconnects(
) -> None:
    model = FauxModel([faux_tool_call("die", {}), faux_tool_call("add", {"a": 1, "b": 2}),
                       faux_text("done")])
    async with Session.open(MemoryStore(), model=model, approver=approve_all) as session:
        async with mount(session, stdio_calculator()):
            result = await session.prompt("go")
        done = ends(session)
    assert result.stop == "end_turn"
    assert isinstance(done["1.0"], ToolCallFailed) and done["1.0"].kind == "raised"
    assert "closed the connection" in done["1.0"].message
    assert done["2.0"].result.structured_content == {"total": 3}


async def test_streamable_http_a_server_in_a_subprocess_is_mounted_by_its_url() -> None:
    model = FauxModel([faux_tool_call("add", {"a": 4, "b": 5}), faux_text("done")])
    async with trio.open_nursery() as nursery:
        process = await nursery.start(partial(
            trio.run_process, [sys.executable, str(SERVERS), "http"], stderr=subprocess.PIPE,
            check=False))
        try:
            async with Session.open(MemoryStore(), model=model,
                                    approver=approve_all) as session:
                async with mount(session, await server_url(process) + "/mcp") as mounted:
                    assert mounted.server == "calculator"
                    await session.prompt("go")
        finally:
            process.terminate()
    assert session.calls["1.0"].result.structured_content == {"total": 9}


async def test_a_call_after_the_mount_ended_fails_saying_so() -> None:
    model = FauxModel([faux_tool_call("add", {"a": 1, "b": 2}), faux_text("done")])
    async with Session.open(MemoryStore(), model=model, approver=approve_all) as session:
        async with mount(session, calculator()):
            pass
        await session.prompt("go")
        done = ends(session)
    assert isinstance(done["1.0"], ToolCallFailed)
    assert "mount" in done["1.0"].message and "has ended" in done["1.0"].message


async def test_the_hosts_exception_comes_out_of_the_mount_as_itself() -> None:
    async with Session.open(MemoryStore(), model=FauxModel([])) as session:
        with pytest.raises(KeyError):
            async with mount(session, calculator()):
                raise KeyError("mine")
