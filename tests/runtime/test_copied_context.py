"""Every tool body runs in a copy of its caller's context (engine/runtime/copied.py): it sees
what its caller set, and what it sets never reaches the caller, on every path a body takes —
a lone call in the prompt's own task, calls in tasks of the session's, a nested call in its
parent's task, and the host's own call in the host's task."""

from __future__ import annotations

import contextvars
from typing import Any

import pytest
import trio

from engine import (
    Annotations,
    ApprovalRequest,
    Session,
    ToolResult,
    approve_all,
    text,
    tool,
)
from engine.models import FauxModel, faux_text, faux_tool_call
from engine.runtime.copied import in_copy
from events import MemoryStore

SAFE = Annotations(read_only=True, open_world=False)
DEADLOCK = 30

MARK: contextvars.ContextVar[str] = contextvars.ContextVar("MARK", default="unset")


def _tools(seen: list[tuple[str, str]]) -> list[Any]:
    """``setter`` records the value it was handed and sets its own; ``parent`` does the same
    around a nested ``setter``, and records what it sees after it."""

    @tool(annotations=SAFE)
    async def setter(call: Any, ctx: Any) -> ToolResult:
        seen.append((f"{call.call_id} saw", MARK.get()))
        MARK.set(f"set by {call.call_id}")
        await trio.lowlevel.checkpoint()  # a step after the set: still in the copy
        seen.append((f"{call.call_id} after a checkpoint", MARK.get()))
        return ToolResult(content=[text("set")])

    @tool(annotations=SAFE)
    async def parent(call: Any, ctx: Any) -> ToolResult:
        MARK.set(f"set by {call.call_id}")
        await ctx.execute_tool("setter", {})
        seen.append((f"{call.call_id} after its nested call", MARK.get()))
        return ToolResult(content=[text("parent")])

    return [setter, parent]


async def _may_answer_later(request: ApprovalRequest) -> bool:
    """Grants every call, but is not declared to answer at once: no call runs in the
    prompt's own task."""
    return True


@pytest.mark.parametrize("calls,approver", [
    (["setter"], approve_all),  # a lone call: in the prompt's own task
    (["setter"], _may_answer_later),  # a lone call in a task of the session's
    (["setter", "setter"], approve_all),  # in tasks of the session's
    (["parent"], approve_all),  # a nested call, in its parent's task (the prompt's)
    (["parent", "setter"], approve_all),  # a nested call in a task of the session's
], ids=["lone call", "lone call in a task", "parallel calls", "nested in the prompt's task",
        "nested in a task"])
async def test_a_model_s_call_never_sets_its_caller_s_context(calls: list[str],
                                                              approver: Any) -> None:
    seen: list[tuple[str, str]] = []
    model = FauxModel([
        [faux_tool_call(name) for name in calls] if len(calls) > 1 else faux_tool_call(calls[0]),
        faux_text("done"),
    ])
    with trio.fail_after(DEADLOCK):
        async with Session.open(MemoryStore(), model=model, tools=_tools(seen),
                                approver=approver) as session:
            token = MARK.set("the host's")
            try:
                result = await session.prompt("go")
                assert MARK.get() == "the host's"  # nothing the bodies set came back
            finally:
                MARK.reset(token)
    assert result.text == "done"
    setters = [cid for cid, call in session.calls.items() if call.name == "setter"]
    parents = [cid for cid, call in session.calls.items() if call.name == "parent"]
    assert sorted(seen) == sorted(
        [(f"{cid} saw", f"set by {cid.rpartition('/')[0]}" if "/" in cid else "the host's")
         for cid in setters]
        + [(f"{cid} after a checkpoint", f"set by {cid}") for cid in setters]
        + [(f"{cid} after its nested call", f"set by {cid}") for cid in parents])


async def test_a_host_call_never_sets_the_host_s_context() -> None:
    seen: list[tuple[str, str]] = []
    async with Session.open(MemoryStore(), model=FauxModel([]), tools=_tools(seen),
                            approver=approve_all) as session:
        MARK.set("the host's")
        await session.call_tool("setter", {})
        await session.call_tool("parent", {})
        assert MARK.get() == "the host's"
    assert seen == [("h0 saw", "the host's"), ("h0 after a checkpoint", "set by h0"),
                    ("h1/0 saw", "set by h1"), ("h1/0 after a checkpoint", "set by h1/0"),
                    ("h1 after its nested call", "set by h1")]


async def test_in_copy_passes_results_exceptions_and_cancellation_through() -> None:
    async def body(value: int) -> int:
        MARK.set("inside")
        await trio.lowlevel.checkpoint()
        if value < 0:
            raise ValueError(value)
        return value * 2

    assert await in_copy(body, 21) == 42
    with pytest.raises(ValueError):
        await in_copy(body, -1)
    with trio.move_on_after(0) as scope:
        await in_copy(body, 1)
    assert scope.cancelled_caught
    assert MARK.get() == "unset"


async def test_what_a_body_starts_inherits_its_copy() -> None:
    """A nursery task (and so a thread) a body starts sees the body's values, not the
    caller's."""
    got: list[str] = []

    async def child() -> None:
        got.append(MARK.get())

    async def body() -> None:
        MARK.set("the body's")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(child)
        got.append(await trio.to_thread.run_sync(MARK.get))

    MARK.set("the caller's")
    await in_copy(body)
    assert got == ["the body's", "the body's"] and MARK.get() == "the caller's"
