"""The model's side on the record, with any model: each turn requested before the model is
called, then answered or failed; the system prompt; what the reducers accept."""

from __future__ import annotations

from typing import Any

import pytest
import trio
from conftest import counting_clock, events_of

from engine import Session, fold
from engine.core.reducers import LogInconsistency
from engine.models import FauxModel, ModelError, ModelMessage, ModelRequest, faux_text
from events import MemoryStore, Record
from events.codec import decode_line, encode_line
from events.modelturns import (
    ModelFailed,
    ModelRequested,
    ModelResponded,
    ProviderContent,
    SystemPromptSet,
    Usage,
)
from events.results import ErrorInfo
from events.types import AssistantMessage, SessionStarted, UserMessage


def kinds(records: list[Record]) -> list[str]:
    return [type(r.event).__name__ for r in records]


async def test_each_turn_is_requested_before_the_model_is_asked_and_answered_after() -> None:
    store = MemoryStore()
    stored_when_asked: list[str] = []

    async def look(request: ModelRequest) -> ModelMessage:
        stored_when_asked.append(kinds(await store.read("s"))[-1])
        return ModelMessage(text="hi", usage=Usage(input_tokens=7, output_tokens=2),
                            response_id="r-1", model="faux-2")

    class Looking:
        async def complete(self, request: ModelRequest) -> ModelMessage:
            return await look(request)

    async with Session.open(store, model=Looking(), session_id="s", create=True,
                            clock=counting_clock()) as session:
        await session.prompt("hello")
    records = await store.read("s")
    assert stored_when_asked == ["ModelRequested"]  # write-ahead
    assert kinds(records)[-4:] == ["UserMessage", "ModelRequested", "ModelResponded",
                                   "AssistantMessage"]
    asked = records[-3]
    answered = records[-2]
    assert asked.event == ModelRequested(turn=1, provider="custom", model="Looking")
    assert answered.event == ModelResponded(turn=1, stop_reason="stop", model="faux-2",
                                            response_id="r-1",
                                            usage=Usage(input_tokens=7, output_tokens=2))
    assert answered.time - asked.time == 1.0  # the latency, by the injected clock
    assert fold(records).usage == Usage(input_tokens=7, output_tokens=2, cached_tokens=0)


async def test_the_faux_model_names_itself() -> None:
    store = MemoryStore()
    async with Session.open(store, model=FauxModel([faux_text("ok")])) as session:
        await session.prompt("go")
    [asked] = events_of(await store.read(session.session_id), ModelRequested)
    assert (asked.provider, asked.model, asked.stream) == ("faux", "faux", False)


class Failing:
    """Raises ``error`` on its first request, then answers."""

    def __init__(self, error: BaseException) -> None:
        self.error: BaseException | None = error

    async def complete(self, request: ModelRequest) -> ModelMessage:
        if self.error is not None:
            error, self.error = self.error, None
            raise error
        return ModelMessage(text="recovered")


@pytest.mark.parametrize(("error", "kind"), [
    (ModelError("server_error", "503 from upstream", status=503, request_id="req-9"),
     "server_error"),
    (ValueError("a bug in the model"), "error"),
])
async def test_a_failing_turn_is_recorded_its_exception_goes_on_and_resume_asks_again(
        error: Exception, kind: str) -> None:
    store = MemoryStore()
    async with Session.open(store, model=Failing(error)) as session:
        with pytest.raises(type(error)) as raised:
            await session.prompt("go")
        assert raised.value is error
        result = await session.resume()
    assert result.text == "recovered"
    records = await store.read(session.session_id)
    [failed] = events_of(records, ModelFailed)
    assert failed.kind == kind and failed.turn == 1 and str(error) in failed.error.message
    if isinstance(error, ModelError):
        assert (failed.status, failed.request_id) == (503, "req-9")
    fold(records)


async def test_a_cancelled_request_is_recorded_as_cancelled_and_nothing_else() -> None:
    store = MemoryStore()
    started = trio.Event()

    class Slow:
        async def complete(self, request: ModelRequest) -> ModelMessage:
            started.set()
            await trio.sleep_forever()
            raise AssertionError

    async with Session.open(store, model=Slow()) as session:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.prompt, "go")
            await started.wait()
            nursery.cancel_scope.cancel()
    records = await store.read(session.session_id)
    assert kinds(records)[-3:] == ["UserMessage", "ModelRequested", "ModelFailed"]
    assert records[-1].event.kind == "cancelled"


async def test_the_system_prompt_is_recorded_when_it_changes_and_sent_to_the_model() -> None:
    store = MemoryStore()
    model = FauxModel([faux_text("a"), faux_text("b"), faux_text("c")])
    async with Session.open(store, model=model, session_id="s", create=True,
                            system_prompt="Be brief.") as session:
        await session.prompt("one")
    async with Session.open(store, model=model, session_id="s",
                            system_prompt="Be brief.") as session:  # the same: nothing new
        await session.prompt("two")
        await session.set_system_prompt("Be kind.")
        await session.set_system_prompt("Be kind.")
        await session.prompt("three")
    records = await store.read("s")
    assert events_of(records, SystemPromptSet) == [SystemPromptSet(text="Be brief."),
                                                   SystemPromptSet(text="Be kind.")]
    assert [r.system for r in model.requests] == ["Be brief.", "Be brief.", "Be kind."]
    assert fold(records).system_prompt == "Be kind."


def log(*events: Any) -> list[Record]:
    return [Record(session_id="s", seq=i + 1, time=float(i), event=e)
            for i, e in enumerate((SessionStarted(), UserMessage(text="hi"), *events))]


def test_the_reducers_take_model_turns_in_order_only() -> None:
    asked = ModelRequested(turn=1, provider="p", model="m")
    answered = ModelResponded(turn=1, stop_reason="stop")
    failed = ModelFailed(turn=1, kind="timeout", error=ErrorInfo(type="T", message="m"))
    fold(log(asked, failed, asked, answered, AssistantMessage(turn=1)))
    fold(log(asked, asked, answered))  # a process stopped with a request unanswered
    fold(log(AssistantMessage(turn=1)))  # a log written before model turns were recorded
    with pytest.raises(LogInconsistency, match="not asked for"):
        fold(log(answered))
    with pytest.raises(LogInconsistency, match="expected 1"):
        fold(log(ModelRequested(turn=2, provider="p", model="m")))
    with pytest.raises(LogInconsistency, match="not asked for"):
        fold(log(asked, answered, answered))


@pytest.mark.parametrize("event", [
    SystemPromptSet(text="Be brief."),
    SystemPromptSet(text=None),
    ModelRequested(turn=1, provider="openai", model="gpt", api="chat",
                   settings={"temperature": 0.5}, stream=True),
    ModelResponded(turn=1, stop_reason="end_turn", model="m", response_id="r",
                   usage=Usage(input_tokens=1, output_tokens=2, cached_tokens=0)),
    ModelFailed(turn=1, kind="rate_limited", error=ErrorInfo(type="RateLimitError",
                                                              message="429"), status=429),
    AssistantMessage(turn=1, text="t", provider_content=ProviderContent(
        api="anthropic.messages", items=[{"type": "thinking", "thinking": "…"}])),
])
def test_the_new_facts_read_back_as_written(event: Any) -> None:
    record = Record(session_id="s", seq=3, time=1.5, event=event)
    assert decode_line(encode_line(record)) == record


def test_an_assistant_message_without_provider_content_is_written_as_before() -> None:
    line = encode_line(Record(session_id="s", seq=3, time=1.5, event=AssistantMessage(turn=1)))
    assert "provider_content" not in line
