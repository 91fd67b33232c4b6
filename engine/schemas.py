"""JSON Schema checking and compilation for tool input/output schemas.

fastjsonschema is fast, but it implements only drafts 04/06/07 and reads every
other dialect (MCP's default 2020-12 included) as draft-07: keywords it does not
know are silently ignored, so invalid data would pass.  It also fetches remote
``$ref`` URIs over the network, mutates the schema it compiles, fills ``default``
values into the data, and ignores keywords next to ``$ref``.  This module is the
guard in front of it: a schema is refused at registration unless the compiled
validator will enforce what the schema says.  Pure: no I/O, no clock.
"""

from __future__ import annotations

import json
import types
from collections.abc import Callable, Mapping
from typing import Any, Final, Literal

import attrs
import fastjsonschema
from fastjsonschema import JsonSchemaDefinitionException, JsonSchemaValueException

from . import schemas2020
from .schemadialects import DEFAULT_DIALECT
from .schemadialects import DIALECTS as _DIALECTS
from .schemadialects import FORMATS as _FORMATS
from .schemadialects import TUPLE_HINT as _TUPLE_HINT
from .schemadialects import REFUSED as _REFUSED
from .schemadialects import BY_2020 as _BY_2020
from .schemadialects import ONE as _ONE
from .schemadialects import MAP as _MAP
from .schemadialects import LIST as _LIST
from .schemadialects import INERT as _INERT
from .schemadialects import MAX_DEPTH as _MAX_DEPTH
from .schemadialects import DEEP_HINT as _DEEP_HINT
from .schemadialects import is_names as _is_names
from .schemadialects import SHAPES as _SHAPES
from .schemadialects import DRAFT04_SHAPES as _DRAFT04_SHAPES
from .patterns import linear, problem
from .schemarefs import REF_HINT as _REF_HINT
from .schemarefs import check_cycles, check_refs
from .schemarefs import esc as _esc

__all__ = ["SchemaError", "SchemaValidator", "check_schema", "compile_schema", "too_deep"]

_CACHE_MAX: Final = 1024
_MSG_MAX: Final = 500


class SchemaError(ValueError):
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
class _Walk:
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
                if not schemas2020.available():
                    raise self.fail(at, f"keyword {kw!r} {refused[kw]}; or "
                                    f"{schemas2020.INSTALL_HINT}", kw)
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


def too_deep(where: str, problem: str) -> SchemaError:
    """The error for a schema nested too deeply to be held as JSON at all (``problem`` says
    where)."""
    return SchemaError(f"{where} is nested too deeply ({problem}); subschemas may nest at most "
                       f"{_MAX_DEPTH} levels: {_DEEP_HINT}")


