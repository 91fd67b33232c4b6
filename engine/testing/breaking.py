"""Values that break a JSON Schema in one place: the strategies behind
:func:`engine.testing.invalid_arguments`.

Each option changes one thing of a value that fits: its type, a value outside an ``enum``, a
length or a bound crossed, a required property left out, a property the schema does not allow,
or (recursively) one property, one item or one position of a tuple made invalid. A value for
``anyOf`` fits none of its branches: it has a type none of them takes, or it is an invalid
value of the only branch that takes its type. The valid parts come from
:class:`~engine.testing.arguments.Reader`, which also resolves ``$ref``s.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from hypothesis import strategies as st

from ..core.schemas.patterns import searcher

from .fitting import INERT, KEY, TYPES, UNROLLED, Reader, bounds, json_values, lists, types_of

__all__ = ["Breaking", "same_json"]


def same_json(a: Any, b: Any) -> bool:
    """JSON equality: ``1 == 1.0`` but ``True != 1``."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_json(a[k], b[k]) for k in a)
    return bool(a == b) and not (isinstance(a, (list, dict)) or isinstance(b, (list, dict)))


def _wrong_type(kinds: tuple[str, ...] | set[str]) -> st.SearchStrategy[Any] | None:
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
        options.append(st.dictionaries(st.sampled_from("abcdef"), st.integers(0, 3), max_size=2))
    return st.one_of(options) if options else None


