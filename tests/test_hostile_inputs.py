"""Large and hostile inputs: they compile, or end quickly with a typed error.

Each case here is bounded by a generous wall limit (it fails a hung compile, it does
not time anything)."""

from __future__ import annotations

import json
import random

import pytest

from constrained import CompileLimitError, Grammar, TokenVocabulary, compile_grammar
from constrained.json_schema.compiler import compile_json_schema

BYTES = TokenVocabulary.from_token_bytes([bytes([b]) for b in range(1, 128)] + [b""], eos_ids=[127])


def _words(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    words = {"".join(rng.choices("abcdefghijklmnopqrstuvwxyz_ é\"", k=rng.randint(1, 8))) for _ in range(n)}
    return sorted(words)


def test_an_enum_of_twenty_thousand_strings_compiles_and_is_exact_on_canonical_spellings() -> None:
    words = _words(20_000)
    schema = {"type": "object", "properties": {"city": {"type": "string", "enum": words}}, "required": ["city"]}
    compilation = compile_json_schema(schema)
    assert any(n.keyword == "enum" and "canonical" in n.note for n in compilation.notes)
    cg = compile_grammar(compilation.grammar, BYTES, cache_dir=None)
    for w in words[:300] + words[-300:]:
        assert cg.accepts_bytes(b'{"city": ' + json.dumps(w, ensure_ascii=False).encode() + b"}")
    assert not cg.accepts_bytes(b'{"city": "' + b"q" * 9 + b'"}')
    m = cg.matcher()
    assert m.mask().any()


def test_small_enums_keep_every_json_spelling() -> None:
    cg = compile_grammar(Grammar.from_json_schema({"enum": ["a/b", "c"]}), BYTES, cache_dir=None)
    assert cg.accepts_bytes(b'"a\\/b"') and cg.accepts_bytes(b'"\\u0063"')


def test_large_enum_with_other_keywords_still_filters_values() -> None:
    words = _words(500, seed=1)
    schema = {"type": "string", "maxLength": 3, "enum": words + [7]}
    cg = compile_grammar(Grammar.from_json_schema(schema), BYTES, cache_dir=None)
    for w in words[:100]:
        assert cg.accepts_bytes(json.dumps(w, ensure_ascii=False).encode()) == (len(w) <= 3)
    assert not cg.accepts_bytes(b"7")


def _nested(depth: int) -> dict:
    schema: dict = {"type": "integer"}
    for _ in range(depth):
        schema = {"type": "array", "items": schema}
    return schema


@pytest.mark.parametrize("depth", [300, 5000])
def test_deep_schemas_are_refused_with_a_typed_error_naming_where(depth: int) -> None:
    with pytest.raises(CompileLimitError) as caught:
        Grammar.from_json_schema(_nested(depth))
    assert caught.value.pointer.startswith("/items/items") and caught.value.limit in ("max_nesting",
                                                                                      "max_document_depth")


def test_deep_consts_are_refused_with_a_typed_error() -> None:
    value: list = [0]
    for _ in range(3000):
        value = [value]
    with pytest.raises(CompileLimitError):
        Grammar.from_json_schema({"const": value})


def test_schemas_nested_within_the_documented_depth_compile() -> None:
    cg = compile_grammar(Grammar.from_json_schema(_nested(100)), BYTES, cache_dir=None)
    assert cg.accepts_bytes(b"[" * 100 + b"1" + b"]" * 100)


def test_deep_values_of_a_recursive_schema_are_handled_iteratively() -> None:
    schema = {"$defs": {"t": {"anyOf": [{"type": "array", "items": {"$ref": "#/$defs/t"}}, {"type": "integer"}]}},
              "$ref": "#/$defs/t"}
    m = compile_grammar(Grammar.from_json_schema(schema), BYTES, cache_dir=None).matcher()
    bracket = BYTES.token_bytes.index(b"[")
    for _ in range(2000):
        assert m.advance(bracket)
    assert m.mask().any()
    assert m.shortest_completion() is not None
