"""The schema of a question: a flat form, as MCP's elicitation allows, and the answers it takes.

A tool asks the person with ``ctx.ask(message, schema)``. The schema says what an answer holds,
and is restricted the way MCP restricts an elicitation's ``requestedSchema``, so that any
client can show it as a form: an object whose properties are each one field of a primitive
kind, with no nesting::

    {"type": "object",
     "properties": {"branch": {"type": "string", "title": "Branch", "minLength": 1},
                    "force": {"type": "boolean", "default": False}},
     "required": ["branch"]}

A field is one of (every one may have ``title``, ``description`` and a ``default``):

- ``{"type": "string"}`` with ``minLength``, ``maxLength`` and ``format`` (``date``,
  ``date-time``, ``email`` or ``uri``);
- ``{"type": "number"}`` or ``{"type": "integer"}`` with ``minimum`` and ``maximum``;
- ``{"type": "boolean"}``;
- one choice: ``{"type": "string", "enum": [...]}`` (with ``enumNames``, MCP's older labels),
  or ``{"type": "string", "oneOf": [{"const": ..., "title": ...}, ...]}``;
- several choices: ``{"type": "array", "items": {"type": "string", "enum": [...]}}`` or
  ``"items": {"anyOf": [{"const": ..., "title": ...}, ...]}``, with ``minItems`` and
  ``maxItems``.

:func:`form_schema` checks a schema and returns a private copy, or raises
:class:`~engine.core.schemas.SchemaError` naming the field and saying what is allowed;
:func:`content_problem` says what is wrong with an answer's content, or ``None``. Formats are
checked (a person typed the answer: a date that is not one should be typed again). Pure.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from datetime import date, datetime
from typing import Any

from .jsonvalues import own_json
from .schemas import SchemaError

__all__ = ["FORMATS", "content_problem", "field_kind", "field_problem", "form_schema"]

#: The string formats a field may declare, as MCP lists them.
FORMATS = ("date", "date-time", "email", "uri")

_TOP = frozenset({"type", "properties", "required", "$schema", "title", "description"})
_COMMON = frozenset({"type", "title", "description", "default"})
_KINDS: dict[str, frozenset[str]] = {
    "string": _COMMON | {"minLength", "maxLength", "format"},
    "number": _COMMON | {"minimum", "maximum"},
    "integer": _COMMON | {"minimum", "maximum"},
    "boolean": _COMMON,
    "enum": _COMMON | {"enum", "enumNames"},
    "choice": _COMMON | {"oneOf"},
    "multi": _COMMON | {"items", "minItems", "maxItems"},
}
_ALLOWED = ("a flat object schema, {\"type\": \"object\", \"properties\": {...}, \"required\": "
            "[...]}, whose properties are each a string (minLength, maxLength, format: "
            f"{', '.join(FORMATS)}), a number or integer (minimum, maximum), a boolean, an enum "
            "of strings (enum, or oneOf of {const, title}), or an array of enum strings "
            "(items: {type: string, enum} or {anyOf: [{const, title}]}, minItems, maxItems); "
            "each with title, description and default (MCP's elicitation schema)")


def _refuse(what: str, path: str = "", keyword: str | None = None) -> SchemaError:
    return SchemaError(f"ctx.ask: {what}. A question's schema is {_ALLOWED}",
                       keyword=keyword, path=path)


def _text(value: Any) -> bool:
    return isinstance(value, str)


def _number(value: Any) -> bool:
    return type(value) in (int, float) and math.isfinite(value)


def _count(value: Any) -> bool:
    return type(value) is int and value >= 0


def field_kind(field: Mapping[str, Any]) -> str:
    """Which kind of field a checked property is: ``string``, ``number``, ``integer``,
    ``boolean``, ``enum`` (one choice) or ``multi`` (several)."""
    kind = field["type"]
    if kind == "string" and ("enum" in field or "oneOf" in field):
        return "enum"
    return "multi" if kind == "array" else str(kind)


def choices(field: Mapping[str, Any]) -> list[tuple[str, str]]:
    """An ``enum`` or ``multi`` field's choices, as (value, label) pairs."""
    if field["type"] == "array":
        items = field["items"]
        if "anyOf" in items:
            return [(option["const"], option["title"]) for option in items["anyOf"]]
        return [(value, value) for value in items["enum"]]
    if "oneOf" in field:
        return [(option["const"], option["title"]) for option in field["oneOf"]]
    names = field.get("enumNames") or field["enum"]
    return list(zip(field["enum"], names))


