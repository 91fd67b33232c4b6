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

from . import draft2020
from .dialects import DEEP_HINT as _DEEP_HINT
from .dialects import DEFAULT_DIALECT
from .dialects import DIALECTS as _DIALECTS
from .dialects import FORMATS as _FORMATS
from .dialects import INERT as _INERT
from .dialects import MAX_DEPTH as _MAX_DEPTH
from .dialects import esc as _esc
from .patterns import linear
from .refs import check_cycles, check_refs
from .walk import SchemaError, Walk

__all__ = ["SchemaError", "SchemaValidator", "check_schema", "compile_schema", "too_deep"]

_MSG_MAX: Final = 500


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


def _analyse(canonical: str, role: str, where: str) -> tuple[Walk, dict[str, Any]]:
    """Check a schema given as canonical JSON; return the walk and a private copy to compile."""
    doc = json.loads(canonical)  # a deep copy, with plain JSON types only
    uri = doc.get("$schema") if isinstance(doc, dict) else None
    if uri is not None and (not isinstance(uri, str) or uri not in _DIALECTS):
        raise SchemaError(f"{where} at '/$schema': unsupported dialect {uri!r}; omit \"$schema\" (2020-12) "
                          "or declare draft-04/06/07, 2019-09 or 2020-12", keyword="$schema", path="/$schema")
    walk = Walk(where, _DIALECTS[uri] if uri is not None else DEFAULT_DIALECT)
    if not isinstance(doc, dict) or doc.get("type") != "object":
        raise walk.fail("", f'an {role} schema must be a JSON object with "type": "object" at the root '
                        f"(MCP tool {role}s are JSON objects)", "type")
    walk.schema(doc, "")
    check_refs(walk, doc)
    check_cycles(walk)
    if walk.later:
        _check_2020(walk, canonical)
    return walk, doc


def _check_2020(walk: Walk, canonical: str) -> None:
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


def _prepare(walk: Walk, doc: dict[str, Any], assert_formats: bool) -> None:
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


def _compile_2020(walk: Walk, doc: dict[str, Any], assert_formats: bool) -> Callable[..., Any]:
    """The 2020-12 validator's check of a checked private copy (engine.core.schemas.draft2020)."""
    if assert_formats:
        known = draft2020.known_formats(walk.dialect)
        for path, node in walk.nodes:
            if "format" in node and node["format"] not in known:
                raise walk.fail(f"{path}/format", f"format {node['format']!r} cannot be asserted "
                                f"(known: {', '.join(sorted(known))})", "format")
    try:
        return draft2020.compile_2020(doc, walk.dialect, assert_formats=assert_formats,
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
    #: 2019-09/2020-12 validator knows (engine.core.schemas.draft2020)
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
    too, so it passes exactly when compile_schema would.
    """
    compile_schema(schema, role=role, where=where)


def compile_schema(schema: Any, *, role: Literal["input", "output"] = "input", where: str = "schema",
                   assert_formats: bool = False) -> SchemaValidator:
    """check_schema, then compile: a new validator each time. Nothing is remembered here;
    a tool spec remembers the validators of its own schemas
    (:meth:`engine.core.registry.Registry.check`). Both roles currently have the same rules.
    """
    if role not in ("input", "output"):
        raise ValueError(f"role must be 'input' or 'output', not {role!r}")
    canonical = _canonical(schema, where)
    walk, doc = _analyse(canonical, role, where)
    view = types.MappingProxyType(json.loads(canonical))
    if walk.later:  # keywords fastjsonschema would ignore: the 2020-12 validator's
        validator = SchemaValidator(view, walk.dialect, _compile_2020(walk, doc, assert_formats),
                                    "jsonschema")
    else:
        _prepare(walk, doc, assert_formats)
        check = _compile_document(doc, assert_formats=assert_formats, where=where,
                                  deepest=walk.deepest)
        linear(check, walk.patterns)
        validator = SchemaValidator(view, walk.dialect, check)
    return validator
