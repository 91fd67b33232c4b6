"""The official MCP SDK, or an ImportError that says how to get it.

Every module of :mod:`engine.mcp` imports the SDK through here, so that ``import engine``
never needs it and a missing extra is one clear message."""

from __future__ import annotations

try:
    import mcp
    import mcp_types
    from mcp.shared.exceptions import NoBackChannelError
except ImportError as exc:  # pragma: no cover - the test extra installs it
    raise ImportError(
        "engine.mcp needs the official MCP SDK: install toolledger with its 'mcp' extra "
        "(pip install 'toolledger[mcp]')"
    ) from exc

__all__ = ["NoBackChannelError", "mcp", "mcp_types"]
