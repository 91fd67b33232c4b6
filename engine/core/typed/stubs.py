"""A tool read back as a typed Python function: the stub a program calls it by.

The reverse of :mod:`engine.core.typed.schemas`: a JSON Schema becomes the annotation a typed
tool would have declared it with (``{"type": "integer"}`` is ``int``, an array of strings is
``list[str]``, an ``enum`` is a ``Literal``, ``anyOf`` a union, an object ``dict[str, Any]``),
and a tool's input schema becomes a function signature: its required properties first, then
the optional ones with ``= ...`` (left out of the call when not given). The description and
the properties' descriptions become a Google-style docstring, which is what
:mod:`engine.core.typed.docstrings` reads. Code mode lists these stubs to the model. Pure.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

import attrs

from events.types import ToolSnapshot

from .schemas import JSON_TYPES

__all__ = ["FunctionStub", "annotation", "function_stub", "is_wrapped", "python_name",
           "stub_listing"]

_PLAIN: Final = {"null": "None", "boolean": "bool", "integer": "int", "number": "float",
                 "string": "str"}
_NOT_NAME: Final = re.compile(r"\W")
_QUOTES: Final = '"' * 3
_SINGLE: Final = "'" * 3


def python_name(tool_name: str) -> str:
    """The identifier a program calls ``tool_name`` by: ``.`` and ``-`` become ``_``, a leading
    digit or a keyword gains a ``_``."""
    name = _NOT_NAME.sub("_", tool_name)
    if name[:1].isdigit():
        name = f"_{name}"
    return f"{name}_" if keyword.iskeyword(name) else name


def annotation(schema: Any, depth: int = 0) -> str:
    """The Python annotation of a JSON Schema, as text; ``Any`` where no plain type says it."""
    if not isinstance(schema, Mapping) or depth > 8:
        return "Any"
    if "const" in schema:
        return f"Literal[{_literal(schema['const'])}]"
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return f"Literal[{', '.join(_literal(v) for v in schema['enum'])}]"
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list) and schema[key]:
            return _union(annotation(s, depth + 1) for s in schema[key])
    kinds = schema.get("type")
    if isinstance(kinds, list):
        known = [k for k in kinds if k in JSON_TYPES]  # None last, as Python writes it
        return _union(annotation({**schema, "type": kind}, depth + 1)
                      for kind in sorted(known, key=lambda k: k == "null"))
    if kinds in _PLAIN:
        return _PLAIN[kinds]
    if kinds == "array":
        items = schema.get("items")
        return f"list[{annotation(items, depth + 1) if items is not None else 'Any'}]"
    if kinds == "object":
        extra = schema.get("additionalProperties")
        if not schema.get("properties") and isinstance(extra, Mapping):
            return f"dict[str, {annotation(extra, depth + 1)}]"
        return "dict[str, Any]"
    return "Any"


def _literal(value: Any) -> str:
    return repr(value) if isinstance(value, str | int | float | bool) or value is None else "Any"


def _union(parts: Any) -> str:
    unique = list(dict.fromkeys(parts))
    return "Any" if "Any" in unique else " | ".join(unique)


@attrs.frozen(kw_only=True)
class FunctionStub:
    """One tool as a program sees it: the identifier it is called by, its parameters in the
    stub's order (to map positional arguments onto the tool's property names), whether it
    returns structured content (it declares an output schema) or text, whether that content
    wraps the value as ``{"result": value}`` (as a typed tool's does for data that is not an
    object: the program gets the value), and the stub's text."""

    tool: str
    name: str
    parameters: tuple[str, ...]
    structured: bool
    wrapped: bool
    text: str


def function_stub(snapshot: ToolSnapshot, name: str | None = None, *,
                  prefix: str = "") -> FunctionStub:
    """The typed stub of a tool: ``def name(param: T, optional: U = ...) -> R`` with a
    docstring; ``prefix`` is written before ``def`` (``"async "``). A tool whose properties are
    not all identifiers takes keyword arguments only (``**arguments: Any``)."""
    name = name or python_name(snapshot.name)
    schema = snapshot.input_schema
    properties = schema.get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    required = [p for p in schema.get("required", ()) if p in properties] if isinstance(
        schema.get("required"), list) else []
    order = required + [p for p in properties if p not in required]
    if all(p.isidentifier() and not keyword.iskeyword(p) for p in order):
        params = [f"{p}: {annotation(properties[p])}" + ("" if p in required else " = ...")
                  for p in order]
        parameters = tuple(order)
    else:
        params, parameters = ["**arguments: Any"], ()
    output = snapshot.output_schema
    wrapped = output is not None and is_wrapped(output)
    returns = ("str" if output is None else
               annotation(output["properties"]["result"]) if wrapped else annotation(output))
    head = f"{prefix}def {name}({', '.join(params)}) -> {returns}:"
    return FunctionStub(tool=snapshot.name, name=name, parameters=parameters,
                        structured=output is not None, wrapped=wrapped,
                        text=f"{head}\n{_docstring(snapshot.description, properties, order)}"
                             f"    ...")


def is_wrapped(output_schema: Mapping[str, Any]) -> bool:
    """Whether an output schema is exactly the ``{"result": value}`` object a typed tool
    declares for data that is not an object (:mod:`engine.core.typed.results`)."""
    properties = output_schema.get("properties")
    return (output_schema.get("type") == "object" and isinstance(properties, Mapping)
            and list(properties) == ["result"] and output_schema.get("required") == ["result"]
            and output_schema.get("additionalProperties") is False
            and set(output_schema) <= {"type", "properties", "required", "additionalProperties"})


def _docstring(description: str, properties: Mapping[str, Any], order: Sequence[str]) -> str:
    lines = [line.rstrip() for line in (description.strip() or "(no description)").splitlines()]
    described = [(p, properties[p].get("description")) for p in order
                 if isinstance(properties[p], Mapping)
                 and isinstance(properties[p].get("description"), str)]
    if described:
        lines += ["", "Args:"] + [f"    {p}: {' '.join(str(d).split())}" for p, d in described]
    if len(lines) == 1:
        return f"    {_QUOTES}{lines[0].replace(_QUOTES, _SINGLE)}{_QUOTES}\n"
    body = "\n".join(f"    {line}" if line else "" for line in lines).replace(_QUOTES, _SINGLE)
    return f"    {_QUOTES}{body.lstrip()}\n    {_QUOTES}\n"


def stub_listing(stubs: Sequence[FunctionStub]) -> str:
    """The stubs one after another, as a Python block."""
    return "\n\n".join(stub.text for stub in stubs)

