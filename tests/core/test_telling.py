"""The model is told why a call did not run, in words that are safe to hand it.

A refusal with a reason (the approver's, the host's answer given later, a refusal for the
session) reaches the model with its reason; a refusal without one says only that the call was
not approved. A reason is bounded and has no control characters by the time the model reads
it. A guard that failed (a ``tool_call`` handler or the approver raising) tells the model that
it failed, never its code's names or its exception's text: those stay in the log, in the
event's ``error``.
"""

from __future__ import annotations

from typing import Any

import attrs
from conftest import call_events, counting_clock, run_session

from engine import (
    LATER,
    Annotations,
    ApprovalAnswer,
    ApprovalRequest,
    Session,
    ToolCallDraft,
    ToolResult,
    approve_all,
    text,
    tool,
)
from engine.core.refusals import REASON_LIMIT, for_model
from engine.models import FauxModel, faux_text, faux_tool_call
from engine.replay import redrive
from events import MemoryStore, Record
from events.codec import decode_record, encode_record
from events.results import ErrorInfo, error_result
from events.types import TERMINAL_EVENTS, PolicyDecided, ToolCallBlocked, ToolCallDenied

DANGEROUS = Annotations(destructive=True)


def make_rm(runs: list[str]) -> Any:
    @tool(annotations=DANGEROUS)
    async def rm(call: Any, ctx: Any) -> ToolResult:
        """Remove a file (pretends to)."""
        runs.append(call.call_id)
        return ToolResult(content=[text("removed")])

    return rm


async def later(request: ApprovalRequest) -> Any:
    return LATER


def terminal(records: Any, call_id: str) -> Any:
    [end] = [e for e in call_events(records, call_id) if isinstance(e, TERMINAL_EVENTS)]
    return end


async def test_the_model_reads_the_approvers_reason_for_a_refusal() -> None:
    runs: list[str] = []

    async def refuse(request: ApprovalRequest) -> ApprovalAnswer:
        return ApprovalAnswer(granted=False, reason="only docs/ may be deleted")

    state, records, _ = await run_session([make_rm(runs)], [faux_tool_call("rm"), faux_text("ok")],
                                          approver=refuse)
    assert runs == []
    denied = terminal(records, "1.0")
    assert isinstance(denied, ToolCallDenied) and denied.reason == "only docs/ may be deleted"
    assert state.calls["1.0"].result.text == "rm was not approved: only docs/ may be deleted"


async def test_a_refusal_without_a_reason_says_only_not_approved() -> None:
    state, _, _ = await run_session([make_rm([])], [faux_tool_call("rm"), faux_text("ok")])
    assert state.calls["1.0"].result.text == "rm was not approved"


async def test_the_model_reads_the_reason_the_host_gave_later() -> None:
    runs: list[str] = []

    async def later(request: ApprovalRequest) -> Any:
        return LATER

    store = MemoryStore()
    model = FauxModel([faux_tool_call("rm"), faux_text("ok")])
    async with Session.open(store, model=model, tools=[make_rm(runs)], approver=later,
                            session_id="s", create=True, clock=counting_clock()) as session:
        paused = await session.prompt("go")
        assert paused.stop == "paused"
        await session.resolve_approval("1.0", False, reason="not on a Friday")
        await session.resume()
        assert runs == []
        assert session.state.calls["1.0"].result.text == "rm was not approved: not on a Friday"
        # what the model was sent next carries it
        [entry] = [e for e in model.requests[-1].transcript if getattr(e, "call_id", None)]
        assert entry.result.text == "rm was not approved: not on a Friday"


async def test_a_refusal_for_the_session_tells_its_reason_and_later_calls_say_why() -> None:
    runs: list[str] = []

    async def never(request: ApprovalRequest) -> ApprovalAnswer:
        return ApprovalAnswer(granted=False, scope="session", reason="never in production")

    state, records, _ = await run_session(
        [make_rm(runs)], [faux_tool_call("rm"), faux_tool_call("rm"), faux_text("ok")],
        approver=never)
    assert runs == []
    assert state.calls["1.0"].result.text == "rm was not approved: never in production"
    assert state.calls["2.0"].result.text == (
        "rm was denied: rm was refused for this session: never in production")


