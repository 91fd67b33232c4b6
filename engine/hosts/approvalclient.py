"""The other process's side of the approvals socket (:mod:`engine.hosts.approvalsocket`):
plain blocking functions that ask a served session what waits for a person and send the
person's answers, and the wire both sides speak (one line of JSON each way)."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Mapping
from contextlib import closing
from typing import Any

import attrs

from events.types import Annotations

from ..core.approvals import ApprovalRequest
from ..core.errors import (
    ApprovalNotPending,
    CallNotFound,
    InvalidAnswer,
    QuestionNotPending,
    SessionClosed,
)
from ..core.questions import Question

__all__ = [
    "MAX_MESSAGE",
    "Waiting",
    "answer_question",
    "pending_approvals",
    "pending_questions",
    "resolve_approval",
    "waiting",
]

#: The most bytes a request or a reply may take (a reply lists every pending request, with
#: its arguments)
MAX_MESSAGE = 16_000_000

#: the errors a client raises again as themselves; any other refusal is a ValueError
_ERRORS: Mapping[str, type[Exception]] = {
    error.__name__: error
    for error in (ApprovalNotPending, CallNotFound, QuestionNotPending, InvalidAnswer,
                  SessionClosed, TypeError, RuntimeError)
}

#: what a ``pending`` request may ask to list
LISTS = ("approvals", "questions")


def pending_approvals(path: str | os.PathLike[str], *, wait: bool = False,
                      timeout: float | None = None) -> tuple[ApprovalRequest, ...]:
    """The approval requests that wait for an answer in the session served at ``path`` (by
    :func:`~engine.hosts.approvalsocket.serve_approvals`, in another process), in the order
    they were asked. ``wait``: once at least one does. ``timeout`` (seconds) bounds the whole
    exchange: past it, ``TimeoutError``.

    A plain blocking function, for any program: from trio, ``await
    trio.to_thread.run_sync(pending_approvals, path)``; from asyncio, ``await
    asyncio.to_thread(pending_approvals, path)``. Nobody answering at ``path`` is a
    ``ConnectionError`` that says so."""
    reply = _exchange(path, {"op": "pending", "wait": wait}, timeout)
    return tuple(_request(item) for item in reply["pending"])


def resolve_approval(path: str | os.PathLike[str], call_id: str, granted: bool,
                     scope: str = "once", *, arguments: Any = None, reason: str | None = None,
                     timeout: float | None = None) -> None:
    """Answer the pending approval ``call_id`` of the session served at ``path``: what
    ``session.resolve_approval`` does in the session's own process, with the same arguments
    and the same refusals (``ApprovalNotPending``, ``CallNotFound``; a ``ValueError`` for
    any other). Its process records the answer, and the call goes on at once."""
    _exchange(path, {"op": "resolve", "call_id": call_id, "granted": granted, "scope": scope,
                     "arguments": arguments, "reason": reason}, timeout)


def pending_questions(path: str | os.PathLike[str], *, wait: bool = False,
                      timeout: float | None = None) -> tuple[Question, ...]:
    """The tools' questions that wait for an answer in the session served at ``path``, in
    the order they were asked; ``wait``: once at least one does. As :func:`pending_approvals`
    otherwise."""
    reply = _exchange(path, {"op": "pending", "of": ["questions"], "wait": wait}, timeout)
    return tuple(_question(item) for item in reply["questions"])


@attrs.frozen
class Waiting:
    """What waits for a person in a served session: its approval requests and its tools'
    questions, each in the order they were asked."""

    approvals: tuple[ApprovalRequest, ...]
    questions: tuple[Question, ...]


def waiting(path: str | os.PathLike[str], *, wait: bool = False,
            timeout: float | None = None) -> Waiting:
    """Both lists of what waits in the session served at ``path``, taken at one moment;
    ``wait``: once something does, an approval or a question. As :func:`pending_approvals`
    otherwise."""
    reply = _exchange(path, {"op": "pending", "of": list(LISTS), "wait": wait}, timeout)
    return Waiting(approvals=tuple(_request(item) for item in reply["pending"]),
                   questions=tuple(_question(item) for item in reply["questions"]))


def answer_question(path: str | os.PathLike[str], question_id: str, action: str = "accept",
                    content: Any = None, *, reason: str | None = None,
                    timeout: float | None = None) -> None:
    """Answer the pending question ``question_id`` of the session served at ``path``: what
    ``session.answer_question`` does in the session's own process, with the same arguments
    and the same refusals (``QuestionNotPending``; ``InvalidAnswer`` for content that does not
    fit the form, naming the field; a ``ValueError`` for any other). Its process records the
    answer, and the tool that asked goes on at once."""
    _exchange(path, {"op": "answer", "question_id": question_id, "action": action,
                     "content": content, "reason": reason}, timeout)


def _exchange(path: str | os.PathLike[str], request: dict[str, Any],
              timeout: float | None) -> dict[str, Any]:
    path = os.fspath(path)
    with closing(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)) as sock:
        sock.settimeout(timeout)
        try:
            sock.connect(path)
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            raise ConnectionError(
                f"nobody answers approvals at {path!r} ({exc.strerror or exc}): is the "
                f"session served with --approvals {path}?") from None
        sock.sendall(line(request))  # the write side stays open: closing it is hanging up
        data = bytearray()
        while b"\n" not in data and len(data) <= MAX_MESSAGE:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    if len(data) > MAX_MESSAGE:
        raise ConnectionError(f"the reply from {path!r} is over {MAX_MESSAGE} bytes")
    if b"\n" not in data:
        raise ConnectionError(f"the session served at {path!r} hung up without an answer "
                              f"(it may have closed)")
    reply = parsed(bytes(data).partition(b"\n")[0])
    if not isinstance(reply, dict):
        raise ConnectionError(f"{path!r} answered {reply!r}, not an approvals reply")
    if "error" in reply:
        raise _ERRORS.get(str(reply["error"]), ValueError)(str(reply.get("message", "")))
    return reply


def _request(item: dict[str, Any]) -> ApprovalRequest:
    fields = dict(item)
    fields["annotations"] = Annotations(**fields["annotations"])
    return ApprovalRequest(**fields)


def _question(item: dict[str, Any]) -> Question:
    return Question(**item)


def line(message: Any) -> bytes:
    """``message`` as one line of JSON, in ASCII."""
    return json.dumps(message, ensure_ascii=True, separators=(",", ":")).encode() + b"\n"


def parsed(line: bytes) -> Any:
    """One line of JSON, read; a ``ValueError`` if it is not."""
    try:
        return json.loads(line)
    except ValueError:
        raise ValueError("a message is one line of JSON") from None
