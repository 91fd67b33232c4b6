"""The model loop, call ids, the faux model, and what is injected into a session."""

from __future__ import annotations

from typing import Any

import pytest
import trio
from conftest import counting_clock, run_session

from engine import Annotations, Session, ToolResult, fold, text, tool
from engine.core.reducers import ToolResultEntry, TranscriptView
from engine.models import (
    FauxModel,
    FauxScriptExhausted,
    ModelMessage,
    ModelRequest,
    faux_message,
    faux_text,
    faux_tool_call,
)
from events import MemoryStore, SessionNotFound
from events.types import (
    AssistantMessage,
    ModelToolCall,
    Record,
    ToolCallFailed,
    ToolCallRequested,
    ToolExecutionStarted,
    UserMessage,
)

SAFE = Annotations(read_only=True, open_world=False)


class Echo:
    """A safe tool that counts its runs and echoes its arguments."""

    def __init__(self) -> None:
        self.runs: list[str] = []
        runs = self.runs

        @tool(name="echo", annotations=SAFE,
              input_schema={"type": "object", "properties": {"say": {"type": "string"}}})
        async def echo(call: Any, ctx: Any) -> ToolResult:
            runs.append(call.call_id)
            return ToolResult(content=[text(call.arguments.get("say", "echo"))])

        self.spec = echo


def results(transcript: Any) -> list[ToolResultEntry]:
    return [e for e in transcript if isinstance(e, ToolResultEntry)]


# -- stopping ------------------------------------------------------------------------------


async def test_the_loop_stops_on_a_message_without_calls() -> None:
    echo = Echo()
    model = FauxModel([faux_tool_call("echo", {"say": "hi"}), faux_text("all done"),
                       faux_text("never asked for")])
    async with Session.open(MemoryStore(), model=model, tools=[echo.spec]) as session:
        result = await session.prompt("go")
        assert (result.stop, result.turns, result.text) == ("end_turn", 2, "all done")
        assert len(model.requests) == 2
        assert model.remaining == 1
        assert [type(e) for e in session.transcript] == [
            UserMessage, AssistantMessage, ToolResultEntry, AssistantMessage]
    assert echo.runs == ["1.0"]


async def test_max_turns_stops_the_loop() -> None:
    echo = Echo()
    model = FauxModel([faux_tool_call("echo")] * 4 + [faux_text("done")])
    async with Session.open(MemoryStore(), model=model, tools=[echo.spec], max_turns=3) as session:
        result = await session.prompt("go")
        assert result.stop == "max_turns"
        assert result.turns == 3
        assert len(model.requests) == 3
        assert model.remaining == 2
        # the last message's calls ran and their results are in the transcript
        assert echo.runs == ["1.0", "2.0", "3.0"]
        assert isinstance(session.transcript[-1], ToolResultEntry)
        assert session.state.open_calls == ()
        # the next prompt gets its own budget of turns
        again = await session.prompt("more")
        assert again.stop == "end_turn" and again.turns == 2
    assert echo.runs == ["1.0", "2.0", "3.0", "4.0"]
    model.assert_complete()


async def test_max_turns_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_turns"):
        async with Session.open(MemoryStore(), model=FauxModel([]), max_turns=0):
            pass


async def test_a_message_cut_off_for_length_fails_its_calls_without_running_them() -> None:
    echo = Echo()
    cut = faux_message([faux_text("let me"), faux_tool_call("echo", {"say": "a"}),
                        faux_tool_call("echo", {"say": "b"})], stop_reason="length")
    state, records, model = await run_session([echo.spec], [cut, faux_text("sorry")])
    assert echo.runs == []
    for call_id in ("1.0", "1.1"):
        terminal = state.calls[call_id].terminal
        assert isinstance(terminal, ToolCallFailed)
        assert terminal.kind == "truncated"
        assert "truncated" in terminal.result.text and "length" in terminal.result.text
        assert terminal.result.is_error
        assert not state.calls[call_id].started
        assert state.calls[call_id].policy is None  # never reached the policy
    assert not any(isinstance(r.event, ToolExecutionStarted) for r in records)
    assert [e.call_id for e in results(state.transcript)] == ["1.0", "1.1"]
    assert all(e.result.is_error for e in results(state.transcript))
    # the model is asked again, and sees the failures
    assert len(model.requests) == 2
    assert len(model.requests[1].transcript) == 4
    model.assert_complete()


