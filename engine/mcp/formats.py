"""Our tools and results in MCP's shapes, and back: the one translation both directions use.

:func:`tool_to_mcp` makes an MCP ``Tool`` of a spec (what a server lists, what ``serve``
advertises); :func:`tool_from_mcp` makes a spec of an MCP ``Tool`` (what ``mount``
registers). Results and content blocks go both ways the same way. The field names are MCP's
(``readOnlyHint``, ``inputSchema``, ``outputSchema``, ``structuredContent``, ``isError``, …)
because the SDK's models write them.

What MCP cannot carry stays on our side: a tool's ``exposure``, ``execution_mode`` and
``timeout`` are not part of an MCP ``Tool`` (:func:`tool_from_mcp` takes them as arguments,
with our defaults), nor is the :class:`~events.types.ToolSource` of a mounted tool. What we
cannot carry is dropped on import, and said so in docs/mcp.md: a tool's ``icons``,
``execution`` and ``_meta``; a content block's own ``annotations`` and ``_meta``; a result's
``_meta``.
"""

from __future__ import annotations

from typing import Any

from events.results import (
    AudioContent,
    ContentBlock,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    ToolResult,
)
from events.types import Annotations, ExecutionMode, Exposure, ToolSnapshot, ToolSource

from ..core.jsonvalues import copy_json
from ..core.tools import Execute, ToolSpec
from ._sdk import mcp_types

__all__ = [
    "annotations_from_mcp",
    "annotations_to_mcp",
    "content_from_mcp",
    "content_to_mcp",
    "result_from_mcp",
    "result_to_mcp",
    "tool_from_mcp",
    "tool_to_mcp",
]


def annotations_to_mcp(annotations: Annotations) -> mcp_types.ToolAnnotations | None:
    """Our hints as MCP's ``ToolAnnotations`` (``read_only`` → ``readOnlyHint``, …); an unset
    hint stays unset, so it keeps MCP's default. ``None`` when nothing is set."""
    if annotations == Annotations():
        return None
    return mcp_types.ToolAnnotations(
        title=annotations.title,
        read_only_hint=annotations.read_only,
        destructive_hint=annotations.destructive,
        idempotent_hint=annotations.idempotent,
        open_world_hint=annotations.open_world,
    )


def annotations_from_mcp(hints: mcp_types.ToolAnnotations | None,
                         title: str | None = None) -> Annotations:
    """MCP's ``ToolAnnotations`` as ours. An unset hint stays ``None``, which our policy reads
    as MCP's default (destructive, open-world: such a tool asks for approval). ``title`` is
    the tool's own title, used when the annotations carry none."""
    if hints is None:
        return Annotations(title=title)
    return Annotations(
        title=hints.title if hints.title is not None else title,
        read_only=hints.read_only_hint,
        destructive=hints.destructive_hint,
        idempotent=hints.idempotent_hint,
        open_world=hints.open_world_hint,
    )


def tool_to_mcp(tool: ToolSpec | ToolSnapshot, *, name: str | None = None) -> mcp_types.Tool:
    """An MCP ``Tool`` declaring ``tool``: name (or ``name``), title, description, input and
    output schemas, annotations. Exposure, execution mode and timeout have no MCP field and
    are left out."""
    return mcp_types.Tool(
        name=name or tool.name,
        title=tool.annotations.title,
        description=tool.description or None,
        input_schema=copy_json(tool.input_schema),
        output_schema=None if tool.output_schema is None else copy_json(tool.output_schema),
        annotations=annotations_to_mcp(tool.annotations),
    )


def tool_from_mcp(
    tool: mcp_types.Tool,
    execute: Execute,
    *,
    name: str | None = None,
    annotations: Annotations | None = None,
    exposure: Exposure = "direct",
    execution_mode: ExecutionMode = "parallel",
    timeout: float | None = None,
    source: ToolSource | None = None,
) -> ToolSpec:
    """A spec for an MCP ``Tool`` that ``execute`` runs.

    ``name`` replaces the tool's name (a prefixed one, say); ``annotations`` replaces its hints
    (the host's word over a server's); what MCP does not carry (exposure, execution mode,
    timeout, source) comes from the arguments. The schemas are taken as the tool declares
    them: the session checks them by its own rules when the spec is registered.
    """
    return ToolSpec(
        name=name or tool.name,
        description=tool.description or "",
        input_schema=copy_json(tool.input_schema),
        output_schema=None if tool.output_schema is None else copy_json(tool.output_schema),
        annotations=annotations if annotations is not None else annotations_from_mcp(
            tool.annotations, tool.title),
        exposure=exposure,
        execution_mode=execution_mode,
        timeout=timeout,
        source=source,
        execute=execute,
    )


def content_to_mcp(block: ContentBlock) -> mcp_types.ContentBlock:
    """One of our content blocks as the SDK's model of it."""
    if isinstance(block, TextContent):
        return mcp_types.TextContent(text=block.text)
    if isinstance(block, ImageContent):
        return mcp_types.ImageContent(data=block.data, mime_type=block.mime_type)
    if isinstance(block, AudioContent):
        return mcp_types.AudioContent(data=block.data, mime_type=block.mime_type)
    if isinstance(block, ResourceLink):
        return mcp_types.ResourceLink(uri=block.uri, name=block.name, title=block.title,
                                      description=block.description,
                                      mime_type=block.mime_type, size=block.size)
    return mcp_types.EmbeddedResource.model_validate(
        {"type": "resource", "resource": copy_json(block.resource)})


def content_from_mcp(block: mcp_types.ContentBlock) -> ContentBlock:
    """One of the SDK's content blocks as ours (its ``annotations`` and ``_meta`` are left)."""
    if isinstance(block, mcp_types.TextContent):
        return TextContent(text=block.text)
    if isinstance(block, mcp_types.ImageContent):
        return ImageContent(data=block.data, mime_type=block.mime_type)
    if isinstance(block, mcp_types.AudioContent):
        return AudioContent(data=block.data, mime_type=block.mime_type)
    if isinstance(block, mcp_types.ResourceLink):
        return ResourceLink(uri=str(block.uri), name=block.name, title=block.title,
                            description=block.description, mime_type=block.mime_type,
                            size=block.size)
    resource: dict[str, Any] = block.resource.model_dump(by_alias=True, exclude_none=True,
                                                         mode="json")
    resource.pop("_meta", None)
    return EmbeddedResource(resource=resource)


def result_to_mcp(result: ToolResult) -> mcp_types.CallToolResult:
    """Our result as MCP's: ``content``, ``structuredContent`` (when there is one), ``isError``."""
    return mcp_types.CallToolResult(
        content=[content_to_mcp(block) for block in result.content],
        structured_content=copy_json(result.structured_content),
        is_error=result.is_error,
    )


def result_from_mcp(result: mcp_types.CallToolResult) -> ToolResult:
    """MCP's result as ours (its ``_meta`` is left)."""
    return ToolResult(
        content=[content_from_mcp(block) for block in result.content],
        structured_content=copy_json(result.structured_content),
        is_error=result.is_error,
    )

