"""The cut of a long result: head and tail with a marked gap, never past the view, both ends
the original's, nothing cut from a result within it."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import PROPERTY

from engine.core.cutting import (MIN_VIEW_BYTES, check_view, cut_result, cut_text, model_text,
                                 needs_cut)
from events.results import ImageContent, ModelView, ToolResult, text

# texts of many lines, short and long ones, with multi-byte characters among them
LINES = st.lists(st.text(st.characters(codec="utf-8", exclude_characters="\n"), max_size=40)
                 | st.sampled_from(["", "é" * 30, "🙂" * 12, "x" * 200]), max_size=120)
TEXTS = st.builds(lambda lines, end: "\n".join(lines) + end, LINES, st.sampled_from(["", "\n"]))
BYTES, COUNTS = st.integers(MIN_VIEW_BYTES, 3_000), st.integers(1, 40)
VIEWS = (st.builds(ModelView, max_bytes=BYTES) | st.builds(ModelView, max_lines=COUNTS)
         | st.builds(ModelView, max_bytes=BYTES, max_lines=COUNTS))


def size(value: str) -> int:
    return len(value.encode("utf-8", "surrogatepass"))


def lines(value: str) -> int:
    return value.count("\n") + (0 if not value or value.endswith("\n") else 1)


@PROPERTY
@given(text=TEXTS, view=VIEWS, reader=st.booleans(), call=st.sampled_from(["1.0", "12.34"]))
def test_a_cut_never_exceeds_its_view_and_keeps_both_ends(text: str, view: ModelView,
                                                         reader: bool, call: str) -> None:
    shown, gap = cut_text(text, view, call, reader=reader)
    within = ((view.max_bytes is None or size(text) <= view.max_bytes)
              and (view.max_lines is None or lines(text) <= view.max_lines))
    if within:  # read whole: nothing cut, nothing added
        assert gap is None and shown == text
        return
    assert gap is not None
    if view.max_bytes is not None:
        assert size(shown) <= view.max_bytes
    if view.max_lines is not None:
        assert lines(shown) <= view.max_lines
    # the head is the text's start, the tail its end, the gap exactly what lies between
    head, tail = text[:gap.start], text[gap.end:]
    assert 0 <= gap.start < gap.end <= len(text) == gap.total
    assert shown.startswith(head) and shown.endswith(tail)
    marker = shown[len(head):len(shown) - len(tail)].strip("\n")
    assert "\n" not in marker and f"characters {gap.start} to {gap.end}" in marker
    assert (f'read_output(call_id="{call}", offset={gap.start}, '
            f'length={gap.end - gap.start})' in marker) is reader


def test_a_line_view_keeps_whole_lines_from_each_end() -> None:
    log = "".join(f"step {i}\n" for i in range(100))
    shown, gap = cut_text(log, ModelView(max_lines=5), "3.0", reader=True)
    assert shown.splitlines() == ["step 0", "step 1",
                                  shown.splitlines()[2], "step 98", "step 99"]
    assert gap is not None and log[gap.start:gap.end] == "".join(
        f"step {i}\n" for i in range(2, 98))
    assert "96 lines" in shown


def test_a_result_is_cut_to_one_text_block_that_names_what_else_it_held() -> None:
    result = ToolResult(content=[text("a" * 5_000), ImageContent(data="iVBO", mime_type="image/png")],
                        structured_content={"n": 1}, is_error=True)
    view = ModelView(max_bytes=1_000)
    assert needs_cut(result, view)
    cut = cut_result(result, view, "1.0")
    [block] = cut.content
    assert cut.is_error and cut.structured_content is None
    assert size(block.text) <= 1_000 and block.text.startswith("a" * 100)
    assert "image/png" in model_text(result) and "image/png" in block.text
    assert not needs_cut(ToolResult(content=[text("short"), ImageContent(
        data="x" * 10_000, mime_type="image/png")]), view)  # only text counts


def test_a_view_too_small_for_the_marker_is_refused_saying_what_to_give() -> None:
    with pytest.raises(ValueError, match=f"at least {MIN_VIEW_BYTES}"):
        check_view(ModelView(max_bytes=10), "model_view")
    with pytest.raises(ValueError, match="max_bytes or max_lines"):
        ModelView()
