"""Typed tools: a plain typed function made into a tool by ``@tool``.

The modules, in the order they build on each other: :mod:`.params` (the ``Param`` marker),
:mod:`.docstrings` (descriptions from a docstring), :mod:`.classes` (attrs classes,
dataclasses and TypedDicts as lists of fields), :mod:`.conversion` (JSON into the parameters'
types and back, one cattrs converter), :mod:`.schemas` (the JSON Schema of a type),
:mod:`.results` (a return value as a ``ToolResult``), :mod:`.signatures` (a function read as
a tool) and :mod:`.body` (what the engine runs). docs/tools.md says what each type becomes.
Pure, like the rest of the core.
"""

from .body import TypedBody
from .params import Param
from .signatures import ArgumentsError, ToolSignature, read_signature

__all__ = ["ArgumentsError", "Param", "ToolSignature", "TypedBody", "read_signature"]
