"""What the commands share: the user-error type and its one line, reading a log's sessions
and its key."""

from __future__ import annotations

import os

from events.stores.jsonl import read_jsonl
from events.types import Record

from ..reducers import LogInconsistency, Projection, fold
from ..visible import visible

__all__ = ["PROG", "UsageError", "error_line", "fold_sessions", "load_key", "read_sessions"]

PROG = "toolledger"


class UsageError(Exception):
    """A mistake the user can fix; its message is printed as one line."""


def error_line(message: str, prog: str = PROG) -> str:
    """The one line every command prints to stderr for an error: ``message`` on one line, with
    what it quotes (file names, ids, exception text) shown as visible escapes."""
    return f"{prog}: error: {visible(' '.join(message.split()))}"


def read_sessions(path: str, session: str | None = None) -> dict[str, list[Record]]:
    """The records of each session in the JSONL log at ``path``, by session id, in file
    order; only the one ``session`` names (its id, or a prefix naming one) if given."""
    by_session: dict[str, list[Record]] = {}
    for record in read_jsonl(path):
        by_session.setdefault(record.session_id, []).append(record)
    if session is None:
        return by_session
    chosen = [sid for sid in by_session if sid == session] or [
        sid for sid in by_session if sid.startswith(session)
    ]
    if len(chosen) != 1:
        known = ", ".join(by_session) or "none"
        problem = "matches several sessions" if chosen else "is not a session in it"
        raise UsageError(f"{path}: {session!r} {problem} (sessions: {known})")
    return {chosen[0]: by_session[chosen[0]]}


def fold_sessions(path: str, sessions: dict[str, list[Record]]) -> list[Projection]:
    """Each session folded; an inconsistent log is a :class:`UsageError` naming the record."""
    try:
        return [fold(records) for records in sessions.values()]
    except LogInconsistency as exc:
        raise UsageError(f"{path}: inconsistent log: {exc}") from exc


def load_key(key_file: str | None, key_env: str | None) -> bytes | None:
    """The HMAC key of ``--key-file`` (the file's exact bytes) or ``--key-env`` (the
    variable's value, as the process got it); ``None`` if neither is given."""
    if key_file is not None:
        with open(key_file, "rb") as file:
            key = file.read()
        if not key:
            raise UsageError(f"the key file {key_file} is empty")
        return key
    if key_env is not None:
        value = os.environb.get(os.fsencode(key_env))  # the bytes, as the process got them
        if not value:
            raise UsageError(f"the environment variable {key_env} is not set, or empty")
        return value
    return None
