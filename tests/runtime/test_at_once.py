"""An approver the host declares to answer at once (``engine.at_once``).

Declared, an approver is the same approver: the same answers, exceptions and context. What
changes is what the runtime may rely on: no call of the session can wait for the host, so a
batch of one call runs in the prompt's own task (tests/runtime/test_caller_task.py shows where; the
property test in tests/runtime/test_session_properties.py that its logs are the ones a task of the session's
writes). An approver that breaks its word and answers LATER is refused like an approver that
raised, recorded as such, and the prompt goes on: it never waits for a host that waits for it.
"""

from __future__ import annotations

import contextvars
import inspect
from typing import Any

import pytest
import trio
from conftest import call_events, events_of, run_session

import engine
from engine import (
    LATER,
    Annotations,
    ApprovalAnswer,
    ApprovalRequest,
    ToolResult,
    approve_all,
    at_once,
    deny_all,
    text,
    tool,
)
from engine.core.approvals import answers_at_once
from engine.core.handlers import handler_name
from engine.core.reducers import ToolResultEntry
from engine.models import faux_text, faux_tool_call
from engine.replay import redrive
from events.types import (
    TERMINAL_EVENTS,
    ApprovalRequested,
    ApprovalResolved,
    ToolCallDenied,
    ToolExecutionStarted,
)

SAFE = Annotations(read_only=True, open_world=False)
DEADLOCK = 30
REQUEST = ApprovalRequest(call_id="1.0", name="deploy", arguments={}, reason="asks",
                          annotations=Annotations(), origin="model", parent_id=None)
WHO: contextvars.ContextVar[str] = contextvars.ContextVar("WHO", default="nobody")


def end_of(records: Any, call_id: str) -> Any:
    [end] = [e for e in call_events(records, call_id) if isinstance(e, TERMINAL_EVENTS)]
    return end


# -- the declaration ----------------------------------------------------------------------------


async def policy(request: ApprovalRequest) -> bool:
    """Grant everything but deploys."""
    return request.name != "deploy"


def test_at_once_declares_an_approver_the_runtime_may_rely_on() -> None:
    declared = at_once(policy)
    assert engine.at_once is at_once
    assert answers_at_once(declared) and not answers_at_once(policy)
    assert at_once(declared) is declared  # declaring twice changes nothing
    assert at_once(approve_all) is approve_all and at_once(deny_all) is deny_all
    # it reads as the approver it wraps: in logs, tracebacks and help()
    assert handler_name(declared) == handler_name(policy)
    assert declared.__doc__ == policy.__doc__
    assert inspect.unwrap(declared) is policy
    assert repr(declared) == f"at_once({policy!r})"


def test_at_once_is_a_decorator() -> None:
    @at_once
    async def approver(request: ApprovalRequest) -> bool:
        return True

    assert answers_at_once(approver)
    assert handler_name(approver).endswith("<locals>.approver")


@pytest.mark.parametrize("answer", [
    True, False, ApprovalAnswer(granted=True, scope="session"),
    ApprovalAnswer(granted=False, reason="not today"),
    ApprovalAnswer(granted=True, arguments={"n": 1}), "not an answer",
], ids=repr)
async def test_a_declared_approver_answers_what_the_approver_answers(answer: Any) -> None:
    seen: list[ApprovalRequest] = []

    async def approver(request: ApprovalRequest) -> Any:
        seen.append(request)
        return answer

    assert await at_once(approver)(REQUEST) is answer
    assert seen == [REQUEST]


async def test_a_declared_approver_raises_what_the_approver_raises_in_its_callers_context(
) -> None:
    failure = ConnectionError("approval service down")

    async def approver(request: ApprovalRequest) -> bool:
        if WHO.get() == "mallory":
            raise failure
        return True

    declared = at_once(approver)
    token = WHO.set("mallory")
    try:
        with pytest.raises(ConnectionError) as raised:
            await declared(REQUEST)
    finally:
        WHO.reset(token)
    assert raised.value is failure
    assert await declared(REQUEST) is True


# -- a broken promise ---------------------------------------------------------------------------


