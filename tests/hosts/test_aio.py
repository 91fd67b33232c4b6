"""asyncio hosts (engine.hosts.aio): a session driven from asyncio.run through trio's guest mode.

The tests are plain functions that call asyncio.run (the suite's trio_mode only takes over
``async def`` tests). What is checked is what must cross the bridge: results, pauses and
approvals, cancellation inward (closing every open call, as a trio cancel scope does),
errors outward (the same object), and the asyncio caller's context variables.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import trio
from conftest import counting_clock

from engine import LATER, Annotations, ApprovalRequest, ToolResult, approve_all, fold, text, tool
from engine import Session as TrioSession
from engine.hosts.aio import Session, from_asyncio
from engine.models import (
    FauxModel,
    ModelMessage,
    ModelRequest,
    faux_message,
    faux_text,
    faux_tool_call,
)
from events import MemoryStore
from events.types import ToolCallCancelled, ToolExecutionStarted

SAFE = Annotations(read_only=True, open_world=False)
REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")


@tool(input_schema={"type": "object", "properties": {"word": {"type": "string"}}},
      annotations=SAFE)
async def echo(call: Any, ctx: Any) -> ToolResult:
    """Echo the word, and the request id the tool sees."""
    await trio.sleep(0)
    return ToolResult(content=[text(f"{call.arguments.get('word')} {REQUEST_ID.get()}")])


@tool(input_schema={"type": "object"}, annotations=SAFE)
async def hang(call: Any, ctx: Any) -> ToolResult:
    """Never returns, and calls a nested hang first when asked to."""
    if call.arguments.get("nest"):
        await ctx.execute_tool("hang", {})
    await trio.sleep_forever()
    raise AssertionError("unreachable")


@tool(input_schema={"type": "object"}, annotations=Annotations(destructive=True))
async def delete(call: Any, ctx: Any) -> ToolResult:
    """Needs approval."""
    return ToolResult(content=[text("deleted")])


def shape(records: Any) -> tuple[list[Any], dict[str, list[Any]]]:
    """A log as its session events in order and each call's events in order: trio picks the
    order of concurrent calls' events at random, under a host or not."""
    session: list[Any] = []
    calls: dict[str, list[Any]] = {}
    for record in records:
        call_id = getattr(record.event, "call_id", None)
        event = record.event
        if call_id is None:
            session.append(event)
        else:
            calls.setdefault(call_id, []).append(event)
    return session, calls


def test_a_prompt_from_asyncio_runs_the_session_and_writes_the_same_log_as_trio() -> None:
    def script() -> FauxModel:
        return FauxModel([[faux_tool_call("echo", {"word": "a"}),
                           faux_tool_call("echo", {"word": "b"})], faux_text("done")])

    async def under_asyncio() -> Any:
        async with Session.open(MemoryStore(), model=script(), tools=[echo],
                                session_id="s", create=True, clock=counting_clock()) as session:
            result = await session.prompt("go")
            assert not session.paused and session.calls["1.0"].status == "completed"
            return result, session.records

    async def under_trio() -> Any:
        async with TrioSession.open(MemoryStore(), model=script(), tools=[echo],
                                    session_id="s", create=True,
                                    clock=counting_clock()) as session:
            return await session.prompt("go"), session.records

    (result, records), (trio_result, trio_records) = asyncio.run(under_asyncio()), trio.run(
        under_trio)
    assert result == trio_result
    assert shape(records) == shape(trio_records)


def test_a_pause_is_answered_and_resumed_from_asyncio() -> None:
    async def later(request: ApprovalRequest) -> Any:
        return LATER

    async def main() -> None:
        model = FauxModel([faux_tool_call("delete", {}), faux_text("gone")])
        async with Session.open(MemoryStore(), model=model, tools=[delete],
                                approver=later) as session:
            paused = await session.prompt("delete it")
            assert paused.stop == "paused" and session.paused
            assert [r.call_id for r in session.pending_approvals()] == ["1.0"]
            await session.resolve_approval("1.0", granted=True)
            done = await session.resume()
            assert (done.stop, done.text) == ("end_turn", "gone")
            assert session.calls["1.0"].status == "completed"

    asyncio.run(main())


