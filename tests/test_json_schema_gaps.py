"""Whitespace gaps fused into punctuation (`constrained.json_schema.compile.gaps`): the
fused grammar accepts exactly what the grammar with ``ws`` nonterminals accepts."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given, settings, strategies as st

from constrained import TokenVocabulary, compile_grammar
from constrained.json_schema import compiler as schema_compiler
from constrained.json_schema.compile.gaps import PUNCTUATION, fuse_gaps
from constrained.json_schema.compile.rules import RuleBuilder
from constrained.json_schema.compiler import compile_json_schema

BYTES = TokenVocabulary.from_token_bytes([bytes([b]) for b in range(1, 256)] + [b""], eos_ids=[255])

SCHEMAS = [     # (schema, values it accepts: whitespace is put into them, and into random values)
    ({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}}, "b": {"type": "string"}},
      "required": ["a"]}, [{"a": []}, {"a": [1, 2, 3], "b": ", :"}, {"a": [0]}]),
    ({"type": "object", "properties": {"x": {"type": "object", "properties": {"y": {"type": "boolean"}}}},
      "additionalProperties": {"type": "array", "maxItems": 2}}, [{}, {"x": {"y": True}, "k": [1, {}]}, {"b": []}]),
    ({"enum": [[1, 2], {"k": [None, {}]}, "s"]}, [[1, 2], {"k": [None, {}]}]),
    ({"type": "array", "prefixItems": [{"const": {"a": []}}], "items": {"type": "number"}},
     [[{"a": []}], [{"a": []}, 1, 2.5]]),
    ({}, [[], {}, {"a": [{}, []]}]),
    ({"anyOf": [{"type": "array", "minItems": 1}, {"type": "object", "minProperties": 1}]}, [[[]], {"a": {}}]),
]


def _compiled(schema, fuse: bool, **options):
    original = schema_compiler.fuse_gaps
    if not fuse:
        schema_compiler.fuse_gaps = lambda rules, builder, gap: rules     # the grammar as written
    try:
        grammar = compile_json_schema(schema, **options).grammar
    finally:
        schema_compiler.fuse_gaps = original
    return grammar, compile_grammar(grammar, BYTES, cache_dir=None)


def _respaced(text: str, rng: random.Random, max_gap: int) -> bytes:
    """``text`` (compact JSON) with random whitespace in random gaps between its tokens,
    some of exactly ``max_gap`` bytes and some one longer, and sometimes around the value."""
    out, in_string, escaped = [], False, False
    for i, ch in enumerate(text):
        if not in_string and (i == 0 or ch in PUNCTUATION or text[i - 1] in PUNCTUATION) and rng.random() < 0.4:
            out.append("".join(rng.choice(" \t\n\r") for _ in range(rng.choice([1, 2, max_gap, max_gap + 1]))))
        out.append(ch)
        if in_string:
            in_string = escaped or ch != '"'
            escaped = not escaped and ch == "\\"
        elif ch == '"':
            in_string = True
    if rng.random() < 0.1:
        out.append(" ")
    return "".join(out).encode()


values = st.recursive(st.none() | st.booleans() | st.integers(-3, 300) | st.text("ab\"\\ ,:{}", max_size=3),
                      lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("abkxy"), inner,
                                                                                     max_size=3), max_leaves=8)


@pytest.mark.parametrize("index", range(len(SCHEMAS)))
@settings(max_examples=60, deadline=None)
@given(value=values, known=st.integers(0, 5), seed=st.integers(0, 2 ** 32 - 1))
def test_fused_gaps_accept_exactly_what_the_ws_rules_accept(index: int, value, known: int, seed: int) -> None:
    schema, examples = SCHEMAS[index]
    if known < len(examples):
        value = examples[known]
    _, fused = _cached(index, True)
    _, plain = _cached(index, False)
    text = _respaced(json.dumps(value, separators=(",", ":")), random.Random(seed), 4)
    assert fused.accepts_bytes(text) == plain.accepts_bytes(text), (schema, text)


_CACHE: dict = {}


def _cached(index: int, fuse: bool):
    key = (index, fuse)
    if key not in _CACHE:
        _CACHE[key] = _compiled(SCHEMAS[index][0], fuse, max_whitespace=4)
    return _CACHE[key]


def test_no_rule_reads_whitespace_beside_punctuation() -> None:
    for index in range(len(SCHEMAS)):
        grammar, _ = _cached(index, True)
        assert not any(r.lhs.startswith("ws") for r in grammar.rules)
        gap_terminals = [t for t in grammar.terminals if "WS_" in t.name or "_WS" in t.name]
        assert gap_terminals, grammar.terminals
    plain, _ = _cached(0, False)
    assert any(r.lhs.startswith("ws") for r in plain.rules)


def test_the_gap_bound_holds_on_each_side_of_a_comma() -> None:
    _, fused = _compiled({"type": "array", "items": {"type": "integer"}}, True, max_whitespace=3)
    assert fused.accepts_bytes(b"[1   ,   2]")
    assert not fused.accepts_bytes(b"[1    ,2]")
    assert not fused.accepts_bytes(b"[1,    2]")
    assert not fused.accepts_bytes(b"[ 1,2]   ")       # never after the top-level value


def test_compact_whitespace_has_no_gap_to_fuse() -> None:
    grammar, compiled = _compiled({"type": "array", "items": {"type": "integer"}}, True, whitespace="compact")
    assert compiled.accepts_bytes(b"[1,2]") and not compiled.accepts_bytes(b"[1, 2]")
    assert {t.regex for t in grammar.terminals} >= {r"\[", ","}


def test_a_gap_that_is_not_an_optional_terminal_is_refused() -> None:
    b = RuleBuilder()
    b.rule("ws", b.term(" ", "WS"))      # not nullable
    with pytest.raises(ValueError, match="optional plain terminal"):
        fuse_gaps(b.rules, b, "ws")
