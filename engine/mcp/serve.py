"""Serve a session's tools as an MCP server, with the official SDK's low-level ``Server``.

Every ``tools/call`` is a host call (:meth:`engine.Session.call_tool`): it takes the path a
model's call takes (availability, input validation, the ``tool_call`` handlers, the policy, the
approver, the body, the output check, the ``tool_result`` handlers) and is recorded the same
way, under the id ``"h{n}"``. So a served tool is governed and logged like any other, and an
MCP client sees what the log holds:

- ``tools/list`` lists the tools the host may call now (exposure decides: direct and
  model-only tools while active, codemode and deferred ones always, hidden ones never), each
  declared as registered: name, title, description, input and output schemas, annotations,
  under MCP's wire names (:func:`engine.mcp.formats.tool_to_mcp`);
- a call's result carries ``content``, ``structuredContent`` and ``isError``; a tool that
  failed, was blocked, denied or timed out is an error *result* the client reads, as MCP asks;
- a tool the listing does not hold is a protocol error (``-32602``, "Unknown tool"), and
  nothing is recorded: the client asked for what it was not offered;
- a call whose approval the approver leaves for later waits, and the client with it, until the
  host answers (:meth:`engine.Session.resolve_approval`; a person in another process answers
  through :mod:`engine.hosts.approvalsocket`, ``toolledger serve --approvals``); cancelling
  the request (the client gave up) ends the call as cancelled.
- a client that sends a progress token gets the call's progress updates as
  ``notifications/progress`` (:mod:`engine.mcp.progress` says how an update maps to one);
- a question the call's tool (or one of its nested calls) asks (``ctx.ask``) is put to the
  client that made the call as an elicitation request, if it declared the capability, else
  declined saying so (:mod:`engine.mcp.questions`); the answer is recorded as any answer. A
  client of MCP 2026-07-28 gets it in an input-required result and answers by calling again
  (:mod:`engine.mcp.rounds`): the call waits in this process meanwhile, in a task of the
  server's lifespan, for ``input_timeout`` seconds at most.

Calls run concurrently, each in the server's task for its request. The session is a trio
:class:`engine.Session`, or an :class:`engine.hosts.aio.Session` when the server runs on an asyncio
loop (an ASGI app: :func:`engine.mcp.http_app`, say): the server needs only the session's state
and its ``call_tool``.
"""

from __future__ import annotations

from importlib import metadata
from typing import Any, Protocol

import anyio

from events.types import ToolSnapshot

from ..core.questions import Asker
from ..core.reducers import Projection
from ..core.toolcontext import CallOutcome
from ..core.tools import may_call
from ..runtime.progress import ProgressListener
from ._sdk import mcp, mcp_types
from .formats import result_to_mcp, tool_to_mcp
from .progress import ProgressNotifier
from .questions import ClientAsker
from .rounds import (
    DEFAULT_INPUT_TIMEOUT,
    Rounds,
    asks_in_rounds,
    boundary,
    checked_timeout,
    rounds_lifespan,
)

__all__ = ["Served", "listed_tools", "mcp_server", "serve_stdio"]


class Served(Protocol):
    """What serving needs of a session: :class:`engine.Session` and
    :class:`engine.hosts.aio.Session` both have it."""

    @property
    def state(self) -> Projection: ...

    async def call_tool(self, name: str, arguments: Any = None, *,
                        on_progress: ProgressListener | None = None,
                        asker: Asker | None = None) -> CallOutcome: ...


def listed_tools(session: Served) -> tuple[ToolSnapshot, ...]:
    """The tools an MCP client is offered now: the ones the host may call, in registration
    order."""
    return tuple(snapshot for snapshot in session.state.tools.values()
                 if _offered(session, snapshot))


def _offered(session: Served, snapshot: ToolSnapshot | None) -> bool:
    return snapshot is not None and may_call(
        snapshot.exposure, snapshot.name in session.state.active_tools, "host")


