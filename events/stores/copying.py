"""Moving sessions between stores with their hash chain intact, proven on arrival.

A session's chain (:mod:`events.integrity`) depends only on its records' canonical lines and
the key, never on where they are kept: the same records appended to another store, sealed
with the same key (or none), get the very same hashes. So :func:`copy_session` proves a copy
whole with the one verifier every store shares:

1. the source's chain is verified (a copy never seals again what a broken link shows
   changed), which gives the session's head: the hash of its last record;
2. the target must not know the session (a copy never overwrites or extends one);
3. the artifacts its records name (the whole of results too large for the log) go into the
   target first, then the records in **one** batch, so the session arrives whole or not at
   all, never naming an artifact the target lacks, and the store's conflict check stops a
   writer that started it meanwhile;
4. the target's chain is verified with the source's head as an anchor
   (:class:`~events.integrity.Anchor`): the copy ends at the same seq with the same hash, so
   every record arrived, in order, byte for byte, and every artifact with the bytes its
   record's hash names.

Both stores must keep a chain: a ``verify(session=..., anchors=...)`` method returning a
:class:`~events.integrity.VerifyReport`, as :class:`~events.stores.JsonlStore` and
:class:`~events.stores.SqliteStore` have.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import cast

from ..artifacts import artifact_of, artifact_problem
from ..errors import LogError
from ..integrity import Anchor, SessionChain, VerifyReport
from ..types import SCHEMA_VERSION, Record
from .base import ArtifactStore, EventStore, is_keyed, keeps_artifacts

__all__ = ["CopyError", "copy_session", "verified_chain"]

Verify = Callable[..., Awaitable[VerifyReport]]


class CopyError(LogError):
    """A session that cannot be copied, or a copy that did not arrive as it left. The
    message names the store, the session and what to do."""


def _name(store: object) -> str:
    """How messages name a store: its file, or its kind (a connection string may hold a
    password)."""
    path = getattr(store, "path", None)
    return path if isinstance(path, str) else type(store).__name__


def _verify(store: EventStore) -> Verify:
    verify = getattr(store, "verify", None)
    if verify is None:
        raise CopyError(
            f"{_name(store)} keeps no hash chain to check (it has no verify method): a copy "
            f"is proven by the chain on both sides, so copy between stores that keep one")
    return cast(Verify, verify)


async def verified_chain(
    store: EventStore, session_id: str, anchors: Iterable[Anchor] = ()
) -> SessionChain:
    """The chain of ``session_id`` in ``store`` once it verifies (with the store's key, if
    it has one, and the ``anchors``); :class:`CopyError` naming the first broken link, or an
    unknown session."""
    report = await _verify(store)(session=session_id, anchors=tuple(anchors))
    broken = report.broken
    if broken is not None:
        hint = f" ({broken.hint})" if broken.hint else ""
        where = ", ".join([*([f"line {broken.line}"] if broken.line is not None else []),
                           *([f"seq {broken.seq}"] if broken.seq is not None else [])])
        raise CopyError(
            f"{_name(store)}: session {session_id!r}'s chain does not verify"
            f"{f' at {where}' if where else ''}: {broken.problem}{hint}")
    for chain in report.sessions:
        if chain.session_id == session_id:
            return chain
    raise CopyError(f"{_name(store)} holds no session {session_id!r}")


async def copy_session(source: EventStore, target: EventStore, session_id: str) -> SessionChain:
    """Copy ``session_id`` from ``source`` into ``target``, which must not hold it yet, and
    prove it arrived whole (see the module docstring); the chain it has in ``target``.

    Open both stores with the same key, or both without one: the chain's hashes depend on
    it. Raises :class:`CopyError` when only one store has a key, the source's chain does not
    verify, the target already
    holds the session, a record is of an older schema version (its line could not be kept
    byte for byte: stores write the current version only), or the copy does not verify
    against the source's head; :class:`~events.errors.ConflictError` when another writer
    started the session in the target meanwhile. Nothing is written in any of these cases
    but the last, where the target holds what arrived, for inspection.
    """
    if is_keyed(source) != is_keyed(target):
        keyed, plain = (source, target) if is_keyed(source) else (target, source)
        raise CopyError(
            f"{_name(keyed)} is opened with a key and {_name(plain)} without one: a chain "
            f"sealed one way never verifies the other; open both with the same key")
    chain = await verified_chain(source, session_id)
    held = await target.last_seq(session_id)
    if held:
        raise CopyError(
            f"{_name(target)} already holds session {session_id!r} ({held} records): a copy "
            f"never overwrites or extends a session; copy into another store, or leave it out")
    records = await source.read(session_id)
    old = next((record for record in records if record.version != SCHEMA_VERSION), None)
    if old is not None:
        raise CopyError(
            f"{_name(source)}: session {session_id!r} holds records of schema version "
            f"{old.version} (seq {old.seq}), written by an older toolledger: stores write "
            f"version {SCHEMA_VERSION} only, so their lines cannot be copied byte for byte")
    await _copy_artifacts(source, target, session_id, records)
    await target.append(session_id, records, expected_seq=0)
    assert chain.head is not None  # a verified session of the current version is chained
    anchor = Anchor(session_id=session_id, seq=chain.last_seq, hash=chain.head)
    try:
        return await verified_chain(target, session_id, [anchor])
    except CopyError as exc:
        raise CopyError(f"the copy did not arrive as it left: {exc}") from exc


async def _copy_artifacts(source: EventStore, target: EventStore, session_id: str,
                          records: list[Record]) -> None:
    """Put every artifact the records name into ``target``, checked against its hash on the
    way (the source's ``verify`` checked them too, but they may have changed since)."""
    named = [name for record in records if (name := artifact_of(record)) is not None]
    if not named:
        return
    if not keeps_artifacts(target):
        raise CopyError(
            f"{_name(target)} keeps no artifacts, and session {session_id!r} has "
            f"{len(named)}: copy it into a store that keeps them (all of toolledger's do)")
    given, taken = cast(ArtifactStore, source), cast(ArtifactStore, target)
    for call_id, sha256 in named:
        data = await given.get_artifact(session_id, call_id, sha256)
        problem = artifact_problem(data, sha256)
        if problem is not None:
            raise CopyError(f"{_name(source)}: session {session_id!r}, call {call_id}: the "
                            f"artifact {sha256} {problem}; nothing was copied")
        assert data is not None
        await taken.put_artifact(session_id, call_id, sha256, data)
