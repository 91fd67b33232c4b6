"""The gate through whole sessions: availability, handlers, policy and the approver.

A call the gate stops never runs its tool: every test counts the executions.
"""

from __future__ import annotations

from typing import Any

import pytest
from conftest import call_events, events_of, run_session

from engine import (
    Annotations,
    ApprovalAnswer,
    ApprovalRequest,
    Block,
    PolicyRules,
    Rewrite,
    ToolCallDraft,
    ToolResult,
    approve_all,
    text,
    tool,
)
from engine.core.reducers import ToolResultEntry
from engine.models import faux_text, faux_tool_call
from events.types import (
    TERMINAL_EVENTS,
    ApprovalRequested,
    ApprovalResolved,
    PolicyDecided,
    ToolCallBlocked,
    ToolCallDenied,
    ToolCallFailed,
    ToolCallRewritten,
    ToolExecutionStarted,
)

SAFE = Annotations(read_only=True, open_world=False)
DANGEROUS = Annotations(destructive=True)
PATH_SCHEMA = {
    "type": "object",
    "properties": {"path": {"type": "string"}},
    "required": ["path"],
    "additionalProperties": False,
}


class Counter:
    """A tool factory that records every execution (call id and arguments)."""

    def __init__(self) -> None:
        self.runs: list[tuple[str, Any]] = []

    def make(self, name: str, annotations: Annotations = SAFE,
             input_schema: dict[str, Any] | None = None, exposure: str = "direct") -> Any:
        runs = self.runs

        async def execute(call: Any, ctx: Any) -> ToolResult:
            runs.append((call.call_id, call.arguments))
            return ToolResult(content=[text(f"{name} ran")])

        return tool(name=name, annotations=annotations, input_schema=input_schema,
                    exposure=exposure)(execute)  # type: ignore[arg-type]


def results(state: Any) -> list[ToolResultEntry]:
    return [entry for entry in state.transcript if isinstance(entry, ToolResultEntry)]


def terminal(records: Any, call_id: str) -> Any:
    ends = [e for e in call_events(records, call_id) if isinstance(e, TERMINAL_EVENTS)]
    assert len(ends) == 1
    return ends[0]


# -- the approver refuses ---------------------------------------------------------------------


async def test_denied_by_the_approver_is_not_approved_and_never_runs() -> None:
    counter = Counter()
    asked: list[str] = []

    async def refuse(request: ApprovalRequest) -> bool:
        asked.append(request.call_id)
        return False

    state, records, model = await run_session(
        [counter.make("rm_rf", DANGEROUS)], [faux_tool_call("rm_rf"), faux_text("ok")],
        approver=refuse)
    assert counter.runs == []
    assert asked == ["1.0"]
    [entry] = results(state)
    assert entry.result.is_error and entry.result.text == "rm_rf was not approved"
    end = terminal(records, "1.0")
    assert isinstance(end, ToolCallDenied) and end.by == "approver"
    assert events_of(records, ToolExecutionStarted) == []
    model.assert_complete()


async def test_default_approver_refuses() -> None:
    counter = Counter()
    state, records, _ = await run_session(
        [counter.make("deploy", Annotations())],  # undeclared annotations: dangerous
        [faux_tool_call("deploy"), faux_text("ok")])
    assert counter.runs == []
    assert [e.decision for e in events_of(records, PolicyDecided)] == ["ask"]
    [resolved] = events_of(records, ApprovalResolved)
    assert resolved.granted is False
    assert results(state)[0].result.text == "deploy was not approved"


async def test_policy_deny_rule_denies_without_asking() -> None:
    counter = Counter()
    asked: list[str] = []

    async def approver(request: ApprovalRequest) -> bool:
        asked.append(request.call_id)
        return True

    state, records, _ = await run_session(
        [counter.make("rm_cache", SAFE)], [faux_tool_call("rm_cache"), faux_text("ok")],
        approver=approver, rules=PolicyRules(deny=["rm_*"]))
    assert counter.runs == []
    assert asked == []
    [verdict] = events_of(records, PolicyDecided)
    assert verdict.decision == "deny" and "rm_*" in verdict.reason
    end = terminal(records, "1.0")
    assert isinstance(end, ToolCallDenied) and end.by == "policy"
    assert results(state)[0].result.is_error
    assert events_of(records, ApprovalRequested) == []


# -- blocked before the policy ----------------------------------------------------------------


