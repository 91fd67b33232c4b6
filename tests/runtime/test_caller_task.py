"""The agent loop runs in the task that called ``prompt()`` / ``resume()``.

The model, the ``tool_call`` and ``tool_result`` handlers and the approver run in that task;
tool bodies (and their nested calls) run in tasks that inherit a copy of its context. So a
context variable a host sets around one prompt (a tenant, a trace span) is seen by that
prompt's work and by nothing of another prompt's. And a prompt after a pause has one defined
behaviour: it is refused until ``resume()`` has finished the paused batch.
"""

from __future__ import annotations

import contextvars
from typing import Any

import pytest
import trio

from engine import (
    LATER,
    Annotations,
    ApprovalRequest,
    Session,
    ToolCallDraft,
    ToolResult,
    ToolResultDraft,
    approve_all,
    at_once,
    text,
    tool,
)
from engine.core.reducers import ToolResultEntry
from engine.models import FauxModel, ModelMessage, ModelRequest, faux_text, faux_tool_call
from events import MemoryStore
from events.types import ModelToolCall

SAFE = Annotations(read_only=True, open_world=False)
DEADLOCK = 30

TENANT: contextvars.ContextVar[str] = contextvars.ContextVar("TENANT", default="none")


@pytest.mark.parametrize("approving", ["may answer later", "approve_all", "declared at once"],
                         ids=["calls in tasks", "a call in the caller's task",
                              "a call in the caller's task, a declared approver"])
async def test_each_prompt_s_context_reaches_only_its_own_work(approving: str) -> None:
    """With an approver that may answer later, every call runs in a task of the session's;
    with ``approve_all``, or an approver of the host's declared with ``at_once``, which never
    answer later, a batch of one call runs in the prompt's own task (engine/runtime/batch.py). Either
    way each prompt's value is all its work sees."""
    asks = approving != "approve_all"  # the declared approver is asked about nested calls
    seen: list[tuple[str, str]] = []  # (who, the tenant they saw)
    tasks: dict[str, trio.lowlevel.Task] = {}  # the task each parent call ran in

    # with approval needed, the approver is asked about every nested call
    @tool(annotations=Annotations() if asks else SAFE)
    async def child(call: Any, ctx: Any) -> ToolResult:
        seen.append(("child tool", TENANT.get()))
        return ToolResult(content=[text("child")])

    @tool(annotations=SAFE)
    async def parent(call: Any, ctx: Any) -> ToolResult:
        seen.append(("parent tool", TENANT.get()))
        tasks[call.call_id] = trio.lowlevel.current_task()
        async with trio.open_nursery() as nursery:  # concurrent nested calls too
            nursery.start_soon(ctx.execute_tool, "child", {})
            nursery.start_soon(ctx.execute_tool, "child", {})
        await ctx.execute_tool("child", {})
        return ToolResult(content=[text("parent")])

    async def approver(request: ApprovalRequest) -> bool:
        seen.append((f"approver {request.origin}", TENANT.get()))
        return True

    def on_call(draft: ToolCallDraft) -> None:
        seen.append((f"tool_call handler {draft.origin}", TENANT.get()))

    async def on_result(draft: ToolResultDraft) -> None:
        seen.append((f"tool_result handler {draft.origin}", TENANT.get()))

    def step(message: ModelMessage) -> Any:
        def answer(request: ModelRequest) -> ModelMessage:
            seen.append(("model", TENANT.get()))
            return message
        return answer

    two = ModelMessage(tool_calls=(ModelToolCall(id="a", name="parent", arguments={}),
                                   ModelToolCall(id="b", name="parent", arguments={})))
    one = ModelMessage(tool_calls=(ModelToolCall(id="a", name="parent", arguments={}),))
    model = FauxModel([step(two), step(one), step(ModelMessage(text="one")),
                       step(one), step(two), step(ModelMessage(text="two"))])
    chosen = {"may answer later": approver, "approve_all": approve_all,
              "declared at once": at_once(approver)}[approving]
    with trio.fail_after(DEADLOCK):
        async with Session.open(MemoryStore(), model=model, tools=[parent, child],
                                approver=chosen) as session:
            session.on_tool_call(on_call)
            session.on_tool_result(on_result)
            results = []
            for tenant in ("alice", "bob"):
                token = TENANT.set(tenant)
                try:
                    results.append(await session.prompt(f"for {tenant}"))
                finally:
                    TENANT.reset(token)
                seen.append(("---", tenant))
            assert [r.text for r in results] == ["one", "two"]
            assert TENANT.get() == "none"  # nothing leaked into the host's own context
    cut = seen.index(("---", "alice"))
    first, second = seen[:cut], seen[cut + 1:-1]
    whos = {who for who, _ in first}
    assert whos == {"model", "parent tool", "child tool", "tool_call handler model",
                    "tool_call handler nested", "tool_result handler model",
                    "tool_result handler nested"} | ({"approver nested"} if asks else set())
    assert {who for who, _ in second} == whos
    assert {tenant for _, tenant in first} == {"alice"}, first
    assert {tenant for _, tenant in second} == {"bob"}, second
    prompting = trio.lowlevel.current_task()
    # the lone calls of turns 2 and 4 ran in the prompt's task only under an approver that
    # answers at once; the pairs of turns 1 and 5 in tasks of the session's
    inline = approving != "may answer later"
    assert {cid: task is prompting for cid, task in tasks.items()} == {
        "1.0": False, "1.1": False, "2.0": inline, "4.0": inline, "5.0": False, "5.1": False}


