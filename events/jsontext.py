"""JSON text for log lines: the one compact encoder and the strict reader, each built once.

What :mod:`events.codec` writes and reads a line with, apart from what a record means: the
standard library's C encoder and scanner, configured once (``json.dumps`` and ``json.loads``
build a new encoder or decoder on every call, which costs as much as a small record), and a
reader that accepts only JSON, with msgspec's compiled parser in front of it
(:mod:`events.fast.parse`). Pure: no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from .fast.parse import UNPARSED
from .fast.parse import parse as _PARSE

__all__ = ["dumps_compact", "dumps_str", "loads_reference", "loads_strict"]


def _unknown(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


# ``json.dumps`` builds a new encoder for every call, which costs as much as encoding a small
# record: this one is built once. Same output as ``json.dumps(obj, ensure_ascii=False,
# separators=(",", ":"), allow_nan=False)``; a value that contains itself is a ValueError, as
# there, though found by its depth rather than by a mark.
_MAKE_ENCODER = getattr(json.encoder, "c_make_encoder", None)
_ENCODE_TEXT: Callable[[Any, int], Any] | None = (
    None if _MAKE_ENCODER is None
    else _MAKE_ENCODER(None, _unknown, json.encoder.encode_basestring, None, ":", ",", False,
                       False, False)
)


#: A ``str`` as :func:`dumps_compact` writes it inside an object: quoted, escaped, non-ASCII
#: kept as is.
dumps_str: Callable[[str], str] = json.encoder.encode_basestring


def dumps_compact(obj: dict[str, Any]) -> str:
    """``obj`` as compact JSON, non-ASCII kept as is, ``NaN`` refused (see above)."""
    if _ENCODE_TEXT is None:
        return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    try:
        return "".join(_ENCODE_TEXT(obj, 0))
    except RecursionError:
        raise ValueError("the record is nested too deeply (or contains itself)") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


# ``json.loads(line, parse_constant=...)`` builds a new decoder for every line: built once.
_STRICT = json.JSONDecoder(parse_constant=_no_constant)
# the decoder's scanner: one value from an index (typeshed does not declare the attribute)
_SCAN: Callable[[str, int], tuple[Any, int]] = getattr(_STRICT, "scan_once")


def loads_strict(line: str | bytes) -> Any:
    """``json.loads`` that accepts only JSON: no ``NaN``/``Infinity`` (which ``json`` allows
    by default), and a line nested too deeply to parse is a ``ValueError``, not a crash.

    msgspec's parser reads it first (:mod:`events.fast.parse`, the same values about three
    times faster); any text it refuses is read by :func:`loads_reference`, which says what is
    wrong.
    """
    kind = type(line)
    if kind is bytes or kind is str:
        value = _PARSE(line)
        if value is not UNPARSED:
            return value
    return loads_reference(line)


def loads_reference(line: str | bytes) -> Any:
    """:func:`loads_strict` with the standard library's scanner alone: the reference that
    msgspec's parser is held to (``tests/events/test_compiled_parse.py``) and measured against
    (``benchmarks/codec.py``)."""
    try:
        if type(line) is bytes and line[:2] == b'{"':
            # a record as stores write it: UTF-8 (what json.detect_encoding makes of bytes that
            # start so), one object, then nothing or a newline; anything else the long way
            text = line.decode("utf-8", "surrogatepass")
            try:
                obj, end = _SCAN(text, 0)
            except StopIteration as err:
                raise json.JSONDecodeError("Expecting value", text, err.value) from None
            if end == len(text) or (end == len(text) - 1 and text[end] == "\n"):
                return obj
            return _STRICT.decode(text)
        if isinstance(line, str):
            if line.startswith("\ufeff"):  # as json.loads says of a str
                raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)",
                                           line, 0)
            return _STRICT.decode(line)
        if not isinstance(line, (bytes, bytearray)):
            raise TypeError(f"a line is str or bytes, not {type(line).__name__}")
        return _STRICT.decode(line.decode(json.detect_encoding(line), "surrogatepass"))
    except RecursionError:
        raise ValueError("nested too deeply to read") from None
