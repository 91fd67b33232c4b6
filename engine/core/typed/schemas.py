"""The JSON Schema of a Python type, as a typed tool's parameters and return value declare it.

=============================================  ===============================================
Python                                          JSON Schema
=============================================  ===============================================
``int``, ``float``, ``str``, ``bool``, ``None``  ``integer``, ``number``, ``string``,
                                                ``boolean``, ``null``
``Any``                                         ``{}`` (any JSON value)
``list[T]``                                     ``{"type": "array", "items": T}``
``tuple[T, ...]``                               the same, structured into a tuple
``tuple[A, B]``                                 ``prefixItems`` ``[A, B]``, exactly two items
``dict[str, T]``                                ``{"type": "object", "additionalProperties": T}``
``Literal["a", 1]``, an ``Enum``                ``{"enum": [...]}`` of the values
``A | B``, ``Optional[A]``                      ``{"type": [...]}`` for plain types, else
                                                ``anyOf``
attrs class, dataclass, ``TypedDict``           an object with its fields as properties, the
                                                fields without a default required, no others
                                                allowed; a class that contains itself is
                                                written once under ``$defs`` and referred to
                                                with ``$ref``
``Annotated[T, "text"]``, ``Param(...)``        T's schema with a description, constraints
=============================================  ===============================================

Every other type is refused with a :class:`~engine.core.errors.ToolSignatureError` that says
what to write instead. The schemas are 2020-12 (MCP's dialect), ordinary schemas for the
checker of :mod:`engine.core.schemas`; only a fixed-length tuple needs its 2020-12 validator
(``prefixItems``), which the ``schemas2020`` extra installs. Pure.
"""

from __future__ import annotations

import collections.abc
import enum
import json
import typing
from collections.abc import Mapping
from typing import Any, Final

from ..errors import ToolSignatureError
from ..jsonvalues import ensure_json
from ..schemas import draft2020
from ..toolcontext import ToolContext
from .classes import NO_DEFAULT, class_kind
from .conversion import learn_class, unstructure_hook
from .docstrings import read_docstring
from .params import KEYWORDS, Param

__all__ = ["JSON_TYPES", "SUPPORTED", "TypeSchemas", "json_default"]

#: What to write instead of a type that is refused, in words.
SUPPORTED: Final = ("int, float, str, bool, None, Any, list[T], tuple[...], dict[str, T], "
                    "Literal[...], an Enum, a union (A | B), an attrs class, a dataclass or a "
                    "TypedDict")
#: The JSON type names, in the order a schema lists them.
JSON_TYPES: Final = ("null", "boolean", "integer", "number", "string", "array", "object")
_SCALARS: Final[dict[Any, str]] = {type(None): "null", bool: "boolean", int: "integer",
                                   float: "number", str: "string"}
_UNION_TYPE: Final = type(int | str)
_REFUSED: Final[dict[Any, str]] = {
    set: "JSON has no sets: take a list[T] and make a set of it in the tool",
    frozenset: "JSON has no sets: take a list[T] and make a set of it in the tool",
    bytes: "JSON has no bytes: take a str (base64 or text) and decode it in the tool",
    bytearray: "JSON has no bytes: take a str (base64 or text) and decode it in the tool",
    object: "a bare object says nothing about its value: take Any for any JSON value, or "
            "a precise type",
    complex: "JSON has no complex numbers: take two floats, or a tuple[float, float]",
}


def _json_value(value: Any) -> Any:
    return value.value if isinstance(value, enum.Enum) else value


def json_default(value: Any, tp: Any) -> tuple[bool, Any]:
    """``value`` as JSON for a schema's ``default`` (unstructured as ``tp``), and whether it
    is JSON at all: a default that is not (an object, a ``nan``) is left out of the schema."""
    try:
        plain = unstructure_hook(tp)(value)
        ensure_json(plain)
        return True, json.loads(json.dumps(plain))  # tuples as lists, a private copy
    except Exception:
        return False, None


