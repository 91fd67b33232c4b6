"""A session reopened in a new process, as hostile as the setup can make it: a body that runs
again with its concurrent nested calls scheduled in another order, a session reopened with deny
rules it did not have, or without tools its open calls need.

The first process runs a body (``fan``, idempotent) that makes a drawn set of nested calls
concurrently, each after a drawn number of checkpoints: some of its tools need approval (the
approver answers later), so the session pauses with part of the plan recorded, some calls
ended and some pending, and the process stops. The second process draws a new scheduling
order, maybe new deny rules and a smaller tool set, approves every pending request and
resumes. Whatever was drawn:

- each nested call gets the result of its own request (tool and arguments), never another's;
- no recorded call's body runs again, and no body a deny rule now matches runs;
- nothing escapes ``Session.open``, and the log is left consistent (no call open).
"""

from __future__ import annotations

from collections import Counter
from fnmatch import fnmatchcase
from typing import Any

import trio
from hypothesis import given
from hypothesis import strategies as st

from engine import (
    LATER,
    Annotations,
    ApprovalRequest,
    PolicyRules,
    Session,
    ToolResult,
    approve_all,
    text,
    tool,
)
from engine.core.nested import canonical
from engine.models import FauxModel, faux_text, faux_tool_call
from engine.testing.strategies import nested_plans, reopened_rules, schedules
from events import MemoryStore
from events.types import ToolCallDenied, ToolCallFailed
from tests.faults.checks import SAFE, assert_consistent, checkpoints

SID = "rerun"
NESTED = ("echo", "stamp", "wipe")  # echo runs at once; stamp and wipe ask
Plan = list[tuple[str, dict[str, Any]]]


async def later(request: ApprovalRequest) -> Any:
    return LATER


class Process:
    """One process's tools: every body run is counted, and ``fan`` reports what each of its
    nested calls got back, by its place in the plan."""

    def __init__(self, plan: Plan, schedule: list[int]) -> None:
        self.runs: Counter[tuple[str, str]] = Counter()
        self.got: dict[int, tuple[str, bool]] = {}

        def nested(name: str, annotations: Annotations) -> Any:
            @tool(name=name, annotations=annotations)
            async def body(call: Any, ctx: Any) -> ToolResult:
                self.runs[(name, canonical(call.arguments))] += 1
                return ToolResult(content=[text(f"{name} {canonical(call.arguments)}")])
            return body

        @tool(annotations=Annotations(read_only=True, open_world=False, idempotent=True))
        async def fan(call: Any, ctx: Any) -> ToolResult:
            async def child(place: int) -> None:
                await checkpoints(schedule[place])
                name, arguments = plan[place]
                outcome = await ctx.execute_tool(name, arguments)
                self.got[place] = (outcome.result.text, outcome.is_error)

            async with trio.open_nursery() as nursery:
                for place in range(len(plan)):
                    nursery.start_soon(child, place)
            return ToolResult(content=[text("fanned")])

        self.specs = {"echo": nested("echo", SAFE),
                      "stamp": nested("stamp", Annotations(destructive=True)),
                      "wipe": nested("wipe", Annotations(destructive=True)), "fan": fan}


def own(plan: Plan, place: int) -> str:
    name, arguments = plan[place]
    return f"{name} {canonical(arguments)}"


async def first_process(store: MemoryStore, plan: Plan, schedule: list[int]) -> Process:
    process = Process(plan, schedule)
    async with Session.open(store, model=FauxModel([faux_tool_call("fan"), faux_text("done")]),
                            tools=process.specs.values(), approver=later,
                            session_id=SID, create=True) as session:
        await session.prompt("go")
    return process


@given(st.data())
def test_concurrent_nested_calls_of_a_rerun_body_get_their_own_results(data: Any) -> None:
    plan = data.draw(nested_plans(NESTED), label="plan")
    before = data.draw(schedules(len(plan)), label="first scheduling")
    after = data.draw(schedules(len(plan)), label="second scheduling")

    async def main() -> None:
        store = MemoryStore()
        first = await first_process(store, plan, before)
        second = Process(plan, after)
        async with Session.open(store, model=FauxModel([faux_text("ok")]),
                                tools=second.specs.values(), approver=approve_all,
                                session_id=SID, create=True) as session:
            for request in session.pending_approvals():
                await session.resolve_approval(request.call_id, True)
            await session.resume()
            live = session.state
        if first.got.keys() == set(range(len(plan))):
            return  # the first process finished the body: nothing runs again
        for place in range(len(plan)):
            assert second.got[place] == (own(plan, place), False), (place, second.got)
        # each request's body ran once, over both processes: none ran twice, none was skipped
        wanted = Counter((name, canonical(arguments)) for name, arguments in plan)
        assert first.runs + second.runs == wanted
        await assert_consistent(store, SID, live)

    trio.run(main)


@given(st.data())
def test_a_session_reopened_with_new_deny_rules_or_fewer_tools_runs_nothing_denied(
    data: Any
) -> None:
    plan = data.draw(nested_plans(NESTED), label="plan")
    before = data.draw(schedules(len(plan)), label="first scheduling")
    after = data.draw(schedules(len(plan)), label="second scheduling")
    deny = data.draw(reopened_rules(("fan", *NESTED)), label="deny rules")
    missing = data.draw(st.sets(st.sampled_from(NESTED)), label="tools left out")
    rules = PolicyRules(deny=deny)
    denied = {name for name in ("fan", *NESTED)
              if any(fnmatchcase(name, pattern) for pattern in deny)}

    async def main() -> None:
        store = MemoryStore()
        await first_process(store, plan, before)
        second = Process(plan, after)
        tools = [spec for name, spec in second.specs.items() if name not in missing]
        async with Session.open(store, model=FauxModel([faux_text("ok")]), tools=tools,
                                approver=approve_all, rules=rules,
                                session_id=SID, create=True) as session:
            for request in session.pending_approvals():
                await session.resolve_approval(request.call_id, True)
            await session.resume()
            live = session.state
        assert not any(name in denied for name, _ in second.runs), second.runs
        assert not any(name in missing for name, _ in second.runs)
        for view in live.calls.values():
            terminal = view.terminal
            if isinstance(terminal, ToolCallDenied) and terminal.by == "policy":
                assert terminal.rule in deny
            if isinstance(terminal, ToolCallFailed):
                assert terminal.kind != "mismatch", terminal.message  # the body did not change
        await assert_consistent(store, SID, live)

    trio.run(main)
