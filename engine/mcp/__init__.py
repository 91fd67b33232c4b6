"""MCP both ways, with the official SDK (the ``mcp`` extra).

- :func:`mount`: connect to an MCP server and register its tools in a session, where every call
  is governed and logged like a local one (:mod:`engine.mcp.mount`). The server is untrusted:
  its hints count only if the host says so, its listing is bounded (:class:`ListingLimits`,
  :class:`ListingError`), its names take no other tool's, and a server that comes back as
  another after a reconnect is judged again (:class:`ServerChanged`); both are
  an :class:`MCPError` (:mod:`engine.mcp.errors`).
- :func:`mcp_server`: serve a session's tools as an MCP server, each call a host call of the
  session (:mod:`engine.mcp.serve`; ``toolledger serve MODULE:NAME`` runs one over stdio).
- :func:`http_app`: those tools over MCP's streamable HTTP, as an ASGI app; a host's own
  Starlette app routes to an :class:`MCPEndpoint` instead (:mod:`engine.mcp.http`;
  ``toolledger serve MODULE:NAME --http PORT`` runs one).
- :mod:`engine.mcp.formats`: our tool specs and results as MCP's ``Tool`` and
  ``CallToolResult``, and back.

See docs/mcp.md. ``import engine`` never imports this package; importing it without the SDK
raises an ``ImportError`` naming the extra.
"""

from .formats import (
    annotations_from_mcp,
    annotations_to_mcp,
    content_from_mcp,
    content_to_mcp,
    result_from_mcp,
    result_to_mcp,
    tool_from_mcp,
    tool_to_mcp,
)
from .errors import ListingError, MCPError, ServerChanged
from .http import LOOPBACK_ONLY, MCPEndpoint, http_app
from .listing import ListingLimits
from .mount import Mount, mount
from .serve import listed_tools, mcp_server, serve_stdio

__all__ = [
    "LOOPBACK_ONLY",
    "ListingError",
    "ListingLimits",
    "MCPEndpoint",
    "MCPError",
    "Mount",
    "ServerChanged",
    "annotations_from_mcp",
    "annotations_to_mcp",
    "content_from_mcp",
    "content_to_mcp",
    "http_app",
    "listed_tools",
    "mcp_server",
    "mount",
    "result_from_mcp",
    "result_to_mcp",
    "serve_stdio",
    "tool_from_mcp",
    "tool_to_mcp",
]
