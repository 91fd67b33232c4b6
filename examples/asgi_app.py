"""A Starlette application that runs toolledger sessions: a prompt endpoint and an approval
endpoint (docs/hosts.md, "An asyncio web app"). Needs the ``asgi`` extra (starlette).

- ``POST /sessions`` ``{"text": ...}`` starts a session and prompts it;
- ``POST /sessions/{id}/prompt`` ``{"text": ...}`` prompts it again;
- ``POST /sessions/{id}/approvals/{call_id}`` ``{"granted": true|false, "scope": ...}``
  answers a pending approval, then resumes the session.

Each answers ``{"session_id", "stop", "text", "pending": [...]}``. A request opens the
session from the store and closes it when it answers, so any worker process can take the
next request of a session (the store's claim keeps two from driving it at once: 409). The
errors a client can cause answer 404 (an unknown session or call) or 409 (a session in use,
paused, or already prompting; an answer to a call that is not waiting); any other error is
the app's own, and answers 500 (docs/errors.md). The
approver says LATER to everything the policy asks about: the approval endpoint answers it.
A client that goes away cancels the request's task, which cancels the prompt: its open
calls are recorded as cancelled, and the session prompts again later.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from engine import (
    LATER,
    AlreadyRunning,
    ApprovalNotPending,
    ApprovalRequest,
    CallNotFound,
    PromptResult,
    SessionInUse,
    SessionNotFound,
    SessionPaused,
    ToolSpec,
)
from engine.hosts.aio import Session
from engine.models import Model
from events.stores import EventStore


async def ask_later(request: ApprovalRequest) -> Any:
    """Every approval waits for the approval endpoint."""
    return LATER


def create_app(store: EventStore, *, model_for: Callable[[str | None], Model],
               tools: Sequence[ToolSpec]) -> Starlette:
    """The application: sessions in ``store``, a session's model from ``model_for(id)``
    (``None`` for a new session), and ``tools``."""

    def answer(session: Session, result: PromptResult) -> JSONResponse:
        return JSONResponse({
            "session_id": session.session_id,
            "stop": result.stop,
            "text": result.text,
            "pending": [{"call_id": request.call_id, "name": request.name,
                         "arguments": request.arguments, "reason": request.reason}
                        for request in result.pending],
        })

    def opened(session_id: str | None) -> Any:
        return Session.open(store, model=model_for(session_id), tools=tools,
                            approver=ask_later, session_id=session_id)

    async def start(request: Request) -> JSONResponse:
        body = await request.json()
        async with opened(None) as session:
            return answer(session, await session.prompt(str(body["text"])))

    async def prompt(request: Request) -> JSONResponse:
        body = await request.json()
        async with opened(request.path_params["session_id"]) as session:
            return answer(session, await session.prompt(str(body["text"])))

    async def approve(request: Request) -> JSONResponse:
        body = await request.json()
        async with opened(request.path_params["session_id"]) as session:
            await session.resolve_approval(request.path_params["call_id"],
                                           granted=bool(body["granted"]),
                                           scope=body.get("scope", "once"))
            return answer(session, await session.resume())

    async def refused(request: Request, exc: Exception) -> JSONResponse:
        status = 404 if isinstance(exc, (SessionNotFound, CallNotFound)) else 409
        return JSONResponse({"error": str(exc)}, status_code=status)

    return Starlette(
        routes=[
            Route("/sessions", start, methods=["POST"]),
            Route("/sessions/{session_id}/prompt", prompt, methods=["POST"]),
            Route("/sessions/{session_id}/approvals/{call_id}", approve, methods=["POST"]),
        ],
        # what a client can cause: an unknown session or call, one in use, a prompt while
        # paused or while another runs, an answer to a call that is not waiting
        exception_handlers={error: refused for error in (
            SessionNotFound, CallNotFound, SessionInUse, SessionPaused, AlreadyRunning,
            ApprovalNotPending)},
    )
