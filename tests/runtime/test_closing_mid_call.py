"""A session that closes, or is cancelled, while a prompt runs a model's call or waits for
the model.

A batch of one fresh call runs in the prompt's own task when the session's approver never
answers later (``approve_all``, ``deny_all``); every other call runs in a task of the
session's nursery (engine/runtime/batch.py). Whichever it is, the session's end treats it the same:

- the block ends while a prompt from a task outside it runs: the prompt and its call are
  stopped before the block returns, nothing is recorded about the call (the log reads as if
  the process had stopped there, and a reopened session's ``resume()`` takes it up), nothing
  at all is written after the block ended, and the prompt raises ``RuntimeError`` saying so
  (as a host call does);
- a host's cancel scope cancels the block: a prompt inside the block is cancelled, and its
  call is closed as cancelled; a prompt outside it is left as above.

Each scenario runs both ways, a few times (trio shuffles the tasks it wakes together: a race
between two of them shows within a few rounds), and every log must be the same. The tool (or
the model) never returns, so a prompt the closing did not stop would hang the test: it runs
on the autojump clock under ``fail_after``, where a hang fails at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import pytest
import trio

from engine import (
    LATER,
    Annotations,
    ApprovalRequest,
    PromptResult,
    Session,
    ToolResult,
    approve_all,
    fold,
    text,
    tool,
)
from engine.models import FauxModel, ModelMessage, ModelRequest, faux_text, faux_tool_call
from engine.testing.invariants import check_log
from events import MemoryStore
from events.types import Record

SAFE = Annotations(read_only=True, open_world=False)
DEADLOCK = 60  # seconds of (virtual, autojumped) time after which a test counts as hung
ROUNDS = 8


async def approve(request: ApprovalRequest) -> bool:
    """Approves everything, but may answer later as far as the runtime can tell: every call
    runs in a task of the session's."""
    return True


PATHS = {"the prompt's task": approve_all, "a task of the session's": approve}

How = Literal["block ends, prompt outside", "block cancelled, prompt outside",
              "block cancelled, prompt inside"]


class Hang:
    """A tool whose body never returns; ``stopped`` is set when its body has unwound."""

    def __init__(self) -> None:
        self.entered = trio.Event()
        self.stopped = trio.Event()

        @tool(annotations=SAFE)
        async def hang(call: Any, ctx: Any) -> ToolResult:
            self.entered.set()
            try:
                await trio.sleep_forever()
            finally:
                self.stopped.set()
            raise AssertionError("unreachable")

        self.spec = hang


class HangingModel:
    """A model whose first answer never comes."""

    def __init__(self) -> None:
        self.asked = trio.Event()

    async def complete(self, request: ModelRequest) -> ModelMessage:
        self.asked.set()
        await trio.sleep_forever()
        raise AssertionError("unreachable")


def events(records: list[Record]) -> tuple[tuple[str, str | None], ...]:
    return tuple((type(r.event).__name__, getattr(r.event, "call_id", None)) for r in records)


def the_one(logs: set[tuple[tuple[str, str | None], ...]]) -> tuple[tuple[str, str | None], ...]:
    """The log every round and both paths wrote."""
    assert len(logs) == 1, logs
    return next(iter(logs))


async def close_mid_call(
    store: MemoryStore, path: str, how: How, model: HangingModel | None = None
) -> tuple[str, PromptResult | BaseException]:
    """Prompt a session whose one call hangs (or whose ``model`` does), and close it as
    ``how`` says while it does; return the session's id and what the prompt returned or
    raised."""
    hang = Hang()
    waiting = model.asked if model is not None else hang.entered
    model = model or FauxModel([faux_tool_call("hang"), faux_text("done")])
    ended: list[PromptResult | BaseException] = []

    async def prompt(session: Session) -> None:
        try:
            ended.append(await session.prompt("go"))
        except (trio.Cancelled, RuntimeError) as exc:
            ended.append(exc)
            if isinstance(exc, trio.Cancelled):
                raise

    with trio.fail_after(DEADLOCK):
        async with trio.open_nursery() as outside:
            with trio.CancelScope() as host:
                async with Session.open(store, model=model, tools=[hang.spec],
                                        approver=PATHS[path]) as session:
                    if how == "block cancelled, prompt inside":
                        async with trio.open_nursery() as inside:
                            inside.start_soon(prompt, session)
                            await waiting.wait()
                            host.cancel()
                    else:
                        outside.start_soon(prompt, session)
                        await waiting.wait()
                        if how == "block cancelled, prompt outside":
                            host.cancel()
                            await trio.sleep_forever()
            # the call has stopped by the time the block has ended, whatever task ran it
            assert hang.stopped.is_set() == hang.entered.is_set()
            written = len(await store.read(session.session_id))
    # nothing is written once the block has ended
    assert len(await store.read(session.session_id)) == written
    [outcome] = ended
    return session.session_id, outcome


