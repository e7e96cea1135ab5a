"""Value-level checks: keywords the grammar over-approximates are validated when values complete.

Exactness against jsonschema on generated values (hypothesis), the mask against
token-by-token `allows`, fork/rollback, EOS for top-level scalars, and the
property_order='any' mode."""

from __future__ import annotations

import json

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from constrained import Grammar, TokenVocabulary, compile_grammar
from constrained.engine.checked import CheckedMatcher
from constrained.engine.matcher import Matcher
from constrained.json_schema.compiler import compile_json_schema
from constrained.masks import unpack_mask

BYTES = TokenVocabulary.from_token_bytes([bytes([b]) for b in range(1, 256)] + [b""], eos_ids=[255])
# a few multi-byte tokens so that one token can complete several values at once
CHUNKY = TokenVocabulary.from_token_bytes(
    [bytes([b]) for b in range(32, 127)] + [b"]]", b"],", b"]}", b"}]", b"[]", b"{}", b'"}', b"1]", b", ", b"[1",
                                            b'"a"', b'": ', b""], eos_ids=[107])

CHECKED = [
    {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 3}, "uniqueItems": True},
    {"type": "array", "items": {"type": "array", "items": {"enum": [1, 2]}, "uniqueItems": True}},
    {"oneOf": [{"type": "integer", "multipleOf": 2}, {"type": "integer", "multipleOf": 3}]},
    {"type": "integer", "not": {"enum": [1, 4]}, "minimum": 0, "maximum": 6},
    {"type": "array", "contains": {"const": 2}, "minContains": 2, "items": {"type": "integer", "maximum": 3}},
    {"type": "object", "patternProperties": {"^a": {"type": "integer"}, "b$": {"minimum": 2}},
     "additionalProperties": {"type": "string"}},
    {"type": "object", "properties": {"n": {"type": "integer"}},
     "if": {"properties": {"n": {"minimum": 2}}}, "then": {"required": ["m"]}, "else": {"maxProperties": 1}},
    {"type": "object", "minProperties": 1, "maxProperties": 2, "propertyNames": {"maxLength": 2}},
]

