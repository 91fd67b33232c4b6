"""A session that closes, or is cancelled, while a model's call runs.

A batch of one fresh call runs in the prompt's own task when the session's approver never
answers later (``approve_all``, ``deny_all``); every other call runs in a task of the
session's nursery (engine/batch.py). Whichever it is, the session's end treats it the same:

- the block ends while a prompt from a task outside it runs the call: the call is stopped
  before the block returns, nothing is recorded about it (the log reads as if the process had
  stopped there, and a reopened session's ``resume()`` takes it up), and the prompt returns
  ``"paused"``;
- a host's cancel scope cancels the block: a prompt inside the block is cancelled, and its
  call is closed as cancelled; a prompt outside it is left as above.

Each scenario runs both ways and the two logs must be the same. The tool never returns, so a
call the closing did not stop would hang the test: it runs on the autojump clock under
``fail_after``, where a hang fails at once.
"""

from __future__ import annotations

from typing import Any, Literal

import pytest
import trio

from engine import Annotations, ApprovalRequest, PromptResult, Session, ToolResult, text, tool
from engine import approve_all, fold
from engine.models import FauxModel, faux_text, faux_tool_call
from engine.testing.invariants import check_log
from events import MemoryStore
from events.types import Record

SAFE = Annotations(read_only=True, open_world=False)
DEADLOCK = 60  # seconds of (virtual, autojumped) time after which a test counts as hung


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


def events(records: list[Record]) -> list[tuple[str, str | None]]:
    return [(type(r.event).__name__, getattr(r.event, "call_id", None)) for r in records]


async def close_mid_call(
    store: MemoryStore, path: str, how: How
) -> tuple[str, PromptResult | BaseException]:
    """Prompt a session whose one call hangs, and close it as ``how`` says while the call
    runs; return the session's id and what the prompt returned or raised."""
    hang = Hang()
    model = FauxModel([faux_tool_call("hang"), faux_text("done")])
    ended: list[PromptResult | BaseException] = []

    async def prompt(session: Session) -> None:
        try:
            ended.append(await session.prompt("go"))
        except BaseException as exc:
            ended.append(exc)
            if not isinstance(exc, trio.Cancelled):
                raise

    with trio.fail_after(DEADLOCK):
        async with trio.open_nursery() as outside:
            with trio.CancelScope() as host:
                async with Session.open(store, model=model, tools=[hang.spec],
                                        approver=PATHS[path]) as session:
                    if how == "block cancelled, prompt inside":
                        async with trio.open_nursery() as inside:
                            inside.start_soon(prompt, session)
                            await hang.entered.wait()
                            host.cancel()
                    else:
                        outside.start_soon(prompt, session)
                        await hang.entered.wait()
                        if how == "block cancelled, prompt outside":
                            host.cancel()
                            await trio.sleep_forever()
            # the call has stopped by the time the block has ended, whatever task ran it
            assert hang.stopped.is_set()
    [outcome] = ended
    return session.session_id, outcome


@pytest.mark.parametrize("how", ["block ends, prompt outside", "block cancelled, prompt outside"])
async def test_closing_under_a_prompt_from_outside_stops_its_call_and_leaves_it_open(
    autojump_clock: Any, how: How
) -> None:
    logs = {}
    for path in PATHS:
        store = MemoryStore()
        sid, outcome = await close_mid_call(store, path, how)
        assert isinstance(outcome, PromptResult), (path, outcome)
        assert (outcome.stop, outcome.pending) == ("paused", ())
        records = await store.read(sid)
        assert fold(records).calls["1.0"].status == "running"  # as a stopped process left it
        check_log(records)
        logs[path] = events(records)

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
    assert logs["the prompt's task"] == logs["a task of the session's"]
    assert logs["the prompt's task"][-1] == ("ToolExecutionStarted", "1.0")


async def test_cancelling_the_block_around_a_prompt_closes_its_call_as_cancelled(
    autojump_clock: Any,
) -> None:
    logs = {}
    for path in PATHS:
        store = MemoryStore()
        sid, outcome = await close_mid_call(store, path, "block cancelled, prompt inside")
        assert isinstance(outcome, trio.Cancelled), (path, outcome)
        records = await store.read(sid)
        assert fold(records).calls["1.0"].status == "cancelled"
        check_log(records, closed=True)
        logs[path] = events(records)
    assert logs["the prompt's task"] == logs["a task of the session's"]
    assert logs["the prompt's task"][-1] == ("ToolCallCancelled", "1.0")
