"""What the commands share: the user-error type and its one line, opening the store a LOG
argument names, reading its sessions, and the key."""

from __future__ import annotations

import os
from collections.abc import Sequence
from contextlib import closing
from urllib.parse import urlsplit, urlunsplit

import trio

from events.errors import LogError
from events.stores import EventStore, open_store
from events.types import Record

from ..reducers import LogInconsistency, Projection, fold
from ..visible import visible

__all__ = [
    "LOG_HELP",
    "PROG",
    "UsageError",
    "choose_session",
    "counted",
    "error_line",
    "fold_sessions",
    "load_key",
    "open_log",
    "read_sessions",
    "shown",
]

PROG = "toolledger"

#: What every LOG argument accepts.
LOG_HELP = ("the log: a JSONL file's path, or a store URL (sqlite:///runs.db, "
            "postgresql://user@host/db)")


class UsageError(Exception):
    """A mistake the user can fix; its message is printed as one line."""


def counted(count: int, noun: str) -> str:
    """``count`` and ``noun``, plural unless one: ``"1 session"``, ``"3 sessions"``."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def error_line(message: str, prog: str = PROG) -> str:
    """The one line every command prints to stderr for an error: ``message`` on one line, with
    what it quotes (file names, ids, exception text) shown as visible escapes."""
    return f"{prog}: error: {visible(' '.join(message.split()))}"


def shown(log: str) -> str:
    """``log`` as messages show it: a URL's password (``postgresql://me:secret@host/db``)
    replaced by ``***``, so that it does not end up on a screen or in a terminal's history."""
    try:
        parts = urlsplit(log)
        password = parts.password
    except ValueError:
        return log
    if not password or "://" not in log:
        return log
    netloc = parts.netloc.replace(f":{password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def open_log(log: str, *, key: bytes | None = None, read_only: bool = True) -> EventStore:
    """The store ``log`` names: a JSONL file's path or a store URL (see
    :func:`~events.stores.open_store`), read-only unless asked. A URL it cannot read, or a
    store whose extra is not installed, is a :class:`UsageError`."""
    try:
        return open_store(log, key=key, read_only=read_only)
    except LogError:
        raise
    except (ValueError, ImportError) as exc:
        raise UsageError(str(exc)) from exc


def choose_session(log: str, ids: Sequence[str], wanted: str) -> str:
    """The session id ``wanted`` names among ``ids``: itself, or the one it is a prefix of."""
    if wanted in ids:
        return wanted
    chosen = [sid for sid in ids if sid.startswith(wanted)]
    if len(chosen) != 1:
        known = ", ".join(ids) or "none"
        problem = "matches several sessions" if chosen else "is not a session in it"
        raise UsageError(f"{shown(log)}: {wanted!r} {problem} (sessions: {known})")
    return chosen[0]


def read_sessions(
    log: str, session: str | None = None, key: bytes | None = None
) -> dict[str, list[Record]]:
    """The records of each session in the store ``log`` names, by session id, in order of
    first appearance; only the one ``session`` names (its id, or a prefix naming one) if
    given. The store is opened read-only, with ``key`` if given (then every record is
    verified with it)."""

    async def read() -> dict[str, list[Record]]:
        with closing(open_log(log, key=key)) as store:
            ids = await store.sessions()
            chosen = ids if session is None else [choose_session(log, ids, session)]
            return {sid: await store.read(sid) for sid in chosen}

    return trio.run(read)


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