async def test_two_calls_with_one_model_id_in_a_message_both_fail_without_running() -> None:
    echo = Echo()
    batch = [faux_tool_call("echo", {"say": "a"}, id="call_0"),
             faux_tool_call("echo", {"say": "b"}, id="call_0"),
             faux_tool_call("echo", {"say": "c"}, id="call_1")]
    state, records, model = await run_session([echo.spec], [batch, faux_text("ok")])
    for call_id in ("1.0", "1.1"):
        terminal = state.calls[call_id].terminal
        assert isinstance(terminal, ToolCallFailed)
        assert terminal.kind == "duplicate_call_id"
        assert "call_0" in terminal.result.text
        assert not state.calls[call_id].started
    assert state.calls["1.2"].status == "completed"
    assert echo.runs == ["1.2"]
    assert [(e.call_id, e.model_call_id, e.result.is_error) for e in results(state.transcript)] == [
        ("1.0", "call_0", True), ("1.1", "call_0", True), ("1.2", "call_1", False)]


async def test_one_model_id_reused_across_turns_is_fine() -> None:
    echo = Echo()
    script = [faux_tool_call("echo", {"say": "first"}, id="call_0"),
              faux_tool_call("echo", {"say": "second"}, id="call_0"),
              faux_text("ok")]
    state, records, model = await run_session([echo.spec], script)
    assert echo.runs == ["1.0", "2.0"]
    assert [(e.call_id, e.model_call_id, e.result.text) for e in results(state.transcript)] == [
        ("1.0", "call_0", "first"), ("2.0", "call_0", "second")]


# -- call ids ------------------------------------------------------------------------------


async def test_call_ids_are_turn_dot_index_and_parent_slash_n() -> None:
    echo = Echo()

    @tool(annotations=SAFE)
    async def fan_out(call: Any, ctx: Any) -> ToolResult:
        ids = [(await ctx.execute_tool("echo", {"say": str(i)})).call_id for i in range(2)]
        return ToolResult(content=[text(",".join(ids))])

    model = FauxModel([
        [faux_tool_call("echo"), faux_tool_call("echo")],
        [faux_tool_call("echo"), faux_tool_call("fan_out"), faux_tool_call("echo")],
        faux_text("first prompt done"),
        faux_tool_call("echo", id="x"),
        faux_text("second prompt done"),
    ])
    async with Session.open(MemoryStore(), model=model, tools=[echo.spec, fan_out]) as session:
        await session.prompt("one")
        await session.prompt("two")  # turns go on counting across prompts
        records = session.records
        assert session.calls["2.1"].result.text == "2.1/0,2.1/1"  # type: ignore[union-attr]
    requested = [r.event for r in records if isinstance(r.event, ToolCallRequested)]
    assert [(e.call_id, e.parent_id) for e in requested] == [
        ("1.0", None), ("1.1", None),
        ("2.0", None), ("2.1", None), ("2.2", None),
        ("2.1/0", "2.1"), ("2.1/1", "2.1"),
        ("4.0", None),
    ]
    # the model's ids are kept beside the engine's, only for pairing
    assert requested[-1].model_call_id == "x"
    assert [r.event.turn for r in records if isinstance(r.event, AssistantMessage)] == [1, 2, 3, 4, 5]
    model.assert_complete()


# -- the faux model --------------------------------------------------------------------------


async def test_the_faux_model_records_every_request() -> None:
    echo = Echo()
    state, records, model = await run_session(
        [echo.spec], [faux_tool_call("echo", {"say": "x"}), faux_text("ok")], prompt="hello")
    assert len(model.requests) == 2
    first, second = model.requests
    assert [spec.name for spec in first.tools] == ["echo"]
    assert list(first.transcript) == [UserMessage(text="hello")]
    assert len(second.transcript) == 3
    assert isinstance(second.transcript[2], ToolResultEntry)
    assert second.transcript[2].result.text == "x"


