"""Token tables read off the vocabulary trie equal a per-token reference scan."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from constrained.automata.byte_dfa import compile_regex
from constrained.engine.token_scan import scan_remainders, scan_tokens
from constrained.engine.token_tables import TokenTables
from constrained.engine.token_trie import VocabTrie
from constrained.engine.trie_walk import FlatTrie
from constrained.masks import pack_mask
from constrained.vocabulary import TokenVocabulary

REGEXES = [
    r'"(?:[^"\\\x00-\x1f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"',
    r'"(?:[^"\\\x00-\x1f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})){2,9}"',
    r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?",
    r"[ \t\n\r]{1,48}",
    r'"[a-z0-9_]{0,12}"|true|false',
    r'"[a-f0-9]{32}"',
    r'"name"|"nam"',
    r"[\s\S]{0,3}x",
]


def reference_table(vocab: TokenVocabulary, dfa, q: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every text token scanned on its own from byte 0 (`scan_tokens`), in the table's layout."""
    toks = np.flatnonzero(vocab.lengths > 0).astype(np.int64)
    live_end, si, sp = scan_tokens(dfa, q, toks, np.zeros(len(toks), np.int64), vocab.byte_matrix, vocab.lengths)
    inside = np.zeros(len(vocab), bool)
    inside[toks[live_end]] = True
    keep = ~live_end[si]
    ct, cp = toks[si[keep]], sp[keep]
    order = np.lexsort((ct, cp))
    return pack_mask(inside).view(np.uint8), ct[order].astype(np.int32), cp[order].astype(np.int32)


def assert_tables_equal(vocab: TokenVocabulary, regex: str) -> None:
    dfa = compile_regex(regex)
    tables = TokenTables(vocab, None)
    for q in range(1, dfa.num_states):
        got = tables._compute(dfa, q)
        inside, ct, cp = reference_table(vocab, dfa, q)
        assert np.array_equal(got.inside, inside), (regex, q)
        assert np.array_equal(got.cross_toks, ct) and np.array_equal(got.cross_pos, cp), (regex, q)


@pytest.mark.parametrize("regex", REGEXES)
def test_trie_tables_equal_reference_on_llama3(regex, llama3_vocab) -> None:
    assert_tables_equal(llama3_vocab, regex)


def test_trie_tables_with_repeated_spellings() -> None:
    # SentencePiece-style vocabularies spell some ids alike (byte fallback and the byte itself)
    vocab = TokenVocabulary.from_token_bytes([b"a", b"ab", b"a", b"abc", b"ab", b"b", b"\"", b"\"a\"", b""],
                                             eos_ids=[8])
    for regex in ('"a*"', "ab?", "a|abc", "[ab]+"):
        assert_tables_equal(vocab, regex)


@settings(max_examples=60, deadline=None)
@given(tokens=st.lists(st.binary(min_size=1, max_size=6).map(lambda b: bytes(c % 4 + 97 for c in b)),
                       min_size=1, max_size=40),
       regex=st.sampled_from(["a*", "(ab)+c?", "[a-c]{2,4}", "a|b|abd", "d*a[bc]*", "(a|b)*d"]))
def test_trie_tables_equal_reference_on_random_vocabularies(tokens, regex) -> None:
    vocab = TokenVocabulary.from_token_bytes(tokens + [b""], eos_ids=[len(tokens)])
    assert_tables_equal(vocab, regex)


@settings(max_examples=60, deadline=None)
@given(tokens=st.lists(st.binary(min_size=1, max_size=6).map(lambda b: bytes(c % 4 + 97 for c in b)),
                       min_size=1, max_size=40),
       regex=st.sampled_from(["a*", "(ab)+c?", "[a-c]{2,4}", "a|b|abd", "d*a[bc]*", "(a|b)*d"]),
       data=st.data())
