"""The URL a test's HTTP MCP server in a subprocess says it is running on: the one wait the
mount tests share."""

from __future__ import annotations

import re
from typing import Any

__all__ = ["server_url"]


async def server_url(process: Any) -> str:
    """Read ``process``'s stderr until it says ``running on http://...``; that URL."""
    seen = b""
    while (found := re.search(rb"running on (http://[0-9.:]+)", seen)) is None:
        chunk = await process.stderr.receive_some()
        assert chunk, seen.decode()
        seen += chunk
    return found.group(1).decode()