@pytest.mark.parametrize("how", ["block ends, prompt outside", "block cancelled, prompt outside"])
async def test_closing_under_a_prompt_from_outside_stops_its_call_and_leaves_it_open(
    autojump_clock: Any, how: How
) -> None:
    logs: set[tuple[tuple[str, str | None], ...]] = set()
    for path in [path for path in PATHS for _ in range(ROUNDS)]:
        store = MemoryStore()
        sid, outcome = await close_mid_call(store, path, how)
        assert isinstance(outcome, RuntimeError), (path, outcome)
        assert "the session closed while this prompt ran" in str(outcome)
        records = await store.read(sid)
        assert fold(records).calls["1.0"].status == "running"  # as a stopped process left it
        check_log(records)
        logs.add(events(records))

        # a reopened session takes it up: the body does not run again (not idempotent)
        hang = Hang()
        async with Session.open(store, model=FauxModel([faux_text("told")]), tools=[hang.spec],
                                approver=PATHS[path], session_id=sid) as session:
            with trio.fail_after(DEADLOCK):
                resumed = await session.resume()
            assert (resumed.stop, resumed.text) == ("end_turn", "told")
            assert session.calls["1.0"].status == "failed"
            assert not hang.entered.is_set()
            check_log(await store.read(sid), state=session.state, closed=True)
    assert the_one(logs)[-1] == ("ToolExecutionStarted", "1.0")


async def test_cancelling_the_block_around_a_prompt_closes_its_call_as_cancelled(
    autojump_clock: Any,
) -> None:
    logs: set[tuple[tuple[str, str | None], ...]] = set()
    for path in [path for path in PATHS for _ in range(ROUNDS)]:
        store = MemoryStore()
        sid, outcome = await close_mid_call(store, path, "block cancelled, prompt inside")
        assert isinstance(outcome, trio.Cancelled), (path, outcome)
        records = await store.read(sid)
        assert fold(records).calls["1.0"].status == "cancelled"
        check_log(records, closed=True)
        logs.add(events(records))
    assert the_one(logs)[-1] == ("ToolCallCancelled", "1.0")


class WaitingStore(MemoryStore):
    """A store whose every write waits a scheduler turn first, as a database's does."""

    async def append(self, session_id: str, records: Sequence[Record],
                     expected_seq: int) -> None:
        await trio.lowlevel.checkpoint()
        self.append_nowait(session_id, records, expected_seq)


@pytest.mark.parametrize("store_kind", [MemoryStore, WaitingStore])
@pytest.mark.parametrize("how", ["block ends, prompt outside", "block cancelled, prompt outside"])
async def test_closing_under_a_prompt_from_outside_that_waits_for_the_model_stops_it(
    autojump_clock: Any, how: How, store_kind: type[MemoryStore]
) -> None:
    """The turn is recorded as cancelled (ModelFailed), as a cancelled prompt's is, written
    before the block has ended (also when the write waits), and a reopened session's resume()
    asks the model again."""
    logs: set[tuple[tuple[str, str | None], ...]] = set()
    for path in [path for path in PATHS for _ in range(ROUNDS)]:
        store = store_kind()
        sid, outcome = await close_mid_call(store, path, how, HangingModel())
        assert isinstance(outcome, RuntimeError), (path, outcome)
        records = await store.read(sid)
        check_log(records, closed=True)
        logs.add(events(records))

        async with Session.open(store, model=FauxModel([faux_text("asked again")]),
                                tools=[Hang().spec], approver=PATHS[path],
                                session_id=sid) as session:
            with trio.fail_after(DEADLOCK):
                resumed = await session.resume()
            assert (resumed.stop, resumed.text) == ("end_turn", "asked again")
    assert the_one(logs)[-2:] == (("ModelRequested", None), ("ModelFailed", None))


async def test_cancelling_the_block_while_a_nested_call_waits_for_the_host_leaves_it_open(
    autojump_clock: Any,
) -> None:
    """The prompt has returned "paused"; the nested call waits for the host's answer in a task
    of the session's. A host's cancel scope around the block closes the session as leaving the
    block does: nothing is recorded about the waiting calls (docs/resume.md), however trio
    orders the tasks it cancels at once."""
    @tool()  # the policy asks about it
    async def risky(call: Any, ctx: Any) -> ToolResult:
        return ToolResult(content=[text("risky done")])

    @tool(annotations=SAFE)
    async def parent(call: Any, ctx: Any) -> ToolResult:
        await ctx.execute_tool("risky", {})
        return ToolResult(content=[text("parent done")])

    async def later(request: ApprovalRequest) -> Any:
        return LATER

    logs: set[tuple[tuple[str, str | None], ...]] = set()
    for _ in range(ROUNDS):
        store = MemoryStore()
        with trio.fail_after(DEADLOCK):
            with trio.CancelScope() as host:
                async with Session.open(store, model=FauxModel([faux_tool_call("parent")]),
                                        tools=[parent, risky], approver=later) as session:
                    paused = await session.prompt("go")
                    assert [r.call_id for r in paused.pending] == ["1.0/0"]
                    host.cancel()
                    await trio.sleep_forever()
        records = await store.read(session.session_id)
        state = fold(records)
        assert (state.calls["1.0"].status, state.calls["1.0/0"].status) == (
            "running", "awaiting")
        check_log(records)
        logs.add(events(records))
    the_one(logs)
