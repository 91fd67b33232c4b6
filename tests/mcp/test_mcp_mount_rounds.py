"""A mounted server that asks on MCP 2026-07-28 (the official client's default): its
input-required result's elicitation is put to the session's asker as the mounted call's
question and recorded, and the answer goes back in the client's retry. The server
(tests/mcp_asking.py) runs in memory, in a subprocess over stdio, and over streamable HTTP.
Several calls at once each get their own questions; on the handshake's protocol over stdio the
old rule holds (several at once: declined)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio
from mcp import StdioServerParameters
from mcp_asking import asking_server

from engine import Answer, Question, Session, approve_all
from engine.mcp import mount
from engine.testing.invariants import check_log
from events import MemoryStore
from events.types import QuestionAnswered, QuestionAsked
from tests.mcp.serverurl import server_url

SERVER = Path(__file__).resolve().parents[1] / "mcp_asking.py"


class Asker:
    """The session's asker: accepts with content naming the call, and keeps what it was
    asked. ``together`` holds each answer until that many questions wait at once."""

    def __init__(self, together: int = 1) -> None:
        self.asked: list[Question] = []
        self._together = together
        self._all_here = trio.Event()

    async def __call__(self, question: Question) -> Answer:
        self.asked.append(question)
        if len(self.asked) >= self._together:
            self._all_here.set()
        await self._all_here.wait()
        if "branch" in question.schema["properties"]:
            return Answer(action="accept", content={"branch": f"for-{question.call_id}"})
        return Answer(action="accept", content={"sure": True})


def events_of(session: Session, kind: type) -> list[Any]:
    return [r.event for r in session.records if isinstance(r.event, kind)]


@asynccontextmanager
async def served_over(transport: str) -> AsyncIterator[Any]:
    """The asking server as ``mount`` takes it: in memory, a subprocess over stdio, or a
    subprocess over streamable HTTP (its URL)."""
    if transport == "memory":
        yield asking_server()
    elif transport == "stdio":
        yield StdioServerParameters(command=sys.executable, args=[str(SERVER)])
    else:
        async with trio.open_nursery() as nursery:
            process = await nursery.start(partial(
                trio.run_process, [sys.executable, str(SERVER), "http"],
                stderr=subprocess.PIPE, check=False))
            try:
                yield await server_url(process) + "/mcp"
            finally:
                process.terminate()


@pytest.mark.parametrize("transport", ["memory", "stdio", "http"])
async def test_a_mounted_servers_rounds_are_the_calls_questions(transport: str) -> None:
    asker = Asker()
    async with Session.open(MemoryStore(), asker=asker, approver=approve_all) as session:
        async with served_over(transport) as server:
            async with mount(session, server, trust_hints=True):
                once = await session.call_tool("choose", {"tag": "a"})
                twice = await session.call_tool("choose_twice", {"tag": "b"})
        assert once.result.text == "a: branch=for-h0"
        assert twice.result.text == "b: branch=for-h1 / sure=True"
        assert [(q.question_id, q.message) for q in asker.asked] == [
            ("h0#1", "Which branch?"), ("h1#1", "Which branch?"),
            ("h1#2", "Deploy for-h1?")]  # the second round asks after the first's answer
        assert [e.call_id for e in events_of(session, QuestionAsked)] == ["h0", "h1", "h1"]
        assert [(a.question_id, a.action) for a in events_of(session, QuestionAnswered)] == [
            ("h0#1", "accept"), ("h1#1", "accept"), ("h1#2", "accept")]
        check_log(session.records)


async def test_several_calls_at_once_each_get_their_own_questions() -> None:
    asker = Asker(together=3)  # no answer until all three calls have asked
    outcomes: dict[str, Any] = {}
    async with Session.open(MemoryStore(), asker=asker, approver=approve_all) as session:
        async with mount(session, asking_server(), trust_hints=True):
            async def call(tag: str) -> None:
                outcomes[tag] = await session.call_tool("choose", {"tag": tag})

            async with trio.open_nursery() as nursery:
                for tag in "xyz":
                    nursery.start_soon(call, tag)
        texts = {tag: outcome.result.text for tag, outcome in outcomes.items()}
        calls = {outcome.call_id: tag for tag, outcome in outcomes.items()}
        assert sorted(q.call_id for q in asker.asked) == sorted(calls)
        # each call read the answer its own question got
        assert texts == {tag: f"{tag}: branch=for-{call_id}" for call_id, tag in calls.items()}
        for event in events_of(session, QuestionAsked):
            assert event.question_id == f"{event.call_id}#1"
        check_log(session.records)


async def test_on_the_handshakes_protocol_several_calls_at_once_are_still_declined() -> None:
    asker = Asker()
    outcomes: list[Any] = []
    pairing = StdioServerParameters(command=sys.executable, args=[str(SERVER), "pairing"])
    async with Session.open(MemoryStore(), asker=asker, approver=approve_all) as session:
        async with mount(session, pairing, trust_hints=True,
                         client_options={"mode": "legacy"}):
            async def call() -> None:
                outcomes.append(await session.call_tool("pick", {}))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(call)
                nursery.start_soon(call)
        # the server asks only once both calls are in its tool: nothing links its first
        # request to one of them, so it is declined, not guessed
        texts = [outcome.result.text for outcome in outcomes]
        assert "decline" in texts
        picked = [text for text in texts if text != "decline"]
        assert [f"picked for-{q.call_id}" for q in asker.asked] == picked
        check_log(session.records)
