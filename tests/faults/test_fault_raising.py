"""Everything the host plugs in can raise: tools, ``tool_call`` and ``tool_result`` handlers,
the approver, the model, the clock. Whatever raises and wherever, the log stays consistent.

What must happen (DESIGN, "one call, in order", and docs/concepts.md):

- an ``Exception`` from a ``tool_call`` handler blocks the call (fail closed), from a
  ``tool_result`` handler is recorded and skipped, from the approver refuses, from a tool fails
  that call alone (kind ``raised``; its siblings and its parent go on), from the model comes out
  of ``prompt()`` as itself. Each kind of exception is tried: a plain one, a subclass, an
  ``ExceptionGroup``, an ``OSError``, and one whose ``str()`` itself raises. The session goes on
  after each of them: the next prompt works.
- a ``BaseException`` that is not an ``Exception`` (``KeyboardInterrupt``, ``SystemExit``, one
  of the host's own) is not a tool failure: it is never turned into a result. Raised by what
  the loop consults around the calls (a ``tool_call`` handler or the approver gating a model's
  call, the model), it comes out of ``prompt()`` as itself, every call of the batch closed, and
  the session goes on. Raised inside a running call (a tool body, a ``tool_result`` handler,
  anything about a nested call), it stops the session: it comes out of ``Session.open``'s
  block (a ``KeyboardInterrupt`` or ``SystemExit`` as itself, whether ``prompt()`` or
  ``resume()`` ran the call; one of the host's own inside exception groups: it crossed the
  session's nursery), ``prompt()`` does not return as if the batch had ended, the model is not
  asked again, and the log closes every call it interrupted.
- a clock that raises (once, or from some reading on) makes the step that read it fail; the
  exception reaches the host (or, read inside a tool's own ``ctx`` call, fails that tool, and
  the log says why), and the log in the store opens, folds, and resumes to a consistent end
  with a working clock.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest
import trio
from conftest import counting_clock

from engine import (
    LATER,
    ApprovalRequest,
    ResultPatch,
    Session,
    ToolCallDraft,
    ToolResult,
    ToolResultDraft,
    approve_all,
    text,
    tool,
)
from engine.core.reducers import Projection
from engine.models import FauxModel, ModelRequest, faux_text, faux_tool_call
from events import MemoryStore, Record
from events.types import (
    TERMINAL_EVENTS,
    ResultHandlerFailed,
    ToolCallBlocked,
    ToolCallCancelled,
    ToolCallDenied,
    ToolCallFailed,
)
from tests.faults.checks import SAFE, assert_consistent, capture, leaves

SID = "raising"


class ToolBug(Exception):
    """An exception of the host's own."""


class Unprintable(Exception):
    """An exception whose message cannot even be rendered."""

    def __str__(self) -> str:
        raise RuntimeError("this exception cannot be printed")


class HostStop(BaseException):
    """A BaseException of the host's own (like trio's Cancelled, not an Exception)."""


EXCEPTIONS: dict[str, Callable[[], Exception]] = {
    "ValueError": lambda: ValueError("bad value"),
    "subclass": lambda: ToolBug("the tool has a bug"),
    "ExceptionGroup": lambda: ExceptionGroup("two at once", [ValueError("a"), KeyError("b")]),
    "OSError": lambda: OSError(5, "Input/output error"),
    "unprintable": Unprintable,
}
BASE_EXCEPTIONS: dict[str, Callable[[], BaseException]] = {
    "KeyboardInterrupt": lambda: KeyboardInterrupt("stop"),
    "SystemExit": lambda: SystemExit(3),
    "HostStop": lambda: HostStop("the host's own"),
}


