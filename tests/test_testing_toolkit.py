"""constrained.testing: its strategies produce what they promise, its checkers catch
planted bugs (mutation check), and every shipped grammar passes them against an
independent reference (json.loads, SQLite, Python's parser, an exact evaluator)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import jsonschema
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from constrained import Grammar, TokenVocabulary, compile_grammar
from constrained.masks import unpack_mask
from constrained.testing import (
    CompletenessError,
    GrammarSampler,
    MaskMismatchError,
    RandomChooser,
    Reference,
    SoundnessError,
    assert_complete,
    assert_mask_exact,
    assert_sound,
    grammar_strings,
    masked_walks,
    parses,
    schema_instances,
    tokenizations,
)
from constrained.testing.tokens import sub_vocabulary_bytes

from test_shipped_grammars import arithmetic_reference, json_reference, python_reference, sql_reference

GRAMMARS = Path(__file__).resolve().parents[1] / "grammars"
SHIPPED = {   # grammar file -> independent reference predicate
    "json": parses(json_reference),
    "arithmetic": parses(arithmetic_reference),
    "sql_select": parses(sql_reference),
    "python_subset": parses(python_reference),
}
BYTES = TokenVocabulary.from_token_bytes([bytes([b]) for b in range(256)] + [b""], eos_ids=[256])


def shipped(name: str) -> Grammar:
    return Grammar.from_file(GRAMMARS / f"{name}.lark")


_COMPILED: dict[tuple[str, int], object] = {}


def compiled_for(name: str, vocab=BYTES):
    key = (name, id(vocab))
    if key not in _COMPILED:
        _COMPILED[key] = compile_grammar(shipped(name), vocab, cache_dir=None)
    return _COMPILED[key]


@pytest.fixture(scope="module")
def mixed_vocab(llama3_vocab) -> TokenVocabulary:
    """~2,000 real Llama 3 tokens (all single bytes, multi-byte and punctuation-heavy
    ones, tokens of sample sentences of every shipped grammar) plus EOS."""
    rng = random.Random(5)
    samples = [GrammarSampler(shipped(n)).generate(RandomChooser(rng)) for n in SHIPPED for _ in range(20)]
    toks = sub_vocabulary_bytes(llama3_vocab.token_bytes, samples, rng, size=2000)
    return TokenVocabulary.from_token_bytes(toks + [b""], eos_ids=[len(toks)])


# ---------------------------------------------------------------------- strategies
@pytest.mark.parametrize("name", sorted(SHIPPED))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_grammar_strings_are_in_the_language(name: str, data) -> None:
    grammar = shipped(name)
    text = data.draw(grammar_strings(grammar, max_depth=7))
    assert Reference(grammar).accepts(text), text
    assert SHIPPED[name](text.decode("utf-8")), text


def test_grammar_strings_reach_every_alternative() -> None:
    grammar = Grammar.from_lark('start: "a" | "b" | "c" start | "d" start start')
    seen = set()

    @settings(max_examples=200, deadline=None, database=None)
    @given(grammar_strings(grammar, max_depth=4))
    def collect(text: bytes) -> None:
        seen.update(text)

    collect()
    assert seen == set(b"abcd")


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_tokenizations_spell_the_text(data, mixed_vocab) -> None:
    text = data.draw(st.sampled_from(['{"key": [1, 2.5, null]}', "SELECT a FROM t", "x = (1 + 2) * 3\n", "é€"]))
    ids = data.draw(tokenizations(text, mixed_vocab))
    assert b"".join(mixed_vocab.token_bytes[t] for t in ids) == text.encode("utf-8")


def test_tokenizations_include_the_canonical_one(llama3_vocab) -> None:
    text = '{"name": "Ada"}'
    canonical = list(llama3_vocab.encode(text))
    found = []

    @settings(max_examples=60, deadline=None, database=None)
    @given(tokenizations(text, llama3_vocab))
    def collect(ids) -> None:
        found.append(list(ids))

    collect()
    assert canonical in found and any(ids != canonical for ids in found)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(walk=masked_walks(compiled_for("json"), max_tokens=40))
def test_masked_walks_follow_the_mask(walk) -> None:
    compiled = compiled_for("json")
    m = compiled.matcher()
    for t in walk.tokens:
        assert unpack_mask(m.mask(), len(BYTES))[t]
        assert m.advance(t)
    if walk.finished:
        assert m.is_accepting()
        json.loads(walk.text)


SCHEMA = {"type": "object", "properties": {"id": {"type": "integer", "minimum": 1},
                                           "tags": {"type": "array", "items": {"enum": ["a", "b"]},
                                                    "uniqueItems": True}},
          "required": ["id"], "additionalProperties": False}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(value=schema_instances(SCHEMA, use_hypothesis_jsonschema=False))
def test_schema_instances_are_valid(value) -> None:
    jsonschema.Draft202012Validator(SCHEMA).validate(value)


# ---------------------------------------------------------------------- mutation check
JSON_TEXT = (GRAMMARS / "json.lark").read_text(encoding="utf-8")


def _mutant(old: str, new: str) -> Grammar:
    assert old in JSON_TEXT, old
    return Grammar.from_lark(JSON_TEXT.replace(old, new, 1))


def _json_terminal(name: str) -> str:
    line = next(ln for ln in JSON_TEXT.splitlines() if ln.startswith(name))
    return line


def test_missing_alternative_is_caught_by_completeness() -> None:
    broken = _mutant('      | "null"  -> null\n', "")
    compiled = compile_grammar(broken, BYTES, cache_dir=None)
    assert_complete(compiled, ["[1, true]"])                     # unaffected strings still pass
    with pytest.raises(CompletenessError, match="null"):
        assert_complete(compiled, ["[1, true]", '{"a": null}', "null"])


@pytest.mark.parametrize("line, broad", [
    ("NUMBER", r'NUMBER: /-?[0-9]+(\.[0-9]*)?/'),                 # leading zeros, "1." accepted
    ("STRING", r'STRING: /"[^"]*"/'),                             # raw control characters, lone backslash
])
def test_over_broad_terminal_is_caught_by_soundness(line: str, broad: str) -> None:
    original = _json_terminal(line)
    broken = Grammar.from_lark(JSON_TEXT.replace(original, broad, 1))
    compiled = compile_grammar(broken, BYTES, cache_dir=None)
    with pytest.raises(SoundnessError, match="the reference rejects it"):
        assert_sound(compiled, parses(json.loads), walks=600, max_tokens=40, seed=1)


class _DropsToken:
    """A compiled grammar whose masks wrongly refuse (or wrongly allow) one token."""

    def __init__(self, compiled, token: int, allow: bool) -> None:
        self._c, self.token, self.allow = compiled, token, allow
        self.grammar, self.vocab = compiled.grammar, compiled.vocab

    def matcher(self):
        inner = self._c.matcher()
        outer = self

        class Wrong:
            def __getattr__(self, name):
                return getattr(inner, name)

            def mask(self):
                m = inner.mask().copy()
                bit = np.int32(1 << (outer.token & 31)) if (outer.token & 31) != 31 else np.int32(-2**31)
                if outer.allow:
                    m[outer.token >> 5] |= bit
                else:
                    m[outer.token >> 5] &= ~bit
                return m

        return Wrong()


@pytest.mark.parametrize("allow", [False, True])
def test_wrong_masks_are_caught_by_mask_exactness(allow: bool) -> None:
    compiled = compiled_for("json")
    assert_mask_exact(compiled, walks=3, max_tokens=8)
    wrong = _DropsToken(compiled, ord("z") if allow else ord("["), allow)
    with pytest.raises(MaskMismatchError):
        assert_mask_exact(wrong, walks=3, max_tokens=8)


def test_failure_reports_name_the_shortest_string_and_the_token() -> None:
    compiled = compile_grammar(Grammar.from_lark('start: "ab" | "abc"'), BYTES, cache_dir=None)
    with pytest.raises(CompletenessError) as err:
        assert_complete(compiled, ["abcd", "abd", "ab"], tokenizations=1)
    message = str(err.value)
    assert "'abd'" in message and "token 2" in message and "state" in message


# ---------------------------------------------------------------------- dogfood
@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_shipped_grammar_is_sound_and_complete(name: str, mixed_vocab) -> None:
    compiled = compiled_for(name, mixed_vocab)
    assert assert_sound(compiled, SHIPPED[name], walks=60, max_tokens=40) > 10
    rng = random.Random(3)
    gen = GrammarSampler(compiled.grammar)
    strings = [gen.generate(RandomChooser(rng), max_depth=6) for _ in range(15)]
    assert assert_complete(compiled, strings, tokenizations=2) >= 30


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_shipped_grammar_soundness_10k(name: str, mixed_vocab) -> None:
    """10,000 generated strings and >= 10,000 finished masked walks (mixed Llama 3
    sub-vocabulary) per shipped grammar, every one accepted by the grammar's
    independent reference."""
    reference = SHIPPED[name]
    gen = GrammarSampler(shipped(name))
    rng = random.Random(10_000)
    def accepted(text: bytes) -> bool:
        try:
            return reference(text.decode("utf-8")) is True
        except Exception:  # noqa: BLE001 - the reference rejects
            return False

    rejected = [s for s in (gen.generate(RandomChooser(rng), max_depth=rng.randint(2, 9)) for _ in range(10_000))
                if not accepted(s)]
    assert not rejected, rejected[:5]
    finished = assert_sound(compiled_for(name, mixed_vocab), reference, walks=13_000, max_tokens=48, seed=7)
    assert finished >= 10_000
    print(f"{name}: 10000 generated strings and {finished} finished masked walks, all accepted")


def test_property_testing_example_runs(monkeypatch, capsys) -> None:
    import runpy
    import sys

    monkeypatch.setattr(sys, "argv", ["property_testing.py"])
    runpy.run_path(str(GRAMMARS.parent / "examples" / "property_testing.py"), run_name="__main__")
    out = capsys.readouterr().out
    assert "naive grammar, as expected" in out and "300 hypothesis derivations" in out


def test_grammar_strings_shrink_to_small_counterexamples() -> None:
    from hypothesis import find

    grammar = Grammar.from_lark('start: item ("," item)*\nitem: /[a-z]{1,8}/ | "[" start "]"')
    # (no explain phase: the suite's hypothesis profile, tests/conftest.py)
    smallest = find(grammar_strings(grammar, max_depth=6), lambda s: b"q" in s and b"[" in s,
                    settings=settings(max_examples=2000, database=None, derandomize=True))
    # the global minimum is b"[q]"; the shrinker may stop at a near one such as b"q,[a]"
    assert len(smallest) <= 5 and b"q" in smallest and b"[" in smallest, smallest


def test_pytest_plugin_fixtures(compile_for_test, byte_vocab) -> None:
    compiled = compile_for_test('start: "(" start ")" | "x"')
    assert compiled.vocab is byte_vocab
    assert assert_sound(compiled, lambda t: t.count("(") == t.count(")") and t.strip("()") == "x", walks=40) > 0
    assert assert_complete(compiled, ["x", "((x))"]) == 2 * 4     # canonical + 3 random splits each