def test_scanning_a_few_candidates_byte_by_byte_equals_the_array_scan(tokens, regex, data) -> None:
    vocab = TokenVocabulary.from_token_bytes(tokens + [b""], eos_ids=[len(tokens)])
    dfa = compile_regex(regex)
    picks = data.draw(st.lists(st.tuples(st.integers(0, len(tokens) - 1), st.integers(0, 5),
                                         st.integers(1, dfa.num_states - 1)), min_size=1, max_size=16))
    toks = np.array([t for t, _, _ in picks], np.int64)
    offs = np.array([o % len(tokens[t]) for t, o, _ in picks], np.int64)
    starts = np.array([q for _, _, q in picks], np.int64)
    arrays = scan_tokens(dfa, starts, toks, offs, vocab.byte_matrix, vocab.lengths)
    few = scan_tokens(dfa, starts, toks, offs, vocab.byte_matrix, vocab.lengths, vocab.token_bytes)
    assert np.array_equal(arrays[0], few[0])
    assert sorted(zip(arrays[1].tolist(), arrays[2].tolist())) == sorted(zip(few[1].tolist(), few[2].tolist()))


def test_trie_shape() -> None:
    trie = VocabTrie([b"ab", b"a", b"b", b"abc", b""])
    assert trie.num_nodes == 4                       # a, ab, abc, b
    assert [lv.byte.tolist() for lv in trie.levels] == [[97, 98], [98], [99]]
    assert trie.order.tolist() == [1, 0, 3, 2]       # by bytes: a, ab, abc, b


@settings(max_examples=80, deadline=None)
@given(tokens=st.lists(st.binary(min_size=1, max_size=6).map(lambda b: bytes(c % 4 + 97 for c in b)),
                       min_size=1, max_size=40),
       regex=st.sampled_from(["a*", "(ab)+c?", "[a-c]{2,4}", "a|b|abd", "d*a[bc]*", "(a|b)*d", "a,?"]),
       data=st.data())
def test_the_compiled_remainder_scan_equals_the_array_scan(tokens, regex, data) -> None:
    # the crossing walk's scan (from the start state, candidates whose first byte starts the
    # lexeme, distinct results) against the reference array scan of every candidate
    vocab = TokenVocabulary.from_token_bytes(tokens + [b""], eos_ids=[len(tokens)])
    dfa = compile_regex(regex)
    picks = data.draw(st.lists(st.tuples(st.integers(0, len(tokens) - 1), st.integers(0, 5)), max_size=60))
    toks = np.array([t for t, _ in picks], np.int64)
    offs = np.array([o % len(tokens[t]) for t, o in picks], np.int64)
    first = vocab.byte_matrix[toks, offs]
    order = np.argsort(first, kind="stable")
    by_first = np.searchsorted(first[order], np.arange(257))
    live, split_toks, split_offs = scan_remainders(dfa, toks[order], offs[order], by_first, vocab.byte_matrix,
                                                   vocab.lengths, 7)
    live_end, si, sp = scan_tokens(dfa, 1, toks, offs, vocab.byte_matrix, vocab.lengths)
    assert live.tolist() == sorted(set(toks[live_end].tolist()))
    assert list(zip(split_toks.tolist(), split_offs.tolist())) == sorted(set(zip(toks[si].tolist(), sp.tolist())))


@settings(max_examples=80, deadline=None)
@given(tokens=st.lists(st.binary(min_size=1, max_size=6).map(lambda b: bytes(c % 4 + 97 for c in b)),
                       min_size=1, max_size=40))
def test_the_walk_layout_is_a_depth_first_preorder_of_the_trie(tokens) -> None:
    # `FlatTrie`: each node's subtree is the nodes after it up to ``skip``, all deeper and
    # inside its run of sorted tokens; each node's tokens are the sorted tokens spelled
    # like its prefix; every prefix of every token is one node
    trie = VocabTrie(tokens)
    flat = FlatTrie.of(trie)
    spelled = [tokens[int(t)] for t in flat.order]
    prefixes: list[bytes] = []
    path: list[bytes] = []
    for i in range(flat.byte.size):
        d, lo, hi, skip = int(flat.depth[i]), int(flat.lo[i]), int(flat.hi[i]), int(flat.skip[i])
        path[d - 1:] = [bytes([int(flat.byte[i])])]
        prefix = b"".join(path)
        prefixes.append(prefix)
        assert all(flat.depth[j] > d and lo <= flat.lo[j] < hi for j in range(i + 1, skip))
        assert skip == flat.byte.size or flat.depth[skip] <= d
        assert all(w.startswith(prefix) for w in spelled[lo:hi])
        assert spelled[lo:lo + int(flat.nend[i])] == [prefix] * int(flat.nend[i])
    assert sorted(prefixes) == sorted({w[:k] for w in tokens for k in range(1, len(w) + 1)})
    assert flat.max_depth == max(map(len, tokens))


