"""Answer a running session's approvals and questions from another process, over a Unix socket.

An approver that answers :data:`~engine.LATER` leaves a request pending until the host calls
``session.resolve_approval``; an asker that does leaves a tool's question (``ctx.ask``) pending
until the host calls ``session.answer_question``. When the host is a server — ``toolledger
serve``, with an MCP client waiting on the call — the person who answers is somewhere else: at
another terminal, or behind a program of their own. :func:`serve_approvals` listens on a Unix
socket for the length of its block and answers two questions there: what waits for an answer,
and this call's (or this question's) answer. :func:`pending_approvals`,
:func:`resolve_approval`, :func:`pending_questions`, :func:`waiting` and
:func:`answer_question` ask them from any process (``toolledger approvals``, ``approve``,
``deny`` and ``answer`` are built on them).

The session's own process records every answer, through ``session.resolve_approval`` or
``session.answer_question``, as if its host had answered in the same process: the log keeps
one writer, and the waiting call goes on at once. An answer to a call or a question that waits
no more (its client gave up and it ended as cancelled; someone else answered first) is refused
with the session's own error (:class:`~engine.core.errors.ApprovalNotPending`,
:class:`~engine.core.errors.QuestionNotPending`), and so is content that does not fit a
question's form (:class:`~engine.core.errors.InvalidAnswer`): nothing is recorded.

Who may answer is who may connect: the socket is made readable and writable by its owner
only (``0600``, as the logs are), and removed when the block ends. A socket left by a process
that died is replaced; one that another process still answers on is not.

The protocol, for a client in another language: one request per connection, a JSON object on
one line; one JSON object on one line in reply.

- ``{"op": "pending", "wait": false}`` → ``{"pending": [REQUEST, ...]}``, each REQUEST an
  :class:`~engine.core.approvals.ApprovalRequest` as an object (``call_id``, ``name``,
  ``arguments``, ``reason``, ``annotations``, ``origin``, ``parent_id``). With ``"wait":
  true`` the reply comes once at least one request waits.
- ``{"op": "pending", "of": ["approvals", "questions"], "wait": false}`` → ``{"pending":
  [REQUEST, ...], "questions": [QUESTION, ...]}``, each QUESTION a
  :class:`~engine.core.questions.Question` as an object (``question_id``, ``call_id``,
  ``name``, ``message``, ``schema``, ``origin``, ``parent_id``). ``of`` says which lists the
  reply holds (``["approvals"]`` when it is left out); with ``"wait": true`` the reply comes
  once one of them holds something.
- ``{"op": "resolve", "call_id": ID, "granted": BOOL, "scope": "once" | "session",
  "arguments": ARGS | null, "reason": TEXT | null}`` → ``{"resolved": ID}``.
- ``{"op": "answer", "question_id": ID, "action": "accept" | "decline" | "cancel",
  "content": {FIELD: VALUE, ...} | null, "reason": TEXT | null}`` → ``{"answered": ID}``.
- Anything refused → ``{"error": TYPE, "message": TEXT}``.
"""

from __future__ import annotations

import json
import os
import socket
import stat
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, closing
from functools import partial
from typing import Any

import attrs
import trio

from ..core.errors import SessionClosed
from ..core.questions import ACTIONS
from ..runtime.session import Session
from .approvalclient import (
    LISTS,
    MAX_MESSAGE,
    Waiting,
    answer_question,
    line,
    parsed,
    pending_approvals,
    pending_questions,
    resolve_approval,
    waiting,
)

__all__ = [
    "MAX_MESSAGE",
    "Waiting",
    "answer_question",
    "pending_approvals",
    "pending_questions",
    "resolve_approval",
    "serve_approvals",
    "waiting",
]

#: a Unix socket's path must fit in ``sun_path`` (104 bytes on macOS, 108 on Linux)
_MAX_PATH = 103


# -- the session's side -----------------------------------------------------------------------

@asynccontextmanager
async def serve_approvals(session: Session, path: str | os.PathLike[str]) -> AsyncIterator[None]:
    """Answer ``session``'s approvals and questions on a Unix socket at ``path`` for the
    length of the block (see the module's docstring)::

        async with Session.open(store, tools=tools, approver=lambda request: LATER) as session:
            async with serve_approvals(session, "approvals.sock"):
                ...   # serve the session; a person answers with toolledger approve

    ``path`` must not be taken: a socket another process answers on, or a file that is not a
    socket, is a ``ValueError`` saying so.
    """
    path = os.fspath(path)
    sock, made = _listen(path)
    listener = trio.SocketListener(trio.socket.from_stdlib_socket(sock))
    raised: BaseException | None = None
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(partial(trio.serve_listeners, partial(_answer, session),
                                       [listener]))
            try:
                yield
            except BaseException as exc:
                raised = exc
                raise
            nursery.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        # the nursery wraps what the block raised (the listener raises nothing of its own):
        # give the host its own exception, as Session.open does
        if raised is not None and list(group.exceptions) == [raised]:
            raise raised from None
        raise
    finally:
        _remove(path, made)
        await trio.aclose_forcefully(listener)