def make_tools(runs: list[str]) -> list[Any]:
    """``rm``, and ``tidy``, which calls ``rm`` as a nested call."""

    @tool(annotations=Annotations(read_only=True, open_world=False))
    async def tidy(call: Any, ctx: Any) -> ToolResult:
        outcome = await ctx.execute_tool("rm", {})
        return ToolResult(content=[text(f"tidy saw: {outcome.result.text}")])

    return [make_rm(runs), tidy]


def denials(records: Any, call_id: str) -> tuple[Any, Any]:
    [decided] = [e for e in call_events(records, call_id) if isinstance(e, PolicyDecided)]
    return decided, terminal(records, call_id)


async def test_every_call_a_refusal_for_the_session_refuses_reads_its_reason() -> None:
    runs: list[str] = []
    store = MemoryStore()
    told = "rm was denied: rm was refused for this session: not on a Friday"
    model = FauxModel([faux_tool_call("rm"), [faux_tool_call("rm"), faux_tool_call("tidy")],
                       faux_text("ok")])
    async with Session.open(store, model=model, tools=make_tools(runs), approver=later,
                            session_id="s", create=True, clock=counting_clock()) as session:
        assert (await session.prompt("go")).stop == "paused"
        await session.resolve_approval("1.0", False, scope="session", reason="not on a Friday")
        await session.resume()
        assert session.calls["1.0"].result.text == "rm was not approved: not on a Friday"
        assert session.calls["2.0"].result.text == told  # a later top-level call
        assert session.calls["2.1/0"].result.text == told  # and a later nested one
        assert session.calls["2.1"].result.text == f"tidy saw: {told}"

    # reopened (as another process would), the refusal and its reason are read from the log
    model = FauxModel([[faux_tool_call("rm"), faux_tool_call("tidy")], faux_text("ok")])
    async with Session.open(store, model=model, tools=make_tools(runs), approver=later,
                            session_id="s", clock=counting_clock()) as session:
        await session.prompt("again")
        assert session.calls["4.0"].result.text == told
        assert session.calls["4.1/0"].result.text == told
    assert runs == []
    records = await store.read("s")
    for call_id in ("2.0", "2.1/0", "4.0", "4.1/0"):
        decided, denied = denials(records, call_id)
        # the machine-readable fields: the policy denied it, no rule of the host's did
        assert (decided.decision, decided.rule) == ("deny", None)
        assert isinstance(denied, ToolCallDenied) and (denied.by, denied.rule) == ("policy", None)
        assert denied.reason == decided.reason == "rm was refused for this session: not on a Friday"
    assert (await redrive(records)).ok


async def test_a_long_reason_for_the_session_is_quoted_bounded_in_each_later_refusal() -> None:
    reason = "\x1b[2J" + "r" * 10_000

    async def never(request: ApprovalRequest) -> ApprovalAnswer:
        return ApprovalAnswer(granted=False, scope="session", reason=reason)

    state, records, _ = await run_session(
        [make_rm([])], [faux_tool_call("rm"), faux_tool_call("rm"), faux_text("ok")],
        approver=never)
    decided, denied = denials(records, "2.0")
    assert decided.reason.startswith("rm was refused for this session: \x1b[2Jrrr")
    assert len(decided.reason) < REASON_LIMIT + 100  # the resolution keeps it whole
    told = state.calls["2.0"].result.text
    assert told.startswith("rm was denied: rm was refused for this session: \ufffd[2Jrrr")
    assert len(told) < REASON_LIMIT + 100


