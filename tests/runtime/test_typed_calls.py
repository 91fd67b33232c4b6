"""A typed tool's call through a session: its arguments arrive as the declared types, a value the
types cannot hold ends the call ``invalid_arguments`` at the gate (before handlers, the policy
or the body), its return value is the result, a parameter of the context type gets the context,
and a sync function runs in a worker thread that a timeout or a cancellation stops waiting for.
"""

from __future__ import annotations

import contextvars
import threading
from typing import Annotated, Any

import attrs
import pytest
import trio

from engine import (
    Annotations,
    Param,
    Rewrite,
    Session,
    ToolCallDraft,
    ToolContext,
    ToolResult,
    approve_all,
    text,
    tool,
)
from engine.models import FauxModel, faux_text, faux_tool_call
from engine.runtime.context import CallContext
from engine.testing import BodyRuns, check_session, counted
from events import MemoryStore
from events.types import (
    PolicyDecided,
    ToolCallCompleted,
    ToolCallFailed,
    ToolExecutionStarted,
)

SAFE = Annotations(read_only=True)


@attrs.frozen
class Point:
    x: float
    y: float = 0.0


@tool(annotations=SAFE)
async def farthest(points: list[Point], scale: Annotated[float, Param(gt=0)] = 1.0) -> Point:
    """The point farthest from the origin, scaled."""
    assert all(isinstance(p, Point) for p in points)
    best = max(points, key=lambda p: p.x * p.x + p.y * p.y)
    return Point(x=best.x * scale, y=best.y * scale)


async def run(tools: list[Any], calls: list[Any], **options: Any) -> tuple[Session, BodyRuns]:
    """One prompt whose first message makes ``calls``; the session, checked, and the bodies run."""
    runs = BodyRuns()
    store = MemoryStore()
    model = FauxModel([calls, faux_text("done")])
    async with Session.open(store, model=model, tools=[counted(t, runs) for t in tools],
                            approver=approve_all, **options) as session:
        await session.prompt("go")
        await check_session(session, store, body_runs=runs, closed=True)
    return session, runs


def ending(session: Session, call_id: str) -> Any:
    return session.calls[call_id].terminal


async def test_arguments_arrive_as_the_declared_types_and_data_comes_back_structured() -> None:
    session, runs = await run([farthest], [faux_tool_call(
        "farthest", {"points": [{"x": 1}, {"x": 3, "y": 4}], "scale": 2})])
    completed = ending(session, "1.0")
    assert isinstance(completed, ToolCallCompleted)
    assert completed.result.structured_content == {"x": 6.0, "y": 8.0}
    assert [block.text for block in completed.result.content] == ['{"x": 6.0, "y": 8.0}']
    assert runs["1.0"] == 1


async def test_a_function_of_two_ints_is_a_tool_that_adds_them() -> None:
    """The first thing a user writes: it used to register with an empty schema and fail
    when called (``unsupported operand type(s) for +: 'ToolCall' and 'ToolContext'``)."""

    @tool(annotations=SAFE)
    async def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    assert add.input_schema["required"] == ["a", "b"]
    session, _ = await run([add], [faux_tool_call("add", {"a": 1, "b": 2})])
    completed = ending(session, "1.0")
    assert isinstance(completed, ToolCallCompleted)
    assert completed.result.structured_content == {"result": 3}


@pytest.mark.parametrize("arguments, says", [
    ({"points": [{"x": 10**400}]}, "is too large for a float @ $.points[0].x"),
    ({"points": [{"x": 1}], "scale": 0}, "data.scale must be bigger than 0"),  # the schema
    ({"points": [{"x": 1, "z": 0}]}, "must not contain {'z'} properties"),  # the schema
])
async def test_arguments_the_schema_or_the_types_refuse_end_the_call_unrun(
    arguments: dict[str, Any], says: str
) -> None:
    session, runs = await run([farthest], [faux_tool_call("farthest", arguments)])
    failed = ending(session, "1.0")
    assert isinstance(failed, ToolCallFailed) and failed.kind == "invalid_arguments"
    assert failed.message.startswith("Invalid arguments for farthest: ") and says in failed.message
    assert runs["1.0"] == 0
    call_events = [r.event for r in session.records if getattr(r.event, "call_id", None) == "1.0"]
    assert not any(isinstance(e, (PolicyDecided, ToolExecutionStarted)) for e in call_events)


async def test_a_rewrite_the_types_cannot_hold_fails_the_call_after_the_rewrite() -> None:
    def huge(draft: ToolCallDraft) -> Rewrite:
        return Rewrite({"points": [{"x": 10**400}]})

    runs = BodyRuns()
    store = MemoryStore()
    model = FauxModel([faux_tool_call("farthest", {"points": [{"x": 1}]}), faux_text("done")])
    async with Session.open(store, model=model, tools=[counted(farthest, runs)],
                            approver=approve_all) as session:
        session.on_tool_call(huge)
        await session.prompt("go")
        await check_session(session, store, body_runs=runs, closed=True)
    failed = ending(session, "1.0")
    assert isinstance(failed, ToolCallFailed) and failed.kind == "invalid_arguments"
    assert "(after the rewrite by " in failed.message and runs["1.0"] == 0


