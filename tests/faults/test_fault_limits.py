"""Oversized arguments and results meet the configurable size limit at every way in, with a
clear error, and never reach the log.

``Limits(max_argument_bytes=A, max_result_bytes=R)`` bounds what one call brings into the log
(docs/concepts.md, "Size limits"). tests/core/test_limits.py checks the basics. Here every entry
point is tried right at the limit and just past it (Hypothesis picks the limit and the excess):
the model's arguments, a nested call's, a ``tool_call`` handler's rewrite, progress data, the
tool's result and a ``tool_result`` handler's patch. At the limit the value goes through; one
byte past it the call (or the patch, or the progress update) is refused with a message naming
the limit, the oversized value is nowhere in the log, and the session goes on.

Then the ways in that the limit does not guard yet: an approver's or the host's edit of the
arguments, a progress message, an exception's message, the model's tool name and call id.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from engine import (
    LATER,
    ApprovalAnswer,
    ApprovalRequest,
    Limits,
    ResultPatch,
    Rewrite,
    Session,
    ToolCallDraft,
    ToolResult,
    ToolResultDraft,
    text,
    tool,
)
from engine.core.limits import json_size, result_size
from engine.models import FauxModel, faux_text, faux_tool_call
from events import MemoryStore, Record, encode_line
from events.types import (
    ResultHandlerFailed,
    ToolCallBlocked,
    ToolCallFailed,
    ToolProgress,
)
from tests.faults.checks import SAFE, assert_consistent

ANY_OBJECT: dict[str, Any] = {"type": "object"}
ENTRIES = ("model", "nested", "rewrite", "progress data", "result", "patch")
EMPTY_BLOB = json_size({"blob": ""})


def blob(size: int) -> dict[str, str]:
    """Arguments that take exactly ``size`` bytes as compact JSON."""
    arguments = {"blob": "x" * (size - EMPTY_BLOB)}
    assert json_size(arguments) == size
    return arguments


#: The bytes a result with one empty text block takes: what a result adds to its text.
EMPTY_RESULT = result_size(ToolResult(content=[text("")]))


def filler(size: int, letter: str) -> str:
    """The text of a result with one text block that takes exactly ``size`` bytes (a result
    counts whole, as a record holds it: the block's ``type``, ``is_error`` and the keys)."""
    words = letter * (size - EMPTY_RESULT)
    assert result_size(ToolResult(content=[text(words)])) == size
    return words


def biggest(records: list[Record]) -> int:
    return max(len(encode_line(r)) for r in records)


class Probe:
    """A session with one ``target`` call that brings a value of ``size`` bytes in through
    ``entry``; records what the tools saw."""

    def __init__(self, entry: str, size: int, limits: Limits) -> None:
        self.entry = entry
        self.size = size
        self.limits = limits
        self.ran: list[Any] = []
        self.progress_error: list[str] = []
        self.store = MemoryStore()

    def tools(self) -> list[Any]:
        probe = self

        @tool(input_schema=ANY_OBJECT, annotations=SAFE)
        async def target(call: Any, ctx: Any) -> ToolResult:
            probe.ran.append(call.arguments)
            if probe.entry == "progress data":
                try:
                    ctx.report_progress("data", blob(probe.size))
                except ValueError as exc:
                    probe.progress_error.append(str(exc))
            if probe.entry == "result":
                return ToolResult(content=[text(filler(probe.size, "r"))])
            return ToolResult(content=[text("target done")])

        @tool(input_schema=ANY_OBJECT, annotations=SAFE)
        async def relay(call: Any, ctx: Any) -> ToolResult:
            outcome = await ctx.execute_tool("target", blob(probe.size))
            return ToolResult(content=[text(outcome.result.text[:100])],
                              structured_content={"nested_error": outcome.is_error})

        return [target, relay]

    def rewrite(self, draft: ToolCallDraft) -> Rewrite | None:
        if self.entry == "rewrite" and draft.arguments == {}:
            return Rewrite(blob(self.size))
        return None

    def patch(self, draft: ToolResultDraft) -> ResultPatch | None:
        if self.entry == "patch":
            return ResultPatch(content=[filler(self.size, "p")])
        return None

    async def run(self) -> list[Record]:
        if self.entry == "model":
            first = faux_tool_call("target", blob(self.size))
        elif self.entry == "nested":
            first = faux_tool_call("relay")
        else:
            first = faux_tool_call("target")
        model = FauxModel([first, faux_text("done"), faux_text("again")])
        async with Session.open(self.store, model=model, tools=self.tools(), limits=self.limits,
                                session_id="s", create=True) as session:
            session.on_tool_call(self.rewrite)
            session.on_tool_result(self.patch)
            assert (await session.prompt("go")).text == "done"
            assert (await session.prompt("again")).text == "again"
        await assert_consistent(self.store, "s", session.state)
        return await self.store.read("s")


def call_of(records: list[Record], entry: str) -> str:
    return "1.0/0" if entry == "nested" else "1.0"


@given(
    entry=st.sampled_from(ENTRIES),
    limit=st.integers(200, 3_000),  # room for the relay's own small result
    over=st.sampled_from([0, 0, 1, 2, 7, 1_000, 100_000]),
)
def test_every_entry_point_takes_the_limit_and_refuses_a_byte_more(
    entry: str, limit: int, over: int
) -> None:
    limits = Limits(max_argument_bytes=limit, max_result_bytes=limit, max_artifact_bytes=limit)
    size = limit + over
    probe = Probe(entry, size, limits)
    records = trio.run(probe.run)
    call_id = call_of(records, entry)
    ending = [r.event for r in records if getattr(r.event, "call_id", None) == call_id][-1]

    if over == 0:  # exactly at the limit: it all goes through
        assert type(ending).__name__ == "ToolCallCompleted", ending
        assert not any(isinstance(r.event, ResultHandlerFailed) for r in records)
        assert probe.progress_error == []
        if entry == "progress data":
            assert any(isinstance(r.event, ToolProgress) and r.event.data == blob(size)
                       for r in records)
        return

    # past it: refused, saying so, and the value is not in the log
    assert biggest(records) < 3 * limit + 2_000, "an oversized value reached the log"
    if entry in ("model", "nested"):
        assert isinstance(ending, ToolCallFailed) and ending.kind == "too_large"
        assert f"{size} bytes, over the limit of {limit}" in ending.message
        assert probe.ran == []
    elif entry == "rewrite":
        assert isinstance(ending, ToolCallBlocked) and "over the size limit" in ending.reason
        assert probe.ran == []
    elif entry == "progress data":
        assert probe.progress_error and f"limit of {limit} bytes" in probe.progress_error[0]
        assert not any(isinstance(r.event, ToolProgress) for r in records)
        assert type(ending).__name__ == "ToolCallCompleted"
    elif entry == "result":
        assert isinstance(ending, ToolCallFailed) and ending.kind == "too_large"
        assert f"over the limit of {limit}" in ending.message and ending.returned is None
    else:  # patch: the handler's failure is recorded, the result it wanted to change stands
        [failed] = [r.event for r in records if isinstance(r.event, ResultHandlerFailed)]
        assert "over the size limit" in failed.error.message
        assert type(ending).__name__ == "ToolCallCompleted"
        assert ending.result.text == "target done"
    if entry == "nested":
        relay = [r.event for r in records if getattr(r.event, "call_id", None) == "1.0"][-1]
        assert relay.result.structured_content == {"nested_error": True}


# -- the ways in the limit does not guard yet --------------------------------------------------

# no artifacts: a result past max_result_bytes is past every limit
LIMITS = Limits(max_argument_bytes=1_000, max_result_bytes=2_000, max_artifact_bytes=2_000)
#: Generous: a few copies of each limit, and the envelope. Without a limit it is ~50 000+.
BOUND = 4 * (LIMITS.max_argument_bytes + LIMITS.max_result_bytes)
BIG = 50_000


def danger_tools(ran: list[Any]) -> list[Any]:
    @tool(input_schema=ANY_OBJECT)  # no annotations: needs approval
    async def danger(call: Any, ctx: Any) -> ToolResult:
        ran.append(call.arguments)
        return ToolResult(content=[text("danger ran")])

    return [danger]


async def edit_session(approver: Any, host_edit: bool) -> tuple[list[Record], list[Any]]:
    ran: list[Any] = []
    store = MemoryStore()
    model = FauxModel([faux_tool_call("danger", {}), faux_text("done")])
    async with Session.open(store, model=model, tools=danger_tools(ran), approver=approver,
                            limits=LIMITS, session_id="s", create=True) as session:
        result = await session.prompt("go")
        if host_edit:
            assert result.stop == "paused"
            await session.resolve_approval("1.0", True, arguments=blob(BIG))
            result = await session.resume()
        assert result.stop == "end_turn"
    await assert_consistent(store, "s", session.state)
    return await store.read("s"), ran


def test_an_approvers_edit_over_the_limit_is_refused_and_not_recorded() -> None:
    async def approver(request: ApprovalRequest) -> ApprovalAnswer:
        return ApprovalAnswer(granted=True, arguments=blob(BIG))

    records, ran = trio.run(edit_session, approver, False)
    assert ran == [], "the tool ran with arguments over the limit"
    assert biggest(records) < BOUND, "the oversized edit reached the log"


def test_the_hosts_edit_over_the_limit_is_refused_and_not_recorded() -> None:
    async def later(request: ApprovalRequest) -> Any:
        return LATER

    records, ran = trio.run(edit_session, later, True)
    assert ran == [], "the tool ran with arguments over the limit"
    assert biggest(records) < BOUND, "the oversized edit reached the log"


async def one_call(tool_spec: Any, **call: Any) -> list[Record]:
    store = MemoryStore()
    model = FauxModel([faux_tool_call(**call), faux_text("done")])
    async with Session.open(store, model=model, tools=[tool_spec], limits=LIMITS,
                            session_id="s", create=True) as session:
        assert (await session.prompt("go")).text == "done"
    await assert_consistent(store, "s", session.state)
    return await store.read("s")


def test_a_progress_message_over_the_limit_is_not_recorded() -> None:
    @tool(annotations=SAFE)
    async def chatty(call: Any, ctx: Any) -> ToolResult:
        try:
            ctx.report_progress("m" * BIG)
        except ValueError:
            pass  # refused, like oversized progress data: fine too
        return ToolResult(content=[text("chatty done")])

    records = trio.run(lambda: one_call(chatty, name="chatty"))
    assert biggest(records) < BOUND, "an oversized progress message reached the log"


def test_an_exceptions_message_over_the_limit_is_not_recorded_in_full() -> None:
    @tool(annotations=SAFE)
    async def loud(call: Any, ctx: Any) -> ToolResult:
        raise ValueError("e" * BIG)

    records = trio.run(lambda: one_call(loud, name="loud"))
    [failed] = [r.event for r in records if isinstance(r.event, ToolCallFailed)]
    assert failed.kind == "raised" and failed.error is not None
    assert failed.error.type == "ValueError"
    # the error result is what the model reads: a failure with no data is still a result
    assert biggest(records) < BOUND, (
        f"the exception's message reached the log in full ({biggest(records)} bytes)")


@pytest.mark.parametrize("call", [{"name": "n" * BIG}, {"name": "fine", "id": "i" * BIG}],
                         ids=["tool name", "call id"])
def test_the_models_tool_name_and_call_id_are_bounded_too(call: dict[str, str]) -> None:
    @tool(annotations=SAFE)
    async def fine(call: Any, ctx: Any) -> ToolResult:
        return ToolResult(content=[text("fine")])

    records = trio.run(lambda: one_call(fine, **call))
    assert biggest(records) < BOUND, "an oversized value from the model reached the log"
