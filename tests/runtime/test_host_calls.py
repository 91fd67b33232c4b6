"""Host calls: ``session.call_tool`` runs a tool for the host, on the same path as a model's.

Every test runs a real Session (FauxModel, MemoryStore) and reads what happened from the
outcome, the call tree and the log; each log is checked against every invariant
(:func:`engine.testing.invariants.check_log`).
"""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest
import trio

from engine import (
    LATER,
    Annotations,
    ApprovalRequest,
    Block,
    LogInconsistency,
    NoModel,
    PolicyRules,
    Session,
    ToolCallDraft,
    ToolResult,
    fold,
    text,
    tool,
)
from engine.cli import main
from engine.models import FauxModel, faux_text, faux_tool_call
from engine.testing.invariants import check_log
from events import JsonlStore, MemoryStore
from events.types import (
    ToolCallCancelled,
    ToolCallCompleted,
    ToolCallFailed,
    ToolCallRequested,
    UserMessage,
)

SAFE = Annotations(read_only=True, open_world=False)
DANGEROUS = Annotations(destructive=True)


@tool(annotations=SAFE, input_schema={"type": "object", "properties": {"n": {"type": "integer"}},
                                      "required": ["n"]},
      output_schema={"type": "object", "properties": {"double": {"type": "integer"}},
                     "required": ["double"]})
async def double(call: Any, ctx: Any) -> ToolResult:
    """Twice n."""
    return ToolResult(content=[text("ok")],
                      structured_content={"double": 2 * call.arguments["n"]})


@tool(annotations=SAFE)
async def boom(call: Any, ctx: Any) -> ToolResult:
    """Raises."""
    raise RuntimeError("kaput")


@tool(annotations=SAFE, output_schema={"type": "object", "required": ["x"]})
async def shapeless(call: Any, ctx: Any) -> ToolResult:
    """Breaks its output schema."""
    return ToolResult(content=[text("no x")], structured_content={"y": 1})


@tool(annotations=DANGEROUS)
async def wipe(call: Any, ctx: Any) -> ToolResult:
    """Needs approval."""
    return ToolResult(content=[text("wiped")])


@tool(annotations=SAFE)
async def nests(call: Any, ctx: Any) -> ToolResult:
    """Calls double as a nested call."""
    inner = await ctx.execute_tool("double", {"n": 4})
    return ToolResult(content=[text(f"inner {inner.structured_content}")])


TOOLS = [double, boom, shapeless, wipe, nests]


async def test_a_host_call_runs_the_tool_and_is_recorded_without_a_transcript_entry() -> None:
    store = MemoryStore()
    model = FauxModel([faux_text("hello")])
    async with Session.open(store, model=model, tools=TOOLS) as session:
        outcome = await session.call_tool("double", {"n": 21})
        assert outcome.call_id == "h0"
        assert not outcome.is_error
        assert outcome.structured_content == {"double": 42}
        second = await session.call_tool("double", {"n": 1})
        assert second.call_id == "h1"
        assert session.transcript == []
        await session.prompt("hi")
        assert [type(e).__name__ for e in session.transcript] == [
            "UserMessage", "AssistantMessage"]
        view = session.calls["h0"]
        assert view.origin == "host" and view.parent_id is None and view.status == "completed"
        [request] = [r.event for r in session.records if isinstance(r.event, ToolCallRequested)
                     and r.event.call_id == "h0"]
        assert request.origin == "host" and request.model_call_id is None
        # the outcome is written before call_tool returns
        stored = await store.read(session.session_id)
        assert any(isinstance(r.event, ToolCallCompleted) and r.event.call_id == "h1"
                   for r in stored)
        check_log(stored, state=session.state, transcript=session.transcript, closed=True)
    assert fold(await store.read(session.session_id)).snapshot() == session.state.snapshot()