async def test_a_prompt_after_an_answered_nested_approval_is_refused_until_resume() -> None:
    """The nested call's approval is answered; whether the parent's body has finished by the
    time the host prompts again or not, the prompt is refused with a message that says to
    call resume(); resume() lets the model see the batch's results, then the prompt goes on."""
    for finished_first in (False, True):
        body_done = trio.Event()

        @tool()  # needs approval
        async def risky(call: Any, ctx: Any) -> ToolResult:
            return ToolResult(content=[text("risky done")])

        @tool(annotations=SAFE)
        async def parent(call: Any, ctx: Any) -> ToolResult:
            await ctx.execute_tool("risky", {})
            body_done.set()
            return ToolResult(content=[text("parent done")])

        async def approver(request: ApprovalRequest) -> Any:
            return LATER

        model = FauxModel([faux_tool_call("parent"), faux_text("saw the results"),
                           faux_text("hello again")])
        with trio.fail_after(DEADLOCK):
            async with Session.open(MemoryStore(), model=model, tools=[parent, risky],
                                    approver=approver) as session:
                paused = await session.prompt("go")
                assert paused.stop == "paused" and session.paused
                [request] = paused.pending
                await session.resolve_approval(request.call_id, True)
                if finished_first:
                    await body_done.wait()
                    assert not session.state.open_calls  # the batch has ended meanwhile
                with pytest.raises(RuntimeError, match=r"call\s+resume\(\)") as refused:
                    await session.prompt("next")
                assert "interrupted" not in str(refused.value)
                assert len(model.requests) == 1
                resumed = await session.resume()
                assert (resumed.stop, resumed.text) == ("end_turn", "saw the results")
                assert not session.paused
                # the model saw the batch's result before any new user message
                last = model.requests[1].transcript[-1]
                assert isinstance(last, ToolResultEntry) and last.call_id == "1.0"
                again = await session.prompt("next")
                assert again.text == "hello again"


async def test_a_tool_registered_while_a_lone_call_runs_can_still_pause_the_prompt(
    autojump_clock: Any,
) -> None:
    """A batch of one call whose session has no tool the policy asks about, and an approver
    that may answer later. While the call runs, the host registers a tool the policy asks
    about, and the call makes a nested call of it (nested calls are gated with the session's
    setup as it is now): the approver leaves it for the host. The prompt returns "paused" with
    that request, as for any call waiting in a task of the session's; the host's answer lets
    the call go on, and resume() finishes the batch. A prompt that waited for the answer
    itself would never return to a host that answers after it does."""
    running, registered = trio.Event(), trio.Event()

    @tool()  # the policy asks about it
    async def risky(call: Any, ctx: Any) -> ToolResult:
        return ToolResult(content=[text("risky done")])

    @tool(annotations=SAFE)
    async def parent(call: Any, ctx: Any) -> ToolResult:
        running.set()
        await registered.wait()
        outcome = await ctx.execute_tool("risky", {})
        return ToolResult(content=[text(f"parent saw: {outcome.content[0].text}")])

    async def approver(request: ApprovalRequest) -> Any:
        return LATER

    async def register_while_it_runs(session: Session) -> None:
        await running.wait()
        await session.register(risky)
        registered.set()

    model = FauxModel([faux_tool_call("parent"), faux_text("done")])
    async with Session.open(MemoryStore(), model=model, tools=[parent],
                            approver=approver) as session:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(register_while_it_runs, session)
            with trio.move_on_after(DEADLOCK) as waited:
                paused = await session.prompt("go")
        assert not waited.cancelled_caught, "the prompt waited for the host's answer itself"
        assert paused.stop == "paused"
        assert [(r.call_id, r.name, r.origin) for r in paused.pending] == [
            ("1.0/0", "risky", "nested")]
        await session.resolve_approval("1.0/0", True)
        with trio.fail_after(DEADLOCK):
            resumed = await session.resume()
        assert (resumed.stop, resumed.text) == ("end_turn", "done")
        assert session.calls["1.0"].result is not None
        assert session.calls["1.0"].result.content[0].text == "parent saw: risky done"
