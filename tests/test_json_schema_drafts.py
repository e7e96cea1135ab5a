"""Every draft means what its `jsonschema` validator means, for every JSON spelling of a value.

Keywords whose meaning differs between drafts (``1.0`` as an integer, boolean or numeric
``exclusiveMinimum``, ``const``/``contains``/``if`` unknown to draft 04, draft 03's
``divisibleBy``/``disallow``/``required: true``, ``dependencies`` vs ``dependentRequired``,
``additionalItems`` vs ``prefixItems``, ``$ref`` beside siblings) are generated together
with the six drafts; each generated value is spelled every way JSON allows for its numbers
(``3``, ``3.0``, ``3.000``, ``30e-1``, ``-0``, ...), and a spelling the compiled grammar
accepts must be valid for the draft's validator (soundness: never an invalid value).
Canonical spellings of valid scalars must be accepted (completeness where the compiler
promises it)."""

from __future__ import annotations

import json
from itertools import product

import jsonschema
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from constrained import Grammar, TokenVocabulary, compile_grammar
from constrained.errors import ConstrainedError
from constrained.json_schema.dialect import dialect_of

BYTES = TokenVocabulary.from_token_bytes([bytes([b]) for b in range(1, 128)] + [b""], eos_ids=[127])

DRAFTS = {
    "draft3": "http://json-schema.org/draft-03/schema#",
    "draft4": "http://json-schema.org/draft-04/schema#",
    "draft6": "http://json-schema.org/draft-06/schema#",
    "draft7": "http://json-schema.org/draft-07/schema#",
    "draft2019-09": "https://json-schema.org/draft/2019-09/schema",
    "draft2020-12": "https://json-schema.org/draft/2020-12/schema",
}
BIG = 2 ** 53 + 1

numbers = st.sampled_from([0, 1, 2, 3, -1, 10, 0.0, 1.0, 2.0, 0.5, 2.5, -1.5, BIG, float(2 ** 53)])
bounds = st.sampled_from([0, 1, 2, 3, 2.5, -1, 10])
flags = st.sampled_from([True, False]) | bounds


@st.composite
def numeric_schemas(draw) -> dict:
    """A scalar schema over the draft-sensitive numeric keywords."""
    schema: dict = {}
    t = draw(st.sampled_from([None, "integer", "number", ["integer", "string"], "any"]))
    if t is not None:
        schema["type"] = t
    for kw, values in (("minimum", bounds), ("maximum", bounds), ("exclusiveMinimum", flags),
                       ("exclusiveMaximum", flags), ("multipleOf", st.sampled_from([1, 2, 0.5])),
                       ("divisibleBy", st.sampled_from([1, 2, 3])),
                       ("enum", st.lists(numbers, min_size=1, max_size=3)), ("const", numbers),
                       ("disallow", st.sampled_from(["integer", "number", "string"])),
                       ("not", st.sampled_from([{"type": "integer"}, {"const": 1}, {"enum": [1.0]}]))):
        if draw(st.integers(0, 4)) == 0:
            schema[kw] = draw(values)
    return schema


@st.composite
def composite_schemas(draw) -> dict:
    """Objects, arrays and applicators around numeric schemas."""
    kind = draw(st.sampled_from(["object", "array", "oneOf", "ref", "extends", "if"]))
    sub = draw(numeric_schemas())
    if kind == "object":
        schema = {"type": "object", "properties": {"a": sub, "b": {"type": "integer", "required": True}}}
        if draw(st.booleans()):
            schema["required"] = ["a"]
        if draw(st.booleans()):
            schema[draw(st.sampled_from(["dependencies", "dependentRequired"]))] = {"a": ["b"]}
        return schema
    if kind == "array":
        schema = {"type": "array"}
        shape = draw(st.sampled_from(["items", "tuple", "prefixItems", "contains"]))
        if shape == "items":
            schema["items"] = sub
        elif shape == "tuple":
            schema["items"] = [sub]
            schema["additionalItems"] = False
        elif shape == "prefixItems":
            schema["prefixItems"] = [sub]
            schema["additionalItems"] = False
        else:
            schema["contains"] = sub
            schema["maxContains"] = 1
        if draw(st.booleans()):
            schema["uniqueItems"] = True
        if draw(st.booleans()):
            schema["enum"] = [[1], [1.0, 2], [0, 0]]
        return schema
    if kind == "oneOf":
        return {"oneOf": [{"type": "object", "properties": {"k": {"const": 1}}, "required": ["k"]},
                          {"type": "object", "properties": {"k": {"enum": [1.0, 2]}, "v": sub},
                           "required": ["k"]}]}
    if kind == "ref":
        return {"$defs": {"n": sub}, "definitions": {"n": sub}, "type": "object",
                "properties": {"a": {"$ref": draw(st.sampled_from(["#/$defs/n", "#/definitions/n"])),
                                     "const": 2}}}
    if kind == "extends":
        return {"extends": sub, "allOf": [sub], "type": "number"}
    return {"if": {"const": 1}, "then": sub, "else": {"type": "string"}}


def spellings(value) -> list[str]:
    """JSON texts of ``value``: its numbers spelled every way (integral ones as 3, 3.0, 3.000,
    30e-1, 3E0, and 0 also as -0), combined over the value's numbers (capped)."""
    texts: list[str] = []

    def forms(x) -> list[str]:
        if isinstance(x, bool) or not isinstance(x, (int, float)):
            return [json.dumps(x)]
        if isinstance(x, float) and not x.is_integer():
            return [json.dumps(x), json.dumps(x) + "0", repr(x * 10) + "e-1"]
        n = int(x)
        out = [str(n), f"{n}.0", f"{n}.000", f"{n}0e-1", f"{n}E0"]
        return out + (["-0", "-0.0"] if n == 0 else [])

    def spell(x) -> list[str]:
        if isinstance(x, list):
            parts = [spell(e) for e in x]
            return ["[" + ", ".join(c) + "]" for c in list(product(*parts))[:40]]
        if isinstance(x, dict):
            keys = list(x)
            parts = [spell(x[k]) for k in keys]
            return ["{" + ", ".join(f"{json.dumps(k)}: {v}" for k, v in zip(keys, c)) + "}"
                    for c in list(product(*parts))[:40]]
        return forms(x)

    texts = spell(value)
    return texts


