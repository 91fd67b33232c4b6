"""Finding deferred tools: ``session.activate``, ``ctx.activate`` and the search tool.

The ranking is checked as the pure function it is; the rest on real sessions (FauxModel,
MemoryStore), read back from the model's requests, the state and the log, and re-driven.
"""

from __future__ import annotations

from typing import Any

import pytest

from engine import Annotations, Session, ToolResult, approve_all, fold, text, tool
from engine.core.search import rank_tools, search_tool, words
from engine.core.tools import ToolSpec
from engine.models import FauxModel, faux_text, faux_tool_call
from engine.replay import redrive
from engine.testing.invariants import check_log
from events import MemoryStore
from events.types import ToolSnapshot, ToolsActivated

SAFE = Annotations(read_only=True, open_world=False)


def snapshot(name: str, description: str, exposure: str = "deferred",
              title: str | None = None) -> ToolSnapshot:
    return ToolSnapshot(name=name, description=description, input_schema={"type": "object"},
                        exposure=exposure, annotations=Annotations(title=title))  # type: ignore[arg-type]


CATALOGUE = [
    snapshot("delete_file", "Remove a file from the workspace."),
    snapshot("list_files", "List the files of a directory."),
    snapshot("send_mail", "Send an e-mail to someone.", title="Mailer"),
    snapshot("fileStats", "Sizes and dates.", exposure="codemode"),
    snapshot("read_file", "Read a file.", exposure="direct"),
    snapshot("shred_file", "Destroy a file for good.", exposure="hidden"),
]


# -- the ranking ----------------------------------------------------------------------------


def test_words_split_names_as_people_write_them() -> None:
    assert words("readFile_v2.list-ALL") == ("read", "file", "v2", "list", "all")


def test_a_name_word_outranks_a_description_word_and_ties_go_by_name() -> None:
    assert rank_tools("file", CATALOGUE) == ("delete_file", "fileStats", "list_files")
    assert rank_tools("remove", CATALOGUE) == ("delete_file",)
    assert rank_tools("mailer", CATALOGUE) == ("send_mail",)  # the title counts
    assert rank_tools("files workspace", CATALOGUE)[0] == "delete_file"  # 3 + 1
    assert rank_tools("file", CATALOGUE, limit=1) == ("delete_file",)


def test_only_codemode_and_deferred_tools_are_found() -> None:
    found = rank_tools("read destroy shred file", CATALOGUE)
    assert "read_file" not in found and "shred_file" not in found
    assert rank_tools("nothing like it", CATALOGUE) == ()
    assert rank_tools("", CATALOGUE) == ()


def test_the_ranking_does_not_depend_on_the_order_of_the_tools() -> None:
    assert rank_tools("file mail", CATALOGUE) == rank_tools("file mail", CATALOGUE[::-1])


# -- activation by the host -------------------------------------------------------------------


def simple(name: str, exposure: str = "deferred", description: str = "") -> ToolSpec:
    async def execute(call: Any, ctx: Any) -> ToolResult:
        return ToolResult(content=[text(f"{name} ran")])

    return ToolSpec(name=name, description=description or name,
                    input_schema={"type": "object"}, execute=execute, annotations=SAFE,
                    exposure=exposure)  # type: ignore[arg-type]


async def test_activate_adds_to_the_active_set_and_records_what_it_added() -> None:
    tools = [simple("a", "direct"), simple("d"), simple("e"), simple("h", "hidden")]
    store = MemoryStore()
    async with Session.open(store, model=FauxModel([]), tools=tools) as session:
        await session.activate(["d", "a"])
        assert session.state.active_tools == {"a", "d"}
        assert session.records[-1].event == ToolsActivated(names=("d",))
        before = len(session.records)
        await session.activate(["a", "d"])  # nothing new: nothing recorded
        assert len(session.records) == before
        await session.activate(["h"])  # the host may activate a hidden tool
        assert session.state.active_tools == {"a", "d", "h"}
        with pytest.raises(ValueError, match="activate: no tool named 'nope'"):
            await session.activate(["e", "nope"])
        with pytest.raises(TypeError, match="list of tool names"):
            await session.activate("e")
        assert "e" not in session.state.active_tools
        assert [s.name for s in session.declared_tools()] == ["a", "d", "h"]
        stored = await store.read(session.session_id)
        assert fold(stored).snapshot() == session.state.snapshot()
        check_log(stored, state=session.state, closed=True)


# -- activation by a tool, and the search tool ------------------------------------------------