def assert_refused_as_broken(records: Any, call_id: str) -> None:
    """The call was asked about, refused as by an approver that failed, and never ran."""
    assert events_of(records, ApprovalRequested, call_id)
    [resolved] = events_of(records, ApprovalResolved, call_id)
    assert resolved.granted is False and resolved.later is False
    assert not events_of(records, ToolExecutionStarted, call_id)
    end = end_of(records, call_id)
    assert isinstance(end, ToolCallDenied) and end.by == "approver"
    assert end.error is not None and end.error.type == "TypeError"
    # it names the approver and says what to do
    assert "<locals>.defers" in end.error.message and "answered LATER" in end.error.message
    assert "engine.at_once" in end.error.message and "without at_once" in end.error.message
    assert "the approver failed" in end.reason and "answered LATER" in end.reason


async def test_a_declared_approver_answering_later_refuses_a_lone_call() -> None:
    """A batch of one call, which runs in the prompt's own task: the prompt does not pause,
    the model reads that the approver failed, and the session goes on."""
    @tool()  # the policy asks about it
    async def deploy(call: Any, ctx: Any) -> ToolResult:
        raise AssertionError("a refused call ran")

    @at_once
    async def defers(request: ApprovalRequest) -> Any:
        return LATER

    with trio.fail_after(DEADLOCK):
        state, records, _ = await run_session(
            [deploy], [faux_tool_call("deploy"), faux_text("done")], approver=defers)
    assert_refused_as_broken(records, "1.0")
    assert not state.pending_approvals and not state.open_calls
    [result] = [e for e in state.transcript if isinstance(e, ToolResultEntry)]
    assert result.result.text == "deploy was not approved: the approver failed"
    assert state.transcript[-1].text == "done"


async def test_a_declared_approver_answering_later_refuses_a_nested_call_of_a_lone_call(
) -> None:
    """The case that would hang: the parent runs in the prompt's own task, so a nested call
    waiting for the host would wait for a prompt that cannot return. It is refused instead,
    the parent gets an error outcome, as for any refusal, and finishes."""
    tasks: list[trio.lowlevel.Task] = []

    @tool()
    async def deploy(call: Any, ctx: Any) -> ToolResult:
        raise AssertionError("a refused call ran")

    @tool(annotations=SAFE)
    async def parent(call: Any, ctx: Any) -> ToolResult:
        tasks.append(trio.lowlevel.current_task())
        outcome = await ctx.execute_tool("deploy", {})
        return ToolResult(content=[text(f"parent saw: {outcome.content[0].text}")])

    @at_once
    async def defers(request: ApprovalRequest) -> Any:
        return LATER

    async def prompt() -> Any:
        tasks.append(trio.lowlevel.current_task())
        return await run_session([parent, deploy], [faux_tool_call("parent"), faux_text("done")],
                                 approver=defers)

    with trio.fail_after(DEADLOCK):
        state, records, _ = await prompt()
    assert tasks[0] is tasks[1], "the lone call did not run in the prompt's task"
    assert_refused_as_broken(records, "1.0/0")
    assert state.calls["1.0"].result is not None
    assert state.calls["1.0"].result.content[0].text == (
        "parent saw: deploy was not approved: the approver failed")
    assert not state.pending_approvals and not state.open_calls


async def test_a_declared_approver_answering_later_refuses_only_those_calls_of_a_batch() -> None:
    """A batch of three calls, in tasks of the session's: the two the approver defers are
    refused, the one it grants runs, and the prompt does not pause. The log replays as any
    log with an approver's error does."""
    ran: list[str] = []

    @tool()
    async def deploy(call: Any, ctx: Any) -> ToolResult:
        ran.append(call.call_id)
        return ToolResult(content=[text("deployed")])

    @at_once
    async def defers(request: ApprovalRequest) -> Any:
        return True if request.arguments.get("now") else LATER

    batch = [faux_tool_call("deploy", {}, id="a"), faux_tool_call("deploy", {"now": True}, id="b"),
             faux_tool_call("deploy", {}, id="c")]
    with trio.fail_after(DEADLOCK):
        state, records, _ = await run_session([deploy], [batch, faux_text("done")],
                                              approver=defers)
    assert ran == ["1.1"]
    assert_refused_as_broken(records, "1.0")
    assert_refused_as_broken(records, "1.2")
    assert not state.pending_approvals and not state.open_calls
    assert state.transcript[-1].text == "done"
    report = await redrive(records)
    assert report.ok, [d.describe() for d in report.divergences]
