"""Arguments that satisfy, or violate, a JSON Schema: Hypothesis strategies built from it.

:func:`valid_arguments` and :func:`invalid_arguments` read the schema and build a strategy
for it; they understand the keywords :func:`engine.testing.input_schemas` generates (``type``,
also as a list, ``properties``, ``required``, ``additionalProperties``, ``enum``, ``const``,
``minLength``/``maxLength``, ``minimum``/``maximum``/``exclusiveMinimum``/``exclusiveMaximum``
(numbers, as drafts 06+ spell them), ``items`` (one schema), ``minItems``/``maxItems``) and
ignore the annotations (``title``, ``description``, ``default``, ``examples``, ``format``,
``$schema``, ``$comment``). Any other keyword that constrains data raises ``ValueError``
naming it, rather than generating values that might not fit.

Every value :func:`invalid_arguments` draws breaks the schema in one place (the wrong type, a
missing required property, an unexpected one, a value out of range, …) and every value
:func:`valid_arguments` draws fits it; ``tests/testing/test_testing_strategies.py`` checks both
against the engine's own validator. Example::

    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}},
              "required": ["n"]}
    valid_arguments(schema).example()      # e.g. {"n": 3}
    invalid_arguments(schema).example()    # e.g. {"n": -1}, {}, or "n"
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from hypothesis import strategies as st

__all__ = ["json_values", "valid_arguments", "invalid_arguments", "weighted"]

_INERT = frozenset({"title", "description", "default", "examples", "format", "$schema",
                    "$comment", "$id", "readOnly", "writeOnly", "deprecated"})
_UNDERSTOOD = _INERT | frozenset({
    "type", "properties", "required", "additionalProperties", "enum", "const", "minLength",
    "maxLength", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "items",
    "minItems", "maxItems",
})
_TYPES = ("null", "boolean", "integer", "number", "string", "array", "object")
_KEY = st.text(st.characters(min_codepoint=97, max_codepoint=122), min_size=1, max_size=6)


def json_values(max_leaves: int = 6) -> st.SearchStrategy[Any]:
    """Any JSON value: ``None``, booleans, integers, finite floats, text, lists and objects."""
    leaves = st.one_of(st.none(), st.booleans(), st.integers(-1000, 1000),
                       st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8))
    return st.recursive(
        leaves,
        lambda children: st.one_of(st.lists(children, max_size=3),
                                   st.dictionaries(_KEY, children, max_size=3)),
        max_leaves=max_leaves,
    )


def weighted(*options: tuple[int, st.SearchStrategy[Any]]) -> st.SearchStrategy[Any]:
    """Draw from one of ``options``, each ``(weight, strategy)`` chosen in proportion to its
    weight (shrinking towards the first). Unlike ``st.one_of``, where a branch that is itself
    a ``one_of`` counts once per inner branch, the weights here are what they say.
    Example: ``weighted((3, valid_arguments(s)), (1, invalid_arguments(s)))``."""
    strategies = [strategy for _, strategy in options]
    picks = [index for index, (weight, _) in enumerate(options) for _ in range(weight)]
    return st.sampled_from(picks).flatmap(lambda index: strategies[index])


def _check(schema: Any) -> Mapping[str, Any] | bool:
    if isinstance(schema, bool):
        return schema
    if not isinstance(schema, Mapping):
        raise ValueError(f"a schema is a JSON object or a boolean, not {schema!r}")
    unknown = sorted(set(schema) - _UNDERSTOOD)
    if unknown:
        raise ValueError(
            f"engine.testing cannot generate arguments for a schema with {unknown[0]!r}: it "
            f"understands {', '.join(sorted(_UNDERSTOOD - _INERT))}; write a strategy for "
            f"this schema by hand"
        )
    if "exclusiveMinimum" in schema or "exclusiveMaximum" in schema:
        for key in ("exclusiveMinimum", "exclusiveMaximum"):
            if isinstance(schema.get(key), bool):
                raise ValueError(f"{key} as a boolean (draft-04) is not supported here")
    return schema


def _types(schema: Mapping[str, Any]) -> tuple[str, ...]:
    kind = schema.get("type")
    if kind is None:
        return _TYPES
    return (kind,) if isinstance(kind, str) else tuple(kind)


def _fits_type(value: Any, kinds: tuple[str, ...]) -> bool:
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


# -- values that fit -----------------------------------------------------------------------


def valid_arguments(schema: Any) -> st.SearchStrategy[Any]:
    """Values that satisfy ``schema`` (see the module docstring for the keywords understood).

    For a tool's ``input_schema`` these are arguments the engine accepts."""
    checked = _check(schema)
    if checked is True:
        return json_values()
    if checked is False:
        return st.nothing()
    if "const" in checked:
        return st.just(checked["const"])
    if "enum" in checked:
        kinds = _types(checked)
        return st.sampled_from([v for v in checked["enum"] if _fits_type(v, kinds)])
    return st.one_of([_valid_of_type(checked, kind) for kind in _types(checked)])


