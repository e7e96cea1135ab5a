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


# ------------------------------------------------------------- intersection / difference terminals

import numpy as np  # noqa: E402

from constrained.automata.byte_dfa import compile_terminal  # noqa: E402

PIECES = ["a", "b", "c", "é", "[ab]", "a*", "(ab)+", "b?a{1,3}", "[^a]", "(?:a|bc)", ".?", "[bé]*"]
piece_regex = st.lists(st.sampled_from(PIECES), min_size=1, max_size=3).map("".join)
small_regex = st.one_of(piece_regex, st.tuples(piece_regex, piece_regex).map("|".join))


def _is_trimmed(dfa) -> bool:
    t = dfa.transitions
    if not dfa.accepting.any():  # the empty language: a dead start state, as compile_regex gives
        return dfa.num_states == 2 and not t.any()
    live = dfa.accepting.copy()
    for _ in range(dfa.num_states):
        live = live | live[t].any(axis=1)
    return bool(live[1:].all() and (t[0] == 0).all() and not dfa.accepting[0])


@settings(max_examples=250, deadline=None, derandomize=True)
@given(regex=small_regex, also=st.lists(small_regex, max_size=2), excluding=st.lists(small_regex, max_size=2),
       texts=st.lists(st.text(alphabet="abcé", max_size=6), min_size=1, max_size=12))
def test_terminal_product_agrees_with_re(regex: str, also: list[str], excluding: list[str],
                                         texts: list[str]) -> None:
    dfa = compile_terminal(regex, also, excluding)
    assert _is_trimmed(dfa)
    for text in texts:
        expected = (re.fullmatch(regex, text) is not None and all(re.fullmatch(r, text) for r in also)
                    and not any(re.fullmatch(r, text) for r in excluding))
        assert dfa.matches(text.encode()) == expected, (regex, also, excluding, text)


@pytest.mark.parametrize("regex,also,excluding,same_as", [
    ("a+", ("[ab]+",), (), "a+"),
    ("[ab]+", (), ("[ab]*b[ab]*",), "a+"),
    ("(ab)+", ("(?:abab)*ab",), (), "ab(?:abab)*"),
    ("[0-9]+", (".{1,3}",), ("0[0-9]+",), "0|[1-9][0-9]{0,2}"),
    ("a*", (), ("",), "a+"),
    ("a+", ("b+",), (), r"[^\s\S]"),  # empty intersection: the same tables as an empty regex
    ("a+", (), ("a*",), r"[^\s\S]"),
])
def test_equal_languages_give_equal_terminal_dfas(regex, also, excluding, same_as) -> None:
    got, want = compile_terminal(regex, also, excluding), compile_regex(same_as)
    assert got.digest == want.digest
    assert np.array_equal(got.transitions, want.transitions) and np.array_equal(got.accepting, want.accepting)
    assert got.also == tuple(also) and got.excluding == tuple(excluding)


def test_terminal_product_is_order_independent_and_plain_terminals_unchanged() -> None:
    a, b = "[a-z]+", "(?:[a-z]{3})*"
    assert compile_terminal(a, (b,)).digest == compile_terminal(b, (a,)).digest
    plain = compile_terminal("[0-9]+", terminal="INT")
    assert plain.digest == compile_regex("[0-9]+", terminal="INT", max_states=20_000).digest
    assert plain.digest == compile_regex("[0-9]+").digest and plain.also == plain.excluding == ()
    dfa = compile_terminal("[a-zé]+", also=(".{2,3}",), excluding=("if|for|[a-z]*é",))
    assert [dfa.matches(w.encode()) for w in ("é", "éa", "if", "fi", "fé", "four")] == [False, True, False,
                                                                                         True, False, False]


def test_terminal_product_wide_tuple_keys_give_the_same_dfa(monkeypatch) -> None:
    from constrained.automata import byte_dfa

    args = ("[a-zé]+", (".{2,5}", "[^q]*"), ("if|for", "[a-z]*é"))
    want = compile_terminal(*args)
    monkeypatch.setattr(byte_dfa, "_INT_KEY_SPAN", 1)  # key tuples by their bytes, as for huge products
    byte_dfa._compile_terminal.cache_clear()
    try:
        assert compile_terminal(*args).digest == want.digest
    finally:
        byte_dfa._compile_terminal.cache_clear()


