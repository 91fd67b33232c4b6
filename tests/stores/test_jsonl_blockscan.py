"""The opening scan of a JSONL log reads whole blocks of lines at once where it can
(:meth:`JsonlIndex._index_blocks`), and line by line where it cannot. Hypothesis holds the two
to one answer: for logs of interleaved sessions, sealed as a store seals them, then changed
(a line replaced by one a store would not write, repeated, dropped, or two swapped), opening
with blocks of any size (cutting lines, or shorter than a line) gives the very index the
line-by-line scan gives, or the very error, naming the same line."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from events import JsonlStore
from events.codec import encode_line
from events.errors import CorruptLogError
from events.integrity import GENESIS
from events.stores import jsonlindex
from events.stores.base import seal_lines
from tests.stores.conformance.backends import rec


def sealed_log(order: list[str]) -> list[bytes]:
    """The lines a store writes for one record of each session named in ``order``, in turn."""
    heads: dict[str, str] = {}
    seqs: dict[str, int] = {}
    lines = []
    for sid in order:
        seqs[sid] = seqs.get(sid, 0) + 1
        [[line], heads[sid]] = seal_lines([encode_line(rec(sid, seqs[sid])).encode()],
                                          heads.get(sid, GENESIS))
        lines.append(line)
    return lines


def not_written(line: bytes, how: str) -> bytes:
    obj = json.loads(line)
    if how == "not json":
        return b"not json\n"
    if how == "blank":
        return b"\n"
    if how == "no hash":
        obj.pop("hash")
    elif how == "other version":
        obj["v"] = 1
    elif how == "seq":
        obj["seq"] += 2
    elif how == "unknown type":
        obj["type"] = "bogus"
    elif how == "not utf-8":
        return line.replace(b'"text":"', b'"text":"\xff', 1)
    return json.dumps(obj, separators=(",", ":")).encode() + b"\n"


@st.composite
def logs(draw: st.DrawFn) -> list[bytes]:
    order = draw(st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=14))
    lines = sealed_log(order)
    change = draw(st.sampled_from(["none", "replace", "repeat", "drop", "swap"]))
    at = draw(st.integers(0, len(lines) - 1))
    if change == "replace":
        lines[at] = not_written(lines[at], draw(st.sampled_from(
            ["not json", "blank", "no hash", "other version", "seq", "unknown type",
             "not utf-8"])))
    elif change == "repeat":
        lines.insert(at, lines[at])
    elif change == "drop" and len(lines) > 1:
        del lines[at]
    elif change == "swap":
        other = draw(st.integers(0, len(lines) - 1))
        lines[at], lines[other] = lines[other], lines[at]
    if len(lines[-1]) > 1 and draw(st.booleans()):  # a torn last line, or a whole one without its newline
        lines[-1] = lines[-1][:draw(st.integers(1, len(lines[-1]) - 1))]
    return lines


def opened(path: Path) -> Any:
    """What opening ``path`` read-only gives: its index, or the error it raises."""
    try:
        store = JsonlStore(path, read_only=True)
    except CorruptLogError as exc:
        return type(exc), exc.line, exc.problem
    with store:
        return store._size, store._lines, {  # noqa: SLF001 - the index is what is compared
            sid: (list(index.offsets), list(index.lengths), list(index.lines), index.head)
            for sid, index in store._index.items()}  # noqa: SLF001


@settings(max_examples=300, deadline=None)
@given(logs(), st.sampled_from([40, 300, 1000, jsonlindex.BLOCK]))
def test_blocks_of_any_size_index_a_log_as_its_lines_do(lines: list[bytes], block: int) -> None:
    with tempfile.TemporaryDirectory() as directory, pytest.MonkeyPatch.context() as patch:
        path = Path(directory) / "log.jsonl"
        path.write_bytes(b"".join(lines))
        patch.setattr(jsonlindex, "BLOCK", block)
        by_blocks = opened(path)
        patch.setattr(jsonlindex.JsonlIndex, "_index_blocks", lambda self, fd, size: None)
        by_lines = opened(path)
    assert by_blocks == by_lines


def test_a_log_a_store_wrote_is_indexed_by_blocks(monkeypatch: pytest.MonkeyPatch,
                                                   tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"".join(sealed_log(["a", "b", "a", "c", "c", "a"] * 50)))
    monkeypatch.setattr(jsonlindex, "BLOCK", 1000)
    one_by_one: list[bytes] = []  # the lines the block scan leaves to the line-by-line scan
    each = jsonlindex.read_envelope

    def read_envelope(line: bytes, *args: Any) -> Any:
        one_by_one.append(line)
        return each(line, *args)

    monkeypatch.setattr(jsonlindex, "read_envelope", read_envelope)
    with JsonlStore(path, read_only=True) as store:
        assert store._lines == 300  # noqa: SLF001
    assert one_by_one == []
