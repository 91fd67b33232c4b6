"""``Param``: what a parameter's type alone cannot say, written beside it in ``Annotated``.

``Annotated[int, Param("how many", ge=1)]`` gives the parameter a description and a lower
bound; ``Annotated[str, "the path"]`` is the short form of a description alone. Both work on
a tool's parameters and on the fields of the attrs classes, dataclasses and TypedDicts they
take. The constraints become JSON Schema keywords of the parameter's schema, so they are
checked with the rest of the arguments, before the tool runs, and the model reads them.
Pure: data only.
"""

from __future__ import annotations

import math
from typing import Any, Final

import attrs

__all__ = ["KEYWORDS", "Param"]


def _number(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                              or not math.isfinite(value)):
        raise TypeError(f"Param({attribute.name}=...) takes a finite number, not {value!r}")


def _count(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                              or value < 0):
        raise TypeError(f"Param({attribute.name}=...) takes a whole number >= 0, not {value!r}")


def _text(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and not isinstance(value, str):
        raise TypeError(f"Param({attribute.name}=...) takes a string, not {value!r}")


def _positive(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    _number(_, attribute, value)
    if value is not None and not value > 0:
        raise TypeError(f"Param({attribute.name}=...) takes a number > 0, not {value!r}")


@attrs.frozen
class Param:
    """A parameter's description and constraints, for ``Annotated[T, Param(...)]``.

    ``ge``/``le`` bound a number inclusively, ``gt``/``lt`` exclusively, ``multiple_of``
    asks for a multiple; ``min_length``/``max_length`` bound a string's length, a list's or
    tuple's items, or a dict's keys; ``pattern`` is a regular expression a string must
    contain a match of (anchor it with ``^...$`` for the whole string; it must run in linear
    time, as every schema pattern: docs/schemas.md). A constraint on a type it cannot apply
    to is refused where the tool is decorated. Example::

        @tool
        async def resize(
            path: Annotated[str, Param("the image to resize", pattern=r"\\.png$")],
            width: Annotated[int, Param(ge=1, le=4096)] = 512,
        ) -> str: ...
    """

    description: str | None = attrs.field(default=None, validator=_text)
    ge: float | None = attrs.field(default=None, kw_only=True, validator=_number)
    le: float | None = attrs.field(default=None, kw_only=True, validator=_number)
    gt: float | None = attrs.field(default=None, kw_only=True, validator=_number)
    lt: float | None = attrs.field(default=None, kw_only=True, validator=_number)
    multiple_of: float | None = attrs.field(default=None, kw_only=True, validator=_positive)
    min_length: int | None = attrs.field(default=None, kw_only=True, validator=_count)
    max_length: int | None = attrs.field(default=None, kw_only=True, validator=_count)
    pattern: str | None = attrs.field(default=None, kw_only=True, validator=_text)


#: Each constraint of :class:`Param`: the JSON types it applies to, and its keyword for each.
KEYWORDS: Final[dict[str, dict[str, str]]] = {
    "ge": {"integer": "minimum", "number": "minimum"},
    "le": {"integer": "maximum", "number": "maximum"},
    "gt": {"integer": "exclusiveMinimum", "number": "exclusiveMinimum"},
    "lt": {"integer": "exclusiveMaximum", "number": "exclusiveMaximum"},
    "multiple_of": {"integer": "multipleOf", "number": "multipleOf"},
    "min_length": {"string": "minLength", "array": "minItems", "object": "minProperties"},
    "max_length": {"string": "maxLength", "array": "maxItems", "object": "maxProperties"},
    "pattern": {"string": "pattern"},
}
