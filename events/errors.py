"""The base of every toolledger error, and the errors about logs and sessions: what went wrong
reading or writing the record of a session, or with the session's state.

Each error a caller can meet in a working program (a session paused, closed or in use, a
call that is not waiting, a log that is corrupt, a schema refused, a model that failed, an
MCP server that changed) is a :class:`ToolledgerError`, and keeps the built-in base it had
before the tree existed (``ValueError``, ``RuntimeError``, ``LookupError``), so an ``except``
clause written against that still catches it. docs/errors.md draws the whole tree.
"""

from __future__ import annotations

__all__ = [
    "ArtifactError",
    "CodecError",
    "ConflictError",
    "CorruptLogError",
    "DatabaseSchemaError",
    "LogError",
    "SessionError",
    "SessionInUse",
    "SessionNotFound",
    "SessionRowError",
    "ToolledgerError",
    "UnverifiedRecordError",
]


class ToolledgerError(Exception):
    """Base class of toolledger's errors (docs/errors.md): catch it to catch any of them.

    A wrong argument to a function (a ``TypeError``, a ``ValueError`` about a setting) is
    not one, and neither is a tool body's own exception: the engine turns that into an error
    result for the model."""


class SessionError(ToolledgerError):
    """Base class of the errors about a session's state: it is paused, closed, in use, not in
    the store, or already busy. The store's ones live here; the engine's in
    :mod:`engine.core.errors`."""


class LogError(ToolledgerError):
    """Base class of every error about a log."""


class CodecError(LogError, ValueError):
    """A record that cannot be decoded: bad JSON, unknown type, newer version, bad fields."""


class CorruptLogError(LogError):
    """A log file with a bad record that is not a torn last line. Names the file and line."""

    def __init__(self, path: str, line: int, problem: str, *, message: str | None = None) -> None:
        super().__init__(
            message or f"{path}:{line}: corrupt record: {problem}. The log was not changed; "
            f"inspect that line (a torn last line is dropped on open, nothing else is)."
        )
        self.path = path
        self.line = line
        self.problem = problem


class DatabaseSchemaError(LogError):
    """A database whose tables the store cannot use as they are: none yet, laid out by an
    older or a newer toolledger, or not toolledger's at all (or a file that is no database).
    The message says what to do (``toolledger db init URL`` creates or upgrades them)."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


class UnverifiedRecordError(CorruptLogError):
    """A store given a key met a record it cannot verify: its link or its HMAC is wrong, or it
    is not chained at all. Names the file, line, session and seq of the first such record.

    The store hands out nothing past it and appends nothing after it: a session is never
    resumed from facts the key does not vouch for.
    """

    def __init__(
        self,
        path: str,
        line: int,
        problem: str,
        *,
        session_id: str | None = None,
        seq: int | None = None,
        hint: str | None = None,
    ) -> None:
        where = ", ".join(
            part
            for part in (
                f"session {session_id!r}" if session_id is not None else "",
                f"seq {seq}" if seq is not None else "",
            )
            if part
        )
        LogError.__init__(
            self,
            f"{path}:{line}: {where + ': ' if where else ''}record not verified with the "
            f"store's key: {problem}"
            + (f" ({hint})" if hint else "")
            + f". The store refuses it and everything after it, and changed nothing. See the "
            f"whole chain with `toolledger verify {path} --key-file KEY`; the lines before "
            f"this one verified, and a copy of just those opens.",
        )
        self.path = path
        self.line = line
        self.problem = problem
        self.session_id = session_id
        self.seq = seq
        self.hint = hint


class SessionRowError(CorruptLogError):
    """A database store's row for a session, in its table of sessions (the session's last seq
    and head, which the next append chains onto), disagrees with the session's records: it
    was changed outside the store, or records were removed from or added past its end.

    The store appends nothing to the session until they agree; ``toolledger verify`` names the
    row. ``line`` is the seq the row says the session ends at (a database has no lines).
    """

    def __init__(self, path: str, session_id: str, last_seq: int, problem: str) -> None:
        super().__init__(path, last_seq, problem, message=(
            f"{path}: session {session_id!r}: {problem}. The row was changed outside the "
            f"store, or records were removed from or added past the session's end: nothing "
            f"is appended to the session until they agree. `toolledger verify` names the row; "
            f"restore the database from a copy."))
        self.session_id = session_id


class ArtifactError(LogError):
    """The whole of a long result, kept as an artifact beside the log, is missing or is not
    what its record's hash says (changed, or cut short). Names the session, the call and the
    hash. The record (what the model read) is intact: restore the artifact from a copy of the
    store, or read the cut the record holds."""

    def __init__(self, session_id: str, call_id: str, sha256: str, problem: str) -> None:
        super().__init__(
            f"session {session_id!r}, call {call_id}: the artifact {sha256[:16]}… {problem}. "
            f"Its record holds what the model read; restore the artifact from a copy of the "
            f"store (`toolledger verify` checks every artifact a log names)")
        self.session_id = session_id
        self.call_id = call_id
        self.sha256 = sha256
        self.problem = problem


class ConflictError(LogError):
    """Another writer appended to the session first: the caller's view is stale."""

    def __init__(self, session_id: str, expected_seq: int, actual_seq: int) -> None:
        super().__init__(
            f"session {session_id!r}: expected the log to end at seq {expected_seq}, "
            f"but it ends at {actual_seq}; another writer appended first. Re-read the log "
            f"and retry, or give each writer its own session."
        )
        self.session_id = session_id
        self.expected_seq = expected_seq
        self.actual_seq = actual_seq


class SessionNotFound(SessionError, LogError, LookupError):
    """The store holds no session with this id, and the caller did not ask to create one."""

    def __init__(self, session_id: str) -> None:
        super().__init__(
            f"session {session_id!r} is not in the store: check the id (the store's "
            f"sessions() lists them), or pass create=True to start a new session under it"
        )
        self.session_id = session_id


class SessionInUse(SessionError, LogError):
    """Someone else has the session open: a session has one owner at a time.

    Raised when a session is opened while another :meth:`~engine.Session.open` block (in
    this process or another one) still holds it. Nothing was written.
    """

    def __init__(self, session_id: str, where: str = "") -> None:
        super().__init__(
            f"session {session_id!r} is in use: another process (or another Session.open "
            f"in this one) has it open{f' ({where})' if where else ''}. Wait until that "
            f"block ends, then open it again"
        )
        self.session_id = session_id
