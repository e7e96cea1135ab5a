"""The JSON Schema compiler: the official test suite (no invalid instance ever accepted),
generated outputs validate with jsonschema, options, and typed refusals."""

from __future__ import annotations

import json
import random
from decimal import Decimal
from pathlib import Path

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from constrained import Grammar, TokenVocabulary, compile_grammar
from constrained.errors import (
    ConstrainedError,
    InvalidSchemaError,
    SchemaError,
    UnsatisfiableSchemaError,
    UnsupportedSchemaError,
)
from constrained.grammar.derivations import random_string
from constrained.json_schema.compiler import compile_json_schema

SUITE = Path(__file__).resolve().parents[2] / "shared" / "data" / "json-schema-test-suite" / "tests" / "draft2020-12"
BYTES = TokenVocabulary.from_token_bytes([bytes([b]) for b in range(1, 256)] + [b""], eos_ids=[255])


def _compiled(schema, **options):
    return compile_grammar(compile_json_schema(schema, **options).grammar, BYTES, cache_dir=None)


def test_official_suite_never_accepts_an_invalid_instance() -> None:
    """The whole draft 2020-12 suite through `constrained.bench.test_suite` (formats as
    annotations, its remote documents known): no invalid instance is ever accepted, and the
    number of fully passing groups is a floor that may only rise."""
    if not SUITE.is_dir():
        pytest.skip("../shared/data/json-schema-test-suite is not available")
    from constrained.bench.test_suite import run

    per, accepted_invalid, details = run(SUITE.parents[1])
    passing = sum(c["pass"] for c in per.values())
    assert not accepted_invalid, "\n".join(accepted_invalid)
    assert passing >= 373, f"{passing} groups fully pass:\n" + "\n".join(details)


SCHEMAS = [
    {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8},
                                      "age": {"type": "integer", "minimum": 0, "maximum": 130},
                                      "tags": {"type": "array", "items": {"enum": ["a", "b", 3, None]},
                                               "maxItems": 3}},
     "required": ["name"], "additionalProperties": False},
    {"type": "array", "prefixItems": [{"type": "boolean"}, {"const": {"k": [1, 2]}}], "items": False,
     "minItems": 1},
    {"$defs": {"node": {"type": "object", "properties": {"v": {"type": "number", "exclusiveMinimum": -1.5,
                                                               "maximum": 2}},
                        "additionalProperties": {"$ref": "#/$defs/node"}}},
     "$ref": "#/$defs/node"},
    {"anyOf": [{"type": "string", "format": "date"}, {"type": "string", "pattern": "^x[0-9]+$"},
               {"type": ["null", "integer"], "maximum": -3}]},
    {"type": "object", "required": ["a", "b"], "properties": {"a": {"type": "string", "minLength": 2}},
     "additionalProperties": {"type": "integer"}},
]


@pytest.mark.parametrize("index", range(len(SCHEMAS)))
def test_generated_outputs_validate_with_jsonschema(index: int) -> None:
    """Random strings of the compiled grammar parse as JSON and validate (formats checked)."""
    schema = SCHEMAS[index]
    grammar = compile_json_schema(schema).grammar
    validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    rng = random.Random(index)
    for _ in range(150):
        text = random_string(grammar, rng, max_depth=10)
        value = json.loads(text)
        errors = list(validator.iter_errors(value))
        assert not errors, f"{text!r}: {errors[0].message}"


def test_whitespace_options() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}}}}
    pretty = json.dumps({"a": [1, 2]}, indent=2).encode()
    assert _compiled(schema).accepts_bytes(pretty)
    assert not _compiled(schema, whitespace="compact").accepts_bytes(pretty)
    assert _compiled(schema, whitespace="compact").accepts_bytes(b'{"a":[1,2]}')
    runaway = b'{"a": [1,' + b" " * 49 + b"2]}"
    assert not _compiled(schema).accepts_bytes(runaway)
    assert _compiled(schema, max_whitespace=64).accepts_bytes(runaway)
    assert _compiled(schema, whitespace="any").accepts_bytes(b'{"a": [1,' + b"\n" * 500 + b"2]}")
    assert not _compiled(schema).accepts_bytes(b' {"a": []}')  # never before the top-level value


