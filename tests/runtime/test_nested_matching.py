"""Which recorded nested call a request of a body that runs again gets, whatever the scheduler
does: the one with the same tool and arguments, or none (a new call, or a ``mismatch``), never
another call's. A request that differs waits only for the tasks the body itself started
(:mod:`engine.runtime.bodytasks`), not for the rest of the program."""

from __future__ import annotations

from typing import Any

import attrs
import trio
from hypothesis import given
from hypothesis import strategies as st
from trio.testing import MockClock

from engine import (
    LATER,
    Annotations,
    ApprovalRequest,
    CallOutcome,
    Session,
    ToolResult,
    approve_all,
    text,
    tool,
)
from engine.models import FauxModel, faux_text, faux_tool_call
from engine.runtime.bodytasks import BodyTasks
from events import MemoryStore
from events.types import ToolCallFailed

SID = "s"
RERUN = Annotations(read_only=True, open_world=False, idempotent=True)


async def later(request: ApprovalRequest) -> Any:
    return LATER


@attrs.frozen
class Child:
    """One task of the body: the ``n`` it stamps, whether its first run asked before the
    log was cut, and how it waits before asking when the body runs again (``0`` a checkpoint,
    ``1`` a virtual-time sleep: blocked)."""

    n: int
    early: bool
    steps: tuple[int, ...]


class Fan:
    """``fan`` asks ``stamp`` once per child, concurrently. On its first run the late children
    wait for the early ones' outcomes, which wait for approval: the log holds the early
    requests only."""

    def __init__(self, children: list[Child], *, rerun: bool) -> None:
        self.stamped: list[int] = []
        self.outcomes: dict[int, CallOutcome] = {}

        @tool(annotations=Annotations(destructive=True))
        async def stamp(call: Any, ctx: Any) -> ToolResult:
            self.stamped.append(call.arguments["n"])
            return ToolResult(content=[text(f"stamp {call.arguments['n']}")])

        @tool(annotations=RERUN)
        async def fan(call: Any, ctx: Any) -> ToolResult:
            early_done = trio.Event()
            waiting = [sum(1 for c in children if c.early)]

            async def child(index: int, spec: Child) -> None:
                if rerun:
                    for step in spec.steps:
                        await (trio.sleep(1) if step else trio.lowlevel.checkpoint())
                elif not spec.early:
                    await early_done.wait()  # never: the early ones wait for approval
                self.outcomes[index] = await ctx.execute_tool("stamp", {"n": spec.n})
                if spec.early:
                    waiting[0] -= 1
                    if not waiting[0]:
                        early_done.set()

            async with trio.open_nursery() as nursery:
                for index, spec in enumerate(children):
                    nursery.start_soon(child, index, spec)
            return ToolResult(content=[text("fanned")])

        self.specs = [stamp, fan]


def children() -> st.SearchStrategy[list[Child]]:
    # early children stamp 0-2 (repeats allowed), late ones 10-12: a late request never
    # has a recorded call with its own arguments, so it waits for its siblings
    steps = st.lists(st.integers(0, 1), max_size=4).map(tuple)
    early = st.builds(Child, n=st.integers(0, 2), early=st.just(True), steps=steps)
    late = st.builds(Child, n=st.integers(10, 12), early=st.just(False), steps=steps)
    return st.lists(st.one_of(early, late), min_size=1, max_size=6).filter(
        lambda cs: any(c.early for c in cs))


async def run_twice(spec: list[Child]) -> tuple[dict[str, Any], Fan, Session]:
    store = MemoryStore()
    first = Fan(spec, rerun=False)
    async with Session.open(store, model=FauxModel([faux_tool_call("fan")]), tools=first.specs,
                            approver=later, session_id=SID, create=True) as session:
        assert (await session.prompt("go")).stop == "paused"
        recorded = {cid: session.calls[cid].arguments for cid in session.calls if "/" in cid}
    assert first.stamped == []

    again = Fan(spec, rerun=True)
    async with Session.open(store, model=FauxModel([faux_text("ok")]), tools=again.specs,
                            approver=approve_all, session_id=SID, create=True) as session:
        for request in session.pending_approvals():
            await session.resolve_approval(request.call_id, True)
        assert (await session.resume()).stop == "end_turn"
    return recorded, again, session


