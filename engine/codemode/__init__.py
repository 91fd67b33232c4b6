"""Code mode: the model writes a program, and every tool the program calls is a nested call
of the code tool's call, through the whole gate (docs/codemode.md).

``code_tool()`` needs the ``codemode`` extra (the Monty sandbox); importing this package does
not.
"""

from __future__ import annotations

from ..core.codemode import CODE_TOOL
from .limits import CodeLimits
from .tool import code_tool

__all__ = ["CODE_TOOL", "CodeLimits", "code_tool"]
