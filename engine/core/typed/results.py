"""A typed tool's return value as a :class:`~events.results.ToolResult`, and the output schema
its return annotation declares.

==========================================  ==================================================
the function returns (annotated)            the result
==========================================  ==================================================
a ``ToolResult`` (any annotation)           that result, unchanged
``str`` (``-> str``, ``-> str | None``)     a text block; ``None``: an empty success
``None`` (``-> None``)                      an empty success
data (an attrs class, a dataclass, a        structured content (the value as JSON) and a
TypedDict, ``dict[str, T]``)                text block with its JSON; the output schema is
                                            the annotation's
any other data (``int``, ``list[T]``,       the same, wrapped as ``{"result": value}`` (MCP's
``bool``, ``A | None``, ...)                rule: structured content is an object); the text
                                            block holds the value's own JSON
no annotation, or ``Any``                   by the value: ``None``, ``str`` and a
                                            ``ToolResult`` as above, a ``dict`` as structured
                                            content, anything else wrapped; no output schema
==========================================  ==================================================

A value that is not what its annotation says fails the output check (``invalid_output``), and
one that is not JSON fails as ``not_serialisable``, as for any tool. Pure.
"""

from __future__ import annotations

import inspect
import json
import typing
from collections.abc import Callable
from typing import Any, Literal

import attrs

from events.results import ToolResult, text

from .classes import class_kind
from .conversion import unstructure_hook
from .schemas import TypeSchemas

__all__ = ["EMPTY", "Returns", "read_returns"]

#: What a tool that returns ``None`` gives: a success with nothing in it.
EMPTY = ToolResult()
#: The JSON text of a value for the model (made once: ``json.dumps`` with options makes an
#: encoder at each call)
_shown = json.JSONEncoder(ensure_ascii=False, allow_nan=False).encode

ReturnKind = Literal["result", "text", "none", "data", "untyped"]


@attrs.frozen
class Returns:
    """How a typed tool's return value becomes its result: the ``kind`` of its annotation,
    whether data is ``wrapped`` in ``{"result": ...}``, how it is unstructured, and the
    output schema the annotation declares (``None``: none)."""

    kind: ReturnKind
    output_schema: dict[str, Any] | None = None
    wrapped: bool = False
    unstructure: Callable[[Any], Any] = attrs.field(default=unstructure_hook(Any), eq=False)

    def result(self, value: Any) -> ToolResult:
        """The result of a body that returned ``value``."""
        if isinstance(value, ToolResult):
            return value
        kind = self.kind
        if kind != "data":
            if value is None:
                return EMPTY
            if isinstance(value, str) and kind in ("text", "untyped"):
                return ToolResult(content=(text(value),))
        plain = self.unstructure(value)
        wrapped = self.wrapped if kind == "data" else not isinstance(plain, dict)
        structured = {"result": plain} if wrapped else plain
        try:
            shown = _shown(plain)
        except (TypeError, ValueError):  # not JSON: the output check says so, and where
            return ToolResult(structured_content=structured)
        return ToolResult(content=(text(shown),), structured_content=structured)


def _object_shaped(tp: Any) -> bool:
    """Whether every value of ``tp`` is a JSON object: a class with fields or a dict."""
    plain = tp.__origin__ if typing.get_origin(tp) is typing.Annotated else tp
    return class_kind(plain) is not None or plain is dict or typing.get_origin(plain) is dict


def read_returns(annotation: Any, schemas: TypeSchemas) -> Returns:
    """What the return ``annotation`` makes of the value (``inspect.Parameter.empty`` or
    ``Any``: no annotation); its types' errors name ``schemas.where``."""
    if annotation is Any or annotation is inspect.Parameter.empty:
        return Returns(kind="untyped")
    if annotation is ToolResult:
        return Returns(kind="result")
    if annotation is None or annotation is type(None):
        return Returns(kind="none")
    if annotation is str or annotation == (str | None) or annotation == typing.Optional[str]:
        return Returns(kind="text")
    members = typing.get_args(annotation) if typing.get_origin(annotation) in (
        typing.Union, type(int | str)) else ()
    if ToolResult in members:
        raise schemas.fail("its return annotation", "a ToolResult cannot be one of several "
                           "return types: return data of one annotated type (the engine makes "
                           "the result), or annotate -> ToolResult and build every result")
    schema = schemas.schema(annotation, "its return value")
    wrapped = not _object_shaped(annotation)
    if wrapped:
        schema = schemas.root({"result": schema}, ["result"])
    else:
        defs = schemas.defs
        schema = dict(schema)
        if "$ref" in schema:  # a class that contains itself: its definition is under $defs
            schema = {"type": "object", "allOf": [schema]}
        if defs:
            schema["$defs"] = dict(defs)
    return Returns(kind="data", output_schema=schema, wrapped=wrapped,
                   unstructure=unstructure_hook(annotation))
