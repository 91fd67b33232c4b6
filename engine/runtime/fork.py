"""Fork: a new session from a prefix of an old one, for "what if the model had…" debugging.

The new session holds copies of the old one's first records (its id in each, and in its
``session_started`` metadata where it came from: ``{"forked_from": {"session_id", "seq"}}``).
Open it with ``Session.open(store, session_id=new_id, ...)`` and a different model, policy or
tools, then ``resume()`` (or ``prompt()`` if the prefix ends between turns): calls the prefix
left open continue as after a restart. The old session is not changed.

A fork never vouches for records nobody checked: copies written to a store that seals with a
key (:func:`events.stores.base.is_keyed`) must come from a store that verified them with a
key, since sealing them with it would make a forged record look like the key holder's.

A fork writes like any writer: it claims the new session in the store it writes to while it
writes it, and an id someone else holds (an open session, in this process or another) is
refused before anything is written.
"""

from __future__ import annotations

import uuid

import attrs

from events.stores import EventStore
from events.stores.base import is_keyed
from events.types import SCHEMA_VERSION, SessionStarted

from ..core.reducers import fold

__all__ = ["fork"]


async def fork(
    store: EventStore,
    session_id: str,
    *,
    at: int,
    new_session_id: str | None = None,
    into: EventStore | None = None,
) -> str:
    """Copy records ``1..at`` of ``session_id`` into a new session and return its id.

    ``into`` is the store to write to (default: the same store). The new session is claimed
    there (:meth:`~events.stores.EventStore.claim`) while it is written, as
    :meth:`~engine.Session.open` claims what it writes. Raises ``ValueError`` if the
    session does not exist, ``at`` is outside it, the new id is already taken, or ``into``
    seals with a key and ``store`` did not verify the records with one;
    :class:`~events.errors.SessionInUse` if someone else holds the new id (an open session,
    in this process or another), and then nothing is written.
    """
    target = into if into is not None else store
    if is_keyed(target) and not is_keyed(store):
        raise ValueError(
            f"the records of session {session_id!r} come from a store without a key, so "
            f"nothing verified them, and the target seals with a key: the copies would look "
            f"like the key holder's. Read the session from a store given the key"
        )
    records = await store.read(session_id)
    if not records:
        raise ValueError(f"there is no session {session_id!r} to fork")
    if not 1 <= at <= len(records):
        raise ValueError(
            f"--at must be a seq of session {session_id!r}: 1 to {len(records)}, not {at}"
        )
    new_id = new_session_id or uuid.uuid4().hex
    prefix = records[:at]
    fold(prefix)  # a prefix of a consistent log is consistent; check, so no bad fork is written
    first = prefix[0].event
    assert isinstance(first, SessionStarted)
    origin = {"session_id": session_id, "seq": at}
    copies = [
        attrs.evolve(
            record,
            session_id=new_id,
            version=SCHEMA_VERSION,  # the copies are written now, in today's format
            event=SessionStarted(metadata={**first.metadata, "forked_from": origin},
                                 settings=first.settings)
            if index == 0
            else record.event,
        )
        for index, record in enumerate(prefix)
    ]
    # a writer like any: the new session is claimed while it is written (SessionInUse if
    # another process or block holds it), so no one else writes it meanwhile
    with target.claim(new_id):
        if await target.last_seq(new_id):
            raise ValueError(f"session {new_id!r} already exists; choose another id")
        await target.append(new_id, copies, 0)
    return new_id
