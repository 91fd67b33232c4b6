"""A session as Temporal activities (docs/hosts.md, "Temporal"). Needs the ``temporal``
extra (temporalio): ``from engine.hosts.temporal import SessionActivities``.

Temporal runs workflows in a deterministic asyncio sandbox, so the session runs in
**activities**, one per prompt: :meth:`SessionActivities.run_prompt` sends a prompt,
:meth:`SessionActivities.answer_approvals` answers the approvals a prompt paused for and
goes on. Each is a *sync* activity that ``trio.run``\\ s the session in the worker's activity
thread (``activity_executor``), so no event loop is shared with the worker's.

The **session id is the idempotency key**: the workflow names the session (its workflow id,
say) and numbers its prompts, and the log is the record of what happened. A retried activity
opens the same session: if its prompt is already in the log it resumes instead of sending it
again, so a call with a recorded result never runs twice; a call whose body was cut off runs
again only if its tool is idempotent, else it ends "interrupted" and the model is told. The
store must outlive a worker and be shared by all of them: PostgreSQL
(``events.stores.postgres.PostgresStore``) in production, SQLite or JSONL on one machine.

The activity heartbeats with the log's last sequence number on every record, and every
``heartbeat_every`` seconds while none is made (a long tool): set a ``heartbeat_timeout`` on
the activity so that a dead worker is noticed. Cancelling the activity cancels the prompt:
its open calls are recorded as cancelled before the activity reports its cancellation.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import trio
from temporalio import activity
from temporalio.exceptions import CancelledError

from events.stores import EventStore
from events.types import UserMessage

from ..core.tools import ToolSpec
from ..runtime.session import PromptResult, Session
from .steps import ModelFactory, describe, stepped_session
from .steps import ask_later as ask_later  # importable from here, as before


@dataclass
class PromptRequest:
    """One prompt of a session: the workflow numbers its prompts from 1."""

    session_id: str
    number: int
    text: str


@dataclass
class Answer:
    """A host's answer to one approval."""

    call_id: str
    granted: bool
    scope: str = "once"


@dataclass
class AnswerRequest:
    """The answers to the approvals a prompt paused for."""

    session_id: str
    answers: list[Answer]


@dataclass
class PromptOutcome:
    """How the prompt ended; ``pending`` lists the approvals it paused for."""

    stop: str
    text: str
    pending: list[dict[str, Any]] = field(default_factory=list)


class SessionActivities:
    """The activities, with what a worker gives them: how to open the store and the model,
    and the tools. Register the bound methods with the worker.

    ``model`` is called once per activity with the session's id. It may return the model, or
    an async context manager that gives it: its client is then opened in the activity's trio
    run and closed when the activity ends, as the SDKs' ``async with`` shows::

        @asynccontextmanager
        async def model(session_id):
            async with AsyncOpenAI() as client:
                yield OpenAIChatModel(client, "gpt-4.1-mini")
    """

    def __init__(self, open_store: Callable[[], EventStore], model: ModelFactory,
                 tools: Sequence[ToolSpec], heartbeat_every: float = 10.0) -> None:
        self.open_store = open_store
        self.model = model
        self.tools = tools
        self.heartbeat_every = heartbeat_every

    @activity.defn(name="run_prompt", no_thread_cancel_exception=True)
    def run_prompt(self, request: PromptRequest) -> PromptOutcome:
        """Send prompt ``number`` of the session, or go on with it if a previous attempt
        already sent it."""
        return trio.run(self._in_session, request.session_id,
                        functools.partial(self._prompt, request))

    @activity.defn(name="answer_approvals", no_thread_cancel_exception=True)
    def answer_approvals(self, request: AnswerRequest) -> PromptOutcome:
        """Answer the pending approvals (those a previous attempt answered are skipped),
        then resume the session."""
        return trio.run(self._in_session, request.session_id,
                        functools.partial(self._answer, request))

    async def _prompt(self, request: PromptRequest, session: Session) -> PromptResult:
        sent = sum(isinstance(record.event, UserMessage) for record in session.records)
        if sent >= request.number:  # a retry: the log has the prompt, go on from there
            return await session.resume()
        return await session.prompt(request.text)

    async def _answer(self, request: AnswerRequest, session: Session) -> PromptResult:
        pending = {pending.call_id for pending in session.pending_approvals()}
        for answer in request.answers:
            if answer.call_id in pending:
                await session.resolve_approval(answer.call_id, granted=answer.granted,
                                               scope="session" if answer.scope == "session"
                                               else "once")
        return await session.resume()

    async def _in_session(self, session_id: str,
                          step: Callable[[Session], Any]) -> PromptOutcome:
        async with stepped_session(self.open_store, session_id, self.model,
                                   self.tools) as session:
            result: PromptResult | None = None
            activity.heartbeat(len(session.records))  # where the log stood at the start
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._heartbeats, session, nursery.cancel_scope,
                                   len(session.records))
                result = await step(session)
                nursery.cancel_scope.cancel()
            if result is None:  # the heartbeats saw Temporal cancel the activity
                raise CancelledError("the activity was cancelled: the prompt's open "
                                     "calls are recorded as cancelled")
        return PromptOutcome(**describe(result))

    async def _heartbeats(self, session: Session, scope: trio.CancelScope, last: int) -> None:
        """Heartbeat on each record after ``last``, and every ``heartbeat_every`` seconds
        without one; cancel the prompt when Temporal cancels the activity."""

        def beat() -> None:
            activity.heartbeat(last)
            if activity.is_cancelled():
                scope.cancel()

        async def tick() -> None:
            while True:
                await trio.sleep(self.heartbeat_every)
                beat()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(tick)
            async for record in session.follow(last):
                last = record.seq
                beat()
