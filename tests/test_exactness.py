"""Exactness of token masks, checked against references.

(a) Small vocabularies (~2,000 tokens sampled from Llama 3 plus an EOS and a
    non-EOS special): at every state of random masked walks the engine's full
    mask must equal `reference.Reference.mask` (an independent textbook Earley
    recognizer over bytes), and ``is_accepting`` / ``next_bytes`` must agree too.
(b) Full vocabularies (Llama 3, Qwen 3, SmolLM2): at random states the fast mask
    must equal the byte-level definition (each token's bytes fed through the
    engine's own byte recognizer), and the recognizer's ``next_bytes`` must equal
    the independent reference's.

The full sweep (>= 20,000 distinct states) runs only with ``-m slow``; split it
over processes with ``-k``, e.g. ``-m slow -k llama3`` and ``-m slow -k "qwen3 or smollm2"``.
"""

from __future__ import annotations

import functools
import math
import os
import random
import time
from pathlib import Path

import numpy as np
import pytest

from constrained import TokenVocabulary, compile_grammar, unpack_mask
from constrained.grammar.derivations import GrammarSampler, RandomChooser
from constrained.testing.reference import Reference
from constrained.testing.tokens import is_utf8, sub_vocabulary_bytes

from cases import Case, inline_cases, shipped_cases

ROOT = Path(__file__).resolve().parents[1]
INLINE = inline_cases()
SHIPPED = shipped_cases(ROOT)
CASES = INLINE + SHIPPED
CASE_IDS = [c.name for c in CASES]
VOCABS = ["llama3", "qwen3", "smollm2"]

SMALL_STATES = int(os.environ.get("EXACTNESS_SMALL_STATES", "30"))   # per grammar, default run
FULL_STATES = int(os.environ.get("EXACTNESS_FULL_STATES", "6"))      # per (grammar, vocab), default run
SWEEP_TOTAL = int(os.environ.get("EXACTNESS_SWEEP_TOTAL", "20000"))  # distinct states over shipped grammars
SWEEP_INLINE = int(os.environ.get("EXACTNESS_SWEEP_INLINE", "100"))  # per (inline grammar, vocab)


# ---------------------------------------------------------------------- helpers
def _full_vocab(request, name: str) -> TokenVocabulary:
    return request.getfixturevalue(f"{name}_vocab")


def _base_token_bytes(request) -> tuple[bytes, ...]:
    """Token bytes of a real vocabulary to sample from (Llama 3, else a synthetic one)."""
    try:
        return _full_vocab(request, "llama3").token_bytes
    except pytest.skip.Exception:
        return _synthetic_token_bytes()


@functools.cache
def _synthetic_token_bytes() -> tuple[bytes, ...]:
    rng = random.Random(7)
    out = {bytes([b]) for b in range(256)}
    alphabet = [b"a", b"b", b"x", b"e", b" ", b'"', b"{", b"}", b"[", b"]", b",", b":", b"1", b"0",
                b"-", b".", b"(", b")", "é".encode(), "α".encode(), "ω".encode(), b"\xce", b"\xb1", b"\n"]
    while len(out) < 4000:
        out.add(b"".join(rng.choice(alphabet) for _ in range(rng.randint(2, 6))))
    return tuple(sorted(out))


_SMALL_VOCABS: dict[str, TokenVocabulary] = {}


