"""The agent app of docs/hosts.md (examples/agent_app.py), served by uvicorn under asyncio
on a free loopback port, as a user would run it: its model is the official OpenAI SDK against
a local server that answers with recorded Chat Completions payloads, it mounts the units
server (examples/units_server.py) over stdio in a process of its own, and an official MCP
client calls the same session's tools over streamable HTTP."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import httpx
import trio
from mcp import Client, StdioServerParameters
from mcp_http_clients import uvicorn_serving

from engine import fold
from events import JsonlStore
from examples.agent_app import create_app
from tests.models.server import PAYLOADS, Reply, payload, serving_in_thread

ROOT = Path(__file__).parents[2]
UNITS = StdioServerParameters(command=sys.executable, args=["-m", "examples.units_server"],
                              cwd=str(ROOT))


def calls(*wanted: tuple[str, dict[str, Any]]) -> Reply:
    """A Chat Completions reply whose message asks for ``wanted`` tool calls, in order."""
    body = json.loads((PAYLOADS / "chat" / "tool_call.json").read_bytes())
    body["choices"][0]["message"]["tool_calls"] = [
        {"id": f"call_{n}", "type": "function",
         "function": {"name": name, "arguments": json.dumps(arguments)}}
        for n, (name, arguments) in enumerate(wanted)]
    return Reply(body=json.dumps(body).encode())


def test_the_agent_app_prompts_through_the_sdk_mounts_over_stdio_and_serves_over_http(
        tmp_path: Path) -> None:
    replies = [calls(("units_convert", {"value": 5, "from_unit": "km", "to_unit": "m"}),
                     ("word_count", {"text": "five kilometres"}),
                     ("units_delete", {})),
               payload("chat", "final_text")]
    store = JsonlStore(tmp_path / "agent.jsonl")

    async def main(base_url: str) -> dict[str, Any]:
        app = create_app(store, client_options={"base_url": base_url, "api_key": "test",
                                                "max_retries": 0},
                         units_server=UNITS)
        async with uvicorn_serving(app, "") as url:
            # a guard against a hang, never a measure: a busy machine may take seconds
            async with httpx.AsyncClient(base_url=url, timeout=120) as http:
                asked = (await http.post("/ask", json={"text": "5 km in metres?"})).json()
            async with Client(f"{url}/mcp") as client:
                listed = sorted(tool.name for tool in (await client.list_tools()).tools)
                converted = await client.call_tool(
                    "units_convert", {"value": 1, "from_unit": "mi", "to_unit": "km"})
                counted = await client.call_tool("word_count", {"text": "a b c"})
        return {"asked": asked, "listed": listed, "converted": converted, "counted": counted}

    # uvicorn_serving fails if the lifespan raised: the session closed, the mount's server
    # process ended and the SDK's client closed on the loop that opened it
    with serving_in_thread(replies, keep_alive=True) as provider:
        seen = asyncio.run(main(provider.url + "/v1"))

    # the model's calls, over the SDK: the mounted tool and the app's ran, the unknown did not
    assert seen["asked"] == {"text": "done", "stop": "end_turn", "calls": [
        {"id": "1.0", "tool": "units_convert", "status": "completed"},
        {"id": "1.1", "tool": "word_count", "status": "completed"},
        {"id": "1.2", "tool": "units_delete", "status": "failed"}]}
    sent = provider.bodies
    assert sorted(tool["function"]["name"] for tool in sent[0]["tools"]) == [
        "units_convert", "word_count"]
    results = {message["tool_call_id"]: message["content"]
               for message in sent[1]["messages"] if message["role"] == "tool"}
    assert results == {"call_0": "5000.0", "call_1": "2",
                       "call_2": "Error: Tool units_delete is not available"}

    # another agent, over MCP's streamable HTTP: the same session's tools
    assert seen["listed"] == ["units_convert", "word_count"]
    assert seen["converted"].structured_content == {"result": 1.609344}
    assert seen["counted"].structured_content == {"result": 3}

    # one log holds both, ended and verified
    async def logged() -> tuple[list[Any], bool]:
        [session_id] = await store.sessions()
        return await store.read(session_id), (await store.verify()).ok

    log, verified = trio.run(logged)
    state = fold(log)
    assert [(call.call_id, call.name, call.origin, call.status)
            for call in state.calls.values()] == [
        ("1.0", "units_convert", "model", "completed"),
        ("1.1", "word_count", "model", "completed"),
        ("1.2", "units_delete", "model", "failed"),
        ("h0", "units_convert", "host", "completed"),
        ("h1", "word_count", "host", "completed")]
    assert state.open_calls == () and verified
    store.close()
