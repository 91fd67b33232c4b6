"""What the model reads about a refused or cut-off call, whatever the host's code says.

Hypothesis draws the hostile inputs of this class:

- a refusal's reason (from the approver, or a ``Block``): any text, with control characters
  (ESC, BEL, C1), bidirectional overrides, lone surrogates, and lengths far past the limit. The
  model reads it bounded and without any of those; the log keeps it whole.
- a guard that raises (a ``tool_call`` handler or the approver), with any exception message,
  from code nested in functions (``<locals>``): the model reads only that the guard failed,
  never the message or a name of the host's code; the log keeps both.
- a stop reason as a model adapter may pass it on (:func:`engine.testing.strategies.stop_reasons`):
  a message cut off under any provider's name fails its calls unrun; any other runs them.
"""

from __future__ import annotations

from typing import Any

import trio
from conftest import counting_clock
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import (
    ApprovalAnswer,
    ApprovalRequest,
    Block,
    Session,
    ToolCallDraft,
    ToolResult,
    approve_all,
    text,
    tool,
)
from engine.core.refusals import REASON_LIMIT
from engine.models import FauxModel, faux_message, faux_text, faux_tool_call, truncated
from engine.testing.strategies import stop_reasons
from events import MemoryStore, Record
from events.types import TERMINAL_EVENTS, Annotations
from tests.faults.checks import SAFE, check_records

FEW = settings(max_examples=30, deadline=None)
UNSAFE = "\x00\x07\x1b\x7f\x85\x9b\u202a\u202e\u2066\u2069\ud800\udfff"

#: Text a host's code might hand over as a reason or an exception message.
hostile_text = st.one_of(
    st.text(max_size=40),
    st.text(alphabet=st.sampled_from(list(UNSAFE) + list("ab \n\t[];")), max_size=60),
    st.builds(lambda s, n: s * n, st.text(min_size=1, max_size=8), st.integers(1, 400)),
)


def run(tools: list[Any], script: list[Any], *, approver: Any = approve_all,
        handler: Any = None) -> tuple[Any, list[Record]]:
    async def main() -> tuple[Any, list[Record]]:
        store = MemoryStore()
        async with Session.open(store, model=FauxModel(script), tools=tools, approver=approver,
                                session_id="t", create=True, clock=counting_clock()) as session:
            if handler is not None:
                session.on_tool_call(handler)
            await session.prompt("go")
            state = session.state
        records = await store.read("t")
        check_records(records, state)
        return state, records

    return trio.run(main)


def make(annotations: Annotations, runs: list[str]) -> Any:
    @tool(annotations=annotations)
    async def act(call: Any, ctx: Any) -> ToolResult:
        """Act."""
        runs.append(call.call_id)
        return ToolResult(content=[text("done")])

    return act


def assert_safe(told: str) -> None:
    assert len(told) <= REASON_LIMIT + 80, len(told)
    assert not any(ch in told for ch in UNSAFE), ascii(told)


def terminal(records: list[Record]) -> Any:
    [end] = [r.event for r in records if isinstance(r.event, TERMINAL_EVENTS)]
    return end


@FEW
@given(reason=hostile_text, by=st.sampled_from(["approver", "handler"]))
def test_any_reason_reaches_the_model_bounded_and_safe_and_the_log_whole(reason: str,
                                                                         by: str) -> None:
    runs: list[str] = []

    async def refuse(request: ApprovalRequest) -> ApprovalAnswer:
        return ApprovalAnswer(granted=False, reason=reason)

    def block(draft: ToolCallDraft) -> Block:
        return Block(reason)

    if by == "approver":
        state, records = run([make(Annotations(), runs)], [faux_tool_call("act"), faux_text("ok")],
                             approver=refuse)
    else:
        state, records = run([make(SAFE, runs)], [faux_tool_call("act"), faux_text("ok")],
                             handler=block)
    assert runs == []
    assert_safe(state.calls["1.0"].result.text)
    assert terminal(records).reason == reason or (by == "approver" and not reason)


@FEW
@given(message=hostile_text, where=st.sampled_from(["approver", "handler"]))
def test_a_failing_guard_tells_the_model_nothing_of_its_code(message: str, where: str) -> None:
    def nested_guard_factory() -> Any:
        def guard(draft: ToolCallDraft) -> None:
            raise LookupError(message)

        return guard

    async def approver(request: ApprovalRequest) -> bool:
        raise LookupError(message)

    if where == "approver":
        state, records = run([make(Annotations(), [])], [faux_tool_call("act"), faux_text("ok")],
                             approver=approver)
    else:
        state, records = run([make(SAFE, [])], [faux_tool_call("act"), faux_text("ok")],
                             handler=nested_guard_factory())
    told = state.calls["1.0"].result.text
    assert told in ("act was blocked: a tool_call handler failed",
                    "act was not approved: the approver failed")
    end = terminal(records)
    assert end.error is not None and end.error.type == "LookupError"
    if where == "handler":
        assert "<locals>" in end.by


@FEW
@given(stop_reason=stop_reasons())
def test_a_message_runs_its_calls_unless_its_stop_reason_means_cut_off(stop_reason: str) -> None:
    runs: list[str] = []
    message = faux_message([faux_tool_call("act", {})], stop_reason=stop_reason)
    state, records = run([make(SAFE, runs)], [message, faux_text("ok")])
    end = terminal(records)
    if truncated(stop_reason):
        assert runs == [] and end.kind == "truncated", end
    else:
        assert runs == ["1.0"] and state.calls["1.0"].status == "completed"