def _bounds(schema: Mapping[str, Any]) -> tuple[float | None, float | None, bool, bool]:
    low, high = schema.get("minimum"), schema.get("maximum")
    low_open = high_open = False
    if "exclusiveMinimum" in schema and (low is None or schema["exclusiveMinimum"] >= low):
        low, low_open = schema["exclusiveMinimum"], True
    if "exclusiveMaximum" in schema and (high is None or schema["exclusiveMaximum"] <= high):
        high, high_open = schema["exclusiveMaximum"], True
    return low, high, low_open, high_open


def _valid_of_type(schema: Mapping[str, Any], kind: str) -> st.SearchStrategy[Any]:
    if kind == "null":
        return st.none()
    if kind == "boolean":
        return st.booleans()
    if kind in ("integer", "number"):
        low, high, low_open, high_open = _bounds(schema)
        ints = st.integers(
            None if low is None else math.floor(low) + 1 if low_open or low != math.floor(low)
            else int(low),
            None if high is None else math.ceil(high) - 1 if high_open or high != math.ceil(high)
            else int(high),
        )
        if kind == "integer":
            return ints
        floats = st.floats(low, high, exclude_min=low_open, exclude_max=high_open,
                           allow_nan=False, allow_infinity=False)
        return st.one_of(ints, floats)
    if kind == "string":
        low_len = int(schema.get("minLength", 0))
        high_len = schema.get("maxLength")
        return st.text(min_size=low_len,
                       max_size=int(high_len) if high_len is not None else low_len + 8)
    if kind == "array":
        items = schema.get("items", True)
        low_n = int(schema.get("minItems", 0))
        high_n = schema.get("maxItems")
        return st.lists(valid_arguments(items), min_size=low_n,
                        max_size=int(high_n) if high_n is not None else low_n + 3)
    return _valid_object(schema)


def _valid_object(schema: Mapping[str, Any]) -> st.SearchStrategy[Any]:
    properties: Mapping[str, Any] = schema.get("properties", {})
    required = [name for name in schema.get("required", ())]
    extra = schema.get("additionalProperties", True)
    fixed = {name: valid_arguments(properties.get(name, extra)) for name in required}
    optional = {name: valid_arguments(sub) for name, sub in properties.items()
                if name not in fixed}
    known = st.fixed_dictionaries(fixed, optional=optional)
    if extra is False:
        return known
    others = st.dictionaries(_KEY.filter(lambda k: k not in properties and k not in fixed),
                             valid_arguments(extra), max_size=2)
    return st.builds(lambda base, more: {**more, **base}, known, others)


# -- values that do not fit ------------------------------------------------------------------


def invalid_arguments(schema: Any) -> st.SearchStrategy[Any]:
    """Values that violate ``schema``, each in one way: the wrong type, a value outside an
    ``enum`` or ``const``, a string or array of the wrong length, a number out of range, a
    missing required property, an unexpected one, or (recursively) an invalid property or item.

    Raises ``ValueError`` if the schema accepts every value (``{}``, ``true``)."""
    found = _invalid(schema)
    if found is None:
        raise ValueError(f"every value satisfies {schema!r}: there are no invalid arguments")
    return found


def _wrong_type(kinds: tuple[str, ...]) -> st.SearchStrategy[Any] | None:
    options: list[st.SearchStrategy[Any]] = []
    if "null" not in kinds:
        options.append(st.none())
    if "boolean" not in kinds:
        options.append(st.booleans())
    if "number" not in kinds:
        if "integer" not in kinds:
            options.append(st.integers(-1000, 1000))
        options.append(st.floats(-1e6, 1e6).filter(lambda f: not f.is_integer()))
    if "string" not in kinds:
        options.append(st.text(max_size=5))
    if "array" not in kinds:
        options.append(st.lists(st.integers(0, 3), max_size=2))
    if "object" not in kinds:
        options.append(st.dictionaries(_KEY, st.integers(0, 3), max_size=2))
    return st.one_of(options) if options else None


