"""Byte DFAs against Python's re: full matches, prefixes, UTF-8, limits."""

from __future__ import annotations

import re
import time

import pytest
import regex as regex_module
from hypothesis import given, settings, strategies as st

from constrained.automata.byte_dfa import compile_regex
from constrained.automata.utf8 import utf8_sequences
from constrained.errors import CompileLimitError, RegexError

PATTERNS = [
    r"[0-9]+", r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?",
    r'"(?:[^"\\\x00-\x1f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"', r"(?i:select)", r"\w+", r"\d{1,3}", r"\s",
    r".", r"(?s:.)", r"a{2,4}b*?", r"[^a-c]", r"[α-ω]+é?", r"(?i)straße|k", r"(ab|a)(bc|c)", r"[\u0800-\uffff]+",
    r"[\U00010000-\U0010ffff]", r"^x+$", r"(?:ab){0,3}",
]
ALPHABET = "ab019\"\\uxSsElectK\u212a\u017fé\n \t٣😀\x00-.+eωαß\u0800\uffff\U0010ffff"


@pytest.mark.parametrize("pattern", PATTERNS)
@settings(max_examples=150, deadline=None, derandomize=True)
@given(text=st.text(alphabet=ALPHABET, max_size=8))
def test_dfa_agrees_with_re_on_full_and_partial_matches(pattern: str, text: str) -> None:
    dfa = compile_regex(pattern)
    data = text.encode()
    assert dfa.matches(data) == bool(re.fullmatch(pattern, text))
    # prefix viability against the `regex` module's partial matching
    partial = regex_module.fullmatch(pattern, text, partial=True)
    assert dfa.is_prefix(data) == (partial is not None)


@pytest.mark.parametrize("pattern", PATTERNS)
def test_dfa_is_trimmed_and_minimal_numbering(pattern: str) -> None:
    dfa = compile_regex(pattern)
    t = dfa.transitions
    assert (t[0] == 0).all() and not dfa.accepting[0]
    # every live state reaches acceptance
    live = dfa.accepting.copy()
    for _ in range(dfa.num_states):
        live = live | live[t].any(axis=1)
    assert live[1:].all()


def test_partial_utf8_prefixes() -> None:
    dfa = compile_regex("é")
    assert dfa.is_prefix(b"\xc3") and not dfa.matches(b"\xc3") and dfa.matches("é".encode())
    assert not compile_regex(".").is_prefix(b"\xff")  # never valid UTF-8
    assert not compile_regex("(?s:.)").matches("\ud800".encode("utf-8", "surrogatepass"))


@settings(max_examples=300, deadline=None, derandomize=True)
@given(lo=st.integers(0, 0x10FFFF), span=st.integers(0, 5000))
def test_utf8_sequences_cover_exactly(lo: int, span: int) -> None:
    hi = min(0x10FFFF, lo + span)
    seqs = list(utf8_sequences(lo, hi))
    for cp in {lo, hi, (lo + hi) // 2, min(hi, lo + 1)}:
        if 0xD800 <= cp <= 0xDFFF:
            continue
        enc = chr(cp).encode()
        assert any(len(s) == len(enc) and all(a <= b <= c for b, (a, c) in zip(enc, s)) for s in seqs)
    for s in seqs:  # every sequence's extremes decode to code points in range
        for pick in (0, 1):
            raw = bytes(r[pick] for r in s)
            assert lo <= ord(raw.decode()) <= hi


@pytest.mark.parametrize("pattern,kind", [
    (r"(?=a)a", RegexError), (r"(a)\1", RegexError), (r"\bx", RegexError), (r"a(", RegexError),
    (r"a++", RegexError), (r"(?>a)", RegexError), (r"x{100000}", CompileLimitError),
    (r"(?:x{1000}){1000}", CompileLimitError), (r"(a|b)*a(a|b){20}", CompileLimitError),
    (r"((((((((((a*)*)*)*)*)*)*)*)*)*)*b{5000}", CompileLimitError),
])
def test_pathological_regexes_fail_fast_with_typed_errors(pattern: str, kind: type) -> None:
    t0 = time.perf_counter()
    with pytest.raises(kind) as info:
        compile_regex(pattern, max_states=5000, max_nfa_states=50_000)
    assert time.perf_counter() - t0 < 10
    if isinstance(info.value, RegexError):
        assert info.value.pattern == pattern


def test_regex_error_names_position() -> None:
    with pytest.raises(RegexError) as info:
        compile_regex("ab[c")
    assert info.value.position == 2