def test_counted_strings_share_tables_by_residual(llama3_vocab) -> None:
    """After j characters of a minLength 20 string the residual is a minLength 20 - j string's
    start: `TokenTables.get` finds that table (residuals of automata too large for
    `SHARE_MAX_RESIDUAL` are looked up up to `SHARE_COUNTED_MAX_STATES`), and it equals
    the reference scan of the state."""
    from constrained import Grammar
    from constrained.automata.byte_dfa import START, compile_terminal

    def counted(bound: str, n: int):
        (t,) = [t for t in Grammar.from_json_schema({"type": "string", bound: n}).terminals if t.regex.startswith('"')]
        return compile_terminal(t.regex, t.also, t.excluding)

    tables = TokenTables(llama3_vocab, None)
    for bound in ("minLength", "maxLength"):
        long, short = counted(bound, 20), counted(bound, 15)     # (404 and 304 states)
        q = long.step(START, ord('"'))
        for ch in b"abcde":
            q = long.step(q, ch)            # 20 - 5 = 15 characters to go, as at the start of the short one
        shared = tables.get(long, q)
        start = short.step(START, ord('"'))
        assert tables.get(short, start) is shared, bound
        inside, ct, cp = reference_table(llama3_vocab, short, start)
        assert np.array_equal(shared.inside, inside), bound
        assert np.array_equal(shared.cross_toks, ct) and np.array_equal(shared.cross_pos, cp), bound


def test_text_identified_automata_are_keyed_by_their_construction_version(monkeypatch) -> None:
    """Key literals and JSON words markers are identified by their text; the version of
    their construction is part of the digest, so tables cached on disk for another
    numbering of the same text are never read for this one."""
    from constrained.automata import byte_dfa

    regex = byte_dfa.compile_regex.__wrapped__('"(?:a|\\\\u0061)b"')
    assert regex.digest.startswith("chain-")
    before = byte_dfa._text_digest("chain", regex.regex)
    assert before == regex.digest
    monkeypatch.setattr(byte_dfa, "TEXT_CONSTRUCTION_VERSION", byte_dfa.TEXT_CONSTRUCTION_VERSION + 1)
    assert byte_dfa._text_digest("chain", regex.regex) != before


def test_the_last_bytes_of_literals_share_one_table_and_crossing_set(llama3_vocab) -> None:
    """The state before a key's closing quote (or ``true``'s ``e``) reads one byte that
    ends the lexeme: every token below that byte crosses, the same for every literal.
    `TokenTables.get` shares that table by the byte and `crossing_root` its crossing
    set; both equal the reference scan of each automaton's own state."""
    from constrained.engine.token_tables import last_byte_key
    from constrained.json_schema.compile.literals import json_literal_regex

    tables = TokenTables(llama3_vocab, None)
    a, b = compile_regex(json_literal_regex("firstName")), compile_regex(json_literal_regex("zip"))
    qa, qb = a.run(b'"firstName'), b.run(b'"zip')
    assert last_byte_key(a, a.transitions[qa]) == last_byte_key(b, b.transitions[qb]) is not None
    assert last_byte_key(a, a.transitions[a.run(b'"first\\u00')]) is None   # a hex digit, not the end
    shared = tables.get(a, qa)
    assert tables.get(b, qb) is shared
    assert tables.crossing_root(b, qb) is tables.crossing_root(a, qa)
    assert len(shared.cross_toks) > 100                             # '":', '",', '"}' ...
    for dfa, q in ((a, qa), (b, qb)):
        inside, ct, cp = reference_table(llama3_vocab, dfa, q)
        assert np.array_equal(shared.inside, inside)
        assert np.array_equal(shared.cross_toks, ct) and np.array_equal(shared.cross_pos, cp)
        root = tables.crossing_root(dfa, q)
        assert sorted(zip(root.toks.tolist(), root.offs.tolist())) == sorted(zip(ct.tolist(), cp.tolist()))
    t, f = compile_regex("true"), compile_regex("false")
    assert tables.get(t, t.run(b"tru")) is tables.get(f, f.run(b"fals"))
    n = compile_regex("[0-9]+")        # one byte read, but the state after it reads more
    assert last_byte_key(n, n.transitions[n.start]) is None