async def test_the_reason_the_model_reads_is_bounded_and_has_no_control_characters() -> None:
    reason = "\x1b]52;c;Y2xpcGJvYXJk\x07\u202eevil\x9b2J" + "x" * 10_000

    async def refuse(request: ApprovalRequest) -> ApprovalAnswer:
        return ApprovalAnswer(granted=False, reason=reason)

    state, records, _ = await run_session([make_rm([])], [faux_tool_call("rm"), faux_text("ok")],
                                          approver=refuse)
    told = state.calls["1.0"].result.text
    assert told.startswith("rm was not approved: ")
    assert len(told) < REASON_LIMIT + 100
    assert not any(ch in told for ch in "\x1b\x07\x9b\u202e")
    assert terminal(records, "1.0").reason == reason  # the log keeps every character


async def test_a_raising_handlers_block_tells_the_model_no_internals_and_the_log_keeps_them() -> None:
    runs: list[str] = []

    def make_guard() -> Any:
        def guard(draft: ToolCallDraft) -> None:
            raise KeyError("secret_table in /srv/app/guards.py")

        return guard

    state, records, _ = await run_session(
        [make_rm(runs)], [faux_tool_call("rm"), faux_text("ok")],
        on_tool_call=[make_guard()], approver=approve_all)
    assert runs == []
    blocked = terminal(records, "1.0")
    assert isinstance(blocked, ToolCallBlocked)
    told = state.calls["1.0"].result.text
    assert told == "rm was blocked: a tool_call handler failed"
    for leak in ("<locals>", "make_guard", "guard", "KeyError", "secret_table"):
        assert leak not in told
    # the log has the detail: who failed, and how
    assert "<locals>" in blocked.by and blocked.by.endswith("guard")
    assert blocked.error is not None and blocked.error.type == "KeyError"
    assert "secret_table" in blocked.error.message and "guard" in blocked.error.traceback


async def test_a_handler_answer_the_gate_cannot_use_blocks_saying_what_was_wrong() -> None:
    def sloppy(draft: ToolCallDraft) -> Any:
        return "fine by me"

    state, records, _ = await run_session(
        [make_rm([])], [faux_tool_call("rm"), faux_text("ok")], on_tool_call=[sloppy],
        approver=approve_all)
    blocked = terminal(records, "1.0")
    assert isinstance(blocked, ToolCallBlocked) and blocked.error is None
    assert blocked.by.endswith("<locals>.sloppy")
    assert state.calls["1.0"].result.text == (
        "rm was blocked: a tool_call handler returned a str, not None, a Block or a Rewrite")


async def test_a_raising_approver_tells_the_model_it_failed_and_the_log_keeps_why() -> None:
    async def broken(request: ApprovalRequest) -> bool:
        raise RuntimeError("connection to approvals.internal:5432 refused")

    state, records, _ = await run_session([make_rm([])], [faux_tool_call("rm"), faux_text("ok")],
                                          approver=broken)
    denied = terminal(records, "1.0")
    assert isinstance(denied, ToolCallDenied) and denied.by == "approver"
    assert state.calls["1.0"].result.text == "rm was not approved: the approver failed"
    assert denied.error is not None and denied.error.type == "RuntimeError"
    assert "approvals.internal" in denied.error.message
    assert "approvals.internal" in denied.reason  # the log's reason keeps its detail


def test_for_model_keeps_ordinary_text_and_bounds_the_rest() -> None:
    assert for_model("only docs/ may be deleted") == "only docs/ may be deleted"
    assert for_model("two\nlines\tand a tab") == "two\nlines\tand a tab"
    long = for_model("y" * (REASON_LIMIT * 3))
    assert len(long) <= REASON_LIMIT + 60 and long.startswith("y" * REASON_LIMIT)
    assert "\x00" not in for_model("a\x00b") and "\ud800" not in for_model("a\ud800b")


# -- the log and its replay -------------------------------------------------------------------