@pytest.mark.parametrize(("name", "arguments", "kind"), [
    ("ghost", {}, "unavailable"),
    ("double", {"n": "x"}, "invalid_arguments"),
    ("double", {"n": {1, 2}}, "invalid_arguments"),  # not JSON
    ("boom", {}, "raised"),
    ("shapeless", {}, "invalid_output"),
])
async def test_a_host_call_never_raises_for_a_tool_failure(name: str, arguments: Any,
                                                           kind: str) -> None:
    store = MemoryStore()
    async with Session.open(store, model=FauxModel([]), tools=TOOLS) as session:
        outcome = await session.call_tool(name, arguments)
        assert outcome.is_error
        terminal = session.calls[outcome.call_id].terminal
        assert isinstance(terminal, ToolCallFailed) and terminal.kind == kind
        check_log(await store.read(session.session_id), state=session.state, closed=True)


async def test_handlers_policy_and_approver_see_a_host_call() -> None:
    seen: list[tuple[str, str]] = []
    asked: list[ApprovalRequest] = []

    async def approver(request: ApprovalRequest) -> bool:
        asked.append(request)
        return False

    store = MemoryStore()
    async with Session.open(store, model=FauxModel([]), tools=TOOLS, approver=approver,
                            rules=PolicyRules(deny=["boom"])) as session:
        @session.on_tool_call
        def spy(draft: ToolCallDraft) -> Block | None:
            seen.append((draft.call_id, draft.origin))
            return Block("no nesting today") if draft.name == "nests" else None

        blocked = await session.call_tool("nests")
        denied = await session.call_tool("boom")
        refused = await session.call_tool("wipe")
        assert [o.is_error for o in (blocked, denied, refused)] == [True, True, True]
        assert [session.calls[c].status for c in ("h0", "h1", "h2")] == [
            "blocked", "denied", "denied"]
        assert refused.result.text == "wipe was not approved"
        assert seen == [("h0", "host"), ("h1", "host"), ("h2", "host")]
        assert [(r.call_id, r.origin) for r in asked] == [("h2", "host")]
        check_log(await store.read(session.session_id), state=session.state, closed=True,
                  rules=PolicyRules(deny=["boom"]), asked=["h2"])


async def test_a_host_call_makes_nested_calls_named_after_it() -> None:
    async with Session.open(MemoryStore(), model=FauxModel([]), tools=TOOLS) as session:
        outcome = await session.call_tool("nests")
        assert outcome.result.text == "inner {'double': 8}"
        assert session.state.children("h0") == ("h0/0",)
        assert session.calls["h0/0"].origin == "nested"


# -- who may call what ----------------------------------------------------------------------

#: The host's column of the exposure table (docs/tools.md): "active" means while active.
HOST_MAY = {"direct": "active", "model-only": "active", "codemode": "always",
            "deferred": "always", "hidden": "active"}


@pytest.mark.parametrize("exposure", list(HOST_MAY))
@pytest.mark.parametrize("activated", [False, True])
async def test_what_a_host_may_call(exposure: str, activated: bool) -> None:
    @tool(name="target", annotations=SAFE, exposure=exposure)  # type: ignore[arg-type]
    async def target(call: Any, ctx: Any) -> ToolResult:
        return ToolResult(content=[text("ran")])

    async with Session.open(MemoryStore(), model=FauxModel([]), tools=[target]) as session:
        await session.set_active_tools(["target"] if activated else [])
        active = "target" in session.state.active_tools
        outcome = await session.call_tool("target")
        rule = HOST_MAY[exposure]
        allowed = rule == "always" or (rule == "active" and active)
        assert outcome.is_error is not allowed
        if not allowed:
            assert outcome.result.text == "Tool target is not available"


# -- concurrency ------------------------------------------------------------------------------


