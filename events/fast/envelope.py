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
from operator import attrgetter

import msgspec

__all__ = ["read_envelope", "read_envelopes"]


# ``gc=False``: neither struct can hold a cycle (strings, numbers and an empty struct), and
# the cyclic collector, tracking the many a block of lines makes, would scan them again and
# again for nothing: a third of :func:`read_envelopes`' time.
class _Object(msgspec.Struct, gc=False):
    """Any JSON object, its members skipped (their syntax checked, their values not built)."""


class _Envelope(msgspec.Struct, forbid_unknown_fields=True, gc=False):
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
    if digest is not None and (len(digest) != 64 or not _lower_hex(digest)):
        return None
    if not _utf8(line):
        return None
    return envelope.session_id, envelope.seq, envelope.v, digest


def _lower_hex(text: str) -> bool:
    """Whether ``text`` is lowercase hex digits, two a byte: the one text of its bytes that
    ``bytes.hex`` writes back (a hash is 64 of them)."""
    try:
        return bytes.fromhex(text).hex() == text
    except ValueError:  # not hex digits
        return False


def _utf8(data: bytes) -> bool:
    """Whether ``data`` is UTF-8: what skipping an event's data does not check."""
    if data.isascii():
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


_VERSION, _SESSION, _SEQ, _TYPE, _HASH = map(
    attrgetter, ("v", "session_id", "seq", "type", "hash"))


def read_envelopes(block: bytes, version: int, types: Container[str]
                   ) -> tuple[list[str], list[int], list[str], list[int]] | None:
    """The sessions, seqs, chain hashes and lengths (newline included) of the lines of
    ``block`` (whole lines, each ending with its newline), if :func:`read_envelope` answers
    for every one of them and every one has a hash; else ``None``, and the caller reads the
    block line by line.

    The same decoder and the same checks as :func:`read_envelope`, each done once for the
    whole block instead of once a line: the decoder mapped over the lines, the versions and
    types compared as sets, the hashes checked as one text, the UTF-8 as one buffer (a
    newline cannot be part of a character, so the block is UTF-8 when every line is). Each
    line is still decoded on its own: a line cannot lend a value to the next.
    """
    lines = block.split(b"\n")
    lines.pop()  # what follows the last newline: nothing
    try:
        envelopes = list(map(_DECODE, lines))
    except (msgspec.DecodeError, RecursionError):
        return None
    if not envelopes:
        return [], [], [], []
    if set(map(_VERSION, envelopes)) != {version}:
        return None
    if not all(map(types.__contains__, set(map(_TYPE, envelopes)))):
        return None
    digests = list(map(_HASH, envelopes))
    if msgspec.UNSET in digests or set(map(len, digests)) != {64}:
        return None
    if not _lower_hex("".join(digests)) or not _utf8(block):
        return None
    return (list(map(_SESSION, envelopes)), list(map(_SEQ, envelopes)), digests,
            [len(line) + 1 for line in lines])