async def test_block_by_a_handler_never_runs() -> None:
    counter = Counter()

    def no_secrets(draft: ToolCallDraft) -> Block | None:
        if "secret" in draft.arguments.get("path", ""):
            return Block(reason="secrets are off limits")
        return None

    state, records, _ = await run_session(
        [counter.make("read_file", SAFE, PATH_SCHEMA)],
        [[faux_tool_call("read_file", {"path": "secret.txt"}),
          faux_tool_call("read_file", {"path": "notes.txt"})], faux_text("ok")],
        on_tool_call=[no_secrets])
    assert counter.runs == [("1.1", {"path": "notes.txt"})]
    end = terminal(records, "1.0")
    assert isinstance(end, ToolCallBlocked)
    assert "no_secrets" in end.by and end.reason == "secrets are off limits"
    assert events_of(records, PolicyDecided, "1.0") == []
    first, second = results(state)
    assert first.result.is_error and "secrets are off limits" in first.result.text
    assert not second.result.is_error


async def test_a_raising_handler_blocks_fail_closed() -> None:
    counter = Counter()

    def broken(draft: ToolCallDraft) -> None:
        raise KeyError("oops")

    state, records, _ = await run_session(
        [counter.make("ls", SAFE)], [faux_tool_call("ls"), faux_text("ok")],
        on_tool_call=[broken], approver=approve_all)
    assert counter.runs == []
    end = terminal(records, "1.0")
    assert isinstance(end, ToolCallBlocked)
    assert "broken" in end.by and "KeyError" in end.reason
    assert results(state)[0].result.is_error


async def test_a_handler_returning_garbage_blocks() -> None:
    counter = Counter()
    state, records, _ = await run_session(
        [counter.make("ls", SAFE)], [faux_tool_call("ls"), faux_text("ok")],
        on_tool_call=[lambda event: "yes please"], approver=approve_all)
    assert counter.runs == []
    assert isinstance(terminal(records, "1.0"), ToolCallBlocked)


async def test_hidden_tool_called_by_the_model_is_unavailable() -> None:
    counter = Counter()
    seen: list[str] = []
    state, records, _ = await run_session(
        [counter.make("internal", SAFE, exposure="hidden")],
        [faux_tool_call("internal"), faux_text("ok")],
        on_tool_call=[lambda event: seen.append(event.name)], approver=approve_all)
    assert counter.runs == []
    assert seen == []  # handlers are not consulted for an unavailable call
    end = terminal(records, "1.0")
    assert isinstance(end, ToolCallFailed) and end.kind == "unavailable"
    assert results(state)[0].result.text == "Tool internal is not available"


async def test_unknown_tool_is_unavailable() -> None:
    counter = Counter()
    state, records, model = await run_session(
        [counter.make("known", SAFE)], [faux_tool_call("unknown"), faux_text("ok")],
        approver=approve_all)
    assert counter.runs == []
    end = terminal(records, "1.0")
    assert isinstance(end, ToolCallFailed) and end.kind == "unavailable"
    assert results(state)[0].result.is_error
    assert "Tool unknown is not available" in results(state)[0].result.text
    model.assert_complete()


# -- rewrites -------------------------------------------------------------------------------


async def test_rewrite_is_recorded_seen_by_later_handlers_and_reaches_the_tool() -> None:
    counter = Counter()
    later_saw: list[Any] = []

    def sandbox(draft: ToolCallDraft) -> Rewrite:
        return Rewrite(arguments={"path": "/sandbox/" + draft.arguments["path"]})

    async def audit(draft: ToolCallDraft) -> None:
        later_saw.append(draft.arguments)

    state, records, _ = await run_session(
        [counter.make("read_file", SAFE, PATH_SCHEMA)],
        [faux_tool_call("read_file", {"path": "a.txt"}), faux_text("ok")],
        on_tool_call=[sandbox, audit])
    assert later_saw == [{"path": "/sandbox/a.txt"}]
    assert counter.runs == [("1.0", {"path": "/sandbox/a.txt"})]
    [rewrite] = events_of(records, ToolCallRewritten)
    assert "sandbox" in rewrite.by and rewrite.arguments == {"path": "/sandbox/a.txt"}
    view = state.calls["1.0"]
    assert view.requested_arguments == {"path": "a.txt"}
    assert view.arguments == {"path": "/sandbox/a.txt"}
    # the policy judged after the rewrite
    kinds = [type(e).__name__ for e in call_events(records, "1.0")]
    assert kinds.index("ToolCallRewritten") < kinds.index("PolicyDecided")