async def test_host_calls_run_concurrently_with_each_other_and_with_a_prompt() -> None:
    """Each tool waits for an event only another call sets: if the calls ran one after
    another, none would finish."""
    model_ran, first_host_ran, second_host_ran = trio.Event(), trio.Event(), trio.Event()

    @tool(annotations=SAFE)
    async def from_model(call: Any, ctx: Any) -> ToolResult:
        model_ran.set()
        await first_host_ran.wait()
        await second_host_ran.wait()
        return ToolResult(content=[text("model's")])

    @tool(annotations=SAFE)
    async def first(call: Any, ctx: Any) -> ToolResult:
        await model_ran.wait()
        first_host_ran.set()
        await second_host_ran.wait()
        return ToolResult(content=[text("first")])

    @tool(annotations=SAFE)
    async def second(call: Any, ctx: Any) -> ToolResult:
        await first_host_ran.wait()
        second_host_ran.set()
        return ToolResult(content=[text("second")])

    store = MemoryStore()
    model = FauxModel([faux_tool_call("from_model"), faux_text("done")])
    outcomes: dict[str, Any] = {}
    async with Session.open(store, model=model, tools=[from_model, first, second]) as session:
        async def host(name: str) -> None:
            outcomes[name] = await session.call_tool(name)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(host, "first")
            nursery.start_soon(host, "second")
            result = await session.prompt("go")
        assert result.stop == "end_turn"
        assert {n: o.result.text for n, o in outcomes.items()} == {"first": "first",
                                                                   "second": "second"}
        assert sorted(o.call_id for o in outcomes.values()) == ["h0", "h1"]
        assert len(session.transcript) == 4  # user, assistant, one result, assistant
        check_log(await store.read(session.session_id), state=session.state,
                  transcript=session.transcript, closed=True)


async def test_a_prompt_does_not_wait_for_a_host_call() -> None:
    release = trio.Event()
    started = trio.Event()

    @tool(annotations=SAFE)
    async def slow(call: Any, ctx: Any) -> ToolResult:
        started.set()
        await release.wait()
        return ToolResult(content=[text("slow")])

    model = FauxModel([faux_tool_call("double", {"n": 1}), faux_text("done")])
    async with Session.open(MemoryStore(), model=model, tools=[slow, double]) as session:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.call_tool, "slow")
            await started.wait()
            result = await session.prompt("go")  # returns while the host call runs
            assert result.stop == "end_turn"
            assert session.calls["h0"].status == "running"
            release.set()
        assert session.calls["h0"].status == "completed"


# -- approvals answered later, cancellation, closing ------------------------------------------


class Later:
    """An approver that answers "later", and says when it was asked (``asked``)."""

    def __init__(self) -> None:
        self.asked = trio.Event()

    async def __call__(self, request: ApprovalRequest) -> Any:
        self.asked.set()
        return LATER

    async def wait(self) -> None:
        """Until the approver was asked (then the request is pending), for the next one."""
        await self.asked.wait()
        self.asked = trio.Event()


async def test_a_host_call_waits_for_an_approval_answered_later() -> None:
    store, later = MemoryStore(), Later()
    outcomes: list[Any] = []
    async with Session.open(store, model=FauxModel([]), tools=TOOLS, approver=later) as session:
        async with trio.open_nursery() as nursery:
            async def host() -> None:
                outcomes.append(await session.call_tool("wipe"))

            nursery.start_soon(host)
            await later.wait()
            [request] = session.pending_approvals()
            assert (request.call_id, request.origin, request.name) == ("h0", "host", "wipe")
            assert outcomes == []
            await session.resolve_approval("h0", granted=True)
        [outcome] = outcomes
        assert not outcome.is_error and outcome.result.text == "wiped"
        # a refusal answered later is an error outcome, not an exception
        async with trio.open_nursery() as nursery:
            nursery.start_soon(host)
            await later.wait()
            await session.resolve_approval("h1", granted=False, reason="not today")
        assert outcomes[1].is_error and session.calls["h1"].status == "denied"
        check_log(await store.read(session.session_id), state=session.state, closed=True)


async def test_cancelling_a_host_call_records_it_cancelled() -> None:
    store, later = MemoryStore(), Later()
    async with Session.open(store, model=FauxModel([]), tools=TOOLS, approver=later) as session:
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(session.call_tool, "wipe")
                await later.wait()
                scope.cancel()
        terminal = session.calls["h0"].terminal
        assert isinstance(terminal, ToolCallCancelled)
        assert session.pending_approvals() == ()
        check_log(await store.read(session.session_id), state=session.state, closed=True)


