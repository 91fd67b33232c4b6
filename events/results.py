"""What a tool gives back: MCP content blocks and the structured result.

These are values, not behaviour: a terminal event carries the result the model saw, so the
result types live beside the events; so does what a failure records beside its message (an
exception as :class:`ErrorInfo`, the data behind the words as :class:`FailureDetail`). Field names are the Python spelling of MCP's
(``mime_type`` for ``mimeType``); the codec is the only place that knows the JSON shape.
"""

from __future__ import annotations

from typing import Any, Literal, Union

import attrs
from attrs.validators import instance_of, optional

__all__ = [
    "AudioContent",
    "ContentBlock",
    "EmbeddedResource",
    "ErrorInfo",
    "FailureDetail",
    "ImageContent",
    "JsonPath",
    "KeptResult",
    "ModelView",
    "NotJsonProblem",
    "ResourceLink",
    "TextContent",
    "ToolResult",
    "error_result",
    "text",
]


def _optional_int(_: Any, attribute: Any, value: Any) -> None:
    if value is not None and type(value) is not int:
        raise TypeError(f"{attribute.name} must be an int or None, not {value!r}")


@attrs.frozen(kw_only=True)
class TextContent:
    """Text for the model to read."""

    text: str = attrs.field(validator=instance_of(str))
    type: Literal["text"] = "text"


@attrs.frozen(kw_only=True)
class ImageContent:
    """An image, base64-encoded, with its MIME type."""

    data: str = attrs.field(validator=instance_of(str))
    mime_type: str = attrs.field(validator=instance_of(str))
    type: Literal["image"] = "image"


@attrs.frozen(kw_only=True)
class AudioContent:
    """Audio, base64-encoded, with its MIME type."""

    data: str = attrs.field(validator=instance_of(str))
    mime_type: str = attrs.field(validator=instance_of(str))
    type: Literal["audio"] = "audio"


@attrs.frozen(kw_only=True)
class ResourceLink:
    """A link to a resource the client may fetch; the content is not inlined."""

    uri: str = attrs.field(validator=instance_of(str))
    name: str = attrs.field(validator=instance_of(str))
    title: str | None = attrs.field(default=None, validator=optional(instance_of(str)))
    description: str | None = attrs.field(default=None, validator=optional(instance_of(str)))
    mime_type: str | None = attrs.field(default=None, validator=optional(instance_of(str)))
    size: int | None = attrs.field(default=None, validator=_optional_int)
    type: Literal["resource_link"] = "resource_link"


@attrs.frozen(kw_only=True)
class EmbeddedResource:
    """A resource inlined in the result: ``{"uri", "mimeType"?, "text" | "blob"}``."""

    resource: dict[str, Any] = attrs.field(validator=instance_of(dict))
    type: Literal["resource"] = "resource"


ContentBlock = Union[TextContent, ImageContent, AudioContent, ResourceLink, EmbeddedResource]


_BLOCKS = (TextContent, ImageContent, AudioContent, ResourceLink, EmbeddedResource)


def text(value: str) -> TextContent:
    """A text content block: ``ToolResult(content=[text("3 files")])``."""
    return TextContent(text=value)


def _to_content(blocks: Any) -> tuple[ContentBlock, ...]:
    return tuple(blocks)


def _check_blocks(_: Any, __: Any, blocks: tuple[Any, ...]) -> None:
    for index, block in enumerate(blocks):
        if not isinstance(block, _BLOCKS):
            raise TypeError(
                f"content[{index}] is a {type(block).__name__}, not a content block: use "
                f"text('...'), ImageContent, AudioContent, ResourceLink or EmbeddedResource"
            )


@attrs.frozen(kw_only=True)
class ToolResult:
    """The result of a tool call as MCP shapes it.

    Construction checks the shape (content blocks, a boolean ``is_error``), so a malformed
    result fails inside the tool that built it, where the traceback points at the mistake.

    ``content`` is what the model reads; ``structured_content`` is any JSON value for programs
    (``None`` means there is none); ``is_error`` marks a failure that still carries data, such
    as a test run with failing tests. A tool with no data to return on failure raises instead,
    and the engine turns the exception into an error result.
    """

    content: tuple[ContentBlock, ...] = attrs.field(
        default=(),
        converter=_to_content,
        validator=_check_blocks,
    )
    structured_content: Any = None
    is_error: bool = attrs.field(default=False, validator=instance_of(bool))

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


