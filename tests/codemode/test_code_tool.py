"""The code tool: declared while codemode tools are active, with typed stubs; a program's
tool calls are nested calls of its call."""

from __future__ import annotations

from typing import Any

import pytest

from engine import Session, fold
from engine.codemode import CODE_TOOL, CodeLimits, code_tool
from engine.models import FauxModel, faux_text, faux_tool_call
from engine.testing.invariants import check_log
from events import MemoryStore
from events.types import ToolCallRequested

from codemode_tools import CODEMODE, RAN, chat, secret

pytest.importorskip("pydantic_monty")


async def run(code: str, *, limits: CodeLimits | None = None, tools: Any = (),
              **kwargs: Any) -> tuple[Session, Any, list[Any]]:
    store = MemoryStore()
    model = FauxModel([faux_tool_call(CODE_TOOL, {"code": code}), faux_text("done")])
    async with Session.open(store, model=model,
                            tools=[*CODEMODE, *tools, code_tool(limits=limits)],
                            **kwargs) as session:
        await session.set_active_tools([t.name for t in (*CODEMODE, *tools)] + [CODE_TOOL])
        await session.prompt("go")
        records = await store.read(session.session_id)
        check_log(records, state=session.state, transcript=session.transcript, closed=False)
    assert fold(records).snapshot() == session.state.snapshot()
    top = next(c for c in session.state.calls.values() if c.name == CODE_TOOL)
    return session, top, records


async def test_the_model_is_told_the_code_tool_with_stubs_and_not_the_codemode_tools() -> None:
    async with Session.open(MemoryStore(), model=FauxModel([]),
                            tools=[*CODEMODE, code_tool()]) as session:
        assert [t.name for t in session.declared_tools()] == []  # nothing active yet
        await session.activate(["double", "shout"])
        [declared] = session.declared_tools()
        assert declared.name == CODE_TOOL
        assert "def double(n: int) -> dict[str, Any]:" in declared.description
        assert "    Args:\n        n: A number." in declared.description
        assert "def shout(word: str) -> str:" in declared.description
        assert "wipe" not in declared.description


async def test_without_the_code_tool_an_active_codemode_tool_is_declared_itself() -> None:
    async with Session.open(MemoryStore(), model=FauxModel([]), tools=CODEMODE) as session:
        await session.activate(["double"])
        assert [t.name for t in session.declared_tools()] == ["double"]


async def test_a_program_calls_tools_as_nested_calls_and_returns_its_value() -> None:
    session, top, records = await run(
        "a = double(n=2)\nprint('a is', a)\nb = shout('hi')\n[a['double'], b]")
    assert top.status == "completed", top.result
    assert top.result.structured_content == {"result": [4, "HI"], "printed": "a is {'double': 4}\n"}
    children = session.state.children(top.call_id)
    assert [session.calls[c].name for c in children] == ["double", "shout"]
    assert all(session.calls[c].origin == "nested" for c in children)
    # nested calls are never in the transcript: one result, the code tool's
    assert sum(1 for e in session.transcript if type(e).__name__ == "ToolResultEntry") == 1


async def test_gather_runs_calls_concurrently_recorded_in_source_order() -> None:
    code = ("import asyncio\n"
            "r = await asyncio.gather(*[double_async(n=i) for i in range(5)])\n"
            "[x['double'] for x in r]")
    session, top, records = await run(code)
    assert top.result.structured_content["result"] == [0, 2, 4, 6, 8]
    requested = [r.event for r in records if isinstance(r.event, ToolCallRequested)
                 and r.event.parent_id == top.call_id]
    assert [e.arguments for e in requested] == [{"n": i} for i in range(5)]


async def test_a_failed_call_is_an_exception_the_program_can_catch() -> None:
    code = ("try:\n    boom()\nexcept RuntimeError as e:\n    caught = str(e)\ncaught")
    session, top, records = await run(code)
    assert top.status == "completed"
    assert "kaput" in top.result.structured_content["result"]


def test_without_the_extra_the_code_tool_says_what_to_install(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from engine import CodeModeUnavailable

    monkeypatch.setitem(sys.modules, "pydantic_monty", None)  # import fails, as uninstalled
    with pytest.raises(CodeModeUnavailable, match=r"pip install 'toolledger\[codemode\]'"):
        code_tool()
    with pytest.raises(ImportError):  # an old handler still catches it
        code_tool()


@pytest.mark.parametrize("field", ["duration", "memory", "recursion", "suspensions", "output",
                                   "result"])
@pytest.mark.parametrize("value", [0, -1, True, "10"])
def test_limits_refuse_what_is_not_a_positive_number(field: str, value: Any) -> None:
    with pytest.raises(ValueError, match=f"CodeLimits\\({field}=...\\) takes a positive number"):
        CodeLimits(**{field: value})
