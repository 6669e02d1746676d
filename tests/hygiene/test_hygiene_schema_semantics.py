"""Tool-call arguments against their tool's JSON schema, case by case as the JSON Schema spec
(2020-12, and draft-07 where the schema says so) decides them, with both backends (jsonschema-rs
and jsonschema) giving the same answer; plus the other call problems: undeclared tools, arguments
that are not JSON, tool replies without a call."""
import json

import pytest

from chatdata import History
from chatdata.hygiene import check_tool_calls


def obj(props, **kw):
    return {"type": "object", "properties": props, **kw}


def problems(schema, args, backend, *, name="f", extra=()):
    tools = [{"type": "function", "function": {"name": "f", "parameters": schema}}]
    h = History.from_chats([[{"role": "user", "content": "x"},
                             {"role": "assistant", "content": "", "tool_calls": [
                                 {"id": "c1", "type": "function", "function": {"name": name, "arguments": args}}]},
                             *extra]])
    return [p["problem"] for p in check_tool_calls(h, tools, backend=backend)]


BAD, OK = ["schema_mismatch"], []
CASES = [  # (what, schema, arguments, expected)
    ("a required property missing", obj({"a": {"type": "string"}}, required=["a"]), {}, BAD),
    ("a wrong type", obj({"a": {"type": "string"}}), {"a": 1}, BAD),
    ("true is no integer", obj({"a": {"type": "integer"}}), {"a": True}, BAD),
    ("1.0 is an integer", obj({"a": {"type": "integer"}}), '{"a": 1.0}', OK),
    ("1.5 is no integer", obj({"a": {"type": "integer"}}), {"a": 1.5}, BAD),
    ("an extra property, additionalProperties false", obj({"a": {}}, additionalProperties=False), {"a": 1, "b": 1}, BAD),
    ("an extra property, allowed by default", obj({"a": {}}), {"a": 1, "b": 1}, OK),
    ("a value outside the enum", obj({"u": {"enum": ["c", "f"]}}), {"u": "k"}, BAD),
    ("enum: 1.0 equals 1", obj({"u": {"enum": [1]}}), '{"u": 1.0}', OK),
    ("enum: true is not 1", obj({"u": {"enum": [1]}}), {"u": True}, BAD),
    ("const", obj({"a": {"const": "k"}}), {"a": "j"}, BAD),
    ("a nested object's required property", obj({"o": obj({"x": {}}, required=["x"])}), {"o": {}}, BAD),
    ("a nested array's item type", obj({"l": {"type": "array", "items": {"type": "integer"}}}), {"l": [1, "2"]}, BAD),
    ("objects in an array, additionalProperties false",
     obj({"l": {"type": "array", "items": obj({"x": {}}, additionalProperties=False)}}), {"l": [{"x": 1, "y": 2}]}, BAD),
    ("null allowed by a type list", obj({"a": {"type": ["string", "null"]}}), {"a": None}, OK),
    ("OpenAPI's nullable is no JSON Schema keyword", obj({"a": {"type": "string", "nullable": True}}), {"a": None}, BAD),
    ("oneOf matching two", obj({"a": {"oneOf": [{"type": "number"}, {"type": "integer"}]}}), {"a": 3}, BAD),
    ("anyOf matching one", obj({"a": {"anyOf": [{"type": "string"}, {"type": "integer"}]}}), {"a": 3}, OK),
    ("a $ref into $defs", {"type": "object", "$defs": {"P": {"type": "integer"}}, "properties": {"a": {"$ref": "#/$defs/P"}}},
     {"a": "x"}, BAD),
    ("a draft-07 $ref into definitions", {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
                                          "definitions": {"P": {"type": "integer"}}, "properties": {"a": {"$ref": "#/definitions/P"}}},
     {"a": "x"}, BAD),
    ("format is an annotation only", obj({"a": {"format": "email"}}), {"a": "nope"}, OK),
    ("pattern", obj({"a": {"pattern": "^[0-9]+$"}}), {"a": "1a"}, BAD),
    ("minItems", obj({"a": {"minItems": 1}}), {"a": []}, BAD),
    ("a big integer above maximum", obj({"a": {"maximum": 10}}), '{"a": 100000000000000000000000}', BAD),
    ("multipleOf: 0.07 is a multiple of 0.01", obj({"a": {"multipleOf": 0.01}}), {"a": 0.07}, OK),
    ("multipleOf: 0.075 is not", obj({"a": {"multipleOf": 0.01}}), {"a": 0.075}, BAD),
    ("multipleOf: 4.5 of 1.5", obj({"a": {"multipleOf": 1.5}}), {"a": 4.5}, OK),
    ("multipleOf: an int too big for a float, 10**400 of 0.5", obj({"a": {"multipleOf": 0.5}}), '{"a": 1%s}' % ("0" * 400), OK),
    ("multipleOf: 10**400 + 1 is not of 2", obj({"a": {"multipleOf": 2}}), '{"a": 1%s1}' % ("0" * 399), BAD),
    ("uniqueItems: 1 and 1.0 are equal", obj({"a": {"uniqueItems": True}}), '{"a": [1, 1.0]}', BAD),
    ("uniqueItems: true and 1 differ", obj({"a": {"uniqueItems": True}}), {"a": [True, 1]}, OK),
    ("dependentRequired", obj({"a": {}, "b": {}}, dependentRequired={"a": ["b"]}), {"a": 1}, BAD),
    ("unevaluatedProperties false", {"type": "object", "properties": {"a": {}}, "unevaluatedProperties": False},
     {"a": 1, "z": 2}, BAD),
    ("patternProperties", {"type": "object", "patternProperties": {"^x": {"type": "integer"}}}, {"xa": "s"}, BAD),
    ("the empty schema allows all", {}, {"a": 1}, OK),
    ("true allows all", True, {"a": 1}, OK),
    ("false allows nothing", False, {"a": 1}, BAD),
]


@pytest.mark.parametrize("backend", ["rs", "py"])
@pytest.mark.parametrize("what, schema, args, expected", CASES, ids=[c[0] for c in CASES])
def test_arguments_against_the_schema(what, schema, args, expected, backend):
    assert problems(schema, args, backend) == expected


@pytest.mark.parametrize("backend", ["rs", "py"])
def test_the_other_call_problems(backend):
    schema = obj({"a": {}})
    assert problems(schema, {"a": 1}, backend, name="g") == ["unknown_tool"]
    assert problems(schema, '{"a": 1,}', backend) == ["arguments_not_json"]
    assert problems(schema, "[1]", backend) == ["arguments_not_object"]
    assert problems(schema, json.dumps({"a": 1}), backend,
                    extra=[{"role": "tool", "content": "1", "tool_call_id": "c1"},
                           {"role": "tool", "content": "2", "tool_call_id": "c1"}]) == ["orphan_tool_reply"]
    assert problems({"type": "object", "properties": {"a": {"$ref": "#/$defs/Nope"}}}, {"a": 1}, backend) == \
        ["bad_tool_schema"]
    # a remote $ref is never fetched: the schema cannot be applied here
    assert problems(obj({"a": {"$ref": "https://example.com/s.json"}}), {"a": 1}, backend) == ["bad_tool_schema"]
