"""One walk over one schema document: every subschema checked, and what the later passes need.

:mod:`engine.core.schemas.checking` starts a :class:`Walk` for each schema it is given; the walk
checks every subschema against its dialect's tables (:mod:`.dialects`), refuses patterns that
would not run in linear time (:mod:`.patterns`), and remembers the references that
:mod:`.refs` follows afterwards. Pure.
"""

from __future__ import annotations

import json
from typing import Any

import attrs

from events.errors import ToolledgerError

from . import draft2020
from .dialects import BY_2020 as _BY_2020
from .dialects import DEEP_HINT as _DEEP_HINT
from .dialects import DRAFT04_SHAPES as _DRAFT04_SHAPES
from .dialects import INERT as _INERT
from .dialects import LIST as _LIST
from .dialects import MAP as _MAP
from .dialects import MAX_DEPTH as _MAX_DEPTH
from .dialects import ONE as _ONE
from .dialects import REFUSED as _REFUSED
from .dialects import REF_HINT as _REF_HINT
from .dialects import SHAPES as _SHAPES
from .dialects import TUPLE_HINT as _TUPLE_HINT
from .dialects import esc as _esc
from .dialects import is_names as _is_names
from .patterns import problem

__all__ = ["SchemaError", "Walk"]


class SchemaError(ToolledgerError, ValueError):
    """A schema the engine refuses (at registration).

    str() says what is wrong, where (JSON pointer into the schema), and what to do.
    """

    keyword: str | None
    path: str

    def __init__(self, message: str, *, keyword: str | None = None, path: str = "") -> None:
        super().__init__(message)
        self.keyword = keyword
        self.path = path


@attrs.define
class Walk:
    """One check of one schema document, remembering what the later passes need."""

    where: str
    dialect: str
    nodes: list[tuple[str, dict[str, Any]]] = attrs.Factory(list)  # every object subschema
    visited: set[str] = attrs.Factory(set)  # pointers of every subschema
    refs: set[str] = attrs.Factory(set)  # pointers of "$ref"s in schema positions
    targets: dict[str, str] = attrs.Factory(dict)  # subschema -> the subschema its "$ref" names
    patterns: set[str] = attrs.Factory(set)  # every regular expression the validator will match
    depth: int = 0  # how deep the deepest subschema is, and where
    deepest: str = ""
    later: list[str] = attrs.Factory(list)  # keywords only the 2020-12 validator enforces
    anchors: set[str] = attrs.Factory(set)  # "$anchor"/"$dynamicAnchor" names
    dynamic: list[tuple[str, str]] = attrs.Factory(list)  # (pointer, "$dynamicRef" value)

    def fail(self, path: str, problem: str, keyword: str | None = None) -> SchemaError:
        at = f"at '{path}'" if path else "at the root"
        return SchemaError(f"{self.where} {at}: {problem}", keyword=keyword, path=path)

    def schema(self, node: Any, path: str, depth: int = 0) -> None:
        """Check the subschema at ``path``.  Only schema positions are walked: names
        under "properties" and values of const/enum/default/examples are data."""
        if depth > _MAX_DEPTH:
            raise self.fail(path, f"subschemas nested deeper than {_MAX_DEPTH} levels are refused: "
                            f"the validator compiles each level into nested Python code, which "
                            f"Python allows only so deep; {_DEEP_HINT}")
        if depth > self.depth:
            self.depth, self.deepest = depth, path
        draft04 = self.dialect == "draft-04"
        if not isinstance(node, dict) and not (isinstance(node, bool) and not draft04):
            kinds = "a JSON object (draft-04 has no boolean schemas)" if draft04 else "a JSON object or boolean"
            raise self.fail(path, f"a schema must be {kinds}, not {json.dumps(node)[:80]}")
        self.visited.add(path)
        if isinstance(node, bool):
            return
        self.nodes.append((path, node))
        if "$ref" in node and self.dialect.startswith("draft-") and not node.keys() <= _INERT:
            raise self.fail(path, f"keywords next to \"$ref\" ({', '.join(sorted(node.keys() - _INERT))}) "
                            f"are ignored in {self.dialect}; move \"$ref\" into an \"allOf\"", "$ref")
        refused, shapes = _REFUSED[self.dialect], _DRAFT04_SHAPES if draft04 else _SHAPES
        for kw, value in node.items():
            at = f"{path}/{_esc(kw)}"
            if kw in refused:
                if kw not in _BY_2020.get(self.dialect, ()):
                    raise self.fail(at, f"keyword {kw!r} {refused[kw]}", kw)
                if not draft2020.available():
                    raise self.fail(at, f"keyword {kw!r} {refused[kw]}; or "
                                    f"{draft2020.INSTALL_HINT}", kw)
                self.later.append(at)
            if path and (kw in ("$schema", "$id") or (kw == "id" and isinstance(value, str))):
                raise self.fail(at, f"keyword {kw!r} is only allowed at the root (a subschema may "
                                f"not change the dialect or base URI); {_REF_HINT}", kw)
            ok, shape = shapes.get(kw, (None, ""))
            if ok is not None and not ok(value):
                raise self.fail(at, f"keyword {kw!r} must be {shape}", kw)
            if kw == "pattern":
                self.pattern(at, value, kw)
            if kw == "$ref":
                self.refs.add(at)
            elif kw in ("$anchor", "$dynamicAnchor"):
                self.anchors.add(value)
            elif kw == "$dynamicRef":
                self.dynamic.append((at, value))
            elif kw == "prefixItems":
                self.schemas(value, at, depth)
            elif kw == "items" and isinstance(value, list):
                if self.dialect == "2020-12":
                    raise self.fail(at, 'array-form "items" means something else in 2020-12 (the '
                                    f'dialect assumed when "$schema" is absent); {_TUPLE_HINT}', kw)
                self.schemas(value, at, depth)
            elif kw in _ONE and not (draft04 and isinstance(value, bool) and kw.startswith("additional")):
                self.schema(value, at, depth + 1)  # (draft-04's only boolean "schemas" are those two)
            elif kw in _MAP:
                if not isinstance(value, dict):
                    raise self.fail(at, f"keyword {kw!r} must be an object", kw)
                for name, sub in value.items():
                    if kw == "patternProperties":
                        self.pattern(at, name, kw)
                    if not (kw == "dependencies" and _is_names(sub)):
                        self.schema(sub, f"{at}/{_esc(name)}", depth + 1)
            elif kw in _LIST:
                if not isinstance(value, list) or not value:
                    raise self.fail(at, f"keyword {kw!r} must be a non-empty array of schemas", kw)
                self.schemas(value, at, depth)

    def pattern(self, at: str, pattern: str, kw: str) -> None:
        """A regular expression the validator will match: it must run in linear time."""
        if (why := problem(pattern)) is not None:
            raise self.fail(at, f"{kw} {pattern!r} {why}", kw)
        self.patterns.add(pattern)

    def schemas(self, items: list[Any], at: str, depth: int) -> None:
        for i, sub in enumerate(items):
            self.schema(sub, f"{at}/{i}", depth + 1)