def _kind_of(value: Any) -> str:
    """The JSON type of a value (``integer`` for a whole number, as JSON Schema reads it)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "integer" if float(value).is_integer() else "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


class Breaking:
    """Invalid values for the subschemas of one schema document (its :class:`Reader`)."""

    def __init__(self, reader: Reader) -> None:
        self.reader = reader
        self._refs: dict[tuple[str, int], st.SearchStrategy[Any] | None] = {}

    def kinds(self, schema: Any, depth: int = 0) -> set[str]:
        """The JSON types some value of ``schema`` has (``integer`` and ``number`` together)."""
        if schema is True or (isinstance(schema, Mapping) and set(schema) <= INERT):
            return set(TYPES)
        if schema is False:
            return set()
        if "$ref" in schema:
            return self.kinds(self.reader.resolve(schema["$ref"]), depth + 1) if depth < 8 else set(TYPES)
        if "anyOf" in schema:
            return set().union(*(self.kinds(branch, depth) for branch in schema["anyOf"]))
        kinds = set(types_of(schema))
        for value in schema.get("enum", ()):
            kinds.add(_kind_of(value))
        if "const" in schema:
            kinds.add(_kind_of(schema["const"]))
        if {"integer", "number"} & kinds:
            kinds |= {"integer", "number"}
        return kinds

    def invalid(self, schema: Any, depth: int) -> st.SearchStrategy[Any] | None:
        """Values that violate ``schema`` in one place, or ``None`` if every value fits."""
        checked = self.reader.check(schema)
        if checked is True:
            return None
        if checked is False:
            return json_values()
        if "$ref" in checked:
            return None if depth >= UNROLLED else self._ref(checked["$ref"], depth)
        if "anyOf" in checked:
            return self._any_of(checked, depth)
        kinds = types_of(checked)
        options: list[st.SearchStrategy[Any]] = []
        if (wrong := _wrong_type(kinds)) is not None:
            options.append(wrong)
        if "const" in checked:
            const = checked["const"]
            options.append(json_values().filter(lambda v: not same_json(v, const)))
        rich = [k for k in kinds if k not in ("null", "boolean")]  # types with values to spare
        if "enum" in checked and rich:
            enum = checked["enum"]
            plain = {k: v for k, v in checked.items() if k != "enum"}
            options.append(st.one_of([self.reader.valid({**plain, "type": k}, depth)
                                      for k in rich])
                           .filter(lambda v: not any(same_json(v, e) for e in enum)))
        if "const" not in checked and "enum" not in checked:
            for kind in kinds:
                options.extend(self._of_type(checked, kind, kinds, depth))
        return st.one_of(options) if options else None

    def _ref(self, ref: str, depth: int) -> st.SearchStrategy[Any] | None:
        key = (ref, depth)  # one level deeper at each reference: no key is met inside itself
        if key not in self._refs:
            self._refs[key] = self.invalid(self.reader.resolve(ref), depth + 1)
        return self._refs[key]

    def _any_of(self, schema: Mapping[str, Any], depth: int) -> st.SearchStrategy[Any] | None:
        branches = schema["anyOf"]
        taken = [self.kinds(branch) for branch in branches]
        options: list[st.SearchStrategy[Any]] = []
        if (wrong := _wrong_type(set().union(*taken))) is not None:
            options.append(wrong)
        for index, (branch, kinds) in enumerate(zip(branches, taken)):
            others = set().union(*(k for i, k in enumerate(taken) if i != index))
            if kinds & others:
                continue  # a value of its types might fit another branch
            bad = self.invalid(branch, depth)
            if bad is not None:
                options.append(bad.filter(_of_kinds(kinds)))
        return st.one_of(options) if options else None

    def _of_type(self, schema: Mapping[str, Any], kind: str, kinds: tuple[str, ...],
                 depth: int) -> list[st.SearchStrategy[Any]]:
        out: list[st.SearchStrategy[Any]] = []
        numeric = "number" if "number" in kinds else "integer"
        if kind == numeric:
            low, high, low_open, high_open = bounds(schema)
            if low is not None:
                below = math.ceil(low) - (0 if low_open and float(low).is_integer() else 1)
                out.append(st.integers(below - 100, below))
            if high is not None:
                above = math.floor(high) + (0 if high_open and float(high).is_integer() else 1)
                out.append(st.integers(above, above + 100))
            step = schema.get("multipleOf")
            if step is not None and int(step) > 1:
                out.append(self.reader.valid({k: v for k, v in schema.items()
                                              if k not in ("multipleOf", "type")}
                                             | {"type": "integer"}, depth)
                           .filter(lambda n: n % int(step) != 0))
        if kind == "string" and "string" in kinds:
            low_len = int(schema.get("minLength", 0))
            if low_len > 0:
                out.append(st.text(max_size=low_len - 1))
            if schema.get("maxLength") is not None:
                high_len = int(schema["maxLength"])
                out.append(st.text(min_size=high_len + 1, max_size=high_len + 4))
            if "pattern" in schema:
                search = searcher(schema["pattern"])
                out.append(st.text(max_size=high_len if schema.get("maxLength") is not None
                                   else 8, min_size=low_len)
                           .filter(lambda s: search(s) is None))
        if kind == "array":
            out.extend(self._arrays(schema, depth))
        if kind == "object":
            out.extend(self._objects(schema, depth))
        return out

    def _arrays(self, schema: Mapping[str, Any], depth: int) -> list[st.SearchStrategy[Any]]:
        out: list[st.SearchStrategy[Any]] = []
        valid = self.reader.valid
        items = schema.get("items", True)
        low_n = int(schema.get("minItems", 0))
        high_n = schema.get("maxItems")
        whole = valid({k: v for k, v in schema.items() if k not in ("minItems", "maxItems")},
                      depth)
        if low_n > 0:
            out.append(whole.filter(lambda v: len(v) < low_n) if "prefixItems" in schema
                       else lists(valid(items, depth), max_size=low_n - 1))
        if high_n is not None:
            good = valid(items, depth)
            prefix = [valid(sub, depth) for sub in schema.get("prefixItems", ())]
            if prefix:
                if items is not False and len(prefix) <= int(high_n):
                    out.append(st.builds(lambda h, t: h + t, st.tuples(*prefix).map(list),
                                         lists(good, min_size=int(high_n) + 1 - len(prefix),
                                                  max_size=int(high_n) + 3 - len(prefix))))
            else:
                out.append(lists(good, min_size=int(high_n) + 1, max_size=int(high_n) + 3))
        prefix_schemas = list(schema.get("prefixItems", ()))
        for position, sub in enumerate(prefix_schemas):
            bad = self.invalid(sub, depth)
            if bad is not None and (high_n is None or int(high_n) > position):
                head = st.tuples(*[valid(s, depth) for s in prefix_schemas[:position]]).map(list)
                rest_low = max(min(low_n, len(prefix_schemas)) - position - 1, 0)
                tail = st.tuples(*[valid(s, depth) for s in
                                   prefix_schemas[position + 1:position + 1 + rest_low]]).map(list)
                out.append(st.builds(lambda h, b, t: [*h, b, *t], head, bad, tail))
        if not prefix_schemas:
            bad = self.invalid(items, depth)
            if bad is not None and (high_n is None or high_n > 0):
                # one bad item among good ones (as many as minItems asks, within maxItems)
                n_good = max(low_n - 1, 0)
                out.append(st.builds(lambda head, item: [*head, item],
                                     lists(valid(items, depth), min_size=n_good,
                                              max_size=n_good), bad))
        return out

    def _objects(self, schema: Mapping[str, Any], depth: int) -> list[st.SearchStrategy[Any]]:
        out: list[st.SearchStrategy[Any]] = []
        valid = self.reader.valid(schema, depth)
        properties: Mapping[str, Any] = schema.get("properties", {})
        required = list(schema.get("required", ()))
        for name in required:
            out.append(valid.map(_without(name)))
        if schema.get("additionalProperties", True) is False:
            extra_key = KEY.filter(lambda k: k not in properties)
            out.append(st.builds(lambda value, key, extra: {**value, key: extra},
                                 valid, extra_key, json_values(max_leaves=2)))
        extra = schema.get("additionalProperties", True)
        for name in dict.fromkeys([*properties, *required]):
            bad = self.invalid(properties.get(name, extra), depth)
            if bad is not None:
                out.append(st.builds(_with(name), valid, bad))
        return out


def _of_kinds(kinds: set[str]) -> Callable[[Any], bool]:
    return lambda value: _kind_of(value) in kinds


def _without(name: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    return lambda value: {k: v for k, v in value.items() if k != name}


def _with(name: str) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
    return lambda value, item: {**value, name: item}