def _invalid(schema: Any) -> st.SearchStrategy[Any] | None:
    checked = _check(schema)
    if checked is True:
        return None
    if checked is False:
        return json_values()
    kinds = _types(checked)
    options: list[st.SearchStrategy[Any]] = []
    if (wrong := _wrong_type(kinds)) is not None:
        options.append(wrong)
    if "const" in checked:
        const = checked["const"]
        options.append(json_values().filter(lambda v: not _same_json(v, const)))
    rich = [k for k in kinds if k not in ("null", "boolean")]  # types with values to spare
    if "enum" in checked and rich:
        enum = checked["enum"]
        options.append(st.one_of([_valid_of_type(checked, k) for k in rich])
                       .filter(lambda v: not any(_same_json(v, e) for e in enum)))
    if "const" not in checked and "enum" not in checked:
        for kind in kinds:
            options.extend(_invalid_of_type(checked, kind, kinds))
    return st.one_of(options) if options else None


def _same_json(a: Any, b: Any) -> bool:
    """JSON equality: ``1 == 1.0`` but ``True != 1``."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same_json(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_json(a[k], b[k]) for k in a)
    return bool(a == b) and not (isinstance(a, (list, dict)) or isinstance(b, (list, dict)))


def _invalid_of_type(schema: Mapping[str, Any], kind: str,
                     kinds: tuple[str, ...]) -> list[st.SearchStrategy[Any]]:
    out: list[st.SearchStrategy[Any]] = []
    numeric = "number" if "number" in kinds else "integer"
    if kind == numeric:
        low, high, low_open, high_open = _bounds(schema)
        if low is not None:
            below = math.ceil(low) - (0 if low_open and float(low).is_integer() else 1)
            out.append(st.integers(below - 100, below))
        if high is not None:
            above = math.floor(high) + (0 if high_open and float(high).is_integer() else 1)
            out.append(st.integers(above, above + 100))
    if kind == "string" and "string" in kinds:
        low_len = int(schema.get("minLength", 0))
        if low_len > 0:
            out.append(st.text(max_size=low_len - 1))
        if schema.get("maxLength") is not None:
            high_len = int(schema["maxLength"])
            out.append(st.text(min_size=high_len + 1, max_size=high_len + 4))
    if kind == "array":
        items = schema.get("items", True)
        low_n = int(schema.get("minItems", 0))
        high_n = schema.get("maxItems")
        good = valid_arguments(items)
        if low_n > 0:
            out.append(st.lists(good, max_size=low_n - 1))
        if high_n is not None:
            out.append(st.lists(good, min_size=int(high_n) + 1, max_size=int(high_n) + 3))
        bad = _invalid(items)
        if bad is not None and (high_n is None or high_n > 0):
            # one bad item among good ones (as many as minItems asks, within maxItems)
            n_good = max(low_n - 1, 0)
            out.append(st.builds(lambda head, item: [*head, item],
                                 st.lists(good, min_size=n_good, max_size=n_good), bad))
    if kind == "object":
        out.extend(_invalid_objects(schema))
    return out


def _invalid_objects(schema: Mapping[str, Any]) -> list[st.SearchStrategy[Any]]:
    out: list[st.SearchStrategy[Any]] = []
    valid = _valid_object(schema)
    properties: Mapping[str, Any] = schema.get("properties", {})
    required = list(schema.get("required", ()))
    for name in required:
        out.append(valid.map(_without(name)))
    if schema.get("additionalProperties", True) is False:
        extra_key = _KEY.filter(lambda k: k not in properties)
        out.append(st.builds(lambda value, key, extra: {**value, key: extra},
                             valid, extra_key, json_values(max_leaves=2)))
    extra = schema.get("additionalProperties", True)
    for name in dict.fromkeys([*properties, *required]):
        bad = _invalid(properties.get(name, extra))
        if bad is not None:
            out.append(st.builds(_with(name), valid, bad))
    return out


def _without(name: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    return lambda value: {k: v for k, v in value.items() if k != name}


def _with(name: str) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
    return lambda value, item: {**value, name: item}