def _version() -> str:
    try:
        return metadata.version("toolledger")
    except metadata.PackageNotFoundError:  # pragma: no cover - run from a checkout
        return "0"


def mcp_server(session: Served, *, name: str = "toolledger", version: str | None = None,
               instructions: str | None = None,
               unasked: Asker | None = None,
               input_timeout: float = DEFAULT_INPUT_TIMEOUT) -> mcp.server.Server[Any]:
    """An MCP ``Server`` (the SDK's low-level one) that serves ``session``'s tools.

    Run it on any transport the SDK has: in memory (``mcp.Client(server)``), over stdio
    (:func:`serve_stdio`), or streamable HTTP (:func:`engine.mcp.http_app`). It calls
    into the open session, so it serves while the session's block runs. ``name`` and
    ``version`` are what the server's handshake says it is (toolledger's own by default).
    ``unasked`` is the asker of the questions a client cannot be asked (it did not declare
    elicitation, or its connection has no back-channel); ``None``, the default, declines
    them saying why. An asker that answers :data:`~engine.LATER` leaves them pending for
    ``session.answer_question`` (``toolledger serve --approvals`` does, for its socket).
    ``input_timeout`` is how many seconds a call whose question went to a client of MCP
    2026-07-28 waits for the client to call again with the answer
    (:mod:`engine.mcp.rounds`): then the question is cancelled.
    """
    input_timeout = checked_timeout(input_timeout)

    async def list_tools(ctx: Any, params: mcp_types.PaginatedRequestParams | None,
                         ) -> mcp_types.ListToolsResult:
        return mcp_types.ListToolsResult(
            tools=[tool_to_mcp(snapshot) for snapshot in listed_tools(session)])

    async def call_tool(ctx: Any, params: mcp_types.CallToolRequestParams,
                        ) -> mcp_types.CallToolResult | mcp_types.InputRequiredResult:
        if not _offered(session, session.state.tools.get(params.name)):
            raise mcp.MCPError(code=mcp_types.INVALID_PARAMS,
                               message=f"Unknown tool: {params.name}")
        rounds: Rounds = ctx.lifespan_context
        if params.request_state is not None:  # a retry with an answer (MCP 2026-07-28)
            return await rounds.resume(ctx, params.request_state, params.input_responses)
        if asks_in_rounds(ctx):
            return await rounds.start(ctx, lambda asker, heard: session.call_tool(
                params.name, params.arguments or {}, on_progress=heard, asker=asker))
        async with anyio.create_task_group() as sending:  # every update sent before the result
            notifier = ProgressNotifier(ctx, sending)
            try:
                outcome = await session.call_tool(params.name, params.arguments or {},
                                                  on_progress=notifier.heard,
                                                  asker=ClientAsker(ctx, unasked))
            finally:
                notifier.close()
        return result_to_mcp(outcome.result)

    def input_schema(tool: str) -> dict[str, Any] | None:
        # asked on streamable HTTP before each call (MCP's parameter headers), which would
        # otherwise list every tool to find one
        snapshot = session.state.tools.get(tool)
        return None if snapshot is None else snapshot.input_schema

    server: mcp.server.Server[Any] = mcp.server.Server(
        name, version=version or _version(), instructions=instructions,
        lifespan=lambda server: rounds_lifespan(input_timeout),
        get_tool_input_schema=input_schema, on_list_tools=list_tools, on_call_tool=call_tool)
    server.middleware.append(boundary(name, input_timeout))  # seals each requestState
    return server


async def serve_stdio(session: Served, **options: Any) -> None:
    """Serve ``session``'s tools over this process's stdin and stdout until the client closes
    them; ``options`` go to :func:`mcp_server`.

    A client that goes away with calls in flight (its process ended, say) closes both pipes:
    its calls end as cancelled, and the answers the SDK still writes to it meet a broken pipe.
    That is the end of serving, not an error: nobody is left to tell."""
    server = mcp_server(session, **options)
    try:
        async with mcp.stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())
    except* BrokenPipeError:
        pass

