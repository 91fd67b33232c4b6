"""Values that fit a JSON Schema: the strategies behind
:func:`engine.testing.valid_arguments`, and what reading a schema takes (its keywords, its
``$ref``s, its types' bounds), which :mod:`engine.testing.breaking` uses too.

A schema that refers to itself is unrolled :data:`UNROLLED` references deep; below that, only
values that need no further reference are drawn (lists as short as they may be, optional
properties left out), so every value is finite.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Final

from hypothesis import strategies as st

from ..core.schemas.patterns import searcher

__all__ = ["INERT", "KEY", "TYPES", "UNROLLED", "Reader", "bounds", "fits_type", "int_bounds",
           "json_values", "lists", "types_of"]

INERT: Final = frozenset({"title", "description", "default", "examples", "format", "$schema",
                          "$comment", "$id", "readOnly", "writeOnly", "deprecated", "$defs",
                          "definitions"})
_UNDERSTOOD: Final = INERT | frozenset({
    "type", "properties", "required", "additionalProperties", "enum", "const", "minLength",
    "maxLength", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "items",
    "minItems", "maxItems", "prefixItems", "anyOf", "$ref", "pattern", "multipleOf",
    "minProperties", "maxProperties",
})
TYPES: Final = ("null", "boolean", "integer", "number", "string", "array", "object")
KEY: Final = st.text(st.characters(min_codepoint=97, max_codepoint=122), min_size=1, max_size=6)
#: how many references deep a schema that refers to itself is unrolled
UNROLLED: Final = 3


def json_values(max_leaves: int = 6) -> st.SearchStrategy[Any]:
    """Any JSON value: ``None``, booleans, integers, finite floats, text, lists and objects."""
    leaves = st.one_of(st.none(), st.booleans(), st.integers(-1000, 1000),
                       st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8))
    return st.recursive(
        leaves,
        lambda children: st.one_of(st.lists(children, max_size=3),
                                   st.dictionaries(KEY, children, max_size=3)),
        max_leaves=max_leaves,
    )


def lists(items: st.SearchStrategy[Any], *, min_size: int = 0,
          max_size: int | None = None) -> st.SearchStrategy[list[Any]]:
    """``st.lists``, also of items none can be drawn of (a reference past the unrolled depth):
    then only the empty list, if it may be empty."""
    if items.is_empty:
        return st.just([]) if min_size == 0 else st.nothing()
    return st.lists(items, min_size=min_size, max_size=max_size)


def types_of(schema: Mapping[str, Any]) -> tuple[str, ...]:
    """The JSON types a schema's ``type`` keyword names (all of them if it has none)."""
    kind = schema.get("type")
    if kind is None:
        return TYPES
    return (kind,) if isinstance(kind, str) else tuple(kind)


def fits_type(value: Any, kinds: tuple[str, ...]) -> bool:
    """Whether ``value`` is of one of the JSON types ``kinds``."""
    for kind in kinds:
        if kind == "null" and value is None:
            return True
        if kind == "boolean" and isinstance(value, bool):
            return True
        numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
        if kind in ("integer", "number") and numeric:
            if kind == "number" or isinstance(value, int) or float(value).is_integer():
                return True
        if kind == "string" and isinstance(value, str):
            return True
        if kind == "array" and isinstance(value, list):
            return True
        if kind == "object" and isinstance(value, dict):
            return True
    return False


def bounds(schema: Mapping[str, Any]) -> tuple[float | None, float | None, bool, bool]:
    """A number schema's lower and upper bounds, and whether each is exclusive."""
    low, high = schema.get("minimum"), schema.get("maximum")
    low_open = high_open = False
    if "exclusiveMinimum" in schema and (low is None or schema["exclusiveMinimum"] >= low):
        low, low_open = schema["exclusiveMinimum"], True
    if "exclusiveMaximum" in schema and (high is None or schema["exclusiveMaximum"] <= high):
        high, high_open = schema["exclusiveMaximum"], True
    return low, high, low_open, high_open


