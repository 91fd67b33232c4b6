"""A served call's questions to a client of MCP 2026-07-28: input asked over several rounds.

MCP 2026-07-28 has no request from the server to the client. A server that needs input
answers the ``tools/call`` with an *input-required* result (``inputRequests``, here one
``elicitation/create`` form, and a ``requestState``), and the client asks its person and
calls again, the same tool with the same arguments, carrying the answer
(``inputResponses``) and the state it was given. The official client does that loop itself
(``Client.call_tool``).

The call does not start again on each round: its body keeps waiting in this process, on its
question, as it waits for an answer left for later. :class:`Rounds` holds the calls that wait
between rounds, in a task group of the server's lifespan (so that a call outlives the request
that started it), each under a fresh random token per question. The ``requestState`` names
the token, the call and the question, and the SDK's :class:`RequestStateBoundary` seals it
(encrypted and authenticated under a key of this process, bound to the tool, its arguments
and an expiry), so a client can neither read nor forge it. A retry:

- whose state the boundary refuses (forged, altered, expired, for another tool or other
  arguments, or from another server process) gets the SDK's protocol error
  (``-32602``, "Invalid or expired requestState");
- whose token waits no more (the question was answered by an earlier retry, its wait ran
  out, or its call ended) gets :data:`NOT_WAITING` (``-32602``);
- that carries no answer to the question (``inputResponses`` has no ``elicitation/create``
  result under the question's key) gets :data:`NO_ANSWER` (``-32602``), and the question
  still waits;

and in each case nothing is recorded. The answer is recorded as any client's answer
(``question_answered``: content that does not fit the form cancels the question, with the
error recorded), and the retry waits for what comes next: another question (another round),
or the call's result. A client that never calls again does not hold the call forever: after
``timeout`` seconds (the state's lifetime) the question is cancelled, with :data:`NO_RETRY`
as its reason, the tool reads that and goes on, and every later question of the call is
cancelled at once, since nobody will take it; the result stays in the log. When the serving
ends (the client's connection over stdio or in memory, an HTTP server that stops), a call
still waiting is cancelled, as a call in flight is.

A round's progress updates go to the client that sent that round's request with a progress
token (:mod:`engine.mcp.progress`); the updates a call reports between rounds, while no
request of it is open, stay in the log.
"""

from __future__ import annotations

import json
import math
import secrets
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp_types.version import is_version_at_least

from events.types import ToolProgress

from ..core.questions import Answer, Question
from ..core.toolcontext import CallOutcome
from ._sdk import mcp, mcp_types
from .formats import result_to_mcp
from .progress import ProgressNotifier

__all__ = ["DEFAULT_INPUT_TIMEOUT", "NOT_WAITING", "NO_ANSWER", "NO_RETRY", "Rounds",
           "asks_in_rounds", "boundary", "checked_timeout", "rounds_lifespan"]

#: How long a served call waits, by default, for the client's next round (seconds).
DEFAULT_INPUT_TIMEOUT = 600.0
#: The first protocol version whose requests ask for input in rounds.
INPUT_REQUIRED_VERSION = "2026-07-28"
#: Why a question is cancelled when its client did not call again in time.
NO_RETRY = ("the MCP client did not call again with an answer within {timeout:g} s "
            "(MCP 2026-07-28's input rounds)")
#: The error of a retry whose question waits no more.
NOT_WAITING = ("the requestState names question {question} of call {call}, which waits for "
               "no answer now: an earlier retry answered it, its wait ran out, or its call "
               "ended; call the tool again, without requestState, to start a new call")
#: The error of a retry that carries no answer to the question its state names.
NO_ANSWER = ("the retry carries no answer to question {question} of call {call}: give the "
             "elicitation/create result (action accept, decline or cancel) under "
             "inputResponses[{key!r}], with the requestState as it was sent")

#: What a request of a call answers: the call's result, or its next question.
Step = mcp_types.CallToolResult | mcp_types.InputRequiredResult
#: Starts a served call: ``start(asker, on_progress)`` returns its outcome.
Start = Callable[[Callable[[Question], Awaitable[Answer]], Callable[[ToolProgress], None]],
                 Awaitable[CallOutcome]]


