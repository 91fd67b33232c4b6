"""A compiled JSON parser for log lines: msgspec's, in front of the standard library's.

Folding a log parses every line, and the ``json`` module's scanner was most of a line's
decoding (docs/performance.md, "A compiled codec"). msgspec's untyped decoder gives the same
value about three times faster. It is not the reference: :func:`events.jsontext.loads_strict`
is, and it asks :func:`parse` first, taking the standard library's path whenever this one
says :data:`UNPARSED`.

The two agree on every text msgspec accepts (``tests/events/test_compiled_parse.py`` holds
them to that, with Hypothesis): the same values, of the same types (integers past 64 bits
too). Where they differ, msgspec refuses and the reference decides, saying what it always
said: a number past the float range (``1e400``, which ``json`` reads as infinity), a lone
surrogate, written as ``\\udc80`` (which ``encode_line`` writes for a file name that is not
UTF-8) or held as it is by a ``str``, ``NaN``/``Infinity`` (which the reference refuses in
its own words), bytes that are not UTF-8, nesting too deep, and any malformed line. Only
exact ``bytes`` and ``str`` come here (a ``bytearray`` in UTF-16 is the reference's to
detect). Pure: no I/O.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

__all__ = ["UNPARSED", "parse"]

#: What :func:`parse` returns for a text it leaves to the reference.
UNPARSED: Final = object()

_DECODE = msgspec.json.Decoder().decode


def parse(line: str | bytes) -> Any:
    """The JSON value of ``line`` (exact ``str`` or ``bytes``), or :data:`UNPARSED` for any
    text msgspec refuses or might read otherwise than the reference."""
    try:
        return _DECODE(line)
    except (msgspec.DecodeError, RecursionError, UnicodeEncodeError):
        # (UnicodeEncodeError: a ``str`` holding a lone surrogate, which msgspec reads as
        # UTF-8 and the reference reads as it is)
        return UNPARSED
