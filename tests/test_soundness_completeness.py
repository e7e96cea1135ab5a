"""Soundness, completeness and state algebra of `Matcher`, with the Llama 3 vocabulary.

(a) soundness: masked random walks (a toy LM biased toward EOS and closing tokens)
    that end with EOS produce text lark's Earley parser (``dynamic_complete``)
    accepts (``re.fullmatch`` for regexes, the reference recognizer for GBNF);
(b) completeness: strings generated from each grammar (and accepted by the
    oracle) are accepted token by token, tokenized canonically and by random
    non-canonical splits;
(c) invalid strings: mutants the oracle rejects are refused somewhere;
(d) state algebra: rollback / re-advance, fork independence, refused advances;
(e) forced tokens: the jump-forward contract of `constrained.engine.forced`.
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from constrained import compile_grammar, unpack_mask
from constrained.engine.forced import LOOKBACK_TOKENS
from constrained.errors import MatcherTerminatedError
from constrained.grammar.derivations import GrammarSampler, RandomChooser
from constrained.testing.tokens import ids_by_bytes, is_utf8, random_split

from cases import Case, inline_cases, shipped_cases

ROOT = Path(__file__).resolve().parents[1]
INLINE = inline_cases()
SHIPPED = shipped_cases(ROOT)
FORCED_LARK = {
    # fixed JSON-like skeleton: long forced runs between free fields
    "forced_record": r'''
start: "{\"name\": \"" NAME "\", \"age\": " AGE ", \"tags\": [" TAGS "]}"
NAME: /[A-Za-z]+/
AGE: /[0-9]{1,3}/
TAGS: /"[a-z]+"(, "[a-z]+")*/
''',
    # forced non-ASCII text (jump-forward must cut at character boundaries)
    "forced_unicode": 'start: "→ résumé: «" WORD "» — ok" ("!" | "?")\nWORD: /[a-zé]+/\n',
}
FORCED = [Case(n, "lark", t) for n, t in FORCED_LARK.items()]
CASES = INLINE + SHIPPED + FORCED
CASE_IDS = [c.name for c in CASES]

SETTINGS = dict(derandomize=True, deadline=None, database=None, phases=(Phase.explicit, Phase.generate),
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])
CLOSERS = frozenset(b")]}\"'>!?\n" + "»".encode())


# ---------------------------------------------------------------------- fixtures and helpers
@pytest.fixture(scope="module")
def vocab(llama3_vocab):
    return llama3_vocab


_COMPILED: dict[str, object] = {}


def compiled(case: Case, vocab):
    hit = _COMPILED.get(case.name)
    if hit is None:
        hit = _COMPILED[case.name] = compile_grammar(case.grammar, vocab, cache_dir=None)
    return hit


_IDS_BY_BYTES: dict[str, dict[bytes, list[int]]] = {}


def by_bytes(vocab) -> dict[bytes, list[int]]:
    key = vocab.content_hash()
    if key not in _IDS_BY_BYTES:
        _IDS_BY_BYTES[key] = ids_by_bytes(vocab.token_bytes)
    return _IDS_BY_BYTES[key]


_CLOSING_IDS: dict[str, np.ndarray] = {}


def closing_ids(vocab) -> np.ndarray:
    """Ids of tokens made only of closing punctuation and spaces (at least one closer)."""
    key = vocab.content_hash()
    if key not in _CLOSING_IDS:
        ids = [i for i, b in enumerate(vocab.token_bytes)
               if b and any(c in CLOSERS for c in b) and all(c in CLOSERS or c == 0x20 for c in b)]
        _CLOSING_IDS[key] = np.asarray(ids, dtype=np.int64)
    return _CLOSING_IDS[key]


def in_language(case: Case, data: bytes) -> bool:
    """The independent oracle (lark / re); the reference recognizer for GBNF."""
    want = case.oracle(data)
    return case.reference.accepts(data) if want is None else want


def allowed_ids(m) -> np.ndarray:
    return np.flatnonzero(unpack_mask(m.mask(), m.compiled.vocab_size))


def toy_lm_walk(m, vocab, rng: random.Random, max_steps: int = 120, max_bytes: int = 10**9) -> bool:
    """Advance ``m`` with a toy LM until it takes EOS (True) or gives up (False).

    Uniform over allowed tokens, but EOS is taken with a probability that grows
    with the length, and so is picking among allowed closing-punctuation tokens."""
    eos = list(vocab.eos_ids)
    closers = closing_ids(vocab)
    for step in range(max_steps):
        ids = allowed_ids(m)
        assert ids.size, f"dead state after {bytes_of(m, vocab)!r}: the mask is empty"
        eos_ok = [t for t in eos if m.allows(t)]
        too_long = len(bytes_of(m, vocab)) >= max_bytes
        if too_long and not eos_ok:
            return False
        if eos_ok and (too_long or rng.random() < min(0.95, 0.1 + step / 25)):
            assert m.advance(rng.choice(eos_ok))
            return True
        non_eos = np.setdiff1d(ids, eos)
        if non_eos.size == 0:
            continue
        close = np.intersect1d(non_eos, closers)
        if close.size and rng.random() < min(0.9, step / 30):
            t = int(close[rng.randrange(close.size)])
        else:
            t = int(non_eos[rng.randrange(non_eos.size)])
        assert m.advance(t), f"advance refused allowed token {t} ({vocab.token_bytes[t]!r})"
    return False


def bytes_of(m, vocab) -> bytes:
    return b"".join(vocab.token_bytes[t] for t in m.tokens)


def feed_tokens(m, tokens, vocab) -> tuple[bool, str]:
    """Feed ``tokens`` then EOS; (accepted, where it failed)."""
    size = m.compiled.vocab_size
    for k, t in enumerate(tokens):
        mask = unpack_mask(m.mask(), size)
        if not mask[t]:
            assert not m.allows(t), "allows() and mask() disagree"
            return False, f"token {k} ({vocab.token_bytes[t]!r}) not in the mask"
        assert m.allows(t)
        assert m.advance(t)
    eos = vocab.eos_ids[0]
    mask = unpack_mask(m.mask(), size)
    if not mask[eos]:
        assert not m.is_accepting()
        return False, "EOS not allowed at the end"
    assert m.is_accepting() and m.advance(eos)
    return True, ""


def generated(case: Case, seed: int, max_len: int = 300) -> bytes | None:
    """A string of the language (checked by the oracle), or None."""
    rng = random.Random(seed)
    s = GrammarSampler(case.grammar).generate(RandomChooser(rng), max_depth=rng.randint(2, 6))
    if len(s) > min(max_len, case.max_bytes) or not is_utf8(s) or not in_language(case, s):
        return None
    return s


# ---------------------------------------------------------------------- (a) soundness
@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_soundness_walks_end_in_the_language(case: Case, vocab):
    cg = compiled(case, vocab)
    finished = 0
    n_walks = 8 if case in SHIPPED else 20

    @settings(max_examples=n_walks, **SETTINGS)
    @given(st.integers(0, 2**32 - 1))
    def walk(seed):
        nonlocal finished
        m = cg.matcher()
        if not toy_lm_walk(m, vocab, random.Random(seed), max_bytes=case.max_bytes):
            return
        finished += 1
        text = bytes_of(m, vocab)
        assert m.is_terminated()
        assert is_utf8(text), f"{case.name}: EOS after invalid UTF-8 {text!r}"
        assert cg.accepts_bytes(text)
        assert in_language(case, text), f"{case.name}: walk produced {text!r}, which the oracle rejects"

    walk()
    assert finished >= n_walks // 3, f"{case.name}: only {finished} of {n_walks} walks reached EOS"


# ---------------------------------------------------------------------- (b) completeness
@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_completeness_generated_strings_are_accepted(case: Case, vocab):
    cg = compiled(case, vocab)
    table = by_bytes(vocab)
    accepted = 0

    @settings(max_examples=12 if case in SHIPPED else 40, **SETTINGS)
    @given(st.integers(0, 2**32 - 1))
    def check(seed):
        nonlocal accepted
        s = generated(case, seed)
        if s is None:
            return
        canonical = vocab.encode(s.decode("utf-8"))
        if b"".join(vocab.token_bytes[t] for t in canonical) == s:  # (a normalizer may change text)
            ok, where = feed_tokens(cg.matcher(), canonical, vocab)
            assert ok, f"{case.name}: {s!r} refused, canonically tokenized: {where}"
        rng = random.Random(seed ^ 0x5EED)
        for _ in range(2):
            split = random_split(s, table, rng)
            assert split is not None
            ok, where = feed_tokens(cg.matcher(), split, vocab)
            assert ok, (f"{case.name}: {s!r} refused, split as "
                        f"{[vocab.token_bytes[t] for t in split]}: {where}")
        accepted += 1

    check()
    assert accepted >= 5, f"{case.name}: only {accepted} generated strings were usable"


# ---------------------------------------------------------------------- (c) invalid strings
def mutants(s: bytes, rng: random.Random) -> list[bytes]:
    out = []
    if s:
        i = rng.randrange(len(s))
        out.append(s[:i] + s[i + 1:])                              # delete a byte
        out.append(s[:i] + s[i:i + 1] + s[i:])                     # duplicate a byte
        out.append(s[:rng.randrange(len(s))])                      # truncate
        out.append(s[:i] + bytes([s[i] ^ 0x80]) + s[i + 1:])       # break UTF-8 / flip the high bit
    j = rng.randrange(len(s) + 1)
    out.append(s[:j] + bytes([rng.choice(b'x "(){}[],:;1.-+*/=\n\xc3\xa9')]) + s[j:])  # insert a byte
    return out


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_invalid_strings_are_refused(case: Case, vocab):
    cg = compiled(case, vocab)
    table = by_bytes(vocab)
    counts = {"rejected": 0, "accepted": 0}

    @settings(max_examples=10 if case in SHIPPED else 30, **SETTINGS)
    @given(st.integers(0, 2**32 - 1))
    def check(seed):
        s = generated(case, seed, max_len=200)
        if s is None:
            return
        rng = random.Random(seed ^ 0xBAD)
        for bad in mutants(s, rng):
            want = in_language(case, bad)
            split = random_split(bad, table, rng)
            assert split is not None
            ok, where = feed_tokens(cg.matcher(), split, vocab)
            assert ok == want, (f"{case.name}: {bad!r} (mutant of {s!r}) is "
                                f"{'in' if want else 'not in'} the language, but the matcher "
                                f"{'refused it: ' + where if want else 'accepted it'}")
            assert cg.accepts_bytes(bad) == want
            counts["accepted" if want else "rejected"] += 1

    check()
    assert counts["rejected"] >= 5, f"{case.name}: too few invalid mutants ({counts})"


def test_refusal_is_detectable():
    """Feeding a string outside the language must fail (sanity check of the harness)."""
    from constrained import Grammar, TokenVocabulary

    v = TokenVocabulary.from_token_bytes([b"", b"a", b"b", b"ab"], eos_ids=[0])
    cg = compile_grammar(Grammar.from_regex("(ab)+"), v, cache_dir=None)
    assert feed_tokens(cg.matcher(), [3, 3], v)[0]
    ok, where = feed_tokens(cg.matcher(), [3, 1], v)
    assert not ok and "EOS" in where
    ok, where = feed_tokens(cg.matcher(), [2], v)
    assert not ok and "mask" in where


# ---------------------------------------------------------------------- (d) state algebra
ALGEBRA_CASES = [c for c in CASES if c.name in {"json.lark", "json_inline", "ambiguous", "expr", "words",
                                                 "python_subset.lark", "forced_unicode"}]


def _snapshot(m) -> tuple:
    return (m.state_id, m.tokens, m.is_accepting(), m.is_terminated(),
            None if m.is_terminated() else m.mask().tobytes())


@pytest.mark.parametrize("case", ALGEBRA_CASES, ids=[c.name for c in ALGEBRA_CASES])
def test_state_algebra(case: Case, vocab):
    cg = compiled(case, vocab)
    eos = vocab.eos_ids[0]
    size = cg.vocab_size

    @settings(max_examples=20, **SETTINGS)
    @given(st.integers(0, 2**32 - 1), st.integers(1, 30))
    def check(seed, length):
        rng = random.Random(seed)
        m = cg.matcher()
        snaps = [_snapshot(m)]
        for _ in range(length):
            ids = [int(t) for t in allowed_ids(m) if int(t) not in vocab.eos_ids]
            if not ids or len(bytes_of(m, vocab)) >= case.max_bytes:
                break
            t = rng.choice(ids)
            assert m.advance(t)
            snaps.append(_snapshot(m))
        n = len(m.tokens)
        # rollback then re-advance reproduces identical masks
        k = rng.randint(0, n)
        redo = list(m.tokens[n - k:])
        m.rollback(k)
        assert _snapshot(m) == snaps[n - k]
        for i, t in enumerate(redo):
            assert m.advance(t)
            assert _snapshot(m) == snaps[n - k + i + 1]
        # a refused advance changes nothing
        before = _snapshot(m)
        refused = np.flatnonzero(~unpack_mask(m.mask(), size))
        for t in [int(refused[rng.randrange(refused.size)]) for _ in range(3)] if refused.size else []:
            assert not m.allows(t)
            assert m.advance(t) is False
            assert _snapshot(m) == before
        # forks are independent
        f = m.fork()
        assert _snapshot(f) == before
        ids = [int(t) for t in allowed_ids(m) if int(t) not in vocab.eos_ids]
        if ids:
            assert f.advance(rng.choice(ids))
            assert _snapshot(m) == before
            g = f.fork()
            assert m.advance(rng.choice(ids))
            assert _snapshot(g) == _snapshot(f)
            m.rollback(1)
            assert _snapshot(m) == before
        # EOS: terminates; everything is then refused; rollback(1) undoes it
        if m.is_accepting():
            assert m.advance(eos)
            assert m.is_terminated() and not m.is_accepting()
            assert not m.advance(ids[0] if ids else eos) and not m.allows(eos)
            with pytest.raises(MatcherTerminatedError):
                m.mask()
            m.rollback(1)
            assert _snapshot(m) == before
        else:
            assert m.advance(eos) is False
            assert _snapshot(m) == before
        m.reset()
        assert _snapshot(m) == snaps[0]

    check()


# ---------------------------------------------------------------------- (e) forced tokens
def _utf8_prefix(data: bytes) -> bytes:
    for cut in range(len(data), -1, -1):
        if is_utf8(data[:cut]):
            return data[:cut]
    return b""


def check_forced_contract(case: Case, m, vocab, chart=None) -> int:
    """Check jump-forward at ``m`` (``chart``: the reference chart of its text, if
    known); returns the number of forced tokens."""
    tb = vocab.token_bytes
    fb = m.forced_bytes()
    ft = m.forced_tokens()
    prefix = bytes_of(m, vocab)
    # forced bytes really are forced, by the independent reference
    if chart is None:
        chart = case.reference.state(prefix)
    assert chart is not None
    for i, b in enumerate(fb):
        assert not chart.accepting and chart.next_bytes() == {b}, \
            f"{case.name}: byte {i} of forced {fb!r} after {prefix!r} is not forced"
        chart = chart.step(b)
    if len(fb) < 4096:
        assert chart.accepting or len(chart.next_bytes()) != 1, f"{case.name}: forced {fb!r} is not maximal"
    # decode(forced tokens) is a prefix of the forced bytes
    text = b"".join(tb[t] for t in ft)
    assert fb.startswith(text), f"{case.name}: forced tokens {text!r} are not a prefix of {fb!r}"
    # every forced token is allowed in turn
    f = m.fork()
    for t in ft:
        assert f.allows(t) and f.advance(t), f"{case.name}: forced token {tb[t]!r} refused"
    if ft:
        # canonical: re-tokenizing (recent tokens + forced text) puts a boundary after
        # the recent tokens and then the forced tokens
        history = [t for t in m.tokens if t not in vocab.eos_ids][-LOOKBACK_TOKENS:]
        while history and not is_utf8(b"".join(tb[t] for t in history)):
            history = history[1:]
        prev = b"".join(tb[t] for t in history)
        forced = _utf8_prefix(fb)
        toks = vocab.encode((prev + forced).decode("utf-8"))
        pos, i = 0, 0
        while pos < len(prev):
            pos += len(tb[toks[i]])
            i += 1
        assert pos == len(prev), f"{case.name}: canonical tokens of {prev + forced!r} cross the boundary"
        assert toks[i:i + len(ft)] == ft, (f"{case.name}: forced {[tb[t] for t in ft]} but canonical "
                                           f"tokenization of {prev + forced!r} continues "
                                           f"{[tb[t] for t in toks[i:i + len(ft)]]}")
    return len(ft)


FORCED_CHECK_CASES = FORCED + [c for c in SHIPPED + INLINE
                               if c.name in {"json.lark", "python_subset.lark", "sql_select.lark", "json_inline"}]


@pytest.mark.parametrize("case", FORCED_CHECK_CASES, ids=[c.name for c in FORCED_CHECK_CASES])
def test_forced_tokens_contract(case: Case, vocab):
    cg = compiled(case, vocab)
    stats = {"states": 0, "forced": 0}

    @settings(max_examples=15, **SETTINGS)
    @given(st.integers(0, 2**32 - 1))
    def check(seed):
        rng = random.Random(seed)
        m = cg.matcher()
        chart = case.reference.initial
        for _ in range(25):
            stats["forced"] += check_forced_contract(case, m, vocab, chart) > 0
            stats["states"] += 1
            ids = [int(t) for t in allowed_ids(m) if int(t) not in vocab.eos_ids]
            if not ids or len(bytes_of(m, vocab)) >= case.max_bytes:
                break
            # half the time take the forced tokens (jump-forward), else a random token
            ft = m.forced_tokens()
            if not (ft and rng.random() < 0.5):
                ft = [rng.choice(ids)]
            for t in ft:
                assert m.advance(t)
                chart = chart.feed(vocab.token_bytes[t])

    check()
    if case in FORCED:
        assert stats["forced"] >= 5, f"{case.name}: forced tokens seen at only {stats['forced']} states"


def test_forced_tokens_on_canonical_paths(vocab):
    """Along canonical tokenizations of generated strings, forcing never fires
    against the tokenizer: at every state the contract holds."""
    for case in FORCED:
        cg = compiled(case, vocab)
        for seed in range(6):
            s = generated(case, seed)
            assert s is not None
            m = cg.matcher()
            for t in vocab.encode(s.decode("utf-8")):
                check_forced_contract(case, m, vocab)
                assert m.advance(t)
            assert m.is_accepting()
