"""JSON values into a typed tool's parameter types, and its return value back into JSON.

One cattrs converter does it, configured here once: strict hooks for the JSON scalars (a
``bool`` is no ``int``, a ``str`` is no list), hooks for ``Literal``, ``Enum``, unions and
``Annotated``, and for each attrs class, dataclass and TypedDict a hook made from its
:func:`~.classes.fields_of` (the list the schema is made from too). Extra keys are refused,
as the schemas refuse them.

The arguments reach these hooks only after the input schema accepted them (the gate's step
2), so what fails here is what the schema lets through and the type cannot hold: an integer
too large for a ``float`` (``10**400``), a value an attrs validator refuses, a ``true`` for
``Literal[1]``. The failure names the path (``$.points[2].x``) and the gate ends the call
``invalid_arguments`` with it. A float with no fraction (``3.0``) is JSON's integer ``3``,
and an ``int`` parameter takes it as ``3``.

A union tries its members in the order written and takes the first that fits: ``float | int``
makes ``3`` a ``3.0``, ``int | float`` keeps it ``3``. A member does not fit a value that
breaks its ``Param`` constraints: ``Annotated[str, Param(max_length=3)] | Color`` makes
``"red"`` a ``str`` and ``"green"`` a ``Color``, as the schema's ``anyOf`` told them apart.

Each class's hooks are registered when a tool that uses the class is decorated
(:func:`learn_class`): its fields' types are resolved in the scope the tool was decorated in,
so a class defined inside a function works too. Pure: no I/O.
"""

from __future__ import annotations

import enum
import math
import re
import typing
from collections.abc import Callable, Mapping
from typing import Any, Final

import cattrs
from cattrs.errors import AttributeValidationNote, ClassValidationError

from .classes import Field, class_kind, fields_of
from .params import Param

__all__ = [
    "StructureError",
    "explain",
    "learn_class",
    "same_json",
    "structure_hook",
    "unstructure_hook",
]


class StructureError(ValueError):
    """A JSON value a type cannot hold; the message says why, for the model to read."""