def test_additional_properties_default_follows_the_spec_or_the_option() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    assert _compiled(schema).accepts_bytes(b'{"a": 1, "b": [true]}')
    assert not _compiled(schema, additional_properties=False).accepts_bytes(b'{"a": 1, "b": [true]}')
    declared = _compiled(schema, additional_properties="declared")
    assert not declared.accepts_bytes(b'{"a": 1, "b": [true]}') and declared.accepts_bytes(b'{"a": 1}')
    open_map = _compiled({"type": "object", "minProperties": 2}, additional_properties="declared")
    assert open_map.accepts_bytes(b'{"x": 1, "y": 2}')
    assert not _compiled({"type": "object", "minProperties": 2}, additional_properties=False).accepts_bytes(
        b'{"x": 1, "y": 2}')
    with pytest.raises(ConstrainedError, match="additional_properties"):
        _compiled(schema, additional_properties="sometimes")
    # declared keys cannot reappear as extras, in any JSON spelling of the name
    assert not _compiled(schema).accepts_bytes(b'{"a": 1, "\\u0061": "x"}')
    assert _compiled(schema).accepts_bytes(b'{"\\u0061": 1}')


def test_integer_semantics_follow_the_draft() -> None:
    """From draft 6 on 1.0 is an integer; draft 4 (and 3) say it is not (jsonschema agrees)."""
    import jsonschema

    for dialect, ok in [("http://json-schema.org/draft-04/schema#", False),
                        ("http://json-schema.org/draft-07/schema#", True), (None, True)]:
        schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
        if dialect:
            schema["$schema"] = dialect
        compiled = _compiled(schema)
        assert compiled.accepts_bytes(b'{"n": 1}')
        assert compiled.accepts_bytes(b'{"n": 1.0}') is ok
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        assert cls(schema).is_valid({"n": 1.0}) is ok


def test_fixed_strings_canonical_spells_keys_and_enums_one_way() -> None:
    schema = {"type": "object", "properties": {"né\n": {"enum": ["a\"b", "x/y"]}}, "required": ["né\n"]}
    value = {"né\n": "x/y"}
    canonical = _compiled(schema, fixed_strings="canonical")
    assert canonical.accepts_bytes(json.dumps(value, ensure_ascii=False).encode())
    assert canonical.accepts_bytes(json.dumps({"né\n": 'a"b'}, ensure_ascii=False).encode())
    for other in (json.dumps(value).encode(),                       # \u00e9
                  b'{"n\xc3\xa9\\u000a": "x/y"}', b'{"n\xc3\xa9\\n": "x\\/y"}'):
        assert _compiled(schema).accepts_bytes(other)
        assert not canonical.accepts_bytes(other)
    # the canonical spelling makes the key forced bytes (jump-forward appends them)
    m = _compiled(schema, fixed_strings="canonical", whitespace="compact").matcher()
    assert m.forced_bytes() == '{"né\\n":"'.encode()


@pytest.mark.parametrize("schema,error,keyword,pointer", [
    ({"type": "array", "items": {"uniqueItems": True, "type": "array"}}, UnsupportedSchemaError,
     "uniqueItems", "/items"),
    ({"properties": {"x": {"oneOf": [{"type": "number"}, {"minimum": 0}]}}}, UnsupportedSchemaError,
     "oneOf", "/properties/x"),
    ({"type": "frobnicate"}, InvalidSchemaError, "type", ""),
    ({"properties": {"x": {"$ref": "https://remote.example/s.json"}}}, UnsupportedSchemaError,
     "$ref", "/properties/x"),
    ({"type": "integer", "minimum": 5, "maximum": 4}, UnsatisfiableSchemaError, None, ""),
    ({"type": "object", "required": ["a"], "properties": {"a": False}}, UnsatisfiableSchemaError, None, ""),
    ({"type": "string", "pattern": "(?=a)b"}, UnsupportedSchemaError, "pattern", ""),
    ({"not": {"minimum": 3}}, UnsupportedSchemaError, "not", ""),
])
def test_refusals_are_typed_and_located(schema, error, keyword, pointer) -> None:
    """With value checks off, what a grammar cannot express is refused, naming keyword and place."""
    with pytest.raises(error) as info:
        compile_json_schema(schema, value_checks=False)
    if isinstance(info.value, SchemaError):
        if keyword is not None:
            assert info.value.keyword == keyword
        if pointer is not None:
            assert info.value.pointer == pointer