class Scene:
    """One session with a batch of four calls: ``work`` (safe), ``parent`` (nested ``work``
    then ``risky``), ``risky`` (needs approval) and ``boom``; each piece raises when told to."""

    def __init__(self, stage: str, make: Callable[[], BaseException], *,
                 nested_only: bool = False, model_turn: int = 1) -> None:
        self.stage = stage
        self.make = make
        self.nested_only = nested_only
        self.model_turn = model_turn
        self.ran: list[str] = []
        self.patched: list[str] = []
        self.store = MemoryStore()
        self.model = FauxModel([
            [faux_tool_call("work"), faux_tool_call("parent"), faux_tool_call("risky"),
             faux_tool_call("boom")],
            faux_text("done"),
            faux_text("again"),
        ])
        self.asked = 0

    def raises(self, origin: str) -> bool:
        return not self.nested_only or origin == "nested"

    def tools(self) -> list[Any]:
        scene = self

        @tool(annotations=SAFE)
        async def work(call: Any, ctx: Any) -> ToolResult:
            scene.ran.append(call.call_id)
            ctx.report_progress("working")
            await trio.lowlevel.checkpoint()
            return ToolResult(content=[text("worked")])

        @tool(annotations=SAFE)
        async def parent(call: Any, ctx: Any) -> ToolResult:
            scene.ran.append(call.call_id)
            first = await ctx.execute_tool("work")
            second = await ctx.execute_tool("risky")
            third = await ctx.execute_tool("boom")
            return ToolResult(content=[text("parent done")], structured_content={
                "errors": [first.is_error, second.is_error, third.is_error]})

        @tool()  # no annotations: needs approval
        async def risky(call: Any, ctx: Any) -> ToolResult:
            scene.ran.append(call.call_id)
            return ToolResult(content=[text("risky done")])

        @tool(annotations=SAFE)
        async def boom(call: Any, ctx: Any) -> ToolResult:
            scene.ran.append(call.call_id)
            await trio.lowlevel.checkpoint()
            if scene.stage == "tool" and scene.raises(call.origin):
                raise scene.make()
            return ToolResult(content=[text("no boom")])

        return [work, parent, risky, boom]

    async def approver(self, request: ApprovalRequest) -> bool:
        await trio.lowlevel.checkpoint()
        if self.stage == "approver" and self.raises(request.origin):
            raise self.make()
        return True

    def call_handler(self, draft: ToolCallDraft) -> None:
        if self.stage == "call" and self.raises(draft.origin):
            raise self.make()

    def result_handler(self, draft: ToolResultDraft) -> None:
        if self.stage == "result" and self.raises(draft.origin):
            raise self.make()

    def later_result_handler(self, draft: ToolResultDraft) -> ResultPatch:
        self.patched.append(draft.call_id)
        return ResultPatch(structured_content={"patched": draft.call_id})

    async def complete(self, request: ModelRequest) -> Any:
        self.asked += 1
        if self.stage == "model" and self.asked == self.model_turn:
            raise self.make()
        return await self.model.complete(request)

    async def run(self, again: bool = True) -> Projection:
        """Open, prompt (what the prompt raised is kept in ``self.prompt_raised``), prompt
        again (with ``again``), close; return the live state."""
        self.prompt_raised: BaseException | None = None
        self.prompt_result: Any = None
        self.again: Any = None
        async with Session.open(self.store, model=self, tools=self.tools(),  # type: ignore[arg-type]
                                approver=self.approver, session_id=SID, create=True,
                                clock=counting_clock()) as session:
            session.on_tool_call(self.call_handler)
            session.on_tool_result(self.result_handler)
            session.on_tool_result(self.later_result_handler)
            try:
                self.prompt_result = await session.prompt("go")
            except Exception as exc:  # noqa: BLE001 - kept: the tests check what came out
                self.prompt_raised = exc
            except BaseException as exc:
                if isinstance(exc, trio.Cancelled):  # the session itself is going down
                    raise
                self.prompt_raised = exc
            finally:
                self.calls_after_prompt = len(session.state.calls)
                self.ran_after_prompt = list(self.ran)
            if again:
                assert session.state.open_calls == ()
                self.again = await session.prompt("again")
            return session.state


def records_of(scene: Scene) -> list[Record]:
    return trio.run(scene.store.read, SID)


def terminal(records: list[Record], call_id: str) -> Any:
    [event] = [r.event for r in records if isinstance(r.event, TERMINAL_EVENTS)
               and r.event.call_id == call_id]
    return event


def run_scene(scene: Scene) -> Projection:
    live = trio.run(scene.run)
    trio.run(assert_consistent, scene.store, SID, live)
    assert scene.again is not None and scene.again.text in ("done", "again")
    return live


# -- Exceptions: each stage fails closed, alone, and the session goes on -------------------------


@pytest.mark.parametrize("exc", EXCEPTIONS)
def test_a_raising_tool_call_handler_blocks_and_the_tool_never_runs(exc: str) -> None:
    scene = Scene("call", EXCEPTIONS[exc])
    live = run_scene(scene)
    assert scene.ran == []
    records = records_of(scene)
    for call_id in ("1.0", "1.1", "1.2", "1.3"):
        blocked = terminal(records, call_id)
        assert isinstance(blocked, ToolCallBlocked), (call_id, blocked)
        assert "call_handler" in blocked.by and "failed" in blocked.reason
        assert type(EXCEPTIONS[exc]()).__name__ in blocked.reason
    assert live.calls["1.0"].result is not None and live.calls["1.0"].result.is_error