small_json = st.recursive(
    st.none() | st.booleans() | st.integers(-2, 7) | st.sampled_from(["", "a", "ab", "b", "xb", "é"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(["a", "ab", "b", "n", "m", "zb"]),
                                                                inner, max_size=3),
    max_leaves=8)


@pytest.mark.parametrize("index", range(len(CHECKED)))
@settings(max_examples=150, deadline=None)
@given(value=small_json)
def test_checked_schemas_accept_exactly_the_valid_values(index: int, value) -> None:
    schema = CHECKED[index]
    cg = _compiled(index)
    valid = jsonschema.Draft202012Validator(schema).is_valid(value)
    text = json.dumps(value).encode()
    if isinstance(value, dict) and list(value) != sorted(value, key=lambda k: _order(schema, k)):
        return  # members out of schema order: a documented sound restriction
    assert cg.accepts_bytes(text) == valid, (schema, text)


def _order(schema: dict, key: str) -> int:
    props = list(schema.get("properties", {}))
    return props.index(key) if key in props else len(props)


_CACHE: dict = {}


def _compiled(index: int, vocab=BYTES, **options):
    key = (index, vocab.content_hash(), tuple(sorted(options.items())))
    if key not in _CACHE:
        _CACHE[key] = compile_grammar(compile_json_schema(CHECKED[index], **options).grammar, vocab, cache_dir=None)
    return _CACHE[key]


@pytest.mark.parametrize("index", range(len(CHECKED)))
def test_mask_equals_allows_and_walks_stay_valid(index: int) -> None:
    """On a vocabulary with multi-byte tokens: the mask bit of every token equals `allows`,
    advancing keeps them consistent, and every accepted walk validates."""
    import random

    cg = _compiled(index, CHUNKY)
    validator = jsonschema.Draft202012Validator(CHECKED[index])
    rng = random.Random(index)
    finished = 0
    for _ in range(40):
        m = cg.matcher()
        assert isinstance(m, CheckedMatcher) == (index != 5)   # two patternProperties compile exactly
        for _step in range(30):
            bits = unpack_mask(m.mask(), len(CHUNKY))
            allowed = [t for t in range(len(CHUNKY)) if m.allows(t)]
            assert sorted(allowed) == [int(t) for t in bits.nonzero()[0]]
            if not allowed:
                break
            t = rng.choice(allowed)
            assert m.advance(t)
            if m.is_terminated():
                text = b"".join(CHUNKY.token_bytes[t] for t in m.tokens)
                assert validator.is_valid(json.loads(text))
                finished += 1
                break
    assert finished or index in (1, 4, 5, 6, 7)


CHECKED_COMPLETIONS = [      # (schema, prefix, the shortest completion that passes the checks)
    # (as short as the shortest, except minProperties' distinct keys: by a merging round, a few bytes longer)
    ({"type": "array", "items": {"enum": [1, 2, 3]}, "uniqueItems": True, "minItems": 2}, "[1,", "2]"),
    ({"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 9}, "contains": {"const": 7}},
     "[", "7]"),
    ({"type": "object", "additionalProperties": {"type": "integer"}, "minProperties": 2}, '{"a":1', ',"":0}'),
    ({"type": "array", "items": {"type": "integer"}, "not": {"maxItems": 1}}, "", "[0,0]"),
    ({"oneOf": [{"type": "integer"}, {"type": "number", "minimum": 0}]}, "", "-1"),
]


@pytest.mark.parametrize("schema, prefix, expected", CHECKED_COMPLETIONS)
def test_shortest_completion_passes_the_checks(schema, prefix: str, expected: str) -> None:
    """Where a value check refuses the grammar's shortest completion, the search through
    the checks finds the shortest one that passes (the grammar's is shorter)."""
    cg = compile_grammar(Grammar.from_json_schema(schema, whitespace="compact"), BYTES, cache_dir=None)
    m = cg.matcher()
    assert isinstance(m, CheckedMatcher) and m.advance_many(BYTES.encode(prefix)) == len(prefix)
    got = m.shortest_completion()
    if "minProperties" in schema:
        assert len(expected) <= len(got) <= len(expected) + 3, got
    else:
        assert len(got) == len(expected), got
    plain = Matcher.shortest_completion(m)                      # the grammar's alone: refused
    assert plain != got and len(plain) <= len(got)
    probe = m.fork()
    assert not (probe.advance_many(BYTES.encode(plain.decode())) == len(plain) and probe.is_accepting())
    tokens = m.completion_tokens()
    assert m.advance_many(tokens) == len(tokens) and m.is_accepting()
    assert jsonschema.Draft202012Validator(schema).is_valid(json.loads(prefix + got.decode()))


@pytest.mark.parametrize("index", range(len(CHECKED)))
def test_completions_along_walks_validate(index: int) -> None:
    """Along random walks: every completion found is accepted by the matcher and the
    finished value validates (jsonschema); one is found at most prefixes that have one
    (every prefix of one that has one; the mask lets walks into dead ends that only the
    checks see, e.g. a duplicate item before its array closes).  The search is bounded,
    so "most": a number token that may grow under ``contains`` can outrun it."""
    import random

    cg = _compiled(index, CHUNKY)
    validator = jsonschema.Draft202012Validator(CHECKED[index])
    rng = random.Random(index)
    found = completable = 0
    for _ in range(6):
        m = cg.matcher()
        seen = []
        for _step in range(12):
            done = b"".join(CHUNKY.token_bytes[t] for t in m.tokens)
            c = m.shortest_completion()
            seen.append(c is not None)
            if c is not None:
                probe = m.fork()
                tokens = probe.completion_tokens()
                assert tokens is not None and probe.advance_many(tokens) == len(tokens) and probe.is_accepting()
                assert validator.is_valid(json.loads(done + c)), done + c
            allowed = [t for t in range(len(CHUNKY)) if m.allows(t) and t not in CHUNKY.eos_ids]
            if not allowed:
                break
            assert m.advance(rng.choice(allowed))
        last = max((i for i, ok in enumerate(seen) if ok), default=-1)
        completable += last + 1
        found += sum(seen[: last + 1])
    assert completable >= 12 and found >= 0.8 * completable, (found, completable)


def test_the_token_completing_a_duplicate_is_refused_and_fork_rollback_agree() -> None:
    cg = _compiled(0, CHUNKY)
    enc = {b: i for i, b in enumerate(CHUNKY.token_bytes)}
    m = cg.matcher()
    for piece in (b"[1", b", ", b"2", b", ", b"1"):
        assert m.advance(enc[piece])
    assert not m.allows(enc[b"]"]) and not m.allows(enc[b"]]"])       # [1, 2, 1] is not unique
    assert not m.allows(enc[b","]) and not m.allows(enc[b", "])        # refused as the element completes
    f = m.fork()
    f.rollback(1)
    assert f.text == b"[1, 2, " and f.advance(enc[b"3"]) and f.allows(enc[b"]"])
    assert m.text == b"[1, 2, 1" and not m.allows(enc[b"]"])          # the fork changed nothing
    assert f.advance(enc[b"]"]) and f.is_accepting()


def test_top_level_scalars_are_checked_at_the_end() -> None:
    cg = _compiled(3, CHUNKY)
    enc = {b: i for i, b in enumerate(CHUNKY.token_bytes)}
    eos = CHUNKY.eos_ids[0]
    m = cg.matcher()
    assert m.advance(enc[b"4"]) and not m.is_accepting() and not m.allows(eos)
    assert not unpack_mask(m.mask(), len(CHUNKY))[eos]
    m.rollback()
    assert m.advance(enc[b"5"]) and m.is_accepting() and unpack_mask(m.mask(), len(CHUNKY))[eos]


def test_property_order_any_checks_required_and_duplicate_keys() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
              "required": ["a"], "additionalProperties": False}
    ordered = compile_grammar(Grammar.from_json_schema(schema), BYTES, cache_dir=None)
    anyorder = compile_grammar(Grammar.from_json_schema(schema, property_order="any"), BYTES, cache_dir=None)
    assert ordered.accepts_bytes(b'{"a": 1, "b": "x"}') and not ordered.accepts_bytes(b'{"b": "x", "a": 1}')
    assert anyorder.accepts_bytes(b'{"a": 1, "b": "x"}') and anyorder.accepts_bytes(b'{"b": "x", "a": 1}')
    assert not anyorder.accepts_bytes(b'{"b": "x"}')                    # required
    assert not anyorder.accepts_bytes(b'{"a": 1, "a": 2}')              # duplicate key
    assert not anyorder.accepts_bytes(b'{"a": 1, "c": 2}')              # additionalProperties: false
    # a declared key may parse as an extra one here; its value is still checked with the
    # grammar's own format semantics, in any draft (draft-04 has no "date" format of its own)
    dated = {"$schema": "http://json-schema.org/draft-04/schema#", "type": "object",
             "properties": {"d": {"type": "string", "format": "date"}}, "required": ["d"]}
    cg = compile_grammar(Grammar.from_json_schema(dated, property_order="any"), BYTES, cache_dir=None)
    assert cg.accepts_bytes(b'{"d": "2022-02-28", "x": 1}') and not cg.accepts_bytes(b'{"d": "2022-02-31"}')


def test_checks_are_reported_and_can_be_refused() -> None:
    c = compile_json_schema(CHECKED[0])
    assert c.checked == [("", "uniqueItems")]
    assert c.grammar.checks is not None
    pure = compile_json_schema({"type": "array", "items": {"type": "integer"}})
    assert pure.checked == [] and pure.grammar.checks is None
    assert c.grammar.content_hash() != compile_json_schema({"type": "array", "items": {
        "type": "integer", "minimum": 0, "maximum": 3}}).grammar.content_hash()


MEMBERWISE = [
    {"type": "object", "properties": {"a": {"type": "integer"}, "ab": {"enum": ["a", 1]}}, "required": ["a"],
     "additionalProperties": {"type": "string"}},
    {"type": ["object", "string"], "patternProperties": {"^a": {"minimum": 2}, "b$": {"type": "array"}},
     "additionalProperties": False, "minProperties": 2},
    {"properties": {"n": {"$ref": "#/$defs/small"}}, "propertyNames": {"maxLength": 1},
     "dependentRequired": {"n": ["m"]}, "maxProperties": 2, "$defs": {"small": {"maximum": 1}}},
    {"type": "array", "properties": {"a": {"type": "null"}}},            # not an object type at all
    {"$schema": "http://json-schema.org/draft-07/schema#", "dependencies": {"a": ["b"]},
     "dependentRequired": {"b": ["n"]}, "properties": {"b": {"type": "string"}}},   # draft-07 spelling only
    {"dependencies": {"a": ["b"]}, "dependentRequired": {"b": ["n"]}, "required": ["zb"]},  # 2020-12 spelling only
    {"$schema": "http://json-schema.org/draft-07/schema#", "dependencies": {"a": {"required": ["b"]}}},
    # in-place applicators: each sub-schema by its own plan, combined as the keyword says
    {"oneOf": [{"$ref": "#/$defs/A"}, {"required": ["b"]}, True], "$defs": {"A": {"properties": {"a": {"type": "integer"}}, "required": ["a"]}}},
    {"anyOf": [{"required": ["a"], "properties": {"a": {"type": "string"}}}, False, {"maxProperties": 1}],
     "allOf": [{"propertyNames": {"maxLength": 1}}, {"not": {"required": ["n"]}}]},
    {"if": {"required": ["a"]}, "then": {"properties": {"b": {"type": "null"}}}, "else": {"minProperties": 2},
     "dependentSchemas": {"m": {"properties": {"n": {"type": "boolean"}}}, "zb": False}},
    {"$ref": "#/$defs/B", "properties": {"b": {"type": "integer"}}, "$defs": {"B": {"oneOf": [
        {"required": ["a"]}, {"required": ["b"]}]}}},                   # 2020-12: $ref beside its siblings
    {"$schema": "http://json-schema.org/draft-07/schema#", "$ref": "#/definitions/C", "required": ["zzz"],
     "definitions": {"C": {"properties": {"a": {"const": 1}}}}},          # draft-07: siblings of $ref ignored
    {"not": {"anyOf": [{"required": ["a"]}, {"properties": {"b": {"type": "integer"}}}]}},
    {"allOf": [{"unevaluatedProperties": False, "properties": {"a": True}}], "oneOf": [{"required": ["m"]}, {}]},
    # nested objects: each member's value by its own plan (recursively through "#")
    {"properties": {"a": {"properties": {"b": {"type": "integer"}}, "required": ["b"],
                          "additionalProperties": {"type": ["string", "object"]}}},
     "patternProperties": {"b$": {"minProperties": 1}, "^z": False}, "additionalProperties": {"$ref": "#"},
     "propertyNames": {"pattern": "^[abmnz]"}},
    {"type": ["object", "array"], "properties": {"n": {"type": "object", "properties": {"m": {"$ref": "#/properties/n"}},
                                                       "required": ["m"]}}, "additionalProperties": False},
    # keywords of other kinds of values pass an object through
    {"type": ["object", "array", "string"], "minLength": 2, "items": {"type": "integer"}, "minimum": 3,
     "uniqueItems": True, "properties": {"a": {"type": "string", "pattern": "^a"}}},
    # whole-object validators: malformed, annotations across applicators, dynamic scope
    {"required": "a"},
    {"allOf": [{"properties": {"a": True}}], "unevaluatedProperties": False},
    {"$dynamicAnchor": "x", "$dynamicRef": "#x", "properties": {"a": {"type": "string"}}},
]
PLANNED = 17       # MEMBERWISE[:PLANNED] are split by `ObjectPlan`


def _split_and_reference(schema, value):
    """Our validators, the schema's location, and `jsonschema`'s verdict on ``value``
    (a schema on which `jsonschema` raises counts as rejecting, as ours does)."""
    from constrained.json_schema.resolver import SchemaIndex
    from constrained.json_schema.validation import SchemaValidators

    index = SchemaIndex(schema)
    try:
        expected = jsonschema.validators.validator_for(schema)(schema).is_valid(value)
    except Exception:  # noqa: BLE001
        expected = False
    return SchemaValidators(index), index.locate(schema), expected


@pytest.mark.parametrize("index", range(len(MEMBERWISE)))
@settings(max_examples=200, deadline=None)
@given(value=small_json)
def test_member_by_member_object_validation_equals_jsonschema(index: int, value) -> None:
    schema = MEMBERWISE[index]
    validators, loc, expected = _split_and_reference(schema, value)
    # twice: the second answer comes from the member memo
    assert validators.is_valid(loc, value) == expected == validators.is_valid(loc, value), (schema, value)
    split = validators._forward(loc) is not None or validators._member_plan(loc) is not None
    assert split == (index < PLANNED)


ELEMENTWISE = [
    {"type": "array", "prefixItems": [{"type": "integer"}, {"$ref": "#/$defs/o"}], "items": {"type": "string"},
     "minItems": 1, "maxItems": 3, "$defs": {"o": {"properties": {"a": {"type": "null"}}, "required": ["a"]}}},
    {"$schema": "http://json-schema.org/draft-07/schema#", "items": [{"const": 1}, True],
     "additionalItems": {"type": "array", "items": {"$ref": "#"}}},                  # draft-07 tuple
    {"oneOf": [{"items": {"type": "integer"}}, {"items": {"type": ["integer", "string"]}}],
     "anyOf": [{"type": "array"}, {"type": "object", "required": ["a"]}], "not": {"maxItems": 0}},
    {"$ref": "#/$defs/list", "$defs": {"list": {"$ref": "#/$defs/inner"},
                                       "inner": {"type": ["array", "object"], "items": {"$ref": "#/$defs/list"},
                                                 "properties": {"a": {"$ref": "#/$defs/list"}}}}},
    {"type": "string", "items": {"type": "integer"}},                   # no array is of the type
]


@pytest.mark.parametrize("index", range(len(ELEMENTWISE)))
@settings(max_examples=200, deadline=None)
@given(value=small_json)
def test_element_by_element_array_validation_equals_jsonschema(index: int, value) -> None:
    schema = ELEMENTWISE[index]
    validators, loc, expected = _split_and_reference(schema, value)
    assert validators.is_valid(loc, value) == expected == validators.is_valid(loc, value), (schema, value)
    target = validators._forward(loc) or loc
    while validators._forward(target):
        target = validators._forward(target)
    assert validators._array_plan(target) is not None


UNIQUE = [
    {"type": "array", "uniqueItems": True},
    {"$schema": "http://json-schema.org/draft-04/schema#", "uniqueItems": True, "items": {"type": "string"}},
    {"$schema": "http://json-schema.org/draft-07/schema#", "uniqueItems": 1, "items": [{"type": "integer"}],
     "additionalItems": True},
    {"uniqueItems": False, "maxItems": 4},
    {"prefixItems": [{"const": 1}], "uniqueItems": True, "allOf": [{"minItems": 2}]},
]
# few distinct values, so arrays repeat them: 1 == 1.0 but not True; containers compare structurally
_POOL = st.sampled_from([0, 1, 1.0, True, False, None, "a", "1", -0.0, 2**53, float(2**53), [1], [True], [1.0],
                         [], {}, {"a": 1}, {"a": True}, {"a": 1.0}])


@pytest.mark.parametrize("index", range(len(UNIQUE)))
@settings(max_examples=300, deadline=None)
@given(value=st.lists(_POOL, max_size=6) | st.lists(st.sampled_from(["x", "y", "z"]), max_size=5))
def test_array_uniqueness_by_plan_equals_jsonschema(index: int, value) -> None:
    """``uniqueItems`` is checked by `ArrayPlan` (scalars by equality keys), not by whole-array validation."""
    schema = UNIQUE[index]
    validators, loc, expected = _split_and_reference(schema, value)
    assert validators.is_valid(loc, value) == expected == validators.is_valid(loc, value), (schema, value)
    target = validators._forward(loc) or loc
    assert validators._array_plan(target) is not None


@pytest.mark.parametrize("schema", [
    {"allOf": [{"type": "number"}, {"not": {"type": "integer"}}]},
    {"allOf": [{"type": "number", "minimum": 0}, {"not": {"type": "integer"}}]},
    {"type": "number", "not": {"type": "integer"}},
])
@settings(max_examples=60, deadline=None)
@given(value=st.integers(-20, 20) | st.floats(-20, 20).map(lambda f: round(f, 3)) | st.just(2.0))
def test_numbers_that_are_not_integers_are_checked_on_every_part_that_narrows_the_type(schema, value) -> None:
    """'A number that is not an integer' is compiled as any number plus a check; the part
    that excludes integers may not be the first part with a type (here it is a sibling)."""
    key = ("fraction", json.dumps(schema))
    if key not in _CACHE:
        _CACHE[key] = compile_grammar(Grammar.from_json_schema(schema), BYTES, cache_dir=None)
    text = json.dumps(value).encode()
    assert _CACHE[key].accepts_bytes(text) == jsonschema.Draft202012Validator(schema).is_valid(value), text


@pytest.mark.parametrize("draft", ["http://json-schema.org/draft-04/schema#",
                                   "http://json-schema.org/draft-07/schema#",
                                   "https://json-schema.org/draft/2020-12/schema"])
def test_type_only_schemas_use_the_drafts_own_type_semantics(draft: str) -> None:
    from constrained.json_schema.resolver import SchemaIndex
    from constrained.json_schema.validation import SchemaValidators

    values = [None, True, False, 0, 1, 1.0, 1.5, -2, "", "a", [], [1], {}, {"a": 1}]
    for kind in ["integer", "number", "boolean", "null", "string", "array", "object", ["integer", "null"],
                 ["number", "string"], "any", [], 3]:
        schema = {"$schema": draft, "type": kind}
        index = SchemaIndex(schema)
        validators = SchemaValidators(index)
        reference = jsonschema.validators.validator_for(schema)(schema)
        for value in values:
            try:
                expected = reference.is_valid(value)
            except Exception:  # noqa: BLE001 - an unknown type name: never accepted
                expected = False
            assert validators.is_valid(index.locate(schema), value) == expected, (draft, kind, value)


def test_sub_schemas_that_reference_a_bundled_meta_schema_validate_in_isolation() -> None:
    """A ``$ref`` into the draft-04 meta-schema (as swagger 2.0's does) lands on a sub-schema
    with refs of its own (``#/definitions/simpleTypes``); validated in isolation, e.g. as a
    checked member of an any-order object, they must resolve inside the meta-schema
    (MaskBench dev 7294 rejected its valid instances)."""
    from constrained.json_schema.resolver import SchemaIndex
    from constrained.json_schema.validation import SchemaValidators

    schema = {"$schema": "http://json-schema.org/draft-04/schema#", "type": "object",
              "properties": {"type": {"$ref": "http://json-schema.org/draft-04/schema#/properties/type"},
                             "n": {"type": "integer"}},
              "required": ["type"], "additionalProperties": False}
    reference = jsonschema.Draft4Validator(schema)
    index = SchemaIndex(schema)
    validators = SchemaValidators(index)
    grammar = compile_grammar(Grammar.from_json_schema(schema, property_order="any"), BYTES, cache_dir=None)
    for value in [{"type": "array"}, {"type": ["string", "null"], "n": 1}, {"n": 2, "type": "object"},
                  {"type": "arr"}, {"type": ["string", "string"]}, {"type": 3}, {"n": 1}]:
        expected = reference.is_valid(value)
        assert validators.is_valid(index.locate(schema), value) == expected, value
        assert grammar.accepts_bytes(json.dumps(value).encode()) == expected, value