class TypeSchemas:
    """Schemas of the types of one tool's parameters, or of its return value: the classes
    they contain are written once under :attr:`defs` when they contain themselves.

    ``where`` starts every error message (``"tool 'add'"``); ``localns`` is the scope the
    tool was decorated in, where the names of its annotations are looked up after its
    module's."""

    def __init__(self, where: str, localns: Mapping[str, Any] | None) -> None:
        self.where = where
        self.localns = localns
        #: the classes that contain themselves, by their name under ``$defs``
        self.defs: dict[str, dict[str, Any]] = {}
        self._names: dict[type, str] = {}
        self._open: list[type] = []
        self._recursive: set[type] = set()

    def fail(self, at: str, problem: str) -> ToolSignatureError:
        """The error for the type found ``at`` (``"parameter 'x'"``)."""
        return ToolSignatureError(f"{self.where}, {at}: {problem}")

    def root(self, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
        """An object schema with ``properties``, no others, and the ``$defs`` made so far."""
        schema: dict[str, Any] = {"type": "object", "properties": properties}
        if required:
            schema["required"] = required
        schema["additionalProperties"] = False
        if self.defs:
            schema["$defs"] = dict(self.defs)
        return schema

    # -- one type --------------------------------------------------------------------------------

    def schema(self, tp: Any, at: str) -> dict[str, Any]:
        """The schema of ``tp``, found ``at`` (for messages)."""
        origin = typing.get_origin(tp)
        if origin is typing.Annotated:
            return self._annotated(tp, at)
        if tp is Any:
            return {}
        if tp is None:
            tp = type(None)
        if tp in _SCALARS:
            return {"type": _SCALARS[tp]}
        if isinstance(tp, str | typing.ForwardRef):
            raise self.fail(at, f"the annotation {tp!r} was not resolved; define the name it "
                            f"refers to before the tool is decorated")
        if origin is typing.Literal:
            return self._enum([_json_value(v) for v in typing.get_args(tp)], tp, at)
        if isinstance(tp, type) and issubclass(tp, enum.Enum):
            return self._enum([member.value for member in tp], tp, at)
        if origin in (typing.Union, _UNION_TYPE):
            return self._union(typing.get_args(tp), at)
        if origin in (list, collections.abc.Sequence, collections.abc.MutableSequence) or tp is list:
            if origin is not list and tp is not list:
                raise self.fail(at, f"{_name(tp)} is not a type a parameter can have: take "
                                f"list[...] (a JSON array)")
            (item,) = typing.get_args(tp) or (Any,)
            items = self.schema(item, f"{at}, an item")
            return {"type": "array", "items": items} if items else {"type": "array"}
        if origin is tuple or tp is tuple:
            return self._tuple(typing.get_args(tp), at)
        if origin is dict or tp is dict:
            return self._dict(typing.get_args(tp), at)
        if hasattr(tp, "__supertype__"):  # a NewType
            return self.schema(tp.__supertype__, at)
        return self._other(tp, origin, at)

    def _other(self, tp: Any, origin: Any, at: str) -> dict[str, Any]:
        if origin is not None and class_kind(origin) is not None:
            raise self.fail(at, f"{_name(tp)} is a generic class: a tool takes a class whose "
                            f"fields have plain types")
        if class_kind(tp) is not None:
            return self._class(tp, at)
        refused = _REFUSED.get(origin or tp)
        if refused is not None:
            raise self.fail(at, f"{_name(tp)}: {refused}")
        if isinstance(tp, typing.TypeVar):
            raise self.fail(at, f"the type variable {tp} says nothing about the value: use a "
                            f"concrete type ({SUPPORTED})")
        if isinstance(tp, type) and ToolContext in tp.__mro__ or _is_call(tp):
            raise self.fail(at, f"{_name(tp)} is given by the engine only to a parameter of "
                            f"its own (ctx: ToolContext), never inside another type")
        if origin in (collections.abc.Callable,) or tp is collections.abc.Callable or (
                callable(tp) and not isinstance(tp, type)):
            raise self.fail(at, f"{_name(tp)}: a function cannot be sent as JSON; take the "
                            f"data the tool needs ({SUPPORTED})")
        if origin in (set, frozenset, collections.abc.Set, collections.abc.MutableSet):
            raise self.fail(at, f"{_name(tp)}: {_REFUSED[set]}")
        if origin in (collections.abc.Mapping, collections.abc.MutableMapping):
            raise self.fail(at, f"{_name(tp)}: take dict[str, ...] (a JSON object)")
        raise self.fail(at, f"{_name(tp)} is not a type a tool can exchange as JSON; use "
                        f"{SUPPORTED} (a str for a path, a date or a URL, converted in the "
                        f"tool)")

    def _annotated(self, tp: Any, at: str) -> dict[str, Any]:
        schema = dict(self.schema(tp.__origin__, at))
        for extra in tp.__metadata__:
            if isinstance(extra, str):
                schema["description"] = extra
            elif isinstance(extra, Param):
                schema = self.constrained(schema, extra, at)
        return schema

    def constrained(self, schema: dict[str, Any], param: Param, at: str) -> dict[str, Any]:
        """``schema`` with ``param``'s description and constraints (each checked to apply to
        a type the schema admits)."""
        schema = dict(schema)
        if param.description is not None:
            schema["description"] = param.description
        kinds = _kinds(schema)
        for name, by_type in KEYWORDS.items():
            value = getattr(param, name)
            if value is None:
                continue
            applies = [by_type[kind] for kind in JSON_TYPES if kind in by_type and kind in kinds]
            if not applies:
                raise self.fail(at, f"Param({name}=...) applies to "
                                f"{' or '.join(sorted(set(by_type)))} values, and this type "
                                f"has none; remove it or change the type")
            for keyword in dict.fromkeys(applies):
                schema[keyword] = value
        return schema

    def _enum(self, values: list[Any], tp: Any, at: str) -> dict[str, Any]:
        if not values:
            raise self.fail(at, f"{_name(tp)} has no values")
        kinds: list[str] = []
        for value in values:
            if value is not None and not isinstance(value, (str, int, float, bool)):
                raise self.fail(at, f"{_name(tp)} has the value {value!r}, which is not a JSON "
                                f"string, number, boolean or null")
            if isinstance(value, float) and value != value:
                raise self.fail(at, f"{_name(tp)} has the value nan, which JSON cannot hold")
            kind = _SCALARS[type(value) if type(value) in _SCALARS else int]
            kind = "number" if kind == "integer" and isinstance(value, float) else kind
            if kind not in kinds:
                kinds.append(kind)
        if "integer" in kinds and "number" in kinds:
            kinds.remove("integer")
        ordered = [kind for kind in JSON_TYPES if kind in kinds]
        return {"type": ordered[0] if len(ordered) == 1 else ordered, "enum": values}

    def _union(self, members: tuple[Any, ...], at: str) -> dict[str, Any]:
        schemas = [self.schema(member, at) for member in members]
        if any(not schema for schema in schemas):
            return {}  # Any among them: any value
        if all(set(schema) == {"type"} for schema in schemas):
            kinds: list[str] = []
            for schema in schemas:
                kind = schema["type"]
                kinds.extend(k for k in ([kind] if isinstance(kind, str) else kind)
                             if k not in kinds)
            ordered = [kind for kind in JSON_TYPES if kind in kinds]
            return {"type": ordered[0] if len(ordered) == 1 else ordered}
        return {"anyOf": schemas}

    def _tuple(self, args: tuple[Any, ...], at: str) -> dict[str, Any]:
        if not args:
            return {"type": "array"}  # a bare tuple: any items
        if len(args) == 2 and args[1] is Ellipsis:
            items = self.schema(args[0], f"{at}, an item")
            return {"type": "array", "items": items} if items else {"type": "array"}
        if args == ((),):  # tuple[()]: the empty tuple
            return {"type": "array", "maxItems": 0}
        if not draft2020.available():
            raise self.fail(at, f"tuple[{', '.join(_name(arg) for arg in args)}]: a tuple of "
                            f"fixed length is checked by the 2020-12 validator (prefixItems), "
                            f"which is not installed: pip install 'toolledger[schemas2020]', "
                            f"or take tuple[T, ...] or list[T]")
        prefix = [self.schema(arg, f"{at}, item {index}") for index, arg in enumerate(args)]
        return {"type": "array", "prefixItems": prefix, "minItems": len(prefix),
                "maxItems": len(prefix)}

    def _dict(self, args: tuple[Any, ...], at: str) -> dict[str, Any]:
        key, value = args or (str, Any)
        plain_key = key.__origin__ if typing.get_origin(key) is typing.Annotated else key
        if plain_key is not str:
            raise self.fail(at, f"dict[{_name(key)}, ...]: the keys of a JSON object are "
                            f"strings; take dict[str, ...]")
        values = self.schema(value, f"{at}, a value")
        return {"type": "object", "additionalProperties": values} if values else {
            "type": "object"}

    # -- classes ---------------------------------------------------------------------------------

    def _class(self, cls: type, at: str) -> dict[str, Any]:
        if cls in self._open or self._names.get(cls) in self.defs:
            self._recursive.add(cls)
            return {"$ref": f"#/$defs/{self._name_of(cls)}"}
        self._open.append(cls)
        try:
            schema = self._fields(cls, at)
        finally:
            self._open.pop()
        if cls not in self._recursive:
            return schema
        name = self._name_of(cls)
        self.defs[name] = schema
        return {"$ref": f"#/$defs/{name}"}

    def _name_of(self, cls: type) -> str:
        name = self._names.get(cls)
        if name is None:
            taken = set(self._names.values())
            name, n = cls.__name__, 1
            while name in taken:
                n += 1
                name = f"{cls.__name__}{n}"
            self._names[cls] = name
        return name

    def _fields(self, cls: type, at: str) -> dict[str, Any]:
        fields = learn_class(cls, self.localns)
        doc = read_docstring(_own_doc(cls))
        properties: dict[str, Any] = {}
        required: list[str] = []
        for field in fields:
            schema = dict(self.schema(field.type, f"{at}, field {field.key!r} of "
                                                  f"{cls.__qualname__}"))
            described = doc.params.get(field.key) or doc.params.get(field.attribute)
            if described and "description" not in schema:
                schema["description"] = described
            if field.required:
                required.append(field.key)
            elif field.default is not NO_DEFAULT:
                ok, value = json_default(field.default, field.type)
                if ok:
                    schema["default"] = value
            properties[field.key] = schema
        schema = {"type": "object", "title": cls.__name__}
        if doc.description:
            schema["description"] = doc.description
        schema["properties"] = properties
        if required:
            schema["required"] = required
        schema["additionalProperties"] = False
        return schema


def _own_doc(cls: type) -> str | None:
    """``cls``'s docstring, unless it is one Python wrote for it (a dataclass's signature,
    an Enum's "An enumeration.")."""
    doc = cls.__dict__.get("__doc__")
    if not isinstance(doc, str) or doc.startswith(f"{cls.__name__}("):
        return None
    return doc


def _is_call(tp: Any) -> bool:
    """``engine.core.tools.ToolCall``, known by name (this package does not import it)."""
    return isinstance(tp, type) and tp.__name__ == "ToolCall" and tp.__module__ == (
        "engine.core.tools")


def _kinds(schema: Mapping[str, Any]) -> set[str]:
    """The JSON types a schema made here admits."""
    if "$ref" in schema:
        return {"object"}
    if "anyOf" in schema:
        return set().union(*(_kinds(branch) for branch in schema["anyOf"]))
    kind = schema.get("type")
    if kind is None:
        return set(JSON_TYPES)
    kinds = {kind} if isinstance(kind, str) else set(kind)
    return kinds | ({"number"} if "integer" in kinds else set())


def _name(tp: Any) -> str:
    if isinstance(tp, type):
        return tp.__qualname__
    return str(tp).replace("typing.", "")
