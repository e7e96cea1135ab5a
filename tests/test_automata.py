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


def test_nested_bounded_repetitions_are_refused_before_their_sets_fill_memory() -> None:
    # few automaton states, each a set of ~16,000 NFA states: bounded by the NFA states the
    # construction holds (it took gigabytes before), with the default state limits
    with pytest.raises(CompileLimitError) as info:
        compile_regex.__wrapped__(r"(?:(?:x?){0,127}){0,127}")
    assert info.value.limit == "max_subset_elements"


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


def test_a_failing_terminal_is_compiled_once_and_named_like_a_direct_compile(monkeypatch) -> None:
    """The error of a terminal that fails is named after it without compiling it again: a
    limit met late (a huge number bound's regex) would otherwise cost its time twice."""
    from constrained.automata import byte_dfa

    calls: list[str] = []
    real = byte_dfa.compile_regex.__wrapped__

    def counting(regex, **kw):
        calls.append(regex)
        return real(regex, **kw)

    monkeypatch.setattr(byte_dfa, "compile_regex", counting)
    byte_dfa._compile_terminal.cache_clear()
    try:
        with pytest.raises(RegexError) as named:
            compile_terminal("a(", terminal="T")
        assert calls == ["a("]
        with pytest.raises(CompileLimitError) as limit:
            compile_terminal("(?:[ab]{7})+", also=("(?:[ab]{11})+",), terminal="T", max_states=50)
        assert len(calls) == 3
    finally:
        byte_dfa._compile_terminal.cache_clear()
    with pytest.raises(RegexError) as direct:
        compile_regex("a(", terminal="T")
    assert str(named.value) == str(direct.value) and named.value.position == direct.value.position
    assert limit.value.terminal == "T" and str(limit.value).endswith("terminal T)")
    assert type(limit.value) is CompileLimitError


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


@pytest.mark.parametrize("regex", [r'"[^"\\]*"', r"[0-9]+(?:\.[0-9]{1,3})?", r"(?:ab|cd){2,5}x?",
                                   r'"(?:[^"\\]|\\u00[0-9a-f]{2}){2,9}"', r"(?:a|bc)*d(?:e|f)"])
def test_compiled_residual_walk_equals_the_state_by_state_walk(regex: str) -> None:
    """The compiled breadth-first walk (and its limits) against a walk in plain Python:
    the same digest for every state, None exactly where the reachable states or levels
    pass the limits."""
    from constrained.engine.token_tables import residual_digest, successor_lists

    dfa = compile_regex(regex)
    succ = successor_lists(dfa)

    def levels_from(q: int) -> list[list[int]]:
        seen, out, frontier = {0, q}, [[q]], [q]
        while frontier:
            nxt = []
            for p in frontier:
                for s in succ[p]:
                    if s not in seen:
                        seen.add(s)
                        nxt.append(s)
            if nxt:
                out.append(nxt)
            frontier = nxt
        return out

    for q in range(1, dfa.num_states):
        levels = levels_from(q)
        reached = sum(map(len, levels))
        want = residual_digest(dfa, q, succ)
        assert residual_digest(dfa, q) == want is not None
        for max_states in (1, 2, reached - 1, reached, None):
            for max_depth in (1, 2, len(levels) - 1, len(levels), None):
                got = residual_digest(dfa, q, max_states=max_states, max_depth=max_depth)
                over = (max_states is not None and reached > max_states) or \
                    (max_depth is not None and len(levels) > max_depth)
                assert got == (None if over else want), (q, max_states, max_depth)


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


def _nfa_route(regex: str, max_states: int = 10 ** 6, max_nfa_states: int = 10 ** 6):
    """The regex compiled through the NFA and subset construction (`compile_regex`'s route
    for anything but an alternation of literals)."""
    ast = byte_dfa.parse_regex(regex)
    if byte_dfa.size_estimate(ast) > max_nfa_states:
        raise CompileLimitError("too large", limit="max_nfa_states", value=max_nfa_states)
    nfa = byte_dfa._NFABuilder(max_nfa_states, regex, None)
    start, end = nfa.new(), nfa.new()
    nfa.build(ast, start, end)
    table, accepting, byte_class = byte_dfa._determinize(nfa, start, end, max_states)
    if nfa.dead_end:
        table = byte_dfa._trim(table, accepting)
    return byte_dfa._minimize(table, accepting, byte_class)


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


