"""Questions over MCP, both ways: a tool's ``ctx.ask`` and MCP's elicitation (form mode).

**Served** (:class:`ClientAsker`): a served ``tools/call`` is a host call whose questions go to
the client that made it (``call_tool(..., asker=...)``): each becomes an
``elicitation/create`` request (the question's message and form as ``requestedSchema``), and
the client's answer (accept with content, decline, cancel) is recorded as any answer. A client
of the handshake's protocol (``mode="legacy"``) is sent the request on the call's own request;
a client of MCP 2026-07-28 has no such back-channel and is asked in rounds instead
(:mod:`engine.mcp.rounds`). A client that did not declare the elicitation capability cannot be
asked, nor a handshake's client whose connection has no back-channel (JSON-only HTTP
responses): the question is declined at once, with a reason that says so, and the tool reads
it. A client whose answer cannot be had (it went away, it answered with an error) cancels the
question, with the error recorded (fail closed).

**Mounted** (:class:`Elicited`): a mounted server's elicitation request during a call of one
of its tools is put to the session's asker as that call's question (``ctx.ask``), recorded,
and the answer goes back to the server. Which call it is: on MCP 2026-07-28 the server asks in
an input-required result of the call's own request, and the client's ``call_tool`` runs the
callback in the call's task, so each of several calls at once gets its own questions. On the
handshake's protocol the request arrives on the connection's task, with no link to the call
it belongs to, so it is the call of that server running now; while several run at once, or
none, the request is declined (nothing is asked on a guess). A request whose form
is not one a question may have (:mod:`engine.core.forms`) is declined too.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from ..core.questions import Answer, Asker, Question, Reply
from ..core.schemas import SchemaError
from ..core.toolcontext import ToolContext
from ._sdk import NoBackChannelError
from ._sdk import mcp_types

__all__ = ["NO_BACK_CHANNEL", "NO_ELICITATION", "ClientAsker", "Elicited"]

#: The mounted call whose task runs now (:meth:`Elicited.running`), by its token (0: none).
_CALLING: ContextVar[int] = ContextVar("engine.mcp.calling", default=0)

#: Why a served question is declined when the client cannot be asked.
NO_ELICITATION = ("the MCP client cannot answer questions: it did not declare the "
                  "elicitation capability")
#: Why it is declined when the connection cannot carry the request to the client.
NO_BACK_CHANNEL = ("the MCP connection cannot carry a question to the client: it has no "
                   "back-channel for requests from the server (JSON-only or stateless HTTP "
                   "responses to a client of the handshake's protocol); a client of MCP "
                   "2026-07-28 is asked in rounds instead")


class ClientAsker:
    """The asker of one served ``tools/call``: the client that made it (see the module's
    docstring). ``request`` is the SDK's context of the request. ``otherwise`` answers the
    questions the client cannot be asked (an asker; one that says
    :data:`~engine.core.approvals.LATER` leaves them for the host, ``session.answer_question``);
    ``None``: they are declined, saying why."""

    def __init__(self, request: Any, otherwise: Asker | None = None) -> None:
        self._request = request
        self._otherwise = otherwise

    async def __call__(self, question: Question) -> Reply:
        session = self._request.session
        able = session.check_client_capability(mcp_types.ClientCapabilities(
            elicitation=mcp_types.ElicitationCapability()))
        if not able:
            return await self._instead(question, NO_ELICITATION)
        try:
            result = await session.elicit_form(
                message=question.message, requested_schema=dict(question.schema),
                related_request_id=self._request.request_id)
        except NoBackChannelError:
            return await self._instead(question, NO_BACK_CHANNEL)
        if result.action == "accept":
            return Answer(action="accept", content=dict(result.content or {}))
        return Answer(action=result.action)

    async def _instead(self, question: Question, why: str) -> Reply:
        """The answer of ``otherwise`` to a question the client cannot be asked (``why``)."""
        if self._otherwise is None:
            return Answer(action="decline", reason=why)
        reply = self._otherwise(question)
        if inspect.isawaitable(reply):
            reply = await reply
        return reply


class Elicited:
    """The elicitation callback of one mount's client: each request goes to the running call
    of the mount's tools it belongs to, as its question (see the module's docstring). A call
    registers itself with :meth:`running` while it is in flight."""

    def __init__(self, server: str) -> None:
        self._server = server
        self._calls: dict[int, ToolContext] = {}
        self._next = 0

    @contextmanager
    def running(self, ctx: ToolContext) -> Iterator[None]:
        """``ctx``'s call of the server is in flight for the block, in this task: what the
        client asks in the task's context (MCP 2026-07-28's input rounds, which the client's
        ``call_tool`` runs itself) is the call's."""
        self._next += 1
        token = self._next
        self._calls[token] = ctx
        calling = _CALLING.set(token)
        try:
            yield
        finally:
            _CALLING.reset(calling)
            self._calls.pop(token, None)

    def _asking(self) -> ToolContext | None:
        """The call an elicitation request belongs to: the one whose task asks (a round of
        MCP 2026-07-28), else the only one running (the handshake's protocol, where requests
        arrive on the connection's own task), else none."""
        found = self._calls.get(_CALLING.get())
        if found is not None:
            return found
        if len(self._calls) == 1:
            (only,) = self._calls.values()
            return only
        return None

    async def __call__(self, context: Any, params: Any) -> mcp_types.ElicitResult:
        schema = getattr(params, "requested_schema", None)
        if schema is None:  # URL mode: nothing a form can hold
            return mcp_types.ElicitResult(action="decline")
        ctx = self._asking()
        if ctx is None:
            return mcp_types.ElicitResult(action="decline")  # no one call to ask for
        if hasattr(schema, "model_dump"):
            schema = schema.model_dump(by_alias=True, mode="json", exclude_none=True)
        try:
            answer = await ctx.ask(str(params.message), schema)
        except SchemaError:
            return mcp_types.ElicitResult(action="decline")  # not a form a question may have
        if answer.accepted:
            return mcp_types.ElicitResult(action="accept", content=dict(answer.content or {}))
        return mcp_types.ElicitResult(action=answer.action)