def test_asyncio_waits_for_a_host_calls_approval_and_answers_it() -> None:
    async def later(request: ApprovalRequest) -> Any:
        return LATER

    async def main() -> None:
        async with Session.open(MemoryStore(), tools=[delete], approver=later) as session:
            waiting = asyncio.create_task(session.wait_pending_approvals())
            call = asyncio.create_task(session.call_tool("delete", {}))
            [request] = await waiting  # once the approver has said LATER
            assert (request.call_id, request.name) == ("h0", "delete") and not call.done()
            await session.resolve_approval("h0", granted=True)
            assert not (await call).is_error

    asyncio.run(main())


def cancelled_scene(nest: bool) -> FauxModel:
    return FauxModel([[faux_tool_call("hang", {"nest": nest}), faux_tool_call("hang", {})],
                      faux_text("never")])


async def wait_for_bodies(session: Session, count: int) -> None:
    started = 0
    async for record in session.follow():
        started += isinstance(record.event, ToolExecutionStarted)
        if started == count:
            return


def test_cancelling_the_asyncio_task_closes_every_open_call_as_trio_does() -> None:
    async def under_asyncio() -> Any:
        async with Session.open(MemoryStore(), model=cancelled_scene(True), tools=[hang, echo],
                                session_id="s", create=True, clock=counting_clock()) as session:
            prompt = asyncio.create_task(session.prompt("go"))
            await wait_for_bodies(session, 3)  # both calls, and the nested one
            prompt.cancel()
            with pytest.raises(asyncio.CancelledError):
                await prompt
            assert session.state.open_calls == ()
            # the session is usable again, as after a trio cancellation
            assert not session.paused
            return session.records

    async def under_trio() -> Any:
        async with TrioSession.open(MemoryStore(), model=cancelled_scene(True),
                                    tools=[hang, echo], session_id="s", create=True,
                                    clock=counting_clock()) as session:
            async with trio.open_nursery() as nursery:
                async def cancel_once_started() -> None:
                    started = 0
                    async for record in session.follow():
                        started += isinstance(record.event, ToolExecutionStarted)
                        if started == 3:
                            nursery.cancel_scope.cancel()
                nursery.start_soon(cancel_once_started)
                await session.prompt("go")
            return session.records

    records = asyncio.run(under_asyncio())
    cancelled = [r.event.call_id for r in records if isinstance(r.event, ToolCallCancelled)]
    assert sorted(cancelled) == ["1.0", "1.0/0", "1.1"]
    assert shape(records) == shape(trio.run(under_trio))


def test_a_timeout_in_asyncio_cancels_the_prompt_and_the_session_prompts_again() -> None:
    async def main() -> None:
        model = FauxModel([faux_tool_call("hang", {}), faux_text("again")])
        async with Session.open(MemoryStore(), model=model, tools=[hang]) as session:
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(None) as deadline:
                    async def expire_once_started() -> None:
                        await wait_for_bodies(session, 1)
                        deadline.reschedule(asyncio.get_running_loop().time())

                    watcher = asyncio.create_task(expire_once_started())
                    await session.prompt("go")
            await watcher
            assert session.calls["1.0"].status == "cancelled"
            assert (await session.prompt("and now?")).text == "again"

    asyncio.run(main())


class Broken(Exception):
    pass


def test_an_error_inside_comes_out_to_asyncio_as_the_same_exception() -> None:
    raised = Broken("the model is down")

    def fail(request: ModelRequest) -> ModelMessage:
        raise raised

    async def main() -> None:
        async with Session.open(MemoryStore(), model=FauxModel([fail])) as session:
            with pytest.raises(Broken) as caught:
                await session.prompt("hello")
            assert caught.value is raised
            with pytest.raises(ValueError, match="not waiting for an approval"):
                await session.resolve_approval("9.9", granted=True)

    asyncio.run(main())