# ------------------------------------------------ the construction against the textbook one
# The code below is the byte-at-a-time construction this module used before byte classes
# (Thompson NFA, subset construction over 256 columns, fixpoint trimming, Moore refinement,
# product over joint byte classes): slow and simple, the reference for digests and limits.

import functools  # noqa: E402

from constrained.automata.regex_parser import size_estimate  # noqa: E402
from constrained.errors import CompileLimitError as _Limit  # noqa: E402

DEAD, START = 0, 1


class _ReferenceNFA:
    def __init__(self, limit: int, regex: str, terminal: str | None) -> None:
        self.eps: list[list[int]] = []
        self.edges: list[list[tuple[int, int, int]]] = []
        self.limit = limit
        self.regex = regex
        self.terminal = terminal

    def new(self) -> int:
        if len(self.eps) >= self.limit:
            raise CompileLimitError("regex automaton too large", limit="max_nfa_states",
                                    value=self.limit, terminal=self.terminal)
        self.eps.append([])
        self.edges.append([])
        return len(self.eps) - 1

    def build(self, node, s: int, e: int) -> None:
        kind = node[0]
        if kind == "chars":
            trie: dict[tuple[int, tuple[int, int]], int] = {}
            for lo, hi in node[1]:
                for seq in utf8_sequences(lo, hi):
                    cur = s
                    for i, (blo, bhi) in enumerate(seq):
                        if i == len(seq) - 1:
                            self.edges[cur].append((blo, bhi, e))
                        else:
                            key = (cur, (blo, bhi))
                            nxt = trie.get(key)
                            if nxt is None:
                                nxt = trie[key] = self.new()
                                self.edges[cur].append((blo, bhi, nxt))
                            cur = nxt
        elif kind == "seq":
            parts = node[1]
            if not parts:
                self.eps[s].append(e)
                return
            cur = s
            for i, part in enumerate(parts):
                nxt = e if i == len(parts) - 1 else self.new()
                self.build(part, cur, nxt)
                cur = nxt
        elif kind == "alt":
            for part in node[1]:
                self.build(part, s, e)
        else:
            _, sub, lo, hi = node
            cur = s
            for _ in range(lo):
                nxt = self.new()
                self.build(sub, cur, nxt)
                cur = nxt
            if hi is None:
                loop = self.new()
                self.eps[cur].append(loop)
                body_end = self.new()
                self.build(sub, loop, body_end)
                self.eps[body_end].append(loop)
                self.eps[loop].append(e)
            else:
                self.eps[cur].append(e)
                for _ in range(hi - lo):
                    nxt = self.new()
                    self.build(sub, cur, nxt)
                    self.eps[nxt].append(e)
                    cur = nxt


def _reference_closure(eps: list[list[int]], states) -> frozenset[int]:
    seen = set(states)
    stack = list(states)
    while stack:
        s = stack.pop()
        for t in eps[s]:
            if t not in seen:
                seen.add(t)
                stack.append(t)
    return frozenset(seen)


def _reference_determinize(nfa: _ReferenceNFA, start: int, final: int, max_states: int) -> tuple[np.ndarray, np.ndarray]:
    start_set = _reference_closure(nfa.eps, [start])
    ids: dict[frozenset[int], int] = {frozenset(): DEAD, start_set: START}
    order = [frozenset(), start_set]
    rows: list[np.ndarray] = [np.zeros(256, np.int32)]
    i = 1
    while i < len(order):
        cur = order[i]
        edges = [edge for s in cur for edge in nfa.edges[s]]
        row = np.zeros(256, np.int32)
        if edges:
            points = sorted({lo for lo, _, _ in edges} | {hi + 1 for _, hi, _ in edges})
            for a, b in zip(points, points[1:]):
                targets = [t for lo, hi, t in edges if lo <= a <= hi]
                if not targets:
                    continue
                tset = _reference_closure(nfa.eps, targets)
                tid = ids.get(tset)
                if tid is None:
                    if len(order) >= max_states:
                        raise CompileLimitError("regex needs too many automaton states",
                                                limit="max_dfa_states", value=max_states, terminal=nfa.terminal)
                    tid = ids[tset] = len(order)
                    order.append(tset)
                row[a:b] = tid
        rows.append(row)
        i += 1
    table = np.stack(rows)
    accepting = np.array([final in s for s in order], dtype=bool)
    return table, accepting