def asks_in_rounds(request: Any) -> bool:
    """Whether the client of ``request`` (the SDK's request context) is asked for input in
    rounds: it speaks MCP 2026-07-28 or later and declared the elicitation capability."""
    version = getattr(request, "protocol_version", None)
    if not (isinstance(version, str) and is_version_at_least(version, INPUT_REQUIRED_VERSION)):
        return False
    return bool(request.session.check_client_capability(mcp_types.ClientCapabilities(
        elicitation=mcp_types.ElicitationCapability())))


def checked_timeout(value: Any) -> float:
    """``value`` as an ``input_timeout``: a finite number of seconds greater than 0, or a
    ``ValueError`` that says so."""
    if not (isinstance(value, int | float) and not isinstance(value, bool)
            and math.isfinite(value) and value > 0):
        raise ValueError(f"input_timeout is a number of seconds greater than 0 (how long a "
                         f"call waits for an MCP client's answer), not {value!r}")
    return float(value)


def boundary(name: str, timeout: float) -> RequestStateBoundary:
    """The SDK's sealing of ``requestState`` for a server called ``name``: a key of this
    process only (a waiting call lives in it), and a state that expires with the wait."""
    return RequestStateBoundary(RequestStateSecurity.ephemeral(ttl=timeout),
                                default_audience=name)


@asynccontextmanager
async def rounds_lifespan(timeout: float) -> AsyncIterator[Rounds]:
    """The :class:`Rounds` of one serving (the SDK's server lifespan): the calls that wait
    between rounds run in its task group, and are cancelled when it ends."""
    async with anyio.create_task_group() as tasks:
        try:
            yield Rounds(tasks, timeout)
        finally:
            tasks.cancel_scope.cancel()


class _Waiting:
    """One question of a served call, waiting for the client's next round."""

    def __init__(self, exchange: _Exchange, question: Question, key: str) -> None:
        self.exchange = exchange
        self.question = question
        self.key = key  # its key in inputRequests and inputResponses
        self.answer: Answer | None = None
        self.answered = anyio.Event()
        self.token: str | None = None  # while a retry may answer it
        self.over = False  # its wait ran out, or its call ended


class _Steps:
    """What a call sends the requests that wait on it, in order: questions, then its end.
    (A queue of its own: several requests take from it in turn, and it needs no closing.)"""

    def __init__(self) -> None:
        self._items: deque[Any] = deque()
        self._more = anyio.Event()
        self._ended = False

    def put(self, item: Any) -> None:
        self._items.append(item)
        self._more.set()

    def end(self) -> None:
        """Nothing more comes: a request waiting, or one that comes after what is left, gets
        ``None``."""
        self._ended = True
        self._more.set()

    async def get(self) -> Any:
        """The next step, once there is one; ``None`` once the call has ended without one
        (it was cancelled)."""
        while not self._items and not self._ended:
            self._more = anyio.Event()
            await self._more.wait()
        return self._items.popleft() if self._items else None


class _Exchange:
    """One served call that asks its client in rounds: its steps (a question, or the end)
    go to whichever request of the call is open."""

    def __init__(self, rounds: Rounds) -> None:
        self._rounds = rounds
        self.steps = _Steps()
        self.scope = anyio.CancelScope()
        self.listener: Callable[[ToolProgress], None] | None = None
        self.abandoned: str | None = None  # why every later question is cancelled at once

    def heard(self, update: ToolProgress) -> None:
        """A progress update of the call: to the open request's client, if there is one."""
        if self.listener is not None:
            self.listener(update)

    async def ask(self, question: Question) -> Answer:
        """The call's asker: the question goes to the client in the next round's result."""
        if self.abandoned is not None:
            return Answer(action="cancel", reason=self.abandoned)
        waiting = _Waiting(self, question, question.question_id)
        self.steps.put(waiting)
        try:
            with anyio.move_on_after(self._rounds.timeout):
                await waiting.answered.wait()
        finally:
            if waiting.answer is None:  # no retry in time, or the call is cancelled
                waiting.over = True
                self._rounds.forget(waiting)
        if waiting.answer is None:  # the client has gone
            self.abandoned = NO_RETRY.format(timeout=self._rounds.timeout)
            return Answer(action="cancel", reason=self.abandoned)
        return waiting.answer

    async def run(self, start: Start) -> None:
        """Run the call, in the serving's task group, and send its end as the last step."""
        try:
            with self.scope:
                try:
                    outcome = await start(self.ask, self.heard)
                except Exception as exc:
                    self.steps.put(exc)
                else:
                    self.steps.put(outcome)
        finally:
            self.steps.end()  # cancelled: a request still open is told so


