"""The hash chain that makes a log tamper-evident: sealing lines, and checking them.

How a line is sealed into its session's chain (its ``"hash"`` field, of the previous record's
hash and the line's canonical bytes) is :mod:`events.sealing`, whose names this module gives
too; this module checks chains.

Because each hash covers the one before it, changing, removing, inserting or reordering a
record breaks the chain at that record, and a changed byte in record N breaks N's own hash,
so :func:`verify_lines` names N exactly. What the chain cannot see is the loss of a session's
*last* records (nothing after them is left to break): anchor a session's head hash out of band
to cover that (:class:`Anchor`). ``docs/integrity.md`` has the whole threat model.

Version 1 records (written before the chain existed) carry no hash; without a key they are
reported as not chained, never as broken. A session continued by this code chains its first new
record from :data:`GENESIS`. With a key nothing unchained is accepted: whoever can write the
file can strip every hash and call the records version 1, so a keyed check refuses them
(:func:`check_link`, which a keyed store applies to every record it hands out).

A database store keeps each session's last seq and head in a table of sessions and chains the
next append onto it, so that table takes part in the chain: :func:`row_problem` says whether a
row agrees with its session's last record, which a store checks before chaining onto it and
:class:`ChainVerifier` (given the ``rows``) checks for every session.

Pure functions and values only: no I/O. :func:`events.stores.jsonl.verify_jsonl` streams a
file through :func:`verify_lines`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .artifacts import artifact_of, artifact_problem
from .chainreport import Anchor, Break, SessionChain, VerifyReport
from .codec import decode_record, loads_strict
from .errors import CodecError
from .sealing import (GENESIS, HASH_FIELD, SEALED_TAIL, link, seal, seal_bytes, sealed_hash,
                      unseal)

__all__ = [
    "GENESIS",
    "HASH_FIELD",
    "Anchor",
    "ArtifactLoader",
    "Break",
    "ChainVerifier",
    "SEALED_TAIL",
    "LinkError",
    "SessionChain",
    "VerifyReport",
    "check_link",
    "link",
    "row_problem",
    "seal",
    "seal_bytes",
    "sealed_hash",
    "unseal",
    "verify_lines",
]


_CHANGED = "the record was changed"

#: How a verifier reads an artifact a record names: ``(session_id, call_id, sha256)`` to its
#: bytes as the store holds them, or ``None`` if it holds none (:mod:`events.artifacts`).
ArtifactLoader = Callable[[str, str, str], "bytes | None"]
_KEY_HINT = (
    "no record has verified yet: if the log was written with an HMAC key, verify it with "
    "--key-file or --key-env (plain SHA-256 cannot check an HMAC chain)"
)
_DOWNGRADE_HINT = (
    "or a chained record before it was rewritten as version 1 (this record, the session's "
    "first chained one, was checked as linking from the genesis value)"
)
_WRONG_KEY_HINT = (
    "no record has verified with this key: the key is probably wrong (it is the key file's "
    "exact bytes, a trailing newline included)"
)
_ROW_HINT = (
    "the row was changed outside the store, or records were removed from or added past the "
    "session's end; the store appends nothing to the session until they agree"
)
_NOT_CHAINED = (
    "the record is not chained (schema version 1, no hash), and a key was given: every record "
    "of a keyed log carries an HMAC"
)
_NOT_CHAINED_HINT = (
    "a chained record rewritten as version 1 with its hash stripped, or a record written "
    "before the chain existed: a keyed log holds only records sealed with its key"
)


# -- one link -----------------------------------------------------------------------------


class LinkError(Exception):
    """A record that does not link into its session's chain: what is wrong (``problem``), a
    likely cause (``hint``, or ``None``), and whether it is a plain mismatch of the hash
    (``mismatch``: the bytes, the previous hash or the key differ from the writer's)."""

    def __init__(self, problem: str, hint: str | None = None, *, mismatch: bool = False) -> None:
        super().__init__(problem)
        self.problem = problem
        self.hint = hint
        self.mismatch = mismatch


def check_link(
    line: bytes,
    version: int,
    digest: str | None,
    prev: str,
    key: bytes | None = None,
    *,
    first: bool = False,
) -> str | None:
    """Check one stored line against its session's chain and return its hash.

    ``line`` is the line's bytes without its newline; ``version`` and ``digest`` are the
    record's schema version and ``"hash"`` as decoded from it (``None`` when it has none);
    ``prev`` is the hash of the session's record before it (:data:`GENESIS` for the first, or
    after version 1 records). ``first`` says no record has verified yet, so that a mismatch
    hints at a missing or wrong key. Returns ``None`` for a version 1 record checked without a
    key (not chained: there is nothing to check); with a key, such a record is refused.
    Raises :class:`LinkError`.
    """
    if version < 2:
        if key is None:
            return None
        raise LinkError(_NOT_CHAINED, _NOT_CHAINED_HINT)
    if digest is None:
        raise LinkError(
            "the record has no hash, though version 2 records are chained: the hash was "
            "removed, or the line was not written by a store"
        )
    parts = unseal(line)
    if parts is None:
        raise LinkError(
            "the hash is not the line's last field, written the way a store writes it: "
            "the line was rewritten"
        )
    body, stored = parts
    if link(prev, body, key) == stored:
        return stored
    if key is not None and link(prev, body) == stored:
        raise LinkError(
            "the record is sealed with plain SHA-256, not with an HMAC of this key",
            "it was written without the key, or rewritten by someone who does not hold it",
        )
    kind = "hash" if key is None else "HMAC"
    hint = (_KEY_HINT if key is None else _WRONG_KEY_HINT) if first else None
    raise LinkError(f"{kind} does not match ({_CHANGED})", hint, mismatch=True)


# -- a database store's table of sessions -------------------------------------------------


def row_problem(row: tuple[int, str] | None, last: tuple[int, str] | None) -> str | None:
    """What is wrong with a session's row in a database store's table of sessions, or
    ``None`` if nothing is: ``row`` is the last seq and head the row keeps (what the next
    append chains onto; ``None`` if the session has no row), ``last`` the seq and hash of the
    session's last record (:data:`GENESIS` if it is not chained; ``None`` if the session has
    no records). They must agree: a store that chained onto a row that does not would seal an
    honest record onto a forged head, and the chain would then blame that record."""
    if row == last:
        return None
    if row is None:
        assert last is not None
        return (f"the session has records (up to seq {last[0]}) but no row in the table of "
                f"sessions")
    said = f"its row in the table of sessions says it ends at seq {row[0]} with head {row[1]}"
    if last is None:
        return f"{said}, but it has no records"
    return f"{said}, but its last record is seq {last[0]} with hash {last[1]}"


# -- the verifier -------------------------------------------------------------------------


class _Chain:
    __slots__ = ("chained", "head", "last_seq", "records", "unchained")

    def __init__(self) -> None:
        self.records = self.chained = self.unchained = self.last_seq = 0
        self.head: str | None = None


_FIELDS = _Chain.__slots__




class ChainVerifier:
    """Checks lines one at a time, in file order, and stops at the first broken link.

    Memory grows with the number of sessions, not of records. ``session`` limits the check to
    one session (a line that cannot be read still counts: it may have been that session's).

    ``rows`` is a database store's table of sessions (each session's last seq and head, by
    its id), which takes part in the chain: the report checks that every session with a row
    or records ends where its row says (:func:`row_problem`), and names the first row that
    does not (its break has no line and no seq: it is not a record).

    ``artifacts`` reads the artifacts records name (the whole of a result too large for the
    log): each must be there with the bytes its record's hash names, else the record that
    names it is the broken link. Without it, artifacts are not checked.
    """

    def __init__(
        self,
        key: bytes | None = None,
        *,
        session: str | None = None,
        anchors: Iterable[Anchor] = (),
        rows: Mapping[str, tuple[int, str]] | None = None,
        artifacts: ArtifactLoader | None = None,
    ) -> None:
        self._key = key
        self._artifacts = artifacts
        self._session = session
        self._anchors = {(a.session_id, a.seq): a.hash for a in anchors}
        self._rows = rows
        self._chains: dict[str, _Chain] = {}
        self._lines = 0
        self._verified = 0
        self.broken: Break | None = None

    def feed(self, number: int, raw: bytes) -> bool:
        """Check line ``number`` (its bytes, newline included); ``False`` once broken."""
        if self.broken is not None:
            return False
        self._lines = number
        obj: Any = None
        try:
            line = raw[:-1] if raw.endswith(b"\n") else raw
            try:
                obj = loads_strict(line)
            except ValueError as exc:
                if line is raw:  # only the last line lacks a newline
                    raise LinkError(
                        "the line has no newline at its end and is not a whole record: a "
                        "torn write (a crash during an append; a store opening the log drops "
                        "it) or a changed byte"
                    ) from exc
                raise LinkError(f"not valid JSON: {exc}") from exc
            self._check(line, obj)
        except LinkError as exc:
            session, seq = _where(obj)
            self.broken = Break(
                line=number, problem=exc.problem, session_id=session, seq=seq, hint=exc.hint
            )
            return False
        return True

    def report(self) -> VerifyReport:
        """The report; call it after the last line (it checks the rows, and that the anchors
        were all reached)."""
        if self.broken is None and self._rows is not None:
            self.broken = self._check_rows(self._rows)
        if self.broken is None:
            for (session, seq), _ in self._anchors.items():
                chain = self._chains.get(session)
                last = chain.last_seq if chain is not None else 0
                if last < seq:
                    self.broken = Break(
                        line=None,
                        session_id=session,
                        seq=seq,
                        problem=(
                            f"the session ends at seq {last}, before the anchored seq {seq}: "
                            f"records were removed from its end"
                        ),
                        hint="or the anchor belongs to another log",
                    )
                    break
        chains = tuple(
            SessionChain(session_id=session, **{name: getattr(chain, name) for name in _FIELDS})
            for session, chain in self._chains.items()
        )
        return VerifyReport(
            keyed=self._key is not None,
            lines=self._lines,
            sessions=chains,
            broken=self.broken,
            anchors=len(self._anchors),
        )

    def _check_rows(self, rows: Mapping[str, tuple[int, str]]) -> Break | None:
        """The first session, of those with a row or records, whose row does not agree with
        its records."""
        for session in dict.fromkeys([*rows, *self._chains]):
            if self._session is not None and session != self._session:
                continue
            chain = self._chains.get(session)
            last = (chain.last_seq, chain.head or GENESIS) if chain is not None else None
            problem = row_problem(rows.get(session), last)
            if problem is not None:
                return Break(line=None, problem=problem, session_id=session, hint=_ROW_HINT)
        return None

    def _check(self, line: bytes, obj: Any) -> None:
        try:
            record = decode_record(obj)
        except CodecError as exc:
            raise LinkError(f"not a valid record: {exc}") from exc
        if self._session is not None and record.session_id != self._session:
            return
        chain = self._chains.get(record.session_id) or _Chain()
        _check_seq(record.seq, chain.last_seq)
        if record.version < 2 and chain.chained:
            raise LinkError(
                "a version 1 record (not chained) follows chained records of its "
                "session: a chained record was rewritten as version 1"
            )
        try:
            digest = check_link(line, record.version, obj.get(HASH_FIELD), chain.head or GENESIS,
                                self._key, first=self._verified == 0)
        except LinkError as exc:
            if exc.mismatch and chain.unchained and not chain.chained:
                exc.hint = "; ".join(filter(None, (exc.hint, _DOWNGRADE_HINT)))
            raise
        anchored = self._anchors.get((record.session_id, record.seq))
        if anchored is not None and anchored != digest:
            raise LinkError(
                f"the record's hash is {digest or 'missing'}, not the anchored {anchored}: "
                f"the session was rewritten since the anchor was taken",
                "or the anchor belongs to another log",
            )
        if self._artifacts is not None and (named := artifact_of(record)) is not None:
            call_id, sha256 = named
            problem = artifact_problem(self._artifacts(record.session_id, call_id, sha256),
                                       sha256)
            if problem is not None:
                raise LinkError(
                    f"the artifact of call {call_id} ({sha256}) {problem}",
                    "restore the artifact from a copy of the store; the record holds what "
                    "the model read")
        if digest is None:
            chain.unchained += 1
        else:
            chain.head = digest
            chain.chained += 1
            self._verified += 1
        chain.last_seq = record.seq
        chain.records += 1
        self._chains.setdefault(record.session_id, chain)


def verify_lines(
    lines: Iterable[tuple[int, bytes]],
    key: bytes | None = None,
    *,
    session: str | None = None,
    anchors: Iterable[Anchor] = (),
) -> VerifyReport:
    """Check a log's lines (``(line number, bytes with newline)``, in file order) and report
    the first broken link and each session's head. See :class:`ChainVerifier`."""
    verifier = ChainVerifier(key, session=session, anchors=anchors)
    for number, raw in lines:
        if not verifier.feed(number, raw):
            break
    return verifier.report()


def _check_seq(seq: int, last: int) -> None:
    if seq == last + 1:
        return
    missing = "the records before it are missing" if last == 0 else "records are missing"
    if seq < 1:
        problem = f"seq {seq}: seqs start at 1"
    elif seq <= last:
        problem = f"seq {seq} after seq {last}: a record of this session is repeated or moved"
    elif last == 0:
        problem = f"the session's first record has seq {seq}: {missing}"
    else:
        problem = f"seq {seq} after seq {last}: {missing}, or out of order"
    raise LinkError(f"chain broken: {problem}")


def _where(obj: Any) -> tuple[str | None, int | None]:
    """The session and seq a line claims, as far as it can be read."""
    if not isinstance(obj, dict):
        return None, None
    session, seq = obj.get("session_id"), obj.get("seq")
    return (
        session if isinstance(session, str) else None,
        seq if isinstance(seq, int) and not isinstance(seq, bool) else None,
    )