async def close_under_a_waiting_host_call(store: MemoryStore, later: Later, tools: list[Any],
                                         name: str, *, answer: bool = False,
                                         ) -> tuple[str, list[BaseException]]:
    """Open a session, call ``name`` for the host from a task outside its block, and end the
    block while the call waits for its approval (``answer``: just after granting it). The
    session's id, and what the host's call raised."""
    errors: list[BaseException] = []
    async with trio.open_nursery() as nursery:
        async with Session.open(store, model=FauxModel([]), tools=tools,
                                approver=later) as session:

            async def host() -> None:
                try:
                    await session.call_tool(name)
                except RuntimeError as exc:
                    errors.append(exc)

            nursery.start_soon(host)  # a task outside the session's block
            await later.wait()
            if answer:
                await session.resolve_approval("h0", granted=True)
                # the block ends before the host's task has gone on with the answer
    return session.session_id, errors


async def test_a_host_call_left_open_by_a_closed_session_is_resumed_after_reopening() -> None:
    store, later = MemoryStore(), Later()
    sid, errors = await close_under_a_waiting_host_call(store, later, TOOLS, "wipe")
    # the block ended with the call waiting: it stays open in the log
    [error] = errors
    assert "resume_call('h0')" in str(error)
    assert fold(await store.read(sid)).pending_approvals == ("h0",)

    async with Session.open(store, model=FauxModel([]), tools=TOOLS, approver=later,
                            session_id=sid) as session:
        assert [r.call_id for r in session.pending_approvals()] == ["h0"]
        await session.resolve_approval("h0", granted=True)
        outcome = await session.resume_call("h0")
        assert outcome.result.text == "wiped"
        again = await session.resume_call("h0")  # an ended call answers from the log
        assert again.result == outcome.result
        assert (await session.call_tool("double", {"n": 2})).call_id == "h1"
        with pytest.raises(ValueError, match="not a host call"):
            await session.resume_call("1.0")
        check_log(await store.read(sid), state=session.state, closed=True)


async def test_a_host_call_answered_just_before_the_close_runs_once_after_reopening() -> None:
    store, later = MemoryStore(), Later()
    runs: list[str] = []

    @tool(annotations=DANGEROUS)
    async def erase(call: Any, ctx: Any) -> ToolResult:
        """Needs approval; counts its runs."""
        runs.append(call.call_id)
        return ToolResult(content=[text("erased")])

    sid, errors = await close_under_a_waiting_host_call(store, later, [erase], "erase",
                                                        answer=True)
    assert len(errors) + len(runs) == 1  # stopped with the block, or it ran before it ended

    async with Session.open(store, model=FauxModel([]), tools=[erase], approver=later,
                            session_id=sid) as session:
        outcome = await session.resume_call("h0")
        check_log(await store.read(sid), state=session.state, closed=True)
    assert outcome.result.text == "erased"
    assert runs == ["h0"]  # the answer was used, once


async def test_a_host_call_interrupted_mid_body_ends_interrupted_on_resume() -> None:
    """A log cut while a non-idempotent body ran (the process stopped)."""
    store = MemoryStore()
    entered = trio.Event()

    @tool(annotations=SAFE)
    async def hang(call: Any, ctx: Any) -> ToolResult:
        entered.set()
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    async with trio.open_nursery() as nursery:
        async with Session.open(store, model=FauxModel([]), tools=[hang]) as session:
            sid = session.session_id
            nursery.start_soon(_swallow, session.call_tool("hang"))
            await entered.wait()
    async with Session.open(store, model=FauxModel([]), tools=[hang],
                            session_id=sid) as session:
        assert session.calls["h0"].status == "running"
        outcome = await session.resume_call("h0")
        terminal = session.calls["h0"].terminal
        assert isinstance(terminal, ToolCallFailed) and terminal.kind == "interrupted"
        assert outcome.is_error


async def _swallow(call: Any) -> None:
    try:
        await call
    except RuntimeError:
        pass


async def test_a_closed_session_refuses_host_calls() -> None:
    async with Session.open(MemoryStore(), model=FauxModel([]), tools=TOOLS) as session:
        pass
    with pytest.raises(RuntimeError, match="closed"):
        await session.call_tool("double", {"n": 1})


async def test_a_forged_host_call_id_is_refused_by_the_fold() -> None:
    store = MemoryStore()
    async with Session.open(store, model=FauxModel([]), tools=TOOLS) as session:
        await session.call_tool("double", {"n": 1})
    records = await store.read(session.session_id)
    request = next(r for r in records if isinstance(r.event, ToolCallRequested))
    forged = [attrs.evolve(r, event=attrs.evolve(r.event, call_id="h5"))
              if r is request else r for r in records]
    with pytest.raises(LogInconsistency, match="host's next call is h0"):
        fold(forged[: records.index(request) + 1])
    assert not any(isinstance(r.event, UserMessage) for r in records)