def form_schema(schema: Any) -> dict[str, Any]:
    """A private copy of ``schema`` if it is a question's schema (see the module's docstring),
    else :class:`~engine.core.schemas.SchemaError` naming what is not allowed."""
    try:
        schema = own_json(schema)
    except ValueError as exc:
        raise _refuse(f"the schema is not JSON ({exc})") from None
    if not isinstance(schema, dict) or schema.get("type") != "object":
        raise _refuse("the schema must be an object schema with \"type\": \"object\"")
    if extra := sorted(set(schema) - _TOP):
        raise _refuse(f"the schema may not use {extra[0]!r}", f"/{extra[0]}", extra[0])
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        raise _refuse("the schema needs \"properties\", an object of fields", "/properties")
    for name, field in properties.items():
        _check_field(name, field)
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(_text(name) for name in required):
        raise _refuse("\"required\" is a list of property names", "/required", "required")
    if unknown := [name for name in required if name not in properties]:
        raise _refuse(f"\"required\" names {unknown[0]!r}, which is not a property",
                      "/required", "required")
    for key in ("title", "description"):
        if key in schema and not _text(schema[key]):
            raise _refuse(f"the schema's {key!r} is text", f"/{key}", key)
    return schema


def _check_field(name: str, field: Any) -> None:
    path = f"/properties/{name}"
    if not isinstance(field, dict):
        raise _refuse(f"field {name!r} is not a schema object", path)
    kind = field.get("type")
    if kind not in ("string", "number", "integer", "boolean", "array"):
        raise _refuse(f"field {name!r} has type {kind!r}; a field is a string, number, "
                      f"integer, boolean or array of choices (no objects, no nesting)",
                      f"{path}/type", "type")
    shape = "multi" if kind == "array" else str(kind)
    if kind == "string" and "enum" in field:
        shape = "enum"
    elif kind == "string" and "oneOf" in field:
        shape = "choice"
    if extra := sorted(set(field) - _KINDS[shape]):
        raise _refuse(f"field {name!r} ({shape}) may not use {extra[0]!r}",
                      f"{path}/{extra[0]}", extra[0])
    for key in ("title", "description"):
        if key in field and not _text(field[key]):
            raise _refuse(f"field {name!r}: {key!r} is text", f"{path}/{key}", key)
    for key in ("minLength", "maxLength", "minItems", "maxItems"):
        if key in field and not _count(field[key]):
            raise _refuse(f"field {name!r}: {key!r} is a whole number >= 0", f"{path}/{key}", key)
    for key in ("minimum", "maximum"):
        if key in field and not _number(field[key]):
            raise _refuse(f"field {name!r}: {key!r} is a finite number", f"{path}/{key}", key)
    if "format" in field and field["format"] not in FORMATS:
        raise _refuse(f"field {name!r}: format {field['format']!r} is not one of "
                      f"{', '.join(FORMATS)}", f"{path}/format", "format")
    if shape == "enum":
        values = field["enum"]
        if not isinstance(values, list) or not values or not all(_text(v) for v in values):
            raise _refuse(f"field {name!r}: \"enum\" is a list of strings, at least one",
                          f"{path}/enum", "enum")
        names = field.get("enumNames")
        if names is not None and (not isinstance(names, list) or len(names) != len(values)
                                  or not all(_text(n) for n in names)):
            raise _refuse(f"field {name!r}: \"enumNames\" is a list of strings, one per "
                          f"value of \"enum\"", f"{path}/enumNames", "enumNames")
    elif shape == "choice":
        _check_options(name, field["oneOf"], f"{path}/oneOf", "oneOf")
    elif shape == "multi":
        items = field.get("items")
        if isinstance(items, dict) and set(items) == {"anyOf"}:
            _check_options(name, items["anyOf"], f"{path}/items/anyOf", "anyOf")
        elif not (isinstance(items, dict) and set(items) == {"type", "enum"}
                  and items["type"] == "string" and isinstance(items["enum"], list)
                  and items["enum"] and all(_text(v) for v in items["enum"])):
            raise _refuse(f"field {name!r}: an array's \"items\" is {{\"type\": \"string\", "
                          f"\"enum\": [...]}} or {{\"anyOf\": [{{\"const\": ..., \"title\": "
                          f"...}}]}}", f"{path}/items", "items")
    if "default" in field:
        problem = field_problem(field, field["default"])
        if problem is not None:
            raise _refuse(f"field {name!r}: its default {problem}", f"{path}/default", "default")


