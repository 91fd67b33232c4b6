"""Declared tools in each provider's tool format, and back; tool results as each renders them.

Exported (what the adapters send):

========================  =======================================================================
OpenAI Chat Completions   ``{"type": "function", "function": {"name", "description", "parameters"}}``
OpenAI Responses          ``{"type": "function", "name", "description", "parameters", "strict": false}``
Anthropic Messages        ``{"name", "description", "input_schema"}``
========================  =======================================================================

None of the three formats carries a tool's output schema, its annotations (read-only,
destructive, ...), its exposure, execution mode or timeout: those stay on our side, in the
session's registry and its log, and the engine applies them whatever the provider was told.
Importing a declaration back (:func:`tool_from_chat`, :func:`tool_from_responses`,
:func:`tool_from_anthropic`) gives a :class:`~events.types.ToolSnapshot` with what the format
carried; pass ``like=`` (the snapshot it was exported from) to keep the rest, else it has the
defaults, which are the cautious ones (unset annotations mean destructive and open-world).

Pure: no SDK is imported here.
"""

from __future__ import annotations

import json
from typing import Any

import attrs

from events.jsontext import loads_strict
from events.results import (
    AudioContent,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    ToolResult,
)
from events.types import ToolSnapshot

__all__ = [
    "anthropic_tool",
    "arguments_json",
    "chat_tool",
    "parse_arguments",
    "responses_tool",
    "result_blocks",
    "result_text",
    "tool_from_anthropic",
    "tool_from_chat",
    "tool_from_responses",
]


def chat_tool(tool: ToolSnapshot, *, name: str | None = None) -> dict[str, Any]:
    """``tool`` as an OpenAI Chat Completions function tool (``name``: the name it is given at
    the provider, if not its own; see :mod:`engine.models.toolnames`)."""
    return {"type": "function", "function": {
        "name": name or tool.name, "description": tool.description,
        "parameters": tool.input_schema}}


def responses_tool(tool: ToolSnapshot, *, name: str | None = None) -> dict[str, Any]:
    """``tool`` as an OpenAI Responses function tool (``strict: false``: the engine validates
    the arguments itself, with the schema as declared; ``name``: as for :func:`chat_tool`)."""
    return {"type": "function", "name": name or tool.name, "description": tool.description,
            "parameters": tool.input_schema, "strict": False}


def anthropic_tool(tool: ToolSnapshot, *, name: str | None = None) -> dict[str, Any]:
    """``tool`` as an Anthropic Messages tool (``name``: as for :func:`chat_tool`)."""
    return {"name": name or tool.name, "description": tool.description,
            "input_schema": tool.input_schema}


def _imported(name: Any, description: Any, schema: Any, like: ToolSnapshot | None,
              where: str) -> ToolSnapshot:
    if not isinstance(name, str) or not isinstance(schema, dict):
        raise ValueError(f"not {where} tool: it needs a name and an object schema")
    description = description if isinstance(description, str) else ""
    if like is None:
        return ToolSnapshot(name=name, description=description, input_schema=schema)
    if like.name != name:
        raise ValueError(f"like= names {like.name!r}, but the tool is {name!r}")
    return attrs.evolve(like, description=description, input_schema=schema)


def tool_from_chat(tool: dict[str, Any], *, like: ToolSnapshot | None = None) -> ToolSnapshot:
    """An OpenAI Chat Completions function tool as a snapshot (``like``: see the module)."""
    function = tool.get("function") if tool.get("type") == "function" else None
    if not isinstance(function, dict):
        raise ValueError("not a Chat Completions tool: it needs type 'function' and a function")
    return _imported(function.get("name"), function.get("description"),
                     function.get("parameters", {"type": "object"}), like, "a Chat Completions")


def tool_from_responses(tool: dict[str, Any], *, like: ToolSnapshot | None = None) -> ToolSnapshot:
    """An OpenAI Responses function tool as a snapshot (``like``: see the module)."""
    if tool.get("type") != "function":
        raise ValueError("not a Responses function tool: its type must be 'function'")
    return _imported(tool.get("name"), tool.get("description"),
                     tool.get("parameters", {"type": "object"}), like, "a Responses")


def tool_from_anthropic(tool: dict[str, Any], *, like: ToolSnapshot | None = None) -> ToolSnapshot:
    """An Anthropic Messages tool as a snapshot (``like``: see the module)."""
    return _imported(tool.get("name"), tool.get("description"), tool.get("input_schema"),
                     like, "an Anthropic")


# -- arguments ---------------------------------------------------------------------------------


def parse_arguments(raw: Any) -> Any:
    """A model's argument string as JSON; the string itself if it is not JSON (``NaN``, text
    cut short, JSON nested deeper than the parser can read), so that input validation fails
    that one call, naming the problem. An empty string, or none, means no arguments: ``{}``.
    Arguments a provider sent as a JSON value instead of a string are taken as they are (the
    session checks them like any)."""
    if raw is None:
        return {}
    if not isinstance(raw, str):
        return raw
    if not raw.strip():
        return {}
    try:
        return loads_strict(raw)
    except ValueError:
        return raw


def arguments_json(arguments: Any) -> str:
    """Arguments as the string a provider sends: JSON, or the model's own string back when it
    was not JSON."""
    if isinstance(arguments, str):
        try:
            loads_strict(arguments)
        except ValueError:
            return arguments
    return json.dumps(arguments, ensure_ascii=False)


# -- results ----------------------------------------------------------------------------------


def result_blocks(result: ToolResult) -> list[tuple[str, str, str]]:
    """A result's content as ``(kind, text or data, mime type)`` triples, ``kind`` ``"text"``
    or ``"image"``: what every format can carry. Audio and resources the formats cannot
    take are described in text; structured content without content is its JSON."""
    blocks: list[tuple[str, str, str]] = []
    for block in result.content:
        if isinstance(block, TextContent):
            blocks.append(("text", block.text, "text/plain"))
        elif isinstance(block, ImageContent):
            blocks.append(("image", block.data, block.mime_type))
        elif isinstance(block, AudioContent):
            blocks.append(("text", f"[audio: {block.mime_type}]", "text/plain"))
        elif isinstance(block, ResourceLink):
            blocks.append(("text", f"[resource: {block.uri}]", "text/plain"))
        elif isinstance(block, EmbeddedResource):
            resource = block.resource
            text = resource.get("text")
            blocks.append(("text", text if isinstance(text, str)
                           else f"[resource: {resource.get('uri', '?')}]", "text/plain"))
    if not blocks and result.structured_content is not None:
        blocks.append(("text", json.dumps(result.structured_content, ensure_ascii=False),
                       "text/plain"))
    return blocks


def result_text(result: ToolResult) -> str:
    """A result as one string, for the formats whose tool output is text (OpenAI Chat
    Completions): images are named, not sent; an error result starts with ``Error:``, since
    the format has no error flag."""
    parts = [data if kind == "text" else f"[image: {mime}]"
             for kind, data, mime in result_blocks(result)]
    body = "\n".join(parts)
    return f"Error: {body}" if result.is_error else body