def _listen(path: str) -> tuple[socket.socket, os.stat_result]:
    """A listening socket at ``path``, which only its owner may connect to, and the file it
    made there."""
    if len(os.fsencode(path)) > _MAX_PATH:
        raise ValueError(f"{path!r} is too long for a Unix socket ({_MAX_PATH} bytes at most): "
                         f"choose a shorter path")
    _clear(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        mask = os.umask(0o177)  # made owner-only, with no moment where others may connect
        try:
            sock.bind(path)
        finally:
            os.umask(mask)
        sock.listen()
        return sock, os.stat(path)
    except OSError as exc:
        sock.close()
        raise ValueError(f"cannot make the approvals socket at {path!r}: "
                         f"{exc.strerror or exc}") from None
    except BaseException:
        sock.close()
        raise


def _clear(path: str) -> None:
    """Remove a socket at ``path`` that nobody answers on (left by a process that died);
    refuse one that somebody does, or a file that is not a socket."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise ValueError(f"{path!r} exists and is not a socket: choose another path for the "
                         f"approvals socket")
    with closing(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)) as probe:
        try:
            probe.connect(path)
        except ConnectionRefusedError:
            os.unlink(path)
            return
    raise ValueError(f"another process answers approvals at {path!r}: choose another path, "
                     f"or stop that process first")


def _remove(path: str, made: os.stat_result) -> None:
    """Remove the socket this process made at ``path``, and nothing another put there since."""
    try:
        now = os.lstat(path)
        if (now.st_dev, now.st_ino) == (made.st_dev, made.st_ino):
            os.unlink(path)
    except FileNotFoundError:
        pass


async def _answer(session: Session, stream: trio.SocketStream) -> None:
    """One connection: read the request, answer it, hang up. Nothing a client sends stops the
    listener: what it does wrong is told to it."""
    async with stream:
        try:
            reply = await _reply(session, stream, await _read_line(stream))
        except (ValueError, TypeError, SessionClosed) as exc:
            reply = {"error": type(exc).__name__, "message": str(exc)}
        except trio.BrokenResourceError:
            return  # it hung up
        except Exception as exc:  # a bug of ours: told to the client, the listener goes on
            reply = {"error": "RuntimeError",
                     "message": f"unexpected {type(exc).__name__}: {exc}"}
        if reply is None:
            return
        try:
            await stream.send_all(line(reply))
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # it hung up before the reply


async def _reply(session: Session, stream: trio.SocketStream,
                 request: Any) -> dict[str, Any] | None:
    """The reply to ``request`` (``None``: the client hung up while it waited)."""
    if not isinstance(request, dict):
        raise ValueError('a request is a JSON object: {"op": "pending"}, {"op": "resolve", ...} '
                         'or {"op": "answer", ...}')
    op = request.get("op")
    if op == "pending":
        of = _lists(request.get("of", ["approvals"]))
        while True:  # with wait: until a list asked for holds something
            reply: dict[str, Any] = {}
            if "approvals" in of:
                reply["pending"] = [attrs.asdict(item) for item in session.pending_approvals()]
            if "questions" in of:
                reply["questions"] = [attrs.asdict(item) for item in session.pending_questions()]
            if request.get("wait") is not True or any(reply.values()):
                return reply
            if not await _wait(session, stream, of):
                return None
    if op == "resolve":
        call_id, granted = request.get("call_id"), request.get("granted")
        if not isinstance(call_id, str) or not isinstance(granted, bool):
            raise ValueError('a resolve request needs "call_id" (a string) and "granted" '
                             '(true or false)')
        await session.resolve_approval(
            call_id, granted, request.get("scope", "once"),
            arguments=request.get("arguments"), reason=request.get("reason"))
        return {"resolved": call_id}
    if op == "answer":
        question_id, action = request.get("question_id"), request.get("action")
        reason = request.get("reason")
        if not isinstance(question_id, str) or action not in ACTIONS:
            raise ValueError('an answer request needs "question_id" (a string) and "action" '
                             '("accept", "decline" or "cancel")')
        if reason is not None and not isinstance(reason, str):
            raise ValueError('an answer\'s "reason" is a string, or null')
        await session.answer_question(question_id, action, request.get("content"),
                                      reason=reason)
        return {"answered": question_id}
    raise ValueError(f'unknown op {op!r}: ask "pending", "resolve" or "answer"')


def _lists(of: Any) -> frozenset[str]:
    """The lists a ``pending`` request asks for."""
    if (not isinstance(of, list) or not of
            or not all(isinstance(item, str) and item in LISTS for item in of)):
        raise ValueError(f'"of" is a list of what to list, from {json.dumps(list(LISTS))}, '
                         f'not {json.dumps(of)}')
    return frozenset(of)


async def _wait(session: Session, stream: trio.SocketStream, of: frozenset[str]) -> bool:
    """Once a list in ``of`` holds something: ``True``; ``False`` if the client hangs up
    first. A session that closes meanwhile raises :class:`SessionClosed`."""
    closed: list[SessionClosed] = []
    hung_up = False
    async with trio.open_nursery() as nursery:
        async def hang_up() -> None:
            nonlocal hung_up
            await stream.receive_some(1)  # nothing more is sent: this is its end
            hung_up = True
            nursery.cancel_scope.cancel()

        async def until(wait: Callable[[], Awaitable[object]]) -> None:
            try:
                await wait()
            except SessionClosed as exc:
                closed.append(exc)
            nursery.cancel_scope.cancel()

        nursery.start_soon(hang_up)
        if "approvals" in of:
            nursery.start_soon(until, session.wait_pending_approvals)
        if "questions" in of:
            nursery.start_soon(until, session.wait_pending_questions)
    if closed:
        raise closed[0]
    return not hung_up


async def _read_line(stream: trio.SocketStream) -> Any:
    """The request: one line of JSON, at most :data:`MAX_MESSAGE` bytes."""
    data = bytearray()
    while b"\n" not in data:
        chunk = await stream.receive_some(65536)
        if not chunk:
            break
        data += chunk
        if len(data) > MAX_MESSAGE:
            raise ValueError(f"the request is over {MAX_MESSAGE} bytes")
    return parsed(bytes(data).partition(b"\n")[0])