def _check_options(name: str, options: Any, path: str, keyword: str) -> None:
    if not (isinstance(options, list) and options and all(
            isinstance(o, dict) and set(o) == {"const", "title"} and _text(o["const"])
            and _text(o["title"]) for o in options)):
        raise _refuse(f"field {name!r}: {keyword!r} is a list of {{\"const\": string, "
                      f"\"title\": string}}, at least one", path, keyword)


_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")
_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:\S+")


def _format_problem(form: str, value: str) -> str | None:
    if form == "date":
        try:
            date.fromisoformat(value)
        except ValueError:
            return "is not a date (YYYY-MM-DD)"
    elif form == "date-time":
        try:
            datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return "is not a date and time (YYYY-MM-DDTHH:MM:SS, with its offset)"
        if "T" not in value and "t" not in value:
            return "is not a date and time (YYYY-MM-DDTHH:MM:SS, with its offset)"
    elif form == "email" and not _EMAIL.fullmatch(value):
        return "is not an email address"
    elif form == "uri" and not _URI.fullmatch(value):
        return "is not a URI (scheme:rest, e.g. https://example.com)"
    return None


def field_problem(field: Mapping[str, Any], value: Any) -> str | None:
    """What is wrong with ``value`` as the answer to one checked field (words that follow the
    value: "is not a number"), or ``None``."""
    kind = field_kind(field)
    if kind == "boolean":
        return None if type(value) is bool else "is not true or false"
    if kind in ("number", "integer"):
        if not _number(value) or (kind == "integer" and type(value) is not int
                                  and not float(value).is_integer()):
            return f"is not {'an integer' if kind == 'integer' else 'a number'}"
        if "minimum" in field and value < field["minimum"]:
            return f"is less than the minimum {field['minimum']}"
        if "maximum" in field and value > field["maximum"]:
            return f"is more than the maximum {field['maximum']}"
        return None
    if kind == "enum":
        allowed = [choice for choice, _ in choices(field)]
        return None if _text(value) and value in allowed else (
            f"is not one of {', '.join(map(repr, allowed))}")
    if kind == "multi":
        allowed = [choice for choice, _ in choices(field)]
        if not isinstance(value, list) or not all(_text(v) and v in allowed for v in value):
            return f"is not a list of choices from {', '.join(map(repr, allowed))}"
        if len(set(value)) < len(value):
            return "names a choice twice"
        if "minItems" in field and len(value) < field["minItems"]:
            return f"has fewer than {field['minItems']} choices"
        if "maxItems" in field and len(value) > field["maxItems"]:
            return f"has more than {field['maxItems']} choices"
        return None
    if not _text(value):
        return "is not text"
    if "minLength" in field and len(value) < field["minLength"]:
        return f"is shorter than {field['minLength']} characters"
    if "maxLength" in field and len(value) > field["maxLength"]:
        return f"is longer than {field['maxLength']} characters"
    if "format" in field:
        return _format_problem(field["format"], value)
    return None


def content_problem(schema: Mapping[str, Any], content: Any) -> str | None:
    """What is wrong with ``content`` as an accepted answer to a question of ``schema`` (a
    checked one): a sentence naming the field, or ``None`` if it fits."""
    if not isinstance(content, dict):
        return f"an accepted answer's content is an object of fields, not {_kind(content)}"
    properties = schema["properties"]
    if unknown := [name for name in content if name not in properties]:
        return f"the answer has a field the question does not ask for: {unknown[0]!r}"
    for name in schema.get("required", ()):
        if name not in content:
            return f"the answer lacks the required field {name!r}"
    for name, value in content.items():
        problem = field_problem(properties[name], value)
        if problem is not None:
            return f"the answer's field {name!r} {problem}"
    return None


def _kind(value: Any) -> str:
    return "nothing" if value is None else f"a {type(value).__name__}"
