"""The one codec: records to JSON-able dicts and JSON lines, and back.

This module is the only place that knows how events look as JSON. One :mod:`cattrs` converter
does every (un)structuring; the envelope of a record is written by hand so that a log reads
well with ``jq``::

    {"v": 2, "session_id": "s-1", "seq": 7, "time": 1767225600.0,
     "type": "tool_call_requested", "data": {"call_id": "1.0", "name": "stat_file", ...},
     "hash": "9f86d0…"}

:func:`encode_line` writes a record's *canonical line*, everything but ``"hash"``; a store
seals it (:mod:`events.integrity`) by appending the hash as the last field. Decoding checks
that a hash, if present, is 64 lowercase hex digits, and otherwise ignores it: the
:class:`~events.types.Record` is the plain fact, equal whatever store it came from.
Checking the chain is a separate step, made where the stored line is at hand
(:func:`events.integrity.check_link`: ``verify``, and a store given a key).

Versions. ``v`` is the record format's version. Older records are read through
:data:`UPCASTERS` (:mod:`events.upcasters`), one function per version step (a version-N record
dict to version N+1), applied in a loop, so each new version adds one function. A decoded
record keeps in ``Record.version`` the version it was *written* in (what an audit wants to
know); its fields are those of the current version. Version 1: the format before the hash
chain. Version 2: records carry ``"hash"``. Version 3: facts carry their data (settings,
failure details, rules, answers given at a pause) as fields.

Decoding is strict: an unknown event type, a newer version than this code writes, a missing
or unexpected field is a :class:`CodecError` that says which, never a silent skip.

Speed. Rebuilding a session folds every line of its log, so decoding is a hot path. The converter
is the reference path. The events written on every call (requested, policy, started,
completed, failed, ...) also have a hand-written reader (:mod:`events.fast.readers`) that takes only
the exact shape :func:`encode_record` writes, with the strict types, and builds the event
directly; anything else, valid or not, goes to the converter, which decides (and says what is
wrong). :func:`decode_record` is the one place that picks the path; ``decode_record(obj,
fast=False)`` takes the converter alone, so a benchmark and a property test can hold the two
side by side (docs/performance.md, "One codec": the readers make a fold about a fifth
faster, and the tests check that they agree with the converter on every event type). A line's
JSON is parsed by msgspec's compiled parser first (:mod:`events.fast.parse`, through
:func:`loads_strict`), the ``json`` module's reader deciding whatever it refuses; lines are
written by the ``json`` module's encoder, whose bytes the hash chain covers (docs/performance.md,
"A compiled codec", says why msgspec's encoder is not used).

The same readers make writing cheap: a store must know that a line reads back before it writes
it, and :func:`encode_stored` proves that with the reader taking the dict the line was encoded
from, instead of decoding the line again; ``encode_stored(record, fast=False)`` always leaves
the line to be decoded (the reference; docs/performance.md, "Encoding a record once"). When
the reader proves the event, the envelope around it (version, session, seq, time, type: exact
``str``, ``int`` and finite ``float``) is written by one format string instead of a dict for the
encoder to walk; the bytes are the reference's (``tests/events/test_codec_fast_path.py``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, Protocol, get_args

import cattrs
from cattrs.gen import make_dict_unstructure_fn, override
from cattrs.preconf.json import make_converter

from .errors import CodecError
from .fast.fastinit import builder
from .fast.readers import FAST, Fallback
from .jsontext import dumps_compact, dumps_str
from .jsontext import loads_strict as loads_strict
from .types import (
    SCHEMA_VERSION,
    ApprovalResolved,
    AssistantMessage,
    Event,
    FailureDetail,
    JsonPath,
    KeptResult,
    ModelToolCall,
    ModelView,
    PolicyDecided,
    Record,
    SessionSettings,
    SessionStarted,
    ToolCallBlocked,
    ToolCallCompleted,
    ToolCallDenied,
    ToolCallFailed,
    ToolProgress,
    ToolSnapshot,
    ToolSource,
)
from .upcasters import UPCASTERS, Upcaster

__all__ = [
    "EVENT_TYPES",
    "UPCASTERS",
    "converter",
    "decode_line",
    "decode_record",
    "decode_stored_line",
    "encode_line",
    "encode_line_bytes",
    "encode_record",
    "encode_stored",
    "proven_data",
    "type_name",
    "upcast",
]

converter = make_converter(forbid_extra_keys=True)


def _strict(kind: type[Any]) -> Any:
    # cattrs' default hooks coerce (``str(5)`` is "5"); a log must say exactly what it means.
    def structure(value: Any, _: Any) -> Any:
        if type(value) is kind or (kind is float and type(value) is int):
            return value
        raise TypeError(f"expected {kind.__name__}, got {type(value).__name__}")

    return structure


for _kind in (str, int, float, bool):
    converter.register_structure_hook(_kind, _strict(_kind))

def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


#: Every event class (each member of :data:`~events.types.Event`, the one list of them), by the
#: ``type`` name it has in the log.
EVENT_TYPES: dict[str, type[Any]] = {_snake(cls.__name__): cls for cls in get_args(Event)}
_NAMES: dict[type[Any], str] = {cls: name for name, cls in EVENT_TYPES.items()}

# Fields added after logs were written, optional with a default: left out of a line while they
# hold it, so a record that does not use one is the very line an older toolledger wrote (and
# hashes as it did), and a line without it reads as the default. (``rule`` and ``error`` came
# without a version step, the others with version 3, whose upcaster fills in what older lines
# said in words.) A failure's detail writes only the fields its kind uses. One table, so a
# class with two such fields gets one hook that omits both.
ADDED_FIELDS: dict[type[Any], tuple[str, ...]] = {  # (a nested class before its holder)
    FailureDetail: ("limit", "size", "type", "path", "problem", "value"),
    PolicyDecided: ("rule",),                # the rule that decided
    ToolCallBlocked: ("error",),             # a handler that failed
    ToolCallDenied: ("rule", "error"),       # the deny rule that matched; an approver that failed
    ModelView: ("max_bytes", "max_lines"),   # how much of a result the model reads
    SessionSettings: ("max_artifact_bytes", "model_view"),  # long outputs: kept, and cut
    SessionStarted: ("settings",),
    KeptResult: ("whole",),                  # the whole result, when the log holds it
    ToolCallCompleted: ("kept",),            # the model read a cut; where the whole is
    ApprovalResolved: ("later",),
    ToolCallFailed: ("detail",),
    ToolSource: ("hints", "hints_trusted"),  # what the server said, and if the host took it
    ToolSnapshot: ("source", "model_view"),  # a mounted MCP server's tool; a cut for the model
    ModelToolCall: ("model_name",),          # the name the tool had at the provider
    AssistantMessage: ("provider_content",),  # blocks the engine does not interpret
    ToolProgress: ("source", "progress", "total", "content"),  # a forwarded update's call;
                                                              # the numbers; streamed output
}
for _cls, _names in ADDED_FIELDS.items():
    _omitted: dict[str, Any] = {name: override(omit_if_default=True) for name in _names}
    converter.register_unstructure_hook(
        _cls, make_dict_unstructure_fn(_cls, converter, **_omitted))


def _structure_path(value: Any, _: Any) -> JsonPath:
    # keys and indices, strictly: not a string read as its characters, not a bool as an index
    if type(value) is not list or any(type(step) not in (str, int) for step in value):
        raise TypeError("a path is a list of object keys (strings) and list indices (integers)")
    return tuple(value)


converter.register_structure_hook_func(lambda kind: kind == JsonPath, _structure_path)


def type_name(event: Event | type[Any]) -> str:
    """The log's name for an event or event class, e.g. ``"tool_call_requested"``."""
    cls = event if isinstance(event, type) else type(event)
    return _NAMES[cls]