def test_a_guards_error_is_written_only_when_there_is_one() -> None:
    plain = ToolCallDenied(call_id="1.0", reason="no", by="approver",
                           result=error_result("rm was not approved: no"))
    assert "error" not in encode_record(Record(session_id="s", seq=1, time=0.0, event=plain))["data"]
    failed = attrs.evolve(plain, error=ErrorInfo(type="KeyError", message="'x'", traceback="t"))
    line = encode_record(Record(session_id="s", seq=1, time=0.0, event=failed))
    assert line["data"]["error"]["type"] == "KeyError"
    assert decode_record(line).event == failed


async def test_a_session_whose_guards_failed_and_refused_with_reasons_replays_exactly() -> None:
    def guard(draft: ToolCallDraft) -> None:
        if draft.arguments.get("path") == "/":
            raise KeyError("no root")

    async def approver(request: ApprovalRequest) -> Any:
        path = request.arguments.get("path")
        if path == "boom":
            raise RuntimeError("approvals down")
        return ApprovalAnswer(granted=False, reason=f"\x1b[31m{path} stays\x1b[0m" * 60)

    store = MemoryStore()
    model = FauxModel([[faux_tool_call("rm", {"path": "/"}), faux_tool_call("rm", {"path": "a"}),
                        faux_tool_call("rm", {"path": "boom"})], faux_text("ok")])
    async with Session.open(store, model=model, tools=[make_rm([])], approver=approver,
                            session_id="s", create=True, clock=counting_clock()) as session:
        session.on_tool_call(guard)
        await session.prompt("go")
    records = await store.read("s")
    ends = [terminal(records, call_id) for call_id in ("1.0", "1.1", "1.2")]
    assert [type(end).__name__ for end in ends] == ["ToolCallBlocked", "ToolCallDenied",
                                                    "ToolCallDenied"]
    assert ends[0].error is not None and ends[1].error is None and ends[2].error is not None
    report = await redrive(records)
    assert report.ok, [d.describe() for d in report.divergences]


async def test_a_log_an_older_engine_worded_replays_without_divergence() -> None:
    """Before the model was told approvers' reasons, a refusal read "NAME was not approved"
    and a reason reached it whole: such a log replays as it is, without divergence."""

    async def refuse(request: ApprovalRequest) -> ApprovalAnswer:
        return ApprovalAnswer(granted=False, reason="not\x07 now")

    _, records, _ = await run_session([make_rm([])], [faux_tool_call("rm"), faux_text("ok")],
                                      approver=refuse)
    older = [attrs.evolve(r, event=attrs.evolve(r.event, result=error_result("rm was not approved")))
             if isinstance(r.event, ToolCallDenied) else r for r in records]
    report = await redrive(older)
    assert report.ok, [d.describe() for d in report.divergences]
    # a wording no engine wrote is still a divergence
    edited = [attrs.evolve(r, event=attrs.evolve(r.event, result=error_result("rm ran fine")))
              if isinstance(r.event, ToolCallDenied) else r for r in records]
    assert not (await redrive(edited)).ok


async def test_a_log_whose_later_refusals_did_not_quote_the_reason_replays_without_divergence(
) -> None:
    """Before a refusal for the session quoted its reason, each later call it refused read
    "NAME was refused for this session": such a log replays as it is."""

    async def never(request: ApprovalRequest) -> ApprovalAnswer:
        return ApprovalAnswer(granted=False, scope="session", reason="never in production")

    _, records, _ = await run_session(
        [make_rm([])], [faux_tool_call("rm"), faux_tool_call("rm"), faux_text("ok")],
        approver=never)
    formerly = "rm was refused for this session"

    def older(record: Record) -> Record:
        event = record.event
        if isinstance(event, PolicyDecided) and event.decision == "deny":
            return attrs.evolve(record, event=attrs.evolve(event, reason=formerly))
        if isinstance(event, ToolCallDenied) and event.by == "policy":
            return attrs.evolve(record, event=attrs.evolve(
                event, reason=formerly, result=error_result(f"rm was denied: {formerly}")))
        return record

    report = await redrive([older(r) for r in records])
    assert report.ok, [d.describe() for d in report.divergences]