@pytest.mark.parametrize("exc", EXCEPTIONS)
def test_a_tool_call_handler_raising_for_nested_calls_blocks_only_them(exc: str) -> None:
    scene = Scene("call", EXCEPTIONS[exc], nested_only=True)
    live = run_scene(scene)
    records = records_of(scene)
    for call_id in ("1.1/0", "1.1/1", "1.1/2"):
        assert isinstance(terminal(records, call_id), ToolCallBlocked), call_id
    assert live.calls["1.1"].status == "completed"
    assert sorted(scene.ran) == ["1.0", "1.1", "1.2", "1.3"]  # the nested ones never ran


@pytest.mark.parametrize("exc", EXCEPTIONS)
def test_a_raising_tool_result_handler_is_recorded_and_skipped(exc: str) -> None:
    scene = Scene("result", EXCEPTIONS[exc])
    live = run_scene(scene)
    records = records_of(scene)
    failures = [r.event for r in records if isinstance(r.event, ResultHandlerFailed)]
    every_call = ["1.0", "1.1/0", "1.1/1", "1.1/2", "1.1", "1.2", "1.3"]
    assert sorted(f.call_id for f in failures) == sorted(every_call)
    assert {f.error.type for f in failures} == {type(EXCEPTIONS[exc]()).__name__}
    assert all("result_handler" in f.handler for f in failures)
    assert sorted(scene.patched) == sorted(every_call)  # the handler after it still ran
    for call_id in every_call:
        assert live.calls[call_id].status == "completed", call_id


@pytest.mark.parametrize("exc", EXCEPTIONS)
@pytest.mark.parametrize("nested_only", [False, True], ids=["every call", "nested calls"])
def test_a_raising_approver_refuses(exc: str, nested_only: bool) -> None:
    scene = Scene("approver", EXCEPTIONS[exc], nested_only=nested_only)
    live = run_scene(scene)
    records = records_of(scene)
    refused = ["1.1/1"] if nested_only else ["1.1/1", "1.2"]
    for call_id in refused:
        denied = terminal(records, call_id)
        assert isinstance(denied, ToolCallDenied) and denied.by == "approver", call_id
        assert "approver failed" in denied.reason
        assert type(EXCEPTIONS[exc]()).__name__ in denied.reason
        assert call_id not in scene.ran
    if nested_only:
        assert live.calls["1.2"].status == "completed"


@pytest.mark.parametrize("exc", EXCEPTIONS)
@pytest.mark.parametrize("nested_only", [False, True], ids=["every call", "nested calls"])
def test_a_raising_tool_fails_its_call_alone(exc: str, nested_only: bool) -> None:
    scene = Scene("tool", EXCEPTIONS[exc], nested_only=nested_only)
    live = run_scene(scene)
    records = records_of(scene)
    failing = ["1.1/2"] if nested_only else ["1.1/2", "1.3"]
    for call_id in failing:
        failed = terminal(records, call_id)
        assert isinstance(failed, ToolCallFailed) and failed.kind == "raised", (call_id, failed)
        assert failed.error is not None
        assert failed.error.type == type(EXCEPTIONS[exc]()).__name__
        assert failed.result.is_error
    for call_id in ("1.0", "1.1", "1.2", "1.1/0", "1.1/1"):
        assert live.calls[call_id].status == "completed", call_id
    assert not any(isinstance(r.event, ToolCallCancelled) for r in records)


@pytest.mark.parametrize("exc", EXCEPTIONS)
@pytest.mark.parametrize("turn", [1, 2])
def test_a_raising_model_comes_out_of_prompt_and_the_session_goes_on(exc: str, turn: int) -> None:
    scene = Scene("model", EXCEPTIONS[exc], model_turn=turn)
    live = run_scene(scene)
    raised = scene.prompt_raised
    assert raised is not None and type(raised) is type(EXCEPTIONS[exc]())
    # the first turn failed before any call; the second after the batch had ended
    assert scene.calls_after_prompt == (0 if turn == 1 else 7)
    assert len(live.calls) == 7


# -- BaseExceptions: never a result; the log closes what they interrupt ---------------------------


