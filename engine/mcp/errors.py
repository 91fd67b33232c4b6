"""The errors of mounted MCP servers (docs/mcp.md, docs/errors.md).

Each is a :class:`~events.errors.ToolledgerError` through :class:`MCPError`, and keeps the
``RuntimeError`` base it had before, so ``except RuntimeError`` still catches it.
"""

from __future__ import annotations

from events.errors import ToolledgerError

__all__ = ["ListingError", "MCPError", "ServerChanged"]


class MCPError(ToolledgerError):
    """Base class of the errors about a mounted MCP server."""


class ListingError(MCPError, RuntimeError):
    """A server's ``tools/list`` did not end within a limit of
    :class:`~engine.mcp.listing.ListingLimits`: the mount registers nothing (or, after a
    reconnect, no call reaches the server)."""


class ServerChanged(MCPError, RuntimeError):
    """A mounted tool's call that met a server which, since the call was judged, reconnected
    as another server, or declares the tool otherwise, or no longer lists it: the call was not
    made. The message says what changed; the tool is registered again as declared now."""
