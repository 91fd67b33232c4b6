"""The contract every log store keeps, and the checks every backend shares.

A store holds the records of many sessions. Each session is an append-only sequence of
:class:`~events.types.Record`\\ s with seqs ``1, 2, 3, ...``. Writers append in batches with
optimistic concurrency: they say which seq they believe the session ends at, and a store whose
session ends elsewhere refuses with :class:`~events.errors.ConflictError`. That makes a stale
writer (another task, another process) fail loudly instead of interleaving its records.

The checks live here, once, so that every backend accepts and refuses exactly the same
batches: :func:`check_batch` for the shape of a batch, :func:`check_conflict` for the seq, and
:func:`encode_batch` for "this batch can be written *and read back*". :func:`encode_batch` also
seals the lines into the session's hash chain (:mod:`events.integrity`), so every backend that
stores lines chains them the same way and one verifier checks them all.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Callable, Sequence
from types import TracebackType
from typing import Protocol, Self, runtime_checkable

import trio

from ..codec import decode_line, encode_stored
from ..fast.prepared import Encodings
from ..errors import CodecError, ConflictError, SessionInUse
from ..integrity import GENESIS, seal_bytes
from ..types import SCHEMA_VERSION, Record

__all__ = [
    "ArtifactStore",
    "Claim",
    "Claims",
    "ClosingStore",
    "EventStore",
    "InlineStore",
    "append_nowait",
    "check_artifact",
    "check_batch",
    "check_conflict",
    "encode_batch",
    "encode_bodies",
    "is_keyed",
    "keeps_artifacts",
    "seal_lines",
]


@runtime_checkable
class EventStore(Protocol):
    """Where sessions' records live. Backends: :class:`~events.stores.MemoryStore`,
    :class:`~events.stores.JsonlStore`, :class:`~events.stores.SqliteStore`.

    The methods are ``async`` so that a backend may do real I/O (a database, a socket) without
    blocking the event loop; the embedded backends do fast local work inline instead.
    """

    async def append(self, session_id: str, records: Sequence[Record], expected_seq: int) -> None:
        """Store ``records`` at the end of the session, all of them or none.

        ``expected_seq`` is the seq of the last record the writer believes the session has
        (0 for a new session). Raises ``ValueError`` if the batch is malformed (a record of
        another session, seqs that do not run ``expected_seq + 1, expected_seq + 2, ...``),
        :class:`~events.errors.CodecError` if a record cannot be written and read back, and
        :class:`~events.errors.ConflictError` if the session does not end at ``expected_seq``.
        The batch is checked before the conflict. An empty batch stores nothing but is still
        checked for a conflict.
        """
        ...

    async def read(self, session_id: str, after: int = 0) -> list[Record]:
        """The session's records with ``seq > after``, in seq order; ``[]`` if unknown."""
        ...

    async def last_seq(self, session_id: str) -> int:
        """The seq of the session's last record; 0 for an unknown session."""
        ...

    def follow(self, session_id: str, after: int = 0) -> AsyncIterator[Record]:
        """Every record of the session with ``seq > after``, in seq order, then each new one
        as it is appended (through this store object or, for a store shared between store
        objects and processes, through any of them), until the caller stops iterating or is
        cancelled. A follower misses nothing and never blocks a writer; an unknown session is
        followed until it starts. Use it as ``async for record in store.follow(sid):``.
        """
        ...

    async def sessions(self) -> list[str]:
        """Every session id, in order of first appearance."""
        ...

    def claim(self, session_id: str) -> Claim:
        """Make the caller the session's one owner until the claim is released.

        Raises :class:`~events.errors.SessionInUse` at once (it never waits) if someone holds
        it: another claim on this store, or, for a store shared between processes, in another
        process. :meth:`~engine.Session.open` claims the session it opens for as long as its
        block runs. Claiming changes nothing in the log; an unknown session may be claimed.
        """
        ...

    def close(self) -> None:
        """Release the store's resources. Idempotent; the store is unusable afterwards."""
        ...


@runtime_checkable
class ArtifactStore(Protocol):
    """What a store that keeps artifacts adds to :class:`EventStore`: the whole of a result
    too large for the log, named by its session, its call and the SHA-256 of its bytes
    (:mod:`events.artifacts`; docs/stores.md, "Artifacts"). A store without these methods
    keeps no artifacts: a result over the session's ``max_result_bytes`` fails its call as
    ``too_large`` there, as it always did.

    The record that names an artifact is appended after :meth:`put_artifact` returned, so a
    log never names an artifact its store was not given; an artifact no record names (its
    call was cancelled in between) is harmless, and nothing reads it."""

    async def put_artifact(self, session_id: str, call_id: str, sha256: str,
                           data: bytes) -> None:
        """Keep ``data`` under its name, durably as the store keeps a batch. Keeping the same
        name again is a no-op. ``ValueError`` if ``sha256`` is not the hash of ``data``."""
        ...

    async def get_artifact(self, session_id: str, call_id: str, sha256: str) -> bytes | None:
        """The bytes kept under the name, as they are now (the caller checks them against the
        hash: :func:`events.artifacts.decode_artifact`); ``None`` if there are none."""
        ...