async def test_the_approver_sees_the_rewritten_arguments() -> None:
    counter = Counter()
    asked: list[Any] = []

    def narrow(draft: ToolCallDraft) -> Rewrite:
        return Rewrite(arguments={"path": "only/this"})

    async def approver(request: ApprovalRequest) -> bool:
        asked.append(request.arguments)
        return True

    await run_session(
        [counter.make("delete", DANGEROUS, PATH_SCHEMA)],
        [faux_tool_call("delete", {"path": "everything"}), faux_text("ok")],
        on_tool_call=[narrow], approver=approver)
    assert asked == [{"path": "only/this"}]
    assert counter.runs == [("1.0", {"path": "only/this"})]


async def test_rewrite_to_invalid_arguments_ends_as_invalid_arguments() -> None:
    counter = Counter()
    later: list[str] = []

    def breaks_it(draft: ToolCallDraft) -> Rewrite:
        return Rewrite(arguments={"path": 42})

    state, records, _ = await run_session(
        [counter.make("read_file", SAFE, PATH_SCHEMA)],
        [faux_tool_call("read_file", {"path": "a"}), faux_text("ok")],
        on_tool_call=[breaks_it, lambda event: later.append(event.call_id)])
    assert counter.runs == []
    assert later == []
    end = terminal(records, "1.0")
    assert isinstance(end, ToolCallFailed) and end.kind == "invalid_arguments"
    assert "breaks_it" in end.message
    assert events_of(records, PolicyDecided) == []
    assert results(state)[0].result.is_error


async def test_handlers_run_in_registration_order_and_first_block_wins() -> None:
    counter = Counter()
    order: list[str] = []

    def first(draft: ToolCallDraft) -> None:
        order.append("first")

    async def second(draft: ToolCallDraft) -> Block:
        order.append("second")
        return Block(reason="second says no")

    def third(draft: ToolCallDraft) -> Block:
        order.append("third")
        return Block(reason="third says no")

    state, records, _ = await run_session(
        [counter.make("ls", SAFE)], [faux_tool_call("ls"), faux_text("ok")],
        on_tool_call=[first, second, third])
    assert order == ["first", "second"]
    assert counter.runs == []
    end = terminal(records, "1.0")
    assert isinstance(end, ToolCallBlocked)
    assert "second" in end.by and end.reason == "second says no"


async def test_sync_and_async_handlers_both_rewrite() -> None:
    counter = Counter()
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}

    def add_one(draft: ToolCallDraft) -> Rewrite:
        return Rewrite(arguments={"n": draft.arguments["n"] + 1})

    async def double(draft: ToolCallDraft) -> Rewrite:
        return Rewrite(arguments={"n": draft.arguments["n"] * 2})

    state, records, _ = await run_session(
        [counter.make("count", SAFE, schema)],
        [faux_tool_call("count", {"n": 3}), faux_text("ok")],
        on_tool_call=[add_one, double])
    assert counter.runs == [("1.0", {"n": 8})]
    assert [(("add_one" in r.by), ("double" in r.by), r.arguments)
            for r in events_of(records, ToolCallRewritten)] == [
        (True, False, {"n": 4}), (False, True, {"n": 8})]


async def test_handlers_see_model_and_nested_calls_in_order() -> None:
    seen: list[tuple[str, str]] = []

    @tool(annotations=SAFE)
    async def leaf(call: Any, ctx: Any) -> ToolResult:
        return ToolResult(content=[text("leaf")])

    @tool(annotations=SAFE)
    async def root(call: Any, ctx: Any) -> ToolResult:
        outcome = await ctx.execute_tool("leaf", {})
        return ToolResult(content=[text(outcome.result.text)])

    def a(draft: ToolCallDraft) -> None:
        seen.append(("a", draft.call_id))

    async def b(draft: ToolCallDraft) -> None:
        seen.append(("b", draft.call_id))

    await run_session([root, leaf], [faux_tool_call("root"), faux_text("ok")],
                      on_tool_call=[a, b])
    assert seen == [("a", "1.0"), ("b", "1.0"), ("a", "1.0/0"), ("b", "1.0/0")]


async def test_a_handler_mutating_the_event_changes_nothing() -> None:
    counter = Counter()

    def vandal(draft: ToolCallDraft) -> None:
        draft.arguments["path"] = "/etc/shadow"

    model_arguments = {"path": "a.txt"}
    state, records, _ = await run_session(
        [counter.make("read_file", SAFE, PATH_SCHEMA)],
        [faux_tool_call("read_file", model_arguments), faux_text("ok")],
        on_tool_call=[vandal])
    assert counter.runs == [("1.0", {"path": "a.txt"})]
    assert model_arguments == {"path": "a.txt"}
    assert state.calls["1.0"].arguments == {"path": "a.txt"}
    assert events_of(records, ToolCallRewritten) == []


