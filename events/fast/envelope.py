"""A log line's envelope, read without its event: what indexing a JSONL log needs of a line.

Opening a :class:`~events.stores.JsonlStore` indexes every line of its file, and building each
line's event was most of that work (docs/performance.md, "Opening a big JSONL log"). The index
needs only the envelope: the session, the seq, the schema version, the event type's name and
the chain hash. :func:`read_envelope` reads those with msgspec's compiled parser into a small
struct (one call a line, no Python between its fields), and skips the event's data, checking
only that it is an object. Skipping still checks the JSON's syntax (strings, escapes, numbers,
nesting); it does not check that the bytes inside a skipped string are UTF-8, so a line that
is not ASCII is decoded as UTF-8 here too.

It is not the reference: :func:`events.codec.decode_stored_line` is. :func:`read_envelope`
answers only for a line the reference would read into a record with the same envelope,
up to what the codec checks inside the event's data (which only the full decode checks), and
returns ``None`` for anything else: a line of an older schema version (upcast by the
reference), an unknown or missing field, a field of another type, a malformed hash, any text
msgspec refuses. The caller then decodes the line with the reference, which says what is
wrong in its own words. ``tests/events/test_envelope.py`` holds the two to that, with
Hypothesis. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Container

import msgspec

__all__ = ["read_envelope"]


class _Object(msgspec.Struct):
    """Any JSON object, its members skipped (their syntax checked, their values not built)."""


class _Envelope(msgspec.Struct, forbid_unknown_fields=True):
    """The fields of a stored line other than its event's data, as the index needs them."""

    v: int
    session_id: str
    seq: int
    time: float
    type: str
    data: _Object
    #: the chain hash; unset for a line without one (``null`` is refused)
    hash: str | msgspec.UnsetType = msgspec.UNSET


_DECODE = msgspec.json.Decoder(_Envelope).decode


def read_envelope(line: bytes, version: int, types: Container[str]
                  ) -> tuple[str, int, int, str | None] | None:
    """The session, seq, schema version and chain hash (``None`` if it has none) of a stored
    ``line`` of schema ``version`` whose event type is one of ``types``; ``None`` for any line
    the reference must decide (see the module's docstring)."""
    try:
        envelope = _DECODE(line)
    except (msgspec.DecodeError, RecursionError):
        return None
    if envelope.v != version or envelope.type not in types:
        return None
    stored = envelope.hash
    digest = stored if isinstance(stored, str) else None
    if digest is not None:
        try:  # 64 lowercase hex digits: the one text of 32 bytes that bytes.hex writes back
            if len(digest) != 64 or bytes.fromhex(digest).hex() != digest:
                return None
        except ValueError:  # not hex digits
            return None
    if not line.isascii():
        try:
            line.decode("utf-8")  # what skipping data did not check
        except UnicodeDecodeError:
            return None
    return envelope.session_id, envelope.seq, envelope.v, digest
