"""A model's reply is input. Whatever a provider sends (a field null or of the wrong type, a
field missing, JSON nested past what can be read, text that is not JSON, huge values) fails
that call, or at worst the turn with a :class:`ModelError`, and the log stays whole: the
session goes on (or ends) cleanly, a fold of the log equals the live state, no call is left
open. Each API's replies are edited from its recorded payloads (tests/models/edits.py) and
answered in the process, through the official SDKs."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from typing import Any

import anthropic
import openai
import pytest
import trio
from hypothesis import given, reject, settings
from hypothesis import strategies as st

from engine import PromptResult
from engine.models import ModelError, ModelMessage
from engine.models.anthropic import anthropic_message
from engine.models.openai import chat_message, responses_message
from engine.models.toolnames import ToolNames
from events import MemoryStore, Record
from events.modelturns import ModelFailed
from events.types import AssistantMessage, ToolCallFailed
from tests.models.apis import APIS, Api, prompted
from tests.models.edits import Deep, body, dumps, events, load, paths, removed, replaced, stream
from tests.models.server import Reply, payload
from tests.models.test_adapters import of
from tests.models.tools import TOOLS

#: Where each API's first tool call is in ``tool_call.json``, and what its fields are called.
CALL = {"chat": (("choices", 0, "message", "tool_calls", 0), "id", ("function", "name"),
                 ("function", "arguments")),
        "responses": (("output", 0), "call_id", ("name",), ("arguments",)),
        "anthropic": (("content", 1), "id", ("name",), ("input",))}

DEEP = 100_000


def call_field(api: Api, field: str) -> tuple[str | int, ...]:
    """The path of the first call's ``field`` (``"id"``, ``"name"`` or ``"arguments"``)."""
    at, call_id, name, arguments = CALL[api.name]
    return (*at, *{"id": (call_id,), "name": name, "arguments": arguments}[field])


async def attempt(api: Api, reply: Reply, *, streamed: bool = False,
                  max_turns: int = 8) -> tuple[Any, list[Record]]:
    """A session prompted once, ``reply`` its model's first answer and a plain "done" every
    later one: what the prompt returned, or the ``ModelError`` it raised (the session then
    resumed, to show it goes on). The log is checked whole at the end."""
    store = MemoryStore()
    final = payload(api.name, "stream_final" if streamed else "final_text")
    async with api.answering([reply, final, final], stream=streamed) as (model, _):
        outcome = await prompted(model, store, resume=True, max_turns=max_turns)
    return outcome, await store.read("s")


@pytest.mark.parametrize("api", APIS, ids=lambda api: api.name)
@pytest.mark.parametrize("field", ["id", "name"])
async def test_a_call_whose_id_or_name_is_null_fails_the_turn(api: Api, field: str) -> None:
    reply = body(replaced(load(api.name, "tool_call"), call_field(api, field), None))
    raised, records = await attempt(api, reply)
    assert isinstance(raised, ModelError) and raised.kind == "error"
    assert "null" in str(raised) and "not a string" in str(raised)
    [failed] = of(records, ModelFailed)
    assert failed.turn == 1 and failed.error.type == "ModelError"
    assert [m.text for m in of(records, AssistantMessage)] == ["done"]


@pytest.mark.parametrize("api", APIS[:2], ids=lambda api: api.name)
async def test_arguments_nested_too_deep_to_read_fail_that_call(api: Api) -> None:
    arguments = "[" * DEEP + "]" * DEEP  # the string the model wrote
    reply = body(replaced(load(api.name, "tool_call"), call_field(api, "arguments"), arguments))
    result, records = await attempt(api, reply)
    assert isinstance(result, PromptResult) and result.text == "done"
    [failed] = of(records, ToolCallFailed)
    assert failed.kind == "invalid_arguments"


@pytest.mark.parametrize("api", APIS, ids=lambda api: api.name)
async def test_a_reply_nested_too_deep_to_read_fails_the_turn(api: Api) -> None:
    reply = body(replaced(load(api.name, "tool_call"), call_field(api, "arguments"), Deep(DEEP)))
    raised, records = await attempt(api, reply)
    assert isinstance(raised, ModelError) and raised.kind == "error"
    assert "nested too deeply" in str(raised)
    assert [f.turn for f in of(records, ModelFailed)] == [1]


@pytest.mark.parametrize("api", APIS, ids=lambda api: api.name)
async def test_a_reply_that_is_not_json_fails_the_turn(api: Api) -> None:
    raised, _ = await attempt(api, Reply(body=dumps(load(api.name, "tool_call"))[:40].encode()))
    assert isinstance(raised, ModelError) and raised.kind == "error"


async def test_a_streamed_chat_message_cut_off_fails_its_calls_unrun() -> None:
    # the SDK's stream helper raises for a message cut off at the token limit; it is still the
    # answer, and its stop reason says what became of its calls
    found = events("chat", "stream_call")
    for index, (kind, data) in enumerate(found):
        if isinstance(data, dict) and data["choices"] and data["choices"][0]["finish_reason"]:
            found[index] = (kind, replaced(data, ("choices", 0, "finish_reason"), "length"))
    result, records = await attempt(Api("chat"), stream(found), streamed=True)
    assert isinstance(result, PromptResult) and result.text == "All done."
    [failed] = of(records, ToolCallFailed)
    assert failed.kind == "truncated"