def same_json(a: Any, b: Any) -> bool:
    """JSON equality of two scalars: ``1 == 1.0``, but ``True`` is not ``1``."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, enum.Enum) or isinstance(b, enum.Enum):
        return False
    return type(a) is type(b) and a == b or (
        isinstance(a, (int, float)) and isinstance(b, (int, float)) and a == b)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:40]}… ({len(text)} characters)"


# -- the scalars --------------------------------------------------------------------------------

def _int(value: Any, _: Any) -> int:
    if type(value) is int:
        return value
    if type(value) is float and value.is_integer():
        return int(value)
    raise StructureError(f"expected an integer, got {_shown(value)}")


def _float(value: Any, _: Any) -> float:
    if type(value) in (int, float):
        try:
            return float(value)
        except OverflowError:
            raise StructureError(f"{_shown(value)} is too large for a float") from None
    raise StructureError(f"expected a number, got {_shown(value)}")


def _str(value: Any, _: Any) -> str:
    if type(value) is str:
        return value
    raise StructureError(f"expected a string, got {_shown(value)}")


def _bool(value: Any, _: Any) -> bool:
    if type(value) is bool:
        return value
    raise StructureError(f"expected true or false, got {_shown(value)}")


def _none(value: Any, _: Any) -> None:
    if value is None:
        return None
    raise StructureError(f"expected null, got {_shown(value)}")


# -- Literal, Enum, unions, Annotated ------------------------------------------------------------

def _is_literal(tp: Any) -> bool:
    return typing.get_origin(tp) is typing.Literal


def _literal(tp: Any) -> Callable[[Any, Any], Any]:
    allowed = typing.get_args(tp)

    def structure(value: Any, _: Any) -> Any:
        for option in allowed:
            plain = option.value if isinstance(option, enum.Enum) else option
            if same_json(plain, value):
                return option
        raise StructureError(f"{_shown(value)} is none of "
                             f"{', '.join(_shown(_plain(option)) for option in allowed)}")

    return structure


def _plain(value: Any) -> Any:
    return value.value if isinstance(value, enum.Enum) else value


def _is_enum(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, enum.Enum)


def _enum(tp: Any) -> Callable[[Any, Any], Any]:
    members = list(tp)

    def structure(value: Any, _: Any) -> Any:
        for member in members:
            if same_json(member.value, value):
                return member
        raise StructureError(f"{_shown(value)} is not a value of {tp.__name__}")

    return structure


_UNION_TYPE: Final = type(int | str)


def _is_union(tp: Any) -> bool:
    return typing.get_origin(tp) in (typing.Union, _UNION_TYPE)


def _union(tp: Any) -> Callable[[Any, Any], Any]:
    members = typing.get_args(tp)
    hooks: list[Callable[[Any, Any], Any]] = []

    def structure(value: Any, _: Any) -> Any:
        if not hooks:  # made at the first use: a member may be a class being made now
            hooks.extend(CONVERTER.get_structure_hook(member) for member in members)
        problems = []
        for member, hook in zip(members, hooks):
            try:
                return hook(value, member)
            except Exception as exc:
                problems.append(explain(exc))
        raise StructureError(f"{_shown(value)} fits none of the types it may have: "
                             + "; ".join(problems))

    return structure


def _is_annotated(tp: Any) -> bool:
    return typing.get_origin(tp) is typing.Annotated


def _annotated(tp: Any) -> Callable[[Any, Any], Any]:
    inner = tp.__origin__
    hook = CONVERTER.get_structure_hook(inner)
    params = [note for note in tp.__metadata__ if isinstance(note, Param)]
    if not params:
        return lambda value, _: hook(value, inner)

    def structure(value: Any, _: Any) -> Any:
        # the schema checked these already, except where a union chooses among its members:
        # a member whose constraints the value breaks does not fit it
        for param in params:
            _within(param, value)
        return hook(value, inner)

    return structure


def _within(param: Param, value: Any) -> None:
    """Raise :class:`StructureError` if ``value`` breaks a constraint of ``param``, as its
    schema's keywords would (:data:`~.params.KEYWORDS`)."""
    broken: str | None = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if param.ge is not None and not value >= param.ge:
            broken = f"less than {param.ge}"
        elif param.le is not None and not value <= param.le:
            broken = f"more than {param.le}"
        elif param.gt is not None and not value > param.gt:
            broken = f"not more than {param.gt}"
        elif param.lt is not None and not value < param.lt:
            broken = f"not less than {param.lt}"
        elif param.multiple_of is not None and not _multiple(value, param.multiple_of):
            broken = f"not a multiple of {param.multiple_of}"
    elif isinstance(value, (str, list, dict)):
        if param.min_length is not None and len(value) < param.min_length:
            broken = f"shorter than {param.min_length}"
        elif param.max_length is not None and len(value) > param.max_length:
            broken = f"longer than {param.max_length}"
        elif (isinstance(value, str) and param.pattern is not None
              and re.search(param.pattern, value) is None):
            broken = f"not matching {param.pattern!r}"
    if broken is not None:
        raise StructureError(f"{_shown(value)} is {broken}")


def _multiple(value: float, step: float) -> bool:
    quotient = value / step
    return math.isfinite(quotient) and quotient == int(quotient)


def _annotated_out(tp: Any) -> Callable[[Any], Any]:
    return CONVERTER.get_unstructure_hook(tp.__origin__)


def _is_new_type(tp: Any) -> bool:
    return hasattr(tp, "__supertype__") and callable(tp)


def _new_type(tp: Any) -> Callable[[Any, Any], Any]:
    inner = tp.__supertype__
    hook = CONVERTER.get_structure_hook(inner)
    return lambda value, _: hook(value, inner)


# -- classes with fields -------------------------------------------------------------------------

