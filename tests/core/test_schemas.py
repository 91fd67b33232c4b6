"""Tests for engine.core.schemas.checking: what is refused at registration, and how validators behave."""

from __future__ import annotations

import copy
import urllib.request
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.core.schemas import checking as schemas
from engine.core.schemas.checking import SchemaError, SchemaValidator, check_schema, compile_schema

DRAFT04 = "http://json-schema.org/draft-04/schema#"
DRAFT06 = "http://json-schema.org/draft-06/schema#"
DRAFT07 = "http://json-schema.org/draft-07/schema#"
D2019 = "https://json-schema.org/draft/2019-09/schema"
D2020 = "https://json-schema.org/draft/2020-12/schema"

LATER_KEYWORDS = [
    "prefixItems", "unevaluatedProperties", "unevaluatedItems", "dependentRequired",
    "dependentSchemas", "minContains", "maxContains", "$dynamicRef", "$dynamicAnchor",
    "$anchor", "$recursiveRef", "$recursiveAnchor", "$vocabulary",
]


def obj(**props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props}


def refused(schema: Any, **kw: Any) -> SchemaError:
    with pytest.raises(SchemaError) as info:
        compile_schema(schema, **kw)
    return info.value


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def urlopen(*args: Any, **kwargs: Any) -> Any:
        pytest.fail(f"network access attempted: {args!r}")

    monkeypatch.setattr(urllib.request, "urlopen", urlopen)


# --- $ref -------------------------------------------------------------------------------


@pytest.mark.parametrize("ref", ["http://example.com/s.json", "https://example.com/s.json#/x",
                                 "other.json#/x", "other.json", "file:///etc/passwd", "//host/x"])
@pytest.mark.parametrize("dialect", [None, DRAFT07])
def test_remote_ref_refused_without_network(no_network: None, ref: str, dialect: str | None) -> None:
    schema: dict[str, Any] = obj(a={"$ref": ref})
    if dialect:
        schema["$schema"] = dialect
    err = refused(schema)
    assert err.keyword == "$ref" and err.path == "/properties/a/$ref"
    assert ref in str(err) and "not local" in str(err)


@pytest.mark.parametrize("where", ["const", "default", "examples", "x-extra"])
def test_remote_ref_inside_data_refused(no_network: None, where: str) -> None:
    # fastjsonschema resolves "$ref"s found anywhere when building error details.
    value: Any = {"$ref": "http://example.com/x.json"}
    schema = obj(a={"type": "object", where: [value] if where == "examples" else value})
    err = refused(schema)
    assert err.keyword == "$ref" and err.path.startswith(f"/properties/a/{where}")


@pytest.mark.parametrize("position", ["schema", "data"])
def test_handlers_guard_blocks_network_when_the_check_is_bypassed(no_network: None, position: str) -> None:
    sub = {"$ref": "http://example.com/x.json"}
    schema = {"$schema": DRAFT07, "type": "object",
              "properties": {"a": sub if position == "schema" else {"const": sub}}}
    with pytest.raises(SchemaError):
        check_schema(schema)  # the check refuses it first...
    with pytest.raises(SchemaError, match="remote"):  # ...and the compiler could not fetch it anyway
        schemas._compile_document(copy.deepcopy(schema), assert_formats=False, where="t")
    relative = {"$schema": DRAFT07, "type": "object", "properties": {"a": {"$ref": "other.json#/x"}}}
    with pytest.raises(SchemaError, match="remote"):
        schemas._compile_document(relative, assert_formats=False, where="t")