def _reference_trim(table: np.ndarray, accepting: np.ndarray) -> np.ndarray:
    """Redirect states that cannot reach acceptance to the dead state."""
    live = accepting.copy()
    live[DEAD] = False
    while True:
        reach = live[table].any(axis=1) | live
        reach[DEAD] = False
        if (reach == live).all():
            break
        live = reach
    out = table.copy()
    out[~live[table]] = DEAD
    out[~live] = DEAD
    return out


def _reference_refine(initial: np.ndarray, reduced: np.ndarray) -> np.ndarray:
    """Moore refinement of the partition ``initial`` (class 0 = just the dead state)
    to the coarsest one stable under ``reduced``'s transitions: dense class ids.

    Rounds key each state's signature (its class and its successors' classes) by a
    64-bit hash, sorted as integers; the result is then checked exactly (a stable
    partition refining ``initial`` is the coarsest one, as hashing never splits
    states with equal signatures), and recomputed with exact signatures in the
    astronomically rare case a collision made it unstable.
    """
    weights = np.random.default_rng(0x5EED).integers(1, 2 ** 63, size=reduced.shape[1] + 1, dtype=np.uint64)

    def signatures(cls: np.ndarray) -> np.ndarray:
        sig = np.ascontiguousarray(np.concatenate([cls[:, None], cls[reduced]], axis=1))
        sig[DEAD, :] = -1
        return sig

    def hashed(cls: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore"):
            h = cls.astype(np.uint64) * weights[0] + (cls[reduced].astype(np.uint64) * weights[1:]).sum(axis=1)
        h[DEAD] = 0  # the dead state keeps a class of its own (checked below)
        return h

    def exact(cls: np.ndarray) -> np.ndarray:
        sig = signatures(cls)
        # rows as opaque byte strings: one 1-D sort instead of a lexicographic one per column
        return sig.view(np.dtype((np.void, sig.shape[1] * sig.itemsize))).reshape(-1)

    for key in (hashed, exact):
        cls, count = initial, len(np.unique(initial))
        while True:
            _, new = np.unique(key(cls), return_inverse=True)
            cls = new.reshape(-1).astype(np.int64)
            if int(cls.max()) + 1 == count:
                break
            count = int(cls.max()) + 1
        _, rep = np.unique(cls, return_index=True)
        sig = np.concatenate([initial[:, None], signatures(cls)], axis=1)
        if (sig == sig[rep[cls]]).all():
            return cls
    raise AssertionError("exact partition refinement is always stable")  # pragma: no cover


def _reference_minimize(table: np.ndarray, accepting: np.ndarray, *,
              minimal: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Moore partition refinement (`_refine`; skipped when the caller knows the DFA is
    ``minimal`` already), then breadth-first renumbering from START with each state's
    targets in byte order: equal languages, equal tables."""
    # bytes with identical columns stay interchangeable: refine over one byte per class
    used = np.flatnonzero(table.any(axis=0))
    columns: dict[bytes, int] = {}
    for b in used.tolist():
        columns.setdefault(table[:, b].tobytes(), b)
    if len(used) < 256:
        columns.setdefault(b"", int(np.flatnonzero(~table.any(axis=0))[0]))   # one all-dead column
    reduced = np.ascontiguousarray(table[:, sorted(columns.values())])
    if minimal:
        cls = np.arange(table.shape[0], dtype=np.int64)
    else:
        cls = accepting.astype(np.int64) + 1
        cls[DEAD] = 0
        cls = _reference_refine(cls, reduced)
    count = int(cls.max()) + 1
    # breadth-first numbering of classes reachable from START, each state's targets in
    # byte order; the reduced columns are in byte order, so per state only the first
    # column of each class it reaches is visited: (state, column) pairs, grouped by state
    targets = cls[reduced]
    by_class = np.argsort(targets, axis=1, kind="stable")
    ordered = np.take_along_axis(targets, by_class, axis=1)
    first = np.ones(ordered.shape, bool)
    first[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
    is_first = np.zeros(first.shape, bool)
    np.put_along_axis(is_first, by_class, first, axis=1)
    states, columns_at = np.nonzero(is_first)
    first_cls = targets[states, columns_at].tolist()
    first_tgt = reduced[states, columns_at].tolist()
    bounds = np.searchsorted(states, np.arange(table.shape[0] + 1)).tolist()
    new_of = [-1] * count
    new_of[cls[DEAD]] = DEAD
    new_of[cls[START]] = START
    reps = [DEAD, START]
    i = START
    while i < len(reps):
        s = reps[i]
        for j in range(bounds[s], bounds[s + 1]):
            c = first_cls[j]
            if new_of[c] < 0:
                new_of[c] = len(reps)
                reps.append(first_tgt[j])
        i += 1
    new_of_arr = np.asarray(new_of, np.int64)
    rep = np.asarray(reps, np.int64)
    new_table = new_of_arr[cls[table[rep]]].astype(np.int32)
    new_acc = accepting[rep].astype(bool)
    new_acc[DEAD] = False
    return new_table, new_acc


def _reference_regex(regex: str, max_states: int = 20_000, max_nfa_states: int = 400_000,
                     literal_route: bool = True):
    """``(table, accepting)`` of a regex the reference way.  An alternation of literals has
    `compile_regex`'s limit of its own (`_finite_dfa`'s, checked above against this route)."""
    if literal_route and byte_dfa._literal_words(regex) is not None:
        byte_dfa._finite_dfa(byte_dfa._literal_words(regex), 8 * max_states, None)  # its limit
        max_states = max_nfa_states = 10 ** 6
    ast = byte_dfa.parse_regex(regex)
    if size_estimate(ast) > max_nfa_states:
        raise _Limit("too large", limit="max_nfa_states", value=max_nfa_states)
    nfa = _ReferenceNFA(max_nfa_states, regex, None)
    s, e = nfa.new(), nfa.new()
    nfa.build(ast, s, e)
    table, accepting = _reference_determinize(nfa, s, e, max_states)
    table = _reference_trim(table, accepting)
    return _reference_minimize(table, accepting)


def _reference_terminal(regex: str, also=(), excluding=(), max_states: int = 20_000):
    """``(table, accepting)`` of a terminal the reference way."""
    @functools.cache
    def component(r: str):
        table, accepting = _reference_regex(r, max_states)
        return byte_dfa.ByteDFA(transitions=table, accepting=accepting, regex=r,
                                digest=byte_dfa._table_digest(table, accepting))

    main = component(regex)
    must = [main] + [component(r) for r in also]
    cannot = [component(r) for r in excluding]
    if not also and not excluding:
        return main.transitions, main.accepting
    must = list({d.digest: d for d in must}.values())
    cannot = list({d.digest: d for d in cannot if d.accepting.any()}.values())
    if any(not d.accepting.any() for d in must) or {d.digest for d in cannot} & {d.digest for d in must}:
        return _reference_minimize(np.zeros((2, 256), np.int32), np.zeros(2, bool))
    if len(must) == 1 and not cannot:
        return main.transitions, main.accepting
    comps = must + cannot
    n_must, k = len(must), len(must) + len(cannot)
    # joint byte classes: bytes whose column is identical in every component
    stacked = np.ascontiguousarray(np.concatenate([d.transitions for d in comps], axis=0).T)
    cols = stacked.view(np.dtype((np.void, stacked.shape[1] * stacked.itemsize))).reshape(-1)
    _, first_byte, byte_class = np.unique(cols, return_index=True, return_inverse=True)
    byte_class = byte_class.reshape(-1)
    reduced = [np.ascontiguousarray(d.transitions[:, first_byte]).astype(np.int64) for d in comps]
    num_classes = len(first_byte)
    # a tuple's key: mixed-radix integer when it fits in int64, else its raw bytes
    strides, span = [], 1
    for d in comps:
        strides.append(span)
        span *= d.num_states
    int_keys = span < 2 ** 62
    if int_keys:
        stride_arr = np.array(strides, np.int64)

        def keys_of(tuples: np.ndarray) -> np.ndarray:
            return tuples @ stride_arr
    else:
        void = np.dtype((np.void, 8 * k))

        def keys_of(tuples: np.ndarray) -> np.ndarray:
            return np.ascontiguousarray(tuples).view(void).reshape(-1)

    def as_keys(keys: np.ndarray) -> list:
        return keys.tolist() if int_keys else [key.tobytes() for key in keys]

    # breadth-first over reachable tuples, one whole level at a time; tuple (0, ..) = dead
    start = np.full((1, k), START, np.int64)
    dead_key, start_key = as_keys(keys_of(np.concatenate([np.zeros((1, k), np.int64), start])))
    ids = {dead_key: DEAD, start_key: START}
    states = [np.zeros((1, k), np.int64), start]
    rows = [np.zeros((1, num_classes), np.int64)]
    frontier = start
    while len(frontier):
        nxt = np.stack([reduced[j][frontier[:, j]] for j in range(k)], axis=-1).reshape(-1, k)
        nxt[(nxt[:, :n_must] == DEAD).any(axis=1)] = DEAD
        uniq, first, inverse = np.unique(keys_of(nxt), return_index=True, return_inverse=True)
        uniq_ids = np.empty(len(uniq), np.int64)
        fresh = []
        for u, key in enumerate(as_keys(uniq)):
            q = ids.get(key)
            if q is None:
                q = ids[key] = len(ids)
                fresh.append(first[u])
            uniq_ids[u] = q
        if len(ids) > max_states:
            raise CompileLimitError("too many states", limit="max_dfa_states", value=max_states)
        rows.append(uniq_ids[inverse.reshape(-1)].reshape(-1, num_classes))
        frontier = nxt[np.asarray(fresh, np.int64)]
        states.append(frontier)
    tuples = np.concatenate(states, axis=0)
    table = np.concatenate(rows, axis=0)
    accepting = np.ones(len(tuples), bool)
    for j, d in enumerate(comps):
        acc = d.accepting[tuples[:, j]]
        accepting &= acc if j < n_must else ~acc
    accepting[DEAD] = False
    table = _reference_trim(table, accepting)
    table, accepting = _reference_minimize(np.ascontiguousarray(table[:, byte_class]).astype(np.int32), accepting)
    return table, accepting


ATOMS = PIECES + ["[^\\s\\S]", "\\ud800", "[\\u0080-\\u07ff]", "[^\"\\\\]", "(?i:k)", "(?s:.)", "\\d",
                  "[\\U00010000-\\U0010ffff]", "é|[a-zé]", "(?:)", "\\\\u00[0-9A-Fa-f]{2}", "[^a-c\\x80-\\uffff]"]


def _grow(inner):
    return st.one_of(
        st.lists(inner, min_size=2, max_size=3).map("".join),
        st.lists(inner, min_size=2, max_size=3).map(lambda parts: "(?:" + "|".join(parts) + ")"),
        st.tuples(inner, st.sampled_from(["*", "+", "?", "{2}", "{0,2}", "{1,3}", "{3,}"])).map(
            lambda t: f"(?:{t[0]}){t[1]}"),
    )


gen_regex = st.recursive(st.sampled_from(ATOMS), _grow, max_leaves=7)


def _outcome(build):
    try:
        table, accepting = build()
    except CompileLimitError as e:
        return e.limit
    assert table.dtype in (np.uint8, np.int32)         # (`state_dtype`: compared as state numbers)
    return byte_dfa._table_digest(table, accepting), table.astype(np.int32).tobytes(), accepting.tobytes()


@settings(max_examples=300, deadline=None, derandomize=True)
@given(regex=gen_regex, max_states=st.sampled_from([4, 12, 40, 20_000]),
       max_nfa_states=st.sampled_from([30, 120, 400_000]))
def test_byte_class_construction_equals_the_reference(regex: str, max_states: int, max_nfa_states: int) -> None:
    """Subset construction over byte classes, trimming by one backward search, hashed Moore
    rounds: the very tables (digest) of the byte-at-a-time construction, and the same limits."""
    want = _outcome(lambda: _reference_regex(regex, max_states, max_nfa_states, literal_route=False))
    assert _outcome(lambda: _nfa_route(regex, max_states, max_nfa_states)) == want

    def fast():
        dfa = compile_regex.__wrapped__(regex, max_states=max_states, max_nfa_states=max_nfa_states)
        return dfa.transitions, dfa.accepting

    assert _outcome(fast) == _outcome(lambda: _reference_regex(regex, max_states, max_nfa_states))


@settings(max_examples=200, deadline=None, derandomize=True)
@given(regex=gen_regex, also=st.lists(gen_regex, max_size=2), excluding=st.lists(gen_regex, max_size=2),
       max_states=st.sampled_from([6, 30, 20_000]))
def test_byte_class_products_equal_the_reference(regex: str, also: list[str], excluding: list[str],
                                                 max_states: int) -> None:
    want = _outcome(lambda: _reference_terminal(regex, tuple(also), tuple(excluding), max_states))

    def fast():
        dfa = byte_dfa._compile_terminal.__wrapped__(regex, tuple(also), tuple(excluding), None, max_states)
        return dfa.transitions, dfa.accepting

    assert _outcome(fast) == want


@settings(max_examples=200, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2 ** 32 - 1), n=st.integers(2, 40), k=st.integers(1, 6),
       density=st.sampled_from([0.2, 0.5, 0.9]))
def test_trim_and_minimize_of_random_automata_equal_the_reference(seed: int, n: int, k: int,
                                                                  density: float) -> None:
    """Random (cyclic, partly dead, redundant) automata over k byte classes."""
    rng = np.random.default_rng(seed)
    table = rng.integers(1, n, size=(n, k)).astype(np.int32)
    table[rng.random((n, k)) > density] = DEAD
    table[DEAD] = DEAD
    accepting = rng.random(n) < 0.3
    accepting[DEAD] = False
    byte_class = np.sort(rng.integers(0, k, size=256))
    byte_class[rng.integers(0, 256, size=k)] = np.arange(k)   # every class used, in first-byte order
    byte_class = np.maximum.accumulate(np.minimum(byte_class, np.arange(256)))
    _, byte_class = np.unique(byte_class, return_inverse=True)
    table = table[:, :int(byte_class.max()) + 1]
    trimmed = byte_dfa._trim(table, accepting)
    assert np.array_equal(trimmed, _reference_trim(table, accepting))
    got = byte_dfa._minimize(trimmed, accepting, byte_class)
    want = _reference_minimize(np.ascontiguousarray(trimmed[:, byte_class]), accepting)
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


# ---------------------------------------------------------------------------- finite regexes as tries

from constrained.automata.regex_parser import finite_items  # noqa: E402

_KEY_CHARS = st.sampled_from(list('ab/"\\- _{}[]()|*.+?^$\x00\x1f\x7fé\u2028😀'))


@settings(max_examples=150, deadline=None, derandomize=True)
@given(text=st.text(_KEY_CHARS, max_size=10))
def test_key_literal_chains_equal_the_reference(text: str) -> None:
    """A JSON key in every escape spelling is built as a chain of tries (`_chain_dfa`, no
    NFA), and its regex a character at a time (`json_literal_regex`): as many states as
    the reference construction of the whole literal's regex (minimal), and minimised
    and numbered canonically its very tables (the same language)."""
    from constrained.json_schema.compile.literals import json_literal_regex, literal_regex
    from constrained.json_schema.json_string import json_string_regex

    regex = json_literal_regex(text)
    assert regex == json_string_regex(literal_regex(text))
    assert byte_dfa._chain_dfa(regex, 20_000) is not None
    got = compile_regex.__wrapped__(regex)
    want = _reference_regex(regex)
    assert got.num_states == want[0].shape[0]
    canonical = byte_dfa._minimize(got.transitions, got.accepting)
    assert canonical[0].tobytes() == want[0].tobytes() and canonical[1].tobytes() == want[1].tobytes()



@settings(max_examples=60, deadline=None, derandomize=True)
@given(texts=st.lists(st.text(_KEY_CHARS, max_size=12), max_size=8),
       others=st.lists(st.sampled_from(["[0-9]+", '"x"', "(?:ab|c)", "", "(?:)", "a*b", "(*json-string)"]),
                       max_size=3),
       long_key=st.booleans(), max_states=st.sampled_from([40, 20_000]))
def test_chains_built_together_equal_compile_regex(texts, others, long_key, max_states) -> None:
    """`chain_dfas` (a fresh schema's key literals at compile) gives each regex that
    `compile_regex` builds as a chain the very automaton it builds (table values and
    width, accepting states, digest), None for every other regex (other constructions,
    the state limit, the empty string), and leaves nothing writable."""
    from constrained.json_schema.compile.literals import json_literal_regex

    regexes = [json_literal_regex(t) for t in texts] + others
    if long_key:
        regexes.append(json_literal_regex("k" * 60))     # past 256 states: an int32 table of its own
    got = byte_dfa.chain_dfas(regexes, max_states)
    assert len(got) == len(regexes)
    for regex, dfa in zip(regexes, got):
        direct = byte_dfa._chain_dfa(regex, max_states) if 40 * len(regex) <= byte_dfa.DEFAULT_MAX_NFA_STATES \
            and not regex.startswith("(*") and byte_dfa._literal_words(regex) is None else None
        if direct is None or direct[1][byte_dfa.START]:
            assert dfa is None, regex
            continue
        want = compile_regex.__wrapped__(regex, max_states=max_states)
        assert dfa is not None and dfa.digest == want.digest and dfa.regex == regex
        assert dfa.transitions.dtype == want.transitions.dtype
        assert np.array_equal(dfa.transitions, want.transitions) and np.array_equal(dfa.accepting, want.accepting)
        assert not dfa.transitions.flags.writeable and not dfa.accepting.flags.writeable
        assert dfa.transitions.flags.c_contiguous


_REGEX_CHARS = st.sampled_from(list('ab"\\u0[]()|?*+{}.^$-') + ["(?:", "\\\\u0061", "\\u0061", "\\x41", "\n"])


@settings(max_examples=400, deadline=None, derandomize=True)
@given(parts=st.lists(_REGEX_CHARS, max_size=14), text=st.text(_KEY_CHARS, max_size=6))
def test_split_items_fast_path_cuts_as_the_loop(parts, text) -> None:
    """`split_items` cuts a regex with one regular-expression pass where it covers the
    whole regex; the items (or None) are those of the character loop it replaces, on
    random regex text and on key literals."""
    from constrained.automata.regex_parser import _split_items_loop, split_items
    from constrained.json_schema.compile.literals import json_literal_regex

    for regex in ("".join(parts), json_literal_regex(text)):
        assert split_items(regex) == _split_items_loop(regex), regex


def _prefix_free(words: set[str]) -> bool:
    return all(not (a != b and b.startswith(a)) for a in words for b in words)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(parts=st.lists(st.sets(st.text(st.sampled_from("ab"), min_size=1, max_size=3), min_size=1, max_size=4)
                      .filter(_prefix_free), min_size=1, max_size=5))
def test_chains_of_minimal_items_are_minimal(parts) -> None:
    """`_chain_dfa` minimises each item on its own and chains the results without merging
    across items: on a two-letter alphabet, where items share suffixes and repeat (the
    likeliest place for states of different items to have one right language), the
    tables equal the reference construction's."""
    regex = "".join("(?:" + "|".join(sorted(words)) + ")" for words in parts)
    chain = byte_dfa._chain_dfa(regex, 20_000)
    assert chain is not None
    want = _reference_regex(regex, literal_route=False)
    assert chain[0].shape == want[0].shape             # as many states as the minimal automaton
    canonical = byte_dfa._minimize(*chain)
    assert canonical[0].tobytes() == want[0].tobytes() and canonical[1].tobytes() == want[1].tobytes()


@pytest.mark.parametrize("regex, items", [
    (r'"(?:a|\\u0061)[Bb]"', [{'"'}, {"a", "\\u0061"}, {"B", "b"}, {'"'}]),
    ("ab|c", [{"ab", "c"}]),
    (r"\x41\u00e9\U0001f600\-", [{"A"}, {"é"}, {"😀"}, {"-"}]),
    ("", []),
])
def test_finite_items_reads_the_quantifier_free_subset(regex: str, items) -> None:
    assert finite_items(regex) == items


@pytest.mark.parametrize("regex", ["a+", "a?", "a{2}", r"\d", r"\n", "[^a]", "[a-]", "(a)", "(?i)a", "a|(?=b)",
                                   ".", "^a", "a$", "[a&&b]", "\\é", "\ud800"])
def test_finite_items_leaves_everything_else_to_the_full_parser(regex: str) -> None:
    assert finite_items(regex) is None


@settings(max_examples=200, deadline=None, derandomize=True)
@given(parts=st.lists(st.lists(st.text(st.sampled_from("ab\u00e9\U0001f600"), min_size=0, max_size=3),
                               min_size=1, max_size=3), max_size=4))
def test_finite_regexes_equal_the_reference(parts) -> None:
    """Any sequence of alternations of literals (prefix-free or not: the trie route takes
    the prefix-free ones, the NFA route the rest) gives the reference's minimal automaton:
    as many states, and the reference tables once numbered canonically (the trie route
    numbers item after item)."""
    regex = "".join("(?:" + "|".join(re.escape(w) for w in alts) + ")" for alts in parts)
    got = compile_regex.__wrapped__(regex)
    want = _reference_regex(regex)
    assert got.num_states == want[0].shape[0]
    canonical = byte_dfa._minimize(got.transitions, got.accepting)
    assert canonical[0].tobytes() == want[0].tobytes() and canonical[1].tobytes() == want[1].tobytes()