def test_the_asyncio_callers_context_reaches_handlers_approver_model_and_tools() -> None:
    async def handle(prompt: str, request_id: str) -> list[tuple[str, str]]:
        """One request of a web app: its id in a context variable, its own session."""
        REQUEST_ID.set(request_id)
        seen: list[tuple[str, str]] = []

        def model_step(request: ModelRequest) -> ModelMessage:
            seen.append(("model", REQUEST_ID.get()))
            return faux_message([faux_tool_call("echo", {"word": prompt}),
                                 faux_tool_call("delete", {})])

        async def approver(request: ApprovalRequest) -> bool:
            seen.append(("approver", REQUEST_ID.get()))
            return True

        async with Session.open(MemoryStore(), model=FauxModel([model_step, faux_text("ok")]),
                                tools=[echo, delete], approver=approver) as session:
            @session.on_tool_call
            def spy(draft: Any) -> None:
                seen.append(("handler", REQUEST_ID.get()))

            await session.prompt(prompt)
            result = session.calls["1.0"].result
            assert result is not None
            seen.append(("tool", result.content[0].text.split()[1]))  # type: ignore[union-attr]
        return seen

    async def main() -> None:
        # two requests at once on one loop: each sees its own id, nothing leaks across
        first, second = await asyncio.gather(handle("a", "req-1"), handle("b", "req-2"))
        assert first == [("model", "req-1"), ("handler", "req-1"), ("handler", "req-1"),
                         ("approver", "req-1"), ("tool", "req-1")]
        assert second == [(where, "req-2") for where, _ in first]
        assert REQUEST_ID.get() == "-"

    asyncio.run(main())


def test_a_tool_awaits_the_hosts_asyncio_code_through_from_asyncio() -> None:
    async def lookup(key: str) -> str:  # the host's asyncio resources: a pool, a cache
        await asyncio.sleep(0)
        return f"{key}={REQUEST_ID.get()}"

    @tool(input_schema={"type": "object"}, annotations=SAFE)
    async def fetch(call: Any, ctx: Any) -> ToolResult:
        """Reads through the host's asyncio code."""
        return ToolResult(content=[text(await from_asyncio(lookup, "user"))])

    async def main() -> str:
        REQUEST_ID.set("req-9")
        async with Session.open(MemoryStore(), tools=[fetch], model=FauxModel(
                [faux_tool_call("fetch", {}), faux_text("ok")])) as session:
            await session.prompt("who?")
            return str(session.calls["1.0"].result.content[0].text)  # type: ignore[union-attr]

    assert asyncio.run(main()) == "user=req-9"


def test_sessions_share_the_loops_guest_run_and_a_new_loop_starts_another() -> None:
    async def one(name: str) -> str:
        async with Session.open(MemoryStore(), tools=[echo], model=FauxModel(
                [faux_tool_call("echo", {"word": name}), faux_text(name)])) as session:
            return (await session.prompt("go")).text

    async def main() -> list[str]:
        return list(await asyncio.gather(*(one(str(n)) for n in range(3))))

    assert asyncio.run(main()) == ["0", "1", "2"]
    assert asyncio.run(one("again")) == "again"  # the first loop's guest run has ended


def test_following_from_asyncio_sees_every_record_until_the_session_closes() -> None:
    async def main() -> None:
        model = FauxModel([faux_tool_call("echo", {}), faux_text("ok")])
        async with Session.open(MemoryStore(), model=model, tools=[echo]) as session:
            followed: list[Any] = []

            async def follow() -> None:
                async for record in session.follow():
                    followed.append(record)

            follower = asyncio.create_task(follow())
            await session.prompt("go")
            records = session.records
        await follower
        assert followed == list(records)

    asyncio.run(main())


def test_cancelled_while_opening_the_session_closes_it_and_ends_the_guest_run() -> None:
    async def open_and_wait() -> None:
        async with Session.open(MemoryStore(), model=FauxModel([])):
            await asyncio.Event().wait()

    async def main() -> None:
        for passes in range(12):  # cancelled at each wait of the opening in turn, then after
            opening = asyncio.create_task(open_and_wait())
            for _ in range(passes):
                await asyncio.sleep(0)
            opening.cancel()
            with pytest.raises(asyncio.CancelledError):
                await opening
        async with Session.open(MemoryStore(), model=FauxModel([faux_text("hi")])) as session:
            assert (await session.prompt("still works?")).text == "hi"

    asyncio.run(main())
    asyncio.run(main())  # the first loop's guest run ended: another loop starts its own


