"""The codec's fast path (:mod:`events.fast.readers`) against its reference (the converter).

For every event type, with every field set and left to its default, in today's record version
and in older ones read through the upcasters, both paths decode a record alike (today's: to
the record that was written); the fast path takes every record the codec writes of a type that
has a reader (a field it was not written for makes it fall back, which fails here, naming the
type and the field); and it accepts nothing the converter refuses. Records are drawn from the
classes' own type hints (tests/strategies.py), so a new field or event type is drawn too.
"""

from __future__ import annotations

from typing import Any, get_args

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from events.codec import (
    EVENT_TYPES,
    converter,
    decode_line,
    decode_record,
    encode_line,
    encode_stored,
    loads_strict,
    type_name,
)
from events.errors import CodecError
from events.fast.readers import FAST, READERS, Fallback, drift
from events.results import ContentBlock, FailureDetail, TextContent
from events.types import SCHEMA_VERSION, Event, Record
from tests.strategies import instances_of, json_values

EVENT_CLASSES = sorted(EVENT_TYPES.values(), key=type_name)
BLOCKS = get_args(ContentBlock)


def test_every_event_type_has_an_entry_in_the_fast_path_table() -> None:
    assert set(get_args(Event)) == set(EVENT_TYPES.values()), (
        "the Event union (events/types.py) and the codec's EVENT_TYPES differ")
    missing = [f"{name} ({cls.__name__})" for name, cls in EVENT_TYPES.items()
               if cls not in READERS]
    assert not missing, (
        "event type(s) without an entry in READERS (events/fast/readers.py): "
        f"{', '.join(missing)}; give each a reader, or None to leave it to the converter")
    assert set(READERS) <= set(EVENT_TYPES.values())


def test_every_fast_reader_reads_every_field_of_its_class() -> None:
    problems = drift()
    assert not problems, "the fast readers are out of step:\n" + "\n".join(problems)


def test_every_reader_is_in_use() -> None:
    idle = [cls.__name__ for cls, reader in READERS.items()
            if reader is not None and cls not in FAST]
    assert not idle, (f"the fast reader(s) of {', '.join(idle)} are left out (so the converter "
                      f"reads them): {'; '.join(drift()) or 'a class they build drifted'}")


def readable(value: Any) -> bool:
    """Whether the readers take ``value`` themselves: results with text blocks only (any
    other kind of block is left to the converter, on purpose)."""
    if isinstance(value, tuple):
        return all(readable(item) for item in value)
    if isinstance(value, BLOCKS):
        return isinstance(value, TextContent)
    if isinstance(value, FailureDetail) and (value.path is not None or value.problem is not None
                                             or value.value is not None):
        return False  # a detail with more than a limit, a size or a type name: on purpose
    if attrs.has(type(value)):
        return all(readable(getattr(value, field.name)) for field in attrs.fields(type(value)))
    return True


def as_version(obj: dict[str, Any], version: int) -> dict[str, Any]:
    """A record dict labelled as written in ``version`` (version 1 had no hash)."""
    kept = {key: value for key, value in obj.items() if key != "hash" or version > 1}
    return {**kept, "v": version}


def decoded(obj: dict[str, Any], *, fast: bool) -> Any:
    """The record, or the codec's refusal (both paths must refuse alike, too)."""
    try:
        return decode_record(obj, fast=fast)
    except CodecError as exc:
        return f"refused: {exc}"


@pytest.mark.parametrize("cls", EVENT_CLASSES, ids=type_name)
@given(data=st.data())
def test_both_paths_decode_every_event_type_alike(cls: type[Any], data: st.DataObject) -> None:
    event = data.draw(instances_of(cls), label="event")
    record = Record(session_id=data.draw(st.text(min_size=1, max_size=5)),
                    seq=data.draw(st.integers(min_value=1)),
                    time=data.draw(st.floats(allow_nan=False, allow_infinity=False)),
                    event=event)
    obj = loads_strict(encode_line(record))
    assert decode_record(obj) == decode_record(obj, fast=False) == record
    for version in range(1, SCHEMA_VERSION):  # through the upcasters
        written = as_version(obj, version)
        assert decoded(written, fast=True) == decoded(written, fast=False), f"version {version}"
    reader = READERS[cls]
    if reader is not None and readable(event):
        try:
            read = reader.read(obj["data"])
        except Fallback:
            pytest.fail(f"the fast reader of {type_name(cls)!r} fell back to the converter on "
                        f"a record the codec wrote: {obj['data']!r}; a field it does not read? "
                        f"{'; '.join(drift()) or 'see events/fast/readers.py'}")
        assert read == event


