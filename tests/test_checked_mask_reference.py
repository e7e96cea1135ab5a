"""Checked masks against a slow reference (issue "No dead ends", the mask cost part).

`CheckedMatcher.mask` simulates only the candidate tokens `JsonValueChecks.candidates`
picks (found through per-vocabulary token classes and key indexes, memoised per grammar
state) and `JsonValueChecks.refused` simulates one token per class of tokens that differ
only in blanks outside strings.  The reference here knows none of that: every token of a
small vocabulary the grammar allows is stepped through the checks on its own.  Random
vocabularies mix keys, repeated keys, escapes, blanks and brackets in one token.
"""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from constrained import Grammar, TokenVocabulary, compile_grammar
from constrained.engine.checked import CheckedMatcher
from constrained.engine.matcher import Matcher
from constrained.json_schema.value_checks import _profiles, _verdict_class
from constrained.masks import unpack_mask

# fragments that end keys (as repeats or not), write whole keys after commas, hold escapes,
# close values with blanks around, or repeat array elements
FRAGMENTS = [b'"a"', b'"ab"', b',"a"', b', "ab"', b',"b":', b'"a":', b'a"', b'b"', b'b":', b'"}', b'"},',
             b'" }', b'"}\n', b' "}', b'{}', b' {}', b'{},\n', b'[]', b' [],', b'[[]', b'\\"', b'\\u0061"',
             b'\\u0061', b'1,', b' 1,', b'1 ,', b'1]', b'"x",', b'"x"]', b' "x" ,', b'"a","', b'}}', b'},{',
             b'\t', b'  ', b' a"', b'a "', b'"x ",', b' b"', b'"ab":1,"a', b'":[', b'], ', b'null,', b'true]', b'"xyzxyzxyzxyzxyzxyzxyzxyzxyzxyzxyz"']
SCHEMAS = [
    ({"type": "object", "properties": {"a": {"type": "integer"}, "ab": {"type": "string"},
                                       "b": {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}},
      "required": ["a", "ab"]}, "any"),
    ({"type": "object", "properties": {"a": {"type": "object", "properties": {"a": {}, "b": {}}, "required": ["b"]},
                                       "ab": {"type": "array", "items": {"type": "string", "maxLength": 30},
                                              "uniqueItems": True}},
      "required": ["ab"], "maxProperties": 2}, "any"),
    ({"type": "array", "items": {"type": "object", "properties": {"a": {}, "ab": {"type": "string"}},
                                 "required": ["a"], "additionalProperties": False}, "uniqueItems": True}, "any"),
    ({"type": "object", "propertyNames": {"enum": ["a", "ab", "b"]},
      "additionalProperties": {"type": ["integer", "array", "object", "string"]}}, "schema"),
]
ASCII = [bytes([b]) for b in range(32, 127)] + [b"\n"]


def _reference(m: CheckedMatcher, size: int, eos) -> list[int]:
    """Every token the grammar allows whose bytes the checks accept (EOS: accepting)."""
    grammar = unpack_mask(Matcher.mask(m), size)
    checks, state, text = m._checks, m._cstates[-1], m.text
    tb = m._compiled.vocab.token_bytes
    return [t for t in range(size) if (m.is_accepting() if t in eos else
                                       grammar[t] and checks.step(state, text, tb[t]) is not None)]


def _walk_against_reference(fragments: list[bytes], which: int, seed: int, steps: int = 40) -> None:
    vocab = TokenVocabulary.from_token_bytes(ASCII + fragments + [b""], eos_ids=[len(ASCII) + len(fragments)])
    schema, order = SCHEMAS[which]
    cg = compile_grammar(Grammar.from_json_schema(schema, property_order=order), vocab, cache_dir=None)
    m = cg.matcher()
    assert isinstance(m, CheckedMatcher)
    size, eos = len(vocab.token_bytes), set(vocab.eos_ids)
    rng = random.Random(seed)
    for _ in range(steps):
        allowed = [int(t) for t in unpack_mask(m.mask(), size).nonzero()[0]]
        assert allowed == _reference(m, size, eos), m.text
        choices = [t for t in allowed if t not in eos]
        if not choices:
            break
        # prefer the multi-byte fragments: they are what the candidate search must not miss
        multi = [t for t in choices if t >= len(ASCII)]
        assert m.advance(rng.choice(multi if multi and rng.random() < 0.6 else choices))


@settings(max_examples=30, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), unique=True, min_size=4, max_size=24),
       st.integers(0, len(SCHEMAS) - 1), st.integers(0, 2 ** 16))
def test_checked_masks_equal_a_token_by_token_reference(fragments, which, seed) -> None:
    _walk_against_reference(fragments, which, seed)


@pytest.mark.parametrize("which", range(len(SCHEMAS)))
def test_checked_masks_equal_the_reference_with_every_fragment(which: int) -> None:
    for seed in range(12):
        _walk_against_reference(FRAGMENTS, which, seed, steps=60)


def test_key_index_finds_what_a_scan_of_the_tokens_finds() -> None:
    """A spelling without a backslash is a token substring exactly where it is one of
    the token's quoted segments; a key's rest starts a token exactly where it is the
    token's lead (bytes up to its first quote)."""
    vocab = TokenVocabulary.from_token_bytes(ASCII + FRAGMENTS + [b'"a"b"', b'""a"', b'x"a"y', b'"'])
    prof = _profiles(vocab)
    tb = vocab.token_bytes
    for sp in (b'"a"', b'"ab"', b'"b"', b'"x"', b'""'):
        scan = sorted(t for t, b in enumerate(tb) if sp in b)
        assert sorted(prof.segments.get(sp, np.zeros(0, np.int64)).tolist()) == scan, sp
    for rest in (b'"', b'b"', b'a"', b'ab"'):
        scan = sorted(t for t, b in enumerate(tb) if b.startswith(rest))
        assert sorted(prof.leads.get(rest, np.zeros(0, np.int64)).tolist()) == scan, rest
    escapes = unpack_mask(prof.escapes, len(tb))
    assert [t for t in range(len(tb)) if escapes[t]] == [t for t, b in enumerate(tb) if b"\\" in b]


