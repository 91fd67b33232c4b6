"""What ``tool_call`` and ``tool_result`` handlers receive and may return.

A ``tool_call`` handler sees every call, the model's and nested ones, before the policy does.
It returns ``None`` (carry on), :class:`Rewrite` (new arguments: recorded, then validated again)
or :class:`Block` (the call ends, blocked, and the tool never runs). A handler that raises
blocks the call: a guard that crashed must not wave a call through.

A ``tool_result`` handler sees every result of a tool whose body ran, and may return a
:class:`ResultPatch`; handlers chain like middleware, each seeing the previous one's result.
One that raises is recorded (``result_handler_failed``) and skipped.

Handlers may be plain or ``async`` functions; they get copies of the arguments, so changing
them in place changes nothing: return a :class:`Rewrite` instead.

What a handler is handed is a *draft* (:class:`ToolCallDraft`, :class:`ToolResultDraft`): the
call or result as it stands, not yet final, which the handler may rewrite or patch. It is not
an event: events are the facts in the log (docs/concepts.md, "Words").
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Union

import attrs
from attrs.validators import instance_of

from events.renamed import renamed_attribute
from events.results import ContentBlock, TextContent, ToolResult
from events.types import Origin

__all__ = [
    "UNSET",
    "Block",
    "ResultPatch",
    "Rewrite",
    "ToolCallDraft",
    "ToolCallHandler",
    "ToolResultDraft",
    "ToolResultHandler",
    "handler_name",
]


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


#: A patch field left as it was.
UNSET: Any = _Unset()


@attrs.frozen(kw_only=True)
class ToolCallDraft:
    """What a ``tool_call`` handler is handed: a call about to be judged, with the arguments
    as they stand after earlier handlers."""

    call_id: str
    name: str
    arguments: Any
    origin: Origin
    parent_id: str | None


@attrs.frozen(kw_only=True)
class ToolResultDraft:
    """What a ``tool_result`` handler is handed: a result about to be returned to the caller,
    as it stands after earlier result handlers."""

    call_id: str
    name: str
    arguments: Any
    origin: Origin
    parent_id: str | None
    result: ToolResult


@attrs.frozen
class Block:
    """Stop the call; ``reason`` is recorded and shown to the model as an error result."""

    reason: str = attrs.field(validator=instance_of(str))


@attrs.frozen
class Rewrite:
    """Replace the call's arguments (they are validated again, and the policy judges them)."""

    arguments: Any


@attrs.frozen(kw_only=True)
class ResultPatch:
    """Change parts of a result; fields left :data:`UNSET` stay as they were.

    Replacing ``content`` without giving ``structured_content`` drops the structured content:
    the two would no longer say the same thing.
    """

    content: Any = UNSET
    structured_content: Any = UNSET
    is_error: Any = UNSET

    def apply(self, result: ToolResult) -> ToolResult:
        """The patched result."""
        content: tuple[ContentBlock, ...] = result.content
        structured = result.structured_content
        if self.content is not UNSET:
            content = tuple(
                TextContent(text=block) if isinstance(block, str) else block
                for block in self.content
            )
            structured = None
        if self.structured_content is not UNSET:
            structured = self.structured_content
        is_error = result.is_error if self.is_error is UNSET else bool(self.is_error)
        return ToolResult(content=content, structured_content=structured, is_error=is_error)


ToolCallHandler = Callable[
    [ToolCallDraft], Union[Block, Rewrite, None, Awaitable[Union[Block, Rewrite, None]]]
]
ToolResultHandler = Callable[
    [ToolResultDraft], Union[ResultPatch, None, Awaitable[Union[ResultPatch, None]]]
]


def handler_name(handler: Any) -> str:
    """How the log names a handler: its qualified name."""
    return str(getattr(handler, "__qualname__", None) or getattr(handler, "__name__", None)
               or type(handler).__name__)


#: Names this module had before, for code written against them (each warns).
_RENAMED = {"ToolCallEvent": "ToolCallDraft", "ToolResultEvent": "ToolResultDraft"}


def __getattr__(name: str) -> Any:
    return renamed_attribute(__name__, _RENAMED, globals(), name)
