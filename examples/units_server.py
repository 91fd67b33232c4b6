"""A small MCP server built with the official SDK, run over stdio: it converts lengths.
``examples/agent_app.py`` mounts it in its session (``python -m examples.units_server``).
"""

from __future__ import annotations

from typing import Literal

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

Unit = Literal["mm", "cm", "m", "km", "in", "ft", "mi"]

METRES = {"mm": 0.001, "cm": 0.01, "m": 1.0, "km": 1000.0, "in": 0.0254, "ft": 0.3048,
          "mi": 1609.344}

server = MCPServer("units", version="1.0.0")


@server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
def convert(value: float, from_unit: Unit, to_unit: Unit) -> float:
    """Convert a length from one unit to another."""
    return round(value * METRES[from_unit] / METRES[to_unit], 6)


if __name__ == "__main__":
    server.run("stdio")
