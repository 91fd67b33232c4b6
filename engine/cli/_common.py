"""What the commands share: the user-error type and its one line, opening the store a LOG
argument names, reading its sessions, the key, and refusing an output that is an input."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Sequence
from contextlib import closing
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import trio

from events.errors import LogError
from events.stores import EventStore, open_store
from events.stores.urls import parse_store_url
from events.types import Record

from ..core.reducers import LogInconsistency, Projection, fold
from ..core.visible import visible
from ..present.render import Renderers, counted

__all__ = [
    "LOG_HELP",
    "PLUGIN_HELP",
    "PROG",
    "UsageError",
    "choose_session",
    "command_name",
    "counted",
    "error_line",
    "fold_sessions",
    "load_key",
    "load_renderers",
    "open_log",
    "read_sessions",
    "refuse_writing_over",
    "shown",
]

PROG = "toolledger"

#: The files an SQLite database keeps beside its own: SQLite writes them, and reads them back.
SQLITE_COMPANIONS = ("-wal", "-shm", "-journal")

#: What every LOG argument accepts.
LOG_HELP = ("the log: a JSONL file's path, or a store URL (sqlite:///runs.db, "
            "postgresql://user@host/db)")


#: What every ``--plugin`` option says.
PLUGIN_HELP = "import MODULE first (it may register renderers for its tools); repeatable"


class UsageError(Exception):
    """A mistake the user can fix; its message is printed as one line."""


def command_name() -> str:
    """How to run this command again from the current directory, as it can be typed: ``toolledger``
    if that is the one on ``PATH``, else its script beside this interpreter (``.venv/bin/toolledger``
    from a checkout whose ``.venv`` is not activated), else ``python -m engine.cli``."""
    script = Path(sys.executable).parent / PROG
    on_path = shutil.which(PROG)
    if on_path is not None and (not script.exists() or Path(on_path).resolve() == script.resolve()):
        return PROG
    if script.exists():
        try:
            return str(script.relative_to(Path.cwd()))
        except ValueError:
            return str(script)
    return f"{Path(sys.executable).name} -m engine.cli"


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


def load_renderers(plugins: Sequence[str]) -> Renderers:
    """The tools' renderers a command shows calls with: the entry points', then what the
    ``--plugin`` modules register; a module that does not import is a :class:`UsageError`."""
    renderers = Renderers()
    try:
        renderers.load(tuple(plugins))
    except ImportError as exc:
        raise UsageError(f"--plugin: {exc}") from exc
    return renderers


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


def refuse_writing_over(option: str, output: str, logs: Sequence[str],
                        key_file: str | None = None, *, output_is_log: bool = True,
                        instead: str) -> None:
    """Refuse, before anything is written, the ``output`` that ``option`` names if it is one
    of the ``logs`` or the ``key_file`` the command only reads: no command writes over its
    input. ``output`` is a log (a path or a store URL) unless ``output_is_log`` is false (a
    plain file). Files are compared as files (:func:`os.path.samefile`: another spelling, a
    symbolic or a hard link is the same file; a file not there yet by its real path), an
    SQLite database with the files SQLite keeps beside it; a database server's URL by its
    text. ``instead`` says what to do."""
    written = _files(output) if output_is_log else [output]
    inputs = [(log, f"the log {shown(log)}", _files(log)) for log in logs]
    if key_file is not None:
        inputs.append((key_file, f"the key file {key_file}", [key_file]))
    for name, what, files in inputs:
        same = next((file for file in files if any(_same_file(file, out) for out in written)),
                    None)
        if same is None and not (output_is_log and _same_server(output, name)):
            continue
        if same is not None and same != files[0]:
            what += f" (its file {same})"
        raise UsageError(f"{option} {shown(output)} is {what}, which this command only reads: "
                         f"writing there would change it; nothing was written ({instead})")


def _files(log: str) -> list[str]:
    """The files the store ``log`` names is kept in, its own first: a JSONL file, an SQLite
    database and the files SQLite keeps beside it; none for a database server."""
    try:
        where = parse_store_url(log)
    except ValueError:
        return []  # not a store: opening it says why
    if where.kind == "jsonl":
        return [where.target]
    if where.kind == "sqlite":
        return [where.target, *(where.target + suffix for suffix in SQLITE_COMPANIONS)]
    return []


def _same_file(one: str, other: str) -> bool:
    try:
        return os.path.samefile(one, other)
    except OSError:  # one of them is not there (yet): the same path is the same file
        return os.path.realpath(one) == os.path.realpath(other)


def _same_server(one: str, other: str) -> bool:
    try:
        first, second = parse_store_url(one), parse_store_url(other)
    except ValueError:
        return False
    if not first.kind == second.kind == "postgresql":
        return False
    return first.target.partition("://")[2] == second.target.partition("://")[2]