async def test_a_handler_mutating_its_rewrite_later_changes_nothing() -> None:
    counter = Counter()
    kept: list[dict[str, Any]] = []

    def rewrite(draft: ToolCallDraft) -> Rewrite:
        arguments = {"path": "safe"}
        kept.append(arguments)
        return Rewrite(arguments=arguments)

    def mutate_kept(draft: ToolCallDraft) -> None:
        kept[0]["path"] = "evil"

    state, records, _ = await run_session(
        [counter.make("read_file", SAFE, PATH_SCHEMA)],
        [faux_tool_call("read_file", {"path": "x"}), faux_text("ok")],
        on_tool_call=[rewrite, mutate_kept])
    assert counter.runs == [("1.0", {"path": "safe"})]
    assert events_of(records, ToolCallRewritten)[0].arguments == {"path": "safe"}


# -- the approver ---------------------------------------------------------------------------


async def test_a_raising_approver_refuses_with_a_recorded_reason() -> None:
    counter = Counter()

    async def crashing(request: ApprovalRequest) -> bool:
        raise ConnectionError("approval service down")

    state, records, _ = await run_session(
        [counter.make("deploy", DANGEROUS)], [faux_tool_call("deploy"), faux_text("ok")],
        approver=crashing)
    assert counter.runs == []
    [resolved] = events_of(records, ApprovalResolved)
    assert resolved.granted is False
    assert resolved.reason is not None
    assert "ConnectionError" in resolved.reason and "approval service down" in resolved.reason
    end = terminal(records, "1.0")
    assert isinstance(end, ToolCallDenied) and end.by == "approver"
    # the model is told the approver failed, not what its exception said
    assert results(state)[0].result.text == "deploy was not approved: the approver failed"
    assert end.error is not None and end.error.type == "ConnectionError"


async def test_an_approver_answering_not_an_answer_refuses() -> None:
    counter = Counter()

    async def sloppy(request: ApprovalRequest) -> Any:
        return "yes"

    state, records, _ = await run_session(
        [counter.make("deploy", DANGEROUS)], [faux_tool_call("deploy"), faux_text("ok")],
        approver=sloppy)
    assert counter.runs == []
    assert events_of(records, ApprovalResolved)[0].granted is False
    assert results(state)[0].result.text == "deploy was not approved: the approver failed"


async def test_approver_edits_are_a_rewrite_by_the_approver_and_reach_the_tool() -> None:
    counter = Counter()

    async def edit(request: ApprovalRequest) -> ApprovalAnswer:
        return ApprovalAnswer(granted=True, arguments={"path": "/tmp/only-this"})

    state, records, _ = await run_session(
        [counter.make("delete", DANGEROUS, PATH_SCHEMA)],
        [faux_tool_call("delete", {"path": "/"}), faux_text("ok")], approver=edit)
    assert counter.runs == [("1.0", {"path": "/tmp/only-this"})]
    [rewrite] = events_of(records, ToolCallRewritten)
    assert rewrite.by == "approver" and rewrite.arguments == {"path": "/tmp/only-this"}
    assert state.calls["1.0"].arguments == {"path": "/tmp/only-this"}
    assert state.calls["1.0"].status == "completed"


async def test_approver_edits_are_validated_again() -> None:
    counter = Counter()

    async def edit(request: ApprovalRequest) -> ApprovalAnswer:
        return ApprovalAnswer(granted=True, arguments={"path": ["not", "a", "string"]})

    state, records, _ = await run_session(
        [counter.make("delete", DANGEROUS, PATH_SCHEMA)],
        [faux_tool_call("delete", {"path": "/"}), faux_text("ok")], approver=edit)
    assert counter.runs == []
    end = terminal(records, "1.0")
    assert isinstance(end, ToolCallFailed) and end.kind == "invalid_arguments"
    assert "approver" in end.message
    assert results(state)[0].result.is_error


async def test_session_grant_allows_the_next_call_without_asking() -> None:
    counter = Counter()
    asked: list[str] = []

    async def approver(request: ApprovalRequest) -> ApprovalAnswer:
        asked.append(request.call_id)
        return ApprovalAnswer(granted=True, scope="session")

    state, records, _ = await run_session(
        [counter.make("deploy", DANGEROUS)],
        [faux_tool_call("deploy"), faux_tool_call("deploy"), faux_text("ok")], approver=approver)
    assert asked == ["1.0"]
    assert [run[0] for run in counter.runs] == ["1.0", "2.0"]
    assert [v.decision for v in events_of(records, PolicyDecided)] == ["ask", "allow"]
    assert state.session_grants == {"deploy": True}