values = st.recursive(numbers | st.sampled_from(["x", None, True]),
                      lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(st.sampled_from(["a", "b", "k", "v"]), inner, max_size=3),
                      max_leaves=5)


def _compiled(schema: dict):
    try:
        return compile_grammar(Grammar.from_json_schema(schema), BYTES, cache_dir=None)
    except ConstrainedError:
        return None   # refused with a typed error: nothing accepted, nothing to check


def _check_sound(schema: dict, value) -> None:
    validator = dialect_of(schema).validator_class(schema)
    cg = _compiled(schema)
    if cg is None:
        return
    for text in spellings(value):
        if cg.accepts_bytes(text.encode()):
            assert validator.is_valid(json.loads(text)), (schema, text)


@pytest.mark.parametrize("draft", DRAFTS)
@settings(max_examples=60, deadline=None, derandomize=True)
@given(schema=numeric_schemas(), value=numbers)
@example(schema={"type": "integer", "enum": [0, 1]}, value=0)          # draft-04: 0.0 is not an integer
@example(schema={"enum": [BIG]}, value=BIG)                            # BIG.0 is another number
@example(schema={"maximum": 3, "exclusiveMaximum": True}, value=2)     # draft 06+: true is 1
@example(schema={"minimum": 10, "exclusiveMinimum": 5}, value=10)      # draft 04: a truthy flag
@example(schema={"type": "integer", "divisibleBy": 3}, value=4)        # draft 03
def test_numeric_spellings_are_valid_where_accepted(draft: str, schema: dict, value) -> None:
    _check_sound(dict(schema, **{"$schema": DRAFTS[draft]}), value)


@pytest.mark.parametrize("draft", DRAFTS)
@settings(max_examples=40, deadline=None, derandomize=True)
@given(schema=composite_schemas(), value=values)
@example(schema={"type": "object", "properties": {"a": {"type": "integer", "required": True}}}, value={})
@example(schema={"oneOf": [{"type": "object", "properties": {"k": {"const": 1}}, "required": ["k"]},
                           {"type": "object", "properties": {"k": {"const": 2}}, "required": ["k"]}]},
         value={"k": 1})                                               # draft 04: no const, both match
@example(schema={"type": "array", "items": {"type": "integer"}, "enum": [[0]]}, value=[0])
def test_composite_spellings_are_valid_where_accepted(draft: str, schema: dict, value) -> None:
    _check_sound(dict(schema, **{"$schema": DRAFTS[draft]}), value)


@pytest.mark.parametrize("draft", DRAFTS)
@settings(max_examples=60, deadline=None, derandomize=True)
@given(schema=numeric_schemas(), value=numbers)
def test_canonical_scalars_are_accepted_where_valid(draft: str, schema: dict, value) -> None:
    """Completeness for the spellings the compiler promises: an int as ``str(n)``, an
    integral float as ``n.0``, any other float as ``json.dumps`` writes it (no exponent)."""
    schema = dict(schema, **{"$schema": DRAFTS[draft]})
    cg = _compiled(schema)
    if cg is None:
        return
    text = json.dumps(value) if isinstance(value, int) or not value.is_integer() else f"{int(value)}.0"
    if "e" in text or abs(value) >= 2 ** 53:
        return           # exponents and floats past 2**53: outside the canonical spellings
    if dialect_of(schema).validator_class(schema).is_valid(json.loads(text)):
        assert cg.accepts_bytes(text.encode()), (schema, text)


@pytest.mark.parametrize(("draft", "text", "valid"), [
    ("draft4", "0", True), ("draft4", "0.0", False), ("draft4", "1.0", False), ("draft4", "0.000", False),
    ("draft3", "0.0", False), ("draft6", "0.0", True), ("draft2020-12", "1.00", True),
])
def test_integer_enum_of_the_issue(draft: str, text: str, valid: bool) -> None:
    """The reported case: draft-04 ``{"type": "integer", "enum": [0, 1]}`` accepted ``0.000...``."""
    schema = {"$schema": DRAFTS[draft], "type": "integer", "enum": [0, 1]}
    assert dialect_of(schema).validator_class(schema).is_valid(json.loads(text)) == valid
    assert _compiled(schema).accepts_bytes(text.encode()) == valid


NEGATED = [{"required": ["a"]}, {"minProperties": 1}, {"properties": {"a": {"type": "string"}}},
           {"minItems": 1}, {"uniqueItems": True}, {"contains": {"const": 1}}, {"maxLength": 1},
           {"pattern": "^a"}, {"minimum": 2}, {"multipleOf": 2}, {"required": ["a"], "minItems": 1}]


@pytest.mark.parametrize("negated", NEGATED)
@settings(max_examples=80, deadline=None, derandomize=True)
@given(value=values | st.sampled_from(["", "a", "ab", "b"]))
def test_not_of_one_kinds_keywords_admits_that_kind_only(negated: dict, value) -> None:
    """``not`` of keywords that constrain one kind holds for no other value: exact with the check."""
    schema = {"not": negated}
    cg = _compiled(schema)
    text = json.dumps(value)
    assert cg.accepts_bytes(text.encode()) == jsonschema.Draft202012Validator(schema).is_valid(value), text