# -- any field, any value ---------------------------------------------------------------------

#: What a field may become: any JSON (NaN and the infinities included, which the SDKs read),
#: and the values that broke readers before: arrays nested past what can be read, or deeper
#: than a log takes; numbers past what a count can be; 100 000 characters of text; half of a
#: surrogate pair, which no request can carry back.
READABLE = st.one_of(
    st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
                 lambda inner: st.lists(inner, max_size=3)
                 | st.dictionaries(st.text(max_size=8), inner, max_size=3),
                 max_leaves=6),
    st.sampled_from([Deep(150), 10**400, 2**63, -1, "x" * 100_000, "", "\x1b[2J", "\ud800"]),
)
#: ... and, where the SDK reads the body, arrays nested past what its parser can read.
VALUES = READABLE | st.just(Deep(DEEP))

NAMES = {"chat": ["tool_call", "parallel_calls", "structured_call", "truncated", "final_text"],
         "responses": ["tool_call", "parallel_calls", "reasoning_call", "truncated",
                       "final_text"],
         "anthropic": ["tool_call", "parallel_calls", "thinking_call", "truncated",
                       "final_text"]}

#: Each API's reader, and the SDK class its response is built as.
READERS: dict[str, tuple[Callable[[Any, ToolNames], ModelMessage], type[Any]]] = {
    "chat": (chat_message, openai.types.chat.ChatCompletion),
    "responses": (responses_message, openai.types.responses.Response),
    "anthropic": (anthropic_message, anthropic.types.Message),
}


def edited(value: Any, data: st.DataObject, values: st.SearchStrategy[Any] = VALUES) -> Any:
    """``value`` with one place in it replaced by one of ``values``, or removed."""
    path = data.draw(st.sampled_from(paths(value)), label="path")
    if data.draw(st.booleans(), label="remove"):
        return removed(value, path)
    return replaced(value, path, data.draw(values, label="value"))


class Answers:
    """A model whose first answer is ``first`` (a message, or the error it raises), then
    "done"."""

    def __init__(self, first: ModelMessage | ModelError) -> None:
        self._first: ModelMessage | ModelError | None = first

    async def complete(self, request: Any) -> ModelMessage:
        first, self._first = self._first, None
        if isinstance(first, ModelError):
            raise first
        return first if first is not None else ModelMessage(text="done", stop_reason="end_turn")


async def recorded(first: ModelMessage | ModelError) -> None:
    """A session given ``first`` as its model's first answer: it ends, or goes on, whole."""
    await prompted(Answers(first), MemoryStore(), resume=True, max_turns=1)


@pytest.mark.parametrize("api", APIS, ids=lambda api: api.name)
@pytest.mark.filterwarnings("ignore::UserWarning:pydantic")  # the SDKs dump what they got
@given(data=st.data())
def test_any_reply_reads_as_a_message_or_a_model_error(api: Api, data: st.DataObject) -> None:
    # the reply as the SDK builds it from the body (its ``construct``: nothing is validated,
    # a body that is not an object is handed on as it is), then read, then recorded
    payload_name = data.draw(st.sampled_from(NAMES[api.name]), label="payload")
    value = json.loads(dumps(edited(load(api.name, payload_name), data, READABLE)))
    read, built = READERS[api.name]
    try:
        reply = built.construct(**value) if isinstance(value, dict) else value
    except OverflowError:
        # the SDK's construct itself fails on an integer too large for a float field (its
        # own float(int)): such a body raises inside the SDK's create(), before any reader
        # of ours sees a reply (the turn is recorded as failed and the error goes on)
        reject()
    try:
        first: ModelMessage | ModelError = read(reply, ToolNames(t.name for t in TOOLS))
    except ModelError as exc:
        first = exc
    trio.run(recorded, first)


@pytest.mark.parametrize("api", APIS, ids=lambda api: api.name)
@pytest.mark.filterwarnings("ignore::UserWarning:pydantic")
@settings(max_examples=max(10, settings.default.max_examples // 5))  # a fifth: each is slow
@given(data=st.data())
def test_whatever_the_provider_sends_through_the_sdk_the_log_stays_whole(
        api: Api, data: st.DataObject) -> None:
    # the whole way: HTTP, the SDK's parsing and its stream helpers, the adapter, the session
    streamed = data.draw(st.booleans(), label="streamed")
    if streamed:
        found = events(api.name, data.draw(st.sampled_from(["stream_call", "stream_final"])))
        index = data.draw(st.integers(0, len(found) - 1), label="event")
        found[index] = (found[index][0], edited(found[index][1], data))
        reply = stream(found)
    elif data.draw(st.integers(0, 4), label="cut") == 0:  # the body cut short
        text = dumps(load(api.name, data.draw(st.sampled_from(NAMES[api.name]))))
        reply = Reply(body=text[:data.draw(st.integers(0, len(text) - 1))].encode())
    else:
        reply = body(edited(load(api.name, data.draw(st.sampled_from(NAMES[api.name]))), data))
    # one turn is enough: whether the calls run, and the session then goes on, is what counts
    outcome, _ = trio.run(partial(attempt, api, reply, streamed=streamed, max_turns=1))
    assert isinstance(outcome, (PromptResult, ModelError))