def test_terminal_product_limit_and_errors_name_the_terminal() -> None:
    # components of 8 and 12 states; their product counts modulo 77
    with pytest.raises(CompileLimitError) as info:
        compile_terminal("(?:[ab]{7})+", also=("(?:[ab]{11})+",), terminal="T", max_states=50)
    assert info.value.terminal == "T" and "T" in str(info.value)
    assert compile_terminal("(?:[ab]{7})+", also=("(?:[ab]{11})+",), max_states=200).matches(b"a" * 77)
    with pytest.raises(RegexError) as rinfo:
        compile_terminal("a", also=("b(",), terminal="T")
    assert rinfo.value.terminal == "T"
    with pytest.raises(RegexError):
        compile_terminal("a", excluding=("(?=a)a",), terminal="T")


def _tiny_grammar(*terminals, rules=None):
    from constrained.grammar.ir import Grammar, Rule

    rules = rules or (Rule("start", (terminals[0].name,)),)
    return Grammar(terminals=tuple(terminals), rules=tuple(rules), start="start")


def test_grammar_terminals_with_also_and_excluding() -> None:
    from constrained import TokenVocabulary, compile_grammar
    from constrained.errors import GrammarError, UnsupportedGrammarError
    from constrained.grammar.ir import Rule, TerminalDef

    # IR: defaults, tuples, hash compatibility
    plain = TerminalDef("INT", "[0-9]+")
    assert plain.also == () and plain.excluding == () and plain == TerminalDef("INT", "[0-9]+", (), ())
    assert TerminalDef("N", "a", also=["b"]).also == ("b",)
    with pytest.raises(GrammarError):
        TerminalDef("N", "a", excluding="b")
    g_plain = _tiny_grammar(plain)
    import hashlib
    import json
    legacy = json.dumps({"terminals": [["INT", "[0-9]+"]], "rules": [["start", ["INT"]]], "start": "start",
                         "ignore": []}, sort_keys=True, ensure_ascii=False)
    assert g_plain.content_hash() == hashlib.sha256(legacy.encode()).hexdigest()
    assert _tiny_grammar(TerminalDef("INT", "[0-9]+", also=(".{1,3}",))).content_hash() != g_plain.content_hash()
    assert (_tiny_grammar(TerminalDef("INT", "[0-9]+", also=("0",))).content_hash()
            != _tiny_grammar(TerminalDef("INT", "[0-9]+", excluding=("0",))).content_hash())

    tokens = [b"", b"a", b"b", b"i", b"f", b"if", b"ab", b"abc", b" ", b" i", b"\xc3", b"\xa9"]
    vocab = TokenVocabulary.from_token_bytes(tokens, eos_ids=[0])
    # empty intersection / only the empty string: the same typed errors as for a plain regex
    for bad in (TerminalDef("A", "a+", also=("b+",)), TerminalDef("A", r"[^\s\S]"),
                TerminalDef("A", "a*", excluding=("a+",)), TerminalDef("A", "a*")):
        with pytest.raises(UnsupportedGrammarError, match="matches"):
            compile_grammar(_tiny_grammar(bad), vocab, cache_dir=None)
    with pytest.raises(RegexError) as info:
        compile_grammar(_tiny_grammar(TerminalDef("A", "a", excluding=("[",))), vocab, cache_dir=None)
    assert info.value.terminal == "A"

    # words of 1-3 letters, not the keyword "if", nor ending in é; separated by spaces
    name = TerminalDef("NAME", "[a-zé]+", also=(".{1,3}",), excluding=("if", ".*é"))
    grammar = _tiny_grammar(name, TerminalDef("SP", " "),
                            rules=(Rule("start", ("NAME",)), Rule("start", ("start", "SP", "NAME"))))
    cg = compile_grammar(grammar, vocab, cache_dir=None)
    language = re.compile(r"(?!if\b)[a-zé]{1,3}(?<!é)(?: (?!if\b)[a-zé]{1,3}(?<!é))*")  # reference, with \b as word end

    def in_language(text: bytes) -> bool:
        try:
            s = text.decode()
        except UnicodeDecodeError:
            return False
        return all(w and w != "if" and len(w) <= 3 and re.fullmatch("[a-zé]+", w) and not w.endswith("é")
                   for w in s.split(" "))

    for text in (b"ab", b"if", b"iff", b"abcd", b"ab fi", b"ab if", b"a\xc3\xa9", b"\xc3\xa9a", b"", b"a  b"):
        assert cg.accepts_bytes(text) == in_language(text), text
        assert bool(language.fullmatch(text.decode())) == in_language(text), text
    # masks against the byte-level definition: token allowed iff some continuation is in the language
    m = cg.matcher()
    for tok in [3, 4, 4, 9, 10]:  # "i", "f", "f", " i", "\xc3"
        prefix = b"".join(tokens[t] for t in m.tokens)
        for t in range(1, len(tokens)):
            assert m.allows(t) == cg.is_prefix_bytes(prefix + tokens[t]), (prefix, tokens[t])
        assert m.allows(0) == cg.accepts_bytes(prefix)
        if prefix == b"if":  # the excluded keyword may only go on as a longer word
            assert not m.allows(8) and not m.allows(0) and m.allows(4)
        assert m.advance(tok), (prefix, tok)
    # after "iff i" + "\xc3": "\xa9" would end the word in é (excluded) unless more letters follow
    assert m.allows(11) and cg.is_prefix_bytes(b"iff i\xc3\xa9") and not cg.accepts_bytes(b"iff i\xc3\xa9")
    m.advance(11)
    assert not m.allows(0) and m.allows(1) and not m.allows(6)  # "iéab" would be 4 letters