def test_verdict_classes_drop_only_blanks_outside_strings() -> None:
    assert _verdict_class(0, b' "a b" ,\n') == b'"a b",'
    assert _verdict_class(1, b' "} ,') == b' "},'          # inside a string the blank is content
    assert _verdict_class(2, b' "} ') == b' "}'            # an escaped blank, the string's end, a blank
    assert _verdict_class(0, b"{},") == b"{},"


def test_tokens_that_differ_by_a_blank_inside_a_key_get_their_own_verdicts() -> None:
    """``a"`` and `` a"`` after ``{"`` end different keys: one class per token there."""
    vocab = TokenVocabulary.from_token_bytes(ASCII + FRAGMENTS + [b""], eos_ids=[len(ASCII) + len(FRAGMENTS)])
    schema, order = SCHEMAS[3]                   # propertyNames: only "a", "ab", "b"
    m = compile_grammar(Grammar.from_json_schema(schema, property_order=order), vocab, cache_dir=None).matcher()
    assert m.advance_many(vocab.encode('{"')) == 2
    bits = unpack_mask(m.mask(), len(vocab.token_bytes))
    tb = vocab.token_bytes
    assert bits[tb.index(b'a"')] and not bits[tb.index(b' a"')] and not bits[tb.index(b'a "')]
    assert [int(t) for t in bits.nonzero()[0]] == _reference(m, len(tb), set(vocab.eos_ids))


@pytest.mark.parametrize("schema", [
    # draft 07: the $ref replaces its siblings, "required" among them
    {"$schema": "http://json-schema.org/draft-07/schema#", "definitions": {"d": {"type": "object"}},
     "$ref": "#/definitions/d", "required": ["a"]},
    # draft 03: "required" is a property's flag; a list there means nothing
    {"$schema": "http://json-schema.org/draft-03/schema#", "type": "object", "required": ["a"],
     "properties": {"b": {"type": "integer", "required": True}}},
    {"type": "object", "allOf": [{"required": ["a"]}, {"required": ["b"]}], "properties": {"a": {}, "b": {}}},
    {"type": "object", "properties": {"o": {"type": "object", "required": ["x", "y"]}}, "required": ["o"]},
])
def test_objects_closed_without_a_required_key_agree_with_jsonschema(schema) -> None:
    """The close of an object missing a required key is refused from the keys read;
    where ``required`` means nothing (draft 03's list, a sibling of a draft-07 ``$ref``)
    it is not."""
    from constrained.json_schema.dialect import dialect_of

    vocab = TokenVocabulary.from_token_bytes(ASCII + [b""], eos_ids=[len(ASCII)])
    cg = compile_grammar(Grammar.from_json_schema(schema, property_order="any"), vocab, cache_dir=None)
    validator = dialect_of(schema).validator_class(schema)
    for text in ('{}', '{"a":1}', '{"b":2}', '{"a":1,"b":2}', '{"b":1,"a":2}', '{"o":{}}', '{"o":{"x":1}}',
                 '{"o":{"y":1,"x":2}}', '{"a":1,"b":2,"o":{"x":1,"y":2}}'):
        expected = validator.is_valid(json.loads(text))
        assert cg.accepts_bytes(text.encode()) == expected, (schema, text)


_PIECES = ["a", "é", "😀", "\\n", "\\u00e9", "\\ud83d\\ude00", "\\ud83d", "\\u00", "\\", "ab", "\u2028"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=6), st.integers(25, 34), st.integers(0, 9),
       st.lists(st.sampled_from(["a", "bc", "é", "😀", "x" * 7, "\\", '"', "\xa0b", "é"[:1], 'ab"', '"]', '",',
                                 'xyz",', 'a\\n', 'ab\\', '\\u00e9b', 'é"', 'a\x01', "x" * 7 + '"]', '"]]', ' "',
                                 'ab\\"c']), min_size=9, max_size=24),
       st.booleans())
def test_refused_plain_tokens_under_max_length_equal_stepping_each(pieces, limit, slack, tokens, unique) -> None:
    # `refused` decides string content under a maxLength by counts (a plain token's
    # characters, or those a token surely begins before its quote or escape) and reads a
    # token that ends the string from the state after its quote; stepping every candidate
    # through the checks is the reference (escapes, surrogate pairs and UTF-8 sequences
    # split between the text and the token included; bounds above 24 are checks; unique
    # elements make the string's value matter after its quote)
    checks = Grammar.from_json_schema({"type": "array", "items": {"type": "string", "maxLength": limit},
                                       "uniqueItems": unique}).checks
    vocab = TokenVocabulary.from_token_bytes([t.encode() for t in tokens] + [b"\x80a", "é".encode()[1:] + b"z"])
    earlier = b'"' + b"a" * (limit - slack) + b'",' if unique else b""    # a repeat may end the string
    text = b'[' + earlier + b'"' + ("a" * (limit - slack) + "".join(pieces)).encode()     # near the bound
    state = checks.start()
    for i in range(len(text)):                 # byte by byte: the checks read any split
        state = checks.step(state, text[:i], text[i:i + 1])
        if state is None:
            return                             # the text so far is already too long
    ids = np.arange(len(vocab.token_bytes))
    want = [t for t in ids.tolist() if checks.step(state, text, vocab.token_bytes[t]) is None]
    assert sorted(checks.refused(state, text, ids, vocab)) == want
