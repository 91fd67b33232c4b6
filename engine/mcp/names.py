"""Which names a mounted tool may take, and who holds a name.

A server's name is what its handshake says, so it proves nothing: a mounted tool takes no
name the session has for another tool (:func:`check_names`). Who holds a name is told by the
registered spec's body: a mounted tool's is a :class:`MountedBody`, which knows its mount, so
a tool of a mount that is still open keeps its name against every other mount, while a mount
that ended, or a registration an earlier process left in the log for the same server tool,
lets the name be taken again.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Protocol

from events.results import ToolResult

from ..core.toolcontext import ToolContext
from ..core.tools import ToolCall, ToolSpec
from ..runtime.session import Session

__all__ = ["Holder", "MountedBody", "check_names"]


class Holder(Protocol):
    """What a mounted tool's body knows of its mount (:class:`engine.mcp.Mount`)."""

    @property
    def closed(self) -> bool: ...

    @property
    def identity(self) -> str: ...

    @property
    def server(self) -> str: ...

    async def call(self, tool: str, arguments: Any, *, body: MountedBody | None = None,
                   ctx: ToolContext | None = None) -> ToolResult: ...


class MountedBody:
    """The body of one mounted tool, as registered: it asks the server through its mount,
    which makes the call only while the server declares the tool as it did then."""

    def __init__(self, mount: Holder, tool: str) -> None:
        self.mount = mount
        self.tool = tool

    async def __call__(self, call: ToolCall, ctx: ToolContext) -> ToolResult:
        return await self.mount.call(self.tool, call.arguments, body=self, ctx=ctx)

    def __repr__(self) -> str:
        return f"<the MCP server {self.mount.server!r}'s tool {self.tool!r}>"


def _holder(session: Session, spec: ToolSpec, mount: Holder) -> str | None:
    """What already has ``spec``'s name and keeps it from ``mount``, in words; ``None`` if the
    name is free for it: no tool has it, or ``mount`` itself registered it, or a mount that
    ended did, or the log's registration from an earlier process names the same server tool
    (a session reopened gives its mounted tools their names again)."""
    live = session.specs.get(spec.name)
    if live is not None:
        body = live.execute
        if isinstance(body, MountedBody) and body.mount is mount:
            return None
        if not isinstance(body, MountedBody):
            return "a tool the host registered"
        if not body.mount.closed:
            return (f"the tool {body.tool!r} of the MCP server {body.mount.identity}, "
                    f"which another mount holds while its block is open")
    known = session.state.tools.get(spec.name)
    if known is None:
        return None
    if known.source is None:
        return "a local tool"
    assert spec.source is not None
    if (known.source.server, known.source.tool) != (spec.source.server, spec.source.tool):
        return f"the tool {known.source.tool!r} of the MCP server {known.source.server!r}"
    return None


def check_names(session: Session, specs: Iterable[ToolSpec], mount: Holder) -> None:
    """A mounted tool may take no name another tool has (see :func:`_holder`): the mount is
    refused with a ``ValueError`` naming both, before anything is registered."""
    for spec in specs:
        holder = _holder(session, spec, mount)
        if holder is None:
            continue
        assert spec.source is not None
        suggested = re.sub(r"[^A-Za-z0-9_-]+", "_", spec.source.server).strip("_")[:32]
        raise ValueError(
            f"the MCP server {mount.identity} cannot be mounted: its tool "
            f"{spec.source.tool!r} would be named {spec.name!r}, and that is the name of "
            f"{holder}. A server's name proves nothing, so no server's tool takes the name "
            f"of another tool: mount it with a prefix, e.g. "
            f"prefix={(suggested or 'mcp') + '_'!r}")
