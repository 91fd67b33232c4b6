"""The tool every stack runs: ``add(a, b)``, two required integers, their sum.

Each stack declares it its own way (a decorated function for the peers, a ``@tool`` with a JSON
Schema for toolledger); the schema each derives is the same object, ``ADD_INPUT`` (the peers'
add a ``title`` to each property, and the MCP SDK leaves out ``additionalProperties``). The
arguments are ``ARGS``; every stack passes them as a dict, except openai-agents, whose tool path
takes them as the model sends them, a JSON string (``ARGS_JSON``): parsing it is part of its call.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["ADD_INPUT", "ARGS", "ARGS_JSON", "add"]

ADD_INPUT: dict[str, Any] = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    "required": ["a", "b"],
    "additionalProperties": False,
}
ARGS: dict[str, Any] = {"a": 1, "b": 2}
ARGS_JSON = json.dumps(ARGS)


async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b