def small_vocab(case: Case, base: tuple[bytes, ...]) -> TokenVocabulary:
    """A ~2,000-token sub-vocabulary for ``case``: EOS at id 0, a non-EOS special
    (no bytes) in the middle, all single bytes, tokens seen inside grammar strings,
    partial UTF-8 tokens and punctuation tokens."""
    hit = _SMALL_VOCABS.get(case.name)
    if hit is None:
        rng = random.Random(f"subvocab:{case.name}")
        gen = GrammarSampler(case.grammar)
        samples = [gen.generate(RandomChooser(rng)) for _ in range(60)]
        tb = sub_vocabulary_bytes(base, samples, rng, size=2000)
        tb.insert(len(tb) // 2, b"")  # a special token that is not EOS
        tb.insert(0, b"")             # EOS
        hit = _SMALL_VOCABS[case.name] = TokenVocabulary.from_token_bytes(tb, eos_ids=[0])
        assert any(len(b) > 1 and not is_utf8(b) for b in tb), "no partial UTF-8 tokens"
    return hit


_COMPILED: dict[tuple[str, str], object] = {}


def compiled_for(case: Case, vocab_key: str, vocab: TokenVocabulary):
    key = (case.name, vocab_key)
    hit = _COMPILED.get(key)
    if hit is None:
        hit = _COMPILED[key] = compile_grammar(case.grammar, vocab, cache_dir=None)
    return hit


def _mask_ids(mask_words: np.ndarray, size: int) -> set[int]:
    return set(np.flatnonzero(unpack_mask(mask_words, size)).tolist())


def describe_difference(case: Case, prefix: bytes, engine: set[int], ref: set[int], token_bytes) -> str:
    extra = sorted(engine - ref)
    missing = sorted(ref - engine)
    show = lambda ids: [(t, token_bytes[t]) for t in ids[:12]]  # noqa: E731
    return (f"grammar {case.name}: after prefix {prefix!r}:\n"
            f"  engine allows, reference refuses ({len(extra)}): {show(extra)}\n"
            f"  reference allows, engine refuses ({len(missing)}): {show(missing)}")


def _nb_set(arr: np.ndarray) -> set[int]:
    return set(np.flatnonzero(arr).tolist())


class ByteLevelMask:
    """The byte-level definition of the mask, for a full vocabulary.

    Token ``t`` is allowed at state ``sid`` iff feeding its bytes with the engine's
    own ``byte_step`` never reaches the dead state; EOS iff ``accepting(sid)``.
    Computed as a trie walk done level by level: the vocabulary's trie is stored as
    arrays (per depth: parent node, byte, tokens ending there), and at each depth
    the distinct (state, byte) pairs are stepped once.
    """

    def __init__(self, vocab: TokenVocabulary) -> None:
        tb = vocab.token_bytes
        self.size = len(tb)
        self.eos = np.asarray(vocab.eos_ids, dtype=np.int64)
        ids = [i for i, b in enumerate(tb) if b]
        depth = max(len(tb[i]) for i in ids)
        self.levels = []
        prev: dict[bytes, int] = {b"": 0}
        for k in range(1, depth + 1):
            cur: dict[bytes, int] = {}
            parent: list[int] = []
            byte: list[int] = []
            end_node: list[int] = []
            end_tok: list[int] = []
            for i in ids:
                b = tb[i]
                if len(b) < k:
                    continue
                p = b[:k]
                node = cur.get(p)
                if node is None:
                    node = cur[p] = len(parent)
                    parent.append(prev[b[:k - 1]])
                    byte.append(b[k - 1])
                if len(b) == k:
                    end_node.append(node)
                    end_tok.append(i)
            self.levels.append(tuple(np.asarray(x, dtype=np.int64) for x in (parent, byte, end_node, end_tok)))
            prev = cur

    def allowed(self, rec, sid: int) -> np.ndarray:
        out = np.zeros(self.size, bool)
        if rec.accepting(sid):
            out[self.eos] = True
        states = np.array([sid], dtype=np.int64)
        step = rec.byte_step
        for parent, byte, end_node, end_tok in self.levels:
            ps = states[parent]
            alive = np.flatnonzero(ps)
            if alive.size == 0:
                break
            keys = (ps[alive] << 8) | byte[alive]
            uniq, inv = np.unique(keys, return_inverse=True)
            nxt = np.fromiter((step(u >> 8, u & 255) for u in uniq.tolist()), np.int64, uniq.size)
            states = np.zeros(parent.size, np.int64)
            states[alive] = nxt[inv.reshape(-1)]
            if end_node.size:
                ok = states[end_node] != 0
                out[end_tok[ok]] = True
        return out


_BYTE_LEVEL: dict[str, ByteLevelMask] = {}


def byte_level_mask(vocab_key: str, vocab: TokenVocabulary) -> ByteLevelMask:
    hit = _BYTE_LEVEL.get(vocab_key)
    if hit is None:
        hit = _BYTE_LEVEL[vocab_key] = ByteLevelMask(vocab)
    return hit


def _choose(rng: random.Random, allowed: np.ndarray, eos: set[int], eos_p: float) -> int | None:
    """A uniformly random allowed non-EOS token; EOS (None) with probability ``eos_p``
    when allowed, or when nothing else is."""
    eos_ok = any(allowed[t] for t in eos)
    ids = np.flatnonzero(allowed)
    non_eos = [int(t) for t in ids if int(t) not in eos] if len(ids) < 64 else None
    if eos_ok and rng.random() < eos_p:
        return None
    if non_eos is not None:
        return rng.choice(non_eos) if non_eos else None
    while True:  # large masks: rejection-sample an id
        t = int(ids[rng.randrange(len(ids))])
        if t not in eos:
            return t


def _prefer_unseen(rng: random.Random, t: int, allowed: np.ndarray, eos: set[int], rec, sid: int,
                   seen: set[int], tries: int = 24) -> int:
    """``t``, unless it leads to a checked state and one of ``tries`` random allowed
    tokens does not."""
    if rec.token_step(sid, t) not in seen:
        return t
    ids = np.flatnonzero(allowed)
    for _ in range(tries):
        u = int(ids[rng.randrange(ids.size)])
        if u not in eos and rec.token_step(sid, u) not in seen:
            return u
    return t


# ---------------------------------------------------------------------- sanity of the references
def test_reference_rejects_and_accepts_known_strings():
    from constrained import Grammar

    ref = Reference(Grammar.from_file(ROOT / "grammars" / "json.lark")) if (ROOT / "grammars" / "json.lark").is_file() \
        else INLINE[0].reference
    assert ref.accepts(b'{"a": [1, 2.5e3, true, null]}')
    assert ref.accepts(b' [ ] ')
    assert not ref.accepts(b'{"a" 1}')
    assert not ref.accepts(b'[1, 2')
    assert ref.viable(b'[1, 2')
    assert not ref.viable(b'[1,, 2')
    assert not ref.viable(b'"\xc3"')  # a character cut short
    assert ref.next_bytes(b'{"a": tr') == {ord("u")}
    split = Reference(Grammar.from_lark('start: A B\nA: /a+/\nB: /ab/\n'))
    assert split.accepts(b"aab") and split.accepts(b"aaaab") and not split.accepts(b"ab")
    nul = Reference(Grammar.from_lark('start: x x "c"\nx: "a" | '))
    assert nul.accepts(b"c") and nul.accepts(b"ac") and nul.accepts(b"aac") and not nul.accepts(b"aaac")


def test_reference_mask_detects_a_wrong_mask():
    """The comparison must be able to fail: the reference mask differs from a
    deliberately wrong one."""
    from constrained import Grammar

    g = Grammar.from_regex("(ab)+")
    tb = [b"", b"a", b"b", b"ab", b"ba", b"abab", b"x"]
    ref = Reference(g)
    assert ref.mask(b"", tb, [0]) == {1, 3, 5}
    assert ref.mask(b"a", tb, [0]) == {2, 4}
    assert ref.mask(b"ab", tb, [0]) == {0, 1, 3, 5}
    assert ref.mask(b"ab", tb, [0]) != {1, 3, 5}


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_reference_agrees_with_independent_oracle(case: Case):
    """The reference itself, against lark / re on generated strings and their mutants."""
    rng = random.Random(f"oracle:{case.name}")
    gen = GrammarSampler(case.grammar)
    ref = case.reference
    checked = 0
    n_strings = 30 if case in INLINE else 10  # lark's dynamic_complete parser is slow on big grammars
    for _ in range(n_strings):
        s = gen.generate(RandomChooser(rng), max_depth=5)
        variants = [s]
        for _ in range(2):
            if s:
                i = rng.randrange(len(s))
                variants.append(s[:i] + s[i + 1:])
                variants.append(s[:i] + s[i:i + 1] + s[i:])
                variants.append(s[:i])
            variants.append(s[:rng.randrange(len(s) + 1)] + bytes([rng.choice(b'x "(){}[],:1.-')])
                            + s[rng.randrange(len(s) + 1):])
        for v in variants:
            want = case.oracle(v)
            if want is None:
                continue
            assert ref.accepts(v) == want, f"{case.name}: reference says {not want} for {v!r}"
            checked += 1
        assert ref.accepts(s), f"{case.name}: generated string {s!r} not accepted by the reference"
    assert case.kind == "gbnf" or checked >= 5 * n_strings


# ---------------------------------------------------------------------- (a) small vocabularies
@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_small_vocab_exactness(case: Case, request):
    vocab = small_vocab(case, _base_token_bytes(request))
    cg = compiled_for(case, "small", vocab)
    rec = cg.recognizer
    ref = case.reference
    tb, eos, size = vocab.token_bytes, set(vocab.eos_ids), len(vocab)
    rng = random.Random(f"small:{case.name}")
    states = 0
    walks = 0
    while states < SMALL_STATES:
        walks += 1
        m = cg.matcher()
        chart = ref.initial
        prefix = b""
        for _ in range(40):
            engine = _mask_ids(m.mask(), size)
            want = ref.mask_from(chart, tb, vocab.eos_ids)
            assert engine == want, describe_difference(case, prefix, engine, want, tb)
            assert m.is_accepting() == chart.accepting, f"{case.name}: accepting differs after {prefix!r}"
            nb = _nb_set(rec.next_bytes(m.state_id))
            assert nb == chart.next_bytes(), (f"{case.name}: next_bytes after {prefix!r}: engine-only "
                                              f"{sorted(nb - chart.next_bytes())}, reference-only "
                                              f"{sorted(chart.next_bytes() - nb)}")
            states += 1
            allowed = np.zeros(size, bool)
            allowed[list(engine)] = True
            t = _choose(rng, allowed, eos, eos_p=0.15)
            if t is None:
                break
            assert m.advance(t)
            prefix += tb[t]
            chart = chart.feed(tb[t])
            assert chart is not None
            if states >= SMALL_STATES or len(prefix) >= case.max_bytes:
                break
    assert states >= SMALL_STATES


# ---------------------------------------------------------------------- polynomial-time regressions
def test_ambiguous_splits_stay_polynomial():
    """Every split of x^n into "x"/"xx" is a separate history (Fib(n) of them);
    merged configurations keep one parser node per position and O(1) configurations."""
    from constrained import Grammar

    v = TokenVocabulary.from_token_bytes([b"", b"x", b"xx"], eos_ids=[0])
    cg = compile_grammar(Grammar.from_lark('start: a+\na: "x" | "xx"\n'), v, cache_dir=None)
    m = cg.matcher()
    n = 300
    for i in range(n):
        assert m.advance(1 + i % 2)
    assert m.is_accepting()
    assert cg.stats()["parser_nodes"] <= 4 * (n * 3 // 2), cg.stats()   # unmerged: ~Fib(450)
    assert len(cg.recognizer.configs(m.state_id)) <= 8, "configurations per state"
    assert cg.accepts_bytes(b"x" * 31) and not cg.accepts_bytes(b"x" * 31 + b"y")


def test_ignored_whitespace_runs_stay_polynomial():
    """A token of k ignorable spaces then a refused byte splits at every space; without
    de-duplicating (token, offset) candidates the first mask costs 2^k scans."""
    from constrained import Grammar

    grammar = Grammar.from_lark('start: "a"\nWS: /[ ]+/\n%ignore WS\n')
    v = TokenVocabulary.from_token_bytes([b"", b"a", b" ", b" " * 48 + b"b", b" " * 48 + b"a"],
                                         eos_ids=[0])
    cg = compile_grammar(grammar, v, cache_dir=None)
    t0 = time.perf_counter()
    allowed = unpack_mask(cg.matcher().mask(), len(v))
    elapsed = time.perf_counter() - t0
    assert allowed.tolist() == [False, True, True, False, True]
    assert elapsed < 20, f"first mask took {elapsed:.1f} s for a 49-byte token"  # 2^48 scans if exponential


DEEP_TEXTS = {
    "arithmetic.lark": [
        "(" * 12 + "1+(2*(-(3-4)))" + ")" * 12,
        "((((((((-(-((((1))))))/2)*3)-4)+5)*6)/7)-8)",
        "-(\t(( -(( 7 ))\t)) )*((((((((9))))))))",
    ],
    "json.lark": [
        "[[[[[[[[[[[[1]]]]]]]]]]]]",
        '{"a":[{"b":[[{"c":[1,[2,[3,{"d":[[[[null]]]]}]]]}]]}],"e":[[[]]]}',
        '[ [ {"k" : [ [ [ "v" , 2 ] ] ] } ] , [[[true]]] ]',
    ],
}


@pytest.mark.parametrize("min_depth", [None, 0], ids=["default-depth", "every-depth"])
@pytest.mark.parametrize("grammar_name", sorted(DEEP_TEXTS))
def test_deep_nesting_masks_are_exact(grammar_name, min_depth, llama3_vocab, monkeypatch):
    """Masks of new parse stacks are computed on abstract nodes (the top of the stack)
    and shared; along deeply nested texts (tokens such as "))))" pop several levels)
    every mask must still equal the byte-level definition over the full vocabulary
    (abstraction from the default depth on, and at every depth)."""
    from constrained import Grammar
    import constrained.engine.recognizer as recognizer

    if min_depth is not None:
        monkeypatch.setattr(recognizer, "MIN_ABSTRACT_DEPTH", min_depth)

    cg = compile_grammar(Grammar.from_file(ROOT / "grammars" / grammar_name), llama3_vocab, cache_dir=None)
    blm = byte_level_mask("llama3", llama3_vocab)
    rec = cg.recognizer
    for text in DEEP_TEXTS[grammar_name]:
        m = cg.matcher()
        prefix = b""
        for t in llama3_vocab.encode(text):
            want = blm.allowed(rec, m.state_id)
            got = unpack_mask(m.mask(), len(llama3_vocab))
            assert (got == want).all(), describe_difference(
                CASES[CASE_IDS.index(grammar_name)], prefix, set(np.flatnonzero(got).tolist()),
                set(np.flatnonzero(want).tolist()), llama3_vocab.token_bytes)
            assert m.advance(t), text
            prefix += llama3_vocab.token_bytes[t]
        assert m.is_accepting()
    if min_depth == 0:
        assert any(rec.parser.node(n).abstract for n in range(rec.parser.num_nodes)), "abstraction never used"


# ---------------------------------------------------------------------- (b) full vocabularies
def full_vocab_walks(case: Case, vocab_key: str, vocab: TokenVocabulary, target: int, rng: random.Random,
                     seen: set[int], max_tokens: int = 60, max_seconds: float | None = None,
                     stop_on_difference: bool = True, novelty: bool = True) -> tuple[int, list[str]]:
    """Random masked walks; each state id not in ``seen`` is checked once.  Returns
    (states checked, difference reports).  With ``novelty`` the walk prefers, among
    a few random allowed tokens, one leading to a state not checked yet (plain
    uniform walks keep revisiting the same few states of LR-like grammars), and a
    walk may restart from a state an earlier walk found (so deep states, e.g. nested
    JSON, are reached too)."""
    cg = compiled_for(case, vocab_key, vocab)
    rec = cg.recognizer
    blm = byte_level_mask(vocab_key, vocab)
    ref = case.reference
    eos = set(vocab.eos_ids)
    size = len(vocab)
    checked = 0
    diffs: list[str] = []
    steps = 0
    pool: list[tuple] = []  # (matcher, chart, prefix) at states found earlier
    t0 = time.monotonic()
    while checked < target and steps < 40 * target + 200:
        if max_seconds is not None and time.monotonic() - t0 > max_seconds:
            break
        if novelty and pool and rng.random() < 0.7:
            m, chart, prefix = rng.choice(pool)
            m = m.fork()
        else:
            m, chart, prefix = cg.matcher(), ref.initial, b""
        for _ in range(rng.randint(1, max_tokens)):
            steps += 1
            sid = m.state_id
            fast = unpack_mask(m.mask(), size)
            if sid not in seen:
                seen.add(sid)
                checked += 1
                if novelty and len(prefix) < 2000 and rng.random() < 0.25:
                    entry = (m.fork(), chart, prefix)
                    if len(pool) < 256:
                        pool.append(entry)
                    else:
                        pool[rng.randrange(len(pool))] = entry
                slow = blm.allowed(rec, sid)
                problems = []
                if not np.array_equal(fast, slow):
                    problems.append(describe_difference(case, prefix, _nb_set(fast), _nb_set(slow), vocab.token_bytes))
                nb = _nb_set(rec.next_bytes(sid))
                if nb != chart.next_bytes():
                    problems.append(f"grammar {case.name}: next_bytes after {prefix!r}: engine-only "
                                    f"{sorted(nb - chart.next_bytes())}, reference-only "
                                    f"{sorted(chart.next_bytes() - nb)}")
                stepped = {b for b in range(256) if rec.byte_step(sid, b) != 0}
                if stepped != nb:
                    problems.append(f"grammar {case.name}: byte_step/next_bytes disagree after {prefix!r}: "
                                    f"{sorted(stepped ^ nb)}")
                if rec.accepting(sid) != chart.accepting:
                    problems.append(f"grammar {case.name}: accepting differs after {prefix!r}")
                if problems:
                    diffs.extend(f"[{vocab_key}] {p}" for p in problems)
                    if stop_on_difference:
                        return checked, diffs
                if checked >= target:
                    break
            t = _choose(rng, fast, eos, eos_p=0.05)
            if t is None:
                break
            if novelty:
                t = _prefer_unseen(rng, t, fast, eos, rec, sid, seen)
            assert m.advance(t)
            piece = vocab.token_bytes[t]
            prefix += piece
            chart = chart.feed(piece)
            assert chart is not None, f"{case.name}: reference refuses {prefix!r} reached by the engine"
            if len(prefix) >= case.max_bytes:
                break
    return checked, diffs


FULL_PARAMS = [pytest.param(v, c, id=f"{v}-{c.name}") for v in VOCABS for c in CASES]


@pytest.mark.parametrize("vocab_key,case", [p for p in FULL_PARAMS if p.values[1] in SHIPPED
                                            or p.values[1].name == "json_inline"])
def test_full_vocab_exactness(vocab_key: str, case: Case, request):
    vocab = _full_vocab(request, vocab_key)
    rng = random.Random(f"full:{vocab_key}:{case.name}")
    checked, diffs = full_vocab_walks(case, vocab_key, vocab, FULL_STATES, rng, set(), max_tokens=25)
    assert not diffs, "\n".join(diffs)
    assert checked >= min(FULL_STATES, 2)


# ---------------------------------------------------------------------- the full sweep (-m slow)
_SWEEP = {"states": 0, "diffs": 0, "tests": 0, "t0": None}


@pytest.fixture(scope="module")
def sweep_summary(request):
    yield _SWEEP
    if _SWEEP["tests"]:
        line = (f"EXACTNESS SWEEP: {_SWEEP['states']} states, {_SWEEP['diffs']} differences "
                f"({_SWEEP['tests']} grammar x vocabulary runs, {time.monotonic() - _SWEEP['t0']:.0f} s)")
        reporter = request.config.pluginmanager.getplugin("terminalreporter")
        if reporter is not None:
            reporter.write_line("")
            reporter.write_line(line)
        else:
            print(line)


def _slow_selected(config) -> bool:
    expr = config.getoption("markexpr") or ""
    return "slow" in expr and "not slow" not in expr


@pytest.mark.slow
@pytest.mark.parametrize("vocab_key,case", FULL_PARAMS)
def test_exactness_sweep(vocab_key: str, case: Case, request, sweep_summary):
    if not _slow_selected(request.config):
        pytest.skip("the full exactness sweep runs only with -m slow")
    vocab = _full_vocab(request, vocab_key)
    if sweep_summary["t0"] is None:
        sweep_summary["t0"] = time.monotonic()
    if case in SHIPPED:
        target = math.ceil(SWEEP_TOTAL * 1.05 / (len(VOCABS) * len(SHIPPED)))
        max_tokens = 120
    else:
        target = SWEEP_INLINE
        max_tokens = 60
    rng = random.Random(f"sweep:{vocab_key}:{case.name}")
    t0 = time.monotonic()
    checked, diffs = full_vocab_walks(case, vocab_key, vocab, target, rng, set(), max_tokens=max_tokens,
                                      stop_on_difference=False)
    _COMPILED.pop((case.name, vocab_key), None)  # free the engine's memoised masks
    sweep_summary["states"] += checked
    sweep_summary["diffs"] += len(diffs)
    sweep_summary["tests"] += 1
    print(f"sweep {vocab_key} {case.name}: {checked} distinct states, {len(diffs)} differences, "
          f"{time.monotonic() - t0:.1f} s")
    assert not diffs, "\n".join(diffs[:10])
    if case in SHIPPED:
        assert checked >= target * 0.95, f"only {checked} distinct states reached (target {target})"


def test_json_schema_grammars_compute_masks_on_real_nodes_only(llama3_vocab):
    """A grammar compiled from a JSON Schema never tries abstract nodes (its stack tops
    seldom recur: see `recognizer.MIN_ABSTRACT_DEPTH`): a deeply nested instance of a
    recursive schema is read with exact masks and without one abstract node, where the
    generic JSON grammar, along the same text, makes them."""
    import json

    from constrained import Grammar

    schema = {"$defs": {"t": {"type": "object", "properties": {"k": {"$ref": "#/$defs/t"}, "v": {"type": "integer"}}}},
              "$ref": "#/$defs/t"}
    text = json.dumps(json.loads("".join('{"k": ' for _ in range(16)) + '{"v": 1}' + "}" * 16))
    blm = byte_level_mask("llama3", llama3_vocab)
    made_abstract = {}
    for name, grammar in (("schema", Grammar.from_json_schema(schema)),
                          ("json.lark", Grammar.from_file(ROOT / "grammars" / "json.lark"))):
        cg = compile_grammar(grammar, llama3_vocab, cache_dir=None)
        rec, m = cg.recognizer, cg.matcher()
        assert (rec.min_abstract_depth is None) == (name == "schema")
        for t in llama3_vocab.encode(text):
            assert (unpack_mask(m.mask(), len(llama3_vocab)) == blm.allowed(rec, m.state_id)).all(), name
            assert m.advance(t)
        assert m.is_accepting()
        p = rec.parser
        made_abstract[name] = any(p.node(i).abstract for i in range(p.num_nodes))
    assert made_abstract == {"schema": False, "json.lark": True}