async def test_a_once_grant_asks_again() -> None:
    counter = Counter()
    asked: list[str] = []

    async def approver(request: ApprovalRequest) -> bool:
        asked.append(request.call_id)
        return True

    await run_session(
        [counter.make("deploy", DANGEROUS)],
        [faux_tool_call("deploy"), faux_tool_call("deploy"), faux_text("ok")], approver=approver)
    assert asked == ["1.0", "2.0"]
    assert len(counter.runs) == 2


async def test_session_refusal_denies_later_calls_without_asking() -> None:
    counter = Counter()
    asked: list[str] = []

    async def approver(request: ApprovalRequest) -> ApprovalAnswer:
        asked.append(request.call_id)
        return ApprovalAnswer(granted=False, scope="session", reason="never")

    state, records, _ = await run_session(
        [counter.make("deploy", DANGEROUS)],
        [faux_tool_call("deploy"), faux_tool_call("deploy"), faux_text("ok")], approver=approver)
    assert asked == ["1.0"]
    assert counter.runs == []
    assert [v.decision for v in events_of(records, PolicyDecided)] == ["ask", "deny"]
    second = terminal(records, "2.0")
    assert isinstance(second, ToolCallDenied) and second.by == "policy"
    assert [e.result.is_error for e in results(state)] == [True, True]


async def test_an_approval_is_keyed_by_engine_id_not_model_id() -> None:
    counter = Counter()
    asked: list[str] = []

    async def approver(request: ApprovalRequest) -> bool:
        asked.append(request.call_id)
        return request.call_id == "1.0"

    state, _, _ = await run_session(
        [counter.make("deploy", DANGEROUS)],
        [faux_tool_call("deploy", id="call_0"), faux_tool_call("deploy", id="call_0"),
         faux_text("ok")], approver=approver)
    assert asked == ["1.0", "2.0"]
    assert [run[0] for run in counter.runs] == ["1.0"]
    assert [e.result.is_error for e in results(state)] == [False, True]


async def test_an_approver_mutating_its_request_changes_nothing() -> None:
    counter = Counter()

    async def vandal(request: ApprovalRequest) -> bool:
        request.arguments["path"] = "/"
        return True

    state, records, _ = await run_session(
        [counter.make("delete", DANGEROUS, PATH_SCHEMA)],
        [faux_tool_call("delete", {"path": "tmp/x"}), faux_text("ok")], approver=vandal)
    assert counter.runs == [("1.0", {"path": "tmp/x"})]
    assert state.calls["1.0"].arguments == {"path": "tmp/x"}
    assert events_of(records, ToolCallRewritten) == []


async def test_session_refusal_governs_a_later_nested_call() -> None:
    counter = Counter()
    asked: list[str] = []
    deploy = counter.make("deploy", DANGEROUS)

    @tool(annotations=SAFE)
    async def release(call: Any, ctx: Any) -> ToolResult:
        outcome = await ctx.execute_tool("deploy", {})
        return ToolResult(content=[text(outcome.result.text)],
                          structured_content={"is_error": outcome.is_error})

    async def approver(request: ApprovalRequest) -> ApprovalAnswer:
        asked.append(request.call_id)
        return ApprovalAnswer(granted=False, scope="session")

    state, records, _ = await run_session(
        [deploy, release],
        [faux_tool_call("deploy"), faux_tool_call("release"), faux_text("ok")],
        approver=approver)
    assert asked == ["1.0"]
    assert counter.runs == []
    end = terminal(records, "2.0/0")
    assert isinstance(end, ToolCallDenied) and end.by == "policy"
    assert state.calls["2.0"].status == "completed"
    assert state.calls["2.0"].result is not None
    assert state.calls["2.0"].result.structured_content == {"is_error": True}


@pytest.mark.parametrize("answer", [True, False])
async def test_a_plain_function_is_an_approver_whose_return_is_its_answer(answer: bool) -> None:
    """A sync approver (a lambda) answers as it returns; it used to refuse everything as an
    approver that failed."""
    @tool(annotations=DANGEROUS)
    async def wipe(call: Any, ctx: Any) -> ToolResult:
        """Needs approval."""
        return ToolResult(content=[text("wiped")])

    asked: list[str] = []

    def approver(request: ApprovalRequest) -> bool:
        asked.append(request.name)
        return answer

    projection, _, _ = await run_session([wipe], [faux_tool_call("wipe", {}), faux_text("done")],
                                         approver=approver)
    [view] = projection.calls.values()
    assert asked == ["wipe"]
    assert view.status == ("completed" if answer else "denied")
    assert view.approval is not None and view.approval.granted is answer
    assert view.terminal is not None and "approver failed" not in repr(view.terminal)
