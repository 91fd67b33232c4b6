"""Long outputs: the cut of a result the model reads, head and tail with a marked gap.

A tool's result may be far longer than a model should read (a build log, a test run). A
:class:`~events.results.ModelView` says how much it reads, in bytes or lines of text; a
result within it is read whole. A longer one is read as its head, a one-line marker saying
what was left out and where to read it, and its tail: :func:`cut_result`. The whole result is
kept (in the record, or as an artifact the store holds: :mod:`engine.runtime.keeping`), so a
cut loses nothing but what the model is sent.

The cut never exceeds the view: the head, the marker and the tail together take at most
``max_bytes`` bytes (UTF-8) and ``max_lines`` lines, and the head is a prefix and the tail a
suffix of the result's text (``tests/core/test_cutting.py`` holds it to that). The marker's
numbers count characters (code points) of the text, which is what the read tool
(:mod:`engine.runtime.readoutput`) takes. Pure: no trio, no I/O.
"""

from __future__ import annotations

import json
from typing import Final

import attrs

from events.results import (
    AudioContent,
    ContentBlock,
    EmbeddedResource,
    ImageContent,
    ModelView,
    ResourceLink,
    TextContent,
    ToolResult,
)

from .limits import Limits

__all__ = [
    "DEFAULT_VIEW_BYTES",
    "MIN_VIEW_BYTES",
    "Gap",
    "READ_OUTPUT",
    "check_view",
    "cut_result",
    "cut_text",
    "fallback_view",
    "model_text",
    "needs_cut",
]

#: The name of the built-in read tool the marker points to, when the session has it.
READ_OUTPUT: Final = "read_output"
#: What the model reads of a result too large for the log when neither the tool nor the
#: session set a view: its head and tail, this many bytes in all.
DEFAULT_VIEW_BYTES: Final = 16_000
#: The least ``max_bytes`` a cut can keep: the marker alone takes up to about 200 bytes.
MIN_VIEW_BYTES: Final = 400


@attrs.frozen(kw_only=True)
class Gap:
    """What a cut left out of a text: characters ``start`` to ``end`` (``end`` excluded) of
    ``total``, and the ``lines`` they hold (whole or in part)."""

    start: int
    end: int
    total: int
    lines: int


def _describe(block: ContentBlock) -> str:
    """A block the cut does not carry, in words (the whole result keeps it)."""
    if isinstance(block, ImageContent | AudioContent):
        kind = "an image" if isinstance(block, ImageContent) else "audio"
        return f"[{kind} ({block.mime_type}, {len(block.data)} base64 characters) left out]"
    if isinstance(block, ResourceLink):
        return f"[a link to {block.uri} left out]"
    if isinstance(block, EmbeddedResource):
        return f"[an embedded resource ({block.resource.get('uri', 'no uri')}) left out]"
    return "[a block left out]"


def model_text(result: ToolResult) -> str:
    """The text of a result as a cut reads it: its text blocks joined by newlines, each other
    block named in a line of its own; the JSON of its structured content when it has no
    content at all."""
    if not result.content:
        if result.structured_content is None:
            return ""
        return json.dumps(result.structured_content, ensure_ascii=False)
    return "\n".join(block.text if isinstance(block, TextContent) else _describe(block)
                     for block in result.content)


def _lines(text: str) -> int:
    """Lines of ``text``: each ends at a newline, and a last one may lack it."""
    if not text:
        return 0
    return text.count("\n") + (0 if text.endswith("\n") else 1)


def needs_cut(result: ToolResult, view: ModelView) -> bool:
    """Whether the model would read less than all of ``result`` under ``view``: its text
    (:func:`model_text`) is over the view's bytes or lines. Blocks that are not text do not
    count: a result within the view reaches the model as it is, images and all."""
    text = model_text(result)
    return ((view.max_bytes is not None and len(text.encode("utf-8", "surrogatepass"))
             > view.max_bytes)
            or (view.max_lines is not None and _lines(text) > view.max_lines))


def _size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def _head_within(text: str, size: int) -> str:
    """The longest prefix of ``text`` of at most ``size`` bytes (whole characters)."""
    count = used = 0
    for char in text[: size + 1]:  # a character takes one byte at least
        used += _size(char)
        if used > size:
            break
        count += 1
    return text[:count]


def _prefix(text: str, lines: int | None, size: int | None) -> str:
    """The longest prefix of ``text`` within ``lines`` lines and ``size`` bytes."""
    if lines is not None:
        end = 0
        for _ in range(lines):
            found = text.find("\n", end)
            if found < 0:
                end = len(text)
                break
            end = found + 1
        text = text[:end]
    if size is not None and len(text) > size // 4 and _size(text) > size:
        text = _head_within(text, size)
    return text