@given(children())
def test_a_rerun_request_gets_the_recorded_call_with_its_tool_and_arguments_or_none(
        spec: list[Child]) -> None:
    recorded, again, session = trio.run(run_twice, spec, clock=MockClock(autojump_threshold=0))
    assert sorted(recorded.values(), key=lambda a: a["n"]) == sorted(
        ({"n": c.n} for c in spec if c.early), key=lambda a: a["n"])
    taken = [outcome.call_id for outcome in again.outcomes.values()]
    assert len(taken) == len(set(taken)) == len(spec)  # no call answers two requests
    for index, child in enumerate(spec):
        outcome = again.outcomes[index]
        call = session.calls[outcome.call_id]
        assert (call.name, call.arguments) == ("stamp", {"n": child.n})  # never another's
        if child.early:  # its arguments were recorded: it gets a recorded call
            assert outcome.call_id in recorded
            assert outcome.result.text == f"stamp {child.n}"
        else:
            assert outcome.call_id not in recorded
            if outcome.result.is_error:  # it decided while a recorded stamp was unanswered
                assert isinstance(call.terminal, ToolCallFailed)
                assert call.terminal.kind == "mismatch"
            else:
                assert outcome.result.text == f"stamp {child.n}"
            if not any(step for c in spec for step in c.steps):
                # no task of the body blocked before asking: every sibling asked first
                assert not outcome.result.is_error
    ran = sorted(c.n for i, c in enumerate(spec) if not again.outcomes[i].result.is_error)
    assert sorted(again.stamped) == ran  # each stamp ran once, a mismatch never


async def test_a_host_task_that_never_blocks_does_not_hold_up_a_rerun_body() -> None:
    spec = [Child(n=1, early=True, steps=(0, 0, 0)), Child(n=10, early=False, steps=())]
    store = MemoryStore()
    first = Fan(spec, rerun=False)
    async with Session.open(store, model=FauxModel([faux_tool_call("fan")]), tools=first.specs,
                            approver=later, session_id=SID, create=True) as session:
        assert (await session.prompt("go")).stop == "paused"

    again = Fan(spec, rerun=True)
    spins = [0]

    async def spin() -> None:  # a task of the host's that is always ready to run
        while True:
            spins[0] += 1
            await trio.lowlevel.checkpoint()

    async with trio.open_nursery() as host:
        host.start_soon(spin)
        with trio.fail_after(30):  # a guard only: waiting for the whole program never ends
            async with Session.open(store, model=FauxModel([faux_text("ok")]),
                                    tools=again.specs, approver=approve_all, session_id=SID,
                                    create=True) as session:
                await session.resolve_approval("1.0/0", True)
                assert (await session.resume()).stop == "end_turn"
        host.cancel_scope.cancel()
    assert spins[0] > 0
    # the late child asked first, waited for its sibling (three checkpoints) and then was new
    assert again.outcomes[0].call_id == "1.0/0"
    assert again.outcomes[1].call_id == "1.0/1"
    assert not again.outcomes[1].result.is_error
    assert sorted(again.stamped) == [1, 10]


async def test_the_body_tasks_are_its_own_task_and_those_under_its_nurseries() -> None:
    seen: list[set[trio.lowlevel.Task]] = []

    async def body(task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        tasks = BodyTasks()
        inner: list[trio.lowlevel.Task] = []

        async def grandchild() -> None:
            inner.append(trio.lowlevel.current_task())
            await trio.sleep_forever()

        async def child() -> None:
            inner.append(trio.lowlevel.current_task())
            async with trio.open_nursery() as nursery:
                nursery.start_soon(grandchild)
                await trio.sleep_forever()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(child)
            await trio.testing.wait_all_tasks_blocked()
            seen.append(set(tasks.tasks()))
            seen.append({trio.lowlevel.current_task(), *inner})
            await tasks.wait_blocked()  # both are asleep: it returns
            nursery.cancel_scope.cancel()

    async with trio.open_nursery() as outer:
        outer.start_soon(trio.sleep_forever)  # a nursery the body's task had opened already
        await body()
        outer.cancel_scope.cancel()
    assert seen[0] == seen[1] and len(seen[0]) == 3


async def test_waiting_for_the_body_tasks_waits_for_one_that_is_ready_to_run() -> None:
    order: list[str] = []
    tasks = BodyTasks()

    async with trio.open_nursery() as nursery:

        async def busy() -> None:
            for _ in range(5):
                await trio.lowlevel.checkpoint()
            order.append("busy done")

        async def waiter() -> None:
            await tasks.wait_blocked()
            order.append("waited")

        nursery.start_soon(waiter)
        nursery.start_soon(busy)
    assert order == ["busy done", "waited"]
