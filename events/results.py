"""What a tool gives back: MCP content blocks and the structured result.

These are values, not behaviour: a terminal event carries the result the model saw, so the
result types live beside the events. Field names are the Python spelling of MCP's
(``mime_type`` for ``mimeType``); the codec is the only place that knows the JSON shape.
"""

from __future__ import annotations

from typing import Any, Literal, Union

import attrs

__all__ = [
    "AudioContent",
    "ContentBlock",
    "EmbeddedResource",
    "ErrorInfo",
    "ImageContent",
    "ResourceLink",
    "TextContent",
    "ToolResult",
    "error_result",
    "text",
]


@attrs.frozen(kw_only=True)
class TextContent:
    """Text for the model to read."""

    text: str
    type: Literal["text"] = "text"


@attrs.frozen(kw_only=True)
class ImageContent:
    """An image, base64-encoded, with its MIME type."""

    data: str
    mime_type: str
    type: Literal["image"] = "image"


@attrs.frozen(kw_only=True)
class AudioContent:
    """Audio, base64-encoded, with its MIME type."""

    data: str
    mime_type: str
    type: Literal["audio"] = "audio"


@attrs.frozen(kw_only=True)
class ResourceLink:
    """A link to a resource the client may fetch; the content is not inlined."""

    uri: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    size: int | None = None
    type: Literal["resource_link"] = "resource_link"


@attrs.frozen(kw_only=True)
class EmbeddedResource:
    """A resource inlined in the result: ``{"uri", "mimeType"?, "text" | "blob"}``."""

    resource: dict[str, Any]
    type: Literal["resource"] = "resource"


ContentBlock = Union[TextContent, ImageContent, AudioContent, ResourceLink, EmbeddedResource]


def text(value: str) -> TextContent:
    """A text content block: ``ToolResult(content=[text("3 files")])``."""
    return TextContent(text=value)


def _to_content(blocks: Any) -> tuple[ContentBlock, ...]:
    return tuple(blocks)


@attrs.frozen(kw_only=True)
class ToolResult:
    """The outcome of a tool call as MCP shapes it.

    ``content`` is what the model reads; ``structured_content`` is any JSON value for programs
    (``None`` means there is none); ``is_error`` marks a failure that still carries data, such
    as a test run with failing tests. A tool with no data to return on failure raises instead,
    and the engine turns the exception into an error result.
    """

    content: tuple[ContentBlock, ...] = attrs.field(default=(), converter=_to_content)
    structured_content: Any = None
    is_error: bool = False

    @property
    def text(self) -> str:
        """The text blocks joined by newlines: a convenience for tests and terminals."""
        return "\n".join(block.text for block in self.content if isinstance(block, TextContent))


def error_result(message: str) -> ToolResult:
    """An error result with one text block: what the engine returns for a call that failed."""
    return ToolResult(content=(TextContent(text=message),), is_error=True)


@attrs.frozen(kw_only=True)
class ErrorInfo:
    """An exception as recorded: its type and message for the model, the traceback for people."""

    type: str
    message: str
    traceback: str = ""