def encode_record(record: Record) -> dict[str, Any]:
    """A record as a JSON-able dict (see the module docstring for its shape)."""
    return {
        "v": record.version,
        "session_id": record.session_id,
        "seq": record.seq,
        "time": record.time,
        "type": _NAMES[type(record.event)],
        "data": converter.unstructure(record.event),
    }


_RECORD = builder(Record)  # what Record(...) makes, one call cheaper (see events.fast.fastinit)
_ENVELOPE = frozenset({"v", "session_id", "seq", "time", "type", "data", "hash"})
# Each event type's class and fast reader (``None``: the converter alone), by its name in the
# log: one look-up a line finds both.
_DECODERS: dict[str, tuple[type[Any], Callable[[Any], Any] | None]] = {
    name: (cls, FAST.get(cls)) for name, cls in EVENT_TYPES.items()
}
# 64 lowercase hex digits are the one text of 32 bytes that ``bytes.hex`` writes back as it
# was read (twice as fast as a regular expression, which counts the 64 characters one by one)
_FROM_HEX = bytes.fromhex


def upcast(
    obj: dict[str, Any],
    upcasters: dict[int, Upcaster] | None = None,
    target: int | None = None,
) -> dict[str, Any]:
    """A record dict of any known version as a dict of version ``target`` (default: this
    code's :data:`~events.types.SCHEMA_VERSION`), one step at a time. Never mutates ``obj``."""
    steps = UPCASTERS if upcasters is None else upcasters
    goal = SCHEMA_VERSION if target is None else target
    version = obj["v"]
    while version < goal:
        step = steps.get(version)
        if step is None:
            raise CodecError(f"no upcaster from record version {version} to {version + 1}")
        obj = step(obj)
        if obj.get("v") != version + 1:
            raise CodecError(
                f"the upcaster from version {version} returned version {obj.get('v')!r}, "
                f"not {version + 1}"
            )
        version += 1
    return obj


