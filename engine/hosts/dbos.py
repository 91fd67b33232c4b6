"""Sessions as DBOS workflows (docs/hosts.md, "Across machines"). Needs the ``dbos`` extra:
``from engine.hosts.dbos import SessionWorker``.

A session is one **workflow**, whose id is the session's id: :func:`start` enqueues it (from
any process, through a ``DBOSClient``), and any worker that runs :class:`SessionWorker` takes
it from the queue. The workflow sends the prompt in one **step**, and each time the session
pauses for approvals it waits for a **durable message** (``DBOS.recv``) that :func:`answer`
sends from another process (a web console, a script), under an idempotency key; the answers
are applied in a step and the session resumes. Each step ``trio.run``\\ s the session in the
step's thread: DBOS runs sync steps in threads of its own, so no event loop is shared.

**Once.** DBOS runs a step at least once: a worker killed after a step's work and
before DBOS recorded its end runs it again when the workflow is recovered. The session's log
makes that safe, not DBOS: the prompt step resumes if the prompt is already in the log, an
answer is applied only while its request is pending (the log holds one resolution per
request), and a call's body starts at most once (a call cut off by the kill runs again only if
its tool is idempotent, else it ends "interrupted" and the model is told). The store's claim
keeps a second runner of the same session out: a step that finds the session claimed by a
dead worker retries until the claim expires.

**A dead worker.** Open-source DBOS does not notice one: its workflows stay ``PENDING`` under
its executor id until a process launched with the same executor id recovers them, or someone
resumes them. :func:`take_over` is that someone (a reaper's action): it hands the dead
executor's sessions to the live workers. What decides that a worker is dead (a supervisor that
saw it exit, a missed heartbeat) is the host's.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import trio
from dbos import DBOS, DBOSClient

from events.errors import SessionInUse
from events.stores import EventStore
from events.types import UserMessage

from ..core.tools import ToolSpec
from ..runtime.session import PromptResult, Session
from .steps import ModelFactory, describe, stepped_session

__all__ = [
    "APPROVALS",
    "PENDING",
    "QUEUE",
    "WORKFLOW",
    "ModelFactory",
    "SessionWorker",
    "answer",
    "apply_answers",
    "cancel",
    "listen",
    "prompt_or_resume",
    "start",
    "take_over",
]

#: The workflow's registered name: what a client enqueues and a reaper looks for.
WORKFLOW = "toolledger.session"
#: The queue sessions are enqueued on; every worker listens to it.
QUEUE = "toolledger-sessions"
#: The topic of the durable messages that carry approvals to a paused session.
APPROVALS = "toolledger.approval"
#: The workflow event that lists the approvals a session waits for (``DBOSClient.get_event``).
PENDING = "toolledger.pending"

# the worker this process runs: DBOS finds workflows by name, so they are module functions
_worker: SessionWorker | None = None


class SessionWorker:
    """What a worker process gives the session workflow: how to open the store and the
    model, and the tools. A worker process makes one, then calls ``DBOS(config=...)``,
    :meth:`install`, ``DBOS.launch()`` and :func:`listen`, in this order.

    ``slots`` bounds the steps that run at once in this process (each opens the store, so it
    bounds the store's connections too); a session waiting for a person holds none.
    """

    def __init__(self, open_store: Callable[[], EventStore], model: ModelFactory,
                 tools: Sequence[ToolSpec], *, slots: int = 8) -> None:
        self.open_store = open_store
        self.model = model
        self.tools = tools
        self._slots = threading.BoundedSemaphore(slots)

    def install(self) -> None:
        """Make this the worker of this process's session workflows: call it before
        ``DBOS.launch()``, which recovers the workflows this executor left, then
        :func:`listen`."""
        global _worker
        _worker = self

    def run(self, session_id: str, step: Callable[[Session], Any]) -> dict[str, Any]:
        """Open the session in a trio run of this thread, do ``step``, and say how the
        session stands (the workflow's steps call it)."""
        with self._slots:
            return trio.run(self._in_session, session_id, step)

    async def _in_session(self, session_id: str,
                          step: Callable[[Session], Any]) -> dict[str, Any]:
        async with stepped_session(self.open_store, session_id, self.model,
                                   self.tools) as session:
            result: PromptResult = await step(session)
        return describe(result)


def _installed() -> SessionWorker:
    if _worker is None:
        raise RuntimeError("this process runs session workflows but has no worker: call "
                           "SessionWorker(open_store, model, tools).install() before "
                           "DBOS.launch()")
    return _worker


async def prompt_or_resume(text: str, session: Session) -> PromptResult:
    """Send ``text``, or resume if the log already has the prompt (the step ran before)."""
    if any(isinstance(record.event, UserMessage) for record in session.records):
        return await session.resume()  # a step run again: the log has the prompt
    return await session.prompt(text)


async def apply_answers(answers: Sequence[dict[str, Any]], session: Session) -> PromptResult:
    """Resolve each answer's approval while it is pending (once per request: a step run
    again skips what it resolved before), then resume."""
    pending = {request.call_id for request in session.pending_approvals()}
    for given in answers:
        if given["call_id"] in pending:  # once per request: a repeated step skips it
            pending.discard(given["call_id"])
            await session.resolve_approval(
                given["call_id"], granted=bool(given["granted"]),
                scope="session" if given.get("scope") == "session" else "once",
                reason=given.get("reason"))
    return await session.resume()


def _claimed(error: BaseException) -> bool:
    """A step retries while a dead worker's claim on the session has not expired."""
    return isinstance(error, SessionInUse)


@DBOS.step(name="toolledger.prompt", retries_allowed=True, interval_seconds=0.2,
           backoff_rate=1.5, max_attempts=20, should_retry=_claimed)
def prompt_step(session_id: str, text: str) -> dict[str, Any]:
    """Send the session's prompt, or go on with it if the log already has it."""
    return _installed().run(session_id, functools.partial(prompt_or_resume, text))


@DBOS.step(name="toolledger.answer", retries_allowed=True, interval_seconds=0.2,
           backoff_rate=1.5, max_attempts=20, should_retry=_claimed)
def answer_step(session_id: str, answers: list[dict[str, Any]]) -> dict[str, Any]:
    """Apply the answers whose request is pending, then resume the session."""
    return _installed().run(session_id, functools.partial(apply_answers, answers))


@DBOS.workflow(name=WORKFLOW)
def session_workflow(session_id: str, text: str, wait_seconds: float = 86400.0) -> dict[str, Any]:
    """Carry a session from its prompt to its end: prompt, then, while it is paused, wait for
    answers (durable messages on :data:`APPROVALS`) and apply them. An answer that comes
    before its request was asked is kept until it is; the first answer for a call wins."""
    if DBOS.workflow_id != session_id:
        raise ValueError(f"the session workflow's id must be the session's id: started as "
                         f"{DBOS.workflow_id!r} for session {session_id!r}; enqueue it with "
                         f"engine.hosts.dbos.start(client, session_id, text)")
    outcome = prompt_step(session_id, text)
    answers: dict[str, dict[str, Any]] = {}  # by call: the first answer received
    while outcome["stop"] == "paused":
        DBOS.set_event(PENDING, outcome["pending"])
        waiting = [pending["call_id"] for pending in outcome["pending"]]
        while not any(call_id in answers for call_id in waiting):
            message = DBOS.recv(APPROVALS, timeout_seconds=wait_seconds)
            if message is not None:
                answers.setdefault(message["call_id"], message)
        outcome = answer_step(session_id, [answers.pop(c) for c in waiting if c in answers])
    DBOS.set_event(PENDING, [])
    return outcome


def listen(polling_seconds: float = 1.0) -> None:
    """Declare the sessions' queue in DBOS's system database and take workflows from it
    (after ``DBOS.launch()``): every ``polling_seconds`` this worker looks for new sessions."""
    DBOS.register_queue(QUEUE, polling_interval_sec=polling_seconds)


def start(client: DBOSClient, session_id: str, text: str, *,
          wait_seconds: float = 86400.0) -> None:
    """Enqueue the workflow that carries session ``session_id`` from prompt ``text`` to its
    end. Starting it again is harmless: the workflow of that id is already there."""
    client.enqueue({"queue_name": QUEUE, "workflow_name": WORKFLOW, "workflow_id": session_id},
                   session_id, text, wait_seconds)


def answer(client: DBOSClient, session_id: str, call_id: str, granted: bool, *,
           scope: str = "once", reason: str | None = None, key: str | None = None) -> None:
    """Answer the approval of call ``call_id`` of the session, from any process. The message
    is durable: it waits for the session if no worker runs it now. ``key`` (by default the
    session and the call) makes a message sent twice one message; any answer after the first
    for the same call is ignored, and the log records one resolution per request."""
    client.send(session_id, {"call_id": call_id, "granted": granted, "scope": scope,
                             "reason": reason}, APPROVALS,
                idempotency_key=key if key is not None else f"{session_id}/{call_id}")


def cancel(client: DBOSClient, session_id: str) -> None:
    """Cancel the session's workflow: it stops at its next step or wait. A step already
    running finishes (its calls end as they would); a session paused for approvals stays
    paused in the log, with its requests pending, for a later ``resume()``."""
    client.cancel_workflow(session_id)


def take_over(client: DBOSClient, executor_ids: Iterable[str]) -> list[str]:
    """Hand the sessions of dead workers (their DBOS executor ids) to the live ones: every
    pending session workflow they held is enqueued again, and a live worker recovers it from
    its last recorded step. Returns the sessions handed over. Call it only for workers known to
    be dead: a live one would go on with its own copy (the log's claim keeps the two from
    writing at once, and each body runs once, but the work is done twice)."""
    dead = list(executor_ids)
    if not dead:
        return []
    held = client.list_workflows(status="PENDING", name=WORKFLOW, executor_id=dead,
                                 load_input=False, load_output=False)
    for workflow in held:
        client.resume_workflow(workflow.workflow_id)
    return [workflow.workflow_id for workflow in held]