def test_unknown_formats_and_keywords_are_reported_not_silently_ignored() -> None:
    c = compile_json_schema({"type": "string", "format": "int32", "x-vendor": 1})
    assert {(n.keyword, n.pointer) for n in c.notes} == {("format", ""), ("x-vendor", "")}
    with pytest.raises(UnsupportedSchemaError):
        compile_json_schema({"type": "string", "format": "int32"}, unknown_formats="error")


def test_grammar_from_json_schema_round_trip() -> None:
    g = Grammar.from_json_schema({"enum": ["x", {"k": None}]}, whitespace="compact")
    cg = compile_grammar(g, BYTES, cache_dir=None)
    assert cg.accepts_bytes(b'"x"') and cg.accepts_bytes(b'{"k":null}') and not cg.accepts_bytes(b'"y"')
    assert cg.accepts_bytes(b'"\\u0078"')  # every JSON spelling of the string


_bound = st.one_of(st.none(), st.integers(-10**20, 10**20),
                   st.floats(allow_nan=False, allow_infinity=False, min_value=-1e20, max_value=1e20))


@settings(max_examples=40, deadline=None)
@given(lo=_bound, hi=_bound, xlo=_bound, xhi=_bound, data=st.data())
def test_number_bounds_hold_for_the_parsed_float(lo, hi, xlo, xhi, data) -> None:
    """Validators compare ``float(text)``: an accepted number must satisfy the bounds
    after float rounding (spellings that round onto an exclusive bound are refused)."""
    schema = {"type": "number"}
    for key, value in (("minimum", lo), ("maximum", hi), ("exclusiveMinimum", xlo), ("exclusiveMaximum", xhi)):
        if value is not None:
            schema[key] = value
    try:
        cg = _compiled(schema)
    except UnsatisfiableSchemaError:
        return
    validator = jsonschema.Draft202012Validator(schema)
    anchors = [v for v in (lo, hi, xlo, xhi) if v is not None] or [0]
    for _ in range(25):
        base = Decimal(repr(float(data.draw(st.sampled_from(anchors)))))
        digits = data.draw(st.integers(0, 22))
        offset = Decimal(data.draw(st.integers(-10**6, 10**6))).scaleb(-digits)
        text = format(base + offset, "f")
        if cg.accepts_bytes(text.encode()):
            assert validator.is_valid(json.loads(text)), (schema, text)


def test_number_bounds_follow_how_validators_parse_each_spelling() -> None:
    """Integers parse to ints (compared exactly with a float bound), fractions to floats
    (compared after rounding): both sides of a bound that is not exactly representable."""
    top = _compiled({"type": "number", "maximum": 4.518651192183154e+17})
    assert not top.accepts_bytes(b"451865119218315400")       # int above the float's exact value
    assert top.accepts_bytes(b"451865119218315392") and top.accepts_bytes(b"451865119218315400.0")
    low = _compiled({"type": "number", "minimum": 0.01})
    assert low.accepts_bytes(b"0.01") and not low.accepts_bytes(b"0.009") and low.accepts_bytes(b"1")
    for schema, text in (({"type": "number", "maximum": 4.518651192183154e+17}, "451865119218315400"),
                         ({"type": "number", "minimum": 0.01}, "0.01")):
        assert _compiled(schema).accepts_bytes(text.encode()) == jsonschema.Draft202012Validator(
            schema).is_valid(json.loads(text))