async def test_running_out_of_script_raises_a_clear_error() -> None:
    echo = Echo()
    model = FauxModel([faux_tool_call("echo")])
    store = MemoryStore()
    async with Session.open(store, model=model, tools=[echo.spec]) as session:
        with pytest.raises(FauxScriptExhausted, match=r"1 steps.*step 2") as info:
            await session.prompt("go")
        assert "faux_text" in str(info.value)  # says what to do
        # the call of the step that existed ran and closed; nothing is left open
        assert echo.runs == ["1.0"]
        assert session.state.open_calls == ()
        # the session is still usable
        with pytest.raises(FauxScriptExhausted):
            await session.prompt("again")
    assert len(model.requests) == 3
    assert fold(await store.read(session.session_id)).snapshot() == session.state.snapshot()


async def test_an_empty_script_is_exhausted_at_once() -> None:
    model = FauxModel([])
    with pytest.raises(FauxScriptExhausted, match="0 steps"):
        await model.complete(ModelRequest(transcript=TranscriptView([], 0), tools=()))


async def test_assert_complete_fails_when_steps_are_left() -> None:
    model = FauxModel([faux_text("one"), faux_text("two"), faux_text("three")])
    async with Session.open(MemoryStore(), model=model) as session:
        await session.prompt("go")
        with pytest.raises(AssertionError, match="2 unused"):
            model.assert_complete()
        await session.prompt("go on")
        with pytest.raises(AssertionError, match="1 unused"):
            model.assert_complete()
        await session.prompt("finish")
        model.assert_complete()


async def test_a_factory_step_sees_the_request() -> None:
    echo = Echo()
    seen: list[tuple[int, list[str], str]] = []

    def reply(request: ModelRequest) -> ModelMessage:
        last = request.transcript[-1]
        assert isinstance(last, ToolResultEntry)
        seen.append((len(request.transcript), [s.name for s in request.tools], last.result.text))
        return ModelMessage(text=f"the tool said {last.result.text}")

    state, records, model = await run_session(
        [echo.spec], [faux_tool_call("echo", {"say": "pong"}), reply])
    assert seen == [(3, ["echo"], "pong")]
    last = state.transcript[-1]
    assert isinstance(last, AssistantMessage) and last.text == "the tool said pong"


async def test_a_factory_step_can_call_tools() -> None:
    echo = Echo()

    def call_echo(request: ModelRequest) -> ModelMessage:
        said = request.transcript[0]
        assert isinstance(said, UserMessage)
        return ModelMessage(tool_calls=[ModelToolCall(id="f", name="echo",
                                                      arguments={"say": said.text.upper()})])

    state, records, model = await run_session([echo.spec], [call_echo, faux_text("ok")],
                                              prompt="shout")
    assert results(state.transcript)[0].result.text == "SHOUT"


async def test_a_factory_that_returns_no_message_is_a_clear_error() -> None:
    model = FauxModel([lambda request: "not a message"])
    async with Session.open(MemoryStore(), model=model) as session:
        with pytest.raises(TypeError, match="not a ModelMessage"):
            await session.prompt("go")


async def test_the_request_transcript_is_a_read_only_prefix_view() -> None:
    echo = Echo()
    lengths: list[int] = []

    def remember(message: Any) -> Any:
        def step(request: ModelRequest) -> ModelMessage:
            lengths.append(len(request.transcript))
            return message
        return step

    model = FauxModel([
        remember(faux_message([faux_tool_call("echo")])),
        remember(faux_message([faux_tool_call("echo"), faux_tool_call("echo")])),
        remember(faux_message([faux_text("done")])),
    ])
    async with Session.open(MemoryStore(), model=model, tools=[echo.spec]) as session:
        await session.prompt("go")
        final = len(session.transcript)
    assert lengths == [1, 3, 6]
    assert final == 7
    # each request still holds the transcript as it was when the model was asked
    assert [len(r.transcript) for r in model.requests] == lengths
    assert list(model.requests[1].transcript) == list(session.transcript)[:3]
    first = model.requests[0].transcript
    assert isinstance(first, TranscriptView)
    assert list(first) == [UserMessage(text="go")]
    with pytest.raises(IndexError):
        first[1]
    assert first[-1] == UserMessage(text="go")
    assert first[0:5] == (UserMessage(text="go"),)
    # read-only: no item assignment, no append
    with pytest.raises(TypeError):
        first[0] = UserMessage(text="forged")  # type: ignore[index]
    assert not hasattr(first, "append")
    # a view, not a copy: every request shares the session's one list
    assert all(r.transcript._entries is first._entries for r in model.requests)  # noqa: SLF001


# -- one prompt at a time ------------------------------------------------------------------


