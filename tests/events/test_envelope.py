"""A line's envelope (:mod:`events.fast.envelope`) against the codec it stands in for.

Opening a JSONL log reads each line's envelope alone and leaves building its event to the
line's first read. That is sound only if the envelope reader takes every line a store writes,
and vouches for no line the codec reads otherwise: for each line it answers, the reference
parses it as JSON, and decodes it into a record with the same session, seq, version and hash,
or refuses it for its event's data alone (a refusal a read still makes, naming the line).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from events.codec import EVENT_TYPES, decode_stored_line, encode_line, loads_strict, type_name
from events.errors import CodecError
from events.fast.envelope import read_envelope, read_envelopes
from events.integrity import GENESIS
from events.stores.base import seal_lines
from events.types import SCHEMA_VERSION, Record
from tests.strategies import instances_of, json_values

EVENT_CLASSES = sorted(EVENT_TYPES.values(), key=type_name)

records = st.builds(
    Record,
    session_id=st.text(max_size=12),
    seq=st.integers(1, 2**62),
    time=st.floats(allow_nan=False, allow_infinity=False),
    event=st.sampled_from(EVENT_CLASSES).flatmap(instances_of),
)


def stored(record: Record) -> bytes:
    """The line a store writes for ``record`` (sealed, with its newline)."""
    return seal_lines([encode_line(record).encode("utf-8")], GENESIS)[0][0]


def read(line: bytes) -> Any:
    return read_envelope(line, SCHEMA_VERSION, EVENT_TYPES)


@given(records)
def test_every_line_a_store_writes_is_read_by_its_envelope(record: Record) -> None:
    line = stored(record)
    decoded, digest = decode_stored_line(line)
    assert read(line) == (decoded.session_id, decoded.seq, decoded.version, digest)
    assert digest is not None


ENVELOPE_FIELDS = ["v", "session_id", "seq", "time", "type", "data", "hash", "extra"]


@st.composite
def changed_lines(draw: st.DrawFn) -> bytes:
    """A line a store wrote, with some fields changed, removed or added, or its bytes cut
    or spliced."""
    line = stored(draw(records))
    how = draw(st.sampled_from(["fields", "bytes"]))
    if how == "bytes":
        cut = draw(st.integers(0, len(line)))
        return line[:cut] + draw(st.binary(max_size=8)) + line[cut + draw(st.integers(0, 4)):]
    obj = json.loads(line)
    for name in draw(st.lists(st.sampled_from(ENVELOPE_FIELDS), min_size=1, max_size=3)):
        if draw(st.booleans()):
            obj.pop(name, None)
        else:
            obj[name] = draw(json_values | st.sampled_from(
                [SCHEMA_VERSION, 1, 2, 99, "0" * 64, "A" * 64, "", *EVENT_TYPES]))
    return json.dumps(obj, ensure_ascii=draw(st.booleans())).encode("utf-8", "surrogatepass")


@example(b'{"v":3,"session_id":"s","seq":1,"time":1.0,"type":"user_message",'
         b'"data":{"text":"\xff"}}')  # not UTF-8, inside data the parser skips
@example(b'{"v":3,"session_id":"s","seq":1,"time":1.0,"type":"user_message",'
         b'"data":{"text":1}}')  # data the codec refuses
@example(b'{"v":3,"session_id":"s","seq":1,"time":1.0,"type":"user_message",'
         b'"data":{"text":"a"},"hash":null}')
@given(changed_lines())
def test_the_envelope_vouches_for_no_line_the_codec_reads_otherwise(line: bytes) -> None:
    fields = read(line)
    if fields is None:
        return  # the reference decides, in its own words
    obj = loads_strict(line)  # whole JSON, as the reference reads it
    assert isinstance(obj, dict) and isinstance(obj["data"], dict)
    try:
        record, digest = decode_stored_line(line)
    except CodecError as exc:  # only for the event's data
        assert str(exc).startswith(f"malformed {obj['type']!r} record"), exc
        return
    assert (record.session_id, record.seq, record.version, digest) == fields


LINE = {"v": SCHEMA_VERSION, "session_id": "s", "seq": 1, "time": 1.0, "type": "user_message",
        "data": {"text": "go"}, "hash": "0" * 64}


@pytest.mark.parametrize("change", [
    {"v": 2}, {"v": SCHEMA_VERSION + 1}, {"v": True}, {"type": "no_such_event"},
    {"extra": 1}, {"data": []}, {"data": None}, {"hash": None}, {"hash": ""},
    {"hash": "A" * 64}, {"hash": "0" * 63}, {"hash": "0" * 63 + "\n"}, {"seq": "1"},
    {"seq": False}, {"session_id": None}, {"time": "now"},
])
def test_the_reference_decides_each_line_that_is_not_of_today_s_shape(
        change: dict[str, Any]) -> None:
    line = json.dumps({**LINE, **change}).encode()
    assert read(line) is None


def test_a_line_without_a_hash_or_with_one_is_read() -> None:
    assert read(json.dumps(LINE).encode()) == ("s", 1, SCHEMA_VERSION, "0" * 64)
    without = {k: v for k, v in LINE.items() if k != "hash"}
    assert read(json.dumps(without).encode()) == ("s", 1, SCHEMA_VERSION, None)


def test_bytes_that_are_not_utf8_inside_data_are_left_to_the_reference() -> None:
    line = json.dumps(LINE).encode().replace(b'"go"', b'"g\xffo"')
    assert read(line) is None
    with pytest.raises(CodecError, match="not valid JSON"):
        decode_stored_line(line)


def read_block(lines: list[bytes]) -> Any:
    return read_envelopes(b"".join(lines), SCHEMA_VERSION, EVENT_TYPES)


@given(st.lists(st.one_of(records.map(stored), changed_lines()), max_size=6))
def test_a_block_is_read_as_its_lines_are_each_or_left_to_them(lines: list[bytes]) -> None:
    # whole lines only: a line with no newline, or a newline inside, is not one line
    lines = [line.replace(b"\n", b" ").rstrip(b"\n") + b"\n" for line in lines]
    each = [read(line) for line in lines]
    block = read_block(lines)
    if block is None:  # left to the lines: fine whenever one of them is not vouched for
        assert None in each or any(answer[3] is None for answer in each)
        return
    sessions, seqs, digests, lengths = block
    assert [(sid, seq, SCHEMA_VERSION, digest)
            for sid, seq, digest in zip(sessions, seqs, digests)] == each
    assert lengths == [len(line) for line in lines]


@given(st.lists(records.map(stored), min_size=1, max_size=6))
def test_a_block_of_lines_a_store_wrote_is_read_whole(lines: list[bytes]) -> None:
    assert read_block(lines) is not None


def test_a_line_cannot_lend_a_value_to_the_next() -> None:
    # Two lines that, joined without their newline, would read as one object: each is read
    # on its own, so the first refuses (it is not JSON alone), and so the block.
    first = (b'{"v":3,"session_id":"a","seq":1,"time":1.0,"type":"user_message",'
             b'"data":{"text":"x')
    second = b'"},"hash":"' + b"0" * 64 + b'"}'
    assert read_block([first + b"\n", second + b"\n"]) is None