def _suffix(text: str, lines: int | None, size: int | None) -> str:
    """The longest suffix of ``text`` within ``lines`` lines and ``size`` bytes."""
    if lines is not None:
        if lines == 0:
            return ""
        start = len(text) - 1 if text.endswith("\n") else len(text)
        for _ in range(lines):
            start = text.rfind("\n", 0, start)
            if start < 0:
                break
        text = text[start + 1:] if start >= 0 else text
    if size is not None and len(text) > size // 4 and _size(text) > size:
        text = _head_within(text[::-1], size)[::-1]
    return text


def _marker(gap: Gap, call_id: str, reader: bool) -> str:
    where = (f"read_output(call_id=\"{call_id}\", offset={gap.start}, "
             f"length={gap.end - gap.start}) reads them" if reader
             else "the log keeps the whole result")
    lines = f"{gap.lines} line" + ("" if gap.lines == 1 else "s")
    return (f"[… {gap.end - gap.start} of {gap.total} characters ({lines}) left out here: "
            f"characters {gap.start} to {gap.end}; {where} …]")


def cut_text(text: str, view: ModelView, call_id: str = "", *,
             reader: bool = False) -> tuple[str, Gap | None]:
    """``text`` as the model reads it under ``view``: itself if within it, else its head, a
    marker line and its tail, within the view, and what was left out. The marker names the
    call and the read tool when ``reader``."""
    total_bytes = _size(text)
    total_lines = _lines(text)
    if ((view.max_bytes is None or total_bytes <= view.max_bytes)
            and (view.max_lines is None or total_lines <= view.max_lines)):
        return text, None
    # the widest the marker can be: no number in it is larger than the text's length
    worst = _marker(Gap(start=len(text), end=2 * len(text), total=len(text), lines=len(text)),
                    call_id, reader)
    head_bytes = tail_bytes = head_lines = tail_lines = None
    if view.max_bytes is not None:
        room = max(0, view.max_bytes - _size(worst) - 2)  # the marker and its two newlines
        head_bytes, tail_bytes = room // 2, room - room // 2
    if view.max_lines is not None:
        room = max(0, view.max_lines - 1)  # the marker's own line
        head_lines, tail_lines = room // 2, room - room // 2
    head = _prefix(text, head_lines, head_bytes)
    tail = _suffix(text[len(head):], tail_lines, tail_bytes)
    start, end = len(head), len(text) - len(tail)
    gap = Gap(start=start, end=end, total=len(text), lines=_lines(text[start:end]))
    # the marker is a line of its own: a head cut inside a line gets a newline after it
    before = "" if not head or head.endswith("\n") else "\n"
    after = "\n" if tail else ""
    return f"{head}{before}{_marker(gap, call_id, reader)}{after}{tail}", gap


def cut_result(result: ToolResult, view: ModelView, call_id: str, *,
               reader: bool = False) -> ToolResult:
    """What the model reads of ``result`` under ``view``: one text block, its text cut
    (:func:`cut_text`) and each block that is not text named in words, with the result's
    ``is_error``; no structured content (the whole result keeps it)."""
    text, _ = cut_text(model_text(result), view, call_id, reader=reader)
    return ToolResult(content=(TextContent(text=text),), is_error=result.is_error)


def check_view(view: ModelView | None, where: str) -> None:
    """Refuse a view the cut cannot keep (``ValueError`` naming ``where``): fewer than
    :data:`MIN_VIEW_BYTES` bytes leave no room for the marker."""
    if view is None:
        return
    if not isinstance(view, ModelView):
        raise TypeError(f"{where} takes a ModelView(max_bytes=..., max_lines=...), not "
                        f"{type(view).__name__}")
    if view.max_bytes is not None and view.max_bytes < MIN_VIEW_BYTES:
        raise ValueError(f"{where}: max_bytes={view.max_bytes} leaves no room for the marker "
                         f"that says what was left out; give at least {MIN_VIEW_BYTES}, or "
                         f"max_lines=")


def fallback_view(limits: Limits) -> ModelView:
    """The view of a result too large for the log when neither its tool nor its session set
    one: :data:`DEFAULT_VIEW_BYTES`, or less under a small ``max_result_bytes`` (a record
    holds the cut as escaped JSON, up to six bytes a character)."""
    return ModelView(max_bytes=max(MIN_VIEW_BYTES,
                                   min(DEFAULT_VIEW_BYTES, limits.max_result_bytes // 8)))
