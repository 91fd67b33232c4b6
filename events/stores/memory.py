"""An in-process store: for tests, and for embedding where nothing must outlive the process."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from ..types import Record
from ..fast.prepared import Encodings
from .base import (Claim, Claims, InlineStore, check_artifact, check_batch, check_conflict,
                   encode_bodies)
from .following import Appended, follow_session

__all__ = ["MemoryStore"]


class MemoryStore(InlineStore):
    """Keeps each session's :class:`~events.types.Record`\\ s in a list, by session id.

    Records are frozen, so the store keeps the caller's objects and hands them back as they
    are: no copy, no decoding.

    With ``check_encodable`` (the default) every batch goes through the same encode-and-read-
    back check as :class:`~events.stores.JsonlStore` (the encoded lines are then dropped, not
    sealed), so
    that a test on this store refuses exactly what the file store would refuse. Turn it off
    only for speed, when the records are known to be good.

    The methods never await, so each one runs to completion without other tasks seeing a
    half-done change (and a session calls :meth:`append_nowait` directly). Not thread-safe: use it from one thread (one event loop).

    There is no hash chain here: the records are objects in this process, not bytes anyone
    could edit later, and nothing of them outlives it (see ``docs/integrity.md``).
    """

    def __init__(self, *, check_encodable: bool = True) -> None:
        self._check_encodable = check_encodable
        self._sessions: dict[str, list[Record]] = {}
        self._artifacts: dict[tuple[str, str, str], bytes] = {}
        self._claims = Claims("MemoryStore")
        self.encodings = Encodings()
        self._closed = False
        self._appended = Appended()

    def append_nowait(self, session_id: str, records: Sequence[Record], expected_seq: int) -> None:
        """Append a batch, all or nothing; see :meth:`EventStore.append`."""
        self._ensure_open()
        check_batch(session_id, records, expected_seq)
        check_conflict(session_id, expected_seq, self._last_seq(session_id))
        if not records:
            return
        if self._check_encodable:
            encode_bodies(records, self.encodings)  # encoded and proven to read back; nothing to seal here
        self._sessions.setdefault(session_id, []).extend(records)
        self._appended.notify()

    async def read(self, session_id: str, after: int = 0, limit: int | None = None
                   ) -> list[Record]:
        """The session's records with ``seq > after``, in seq order; ``[]`` if unknown. At
        most ``limit`` if given (as a follower reads)."""
        self._ensure_open()
        # Seqs run 1, 2, 3, ... so the record with seq n sits at index n - 1.
        first = max(after, 0)
        records = self._sessions.get(session_id, [])
        return list(records[first:] if limit is None else records[first:first + limit])

    async def last_seq(self, session_id: str) -> int:
        """The seq of the session's last record; 0 for an unknown session."""
        self._ensure_open()
        return self._last_seq(session_id)

    def follow(self, session_id: str, after: int = 0) -> AsyncIterator[Record]:
        """The session's records with ``seq > after``, then each one appended, until the
        caller stops (see :meth:`EventStore.follow`). Only this object appends to its
        records, so a follower waits for its appends and never polls."""
        return follow_session(self.read, self.last_seq, self._appended, session_id, after,
                              poll_interval=None)

    async def sessions(self) -> list[str]:
        """Every session id, in order of first appearance (dicts keep insertion order)."""
        self._ensure_open()
        return list(self._sessions)

    async def put_artifact(self, session_id: str, call_id: str, sha256: str,
                           data: bytes) -> None:
        """Keep the whole of a long result in memory (see
        :class:`~events.stores.base.ArtifactStore`)."""
        self._ensure_open()
        check_artifact(sha256, data)
        self._artifacts.setdefault((session_id, call_id, sha256), data)

    async def get_artifact(self, session_id: str, call_id: str, sha256: str) -> bytes | None:
        """The bytes kept under the name; ``None`` if there are none."""
        self._ensure_open()
        return self._artifacts.get((session_id, call_id, sha256))

    def claim(self, session_id: str) -> Claim:
        """Own ``session_id`` until the claim is released; a second claim of it is
        :class:`~events.errors.SessionInUse` (see :meth:`EventStore.claim`)."""
        self._ensure_open()
        return self._claims.claim(session_id)

    def close(self) -> None:
        """Forget every record. Idempotent; the store refuses to be used afterwards."""
        self._closed = True
        self._sessions = {}
        self._artifacts = {}
        self._appended.notify()  # a waiting follower's next read says the store is closed


    def _last_seq(self, session_id: str) -> int:
        records = self._sessions.get(session_id)
        return records[-1].seq if records else 0

    def _ensure_open(self) -> None:
        if self._closed:
            raise ValueError("the MemoryStore is closed")
