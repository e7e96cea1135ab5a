"""Values whose only checks are long ``maxLength``s close without validation, and exactly.

A ``maxLength`` over the automaton's bound is a value check; the tracker counts a
string's characters against it on the prefix.  A container whose parts reach no other
check, and reach these only through the keywords the tracker follows (properties,
additionalProperties, one-schema items, allOf, $ref), skips jsonschema at its close
(`CheckCursor.tracked_only`).  Everywhere else the close validates as before; these tests
pin both sides: which cursors skip, and that acceptance equals jsonschema's either way
(a shared definition reached both through ``properties`` and through ``anyOf``, a
pattern that leaves a member undecided, tuples, ``not``, drafts whose ``$ref`` replaces
its siblings)."""

from __future__ import annotations

import json

import jsonschema
import pytest
from hypothesis import given, settings, strategies as st

from constrained import Grammar, TokenVocabulary, compile_grammar
from constrained.json_schema.compiler import compile_json_schema

BYTES = TokenVocabulary.from_token_bytes([bytes([b]) for b in range(1, 256)] + [b""], eos_ids=[255])
LONG = {"type": "string", "maxLength": 27}       # past the automaton's bound: a value check
DRAFT7 = "http://json-schema.org/draft-07/schema#"

# (schema, whether the root closes without validation)
SCHEMAS = [
    ({"type": "object", "properties": {"a": LONG, "b": {"type": "integer"}}}, True),
    ({"type": "object", "properties": {"a": {"type": "array", "items": LONG}}}, True),
    ({"type": "object", "additionalProperties": LONG}, True),
    ({"$defs": {"s": LONG}, "type": "object", "properties": {"a": {"$ref": "#/$defs/s"}},
      "allOf": [{"properties": {"b": {"$ref": "#/$defs/s"}}}]}, True),
    ({"type": "object", "properties": {"a": {"allOf": [LONG, {"maxLength": 30}]}}}, True),
    # the same definition also under anyOf: the tracker does not follow that branch
    ({"$defs": {"s": LONG}, "type": "object",
      "properties": {"a": {"$ref": "#/$defs/s"}, "b": {"anyOf": [{"$ref": "#/$defs/s"}, {"type": "integer"}]}}},
     False),
    ({"type": "object", "properties": {"a": LONG}, "patternProperties": {"^b": LONG}}, False),
    ({"type": "object", "properties": {"b": LONG}, "patternProperties": {"^(?=b)": {"maxLength": 28}}}, False),
    ({"type": "array", "prefixItems": [LONG], "items": {"type": "integer"}}, False),
    ({"type": "object", "properties": {"a": LONG}, "not": {"required": ["c"], "properties": {"c": LONG}}}, False),
    ({"type": "object", "properties": {"a": LONG, "b": {"type": "array", "items": LONG, "uniqueItems": True}}},
     False),
    ({"$schema": DRAFT7, "definitions": {"s": LONG}, "type": "object",
      "properties": {"a": {"$ref": "#/definitions/s", "maxLength": 1}}}, True),
    ({"type": "object", "properties": {"a": LONG},
      "dependentSchemas": {"a": {"properties": {"b": LONG}}}}, False),
]
KEYS = ["a", "b", "c"]

strings = st.builds(lambda n, ch: ch * n, st.sampled_from([0, 1, 25, 26, 27, 28, 29, 30, 31, 40]),
                    st.sampled_from(["x", "é", "\n", "\U0001f600"]))
values = st.recursive(st.integers(0, 3) | strings,
                      lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(st.sampled_from(KEYS), inner, max_size=3).map(
                          lambda d: {k: d[k] for k in sorted(d)}),
                      max_leaves=6)


def _compiled(index: int):
    return compile_grammar(Grammar.from_json_schema(SCHEMAS[index][0]), BYTES, cache_dir=None)


@pytest.mark.parametrize("index", range(len(SCHEMAS)))
def test_a_value_closes_without_validation_exactly_where_the_tracker_counts_its_checks(index: int) -> None:
    schema, skips = SCHEMAS[index]
    checks = Grammar.from_json_schema(schema).checks
    assert checks is not None and checks.root is not None
    assert checks.root.tracked_only is skips


