"""`extract`'s default prompt: the schema's JSON only where the field list cannot say it.

An object of declared scalar members, or of objects of such members, is listed in full
by `field_list`, and the schema's JSON beside the list made the default model invent
more values (benchmarks/extraction_accuracy.py, flat and ``--nested``); everything else
keeps the JSON.
"""

from __future__ import annotations

import json

import pytest

from constrained.app import (
    DEFAULT_INSTRUCTIONS,
    FIELD_LIST_INSTRUCTIONS,
    _extraction_prompt,
    field_list,
    field_list_describes,
)
from constrained.models import LanguageModel

FLAT = {"type": "object", "title": "Contact", "self": {"vendor": "x"},
        "properties": {"name": {"type": "string", "description": "Full name", "x-aliases": ["who"]},
                       "age": {"type": ["integer", "null"], "minimum": 0},
                       "email": {"type": "string", "format": "email"},
                       "role": {"enum": ["admin", "user", None]}},
        "required": ["name"], "additionalProperties": False}


@pytest.mark.parametrize("schema", [
    FLAT,
    {"properties": {"a": {"const": 3}}},
    {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": True},
    {**FLAT, "properties": {**FLAT["properties"], "home": {"type": "object", "required": ["city"],
                                                          "properties": {"city": {"type": "string"}}}}},
    {"properties": {"a": {"type": "object", "properties": {"b": {"type": "object", "properties": {
        "c": {"type": "object", "properties": {"d": {"enum": [1, 2]}}}}}}}}},
])
def test_objects_of_scalars_are_described_by_their_field_list(schema) -> None:
    assert field_list_describes(schema)


def _in_member(change: dict) -> dict:
    return {**FLAT, "properties": {**FLAT["properties"], "home": {"type": "object", "properties": {
        "city": {"type": "string"}}, **change}}}


@pytest.mark.parametrize("change", [
    {"properties": {"tags": {"type": "array", "items": {"type": "string"}}}},
    {"properties": {}},
    {"properties": {"who": {}}},
    {"additionalProperties": {"type": "integer"}},
    {"patternProperties": {"^x-": {"type": "string"}}},
    {"minProperties": 1},
    {"anyOf": [{"required": ["city"]}, {"required": ["zip"]}]},
    {"$ref": "#/$defs/home"},
])
def test_an_object_member_the_list_cannot_say_keeps_the_schema(change) -> None:
    assert not field_list_describes(_in_member(change))


def test_nesting_deeper_than_the_list_goes_keeps_the_schema() -> None:
    schema: dict = {"type": "string"}
    for _ in range(5):
        schema = {"type": "object", "properties": {"a": schema}}
    assert not field_list_describes(schema)
    assert field_list_describes(schema["properties"]["a"])


@pytest.mark.parametrize("change", [
    {"properties": {"tags": {"type": "array", "items": {"type": "string"}}}},
    {"properties": {"address": {"type": "object"}}},
    {"properties": {"who": {"$ref": "#/$defs/name"}}},
    {"properties": {"who": {"anyOf": [{"type": "string"}, {"type": "integer"}]}}},
    {"properties": {"who": {}}},
    {"properties": {"who": {"enum": [{"a": 1}]}}},
    {"properties": {}},
    {"additionalProperties": {"type": "integer"}},
    {"minProperties": 2},
    {"dependentRequired": {"name": ["age"]}},
    {"oneOf": [{"required": ["name"]}, {"required": ["age"]}]},
    {"if": {"required": ["age"]}, "then": {"required": ["email"]}},
    {"patternProperties": {"^x-": {"type": "string"}}},
    {"type": "array"},
])
def test_what_a_field_list_cannot_say_keeps_the_schema(change) -> None:
    assert not field_list_describes({**FLAT, **change})


def test_non_objects_keep_the_schema() -> None:
    assert not any(field_list_describes(s) for s in (None, True, [], "x", {"type": "string"}))


def _system(schema, instructions=None) -> str:
    lm = LanguageModel.tiny(seed=0)       # byte-level: the prompt is the system text, a newline, the text
    return bytes(_extraction_prompt(lm, schema, "TEXT", instructions, 0)).decode()[:-len("\nTEXT")]


def test_the_default_prompt_of_a_flat_object_is_the_field_list_without_the_json() -> None:
    assert _system(FLAT) == FIELD_LIST_INSTRUCTIONS + "\n" + field_list(FLAT)
    assert json.dumps(FLAT) not in _system(FLAT) and '"name" (string): Full name' in _system(FLAT)


def test_other_schemas_and_given_instructions_keep_the_schema_json() -> None:
    nested = {**FLAT, "properties": {**FLAT["properties"], "tags": {"type": "array", "items": {"type": "string"}}}}
    assert _system(nested) == DEFAULT_INSTRUCTIONS.replace("{schema}", json.dumps(nested)) + "\n" + field_list(nested)
    assert _system(FLAT, "Schema: {schema}") == "Schema: " + json.dumps(FLAT)


def test_the_field_list_indents_an_object_members_own_members() -> None:
    schema = _in_member({"properties": {"city": {"type": "string", "description": "Town"}, "zip": {}}})
    assert field_list(schema).splitlines()[-3:] == ['- "home" (object)', '  - "city" (string): Town', '  - "zip"']
    assert json.dumps(schema) in _system(schema)          # "zip" may be anything: the JSON stays
    typed = _in_member({"properties": {"city": {"type": "string"}, "zip": {"type": "string"}}})
    assert _system(typed) == FIELD_LIST_INSTRUCTIONS + "\n" + field_list(typed)
