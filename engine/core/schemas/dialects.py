"""What each JSON Schema dialect says, as the engine reads it: keywords, value shapes, refusals.

:mod:`engine.core.schemas.checking` walks a schema with these tables: which code generator of fastjsonschema
a dialect gets and which formats it can assert, which keywords each dialect's generator would
ignore (refused, or handed to the 2020-12 validator of :mod:`engine.core.schemas.draft2020`), the shapes
keyword values must have (the parts of the meta-schemas fastjsonschema does not check), and
how deep subschemas may nest. Data only; pure.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Final

from fastjsonschema.draft04 import CodeGeneratorDraft04
from fastjsonschema.draft06 import CodeGeneratorDraft06
from fastjsonschema.draft07 import CodeGeneratorDraft07

__all__ = [
    "BY_2020",
    "DEEP_HINT",
    "DEFAULT_DIALECT",
    "DIALECTS",
    "DRAFT04_SHAPES",
    "FORMATS",
    "INERT",
    "LIST",
    "MAP",
    "MAX_DEPTH",
    "ONE",
    "REF_HINT",
    "REFUSED",
    "SHAPES",
    "TUPLE_HINT",
    "esc",
    "is_names",
]

#: How to write a reference the engine follows.
REF_HINT: Final = 'use "$ref" with a JSON pointer such as "#/$defs/name"'

try:
    from fastjsonschema import draft2019 as _draft2019

    _GEN_2019: type[CodeGeneratorDraft07] = _draft2019.CodeGeneratorDraft2019
except ImportError:  # fastjsonschema < 2.22 reads 2019-09/2020-12 as plain draft-07
    _GEN_2019 = CodeGeneratorDraft07

DEFAULT_DIALECT: Final = "2020-12"  # MCP: a schema without "$schema" is 2020-12
_DRAFT07_URI: Final = "http://json-schema.org/draft-07/schema#"
# The code generator fastjsonschema picks for each dialect.
_GENERATORS: Final[dict[str, type[CodeGeneratorDraft04]]] = {
    "draft-04": CodeGeneratorDraft04, "draft-06": CodeGeneratorDraft06, "draft-07": CodeGeneratorDraft07,
    "2019-09": _GEN_2019, "2020-12": _GEN_2019}
DIALECTS: Final = {f"{scheme}://json-schema.org/{'draft/' * name[0].isdigit()}{name}/schema{end}": name
                    for name in _GENERATORS for scheme in ("http", "https") for end in ("", "#")}
# Formats each generator can assert; it silently skips any other name.
FORMATS: Final = {name: frozenset(gen.FORMAT_REGEXS) | {"regex"} for name, gen in _GENERATORS.items()}
TUPLE_HINT: Final = f'for tuple validation declare "$schema": "{_DRAFT07_URI}" and use array-form "items"'
_DRAFT07_HINT: Final = f'declare draft-07 ("$schema": "{_DRAFT07_URI}")'
_NO_COUNT: Final = "there is no draft-07 equivalent; check the count in the tool"
# 2019-09/2020-12 keywords that no fastjsonschema generator implements: keyword -> what to do.
_LATER: Final = {
    "prefixItems": TUPLE_HINT,
    "unevaluatedProperties": 'use "additionalProperties" (it does not see through allOf/$ref)',
    "unevaluatedItems": 'use "additionalItems" with array-form "items" under draft-07',
    "dependentRequired": 'declare draft-07 and use "dependencies"',
    "dependentSchemas": 'declare draft-07 and use "dependencies"',
    "minContains": _NO_COUNT, "maxContains": _NO_COUNT,
    "$dynamicRef": REF_HINT, "$dynamicAnchor": REF_HINT, "$anchor": REF_HINT,
    "$recursiveRef": REF_HINT, "$recursiveAnchor": REF_HINT,
    "$vocabulary": "remove it (custom vocabularies are not supported)",
}
# Per dialect, keyword -> why it is refused: the dialect's generator would ignore it
# (or, for "dependencies" in 2019+, enforce what the dialect says is no keyword).
REFUSED: Final[dict[str, dict[str, str]]] = {"draft-07": {
    k: f"is not implemented by the validator and would be silently ignored; {h}" for k, h in _LATER.items()}}
REFUSED["draft-06"] = REFUSED["draft-07"] | {
    k: f"is not a draft-06 keyword and would be ignored; {_DRAFT07_HINT}" for k in ("if", "then", "else")}
REFUSED["draft-04"] = REFUSED["draft-07"] | {
    k: f"is not a draft-04 keyword and would be ignored; {_DRAFT07_HINT}"
    for k in ("if", "then", "else", "const", "contains", "propertyNames")}
REFUSED["2019-09"] = REFUSED["2020-12"] = REFUSED["draft-07"] | {"dependencies": (
    f"is not a keyword since 2019-09, but the validator would enforce it anyway; {_DRAFT07_HINT}")}
# The refused keywords of each dialect that the 2020-12 validator (engine.core.schemas.draft2020) enforces,
# when it is installed: a schema that uses one is validated by it instead of fastjsonschema.
_COMMON_2019: Final = frozenset({"unevaluatedProperties", "unevaluatedItems", "dependentRequired",
                                 "dependentSchemas", "minContains", "maxContains", "$anchor"})
BY_2020: Final[dict[str, frozenset[str]]] = {
    "2020-12": _COMMON_2019 | {"prefixItems", "$dynamicRef", "$dynamicAnchor"},
    "2019-09": _COMMON_2019 | {"$recursiveRef", "$recursiveAnchor"},
}
_ANCHOR: Final = re.compile(r"[A-Za-z_][-A-Za-z0-9._]*")

ONE: Final = frozenset({"additionalItems", "additionalProperties", "contains", "propertyNames",
                         "if", "then", "else", "not", "contentSchema", "items",
                         "unevaluatedItems", "unevaluatedProperties"})
MAP: Final = frozenset({"properties", "patternProperties", "definitions", "$defs", "dependencies",
                         "dependentSchemas"})
LIST: Final = frozenset({"allOf", "anyOf", "oneOf"})
# Siblings of "$ref" that do not change validation.
INERT: Final = frozenset({"$ref", "$schema", "$id", "$comment", "title", "description", "default",
                           "examples", "deprecated", "readOnly", "writeOnly", "$defs", "definitions"})
_TYPES: Final = frozenset({"array", "boolean", "integer", "null", "number", "object", "string"})
# How deep subschemas may nest. fastjsonschema compiles nested keywords into nested Python code,
# and Python refuses code more than 100 levels indented or 20 loops/try blocks deep. Measured
# (fastjsonschema 2.22, CPython 3.11), the deepest chain of one keyword that compiles is 48 for
# "properties" and "dependencies" (two levels of indentation each), 19-20 for "items",
# "additionalProperties", "patternProperties", "anyOf", "oneOf", "not" and "if" (a loop or a
# try each), 9 for "contains" and "propertyNames" (both), 97 for "then", unbounded for "allOf".
# The limit sits below the deepest plain nesting; a shallower mix of block-opening keywords
# that Python still refuses is caught at compile time and refused with the same advice. A
# "$ref" target compiles to a function of its own, so depth through "$defs" costs nothing.
MAX_DEPTH: Final = 40
DEEP_HINT: Final = ('move deep parts under "$defs" and refer to them with "$ref" (each target '
                     'is compiled on its own, so nesting through references has no such limit)')


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def is_names(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(s, str) for s in v) and len(set(v)) == len(v)


# Keyword value shapes: the parts of the meta-schemas that fastjsonschema does not check.
SHAPES: Final[dict[str, tuple[Callable[[Any], bool], str]]] = {
    "type": (lambda v: v in _TYPES if isinstance(v, str) else is_names(v) and bool(v) and set(v) <= _TYPES,
             "a type name or a non-empty array of distinct type names from " + ", ".join(sorted(_TYPES))),
    "enum": (lambda v: isinstance(v, list), "an array"),
    "required": (is_names, "an array of distinct strings"),
    "multipleOf": (lambda v: _is_num(v) and v > 0, "a number greater than 0"),
    "pattern": (lambda v: isinstance(v, str), "a string (a regular expression)"),
    "uniqueItems": (lambda v: isinstance(v, bool), "a boolean"),
    **{k: (_is_num, "a number") for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")},
    **{k: (lambda v: _is_num(v) and v >= 0 and (isinstance(v, int) or v.is_integer()), "a non-negative integer")
       for k in ("minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties")},
    **{k: (lambda v: isinstance(v, str), "a string")
       for k in ("$ref", "$id", "$schema", "format", "contentEncoding", "contentMediaType")},
    # the keywords of the 2020-12 path (engine.core.schemas.draft2020)
    **{k: (lambda v: _is_num(v) and v >= 0 and (isinstance(v, int) or v.is_integer()), "a non-negative integer")
       for k in ("minContains", "maxContains")},
    "dependentRequired": (lambda v: isinstance(v, dict) and all(is_names(n) for n in v.values()),
                          "an object whose values are arrays of distinct strings"),
    **{k: (lambda v: isinstance(v, str) and _ANCHOR.fullmatch(v) is not None,
           "a plain name (a letter or _, then letters, digits, - . _)")
       for k in ("$anchor", "$dynamicAnchor")},
    "$dynamicRef": (lambda v: isinstance(v, str) and v.startswith("#"),
                    'a local reference: "#name" (a $dynamicAnchor) or "#/json/pointer"'),
    "$recursiveRef": (lambda v: v == "#", 'the string "#"'),
    "$recursiveAnchor": (lambda v: isinstance(v, bool), "a boolean"),
    "prefixItems": (lambda v: isinstance(v, list) and bool(v), "a non-empty array of schemas"),
}
DRAFT04_SHAPES: Final = SHAPES | {k: (lambda v: isinstance(v, bool), "a boolean in draft-04")
                                    for k in ("exclusiveMinimum", "exclusiveMaximum")}


def esc(token: str) -> str:
    """``token`` escaped as one step of a JSON pointer."""
    return token.replace("~", "~0").replace("/", "~1")