def decode_record(obj: Any, *, fast: bool = True) -> Record:
    """A record from its dict; raises :class:`CodecError` saying what is wrong with it.

    Records of older versions are upcast first (:func:`upcast`); the result remembers the
    version it was written in. ``fast=False`` structures the event with the converter alone,
    without the fast readers: the reference they are checked and measured against (the
    result is the same).
    """
    if not isinstance(obj, dict):
        raise CodecError(f"a record must be a JSON object, not {type(obj).__name__}")
    version = obj.get("v")
    if type(version) is not int or version != SCHEMA_VERSION:  # else: today's format
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            raise CodecError("the record has no valid schema version 'v' (an integer from 1)")
        if version > SCHEMA_VERSION:
            raise CodecError(
                f"the record has schema version {version}, newer than this toolledger "
                f"understands ({SCHEMA_VERSION}): upgrade toolledger to read this log"
            )
        obj = upcast(obj)
    if not _ENVELOPE.issuperset(obj):
        extra = sorted(set(obj) - _ENVELOPE)
        raise CodecError(f"the record has unexpected field(s) {', '.join(map(repr, extra))}")
    digest = obj.get("hash")
    if digest is not None or "hash" in obj:
        try:
            valid = isinstance(digest, str) and len(digest) == 64 and (
                _FROM_HEX(digest).hex() == digest)
        except ValueError:  # not hex digits
            valid = False
        if not valid:
            raise CodecError("the record's 'hash' is not 64 lowercase hex digits")
    kind = obj.get("type")
    entry = _DECODERS.get(kind) if isinstance(kind, str) else None
    if entry is None:
        raise CodecError(f"unknown event type {kind!r}")
    data = obj.get("data")
    if not isinstance(data, dict):
        raise CodecError(f"malformed {kind!r} record: 'data' must be an object, "
                         f"not {type(data).__name__}")
    cls, read = entry
    try:
        # the one place that picks the path: the class's fast reader if it has one that
        # vouches for the value, else the converter (the reference, which says what is wrong)
        if read is None or not fast:
            event = converter.structure(data, cls)
        else:
            try:
                event = read(data)
            except Fallback:
                event = converter.structure(data, cls)
        session_id = obj["session_id"]
        seq = obj["seq"]
        time = obj["time"]
    except (cattrs.BaseValidationError, KeyError, TypeError, ValueError) as exc:
        raise CodecError(f"malformed {kind!r} record: {_describe(exc)}") from exc
    if type(session_id) is not str or type(seq) is not int or type(time) is not float:
        if not isinstance(session_id, str) or not isinstance(seq, int) or isinstance(seq, bool):
            raise CodecError(f"malformed {kind!r} record: bad session_id or seq")
        if not isinstance(time, (int, float)) or isinstance(time, bool):
            raise CodecError(f"malformed {kind!r} record: bad time")
        time = float(time)
    return _RECORD(session_id=session_id, seq=seq, time=time, event=event, version=version)


def encode_line(record: Record) -> str:
    """The record's canonical line: one JSON line (no trailing newline, no ``"hash"``),
    compact, that UTF-8 can always encode. A store seals it before writing it.

    Text is kept as is, so a log reads well in any language; a string that UTF-8 cannot hold
    (a lone surrogate, as ``os.fsdecode`` makes of a non-UTF-8 file name) switches that line to
    ``\\u`` escapes, which decode to the very same string.
    """
    return encode_line_bytes(record)[0]


def encode_line_bytes(record: Record) -> tuple[str, bytes]:
    """:func:`encode_line`, and the line as UTF-8 (which checking that it encodes makes)."""
    return _encode(encode_record(record))


