"""Size limits: how much JSON a call may bring into the log.

A model, a handler or a tool can hand the engine arbitrarily large values, and everything the
engine is handed goes into the log. The limits keep one call from filling it: arguments over
``max_argument_bytes`` are not recorded (a small marker stands in their place, naming their
size) and the call fails with kind ``too_large`` before any handler sees it; a result over
``max_result_bytes`` is kept whole as an artifact the store holds, up to
``max_artifact_bytes``, while the model reads a cut of it (docs/tools.md, "Long outputs");
past that, or where the store keeps no artifacts, or for a call the model did not make, it
fails the call the same way and is not kept. A model's arguments that
are not JSON at all (a NaN, a set, a value nested too deep) are not recorded either: a marker
stands in their place, naming the problem, and the call fails ``invalid_arguments`` saying so.
Sizes are measured as compact, ASCII-escaped JSON: an upper bound of the bytes a record spends
on the value. A result is measured in the form a record holds it, as the codec writes it
(:func:`result_size`): every field of every content block counts, and a field added to a
block tomorrow counts without a change here.

Depth is bounded too. A nested call runs in its parent's task, a few interpreter frames below
it, so ``max_depth`` cannot go past :data:`MAX_CALL_DEPTH`: the deepest call must still have the
stack to record its events and to check values as deep as
:data:`engine.core.jsonvalues.MAX_DEPTH` allows.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from events.codec import converter
from events.results import FailureDetail, TextContent, ToolResult

__all__ = [
    "MAX_CALL_DEPTH",
    "MAX_NAME",
    "NOT_JSON",
    "OVERSIZED",
    "Limits",
    "admit",
    "clip_name",
    "json_size",
    "not_json",
    "not_json_marker",
    "oversized",
    "encoded_result_size",
    "result_size",
    "sized_result",
]

#: How long a model's tool name or call id (or a provider's stop reason, model name, response
#: id) may be in the log (MCP names are at most 128).
MAX_NAME = 256

#: How deep nested calls may go (``Session.open``'s ``max_depth`` is refused above it). Measured
#: on CPython 3.11 with its default recursion limit of 1 000 frames: each level of nesting costs
#: about 6 frames (5 when the cap was set; running each body in a copy of its caller's context
#: added about two), a tool body at the top level runs at most 14 frames deep (and its copy's),
#: and recording and checking a value :data:`~engine.core.jsonvalues.MAX_DEPTH` (100) levels deep
#: costs about 330 more. Without a cap, a session with ``max_depth=1000`` broke at depth 195 with a ``RecursionError``. At 64
#: the deepest call, carrying the deepest values, still leaves about 240 frames to the host
#: (more than 360 before the copy of the context; a test checks 200).
MAX_CALL_DEPTH = 64

#: The key of the marker that stands in for arguments too large to record.
OVERSIZED = "$toolledger.oversized"
#: The key of the marker that stands in for a model's arguments that are not JSON.
NOT_JSON = "$toolledger.not_json"


def _positive(_: Any, attribute: Any, value: int) -> None:
    if not isinstance(value, int) or value < 1:
        raise ValueError(f"{attribute.name} must be a positive number of bytes, not {value!r}")


@attrs.frozen(kw_only=True)
class Limits:
    """How large the arguments and the result of one call may be (bytes of JSON).

    ``max_result_bytes``: the most a result may bring into the log. ``max_artifact_bytes``:
    the most a result of the model's call may have at all; one between the two is kept whole
    as an artifact the store holds, and the model reads a cut of it. Set it to
    ``max_result_bytes`` (or less) to keep no artifacts."""

    max_argument_bytes: int = attrs.field(default=1_000_000, validator=_positive)
    max_result_bytes: int = attrs.field(default=4_000_000, validator=_positive)
    max_artifact_bytes: int = attrs.field(default=64_000_000, validator=_positive)


_COMPACT = json.JSONEncoder(separators=(",", ":"))


def _unknown(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


# ``json.dumps`` makes a new C encoder on every call, which costs more than encoding a small
# value: this one is made once. Same output as ``json.dumps(value, separators=(",", ":"))``,
# circular references excepted (the values the engine sizes are checked JSON: no cycles).
_MAKE = getattr(json.encoder, "c_make_encoder", None)
_ENCODE: Callable[[Any, int], Sequence[str]] | None = (
    None if _MAKE is None
    else _MAKE(None, _unknown, json.encoder.encode_basestring_ascii, None, ":", ",", False, False,
               True)
)


def json_size(value: Any) -> int:
    """Bytes of ``value`` as compact, ASCII-escaped JSON."""
    if _ENCODE is None or isinstance(value, str):
        return len(_COMPACT.encode(value))
    try:
        return sum(map(len, _ENCODE(value, 0)))
    except RecursionError:
        raise ValueError("the value is nested too deeply (or contains itself)") from None


def admit(arguments: Any, limits: Limits) -> Any:
    """``arguments`` if they fit, else the marker that records only their size."""
    size = json_size(arguments)
    return arguments if size <= limits.max_argument_bytes else {OVERSIZED: size}


def oversized(arguments: Any) -> int | None:
    """The size a marker records, or ``None`` for real arguments."""
    if isinstance(arguments, dict) and len(arguments) == 1 and OVERSIZED in arguments:
        size = arguments[OVERSIZED]
        return size if isinstance(size, int) else None
    return None


def not_json_marker(problem: ValueError) -> dict[str, Any]:
    """The marker recorded in place of a model's arguments that are not JSON: what was wrong
    (bounded), and as data the :class:`~events.results.FailureDetail` the check gave, if any."""
    marker: dict[str, Any] = {NOT_JSON: str(problem)[:500]}
    detail = getattr(problem, "detail", None)
    if isinstance(detail, FailureDetail):
        marker["detail"] = converter.unstructure(detail)
    return marker


def not_json(arguments: Any) -> tuple[str, FailureDetail | None] | None:
    """What a not-JSON marker records (the problem, and its detail if it reads), or ``None``
    for real arguments."""
    if not (isinstance(arguments, dict) and NOT_JSON in arguments
            and set(arguments) <= {NOT_JSON, "detail"} and isinstance(arguments[NOT_JSON], str)):
        return None
    detail: FailureDetail | None = None
    if "detail" in arguments:
        try:
            detail = converter.structure(arguments["detail"], FailureDetail)
        except Exception:  # a marker edited in the log: the words are still shown
            detail = None
    return arguments[NOT_JSON], detail


# the codec's own hook for a result, looked up once
_UNSTRUCTURE_RESULT: Callable[[ToolResult], Any] = converter.get_unstructure_hook(ToolResult)


def encoded_result_size(result: ToolResult) -> int:
    """:func:`result_size` by its definition: the result unstructured by the codec, then
    measured. The reference :func:`result_size`'s arithmetic is held to."""
    return json_size(_UNSTRUCTURE_RESULT(result))


