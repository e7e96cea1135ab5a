"""`extract`'s default prompt: the schema's JSON only where the field list cannot say it.

A flat object of declared scalar members is listed in full by `field_list`, and the
schema's JSON beside the list made the default model invent more values
(benchmarks/extraction_accuracy.py); everything else keeps the JSON.
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
])
def test_flat_objects_of_scalars_are_described_by_their_field_list(schema) -> None:
    assert field_list_describes(schema)


@pytest.mark.parametrize("change", [
    {"properties": {"tags": {"type": "array", "items": {"type": "string"}}}},
    {"properties": {"address": {"type": "object", "properties": {"city": {"type": "string"}}}}},
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
    return bytes(_extraction_prompt(lm, schema, "TEXT", instructions)).decode()[:-len("\nTEXT")]


def test_the_default_prompt_of_a_flat_object_is_the_field_list_without_the_json() -> None:
    assert _system(FLAT) == FIELD_LIST_INSTRUCTIONS + "\n" + field_list(FLAT)
    assert json.dumps(FLAT) not in _system(FLAT) and '"name" (string): Full name' in _system(FLAT)


def test_other_schemas_and_given_instructions_keep_the_schema_json() -> None:
    nested = {**FLAT, "properties": {**FLAT["properties"], "tags": {"type": "array", "items": {"type": "string"}}}}
    assert _system(nested) == DEFAULT_INSTRUCTIONS.replace("{schema}", json.dumps(nested)) + "\n" + field_list(nested)
    assert _system(FLAT, "Schema: {schema}") == "Schema: " + json.dumps(FLAT)