async def test_the_model_finds_a_deferred_tool_and_calls_it_the_next_turn() -> None:
    tools = [simple("delete_file", description="Remove a file."),
             simple("send_mail", description="Send an e-mail."),
             simple("shred_file", "hidden", "Destroy a file."),
             search_tool()]
    model = FauxModel([
        faux_tool_call("delete_file", {}),  # not declared yet: unavailable
        faux_tool_call("search_tools", {"query": "remove a file"}),
        faux_tool_call("delete_file", {}),
        faux_text("done"),
    ])
    store = MemoryStore()
    async with Session.open(store, model=model, tools=tools, approver=approve_all) as session:
        await session.prompt("tidy up")
        assert session.calls["1.0"].result.text == "Tool delete_file is not available"  # type: ignore[union-attr]
        search = session.calls["2.0"]
        assert search.status == "completed"
        assert search.result.structured_content == {  # type: ignore[union-attr]
            "matches": [{"name": "delete_file", "description": "Remove a file."}],
            "activated": ["delete_file"]}
        assert session.calls["3.0"].result.text == "delete_file ran"  # type: ignore[union-attr]
        declared = [[spec.name for spec in request.tools] for request in model.requests]
        assert declared[:3] == [["search_tools"], ["search_tools"],
                                ["delete_file", "search_tools"]]  # registration order
        activated = [r.event for r in session.records if isinstance(r.event, ToolsActivated)]
        assert activated == [ToolsActivated(names=("delete_file",), call_id="2.0")]
        stored = await store.read(session.session_id)
        check_log(stored, state=session.state, transcript=session.transcript, closed=True)

    # re-driven, in both tool modes: the same activation, in the same call
    for report in (await redrive(stored),
                   await redrive(stored, tools=tools, tool_mode="live", unverified=True)):
        assert report.ok, [d.describe() for d in report.divergences]
        assert [r.event for r in report.replayed if isinstance(r.event, ToolsActivated)] == \
            activated
    # today's tools: the deferred tool is hidden now, so the search does not find it, and the
    # model's call of it the next turn is refused: the replay says so, per call
    hidden = [simple("delete_file", "hidden", "Remove a file."), *tools[1:]]
    report = await redrive(stored, tools=hidden, tool_mode="live", unverified=True)
    assert {d.subject for d in report.divergences if d.scope == "call"} >= {"2.0", "3.0"}


async def test_a_tool_may_not_activate_a_hidden_tool() -> None:
    refused: list[str] = []

    @tool(annotations=SAFE)
    async def activator(call: Any, ctx: Any) -> ToolResult:
        try:
            ctx.activate(["secret"])
        except ValueError as exc:
            refused.append(str(exc))
        assert ctx.activate(["later_one", "later_one"]) == ("later_one",)
        assert ctx.activate(["later_one"]) == ()
        return ToolResult(content=[text("ok")])

    tools = [activator, simple("secret", "hidden"), simple("later_one")]
    async with Session.open(MemoryStore(), model=FauxModel([]), tools=tools) as session:
        outcome = await session.call_tool("activator")
        assert not outcome.is_error
        assert "hidden tools wait for the host" in refused[0]
        assert session.state.active_tools == {"activator", "later_one"}
        assert [r.event for r in session.records if isinstance(r.event, ToolsActivated)] == [
            ToolsActivated(names=("later_one",), call_id="h0")]


async def test_host_activations_are_replayed() -> None:
    tools = [simple("a", "direct"), simple("d")]
    model = FauxModel([faux_tool_call("d"), faux_text("done")])
    store = MemoryStore()
    async with Session.open(store, model=model, tools=tools) as session:
        await session.activate(["d"])
        await session.prompt("go")
        assert session.calls["1.0"].status == "completed"
    report = await redrive(await store.read(session.session_id))
    assert report.ok, [d.describe() for d in report.divergences]
    assert fold(report.replayed).active_tools == {"a", "d"}


def test_a_search_tool_finds_at_least_one() -> None:
    with pytest.raises(ValueError, match="at least one"):
        search_tool(limit=0)


async def test_a_search_the_host_makes_is_replayed() -> None:
    tools = [simple("delete_file", description="Remove a file."), search_tool()]
    model = FauxModel([faux_tool_call("delete_file", {}), faux_text("done")])
    store = MemoryStore()
    async with Session.open(store, model=model, tools=tools) as session:
        found = await session.call_tool("search_tools", {"query": "delete"})
        assert found.structured_content["activated"] == ["delete_file"]
        await session.prompt("go")
        assert session.calls["1.0"].status == "completed"
    report = await redrive(await store.read(session.session_id))
    assert report.ok, [d.describe() for d in report.divergences]
    assert [r.event for r in report.replayed if isinstance(r.event, ToolsActivated)] == [
        ToolsActivated(names=("delete_file",), call_id="h0")]
