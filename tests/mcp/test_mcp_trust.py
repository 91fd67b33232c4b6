"""A mounted server is untrusted until the host says otherwise.

Its hints do not decide the policy unless the host trusts them (and then every call says so),
its output is checked by our own linear-time validator only, its name does not let it take
another server's tools, and a server that comes back as another after a reconnect is judged
again before any call reaches it.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
from mcp import StdioServerParameters
from mcp_servers import BACKTRACKED, bank, calculator, redos_server, twins
from rich.console import Console
from test_mcp_listing import refused

from engine import Annotations, Session, approve_all
from engine.cli import main
from engine.mcp import mount
from engine.models import FauxModel, faux_text, faux_tool_call
from engine.present.render import print_session
from events import JsonlStore, MemoryStore
from events.codec import decode_line, encode_line
from events.types import (
    ToolCallCompleted,
    ToolCallDenied,
    ToolCallFailed,
    ToolRegistered,
    ToolSource,
)

SERVERS = Path(__file__).resolve().parents[1] / "mcp_servers.py"


def ends(session: Session) -> dict[str, Any]:
    """Each call's terminal event, by the engine's call id."""
    return {r.event.call_id: r.event for r in session.records
            if isinstance(r.event, (ToolCallCompleted, ToolCallFailed, ToolCallDenied))}


def registered(session: Session) -> list[Any]:
    """The snapshot of every registration, in the log's order."""
    return [r.event.spec for r in session.records if isinstance(r.event, ToolRegistered)]


def shown(session: Session) -> str:
    """What ``toolledger show`` prints of the session."""
    out = io.StringIO()
    print_session(session.state, Console(file=out, width=200))
    return out.getvalue()


# -- hints ------------------------------------------------------------------------------------

async def test_a_servers_hints_are_recorded_and_shown_but_not_trusted_by_default() -> None:
    model = FauxModel([faux_tool_call("add", {"a": 2, "b": 3}), faux_text("done")])
    async with Session.open(MemoryStore(), model=model) as session:  # approver: deny_all
        async with mount(session, calculator(), only=["add"]):
            await session.prompt("go")
    [add] = registered(session)
    # the server says read-only; the policy reads MCP's defaults, so it asks, and is refused
    assert isinstance(ends(session)["1.0"], ToolCallDenied)
    assert add.annotations == Annotations(title="Add")
    assert add.source == ToolSource(server="calculator", version="1.2.0", tool="add",
                                    hints=Annotations(title="Add", read_only=True),
                                    hints_trusted=False)
    out = shown(session)
    assert "calculator 1.2.0" in out and "read_only=true" in out and "not trusted" in out


async def test_trusting_a_servers_hints_is_the_hosts_choice_and_every_call_shows_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    log = tmp_path / "log.jsonl"
    model = FauxModel([faux_tool_call("add", {"a": 2, "b": 3}),
                       faux_tool_call("add", {"a": 1, "b": 1}), faux_text("done")])
    async with Session.open(JsonlStore(log), model=model) as session:
        async with mount(session, calculator(), only=["add"], trust_hints=True):
            await session.prompt("go")
    [add] = registered(session)
    assert add.annotations == Annotations(title="Add", read_only=True)
    assert add.source is not None and add.source.hints_trusted is True
    done = ends(session)
    assert all(isinstance(done[call], ToolCallCompleted) for call in ("1.0", "2.0"))

    assert await trio.to_thread.run_sync(main, ["show", str(log)]) == 0
    out = capsys.readouterr().out
    assert out.count("trusted (trust_hints=True): read_only=true") == 2
    assert await trio.to_thread.run_sync(main, ["show", str(log), "--json"]) == 0
    calls = json.loads(capsys.readouterr().out)[0]["calls"]
    assert [c["source"]["hints_trusted"] for c in calls] == [True, True]


async def test_the_hosts_hints_for_a_tool_are_neither_the_servers_nor_trusted() -> None:
    model = FauxModel([faux_tool_call("write_note", {"text": "hi"}), faux_text("done")])
    async with Session.open(MemoryStore(), model=model) as session:
        async with mount(session, calculator(), only=["write_note", "add"], trust_hints=True,
                         hints={"write_note": Annotations(read_only=True)}):
            await session.prompt("go")
    note, add = registered(session)
    assert note.annotations == Annotations(read_only=True)
    assert note.source.hints == Annotations() and note.source.hints_trusted is False
    assert add.source.hints_trusted is True
    assert ends(session)["1.0"].result.content[0].text == "noted: hi"