class Rounds:
    """The served calls of one serving that ask their clients in rounds (see the module's
    docstring): :meth:`start` begins one, :meth:`resume` takes a retry."""

    def __init__(self, tasks: Any, timeout: float) -> None:
        self._tasks = tasks
        self.timeout = timeout
        self._waiting: dict[str, _Waiting] = {}

    async def start(self, request: Any, start: Start) -> Step:
        """Run a served call whose questions go to the client of ``request`` in rounds, and
        return what the request answers: the call's result, or its first question."""
        exchange = _Exchange(self)
        self._tasks.start_soon(exchange.run, start)
        return await self._next(request, exchange)

    async def resume(self, request: Any, state: str, responses: Any) -> Step:
        """Take a retry that carries ``state`` (as the boundary unsealed it) and the
        client's ``responses``: answer the question and return what comes next, or raise
        the SDK's ``MCPError`` (see the module's docstring)."""
        token, call, qid = _read(state)
        waiting = self._waiting.get(token)
        if waiting is None:
            raise mcp.MCPError(code=mcp_types.INVALID_PARAMS,
                               message=NOT_WAITING.format(question=qid, call=call))
        reply = (responses or {}).get(waiting.key)
        if not isinstance(reply, mcp_types.ElicitResult):
            raise mcp.MCPError(code=mcp_types.INVALID_PARAMS, message=NO_ANSWER.format(
                question=qid, call=call, key=waiting.key))
        del self._waiting[token]
        waiting.token = None
        content = dict(reply.content) if reply.content is not None else None
        waiting.answer = (Answer(action="accept", content=content or {})
                          if reply.action == "accept" else Answer(action=reply.action))
        waiting.answered.set()
        return await self._next(request, waiting.exchange)

    def forget(self, waiting: _Waiting) -> None:
        """``waiting`` waits no more (its wait ran out): a retry for it is refused."""
        if waiting.token is not None:
            self._waiting.pop(waiting.token, None)
            waiting.token = None

    async def _next(self, request: Any, exchange: _Exchange) -> Step:
        """Wait for the call's next step, sending its progress to ``request``'s client; a
        request cancelled meanwhile (the client gave up) cancels the call."""
        try:
            async with anyio.create_task_group() as sending:
                notifier = ProgressNotifier(request, sending)
                exchange.listener = notifier.heard
                try:
                    step = await exchange.steps.get()
                    while isinstance(step, _Waiting) and step.over:  # cancelled meanwhile
                        step = await exchange.steps.get()
                finally:
                    exchange.listener = None
                    notifier.close()
        except anyio.get_cancelled_exc_class():
            exchange.scope.cancel()
            raise
        if step is None:  # the serving ends: cancelled as a call in flight is
            raise mcp.MCPError(code=mcp_types.INTERNAL_ERROR,
                               message="the server stopped before the call ended")
        if isinstance(step, _Waiting):
            token = step.token = secrets.token_urlsafe(16)
            self._waiting[token] = step
            question = step.question
            elicit = mcp_types.ElicitRequest(params=mcp_types.ElicitRequestFormParams(
                message=question.message, requested_schema=dict(question.schema)))
            return mcp_types.InputRequiredResult(
                input_requests={step.key: elicit},
                request_state=json.dumps({"token": token, "call": question.call_id,
                                          "question": question.question_id}))
        if isinstance(step, Exception):
            raise step
        return result_to_mcp(step.result)


def _read(state: str) -> tuple[str, str, str]:
    """The token, call and question a ``requestState`` this server minted names."""
    try:
        fields = json.loads(state)
        token, call, qid = fields["token"], fields["call"], fields["question"]
    except (ValueError, KeyError, TypeError):
        raise mcp.MCPError(code=mcp_types.INVALID_PARAMS,
                           message="Invalid or expired requestState") from None
    return str(token), str(call), str(qid)