_ESCAPED: Callable[[str], str] = json.encoder.encode_basestring_ascii

# The arithmetic for the results most calls return (text blocks only), its terms measured
# once, here, by the reference: what an empty result takes, what each text block adds besides
# its text, what a separator between two blocks takes, and what ``is_error=True`` adds. A
# text block that gained a field would make the arithmetic wrong, so it is used only while
# the block has exactly the fields it was measured with.
_ONE_EMPTY = encoded_result_size(ToolResult(content=(TextContent(text=""),)))
_BARE = encoded_result_size(ToolResult())
_BLOCK = _ONE_EMPTY - _BARE - 2  # without the text's quotes
_SEPARATOR = encoded_result_size(
    ToolResult(content=(TextContent(text=""), TextContent(text="")))) - _ONE_EMPTY - _BLOCK - 2
_ERROR = encoded_result_size(ToolResult(is_error=True)) - _BARE
_NULL = 4  # ``null``: the structured content a bare result has
_TEXT_ONLY = tuple(field.name for field in attrs.fields(TextContent)) == ("text", "type")


def result_size(result: ToolResult) -> int:
    """Bytes a result takes in the log: the result as the codec writes it into a record
    (every field of every content block, the structured content, ``is_error``, and the keys
    that name them), as compact, ASCII-escaped JSON. A record writes text as UTF-8, which
    never takes more bytes than the escapes, so this bounds what the result adds to it.

    Measuring the encoded form, not a list of fields, is what keeps the bound: a block's
    MIME type or a link's description counts as its text does, and so will a field added
    to a block later. ``tests/core/test_limits.py`` checks the bound on arbitrary results.

    A result of text blocks only (what most tools return) is measured by arithmetic whose
    terms the encoded form gave, without building that form: the same number
    (:func:`encoded_result_size`, which ``tests/core/test_limits.py`` holds it to for
    arbitrary results), in under a third of the time (docs/performance.md)."""
    if _TEXT_ONLY and type(result) is ToolResult:
        size = _BARE
        content = result.content
        for block in content:
            if type(block) is not TextContent or block.type != "text":
                break
            size += _BLOCK + len(_ESCAPED(block.text))
        else:
            if len(content) > 1:
                size += _SEPARATOR * (len(content) - 1)
            structured = result.structured_content
            if structured is not None:
                size += json_size(structured) - _NULL
            return size + _ERROR if result.is_error else size
    return encoded_result_size(result)


#: What a result of one empty text block takes: the least a result with text takes.
_EMPTY_TEXT = result_size(ToolResult(content=(TextContent(text=""),)))


def sized_result(size: int) -> ToolResult:
    """A result of one text block that takes ``size`` bytes as :func:`result_size` measures
    them (or as few as such a result can, for a smaller ``size``): what a replay gives back
    for a recorded result that was over the limit, which the log does not keep."""
    return ToolResult(content=(TextContent(text="x" * max(0, size - _EMPTY_TEXT)),))


def clip_name(value: str) -> str:
    """A model's tool name or call id, or another name a provider gives (a stop reason, a
    model's name, a response's id), cut to :data:`MAX_NAME` characters (a cut tool name names
    no tool, so its call fails as unavailable)."""
    if len(value) <= MAX_NAME:
        return value
    return f"{value[:MAX_NAME - 1]}…"