def test_a_registration_logged_before_hints_were_recorded_reads_as_not_recorded() -> None:
    old = ('{"v":3,"session_id":"s","seq":2,"time":1.0,"type":"tool_registered","data":'
           '{"spec":{"name":"add","description":"","input_schema":{"type":"object"},'
           '"output_schema":null,"annotations":{"title":null,"read_only":true,'
           '"destructive":null,"idempotent":null,"open_world":null},"exposure":"direct",'
           '"execution_mode":"parallel","timeout":null,'
           '"source":{"server":"calculator","version":"1.2.0","tool":"add"}}}}')
    record = decode_line(old)
    assert record.event.spec.source == ToolSource(server="calculator", version="1.2.0",
                                                  tool="add")
    assert record.event.spec.source.hints is None
    assert record.event.spec.source.hints_trusted is None
    assert encode_line(record) == old  # unchanged, so it hashes as it did


# -- output -----------------------------------------------------------------------------------

async def test_a_backtracking_output_pattern_is_checked_by_our_linear_validator_only() -> None:
    model = FauxModel([faux_tool_call("spell", {}), faux_text("done")])
    async with Session.open(MemoryStore(), model=model, approver=approve_all) as session:
        async with mount(session, redos_server()):
            with trio.fail_after(5):  # Python's re takes about 10 s on it: never ask it
                await session.prompt("go")
    failed = ends(session)["1.0"]
    assert isinstance(failed, ToolCallFailed) and failed.kind == "invalid_output"
    # our check's words, and the value kept in the log, as for a local tool's output
    assert "violates its output schema" in failed.message
    assert failed.returned is not None
    assert failed.returned.structured_content == {"s": BACKTRACKED}


# -- names ------------------------------------------------------------------------------------

async def test_a_second_server_with_the_same_name_cannot_take_the_first_ones_tools() -> None:
    model = FauxModel([faux_tool_call("transfer", {"amount": 5}), faux_text("done")])
    async with Session.open(MemoryStore(), model=model, approver=approve_all) as session:
        async with mount(session, bank("bank", "1.0")):
            with pytest.raises(ValueError) as refused:
                async with mount(session, bank("bank", "6.6.6")):
                    pass
            await session.prompt("go")
        # after the first mount's block, the name may be taken again (a server mounted anew)
        async with mount(session, bank("bank", "2.0")) as again:
            assert again.tools == {"transfer": "transfer"}
    message = str(refused.value)
    assert "'bank' 6.6.6" in message and "'bank' 1.0" in message and "prefix=" in message
    assert ends(session)["1.0"].result.content[0].text == "bank 1.0 moved 5"
    assert [spec.source.version for spec in registered(session)] == ["1.0", "2.0"]


async def test_a_server_that_lists_one_name_twice_is_refused() -> None:
    assert "lists two tools named 'twin'" in str(await refused(twins(), ValueError))


# -- identity after a reconnect ---------------------------------------------------------------

@pytest.mark.parametrize("comes_back_as", ["impostor", "rehinted"])
async def test_a_server_that_comes_back_as_another_is_registered_and_judged_again(
    tmp_path: Path, comes_back_as: str,
) -> None:
    """The calculator dies and restarts as another server (other name and version, no hints),
    or as itself declaring other hints: what it says now is registered again, before any call
    reaches it, and judged again; the call that met the change is not made."""
    restarts = StdioServerParameters(command=sys.executable, args=[
        str(SERVERS), "restarts", str(tmp_path / "starts"),
        *(["rehinted"] if comes_back_as == "rehinted" else [])])
    model = FauxModel([faux_tool_call("die", {}), faux_tool_call("add", {"a": 1, "b": 2}),
                       faux_tool_call("add", {"a": 1, "b": 2}), faux_text("done")])
    async with Session.open(MemoryStore(), model=model) as session:  # approver: deny_all
        async with mount(session, restarts, only=["add", "die"], trust_hints=True) as mounted:
            await session.prompt("go")
    done = ends(session)
    assert isinstance(done["1.0"], ToolCallFailed)  # the calculator died
    # judged by the calculator's read-only add, so it was allowed, and then not made
    assert isinstance(done["2.0"], ToolCallFailed) and done["2.0"].kind == "raised"
    assert "ServerChanged" in done["2.0"].message and "not made" in done["2.0"].message
    # registered again through the session, before the next call, which is judged again
    add = session.state.tools["add"]
    assert add.source is not None and add.source.hints_trusted is True
    if comes_back_as == "impostor":
        assert (mounted.server, mounted.version) == ("impostor", "6.6.6")
        assert (add.source.server, add.source.version) == ("impostor", "6.6.6")
        assert "'calculator' 1.2.0 came back as 'impostor' 6.6.6" in done["2.0"].message
    else:
        assert add.source.hints == Annotations(destructive=True)
        assert "declares its tool 'add' otherwise" in done["2.0"].message
    assert isinstance(done["3.0"], ToolCallDenied)  # no read-only hint now: asked, refused
    # nothing the new server answered was recorded under the old registration
    assert not any(isinstance(end, ToolCallCompleted) for end in done.values())
    seqs = {id(r.event): r.seq for r in session.records}
    again = [r for r in session.records
             if isinstance(r.event, ToolRegistered) and r.event.spec.name == "add"]
    assert len(again) == 2 and again[-1].seq < seqs[id(done["3.0"])]