@st.composite
def mutated(draw: st.DrawFn, value: Any) -> Any:
    """``value`` (a JSON value) with one change somewhere inside it: a value replaced, a key
    dropped or added, or an item of a list replaced."""
    if isinstance(value, dict) and value:
        key = draw(st.sampled_from(sorted(value)))
        how = draw(st.sampled_from(["replace", "drop", "add", "inside"]))
        if how == "drop":
            return {k: v for k, v in value.items() if k != key}
        if how == "add":
            return {**value, draw(st.text(max_size=6)): draw(json_values)}
        if how == "inside" and isinstance(value[key], (dict, list)):
            return {**value, key: draw(mutated(value[key]))}
        return {**value, key: draw(json_values)}
    if isinstance(value, list) and value:
        index = draw(st.integers(0, len(value) - 1))
        return [*value[:index], draw(mutated(value[index])), *value[index + 1:]]
    return draw(json_values)


@given(data=st.data())
def test_the_fast_path_accepts_only_what_the_converter_accepts(data: st.DataObject) -> None:
    cls = data.draw(st.sampled_from(sorted(FAST, key=type_name)), label="class")
    event = data.draw(instances_of(cls), label="event")
    written = loads_strict(encode_line(Record(session_id="s", seq=1, time=0.0, event=event)))
    changed = data.draw(mutated(written["data"]), label="changed")
    try:
        fast = FAST[cls](changed)
    except Fallback:
        return
    assert converter.structure(changed, cls) == fast


# -- the encoding's proof that a line reads back (events.codec.encode_stored) -----------------


class _Text(str):
    """A string of a subclass: JSON writes it as a string and reads back a plain one."""


#: Values a host may put in any field of an event it builds: the JSON values, and what JSON
#: reads back as something else (a bool where an int was, a tuple, a str subclass, keys that
#: are not strings) or refuses (a float that is not a number, a set).
_ODD = (json_values | st.tuples(json_values) | st.builds(_Text, st.text(max_size=4))
        | st.dictionaries(st.integers(), json_values, max_size=2)
        | st.sampled_from([float("nan"), frozenset({1}), True, 1.5, -3]))


def stored(record: Record, *, fast: bool) -> Any:
    """What a store makes of ``record``: its line, and whether it reads back; or why not."""
    try:
        data, text = encode_stored(record, fast=fast)
    except Exception as exc:  # (both paths encode alike: only the reading back differs)
        return f"not encoded: {type(exc).__name__}"
    if text is None:
        return data, "proven"
    try:
        decode_line(text)
    except CodecError:
        return data, "refused"
    return data, "proven"


@pytest.mark.parametrize("cls", EVENT_CLASSES, ids=type_name)
@given(data=st.data())
def test_the_encodings_proof_agrees_with_reading_back(cls: type[Any], data: st.DataObject) -> None:
    event = data.draw(instances_of(cls), label="event")
    if data.draw(st.booleans(), label="change a field"):  # as a host could, past the types
        field = data.draw(st.sampled_from([f.name for f in attrs.fields(cls)]), label="field")
        event = attrs.evolve(event, **{field: data.draw(_ODD, label="value")})
    record = Record(session_id=data.draw(st.text(min_size=1, max_size=5) | st.builds(_Text)
                                         | st.sampled_from(["\ud800", "é\u2028\"\\"])),
                    seq=data.draw(st.integers(min_value=1) | st.just(True)),
                    time=data.draw(st.floats() | st.integers()),  # NaN and infinities too
                    event=event)
    reference = stored(record, fast=False)
    assert stored(record, fast=True) == reference
    if reference[1:] == ("proven",) and encode_stored(record)[1] is None:
        # the proof skipped the decoding: the line decodes, and to the record as JSON has it
        line = encode_line(record)
        assert decode_line(line) == decode_record(loads_strict(line), fast=False)


@pytest.mark.parametrize("cls", sorted(FAST, key=type_name), ids=type_name)
@given(data=st.data())
def test_the_encoding_proves_every_record_a_reader_takes(cls: type[Any], data: st.DataObject) -> None:
    event = data.draw(instances_of(cls), label="event")
    if readable(event):
        record = Record(session_id="s", seq=1, time=0.0, event=event)
        assert encode_stored(record) == (encode_stored(record, fast=False)[0], None)
