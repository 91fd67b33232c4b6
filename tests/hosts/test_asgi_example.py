"""The Starlette example of docs/hosts.md (examples/asgi_app.py), served in-process through
httpx's ASGI transport: a prompt that pauses for approval, the approval endpoint that
answers it and resumes, and the errors a client can cause."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx

from engine import Annotations, ToolResult, text, tool
from engine.models import FauxModel, faux_text, faux_tool_call
from events import JsonlStore
from examples.asgi_app import create_app


@tool(input_schema={"type": "object", "properties": {"path": {"type": "string"}},
                    "required": ["path"]},
      annotations=Annotations(destructive=True))
async def delete_file(call: Any, ctx: Any) -> ToolResult:
    """A stand-in: deletes nothing."""
    return ToolResult(content=[text(f"deleted {call.arguments['path']}")])


def test_the_app_prompts_pauses_for_approval_and_resumes_when_approved(tmp_path: Path) -> None:
    model = FauxModel([faux_tool_call("delete_file", {"path": "notes.md"}),
                       faux_text("notes.md is gone"), faux_text("nothing else")])
    store = JsonlStore(tmp_path / "sessions.jsonl")
    app = create_app(store, model_for=lambda session_id: model, tools=[delete_file])

    async def client_side() -> None:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://app") as client:
            started = (await client.post("/sessions", json={"text": "delete notes.md"})).json()
            assert started["stop"] == "paused"
            assert started["pending"] == [{
                "call_id": "1.0", "name": "delete_file", "arguments": {"path": "notes.md"},
                "reason": started["pending"][0]["reason"]}]
            sid = started["session_id"]

            early = await client.post(f"/sessions/{sid}/prompt", json={"text": "and?"})
            assert early.status_code == 409 and "paused" in early.json()["error"]

            done = (await client.post(f"/sessions/{sid}/approvals/1.0",
                                      json={"granted": True})).json()
            assert (done["stop"], done["text"], done["pending"]) == (
                "end_turn", "notes.md is gone", [])

            again = await client.post(f"/sessions/{sid}/approvals/1.0", json={"granted": True})
            assert again.status_code == 409 and "not waiting" in again.json()["error"]
            more = (await client.post(f"/sessions/{sid}/prompt", json={"text": "else?"})).json()
            assert more["text"] == "nothing else"

            missing = await client.post("/sessions/nope/prompt", json={"text": "hi"})
            assert missing.status_code == 404

    asyncio.run(client_side())
    model.assert_complete()
    store.close()


def test_the_app_answers_404_for_an_unknown_call_and_500_for_its_own_bugs(
        tmp_path: Path) -> None:
    """Only the errors a client can cause are 4xx: a ``ValueError`` or ``RuntimeError`` of
    the app's own is a 500, not hidden as a conflict."""
    model = FauxModel([faux_tool_call("delete_file", {"path": "notes.md"})])
    store = JsonlStore(tmp_path / "sessions.jsonl")

    def model_for(session_id: str | None) -> FauxModel:
        if session_id == "broken":
            raise ValueError("a bug in the app's configuration")
        return model

    app = create_app(store, model_for=model_for, tools=[delete_file])

    async def client_side() -> None:
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://app") as client:
            started = (await client.post("/sessions", json={"text": "delete notes.md"})).json()
            sid = started["session_id"]
            unknown = await client.post(f"/sessions/{sid}/approvals/9.9",
                                        json={"granted": True})
            assert unknown.status_code == 404 and "9.9" in unknown.json()["error"]
            bug = await client.post("/sessions/broken/prompt", json={"text": "hi"})
            assert bug.status_code == 500

    asyncio.run(client_side())
    store.close()