def _class_in(cls: type, fields: tuple[Field, ...]) -> Callable[[Any, Any], Any]:
    """Structure a dict into ``cls`` (its JSON keys are its constructor's arguments)."""
    hooks: list[Callable[[Any, Any], Any]] = []
    known = frozenset(field.key for field in fields)
    typeddict = class_kind(cls) == "typeddict"

    def structure(value: Any, _: Any) -> Any:
        if not isinstance(value, dict):
            raise StructureError(f"expected an object for {cls.__name__}, got {_shown(value)}")
        if not hooks:  # made at the first use: a field's type may be this very class
            hooks.extend(CONVERTER.get_structure_hook(field.type) for field in fields)
        extra = [key for key in value if key not in known]
        if extra:
            raise StructureError(f"{cls.__name__} has no field {', '.join(map(repr, extra))}")
        taken: dict[str, Any] = {}
        errors: list[Exception] = []
        for field, hook in zip(fields, hooks):
            if field.key not in value:
                if field.required:
                    errors.append(_noted(StructureError("required field missing"), field))
                continue
            try:
                taken[field.key] = hook(value[field.key], field.type)
            except Exception as exc:
                errors.append(_noted(exc, field))
        if errors:
            raise ClassValidationError(f"While structuring {cls.__name__}", errors, cls)
        if typeddict:
            return taken
        try:
            return cls(**taken)
        except Exception as exc:  # a validator of the class refused the values
            raise StructureError(f"{cls.__name__}(...) refused these values: "
                                 f"{type(exc).__name__}: {exc}") from None

    return structure


def _noted(exc: Exception, field: Field) -> Exception:
    exc.__notes__ = [*getattr(exc, "__notes__", []),
                     AttributeValidationNote(f"Structuring field {field.key}", field.key,
                                             field.type)]
    return exc


def _class_out(fields: tuple[Field, ...]) -> Callable[[Any], Any]:
    """Unstructure an instance into a dict with the JSON keys the class is built with."""
    hooks: list[Callable[[Any], Any]] = []

    def unstructure(value: Any) -> Any:
        if not hooks:
            hooks.extend(CONVERTER.get_unstructure_hook(field.type) for field in fields)
        if isinstance(value, dict):  # a TypedDict's value
            return {field.key: hook(value[field.key])
                    for field, hook in zip(fields, hooks) if field.key in value}
        return {field.key: hook(getattr(value, field.attribute))
                for field, hook in zip(fields, hooks)}

    return unstructure


def learn_class(cls: type, localns: Mapping[str, Any] | None = None) -> tuple[Field, ...]:
    """Register ``cls``'s hooks, its fields' types resolved in ``localns`` too (see the
    module); returns its fields."""
    fields = fields_of(cls, localns)
    CONVERTER.register_structure_hook(cls, _class_in(cls, fields))
    CONVERTER.register_unstructure_hook(cls, _class_out(fields))
    return fields


def _any_class(tp: Any) -> bool:
    return class_kind(tp) is not None


# -- the converter --------------------------------------------------------------------------------

#: The one converter of typed tools (events have their own, in :mod:`events.codec`).
CONVERTER: Final = cattrs.Converter(forbid_extra_keys=True)
for _scalar, _hook in ((int, _int), (float, _float), (str, _str), (bool, _bool),
                       (type(None), _none)):
    CONVERTER.register_structure_hook(_scalar, _hook)
# a class met only at run time (an untyped tool's return value) is read from its module alone
CONVERTER.register_structure_hook_factory(_any_class, lambda cls: _class_in(cls, fields_of(cls)))
CONVERTER.register_unstructure_hook_factory(_any_class, lambda cls: _class_out(fields_of(cls)))
CONVERTER.register_structure_hook_factory(_is_new_type, _new_type)
CONVERTER.register_structure_hook_factory(_is_enum, _enum)
CONVERTER.register_structure_hook_factory(_is_literal, _literal)
CONVERTER.register_structure_hook_factory(_is_union, _union)
CONVERTER.register_structure_hook_factory(_is_annotated, _annotated)
CONVERTER.register_unstructure_hook_factory(_is_annotated, _annotated_out)


def structure_hook(tp: Any) -> Callable[[Any], Any]:
    """A function that structures a JSON value into ``tp`` (raises on a value it cannot)."""
    hook = CONVERTER.get_structure_hook(tp)
    return lambda value: hook(value, tp)


def unstructure_hook(tp: Any) -> Callable[[Any], Any]:
    """A function that turns a value of ``tp`` into JSON values (tuples stay tuples)."""
    return CONVERTER.get_unstructure_hook(tp)


def _described(exc: BaseException, _: type | None) -> str:
    if isinstance(exc, StructureError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


def explain(exc: BaseException, path: str = "$") -> str:
    """One line for a structuring failure: each problem and where (``... @ $.a[0]``)."""
    return "; ".join(cattrs.transform_error(exc, path, _described))