def _encode(obj: dict[str, Any]) -> tuple[str, bytes]:
    line = dumps_compact(obj)
    try:
        data = line.encode("utf-8")
    except UnicodeEncodeError:
        line = json.dumps(obj, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
        data = line.encode("utf-8")
    return line, data


# The event classes a reader proves, each with its unstructure hook looked up once (the
# converter's own, which ``converter.unstructure`` would look up by class on every call).
_PROVABLE: dict[type[Any], tuple[Callable[[Any], Any], Callable[[Any], Any]]] = {
    cls: (converter.get_unstructure_hook(cls), read) for cls, read in FAST.items()
}


def proven_data(event: Any) -> str | None:
    """The event's data as the line holds it (compact JSON), if the fast reader of its class
    proves that it reads back, taking the very dict the JSON is written from; else ``None``.

    A reader takes only exact ``str``, ``int``, ``bool``, ``None``, lists and dicts, which
    JSON gives back as they were, and leaves any JSON value in a field of type ``Any`` to
    whoever reads it, so the JSON it was made from reads back too
    (``tests/events/test_codec_fast_path.py`` holds the two to that)."""
    provable = _PROVABLE.get(type(event))
    if provable is None:
        return None
    unstructure, read = provable
    data = unstructure(event)
    try:
        read(data)
    except Fallback:
        return None  # the reference decides
    return dumps_compact(data)


class Remembered(Protocol):
    """What :func:`encode_stored` asks of a store's memo of encodings
    (:class:`events.fast.prepared.Encodings`)."""

    @property
    def kinds(self) -> frozenset[type[Any]]:
        """The event classes it remembers."""

    def data(self, event: Any) -> str | None:
        """:func:`proven_data` of ``event``, remembered."""


def encode_stored(record: Record, *, fast: bool = True,
                  encodings: Remembered | None = None) -> tuple[bytes, str | None]:
    """The record's canonical line as UTF-8, encoded once, and the line's text if it must
    still be decoded to prove that it reads back (``None`` when that is proven already).

    The proof is :func:`proven_data`, with an envelope of the exact types; ``encodings`` (the
    store's :class:`~events.fast.prepared.Encodings`) gives the data of an event that repeats
    from session to session as proven when an event that prints alike was. Anything else, and
    every call with ``fast=False`` (the reference), returns the text.
    """
    if fast:
        event, time = record.event, record.time
        provable = _PROVABLE.get(type(event))
        if (provable is not None and type(record.session_id) is str and type(record.seq) is int
                and type(time) is float and time - time == 0.0  # finite
                and record.version == SCHEMA_VERSION):
            if encodings is not None and type(event) in encodings.kinds:
                data: str | None = encodings.data(event)
            else:  # proven_data(event), written out: a call costs 5% of a small record's encoding
                unstructure, read = provable
                obj = unstructure(event)
                try:
                    read(obj)
                except Fallback:
                    data = None  # the reference decides
                else:
                    data = dumps_compact(obj)
            if data is not None:
                # what dumps_compact(encode_record(record)) writes, the envelope's fields being
                # of exact types; a line UTF-8 cannot hold goes the reference's way
                line = (f'{{"v":{SCHEMA_VERSION},"session_id":{dumps_str(record.session_id)},'
                        f'"seq":{record.seq},"time":{time!r},"type":"{_NAMES[type(event)]}",'
                        f'"data":{data}}}')
                try:
                    return line.encode("utf-8"), None
                except UnicodeEncodeError:
                    pass
    line, encoded = _encode(encode_record(record))
    return encoded, line


def decode_line(line: str | bytes) -> Record:
    """A record from one JSON line; raises :class:`CodecError` for anything but a valid one."""
    return decode_stored_line(line)[0]


def decode_stored_line(line: str | bytes) -> tuple[Record, str | None]:
    """A record from one stored line, and the line's chain hash (``None`` if it has none)."""
    try:
        obj = loads_strict(line)
    except ValueError as exc:
        raise CodecError(f"not valid JSON: {exc}") from exc
    record = decode_record(obj)
    digest: str | None = obj.get("hash")
    return record, digest


def _describe(exc: BaseException) -> str:
    if isinstance(exc, cattrs.BaseValidationError):
        notes = cattrs.transform_error(exc)
        return "; ".join(notes) if notes else str(exc)
    if isinstance(exc, KeyError):
        return f"missing field {exc.args[0]!r}"
    return str(exc)
