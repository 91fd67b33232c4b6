"""The OpenAI (Chat Completions, Responses) and Anthropic adapters, through the official SDKs,
against recorded payloads served on loopback (tests/models/server.py): each scenario runs
for each of the three APIs."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
import trio

from engine import Session, approve_all, fold
from engine.models import ModelDelta, ModelError
from engine.replay import redrive
from events import MemoryStore, Record
from events.modelturns import ModelFailed, ModelRequested, ModelResponded, Usage
from events.types import AssistantMessage, ToolCallCompleted, ToolCallFailed
from tests.models.apis import APIS, Api, prompted
from tests.models.server import ReplayServer, Reply, payload, serving
from tests.models.tools import TOOLS

pytestmark = pytest.mark.parametrize("api", APIS, ids=lambda api: api.name)

SYSTEM = "You look things up."
RETRY_NOW = (("retry-after-ms", "1"),)  # what the providers send, shortened


def of(records: Sequence[Record], kind: type[Any]) -> list[Any]:
    return [r.event for r in records if isinstance(r.event, kind)]


async def run(api: Api, replies: Sequence[Reply], *, stream: bool = False,
              **client: Any) -> tuple[ReplayServer, list[Record], Any]:
    """A session prompted once against ``replies``: the server, the log, the prompt's result
    (or the exception it raised)."""
    store = MemoryStore()
    async with serving(replies) as server, api.model(server, stream=stream, **client) as model:
        outcome = await prompted(model, store, system_prompt=SYSTEM)
    return server, await store.read("s"), outcome


async def test_a_tool_call_runs_and_both_turns_are_on_the_record(api: Api) -> None:
    server, records, result = await run(api, [payload(api.name, "tool_call"),
                                              payload(api.name, "final_text")])
    assert result.stop == "end_turn" and result.text == "done"
    assert [r["path"] for r in server.requests] == [api.path, api.path]
    first, second = server.bodies
    assert api.system(first) == SYSTEM
    assert {json.dumps(t, sort_keys=True) for t in api.tools(first)} == {
        json.dumps(t, sort_keys=True) for t in api.tools(second)}
    assert len(api.tools(first)) == 3
    [(call_id, output, is_error)] = api.results(second)
    assert output == "value of a" and not is_error
    assert call_id in {"call_a1", "toolu_a1"}
    [asked, _] = of(records, ModelRequested)
    assert asked.turn == 1 and asked.provider == ("anthropic" if api.name == "anthropic"
                                                  else "openai")
    [answered, _] = of(records, ModelResponded)
    assert answered.response_id in {"chatcmpl-tc1", "resp_tc1", "msg_tc1"}
    assert answered.usage is not None and answered.usage.cached_tokens == 64
    assert answered.usage.input_tokens == 120 and answered.usage.output_tokens == 18
    assert fold(records).usage.output_tokens == 18 + 3


async def test_parallel_calls_run_and_their_results_go_back_in_order(api: Api) -> None:
    server, records, result = await run(api, [payload(api.name, "parallel_calls"),
                                              payload(api.name, "final_text")])
    assert result.text == "done"
    assert sorted(c.result.text for c in of(records, ToolCallCompleted)) == ["value of a",
                                                                              "value of b"]
    results = api.results(server.bodies[1])
    assert [(call_id[-2:], text) for call_id, text, _ in results] == [
        ("a1", "value of a"), ("b2", "value of b")]


async def test_structured_content_goes_to_the_model_as_its_json(api: Api) -> None:
    server, records, _ = await run(api, [payload(api.name, "structured_call"),
                                         payload(api.name, "final_text")])
    [completed] = of(records, ToolCallCompleted)
    assert completed.result.structured_content == {"count": 3}
    [(_, output, is_error)] = api.results(server.bodies[1])
    assert json.loads(output) == {"count": 3} and not is_error


async def test_an_error_result_is_marked_as_one(api: Api) -> None:
    server, records, _ = await run(api, [payload(api.name, "error_call"),
                                         payload(api.name, "final_text")])
    [failed] = of(records, ToolCallFailed)
    assert failed.kind == "raised"
    [(_, output, is_error)] = api.results(server.bodies[1])
    assert is_error and "disk on fire" in output


async def test_a_429_is_retried_by_the_client_and_the_session_never_knows(api: Api) -> None:
    server, records, result = await run(
        api, [payload(api.name, "error_429", status=429, headers=RETRY_NOW),
              payload(api.name, "tool_call"), payload(api.name, "final_text")])
    assert result.text == "done" and len(server.requests) == 3
    assert not of(records, ModelFailed)


async def test_a_500_past_the_retries_is_recorded_and_the_session_resumes(api: Api) -> None:
    store = MemoryStore()
    replies = [payload(api.name, "error_500", status=500, headers=RETRY_NOW)] * 2
    async with serving([*replies, payload(api.name, "final_text")]) as server, \
            api.model(server, max_retries=1) as model:
        async with Session.open(store, model=model, tools=TOOLS, approver=approve_all,
                                session_id="s", create=True) as session:
            with pytest.raises(ModelError) as raised:
                await session.prompt("look up a")
            assert raised.value.kind == "server_error" and raised.value.status == 500
            result = await session.resume()
            assert result.text == "done"
    records = await store.read("s")
    [failed] = of(records, ModelFailed)
    assert failed.kind == "server_error" and failed.status == 500 and failed.turn == 1
    assert "server" in failed.error.message.lower()
    assert [type(r.event).__name__ for r in records[-4:]] == [
        "ModelFailed", "ModelRequested", "ModelResponded", "AssistantMessage"]


async def test_a_timeout_is_recorded_as_one(api: Api) -> None:
    server, records, raised = await run(api, [Reply(hang=True)], max_retries=0, timeout=0.2)
    assert isinstance(raised, ModelError) and raised.kind == "timeout"
    assert [f.kind for f in of(records, ModelFailed)] == ["timeout"]
    assert not of(records, AssistantMessage)


async def test_a_truncated_message_fails_its_calls_unrun(api: Api) -> None:
    server, records, result = await run(api, [payload(api.name, "truncated"),
                                              payload(api.name, "final_text")])
    [failed] = of(records, ToolCallFailed)
    assert failed.kind == "truncated"
    assert not of(records, ToolCallCompleted)
    assert result.text == "done"


async def test_a_stream_reaches_subscribers_and_the_log_gets_the_whole_message(api: Api) -> None:
    store = MemoryStore()
    deltas: list[ModelDelta] = []
    async with serving([payload(api.name, "stream_call"),
                        payload(api.name, "stream_final")]) as server, \
            api.model(server, stream=True) as model:
        async with Session.open(store, model=model, tools=TOOLS, approver=approve_all,
                                session_id="s", create=True) as session:
            async with trio.open_nursery() as nursery, session.deltas() as stream:

                async def watch() -> None:
                    async for delta in stream:
                        deltas.append(delta)

                nursery.start_soon(watch)
                result = await session.prompt("look up a")
                nursery.cancel_scope.cancel()
    assert result.text == "All done."
    assert "".join(d.text for d in deltas if d.kind == "text") == "Let me look.All done."
    arguments = [d for d in deltas if d.kind == "arguments"]
    assert json.loads("".join(d.text for d in arguments)) == {"key": "a"}
    assert {d.name for d in arguments} == {"lookup"} and {d.turn for d in arguments} == {1}
    records = await store.read("s")
    messages = of(records, AssistantMessage)
    assert [m.text for m in messages] == ["Let me look.", "All done."]
    assert messages[0].tool_calls[0].arguments == {"key": "a"}
    assert all(r.stream for r in of(records, ModelRequested))
    assert [u.usage.output_tokens for u in of(records, ModelResponded)] == [20, 4]


async def test_a_stream_cancelled_half_way_leaves_no_half_message(api: Api) -> None:
    store = MemoryStore()
    async with serving([payload(api.name, "stream_call", stall_after=api.first_delta),
                        payload(api.name, "stream_final")]) as server, \
            api.model(server, stream=True) as model:
        async with Session.open(store, model=model, tools=TOOLS, approver=approve_all,
                                session_id="s", create=True) as session:
            async with session.deltas() as stream:
                with trio.CancelScope() as scope:
                    async with trio.open_nursery() as nursery:

                        async def cancel_on_first_delta() -> None:
                            async for _ in stream:
                                scope.cancel()

                        nursery.start_soon(cancel_on_first_delta)
                        await session.prompt("look up a")
            assert scope.cancelled_caught
            await server.dropped.wait()  # the client closed the stream
            records = await store.read("s")
            assert not of(records, AssistantMessage)
            assert [f.kind for f in of(records, ModelFailed)] == ["cancelled"]
            result = await session.resume()
    assert result.text == "All done."


async def test_a_recorded_session_redrives_from_its_model_turns(api: Api) -> None:
    _, records, _ = await run(api, [payload(api.name, "tool_call"),
                                    payload(api.name, "final_text")])
    report = await redrive(records)
    assert report.ok, report.divergences
    def turns(log: Sequence[Record]) -> list[Any]:
        return [r.event for r in log if isinstance(r.event, (ModelRequested, ModelResponded))]
    assert turns(report.replayed) == turns(records)
    assert fold(report.replayed).usage == fold(records).usage == Usage(
        input_tokens=280, output_tokens=21, cached_tokens=64)