def int_bounds(schema: Mapping[str, Any]) -> tuple[int | None, int | None]:
    """The smallest and largest whole numbers a number schema's bounds allow."""
    low, high, low_open, high_open = bounds(schema)
    return (
        None if low is None else math.floor(low) + 1 if low_open or low != math.floor(low)
        else int(low),
        None if high is None else math.ceil(high) - 1 if high_open or high != math.ceil(high)
        else int(high),
    )


class Reader:
    """One schema document: its subschemas' strategies, with its ``$ref``s resolved."""

    def __init__(self, root: Any) -> None:
        self.root = root
        self._valid: dict[tuple[str, int], st.SearchStrategy[Any]] = {}

    def check(self, schema: Any) -> Mapping[str, Any] | bool:
        """``schema`` if every keyword it uses is understood, else ``ValueError``."""
        if isinstance(schema, bool):
            return schema
        if not isinstance(schema, Mapping):
            raise ValueError(f"a schema is a JSON object or a boolean, not {schema!r}")
        unknown = sorted(set(schema) - _UNDERSTOOD)
        if unknown:
            raise ValueError(
                f"engine.testing cannot generate arguments for a schema with {unknown[0]!r}: "
                f"it understands {', '.join(sorted(_UNDERSTOOD - INERT))}; write a strategy "
                f"for this schema by hand"
            )
        if "$ref" in schema and not set(schema) - {"$ref"} <= INERT:
            raise ValueError(f"engine.testing cannot generate arguments for a \"$ref\" beside "
                             f"{sorted(set(schema) - INERT - {'$ref'})}")
        for key in ("exclusiveMinimum", "exclusiveMaximum"):
            if isinstance(schema.get(key), bool):
                raise ValueError(f"{key} as a boolean (draft-04) is not supported here")
        step = schema.get("multipleOf")
        if step is not None and not (isinstance(step, int) or float(step).is_integer()):
            raise ValueError("engine.testing generates for a whole-number multipleOf only")
        return schema

    def resolve(self, ref: str) -> Any:
        """The subschema a local ``$ref`` (``#/$defs/Name``) points to."""
        if not ref.startswith("#"):
            raise ValueError(f"engine.testing follows local references only, not {ref!r}")
        node = self.root
        for token in filter(None, ref[1:].split("/")):
            node = node[token.replace("~1", "/").replace("~0", "~")]
        return node

    # -- values that fit -------------------------------------------------------------------------

    def valid(self, schema: Any, depth: int) -> st.SearchStrategy[Any]:
        """Values that satisfy ``schema``, found ``depth`` references down."""
        checked = self.check(schema)
        if checked is True:
            return json_values()
        if checked is False:
            return st.nothing()
        if "$ref" in checked:
            return self._valid_ref(checked["$ref"], depth)
        if "anyOf" in checked:
            rest = {k: v for k, v in checked.items() if k != "anyOf" and k not in INERT}
            return st.one_of([self.valid(merged(branch, rest), depth)
                              for branch in checked["anyOf"]])
        if "const" in checked:
            return st.just(checked["const"])
        if "enum" in checked:
            kinds = types_of(checked)
            return st.sampled_from([v for v in checked["enum"] if fits_type(v, kinds)])
        return st.one_of([self._valid_of_type(checked, kind, depth) for kind in types_of(checked)])

    def _valid_ref(self, ref: str, depth: int) -> st.SearchStrategy[Any]:
        if depth >= UNROLLED:
            return st.nothing()  # deep enough: the value takes a branch that needs no more
        key = (ref, depth)
        if key not in self._valid:
            self._valid[key] = st.deferred(lambda: self.valid(self.resolve(ref), depth + 1))
        return self._valid[key]

    def _valid_of_type(self, schema: Mapping[str, Any], kind: str,
                       depth: int) -> st.SearchStrategy[Any]:
        if kind == "null":
            return st.none()
        if kind == "boolean":
            return st.booleans()
        if kind in ("integer", "number"):
            low, high = int_bounds(schema)
            step = schema.get("multipleOf")
            if step is not None:
                step = int(step)
                return st.integers(None if low is None else -(-low // step),
                                   None if high is None else high // step).map(
                    lambda k: k * step)
            ints = st.integers(low, high)
            if kind == "integer":
                return ints
            flow, fhigh, low_open, high_open = bounds(schema)
            floats = st.floats(flow, fhigh, exclude_min=low_open, exclude_max=high_open,
                               allow_nan=False, allow_infinity=False)
            return st.one_of(ints, floats)
        if kind == "string":
            low_len = int(schema.get("minLength", 0))
            high_len = schema.get("maxLength")
            high = int(high_len) if high_len is not None else low_len + 8
            if "pattern" in schema:
                pattern = schema["pattern"]
                search = searcher(pattern)  # the engine's matcher: Python's re reads "$" otherwise
                return st.from_regex(pattern).filter(
                    lambda s: low_len <= len(s) <= high and search(s) is not None)
            return st.text(min_size=low_len, max_size=high)
        if kind == "array":
            return self._valid_array(schema, depth)
        return self._valid_object(schema, depth)

    def _valid_array(self, schema: Mapping[str, Any], depth: int) -> st.SearchStrategy[Any]:
        low_n = int(schema.get("minItems", 0))
        high_n = schema.get("maxItems")
        deep = depth >= UNROLLED
        items = self.valid(schema.get("items", True), depth)
        prefix = [self.valid(sub, depth) for sub in schema.get("prefixItems", ())]
        if not prefix:
            top = low_n if deep else int(high_n) if high_n is not None else low_n + 3
            return lists(items, min_size=low_n, max_size=top)
        # the first len(prefix) items follow prefixItems (an array may stop before their end)
        n = len(prefix)
        extra_low = max(low_n - n, 0)
        extra_high = extra_low if deep else (int(high_n) - n if high_n is not None
                                             else extra_low + 2)
        if schema.get("items", True) is False:
            extra_high = 0

        def build(count: int) -> st.SearchStrategy[Any]:
            head = st.tuples(*prefix[:count]).map(list)
            if count < n:
                return head
            return st.builds(lambda h, t: h + t, head,
                             lists(items, min_size=extra_low, max_size=max(extra_low,
                                                                            extra_high)))

        shortest = min(low_n, n)
        longest = n if high_n is None else min(n, int(high_n))
        return st.integers(shortest, longest).flatmap(build)

    def _valid_object(self, schema: Mapping[str, Any], depth: int) -> st.SearchStrategy[Any]:
        properties: Mapping[str, Any] = schema.get("properties", {})
        required = list(schema.get("required", ()))
        extra = schema.get("additionalProperties", True)
        fixed = {name: self.valid(properties.get(name, extra), depth) for name in required}
        optional = {} if depth >= UNROLLED else {
            name: self.valid(sub, depth) for name, sub in properties.items() if name not in fixed}
        optional = {name: values for name, values in optional.items() if not values.is_empty}
        known = st.fixed_dictionaries(fixed, optional=optional)
        low, high = schema.get("minProperties", 0), schema.get("maxProperties")
        if extra is not False and not (others_values := self.valid(extra, depth)).is_empty:
            others = st.dictionaries(KEY.filter(lambda k: k not in properties and k not in fixed),
                                     others_values, max_size=max(2, int(low)))
            known = st.builds(lambda base, more: {**more, **base}, known, others)
        if low or high is not None:
            known = known.filter(lambda v: low <= len(v) and (high is None or len(v) <= high))
        return known


def merged(branch: Any, rest: Mapping[str, Any]) -> Any:
    """A branch of ``anyOf`` with the keywords beside ``anyOf`` added (refused where they
    clash with the branch's own)."""
    if not rest:
        return branch
    if not isinstance(branch, Mapping) or "$ref" in branch or set(branch) & set(rest):
        raise ValueError("engine.testing cannot generate arguments for \"anyOf\" with "
                         f"keywords beside it that its branches also use: {sorted(rest)}")
    return {**branch, **rest}