async def test_the_context_parameter_is_left_out_of_the_schema_and_receives_the_context() -> None:
    seen: list[Any] = []

    @tool(annotations=SAFE)
    async def double(n: int) -> int:
        """Double."""
        return 2 * n

    @tool(annotations=SAFE)
    async def quadruple(n: int, here: ToolContext) -> int:
        """Double twice, through nested calls."""
        seen.append((here.call_id, type(here)))
        here.report_progress("halfway")
        once = await here.execute_tool("double", {"n": n})
        twice = await here.execute_tool("double", {"n": once.structured_content["result"]})
        return int(twice.structured_content["result"])

    @tool(annotations=SAFE)
    async def runtime_typed(runtime: CallContext) -> str:
        """Takes the runtime's own context class."""
        return runtime.call_id

    assert set(quadruple.input_schema["properties"]) == {"n"}
    assert runtime_typed.input_schema["properties"] == {}
    session, _ = await run([double, quadruple, runtime_typed], [
        faux_tool_call("quadruple", {"n": 3}), faux_tool_call("runtime_typed", {})])
    assert session.calls["1.0"].result.structured_content == {"result": 12}
    assert seen == [("1.0", CallContext)]
    assert [c for c in session.calls if c.startswith("1.0/")] == ["1.0/0", "1.0/1"]
    assert session.calls["1.1"].result.content[0].text == "1.1"  # type: ignore[union-attr]


async def test_a_raising_typed_tool_ends_as_an_error_result() -> None:
    @tool(annotations=SAFE)
    async def divide(a: int, b: int) -> float:
        """Divide."""
        return a / b

    session, _ = await run([divide], [faux_tool_call("divide", {"a": 1, "b": 0})])
    failed = ending(session, "1.0")
    assert isinstance(failed, ToolCallFailed) and failed.kind == "raised"
    assert "ZeroDivisionError: division by zero" in failed.message


async def test_a_value_that_breaks_the_return_annotation_is_invalid_output() -> None:
    @tool(annotations=SAFE)
    async def count(word: str) -> int:
        """Count, badly."""
        return word  # type: ignore[return-value]

    @tool(annotations=SAFE)
    async def refuse(word: str) -> int:
        """Fail with data: a ToolResult passes through."""
        return ToolResult(content=[text(f"no {word}")], is_error=True)  # type: ignore[return-value]

    session, _ = await run([count, refuse], [faux_tool_call("count", {"word": "a"}),
                                             faux_tool_call("refuse", {"word": "b"})])
    failed = ending(session, "1.0")
    assert isinstance(failed, ToolCallFailed) and failed.kind == "invalid_output"
    assert failed.returned is not None and failed.returned.structured_content == {"result": "a"}
    completed = ending(session, "1.1")
    assert completed.result.is_error and completed.result.content[0].text == "no b"


async def test_text_and_nothing_come_back_as_text_and_an_empty_success() -> None:
    @tool(annotations=SAFE)
    async def greet(name: str) -> str:
        """Greet."""
        return f"hello {name}"

    @tool(annotations=SAFE)
    async def forget(name: str) -> None:
        """Forget."""

    session, _ = await run([greet, forget], [faux_tool_call("greet", {"name": "ada"}),
                                             faux_tool_call("forget", {"name": "ada"})])
    assert ending(session, "1.0").result == ToolResult(content=[text("hello ada")])
    assert ending(session, "1.1").result == ToolResult()


# -- sync tools ---------------------------------------------------------------------------------

LABEL: contextvars.ContextVar[str] = contextvars.ContextVar("LABEL", default="unset")


async def test_a_sync_tool_runs_in_a_worker_thread_with_the_callers_context() -> None:
    threads: list[int] = []

    @tool(annotations=SAFE)
    def where(n: int) -> str:
        """Which thread, and what the context says."""
        threads.append(threading.get_ident())
        return f"{n} {LABEL.get()}"

    assert where.signature is not None and where.signature.blocking
    LABEL.set("prompted")
    session, runs = await run([where], [faux_tool_call("where", {"n": 1})])
    assert ending(session, "1.0").result.content[0].text == "1 prompted"
    assert threads and threads[0] != threading.get_ident() and runs["1.0"] == 1


async def test_a_sync_tool_past_its_timeout_ends_then_and_its_late_result_is_dropped() -> None:
    release = threading.Event()
    finished = threading.Event()
    entered = threading.Event()

    @tool(annotations=SAFE, timeout=0.05)
    def stuck(n: int) -> int:
        """Blocks until released."""
        entered.set()
        release.wait(10)
        finished.set()
        return n

    @tool(annotations=SAFE)
    def quick(n: int) -> int:
        """Answers."""
        return n

    with trio.fail_after(5):
        session, _ = await run([stuck, quick], [faux_tool_call("stuck", {"n": 1}),
                                                faux_tool_call("quick", {"n": 2})])
    assert entered.is_set() and not finished.is_set()  # the thread still runs
    failed = ending(session, "1.0")
    assert isinstance(failed, ToolCallFailed) and failed.kind == "timeout"
    assert ending(session, "1.1").result.structured_content == {"result": 2}
    release.set()
    await trio.to_thread.run_sync(finished.wait, 5)
    # the thread returned after the call ended: nothing more was recorded
    assert isinstance(ending(session, "1.0"), ToolCallFailed)


async def test_cancelling_a_prompt_stops_waiting_for_a_sync_tool() -> None:
    release = threading.Event()
    entered = threading.Event()

    @tool(annotations=SAFE)
    def stuck(n: int) -> int:
        """Blocks until released."""
        entered.set()
        release.wait(10)
        return n

    store = MemoryStore()
    model = FauxModel([faux_tool_call("stuck", {"n": 1}), faux_text("done")])
    try:
        async with Session.open(store, model=model, tools=[stuck],
                                approver=approve_all) as session:
            with trio.fail_after(5):
                async with trio.open_nursery() as nursery:
                    async def cancel_once_entered() -> None:
                        await trio.to_thread.run_sync(entered.wait, 5)
                        nursery.cancel_scope.cancel()

                    nursery.start_soon(cancel_once_entered)
                    await session.prompt("go")
            assert session.calls["1.0"].status == "cancelled"
            await check_session(session, store, closed=True)
    finally:
        release.set()