def test_local_refs_work_including_recursion() -> None:
    tree = {"type": "object", "$defs": {"node": {"type": "object", "properties": {
        "v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}},
        "properties": {"root": {"$ref": "#/$defs/node"}, "again": {"$ref": "#/properties/root"}}}
    v = compile_schema(tree)
    assert v.violation({"root": {"v": 1, "kids": [{"v": 2, "kids": []}]}}) is None
    assert v.violation({"root": {"v": 1, "kids": [{"v": "x"}]}}) == "data.root.kids[0].v must be integer"
    assert v.violation({"again": {"v": "x"}}) == "data.again.v must be integer"


@pytest.mark.parametrize(("ref", "problem"), [
    ("#node", "anchor"), ("#/$defs/missing", "does not point"), ("#/const", "does not point"),
    ("#/properties/a/type", "does not point"), ("#/$defs/x\ty", "drops")])
def test_bad_local_refs_refused(ref: str, problem: str) -> None:
    schema = {"type": "object", "const": {"type": "string"}, "$defs": {"x": True, "x\ty": True, "xy": True},
              "properties": {"a": {"type": "string"}, "b": {"$ref": ref}}}
    err = refused(schema)
    assert err.keyword == "$ref" and err.path == "/properties/b/$ref" and problem in str(err)


def test_id_only_at_root() -> None:
    v = compile_schema({"$id": "https://example.com/tool.json", "type": "object",
                        "properties": {"a": {"$ref": "#/$defs/a"}}, "$defs": {"a": {"type": "string"}}})
    assert v.violation({"a": 1}) == "data.a must be string"
    for key in ("$id", "id"):
        err = refused(obj(a={key: "https://example.com/other.json", "type": "string"}))
        assert err.keyword == key and err.path == f"/properties/a/{key}"


def test_root_id_does_not_rewrite_refs_inside_data() -> None:
    # fastjsonschema would rebase every "$ref" string (data included) on the root $id.
    marker = {"$ref": "#/$defs/n"}
    v = compile_schema({"$id": "https://example.com/m.json", "type": "object", "$defs": {"n": {"type": "integer"}},
                        "properties": {"m": {"const": marker}, "n": {"$ref": "#/$defs/n"}}})
    assert v.violation({"m": {"$ref": "#/$defs/n"}, "n": 1}) is None
    assert v.violation({"n": "x"}) == "data.n must be integer"


# --- refused keywords ----------------------------------------------------------------------


def test_prefix_items_rejected_naming_keyword_and_path(without_jsonschema: None) -> None:
    err = refused(obj(pair={"type": "array", "prefixItems": [{"type": "string"}]}),
                  where="tool 'stat_file' input_schema")
    assert err.keyword == "prefixItems"
    assert err.path == "/properties/pair/prefixItems"
    text = str(err)
    assert text.startswith("tool 'stat_file' input_schema")
    assert "'prefixItems'" in text and "/properties/pair/prefixItems" in text and DRAFT07 in text
    assert "pip install 'toolledger[schemas2020]'" in text


@pytest.mark.parametrize("keyword", LATER_KEYWORDS)
@pytest.mark.parametrize("dialect", [None, D2020, D2019, DRAFT07, DRAFT06, DRAFT04])
def test_every_unimplemented_keyword_rejected(keyword: str, dialect: str | None,
                                             without_jsonschema: None) -> None:
    schema: dict[str, Any] = obj(a={"allOf": [{keyword: True}]})
    if dialect:
        schema["$schema"] = dialect
    err = refused(schema)
    assert err.keyword == keyword and err.path == f"/properties/a/allOf/0/{keyword}"
    assert repr(keyword) in str(err)
    root = {"type": "object", keyword: True}
    assert refused(root).path == f"/{keyword.replace('/', '~1')}"


@pytest.mark.parametrize(("dialect", "keyword"), [
    (DRAFT04, "const"), (DRAFT04, "contains"), (DRAFT04, "propertyNames"), (DRAFT04, "if"),
    (DRAFT06, "if"), (DRAFT06, "then"), (None, "dependencies"), (D2019, "dependencies")])
def test_keywords_the_dialect_lacks_are_rejected(dialect: str | None, keyword: str) -> None:
    schema: dict[str, Any] = {"type": "object", keyword: {}}
    if dialect:
        schema["$schema"] = dialect
    assert refused(schema).keyword == keyword


def test_keyword_names_in_data_positions_are_accepted() -> None:
    names = {k: {"type": "string"} for k in LATER_KEYWORDS + ["$ref", "$id", "items", "dependencies"]}
    data = {k: 1 for k in LATER_KEYWORDS}
    schema = {"type": "object", "properties": names, "patternProperties": {"^prefixItems$": True},
              "required": LATER_KEYWORDS, "default": data, "examples": [data],
              "$defs": {"prefixItems": {"const": data, "enum": [data]}}}
    v = compile_schema(schema)
    assert v.violation({k: "x" for k in LATER_KEYWORDS}) is None
    assert v.violation({k: 1 for k in LATER_KEYWORDS}) is not None


def test_boolean_subschemas_are_valid() -> None:
    v = compile_schema({"type": "object", "properties": {"no": False, "any": True}})
    assert v.violation({"any": [1]}) is None
    assert v.violation({"no": 1}) is not None


# --- dialects ------------------------------------------------------------------------------


def test_array_items_rejected_by_default_and_honoured_under_draft07() -> None:
    tup = {"type": "array", "items": [{"type": "string"}, {"type": "integer"}], "additionalItems": False}
    for dialect in (None, D2020):
        schema: dict[str, Any] = obj(pair=tup)
        if dialect:
            schema["$schema"] = dialect
        err = refused(schema)
        assert err.keyword == "items" and err.path == "/properties/pair/items" and DRAFT07 in str(err)
    v = compile_schema({"$schema": DRAFT07, **obj(pair=tup)})
    assert v.dialect == "draft-07"
    assert v.violation({"pair": ["a", 1]}) is None
    assert v.violation({"pair": [1, 1]}) == "data.pair[0] must be string"
    assert v.violation({"pair": ["a", 1, 2]}) is not None
    # 2019-09 kept draft-07's meaning of array-form "items".
    assert compile_schema({"$schema": D2019, **obj(pair=tup)}).violation({"pair": [1]}) is not None


@pytest.mark.parametrize("uri", ["https://json-schema.org/draft/2021-01/schema", "http://json-schema.org/schema#",
                                 "http://example.com/my-dialect", "draft-07", 7, ["x"], {"a": 1}])
def test_unsupported_dialect_refused(uri: Any) -> None:
    err = refused({"$schema": uri, "type": "object"})
    assert err.keyword == "$schema" and err.path == "/$schema" and "unsupported dialect" in str(err)


def test_schema_keyword_only_at_root() -> None:
    assert refused(obj(a={"$schema": DRAFT07, "type": "string"})).path == "/properties/a/$schema"


def test_ref_siblings_apply_in_2020_and_are_refused_in_draft07() -> None:
    schema = {"type": "object", "$defs": {"s": {"type": "string"}},
              "properties": {"a": {"$ref": "#/$defs/s", "maxLength": 2, "description": "ok"}}}
    v = compile_schema(schema)
    assert v.violation({"a": "abc"}) == "data.a must be shorter than or equal to 2 characters"
    assert v.violation({"a": 5}) == "data.a must be string"
    assert v.violation({"a": "ab"}) is None
    legacy = {"$schema": DRAFT07, "type": "object", "definitions": {"s": {"type": "string"}},
              "properties": {"a": {"$ref": "#/definitions/s", "maxLength": 2}}}
    err = refused(legacy)
    assert err.keyword == "$ref" and err.path == "/properties/a" and "maxLength" in str(err)
    legacy["properties"] = {"a": {"$ref": "#/definitions/s", "description": "annotations are fine"}}
    assert compile_schema(legacy).violation({"a": 1}) == "data.a must be string"


def test_draft04_semantics_are_honoured() -> None:
    v = compile_schema({"$schema": DRAFT04, "type": "object", "additionalProperties": False,
                        "properties": {"n": {"type": "integer", "minimum": 1, "exclusiveMinimum": True}}})
    assert v.violation({"n": 1}) is not None and v.violation({"n": 2}) is None
    assert v.violation({"x": 2}) is not None
    assert refused({"$schema": DRAFT04, **obj(a=True)}).path == "/properties/a"
    assert refused({"$schema": DRAFT04, **obj(a={"items": True})}).path == "/properties/a/items"


def test_content_keywords_are_annotations_in_2020() -> None:
    a = {"type": "string", "contentEncoding": "base64", "contentMediaType": "application/json"}
    assert compile_schema(obj(a=a)).violation({"a": "not base64!"}) is None
    assert compile_schema({"$schema": DRAFT07, **obj(a=a)}).violation({"a": "not base64!"}) is not None


# --- purity: no mutation, no defaults, caching ---------------------------------------------------


def test_schema_and_data_are_never_mutated() -> None:
    schema: dict[str, Any] = {"$id": "https://example.com/m.json", "type": "object", "$defs": {"n": {"type": "integer"}},
              "properties": {"a": {"type": "string", "default": "filled"},
                             "b": {"type": "object", "default": {}, "properties": {
                                 "c": {"$ref": "#/$defs/n", "default": 3, "minimum": 0}}}}}
    before = copy.deepcopy(schema)
    v = compile_schema(schema, where="unique mutation test")
    assert schema == before
    assert v.schema == before and v.schema is not schema
    cases: list[dict[str, Any]] = [{}, {"b": {}}, {"a": 1}, {"b": {"c": -1}}]
    for data in cases:
        snapshot = copy.deepcopy(data)
        v.violation(data)
        assert data == snapshot  # in particular: no default filled in
    schema["properties"]["a"]["type"] = "integer"  # the caller changing its dict later...
    assert v.violation({"a": "x"}) is None  # ...does not change the validator
    with pytest.raises(TypeError):
        v.schema["type"] = "string"  # type: ignore[index]


def test_each_compile_is_fresh() -> None:
    # nothing is remembered here: a tool spec remembers its own checks
    # (tests/project/test_caches.py)
    schema = {"type": "object", "title": "fresh", "properties": {"a": {"type": "integer"}}}
    first, second = compile_schema(schema), compile_schema(dict(schema))
    assert first is not second
    assert first.violation({"a": "x"}) == second.violation({"a": "x"}) is not None


# --- formats -------------------------------------------------------------------------------------


def test_formats_are_annotations_unless_asked() -> None:
    schema = obj(mail={"type": "string", "format": "email"}, day={"type": "string", "format": "date"})
    assert compile_schema(schema).violation({"mail": "nope", "day": "tuesday"}) is None
    strict = compile_schema(schema, assert_formats=True)
    assert strict.violation({"mail": "nope"}) == "data.mail must be email"
    assert strict.violation({"mail": "a@example.com", "day": "2024-02-30x"}) is not None
    assert strict.violation({"mail": "a@example.com", "day": "2024-02-03"}) is None


def test_unknown_format_refused_only_when_asserting() -> None:
    schema = obj(a={"type": "string", "format": "no-such-format"})
    assert compile_schema(schema).violation({"a": "x"}) is None
    err = refused(schema, assert_formats=True)
    assert err.keyword == "format" and err.path == "/properties/a/format"


# --- malformed schemas and the root rule ---------------------------------------------------------------


@pytest.mark.parametrize(("sub", "keyword"), [
    ({"type": 12}, "type"), ({"type": "strin"}, "type"), ({"type": []}, "type"), ({"required": "x"}, "required"),
    ({"required": ["a", "a"]}, "required"), ({"minLength": -1}, "minLength"), ({"maxItems": 1.5}, "maxItems"),
    ({"minimum": "0"}, "minimum"), ({"multipleOf": 0}, "multipleOf"), ({"pattern": "("}, "pattern"),
    ({"enum": "abc"}, "enum"), ({"allOf": []}, "allOf"), ({"anyOf": {}}, "anyOf"), ({"properties": []}, "properties"),
    ({"patternProperties": {"(": {}}}, "patternProperties"), ({"uniqueItems": "yes"}, "uniqueItems"),
    ({"$ref": 5}, "$ref"), ({"format": 1}, "format"), ({"exclusiveMinimum": True}, "exclusiveMinimum"),
    ({"items": 5}, None), ({"not": "x"}, None), ({"dependencies": {"a": 5}}, None),
])
def test_malformed_schemas_refused(sub: dict[str, Any], keyword: str | None) -> None:
    err = refused({"$schema": DRAFT07, **obj(a=sub)})
    assert err.keyword == keyword and err.path.startswith("/properties/a")


@pytest.mark.parametrize("schema", [None, 5, "object", [], ["type", "object"], {1, 2},
                                    {"type": "object", "minimum": float("nan")}, {"type": "object", "x": object()}])
def test_non_json_or_non_schema_refused(schema: Any) -> None:
    refused(schema)


@pytest.mark.parametrize("role", ["input", "output"])
@pytest.mark.parametrize("schema", [{}, True, False, {"type": "string"}, {"type": ["object", "null"]},
                                    {"properties": {"a": {"type": "string"}}}])
def test_root_must_be_an_object_schema(role: Any, schema: Any) -> None:
    err = refused(schema, role=role)
    assert err.path == "" and role in str(err) and '"type": "object"' in str(err)


def test_roles() -> None:
    assert isinstance(compile_schema({"type": "object"}, role="output"), SchemaValidator)
    with pytest.raises(ValueError, match="role"):
        compile_schema({"type": "object"}, role="result")  # type: ignore[arg-type]


def test_check_schema_accepts_and_refuses(without_jsonschema: None) -> None:
    check_schema(obj(a={"type": "integer"}))
    with pytest.raises(SchemaError, match="^tool 'x' output_schema"):
        check_schema({"type": "object", "prefixItems": []}, role="output", where="tool 'x' output_schema")


# --- violation messages --------------------------------------------------------------------------------


def test_violation_messages_name_the_path_and_rule() -> None:
    v = compile_schema({"type": "object", "required": ["path"], "additionalProperties": False, "properties": {
        "path": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string", "maxLength": 3}}}})
    assert v.violation({"path": 1, "tags": ["a"]}) is None
    assert v.violation({"path": "x"}) == "data.path must be integer"
    assert v.violation({"path": 1, "tags": ["a", "long"]}) == "data.tags[1] must be shorter than or equal to 3 characters"
    assert v.violation({}) == "data must contain ['path'] properties"
    assert v.violation([]) == "data must be object"


def test_violation_messages_are_one_line() -> None:
    v = compile_schema(obj(**{"two\nlines": {"type": "integer"}}, p={"type": "string", "pattern": "^a\nb$"}))
    assert v.violation({"two\nlines": "x"}) == "data.two\\nlines must be integer"
    assert v.violation({"p": "zz"}) == "data.p must match pattern ^a\\nb$"


def test_violation_never_raises_for_odd_data() -> None:
    v = compile_schema({"type": "object", "patternProperties": {"^a": {"type": "string"}}})
    assert v.violation({1: "x"}) is not None  # non-string key: fastjsonschema's regex raises TypeError
    assert v.violation(object()) == "data must be object"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=20)


@settings(max_examples=200, deadline=None)
@given(value=json_values)
def test_violation_is_total_and_pure(value: Any) -> None:
    v = compile_schema({"type": "object", "required": ["a"], "properties": {
        "a": {"type": "array", "items": {"type": "integer", "default": 0}, "uniqueItems": True},
        "b": {"default": {"x": 1}, "anyOf": [{"type": "string"}, {"type": "null"}]}}})
    snapshot = copy.deepcopy(value)
    result = v.violation(value)
    assert value == snapshot
    assert result is None or (isinstance(result, str) and result.startswith("data") and "\n" not in result)
    expected_ok = (isinstance(value, dict) and isinstance(value.get("a"), list)
                   and all(isinstance(i, int) and not isinstance(i, bool) for i in value["a"])
                   and len(set(value["a"])) == len(value["a"])
                   and (value.get("b") is None or isinstance(value.get("b"), str)))
    assert (result is None) == expected_ok


@settings(max_examples=100, deadline=None)
@given(names=st.lists(st.sampled_from(LATER_KEYWORDS + ["type", "items", "$ref"]) | st.text(max_size=6),
                      unique=True, max_size=6))
def test_any_property_names_are_accepted(names: list[str]) -> None:
    v = compile_schema({"type": "object", "properties": {n: {"type": "integer"} for n in names}})
    assert v.violation({n: 1 for n in names}) is None


@pytest.mark.parametrize("depth", [200, 5000])
def test_absurdly_deep_schemas_are_refused_cleanly(depth: int) -> None:
    sub: dict[str, Any] = {"type": "string"}
    for _ in range(depth):
        sub = {"not": sub}
    err = refused(obj(a=sub))
    assert "deep" in str(err) or "not plain JSON" in str(err)
