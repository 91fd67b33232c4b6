"""Questions over MCP, both ways, with the official SDK's client and server.

Served: a tool's ``ctx.ask`` becomes an elicitation request to the client that made the call,
if it declared the capability (else the tool reads a decline that says why), and the answer is
recorded. Mounted: a server's elicitation during a call is put to the session's asker as the
call's question, recorded, and the answer goes back to the server.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types
from mcp import Client
from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel

from engine import (
    LATER,
    Annotations,
    Answer,
    Question,
    Session,
    ToolResult,
    approve_all,
    text,
    tool,
)
from engine.hosts.aio import Session as AioSession
from engine.mcp import mcp_server, mount
from engine.mcp.questions import NO_ELICITATION
from engine.testing.invariants import check_log
from events import MemoryStore
from events.types import QuestionAnswered, QuestionAsked

SAFE = Annotations(read_only=True, open_world=False)
FORM = {"type": "object", "properties": {"branch": {"type": "string", "title": "Branch"}},
        "required": ["branch"]}


@tool(annotations=SAFE)
async def deploy(call: Any, ctx: Any) -> ToolResult:
    """Deploy the branch the person names."""
    answer = await ctx.ask("Which branch?", FORM)
    if not answer.accepted:
        return ToolResult(content=[text(f"not deployed: {answer.action} ({answer.reason})")])
    return ToolResult(content=[text(f"deployed {answer.content['branch']}")])


@tool(annotations=SAFE)
async def release(call: Any, ctx: Any) -> ToolResult:
    """Deploy, as a nested call."""
    outcome = await ctx.execute_tool("deploy")
    return ToolResult(content=[text(f"released: {outcome.result.text}")])


class Elicitor:
    """A client's elicitation callback, and what it was asked."""

    def __init__(self, action: str = "accept", content: dict[str, Any] | None = None) -> None:
        self.asked: list[tuple[str, Any]] = []
        self.action = action
        self.content = content

    async def __call__(self, context: Any, params: Any) -> types.ElicitResult:
        self.asked.append((params.message, params.requested_schema))
        return types.ElicitResult(action=self.action, content=self.content)  # type: ignore[arg-type]


def answers(records: Any) -> list[QuestionAnswered]:
    return [r.event for r in records if isinstance(r.event, QuestionAnswered)]


# -- served ---------------------------------------------------------------------------------


async def test_a_served_tools_question_is_an_elicitation_to_the_client_that_called() -> None:
    asked_session: list[Question] = []

    async def session_asker(question: Question) -> Answer:  # never asked: the client is
        asked_session.append(question)
        return Answer(action="decline")

    async with Session.open(MemoryStore(), tools=[deploy, release],
                            asker=session_asker) as session:
        elicitor = Elicitor(content={"branch": "main"})
        async with Client(mcp_server(session), elicitation_callback=elicitor,
                              mode="legacy") as client:
            result = await client.call_tool("release", {})
        assert not result.is_error
        assert result.content[0].text == "released: deployed main"  # type: ignore[union-attr]
        assert elicitor.asked == [("Which branch?", FORM)]
        assert asked_session == []
        [answer] = answers(session.records)
        assert (answer.question_id, answer.action, answer.content) == (
            "h0/0#1", "accept", {"branch": "main"})
        check_log(session.records)


async def test_a_client_that_declines_or_cancels_is_recorded_so() -> None:
    async with Session.open(MemoryStore(), tools=[deploy]) as session:
        for action in ("decline", "cancel"):
            async with Client(mcp_server(session),
                              elicitation_callback=Elicitor(action), mode="legacy") as client:
                result = await client.call_tool("deploy", {})
            assert result.content[0].text == f"not deployed: {action} (None)"  # type: ignore[union-attr]
        assert [a.action for a in answers(session.records)] == ["decline", "cancel"]


async def test_a_client_without_the_capability_is_not_asked_and_the_tool_reads_why() -> None:
    async with Session.open(MemoryStore(), tools=[deploy]) as session:
        async with Client(mcp_server(session)) as client:  # no callback: no capability
            result = await client.call_tool("deploy", {})
        assert result.content[0].text == (  # type: ignore[union-attr]
            f"not deployed: decline ({NO_ELICITATION})")
        [answer] = answers(session.records)
        assert answer.reason == NO_ELICITATION


async def test_an_asyncio_served_session_puts_questions_to_its_client() -> None:
    import asyncio

    async def main() -> None:
        async with AioSession.open(MemoryStore(), tools=[deploy]) as session:
            elicitor = Elicitor(content={"branch": "v2"})
            async with Client(mcp_server(session), elicitation_callback=elicitor,
                              mode="legacy") as client:
                result = await client.call_tool("deploy", {})
            assert result.content[0].text == "deployed v2"  # type: ignore[union-attr]

    await _in_asyncio(asyncio, main)


async def _in_asyncio(asyncio: Any, main: Any) -> None:
    import trio

    await trio.to_thread.run_sync(asyncio.run, main())


# -- mounted --------------------------------------------------------------------------------


class Target(BaseModel):
    branch: str
    force: bool = False


def asking_server() -> MCPServer:
    server = MCPServer("asker", version="1.0")

    @server.tool(annotations=types.ToolAnnotations(read_only_hint=True))
    async def choose(ctx: Context) -> str:
        """Ask which branch."""
        result = await ctx.elicit("Which branch, from the server?", Target)
        if result.action == "accept":
            return f"chose {result.data.branch} force={result.data.force}"
        return f"no choice: {result.action}"

    return server


async def test_a_mounted_servers_elicitation_is_the_calls_question_for_the_sessions_asker(
) -> None:
    asked: list[Question] = []

    async def asker(question: Question) -> Answer:
        asked.append(question)
        return Answer(action="accept", content={"branch": "main", "force": True})

    async with Session.open(MemoryStore(), asker=asker, approver=approve_all) as session:
        async with mount(session, asking_server(), trust_hints=True,
                         client_options={"mode": "legacy"}):
            outcome = await session.call_tool("choose", {})
        assert outcome.result.text == "chose main force=True"
        [question] = asked
        assert (question.question_id, question.message) == ("h0#1",
                                                            "Which branch, from the server?")
        assert set(question.schema["properties"]) == {"branch", "force"}
        asked_events = [r.event for r in session.records if isinstance(r.event, QuestionAsked)]
        assert [e.call_id for e in asked_events] == ["h0"]
        assert [a.action for a in answers(session.records)] == ["accept"]
        check_log(session.records)


async def test_a_mounted_servers_question_can_wait_for_the_host() -> None:
    async def later(question: Question) -> Any:
        return LATER

    async with Session.open(MemoryStore(), asker=later, approver=approve_all) as session:
        async with mount(session, asking_server(), trust_hints=True,
                         client_options={"mode": "legacy"}):
            import trio

            async with trio.open_nursery() as nursery:
                outcomes: list[Any] = []

                async def call() -> None:
                    outcomes.append(await session.call_tool("choose", {}))

                nursery.start_soon(call)
                [waiting] = await session.wait_pending_questions()
                await session.answer_question(waiting.question_id, "decline")
        assert outcomes[0].result.text == "no choice: decline"
        [answer] = answers(session.records)
        assert answer.later is True