class GatedModel:
    """A model that waits for ``release`` before answering, then delegates to a script."""

    def __init__(self, script: list[Any]) -> None:
        self.inner = FauxModel(script)
        self.asked = trio.Event()
        self.release = trio.Event()

    async def complete(self, request: ModelRequest) -> ModelMessage:
        self.asked.set()
        await self.release.wait()
        return await self.inner.complete(request)


async def test_prompting_twice_concurrently_raises() -> None:
    model = GatedModel([faux_text("first answer")])
    results_: list[Any] = []
    async with Session.open(MemoryStore(), model=model) as session:
        async with trio.open_nursery() as nursery:
            async def first() -> None:
                results_.append(await session.prompt("first"))

            nursery.start_soon(first)
            await model.asked.wait()
            before = session.records
            with pytest.raises(RuntimeError, match="already running"):
                await session.prompt("second")
            assert session.records == before  # the refused prompt recorded nothing
            model.release.set()
        assert results_[0].text == "first answer"
        users = [r.event.text for r in session.records if isinstance(r.event, UserMessage)]
        assert users == ["first"]


# -- injected clock and session id -----------------------------------------------------------


async def test_an_injected_clock_and_session_id_appear_in_the_records() -> None:
    ticks: list[float] = []

    def clock() -> float:
        ticks.append(1_700_000_000.0 + len(ticks) * 0.5)
        return ticks[-1]

    echo = Echo()
    store = MemoryStore()
    model = FauxModel([faux_tool_call("echo"), faux_text("ok")])
    async with Session.open(store, model=model, tools=[echo.spec], clock=clock,
                            new_session_id=lambda: "session-42") as session:
        assert session.session_id == "session-42"
        await session.prompt("go")
    records = await store.read("session-42")
    assert await store.sessions() == ["session-42"]
    assert records and all(r.session_id == "session-42" for r in records)
    assert [r.time for r in records] == ticks
    assert len(set(ticks)) == len(ticks) == len(records)


async def test_an_explicit_session_id_wins_over_the_id_source() -> None:
    store = MemoryStore()

    def no_new_ids() -> str:
        raise AssertionError("an explicit session_id must not draw a new id")

    async with Session.open(store, model=FauxModel([faux_text("ok")]), session_id="mine",
                            create=True,
                            new_session_id=no_new_ids) as session:
        await session.prompt("go")
    assert await store.sessions() == ["mine"]


async def test_opening_an_id_the_store_does_not_hold_is_an_error_unless_asked_to_create() -> None:
    store = MemoryStore()
    model = FauxModel([faux_text("hello")])
    with pytest.raises(SessionNotFound, match="'typo' is not in the store.*create=True"):
        async with Session.open(store, model=model, session_id="typo") as session:
            await session.resume()
    assert await store.sessions() == [] and model.requests == []  # nothing written, nobody asked

    async with Session.open(store, model=model, session_id="typo", create=True) as session:
        await session.prompt("go")
    async with Session.open(store, model=model, session_id="typo") as session:  # it exists now
        assert (await session.resume()).stop == "end_turn"
    assert await store.sessions() == ["typo"]


async def test_an_id_source_that_names_a_stored_session_is_refused() -> None:
    store = MemoryStore()
    async with Session.open(store, model=FauxModel([]), new_session_id=lambda: "same"):
        pass
    with pytest.raises(ValueError, match="new_session_id.*'same'.*already"):
        async with Session.open(store, model=FauxModel([]), new_session_id=lambda: "same"):
            pass


async def _run_once() -> list[Record]:
    @tool(annotations=SAFE)
    async def work(call: Any, ctx: Any) -> ToolResult:
        outcome = await ctx.execute_tool("nope")
        return ToolResult(content=[text(outcome.result.text)])

    store = MemoryStore()
    # one call per turn: concurrent siblings may interleave differently from run to run
    model = FauxModel([faux_tool_call("work"), faux_tool_call("work"), faux_text("ok")])
    async with Session.open(store, model=model, tools=[work], clock=counting_clock(),
                            new_session_id=lambda: "same") as session:
        await session.prompt("go")
    return await store.read("same")


async def test_with_an_injected_clock_and_id_two_runs_record_the_same_log() -> None:
    first, second = await _run_once(), await _run_once()
    assert len(first) > 10
    assert first == second