def test_residual_digest_identifies_residual_languages() -> None:
    from constrained.engine.token_tables import residual_digest, successor_lists

    quoted = compile_regex(r'"[^"\\]*"')
    body = compile_regex(r'[^"\\]*"')
    keyed = compile_regex(r'x[^"\\]*"')
    after_quote = quoted.step(quoted.start, ord('"'))
    after_x = keyed.step(keyed.start, ord("x"))
    same = {residual_digest(quoted, after_quote), residual_digest(body, body.start),
            residual_digest(keyed, after_x, successor_lists(keyed))}
    assert len(same) == 1
    # different residual languages, different digests (body vs whole string, vs digits)
    digits = compile_regex(r"[0-9]+")
    assert len({*same, residual_digest(quoted, quoted.start), residual_digest(digits, digits.start)}) == 3


# ---------------------------------------------------------------------- alternations of literals
from constrained.automata import byte_dfa  # noqa: E402
from constrained.automata.regex_parser import literal_alternatives  # noqa: E402


def _nfa_route(regex: str):
    """The regex compiled through the NFA and subset construction (the reference route)."""
    ast = byte_dfa.parse_regex(regex)
    nfa = byte_dfa._NFABuilder(10 ** 6, regex, None)
    start, end = nfa.new(), nfa.new()
    nfa.build(ast, start, end)
    table, accepting = byte_dfa._determinize(nfa, start, end, 10 ** 6)
    return byte_dfa._minimize(byte_dfa._trim(table, accepting), accepting)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(words=st.lists(st.text(alphabet='ab"\\|.é\n\U0001f600', max_size=5), min_size=1, max_size=25),
       escape=st.sampled_from(["re", "unicode"]))
def test_literal_alternations_build_the_minimal_dfa_directly(words: list[str], escape: str) -> None:
    """The finite-automaton route gives the very tables (digest) of the NFA route."""
    def spell(w: str) -> str:
        if not w:
            return "(?:)"
        return re.escape(w) if escape == "re" else "".join(c if c.isalnum() else f"\\U{ord(c):08x}" for c in w)

    regex = "(?:" + "|".join(spell(w) for w in words) + ")"
    assert sorted(set(literal_alternatives(regex))) == sorted(set(words))
    fast = compile_regex.__wrapped__(regex)
    assert fast.digest == byte_dfa._table_digest(*_nfa_route(regex))
    for w in words:
        assert fast.matches(w.encode())


def test_literal_alternation_of_twenty_thousand_strings_compiles_fast() -> None:
    import random
    rng = random.Random(0)
    words = {"".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=rng.randint(3, 8))) for _ in range(20_000)}
    started = time.perf_counter()
    dfa = compile_regex.__wrapped__("(?:" + "|".join(sorted(words)) + ")")
    assert time.perf_counter() - started < 30          # bounded, not a timing test (about 1 s here)
    assert all(dfa.matches(w.encode()) for w in list(words)[:500]) and not dfa.matches(b"zzzzzzzzz")
    assert literal_alternatives("a|b+") is None and literal_alternatives("(?:a)|(?:b)") is None
