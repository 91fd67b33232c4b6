"""What a tool's result must be before it is recorded, and how a failure is described.

The checks step 6 and step 7 of a call make (:mod:`engine.runtime.calls`): a body's return is a
:class:`~events.results.ToolResult` of JSON, within the size limit, that satisfies the tool's
output schema; a ``tool_result`` handler's patch is held to the same rules. And the words an
exception from code the engine does not control is recorded with. Pure: no trio, no I/O.
"""

from __future__ import annotations

import json
import traceback
from typing import Any

import attrs

from events.results import ErrorInfo, TextContent, ToolResult
from events.types import FailureDetail, FailureKind

from .handlers import UNSET, ResultPatch
from .jsonvalues import NotJson, own_result
from .limits import Limits, result_size
from .registry import Registry
from .tools import ToolSpec

__all__ = ["Failure", "InvalidOutput", "check_output", "check_sized_output", "checked_patch",
           "describe", "error_info", "text_limit"]

#: why a call failed: its kind, the message, and the exception if one was raised
Failure = tuple[FailureKind, str, "ErrorInfo | None", "FailureDetail | None"]


class InvalidOutput(Exception):
    """Raised by a body whose output broke its output schema before it could return it.

    A tool that passes on another program's answer, which that program found invalid and did
    not hand over, raises this; the call ends as ``invalid_output``, like a result the engine
    found invalid itself, rather than as ``raised``."""


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit} more characters not kept)"


def describe(exc: BaseException, limit: int = 2_000) -> str:
    """``"Type: message"`` for an exception from code the engine does not control: its
    ``str()`` may raise or be huge, and neither may break the session or flood the log."""
    try:
        message = str(exc)
    except Exception:
        message = "<str() of the exception failed>"
    return f"{type(exc).__name__}: {_clip(message, limit)}"


def error_info(exc: BaseException, limit: int = 2_000) -> ErrorInfo:
    """An exception as the log keeps it: type and message, and the traceback for people,
    each cut to ``limit`` characters."""
    try:
        message = str(exc)
    except Exception:
        message = "<str() of the exception failed>"
    try:
        trace = "".join(traceback.format_exception(exc))
    except Exception:
        trace = "<the traceback could not be formatted>"
    return ErrorInfo(type=type(exc).__name__, message=_clip(message, limit),
                     traceback=_clip(trace, limit))


def text_limit(limits: Limits) -> int:
    """How long an exception's text may be in a failure: one message appears up to four
    times in one (message, result, error, traceback)."""
    return max(200, limits.max_result_bytes // 4)


def check_output(
    registry: Registry, limits: Limits, spec: ToolSpec, returned: Any
) -> tuple[ToolResult | None, Failure | None]:
    """The body's return as the result to record, or why the call fails (with the result, if
    it was one, to keep as ``returned``)."""
    result, failure, _ = check_sized_output(registry, limits, spec, returned)
    return result, failure


def check_sized_output(
    registry: Registry, limits: Limits, spec: ToolSpec, returned: Any, *,
    upper: int | None = None,
) -> tuple[ToolResult | None, Failure | None, int]:
    """:func:`check_output`, and the result's size (:func:`result_size`; 0 when it is not
    one). ``upper``: the largest result the call may keep (as an artifact, past
    ``max_result_bytes``: docs/tools.md, "Long outputs"); ``max_result_bytes`` by default."""
    if not isinstance(returned, ToolResult):
        return None, ("invalid_output", f"{spec.name} returned {type(returned).__name__}, "
                      f"not a ToolResult", None, FailureDetail(type=type(returned).__name__)), 0
    try:
        result = own_result(returned)
    except ValueError as exc:
        return None, ("not_serialisable", f"{spec.name} returned a result that is not JSON: {exc}",
                      None, exc.detail if isinstance(exc, NotJson) else None), 0
    recorded = result
    if result.structured_content is not None and not result.content:
        # MCP's rule: the text block it gets is recorded too, so it is measured with the rest
        recorded = attrs.evolve(result, content=(_json_block(result.structured_content),))
    limit = limits.max_result_bytes if upper is None else max(upper, limits.max_result_bytes)
    if (size := result_size(recorded)) > limit:
        return None, ("too_large", f"{spec.name} returned {size} bytes, over the limit of "
                      f"{limit}; the result was not kept", None,
                      FailureDetail(limit=limit, size=size)), size
    validator = registry.outputs.get(spec.name)
    if validator is not None and not result.is_error:
        if result.structured_content is None:
            return result, ("invalid_output", f"{spec.name} declares an output schema but "
                            "returned no structured content", None, None), size
        problem = validator.violation(result.structured_content)
        if problem is not None:
            return result, ("invalid_output", f"{spec.name} returned output that violates "
                            f"its output schema: {problem}", None, None), size
    return recorded, None, size


def _json_block(structured: Any) -> TextContent:
    """The text block a result with structured content and no content gets (MCP's rule)."""
    return TextContent(text=json.dumps(structured, ensure_ascii=False))


def checked_patch(registry: Registry, name: str, before: ToolResult, patch: ResultPatch,
                  patched: ToolResult) -> ToolResult:
    """A handler's patched result, held to the rules the tool's own result met: a JSON text
    block the engine made for the old structured content is made again for the new one, and a
    success must satisfy the tool's output schema (``ValueError`` otherwise: the patch is
    refused, like one over the size limit)."""
    if patch.content is UNSET and patch.structured_content is not UNSET and (
        not before.content or (before.structured_content is not None
                               and before.content == (_json_block(before.structured_content),))
    ):
        structured = patched.structured_content
        patched = attrs.evolve(patched, content=() if structured is None
                               else (_json_block(structured),))
    validator = registry.outputs.get(name)
    if validator is not None and not patched.is_error:
        if patched.structured_content is None:
            raise ValueError(f"the patched result is a success without the structured content "
                             f"{name}'s output schema requires; the patch was not applied")
        problem = validator.violation(patched.structured_content)
        if problem is not None:
            raise ValueError(f"the patched result violates {name}'s output schema: {problem}; "
                             f"the patch was not applied")
    return patched