def keeps_artifacts(store: object) -> bool:
    """Whether ``store`` keeps artifacts (:class:`ArtifactStore`)."""
    return callable(getattr(store, "put_artifact", None)) and callable(
        getattr(store, "get_artifact", None))


def check_artifact(sha256: str, data: bytes) -> None:
    """Refuse (``ValueError``) an artifact whose bytes are not the ones its name's hash says:
    what every store checks before keeping one."""
    if not isinstance(data, bytes):
        raise TypeError(f"an artifact is bytes, not {type(data).__name__}")
    if hashlib.sha256(data).hexdigest() != sha256:
        raise ValueError(f"the artifact's bytes do not have the SHA-256 {sha256!r} it is named "
                         f"by: make the name with events.artifacts.encode_artifact")


class Claim:
    """A store's hold on one session (see :meth:`EventStore.claim`). :meth:`release` ends it
    (once; again is a no-op); usable as ``with store.claim(session_id):``."""

    __slots__ = ("_release",)

    def __init__(self, release: Callable[[], None]) -> None:
        self._release: Callable[[], None] | None = release

    def release(self) -> None:
        """Let someone else claim the session."""
        release, self._release = self._release, None
        if release is not None:
            release()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()


class Claims:
    """The sessions claimed through one store object: the in-process half of ownership. A
    store shared between processes adds its own cross-process lock on top."""

    def __init__(self, store: str) -> None:
        self._store = store
        self._held: set[str] = set()

    def claim(self, session_id: str, release: Callable[[], None] = lambda: None) -> Claim:
        """Hold ``session_id`` in this process; ``release`` runs when the claim ends."""
        if session_id in self._held:
            raise SessionInUse(session_id, f"claimed through this {self._store}")
        self._held.add(session_id)

        def end() -> None:
            self._held.discard(session_id)
            release()

        return Claim(end)


class ClosingStore:
    """A store usable as ``with Store(...) as store:``; it closes on the way out."""

    #: the encodings of the records that repeat from session to session, which this store
    #: works out once per content (:class:`~events.fast.prepared.Encodings`)
    encodings: Encodings

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class InlineStore(ClosingStore):
    """A store whose ``append`` does all its work inline, without awaiting: it only calls
    :meth:`append_nowait`, the same append as a plain function.

    A writer that holds such a store may call :meth:`append_nowait` itself (see
    :func:`append_nowait`): no trip through the event loop, and no need to shield the write
    from cancellation, since nothing in it can be interrupted. If it raises
    :class:`trio.WouldBlock` (it would have to wait: for a lock, a disk), nothing was stored
    and the writer awaits :meth:`append`, which may wait (off the event loop) and is
    cancelled only before it has written anything. A subclass that overrides ``append`` (to
    wait for something, or to watch the writes) is written through ``append`` again, as any
    store.
    """

    def append_nowait(self, session_id: str, records: Sequence[Record], expected_seq: int) -> None:
        """:meth:`EventStore.append`, done now; :class:`trio.WouldBlock` if it cannot be."""
        raise NotImplementedError

    async def append(self, session_id: str, records: Sequence[Record], expected_seq: int) -> None:
        """Append a batch, all or nothing; see :meth:`EventStore.append`: now if it can be,
        else through :meth:`append_waiting`."""
        try:
            self.append_nowait(session_id, records, expected_seq)
        except trio.WouldBlock:
            await self.append_waiting(session_id, records, expected_seq)

    async def append_waiting(
        self, session_id: str, records: Sequence[Record], expected_seq: int
    ) -> None:
        """The append when :meth:`append_nowait` would block: it may wait (off the event
        loop), and is cancelled only before it has written anything. A store whose
        ``append_nowait`` never blocks need not implement it."""
        raise NotImplementedError


def append_nowait(store: object) -> Callable[[str, Sequence[Record], int], None] | None:
    """The store's :meth:`InlineStore.append_nowait` if its ``append`` is just that one
    (an :class:`InlineStore` whose ``append`` no subclass replaced); ``None`` otherwise."""
    if isinstance(store, InlineStore) and type(store).append is InlineStore.append:
        return store.append_nowait
    return None


def is_keyed(store: object) -> bool:
    """Whether ``store`` seals what it writes with a key and verifies with it every record it
    hands out: it says so with a ``keyed`` attribute that is ``True``
    (``JsonlStore(path, key=...)``). A store without one vouches for nothing it reads."""
    return getattr(store, "keyed", False) is True


