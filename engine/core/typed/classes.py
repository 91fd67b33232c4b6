"""The classes a typed tool may take or return, as lists of fields.

An attrs class, a dataclass and a TypedDict are each a JSON object with named fields, some
required. :func:`fields_of` reads any of the three into the same :class:`Field` list, with
each field's type resolved, so the schema (:mod:`.schemas`) and the conversion
(:mod:`.conversion`) of a class are made from one description and cannot disagree about a
field's name, type or whether it may be left out. Pure.

A field's JSON name is the one its class is built with: an attrs field's ``alias`` (``_x`` is
``x``), a dataclass field's name, a TypedDict key. Fields a class does not take in its
constructor (``init=False``) are not in the list: they are neither read nor written.
"""

from __future__ import annotations

import dataclasses
import inspect
import typing
from collections.abc import Mapping
from typing import Any, Literal

import attrs

from ..errors import ToolSignatureError

__all__ = ["NO_DEFAULT", "Field", "class_kind", "fields_of", "resolve_hints"]

#: A field with no plain default value (required, or made by a factory): ``inspect``'s "empty",
#: as for a parameter without a default.
NO_DEFAULT: Any = inspect.Parameter.empty

ClassKind = Literal["attrs", "dataclass", "typeddict"]


@attrs.frozen
class Field:
    """One field of a class: its JSON ``key`` (the constructor's argument), the
    ``attribute`` an instance holds it in, its resolved ``type`` (``Annotated`` kept),
    whether it is ``required``, and its ``default`` when that is a plain value."""

    key: str
    attribute: str
    type: Any
    required: bool
    default: Any = NO_DEFAULT


def class_kind(tp: Any) -> ClassKind | None:
    """Which kind of class with fields ``tp`` is, if any."""
    if not isinstance(tp, type):
        return None
    if attrs.has(tp):
        return "attrs"
    if dataclasses.is_dataclass(tp):
        return "dataclass"
    if issubclass(tp, dict) and hasattr(tp, "__required_keys__") and hasattr(
            tp, "__annotations__"):
        return "typeddict"
    return None


def resolve_hints(owner: Any, localns: Mapping[str, Any] | None, where: str) -> dict[str, Any]:
    """``owner``'s type hints, evaluated, with ``Annotated`` kept: names are looked up in its
    module, and if one is not found there, in ``localns`` first (the scope ``@tool`` was used
    in, for classes defined in a function). Raises :class:`ToolSignatureError` naming a name
    it cannot find."""
    try:
        try:
            return typing.get_type_hints(owner, include_extras=True)
        except NameError:
            if not localns:
                raise
            return typing.get_type_hints(owner, localns=dict(localns), include_extras=True)
    except NameError as exc:
        raise ToolSignatureError(
            f"{where}: the annotation names {exc.name!r}, which is not defined where it was "
            f"written; define it at the top of its module (or before the decorated function, "
            f"in the same scope)") from None
    except Exception as exc:
        raise ToolSignatureError(f"{where}: its annotations cannot be read "
                                 f"({type(exc).__name__}: {exc})") from None


def fields_of(cls: type, localns: Mapping[str, Any] | None = None) -> tuple[Field, ...]:
    """The fields of an attrs class, a dataclass or a TypedDict (see the module)."""
    kind = class_kind(cls)
    where = f"class {cls.__qualname__}"
    if kind == "attrs":
        found: list[Field] = []
        hints: dict[str, Any] | None = None
        for field in attrs.fields(cls):
            if not field.init:
                continue
            tp = field.type
            if tp is None or isinstance(tp, str):
                hints = hints if hints is not None else resolve_hints(cls, localns, where)
                tp = hints.get(field.name)
            if tp is None:
                raise ToolSignatureError(f"{where}: field {field.name!r} has no type; "
                                         f"annotate it ({field.name}: int = ...)")
            default = field.default
            factory = isinstance(default, attrs.Factory)  # type: ignore[arg-type]
            found.append(Field(key=field.alias or field.name, attribute=field.name, type=tp,
                               required=default is attrs.NOTHING,
                               default=NO_DEFAULT if factory else default))
        return tuple(found)
    if kind == "dataclass":
        hints = resolve_hints(cls, localns, where)
        return tuple(
            Field(key=field.name, attribute=field.name, type=hints.get(field.name, field.type),
                  required=(field.default is dataclasses.MISSING
                            and field.default_factory is dataclasses.MISSING),
                  default=NO_DEFAULT if field.default is dataclasses.MISSING else field.default)
            for field in dataclasses.fields(cls) if field.init)
    if kind == "typeddict":
        hints = resolve_hints(cls, localns, where)
        required_keys: frozenset[str] = getattr(cls, "__required_keys__", frozenset())
        found = []
        for key, tp in hints.items():
            tp, marked = _required_marker(tp)
            required = marked if marked is not None else key in required_keys
            found.append(Field(key=key, attribute=key, type=tp, required=required))
        return tuple(found)
    raise TypeError(f"{cls!r} is not an attrs class, a dataclass or a TypedDict")


def _required_marker(tp: Any) -> tuple[Any, bool | None]:
    """``tp`` without ``Required[...]``/``NotRequired[...]`` (also inside ``Annotated``), and
    which of them it said. (``from __future__ import annotations`` hides them from the
    class's own ``__required_keys__`` before Python 3.12, so they are read here.)"""
    origin = typing.get_origin(tp)
    if origin is typing.Required:
        return typing.get_args(tp)[0], True
    if origin is typing.NotRequired:
        return typing.get_args(tp)[0], False
    if origin is typing.Annotated:
        inner, marked = _required_marker(tp.__origin__)
        if marked is not None:
            return typing.Annotated[(inner, *tp.__metadata__)], marked
    return tp, None