#: What made a value not JSON (:class:`FailureDetail`): a value of a ``type`` JSON does not
#: have, an object ``key`` that is not a string, a ``number`` JSON cannot hold (NaN,
#: infinities), or nesting past the ``depth`` a JSON value may have.
NotJsonProblem = Literal["type", "key", "number", "depth"]
#: Where in a JSON value: object keys and list indices from the root (``$``).
JsonPath = tuple[Union[str, int], ...]


@attrs.frozen(kw_only=True)
class FailureDetail:
    """What a failure's message says, as data for programs (the message is for people).

    Which fields are set depends on the failure's kind:

    - ``depth_limit``: ``limit``, the session's ``max_depth``;
    - ``too_large``: ``limit`` and ``size``, in bytes;
    - ``invalid_output`` for a value that is not a ToolResult: ``type``, its type's name;
    - ``not_serialisable``, and ``invalid_arguments`` for nested arguments that are not JSON:
      ``path`` to the first value at fault and the ``problem`` there, with ``type`` (a value
      of a type JSON does not have), ``value`` (the ``repr`` of a key that is not a string or
      of a number JSON cannot hold) or ``limit`` (the depth a JSON value may have).
    """

    limit: int | None = None
    size: int | None = None
    type: str | None = None
    path: JsonPath | None = None
    problem: NotJsonProblem | None = None
    value: str | None = None


def _optional_positive(_: Any, attribute: Any, value: Any) -> None:
    if value is not None and (type(value) is not int or value < 1):
        raise ValueError(f"{attribute.name} must be a positive int or None, not {value!r}")


@attrs.frozen(kw_only=True)
class ModelView:
    """How much of a result the model reads: at most ``max_bytes`` bytes (UTF-8) and at most
    ``max_lines`` lines of its text, as its head and its tail with a marked gap between them.
    A result within both is read whole; the whole result is kept either way (docs/tools.md,
    "Long outputs"). Give a tool one (``@tool(model_view=...)``) or the session
    (``Session.open(model_view=...)``)::

        ModelView(max_bytes=8_000)            # 4 000 bytes from each end, about
        ModelView(max_lines=200)              # 100 lines from each end, about
    """

    max_bytes: int | None = attrs.field(default=None, validator=_optional_positive)
    max_lines: int | None = attrs.field(default=None, validator=_optional_positive)

    def __attrs_post_init__(self) -> None:
        if self.max_bytes is None and self.max_lines is None:
            raise ValueError("a ModelView needs max_bytes or max_lines (or both): how much of "
                             "a result the model reads")


def _size(_: Any, attribute: Any, value: Any) -> None:
    if type(value) is not int or value < 0:
        raise ValueError(f"{attribute.name} must be an int >= 0, not {value!r}")


def _sha256(_: Any, attribute: Any, value: Any) -> None:
    if type(value) is not str or len(value) != 64 or value.strip("0123456789abcdef"):
        raise ValueError(f"{attribute.name} must be 64 lowercase hex digits, not {value!r}")


@attrs.frozen(kw_only=True)
class KeptResult:
    """Where the whole of a result is kept, when the model read a cut of it
    (:attr:`~events.types.ToolCallCompleted.kept`).

    ``size``: the whole result's bytes as a record would hold it; ``sha256``: the SHA-256 of
    its artifact bytes (:func:`events.artifacts.encode_artifact`), 64 lowercase hex digits;
    ``whole``: the whole result itself when it fits in the log (within the session's
    ``max_result_bytes``), else ``None`` and the store keeps it as an artifact named by the
    call and ``sha256`` (docs/stores.md, "Artifacts"). The record carries the hash, so the
    chain that covers the record covers the artifact: ``verify`` checks it."""

    size: int = attrs.field(validator=_size)
    sha256: str = attrs.field(validator=_sha256)
    whole: ToolResult | None = None