def test_the_end_of_the_block_stops_what_another_task_awaits_as_under_trio() -> None:
    """A prompt and a host call still awaited from outside the block when it ends are stopped
    with it, under either host: each raises RuntimeError, their calls stay open in the log as
    a stopped process leaves them (not cancelled), nothing is written after the block, and a
    reopened session takes them up. The log is the same under asyncio and trio, and whether
    the prompt's call ran in its own task (an approver that never answers later) or in a task
    of the session's."""
    async def approve(request: ApprovalRequest) -> bool:  # may answer later, for the runtime
        return True

    def options(approver: Any) -> dict[str, Any]:
        return dict(model=FauxModel([faux_tool_call("hang", {})]), tools=[hang],
                    session_id="s", create=True, approver=approver, clock=counting_clock())

    async def under_asyncio(approver: Any) -> Any:
        store = MemoryStore()
        async with Session.open(store, **options(approver)) as session:
            awaited = [asyncio.create_task(session.prompt("go")),
                       asyncio.create_task(session.call_tool("hang", {}))]
            await wait_for_bodies(session, 2)
        written = await store.read("s")
        for task in awaited:
            with pytest.raises(RuntimeError, match="the session closed while"):
                await task
        assert await store.read("s") == written
        async with Session.open(store, model=FauxModel([faux_text("told")]), tools=[hang],
                                session_id="s") as session:
            assert (await session.resume()).text == "told"
            assert (await session.resume_call("h0")).is_error  # not idempotent: interrupted
        return written

    async def under_trio(approver: Any) -> Any:
        store = MemoryStore()
        raised: list[BaseException] = []

        async def awaits(call: Callable[[], Awaitable[object]]) -> None:
            with pytest.raises(RuntimeError, match="the session closed while") as info:
                await call()
            raised.append(info.value)

        async with trio.open_nursery() as outside:
            async with TrioSession.open(store, **options(approver)) as session:
                outside.start_soon(awaits, lambda: session.prompt("go"))
                outside.start_soon(awaits, lambda: session.call_tool("hang", {}))
                started = 0
                async for record in session.follow():
                    started += isinstance(record.event, ToolExecutionStarted)
                    if started == 2:
                        break
            written = await store.read("s")
        assert len(raised) == 2 and await store.read("s") == written
        return written

    logs = [run(approver) for approver in (approve_all, approve)
            for run in (lambda a: asyncio.run(under_asyncio(a)),
                        lambda a: trio.run(under_trio, a))]
    state = fold(logs[0])
    assert (state.calls["1.0"].status, state.calls["h0"].status) == ("running", "running")
    assert all(shape(log) == shape(logs[0]) for log in logs)


def test_a_closed_session_refuses_every_change_and_its_followers_end() -> None:
    """Also once its guest run has ended with it: the refusal is the trio session's, and a
    follower reads every record, then ends, as under trio."""
    async def main() -> None:
        store = MemoryStore()
        async with Session.open(store, model=FauxModel([faux_text("hi")]), tools=[echo],
                                session_id="s", create=True) as session:
            await session.prompt("go")
        written = await store.read("s")
        changes = [lambda: session.prompt("again"), session.resume,
                   lambda: session.call_tool("echo", {}), lambda: session.resume_call("h0"),
                   lambda: session.resolve_approval("1.0", granted=True),
                   session.wait_pending_approvals,
                   lambda: session.set_active_tools([]), lambda: session.activate(["echo"]),
                   lambda: session.set_system_prompt("be brief"),
                   lambda: session.register(later_tool)]
        for change in changes:
            with pytest.raises(RuntimeError, match=r"the session is closed: open it again"):
                await change()
        with pytest.raises(RuntimeError, match=r"the session is closed: open it again"):
            session.on_tool_call(lambda draft: None)
        assert [record async for record in session.follow()] == written
        async with session.deltas() as stream:
            assert [delta async for delta in stream] == []
        assert await store.read("s") == written

    asyncio.run(main())


