"""msgspec's parser in front of the reference (events.fast.parse): where it reads a line, it
reads what the standard library's reads, type for type; where it refuses, the reference reads
the line and says what it always said."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from events.codec import decode_line
from events.errors import CodecError
from events.fast.parse import UNPARSED, parse
from events.jsontext import loads_reference, loads_strict
from tests.strategies import json_values


def typed(value: Any) -> Any:
    """A value with the type of every part spelled out (``1 == 1.0 == True`` in Python)."""
    if isinstance(value, dict):
        return ("dict", [(key, typed(item)) for key, item in value.items()])
    if isinstance(value, list):
        return ("list", [typed(item) for item in value])
    return (type(value).__name__, repr(value))


def no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def reference(text: str | bytes) -> Any:
    """What the standard library makes of ``text``, refusing ``NaN`` and ``Infinity`` (the
    kind of error, or the value)."""
    try:
        return ("value", typed(json.loads(text, parse_constant=no_constant)))
    except (ValueError, RecursionError):
        return ("refused", "ValueError")  # a UnicodeDecodeError or JSONDecodeError too


def agree(text: str | bytes) -> None:
    value = parse(text)
    if value is not UNPARSED:  # what msgspec reads, the reference reads alike
        assert ("value", typed(value)) == reference(text)
    # and the reader the codec uses gives the reference's answer either way
    try:
        got: Any = ("value", typed(loads_strict(text)))
    except ValueError:
        got = ("refused", "ValueError")
    assert got == reference(text)


# values with integers past 64 bits, floats of every size and strings with any character, lone
# surrogates too (what os.fsdecode makes of a file name that is not UTF-8)
any_char = st.characters() | st.characters(categories=["Cs"])
wide_values: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(any_char, max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(any_char, max_size=5),
                                                                 inner, max_size=3),
    max_leaves=10,
)


@given(wide_values, st.booleans(), st.booleans())
def test_msgspec_reads_every_json_text_as_the_reference_does(
        value: Any, ascii_only: bool, as_bytes: bool) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only, separators=(",", ":"))
    agree(text.encode("utf-8", "surrogatepass") if as_bytes else text)


@given(st.text(any_char, min_size=1, max_size=6), st.booleans())
def test_text_with_any_code_point_is_read_as_the_reference_does(text: str, ascii_only: bool) -> None:
    line = json.dumps({"x": text}, ensure_ascii=ascii_only)
    agree(line)
    agree(line.encode("utf-8", "surrogatepass"))


@given(json_values, st.integers(min_value=0, max_value=40), st.text(max_size=3))
def test_a_damaged_line_is_read_or_refused_as_the_reference_does(
        value: Any, cut: int, junk: str) -> None:
    text = json.dumps({"data": value}, ensure_ascii=False)
    for damaged in (text[:cut], text[:cut] + junk + text[cut:], text + junk):
        agree(damaged.encode("utf-8", "surrogatepass"))
        agree(damaged)


@pytest.mark.parametrize("text", [
    b'{"x":1e400}',            # json reads infinity; msgspec refuses
    b'{"x":"caf\\udce9"}',     # a lone surrogate, as encode_line writes a non-UTF-8 file name
    b'{"x":"caf\xed\xb3\xa9"}',  # the same surrogate as bytes (surrogatepass)
    b'{"x":1' + b'0' * 5000 + b'}',  # past the digits json reads
    b'[' * 100_000 + b']' * 100_000,  # nested too deeply
    '{"x":"caf\udce9"}',       # a str holding the surrogate itself, which UTF-8 cannot hold
    b'{"x":1}\n', b'{"x":1} x', b'\xef\xbb\xbf{"x":1}', "\ufeff{}", b'{"x":1,}', b'01',
], ids=["1e400", "escaped-surrogate", "raw-surrogate", "long-int", "deep", "surrogate-str",
        "newline", "trailing", "bom-bytes", "bom-str", "trailing-comma", "leading-zero"])
def test_what_msgspec_refuses_the_reference_decides(text: str | bytes) -> None:
    agree(text)


@given(wide_values)
def test_the_reference_reads_what_msgspec_reads(value: Any) -> None:
    line = json.dumps({"data": value}, ensure_ascii=False).encode("utf-8", "surrogatepass")
    assert typed(loads_reference(line)) == typed(loads_strict(line))


def test_a_lone_surrogate_reads_back_through_the_reference() -> None:
    assert parse(b'"caf\\udce9"') is UNPARSED
    assert loads_strict(b'{"x":"caf\\udce9"}') == {"x": "caf\udce9"}


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_are_refused_in_the_references_words(constant: str) -> None:
    line = f'{{"v":3,"session_id":"s","seq":1,"time":{constant},"type":"user_message",' \
           '"data":{"text":"hi"}}'
    with pytest.raises(CodecError, match=f"not valid JSON: {constant} is not a JSON value"):
        decode_line(line.encode())


def test_only_exact_str_and_bytes_go_to_msgspec() -> None:
    # a bytearray may be UTF-16 (json.detect_encoding); a memoryview is not a line at all
    assert loads_strict(bytearray('{"x":1}'.encode("utf-16"))) == {"x": 1}
    with pytest.raises(TypeError, match="a line is str or bytes"):
        loads_strict(memoryview(b'{"x":1}'))  # type: ignore[arg-type]