@pytest.mark.parametrize("index", range(len(SCHEMAS)))
@settings(max_examples=120, deadline=None)
@given(value=values)
def test_acceptance_equals_jsonschema_whether_or_not_the_close_validates(index: int, value) -> None:
    schema = SCHEMAS[index][0]
    if isinstance(value, dict):         # declared members first: the grammar's order (a sound restriction)
        declared = schema.get("properties", {})
        value = {k: value[k] for k in sorted(value, key=lambda k: (k not in declared, k))}
    valid = jsonschema.validators.validator_for(schema)(schema).is_valid(value)
    text = json.dumps(value, ensure_ascii=False).encode()
    assert _compiled(index).accepts_bytes(text) == valid, (schema, text)


def test_repeated_keys_where_a_value_skips_validation() -> None:
    """Its own keys are followed (a repeat is refused at its closing quote); inside a
    free object below it, as in a schema without checks, the grammar allows a repeat."""
    cg = compile_grammar(Grammar.from_json_schema(
        {"type": "object", "properties": {"a": LONG, "o": {"type": "object"}}, "additionalProperties": LONG}),
        BYTES, cache_dir=None)
    assert cg.accepts_bytes(b'{"a":"x","o":{"k":1,"j":2},"z":"y"}')
    assert not cg.accepts_bytes(b'{"a":"x","o":{"k":1},"z":"y","z":"y"}')
    assert cg.accepts_bytes(b'{"a":"x","o":{"k":1,"k":2}}') == \
        compile_grammar(Grammar.from_json_schema({"type": "object"}), BYTES, cache_dir=None).accepts_bytes(
            b'{"k":1,"k":2}')


@pytest.mark.parametrize("external, skips", [
    ({"$id": "http://example.com/s", "type": "string", "maxLength": 30}, True),
    ({"$id": "http://example.com/s", "anyOf": [{"type": "string", "maxLength": 30}, {"type": "integer"}]}, False),
])
def test_checks_in_another_document_are_followed_like_the_documents_own(external: dict, skips: bool) -> None:
    schema = {"type": "object", "properties": {"a": {"$ref": "http://example.com/s"}}}
    grammar = Grammar.from_json_schema(schema, documents={"http://example.com/s": external})
    assert grammar.checks.root.tracked_only is skips
    cg = compile_grammar(grammar, BYTES, cache_dir=None)
    assert cg.accepts_bytes(b'{"a": "' + b"x" * 30 + b'"}')
    assert not cg.accepts_bytes(b'{"a": "' + b"x" * 31 + b'"}')


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {"a": {"type": "string", "minLength": 20, "maxLength": 24,
                                            "pattern": "^[a-z]*q[a-z]{9}$"}}},
    {"type": "object", "properties": {"a": {"allOf": [{"minLength": 20},
                                                      {"type": "string", "maxLength": 24, "pattern": "^[a-z]*q[a-z]{9}$"}]}}},
])
def test_a_length_left_to_checks_checks_its_minimum_too(schema: dict) -> None:
    """Both bounds counted in the automaton but too large beside the pattern: the length
    leaves the automaton, and its minLength is checked by name, not hidden behind the
    counted maxLength.  The tracker counts both, so the close skips validation: a short
    string is refused at its closing quote instead."""
    compilation = compile_json_schema(schema)
    assert {kw for _, kw in compilation.checked} == {"maxLength", "minLength"}
    assert compilation.grammar.checks.root.tracked_only is True
    cg = compile_grammar(compilation.grammar, BYTES, cache_dir=None)
    m = cg.matcher()
    prefix = '{"a": "aaaaaaaqaaaaaaaaa'
    assert m.advance_many(BYTES.encode(prefix)) == len(prefix)
    assert not m.allows(BYTES.token_bytes.index(b'"'))      # 19 characters: one short
    for s in ("aq" + "a" * 9, "a" * 10 + "q" + "a" * 9, "a" * 14 + "q" + "a" * 9, "a" * 15 + "q" + "a" * 9):
        value = {"a": s}
        valid = jsonschema.Draft202012Validator(schema).is_valid(value)
        assert cg.accepts_bytes(json.dumps(value).encode()) == valid, s