def check_batch(session_id: str, records: Sequence[Record], expected_seq: int) -> None:
    """Raise ``ValueError`` unless ``records`` may follow ``expected_seq`` in ``session_id``.

    A malformed batch is a bug in the caller, not a race, so it is a ``ValueError`` and not a
    :class:`~events.errors.ConflictError`: retrying after a re-read would not fix it.
    """
    if isinstance(expected_seq, bool) or not isinstance(expected_seq, int) or expected_seq < 0:
        raise ValueError(f"expected_seq must be an int >= 0, not {expected_seq!r}")
    wanted = expected_seq
    for record in records:
        wanted += 1
        if (type(record) is Record or isinstance(record, Record)) and (
            record.session_id == session_id and record.seq == wanted
        ):
            continue
        index = wanted - expected_seq - 1
        if not isinstance(record, Record):
            raise ValueError(f"batch item {index} is a {type(record).__name__}, not a Record")
        if record.session_id != session_id:
            raise ValueError(
                f"batch item {index} belongs to session {record.session_id!r}, not "
                f"{session_id!r}: a batch appends to one session only"
            )
        if record.seq != wanted:
            raise ValueError(
                f"batch item {index} for session {session_id!r} has seq {record.seq}, "
                f"expected {wanted}: a batch must continue the session contiguously from "
                f"expected_seq + 1 = {expected_seq + 1}"
            )


def check_conflict(session_id: str, expected_seq: int, actual_seq: int) -> None:
    """Raise :class:`~events.errors.ConflictError` unless the session ends at
    ``expected_seq``."""
    if actual_seq != expected_seq:
        raise ConflictError(session_id, expected_seq, actual_seq)


def encode_bodies(records: Sequence[Record], encodings: Encodings | None = None) -> list[bytes]:
    """Each record's canonical line (:func:`~events.codec.encode_line`), UTF-8, unsealed.

    Every line is proven to read back before anything is stored, by the event's fast reader
    taking what the line was encoded from or else by decoding the line
    (:func:`~events.codec.encode_stored`): a record that encodes but would not decode (a
    ``bool`` where the schema says ``int``, a newer version) would otherwise poison the log, since every later open of the file would refuse it as corrupt. A record
    of an older version than :data:`~events.types.SCHEMA_VERSION` is refused too: stores
    write the current format only, and a record read from an old log keeps its old version
    (make a new one with ``attrs.evolve(record, version=SCHEMA_VERSION)`` to copy it).
    ``encodings``: the store's :class:`~events.fast.prepared.Encodings`, which encodes a record
    that repeats from session to session once per content. Raises
    :class:`~events.errors.CodecError` naming the record; nothing has been stored then.
    """
    bodies: list[bytes] = []
    for record in records:
        if record.version != SCHEMA_VERSION:
            age = "newer" if record.version > SCHEMA_VERSION else "older"
            raise CodecError(
                f"{_where(record)} has schema version {record.version}, {age} than "
                f"{SCHEMA_VERSION}, "
                f"the only version stores write"
                + (
                    ": copy it with attrs.evolve(record, version=SCHEMA_VERSION)"
                    if age == "older"
                    else ""
                )
            )
        try:
            data, text = encode_stored(record, encodings=encodings)
        except (KeyError, TypeError, ValueError) as exc:
            # KeyError: not an event class; TypeError/ValueError: not JSON (NaN, a set);
            # UnicodeEncodeError (a ValueError): a lone surrogate in a string.
            raise CodecError(f"{_where(record)} cannot be encoded: {exc!r}") from exc
        if text is not None:  # not proven by the encoding: decode the same JSON to prove it
            try:
                decode_line(text)
            except CodecError as exc:
                raise CodecError(f"{_where(record)} would not read back: {exc}") from exc
        bodies.append(data)
    return bodies


def _where(record: Record) -> str:
    return f"record seq {record.seq} of session {record.session_id!r}"


def seal_lines(
    bodies: Sequence[bytes], prev: str = GENESIS, key: bytes | None = None
) -> tuple[list[bytes], str]:
    """The canonical lines of one session's batch, sealed in order after hash ``prev`` (the
    session's head: :data:`~events.integrity.GENESIS` for a new session, or one whose last
    record is not chained), each with its trailing newline; and the new head."""
    lines: list[bytes] = []
    for body in bodies:
        line, prev = seal_bytes(body, prev, key, b"\n")
        lines.append(line)
    return lines, prev


def encode_batch(
    records: Sequence[Record], prev: str = GENESIS, key: bytes | None = None
) -> tuple[list[bytes], str]:
    """Each record as one sealed UTF-8 JSON line with its trailing newline, and the new head:
    :func:`encode_bodies` then :func:`seal_lines`. Raises
    :class:`~events.errors.CodecError` naming a record that cannot be written and read back.

    A backend that must learn ``prev`` under a lock (another writer may have appended) calls
    :func:`encode_bodies` first and :func:`seal_lines` under the lock.
    """
    return seal_lines(encode_bodies(records), prev, key)
