"""When a call's end reaches the store: with the model's next request when the prompt's own
task ran the call, as the call ends when it ran in a task of its own, before the host has the
result of a host call. Write-ahead either way: the store holds the result before the model
reads it."""

from __future__ import annotations

from collections.abc import Sequence

import trio
import trio.testing

from engine import Annotations, Session, ToolResult, approve_all, text, tool
from engine.models import FauxModel, ModelMessage, ModelRequest, faux_text, faux_tool_call
from events import MemoryStore, Record
from events.types import ModelToolCall


class Batches(MemoryStore):
    """A memory store that keeps the kinds of the records of each batch it was given."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[list[str]] = []

    def append_nowait(self, session_id: str, records: Sequence[Record], expected_seq: int) -> None:
        super().append_nowait(session_id, records, expected_seq)
        self.batches.append([type(record.event).__name__ for record in records])


@tool(annotations=Annotations(read_only=True))
async def look(call, ctx):  # type: ignore[no-untyped-def]
    """Reads, asks nobody."""
    return ToolResult(content=[text("seen")])


async def test_a_call_the_prompt_ran_is_written_with_the_next_model_request() -> None:
    store = Batches()
    stored_when_asked: list[list[str]] = []

    def answer(message: ModelMessage):  # type: ignore[no-untyped-def]
        async def step(request: ModelRequest) -> ModelMessage:
            stored_when_asked.append(
                [type(r.event).__name__ for r in await store.read("s")][-2:])
            return message
        return step

    class Model:
        def __init__(self) -> None:
            self._steps = [answer(ModelMessage(tool_calls=(
                               ModelToolCall(id="c", name="look", arguments={}),))),
                           answer(ModelMessage(text="done"))]

        async def complete(self, request: ModelRequest) -> ModelMessage:
            return await self._steps.pop(0)(request)

    async with Session.open(store, model=Model(), tools=[look], approver=approve_all,
                            session_id="s", create=True) as session:
        await session.prompt("go")
    # the call's end and the next request in one batch: one store round-trip, not two
    assert ["ToolCallCompleted", "ModelRequested"] in store.batches
    assert ["ToolCallCompleted"] not in store.batches
    # and in the store before the model was asked (write-ahead)
    assert stored_when_asked[1] == ["ToolCallCompleted", "ModelRequested"]


async def test_a_prompt_that_ends_after_its_last_call_writes_that_call() -> None:
    store = Batches()
    model = FauxModel([faux_tool_call("look")])
    async with Session.open(store, model=model, tools=[look], approver=approve_all,
                            session_id="s", create=True, max_turns=1) as session:
        result = await session.prompt("go")
        # the prompt returned at max_turns: the call's end is in the store already
        assert [type(r.event).__name__ for r in await store.read("s")][-1] == (
            "ToolCallCompleted")
    assert result.stop == "max_turns"


async def test_a_call_in_a_task_of_its_own_is_written_as_it_ends() -> None:
    """A batch that may wait for the host runs its calls in tasks of the session: one that
    ends is in the store while a sibling still runs."""
    store = Batches()
    seen: list[list[str]] = []
    slow_runs = trio.Event()

    @tool(annotations=Annotations(read_only=True))
    async def quick(call, ctx):  # type: ignore[no-untyped-def]
        """Ends once its sibling's body runs (so no flush of the sibling's comes after)."""
        await slow_runs.wait()
        return ToolResult(content=[text("quick")])

    @tool(annotations=Annotations(read_only=True))
    async def slow(call, ctx):  # type: ignore[no-untyped-def]
        """Runs on after its sibling ended."""
        slow_runs.set()
        await trio.testing.wait_all_tasks_blocked()  # quick's task has finished
        records = await store.read("s")
        seen.append([type(r.event).__name__ for r in records
                     if getattr(r.event, "call_id", None) == "1.0"])
        return ToolResult(content=[text("slow")])

    @tool(annotations=Annotations(destructive=True))
    async def risky(call, ctx):  # type: ignore[no-untyped-def]
        """Registered only so that a call may be asked about: the batch runs in tasks."""
        return ToolResult(content=[text("risky")])

    model = FauxModel([[faux_tool_call("quick"), faux_tool_call("slow")], faux_text("done")])
    async with Session.open(store, model=model, tools=[quick, slow, risky],
                            approver=approve_all, session_id="s", create=True) as session:
        await session.prompt("go")
    assert seen == [["ToolCallRequested", "PolicyDecided", "ToolExecutionStarted",
                     "ToolCallCompleted"]]


async def test_a_host_call_is_written_before_the_host_has_its_result() -> None:
    store = Batches()
    async with Session.open(store, model=FauxModel([]), tools=[look], approver=approve_all,
                            session_id="s", create=True) as session:
        outcome = await session.call_tool("look", {})
        stored = [type(r.event).__name__ for r in await store.read("s")]
    assert not outcome.is_error
    assert stored[-1] == "ToolCallCompleted"
    assert store.batches[-1] == ["ToolCallCompleted"]