# -- reading a log with host calls --------------------------------------------------------------


def test_show_lists_host_calls_in_the_call_tree(tmp_path: Any,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    # a plain test: the command line runs its own trio loop, as it does for a user
    log = tmp_path / "host.jsonl"

    async def record() -> None:
        model = FauxModel([faux_tool_call("double", {"n": 2}), faux_text("done")])
        async with Session.open(JsonlStore(log), model=model, tools=TOOLS, session_id="s",
                                create=True) as session:
            await session.call_tool("nests")
            await session.prompt("go")

    trio.run(record)
    assert main(["show", str(log), "--json"]) == 0
    [shown] = json.loads(capsys.readouterr().out)
    assert [(c["call_id"], c["origin"]) for c in shown["calls"]] == [
        ("h0", "host"), ("h0/0", "nested"), ("1.0", "model")]
    assert [e.get("call_id") for e in shown["transcript"] if e["kind"] == "tool_result"] == [
        "1.0"]
    assert main(["show", str(log)]) == 0
    out = capsys.readouterr().out
    assert "h0" in out and "the host (session.call_tool)" in out and "h0/0" in out


# -- replay -----------------------------------------------------------------------------------


async def _host_session(store: MemoryStore, later: Later) -> str:
    """A session with host calls before, during and after a prompt: one answered later, one
    cancelled while it waited, one with a nested call, one left open by the closing session."""
    model = FauxModel([faux_tool_call("double", {"n": 3}), faux_text("done")])
    async with trio.open_nursery() as outside:
        async with Session.open(store, model=model, tools=TOOLS, approver=later) as session:
            await session.call_tool("nests")
            async with trio.open_nursery() as nursery:
                nursery.start_soon(session.call_tool, "wipe")  # h1, answered later
                await later.wait()
                await session.prompt("go")
                await session.resolve_approval("h1", granted=True)
            with trio.CancelScope() as scope:  # h2, cancelled while it waits
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(session.call_tool, "wipe")
                    await later.wait()
                    scope.cancel()
            await session.call_tool("boom")  # h3
            outside.start_soon(_swallow, session.call_tool("wipe"))  # h4, left open
            await later.wait()
    return session.session_id


async def test_a_session_with_host_calls_replays_without_divergence() -> None:
    from engine.replay import redrive

    store = MemoryStore()
    sid = await _host_session(store, Later())
    records = await store.read(sid)
    state = fold(records)
    assert [state.calls[c].status for c in ("h0", "h1", "h2", "h3", "h4")] == [
        "completed", "completed", "cancelled", "failed", "awaiting"]
    check_log(records, state=state)
    report = await redrive(records)
    assert report.ok, [d.describe() for d in report.divergences]
    replayed = fold(report.replayed)
    assert replayed.calls["h4"].status == "awaiting"
    assert replayed.host_calls == 5
    # today's policy denies what the host asked for then: the replay says so, per call
    report = await redrive(records, rules=PolicyRules(deny=["double"]))
    assert {d.subject for d in report.divergences if d.scope == "call"} >= {"h0/0", "1.0"}


async def test_a_session_without_a_model_takes_host_calls_and_refuses_a_prompt() -> None:
    """A session that only serves its tools needs no model; a prompt there says what is
    missing and records nothing."""
    @tool(annotations=Annotations(read_only=True, open_world=False))
    async def echo(call: Any, ctx: Any) -> ToolResult:
        """Says it back."""
        return ToolResult(content=[text(str(call.arguments.get("say")))])

    store = MemoryStore()
    async with Session.open(store, tools=[echo], session_id="s", create=True) as session:
        outcome = await session.call_tool("echo", {"say": "hi"})
        assert not outcome.is_error and outcome.result.text == "hi"
        before = list(session.records)
        for attempt in (session.prompt("go"), session.resume()):
            with pytest.raises(NoModel, match="opened without a model"):
                await attempt
        assert list(session.records) == before
    check_log(await store.read("s"))