@pytest.mark.parametrize("exc", BASE_EXCEPTIONS)
@pytest.mark.parametrize("stage", ["call", "approver", "model"])
def test_a_base_exception_in_the_hosts_task_comes_out_of_prompt_as_itself(
    exc: str, stage: str
) -> None:
    scene = Scene(stage, BASE_EXCEPTIONS[exc])
    escaped = capture(lambda: run_scene(scene))
    assert escaped is None, f"{escaped!r} came out of the session instead of prompt()"
    raised = scene.prompt_raised
    assert raised is not None and type(raised) is type(BASE_EXCEPTIONS[exc]()), raised
    records = records_of(scene)
    assert not any(isinstance(r.event, ResultHandlerFailed) for r in records)
    for call_id in ("1.0", "1.1", "1.2", "1.3") if stage != "model" else ():
        cancelled = terminal(records, call_id)
        assert isinstance(cancelled, ToolCallCancelled), (call_id, cancelled)
    assert scene.ran_after_prompt == []


@pytest.mark.parametrize("exc", BASE_EXCEPTIONS)
@pytest.mark.parametrize("stage, nested_only", [
    ("tool", False), ("tool", True), ("result", False), ("call", True), ("approver", True),
])
def test_a_base_exception_in_a_calls_task_stops_the_session_and_closes_the_log(
    exc: str, stage: str, nested_only: bool
) -> None:
    scene = Scene(stage, BASE_EXCEPTIONS[exc], nested_only=nested_only)
    escaped = capture(lambda: trio.run(scene.run, False))
    assert escaped is not None, "the session went on after a BaseException in a call"
    kinds = {type(leaf) for leaf in leaves(escaped)} - {trio.Cancelled}
    assert kinds == {type(BASE_EXCEPTIONS[exc]())}, escaped
    # the log: every call closed, none turned into a tool result
    state = trio.run(assert_consistent, scene.store, SID)
    records = records_of(scene)
    assert not any(isinstance(r.event, ToolCallFailed) and r.event.error is not None
                   and r.event.error.type == type(BASE_EXCEPTIONS[exc]()).__name__
                   for r in records)
    assert any(isinstance(r.event, ToolCallCancelled) for r in records)
    assert state.calls  # the batch was recorded


@pytest.mark.parametrize("exc", BASE_EXCEPTIONS)
def test_a_base_exception_in_a_tool_stops_the_prompt_before_the_model_is_asked_again(
    exc: str,
) -> None:
    scene = Scene("tool", BASE_EXCEPTIONS[exc])
    escaped = capture(lambda: trio.run(scene.run, False))
    assert escaped is not None
    assert {type(leaf) for leaf in leaves(escaped)} == {type(BASE_EXCEPTIONS[exc]())}, escaped
    # the prompt must not end as if its batch had: that would hand the model a transcript of
    # cancelled calls and record its answer while the session is being torn down
    assert scene.prompt_result is None, f"prompt() returned {scene.prompt_result!r}"
    assert scene.asked == 1, f"the model was asked {scene.asked} times"


INTERRUPTS = {name: BASE_EXCEPTIONS[name] for name in ("KeyboardInterrupt", "SystemExit")}


@pytest.mark.parametrize("exc", INTERRUPTS)
@pytest.mark.parametrize("stage, nested_only", [
    ("tool", False), ("tool", True), ("result", False), ("call", True), ("approver", True),
])
def test_keyboard_interrupt_or_system_exit_in_a_call_comes_out_of_the_session_bare(
    exc: str, stage: str, nested_only: bool
) -> None:
    scene = Scene(stage, INTERRUPTS[exc], nested_only=nested_only)
    escaped = capture(lambda: trio.run(scene.run, False))
    assert type(escaped) is type(INTERRUPTS[exc]()), repr(escaped)  # not in a group
    trio.run(assert_consistent, scene.store, SID)


@pytest.mark.parametrize("exc", INTERRUPTS)
def test_keyboard_interrupt_or_system_exit_in_a_resumed_call_comes_out_bare(exc: str) -> None:
    """The call runs in ``resume()``, after the host granted it: what it raises comes out of
    the session's block as itself, and every call of the batch is closed (its sibling, still
    waiting for an answer, too)."""
    store = MemoryStore()

    @tool()  # needs approval
    async def stop(call: Any, ctx: Any) -> ToolResult:
        raise INTERRUPTS[exc]()

    @tool()  # needs approval too: left pending
    async def wait(call: Any, ctx: Any) -> ToolResult:
        raise AssertionError("never approved, never run")

    async def later(request: ApprovalRequest) -> Any:
        return LATER

    async def main() -> None:
        model = FauxModel([[faux_tool_call("stop"), faux_tool_call("wait")], faux_text("done")])
        async with Session.open(store, model=model, tools=[stop, wait], approver=later,
                                session_id=SID, create=True, clock=counting_clock()) as session:
            paused = await session.prompt("go")
            assert [r.call_id for r in paused.pending] == ["1.0", "1.1"]
            await session.resolve_approval("1.0", True)
            await session.resume()

    escaped = capture(lambda: trio.run(main))
    assert type(escaped) is type(INTERRUPTS[exc]()), repr(escaped)
    trio.run(assert_consistent, store, SID)


