"""What a mount registers: the specs of a server's tools, as the host chose to take them.

A server lists its tools; the host chose, when it mounted the server, which of them to take
(``only``), under what names (``prefix``), with whose hints (the host's ``hints``, the
server's when ``trust_hints=True``, MCP's defaults otherwise), with what exposure and
timeout, and how much of a listing to read: :class:`MountChoices`. :func:`declared_specs`
applies those choices to a listing and checks each spec by the session's schema rules, so
that a mount registers nothing unless every tool passes, and a reconnected server's
declarations are judged exactly as its first ones were. Nothing here does I/O: the listing
is :mod:`engine.mcp.listing`'s.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import attrs

from events.types import Annotations, Exposure, ToolSource

from ..core.registry import Registry
from ..core.tools import Execute, ToolSpec
from ._sdk import mcp_types
from .formats import annotations_from_mcp, tool_from_mcp
from .listing import ListingLimits

__all__ = ["MountChoices", "declared_specs"]


@attrs.frozen(kw_only=True)
class MountChoices:
    """How the host takes a server's tools (the arguments of :func:`engine.mcp.mount`)."""

    prefix: str = ""
    #: the server's names of the tools to mount; ``None``: all of them
    only: tuple[str, ...] | None = None
    #: the host's own hints, by the server's names of the tools
    hints: Mapping[str, Annotations] = attrs.field(factory=dict)
    trust_hints: bool = False
    timeout: float | None = 60.0
    exposure: Exposure = "direct"
    #: how much of the server's tool list to read before giving up
    listing: ListingLimits = ListingLimits()


def declared_specs(
    listed: Sequence[mcp_types.Tool],
    choices: MountChoices,
    *,
    server: str,
    version: str | None,
    body: Callable[[str], Execute],
    strict: bool = True,
) -> list[ToolSpec]:
    """The specs of the tools ``listed`` by the server ``server`` (``version``) that
    ``choices`` takes, each run by ``body(its name on the server)`` and checked by the
    session's schema rules (``SchemaError`` names the tool and the keyword).

    ``strict``: a name in ``only`` or ``hints`` that the server does not list is a
    ``ValueError`` (a mount's mistake); otherwise it is left out (a reconnected server that no
    longer lists a tool). Two tools of one name in a listing are a ``ValueError`` either way.
    """
    by_name: dict[str, mcp_types.Tool] = {}
    for tool in listed:
        if tool.name in by_name:
            raise ValueError(f"the MCP server {server!r} lists two tools named {tool.name!r}: "
                             f"neither can be mounted, since a call could reach either")
        by_name[tool.name] = tool
    wanted = list(by_name) if choices.only is None else list(dict.fromkeys(choices.only))
    if strict and (unknown := [n for n in [*wanted, *choices.hints] if n not in by_name]):
        raise ValueError(f"the MCP server {server!r} has no tool {unknown[0]!r} "
                         f"(its tools: {', '.join(sorted(by_name)) or 'none'})")
    specs = []
    for name in wanted:
        if name not in by_name:
            continue
        tool = by_name[name]
        said = annotations_from_mcp(tool.annotations, tool.title)
        annotations = choices.hints.get(name)
        trusted = annotations is None and choices.trust_hints
        if annotations is None:
            annotations = said if trusted else Annotations(title=said.title)
        try:
            spec = tool_from_mcp(
                tool, body(name), name=f"{choices.prefix}{name}", annotations=annotations,
                exposure=choices.exposure, timeout=choices.timeout,
                source=ToolSource(server=server, version=version, tool=name, hints=said,
                                  hints_trusted=trusted))
        except ValueError as exc:
            raise ValueError(f"the MCP server {server!r}'s tool {name!r} cannot be "
                             f"mounted: {exc}") from None
        Registry().check(spec)
        specs.append(spec)
    return specs