def _canonical(schema: Any, where: str) -> str:
    try:
        return json.dumps(schema, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except RecursionError as exc:
        raise SchemaError(f"{where}: the schema is nested too deeply") from exc
    except (TypeError, ValueError) as exc:
        raise SchemaError(f"{where}: the schema is not plain JSON ({exc})") from exc


def _analyse(canonical: str, role: str, where: str) -> tuple[_Walk, dict[str, Any]]:
    """Check a schema given as canonical JSON; return the walk and a private copy to compile."""
    doc = json.loads(canonical)  # a deep copy, with plain JSON types only
    uri = doc.get("$schema") if isinstance(doc, dict) else None
    if uri is not None and (not isinstance(uri, str) or uri not in _DIALECTS):
        raise SchemaError(f"{where} at '/$schema': unsupported dialect {uri!r}; omit \"$schema\" (2020-12) "
                          "or declare draft-04/06/07, 2019-09 or 2020-12", keyword="$schema", path="/$schema")
    walk = _Walk(where, _DIALECTS[uri] if uri is not None else DEFAULT_DIALECT)
    if not isinstance(doc, dict) or doc.get("type") != "object":
        raise walk.fail("", f'an {role} schema must be a JSON object with "type": "object" at the root '
                        f"(MCP tool {role}s are JSON objects)", "type")
    walk.schema(doc, "")
    check_refs(walk, doc)
    check_cycles(walk)
    if walk.later:
        _check_2020(walk, canonical)
    return walk, doc


def _check_2020(walk: _Walk, canonical: str) -> None:
    """What the 2020-12 path needs beyond the walk: every ``$dynamicRef`` names an anchor or
    a subschema of this schema, and ``unevaluatedProperties`` does not meet
    ``patternProperties`` (jsonschema's evaluation of the one matches the other with
    Python's backtracking ``re``)."""
    for at, ref in walk.dynamic:
        fragment = ref[1:]
        known = fragment in walk.anchors if not fragment.startswith("/") else (
            "".join("/" + _esc(t.replace("~1", "/").replace("~0", "~"))
                    for t in fragment.split("/")[1:]) in walk.visited)
        if not known:
            raise walk.fail(at, f"$dynamicRef {ref!r} names no anchor or subschema of this "
                            f"schema (the engine never fetches schemas)", "$dynamicRef")
    if '"unevaluatedProperties"' in canonical and '"patternProperties"' in canonical:
        at = next(p for p in walk.later if p.endswith("/unevaluatedProperties"))
        raise walk.fail(at, 'keyword "unevaluatedProperties" cannot be combined with '
                        '"patternProperties" here: the validator would match those patterns '
                        'in a way that is not linear in time; use "additionalProperties"',
                        "unevaluatedProperties")


def _prepare(walk: _Walk, doc: dict[str, Any], assert_formats: bool) -> None:
    """Turn the checked private copy into one fastjsonschema reads with the schema's meaning."""
    doc.pop("$id", None)  # every ref is local, so the base URI is moot; left in, fastjsonschema
    if isinstance(doc.get("id"), str):  # would rebase "$ref" strings inside const/enum data on it
        del doc["id"]
    for path, node in walk.nodes:
        if assert_formats and "format" in node and node["format"] not in _FORMATS[walk.dialect]:
            raise walk.fail(f"{path}/format", f"format {node['format']!r} cannot be asserted "
                            f"(known: {', '.join(sorted(_FORMATS[walk.dialect]))})", "format")
        if walk.dialect in ("2019-09", "2020-12"):
            node.pop("contentEncoding", None)  # annotations since 2019-09, but fastjsonschema asserts them
            node.pop("contentMediaType", None)
            if "$ref" in node and not node.keys() <= _INERT:  # siblings of "$ref" apply since 2019-09;
                node["allOf"] = [*node.get("allOf", []), {"$ref": node.pop("$ref")}]  # fjs drops them


def _compile_2020(walk: _Walk, doc: dict[str, Any], assert_formats: bool) -> Callable[..., Any]:
    """The 2020-12 validator's check of a checked private copy (engine.schemas2020)."""
    if assert_formats:
        known = schemas2020.known_formats(walk.dialect)
        for path, node in walk.nodes:
            if "format" in node and node["format"] not in known:
                raise walk.fail(f"{path}/format", f"format {node['format']!r} cannot be asserted "
                                f"(known: {', '.join(sorted(known))})", "format")
    try:
        return schemas2020.compile_2020(doc, walk.dialect, assert_formats=assert_formats,
                                        where=walk.where)
    except ValueError as exc:
        raise SchemaError(str(exc)) from None


def _refuse_remote(uri: str) -> Any:
    raise JsonSchemaDefinitionException(f"remote $ref {uri!r} refused: the engine never fetches schemas")


class _NoRemote(dict[str, Callable[[str], Any]]):
    """A ``handlers`` mapping that claims every URI scheme, so fastjsonschema never falls
    back to urllib's urlopen: the second guard behind the local-``$ref`` rule."""

    def __contains__(self, scheme: object) -> bool:
        return True

    def __missing__(self, scheme: str) -> Callable[[str], Any]:
        return _refuse_remote


_NO_REMOTE: Final = _NoRemote()


def _compile_document(doc: dict[str, Any], *, assert_formats: bool, where: str,
                      deepest: str = "") -> Callable[..., Any]:
    """Compile a prepared private copy (fastjsonschema mutates it). ``deepest`` points to the
    deepest subschema, named if the generated code nests deeper than Python allows."""
    try:
        return fastjsonschema.compile(doc, handlers=_NO_REMOTE, use_default=False, use_formats=assert_formats)
    except SyntaxError as exc:  # the generated code nests past Python's limits (see _MAX_DEPTH)
        at = f" (the deepest subschema is at '{deepest}')" if deepest else ""
        raise SchemaError(f"{where}: the schema nests too deeply for the validator{at}: it turns "
                          "keywords such as \"items\", \"anyOf\", \"not\" and \"contains\" into nested "
                          "loops and try blocks, and Python allows at most 20 of those inside each "
                          f"other; {_DEEP_HINT}", path=deepest) from exc
    except Exception as exc:  # registration time: any compiler failure means "refused"
        raise SchemaError(f"{where}: the validator cannot compile this schema: {exc}") from exc


@attrs.frozen(eq=False)
class SchemaValidator:
    """A compiled schema.  Equality is identity: equal schemas share one validator."""

    schema: Mapping[str, Any]  # read-only view of a private copy, as registered (not as compiled)
    dialect: str  # "draft-04" | "draft-06" | "draft-07" | "2019-09" | "2020-12"
    _check: Callable[..., Any] = attrs.field(repr=False)
    #: which validator enforces it: "fastjsonschema", or "jsonschema" for the keywords only a
    #: 2019-09/2020-12 validator knows (engine.schemas2020)
    implementation: Literal["fastjsonschema", "jsonschema"] = "fastjsonschema"

    def violation(self, value: Any) -> str | None:
        """None if ``value`` is valid, else one line naming the failing path and rule.

        Never mutates ``value`` (defaults are not filled in) and never raises for bad
        data: an unexpected error inside the generated code counts as a violation.
        """
        try:
            self._check(value)
        except JsonSchemaValueException as exc:
            msg = exc.message
        except Exception as exc:  # fail closed
            msg = f"data cannot be validated ({type(exc).__name__}: {exc})"
        else:
            return None
        msg = msg.replace("\r", "\\r").replace("\n", "\\n")
        return msg if len(msg) <= _MSG_MAX else msg[: _MSG_MAX - 3] + "..."


def check_schema(schema: Any, *, role: Literal["input", "output"] = "input", where: str = "schema") -> None:
    """Raise SchemaError if the engine refuses this schema.

    ``where`` prefixes messages, e.g. "tool 'stat_file' input_schema".  This compiles
    too (warming the cache), so it passes exactly when compile_schema would.
    """
    compile_schema(schema, role=role, where=where)


# Process-wide memo: (canonical JSON, assert_formats) -> validator.  Bounded: when
# full, the oldest entry is dropped (an equal schema later compiles anew).
_CACHE: dict[tuple[str, bool], SchemaValidator] = {}


def compile_schema(schema: Any, *, role: Literal["input", "output"] = "input", where: str = "schema",
                   assert_formats: bool = False) -> SchemaValidator:
    """check_schema, then compile (cached by canonical JSON + flags).

    Returns the same validator object for equal schemas while it stays cached.  The
    role does not enter the key: both roles currently have the same rules.
    """
    if role not in ("input", "output"):
        raise ValueError(f"role must be 'input' or 'output', not {role!r}")
    key = (_canonical(schema, where), assert_formats)
    if (hit := _CACHE.get(key)) is not None:
        return hit
    walk, doc = _analyse(key[0], role, where)
    view = types.MappingProxyType(json.loads(key[0]))
    if walk.later:  # keywords fastjsonschema would ignore: the 2020-12 validator's
        validator = SchemaValidator(view, walk.dialect, _compile_2020(walk, doc, assert_formats),
                                    "jsonschema")
    else:
        _prepare(walk, doc, assert_formats)
        check = _compile_document(doc, assert_formats=assert_formats, where=where,
                                  deepest=walk.deepest)
        linear(check, walk.patterns)
        validator = SchemaValidator(view, walk.dialect, check)
    if len(_CACHE) >= _CACHE_MAX:
        _CACHE.pop(next(iter(_CACHE)), None)
    return _CACHE.setdefault(key, validator)