# -- the clock --------------------------------------------------------------------------------------


class ClockBroke(Exception):
    """The injected clock failed."""


def count_readings() -> int:
    """How often the scene reads its clock when nothing fails."""
    readings = itertools.count()
    clock = counting_clock()

    def counted() -> float:
        next(readings)
        return clock()

    async def main() -> None:
        scene = Scene("none", ValueError)
        async with Session.open(scene.store, model=scene.model, tools=scene.tools(),
                                approver=approve_all, session_id=SID,
                                create=True, clock=counted) as session:
            await session.prompt("go")

    trio.run(main)
    return next(readings)


READINGS = count_readings()


async def clock_scene(broken_at: int, persistent: bool) -> tuple[list[BaseException], bool]:
    """Run the scene with a clock that fails at reading ``broken_at`` (and after, if
    ``persistent``); then reopen it with a good clock and finish it. Returns what reached the
    host, and whether the log names the clock's failure."""
    readings = itertools.count()
    good = counting_clock()

    def clock() -> float:
        n = next(readings)
        if n == broken_at or (persistent and n > broken_at):
            raise ClockBroke(f"reading {n}")
        return good()

    scene = Scene("none", ValueError)
    raised: list[BaseException] = []
    try:
        async with Session.open(scene.store, model=scene.model, tools=scene.tools(),
                                approver=approve_all, session_id=SID,
                                create=True, clock=clock) as session:
            try:
                await session.prompt("go")
            except ClockBroke as exc:
                raised.append(exc)
    except BaseException as exc:  # noqa: BLE001 - checked by the caller
        raised.append(exc)
    # whatever the failure left in the store opens, folds and resumes
    async with Session.open(scene.store, model=FauxModel([faux_text("resumed")]),
                            tools=scene.tools(), approver=approve_all, session_id=SID, create=True,
                            clock=counting_clock(5_000.0)) as session:
        result = await session.resume()
        for _ in range(5):
            if result.stop != "paused":
                break
            for request in result.pending:
                await session.resolve_approval(request.call_id, True)
            result = await session.resume()
        assert result.stop == "end_turn", result
        live = session.state
    await assert_consistent(scene.store, SID, live)
    named = any("ClockBroke" in str(r.event) for r in await scene.store.read(SID))
    return raised, named


@pytest.mark.parametrize("persistent", [False, True], ids=["once", "from then on"])
@pytest.mark.parametrize("broken_at", range(READINGS))
def test_a_clock_that_raises_at_any_reading_leaves_a_log_that_resumes(
    broken_at: int, persistent: bool
) -> None:
    raised, named = trio.run(clock_scene, broken_at, persistent)
    assert raised or named, "the clock's failure was swallowed"
    kinds = {type(leaf) for exc in raised for leaf in leaves(exc)}
    assert kinds <= {ClockBroke}, raised


@pytest.mark.parametrize("broken_at", [0, 1])
def test_a_clock_that_raises_while_the_session_opens_comes_out_as_itself(broken_at: int) -> None:
    readings = itertools.count()

    def clock() -> float:
        if next(readings) == broken_at:
            raise ClockBroke("the clock is broken")
        return 1.0

    async def main() -> None:
        async with Session.open(MemoryStore(), model=FauxModel([]), clock=clock,
                                tools=Scene("none", ValueError).tools()):
            raise AssertionError("opened with a broken clock")

    escaped = capture(lambda: trio.run(main))
    assert type(escaped) is ClockBroke, repr(escaped)


def test_a_store_that_refuses_the_first_write_comes_out_of_open_as_itself() -> None:
    class FullDisk(MemoryStore):
        async def append(self, session_id: str, records: Any, expected_seq: int) -> None:
            raise OSError(28, "No space left on device")

    async def main() -> None:
        async with Session.open(FullDisk(), model=FauxModel([])):
            raise AssertionError("opened on a store that cannot write")

    escaped = capture(lambda: trio.run(main))
    assert type(escaped) is OSError and "No space left" in str(escaped), repr(escaped)