def test_anyio_on_its_asyncio_backend_hosts_a_session_too() -> None:
    import anyio

    async def main() -> str:
        async with Session.open(MemoryStore(), tools=[echo], model=FauxModel(
                [faux_tool_call("echo", {"word": "any"}), faux_text("io")])) as session:
            with anyio.fail_after(60):
                return (await session.prompt("go")).text

    assert anyio.run(main, backend="asyncio") == "io"


@tool(input_schema={"type": "object"}, annotations=SAFE, exposure="deferred")
async def later_tool(call: Any, ctx: Any) -> ToolResult:
    """Declared only once activated."""
    return ToolResult(content=[text("found")])


def test_a_host_call_from_asyncio_is_governed_recorded_and_sees_the_callers_context() -> None:
    async def main() -> None:
        async with Session.open(MemoryStore(), model=FauxModel([]),
                                tools=[echo, hang]) as session:
            REQUEST_ID.set("r7")
            outcome = await session.call_tool("echo", {"word": "hi"})
            assert outcome.call_id == "h0"
            assert outcome.content[0].text == "hi r7"  # type: ignore[union-attr]
            assert session.calls["h0"].status == "completed"
            assert await session.resume_call("h0") == outcome  # the recorded outcome
            refused = await session.call_tool("echo", {"word": 3})
            assert refused.is_error and session.calls["h1"].status == "failed"

            # cancelling the awaiting task ends the host call as cancelled, recorded
            call = asyncio.create_task(session.call_tool("hang", {}))
            await wait_for_bodies(session, 2)
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
            assert session.calls["h2"].status == "cancelled"
            assert not session.transcript  # host calls add nothing to the transcript

    asyncio.run(main())


def test_activate_and_the_system_prompt_from_asyncio_reach_the_models_next_request() -> None:
    async def main() -> None:
        model = FauxModel([faux_text("one"), faux_text("two")])
        async with Session.open(MemoryStore(), model=model, tools=[echo, later_tool],
                                system_prompt="Be brief.") as session:
            assert [tool.name for tool in session.declared_tools()] == ["echo"]
            await session.prompt("first")
            await session.activate(["later_tool"])
            await session.set_system_prompt("Be thorough.")
            await session.prompt("second")
            with pytest.raises(ValueError, match="no tool named 'nope'"):
                await session.activate(["nope"])
            with pytest.raises(TypeError, match="not one string"):
                await session.activate("later_tool")
        first, second = model.requests
        assert (first.system, [tool.name for tool in first.tools]) == ("Be brief.", ["echo"])
        assert (second.system, [tool.name for tool in second.tools]) == (
            "Be thorough.", ["echo", "later_tool"])

    asyncio.run(main())


def test_a_streamed_turns_deltas_reach_an_asyncio_subscriber() -> None:
    async def main() -> None:
        model = FauxModel([faux_tool_call("echo", {"word": "w"}), faux_text("all done")],
                          stream=True)
        async with Session.open(MemoryStore(), model=model, tools=[echo]) as session:
            async with session.deltas() as stream:
                async def read() -> list[Any]:
                    return [delta async for delta in stream]

                reader = asyncio.create_task(read())
                await session.prompt("go")
                assert not reader.done()  # it reads until the session closes
            # leaving the block ends the subscription; the reader saw what was published
            deltas = await reader
        arguments = [d for d in deltas if d.kind == "arguments"]
        assert {(d.turn, d.name) for d in arguments} == {(1, "echo")}
        assert json.loads("".join(d.text for d in arguments)) == {"word": "w"}
        texts = [d for d in deltas if d.kind == "text"]
        assert {d.turn for d in texts} == {2} and "".join(d.text for d in texts) == "all done"
        assert deltas == arguments + texts  # in the order they were published

    asyncio.run(main())


def test_a_delta_subscribers_iteration_ends_when_the_session_closes() -> None:
    async def main() -> None:
        async with contextlib.AsyncExitStack() as outlasting:
            model = FauxModel([faux_text("x")], stream=True)
            async with Session.open(MemoryStore(), model=model) as session:
                stream = await outlasting.enter_async_context(session.deltas())

                async def read() -> list[Any]:
                    return [delta async for delta in stream]

                reader = asyncio.create_task(read())
                await session.prompt("go")
            assert [delta.text for delta in await reader] == ["x"]

    asyncio.run(main())
