"""Token tables derived from a similar state's table equal a full per-token reference scan."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from constrained.automata.byte_dfa import START, compile_terminal
from constrained.engine.table_derivation import MAX_DIFFERING_BYTES, derive_table, reference_state
from constrained.engine.token_tables import SHARE_MIN_LIVE_BYTES, TokenTables
from constrained.json_schema.json_string import json_string_regex
from constrained.vocabulary import TokenVocabulary
from test_token_tables import REGEXES, reference_table

STRING_REGEX = REGEXES[0]      # a JSON string


def _names_excluded(names: list[str]) -> tuple[str, tuple[str, ...]]:
    """A JSON string that is none of ``names`` in any escape spelling (an extra key)."""
    literal = ["".join(f"\\U{ord(c):08x}" for c in name) for name in names]
    return STRING_REGEX, (json_string_regex("(?:" + "|".join(literal) + ")"),)


def _assert_equal(vocab, got, dfa, q) -> None:
    inside, ct, cp = reference_table(vocab, dfa, q)
    assert np.array_equal(got.inside, inside), q
    assert np.array_equal(got.cross_toks, ct) and np.array_equal(got.cross_pos, cp), q


@pytest.mark.parametrize("names", [["id", "name", "description", "created_at"], ["a", "ab", "abc", "\u00e9t\u00e9"],
                                   ["type"]])
def test_derived_tables_of_an_extra_key_equal_the_reference_on_llama3(names, llama3_vocab) -> None:
    main, excluding = _names_excluded(names)
    dfa = compile_terminal(main, excluding=excluding)
    tables = TokenTables(llama3_vocab, None)
    derived = 0
    for q in range(1, dfa.num_states):
        ref = reference_state(dfa, q)
        if ref is None:
            continue
        derived += 1
        _assert_equal(llama3_vocab, derive_table(tables, dfa, q, ref), dfa, q)
    assert derived >= sum(map(len, names)) - len(names)   # the states along the excluded names


@pytest.mark.parametrize("regex", [("[a-z\"]*", ("ab", "abc", "zz")), ("[ -~]*", ("name", "na", "n a"))])
def test_derived_tables_with_accepting_states_inside_tokens(regex, llama3_vocab) -> None:
    # accepting states that go on: inside tokens have split points, which a table drops
    dfa = compile_terminal(regex[0], excluding=regex[1])
    tables = TokenTables(llama3_vocab, None)
    derived = 0
    for q in range(1, dfa.num_states):
        ref = reference_state(dfa, q)
        if ref is not None:
            derived += 1
            _assert_equal(llama3_vocab, derive_table(tables, dfa, q, ref), dfa, q)
    assert derived >= 3


def test_tables_computes_wide_states_by_derivation(llama3_vocab, monkeypatch) -> None:
    # `_compute` derives where a reference exists and never scans those states in full
    main, excluding = _names_excluded(["status", "owner"])
    dfa = compile_terminal(main, excluding=excluding)
    tables = TokenTables(llama3_vocab, None)
    full_scans: list[int] = []
    scan = tables._scan_table
    monkeypatch.setattr(tables, "_scan_table", lambda d, q: (full_scans.append(q), scan(d, q))[1])
    wide = [q for q in range(1, dfa.num_states) if np.count_nonzero(dfa.transitions[q]) >= SHARE_MIN_LIVE_BYTES]
    with_ref = {q for q in wide if reference_state(dfa, q) is not None}
    assert len(with_ref) >= 8
    for q in wide:
        _assert_equal(llama3_vocab, tables.get(dfa, q), dfa, q)
    assert not with_ref & set(full_scans)


_ALPHABET = b'ab"\\x'


@settings(max_examples=80, deadline=None)
@given(tokens=st.lists(st.binary(min_size=1, max_size=5).map(lambda b: bytes(_ALPHABET[c % 5] for c in b)),
                       min_size=1, max_size=40),
       regex=st.sampled_from([('"[abx]*"', ('"ab"', '"b"')), ('"(?:[abx]|\\\\[ab])*"', ('"a\\\\b"',)),
                              ("[abx\"]*", ("ab",)), ("(?:a|b)*x", ()), ('"[ab]{0,4}"', ('"aa"',))]))
def test_derivation_from_any_similar_state_equals_the_reference(tokens, regex) -> None:
    vocab = TokenVocabulary.from_token_bytes(tokens + [b""], eos_ids=[len(tokens)])
    main, excluding = regex
    dfa = compile_terminal(main, excluding=excluding)
    tables = TokenTables(vocab, None)
    rows = dfa.transitions
    for q in range(1, dfa.num_states):
        for r in range(1, dfa.num_states):
            if r != q and np.count_nonzero(rows[q] != rows[r]) <= MAX_DIFFERING_BYTES:
                _assert_equal(vocab, derive_table(tables, dfa, q, r), dfa, q)


def test_no_reference_for_a_body_state_or_a_state_unlike_its_successor() -> None:
    body = compile_terminal(STRING_REGEX)
    q = int(body.transitions[1, ord('"')])           # the string body loops to itself: scanned
    assert reference_state(body, q) is None
    digits = compile_terminal("[0-9]{3}")            # each state leads to a different next one
    assert all(reference_state(digits, q) is None for q in range(1, digits.num_states))


def test_warm_up_builds_the_format_automata_later_compiles_reuse(llama3_vocab) -> None:
    from constrained import Grammar, warm_up
    from constrained.automata import byte_dfa

    report = warm_up(llama3_vocab, formats=("hostname", "date"))
    assert set(report) == {"trie", "value checks", "string bodies", "counted strings", "json structure", "formats"}
    misses = byte_dfa._compile_terminal.cache_info().misses
    for name in ("hostname", "date"):
        Grammar.from_json_schema({"type": "string", "format": name})
    assert byte_dfa._compile_terminal.cache_info().misses == misses      # built by warm_up, not again


def test_warm_up_builds_the_string_bodies_later_strings_share(llama3_vocab, monkeypatch) -> None:
    # a pattern's string reaches the body of a line of code points after its prefix, and a
    # minLength string the body of code points: both tables come from warm_up, not a scan
    from constrained import Grammar, warm_up
    from constrained.engine.token_tables import default_cache_dir

    warm_up(llama3_vocab, formats=False)
    tables = TokenTables.for_vocabulary(llama3_vocab, default_cache_dir())
    scans: list[int] = []
    scan = tables._scan_table
    monkeypatch.setattr(tables, "_scan_table", lambda d, q: (scans.append(q), scan(d, q))[1])
    for schema in ({"type": "string", "pattern": "^zq.*$"}, {"type": "string", "minLength": 2}):
        (t,) = [t for t in Grammar.from_json_schema(schema).terminals if t.regex.startswith('"')]
        dfa = compile_terminal(t.regex, t.also, t.excluding)
        q = START
        for b in b'"zq':
            q = dfa.step(q, b)
        assert np.count_nonzero(dfa.transitions[q]) > 1000 // 8      # a body state: most bytes go on
        tables.get(dfa, q)
    assert scans == []


def test_warm_up_builds_the_json_structure_a_fresh_schema_reads(llama3_vocab, monkeypatch) -> None:
    # the punctuation terminals with their blanks (~1 ms each to build), and the tables of the
    # states a value starts in, come from warm_up: a fresh schema's first object builds the
    # automata of its own keys only, and scans no table but theirs
    import json

    from constrained import Grammar, compile_grammar, warm_up
    from constrained.automata import byte_dfa
    from constrained.engine import compiled
    from constrained.engine.token_tables import default_cache_dir

    byte_dfa._compile_terminal.cache_clear()     # (earlier tests in this process built them too)
    byte_dfa.compile_regex.cache_clear()
    warm_up(llama3_vocab, formats=False)
    tables = TokenTables.for_vocabulary(llama3_vocab, default_cache_dir())
    scans: list[str] = []
    scan = tables._scan_table
    monkeypatch.setattr(tables, "_scan_table", lambda d, q: (scans.append(d.regex), scan(d, q))[1])
    built: list[str] = []
    terminal_dfa = compiled._terminal_dfa

    def recording(t, *args):
        misses = byte_dfa._compile_terminal.cache_info().misses
        out = terminal_dfa(t, *args)
        if byte_dfa._compile_terminal.cache_info().misses > misses:
            built.append(t.name)
        return out

    monkeypatch.setattr(compiled, "_terminal_dfa", recording)
    chained: list[str] = []                     # key literals built at compile, in one pass
    chain_dfas = compiled.chain_dfas

    def recording_chains(regexes, *args):
        out = chain_dfas(regexes, *args)
        chained.extend(r for r, d in zip(regexes, out) if d is not None)
        return out

    monkeypatch.setattr(compiled, "chain_dfas", recording_chains)
    schema = {"type": "object", "properties": {"zqx_fresh": {"type": "string"}, "zqx_n": {"type": "integer"}}}
    matcher = compile_grammar(Grammar.from_json_schema(schema), llama3_vocab).matcher()
    for token in llama3_vocab.encode(json.dumps({"zqx_fresh": "a b", "zqx_n": 3})):
        matcher.mask()
        assert matcher.advance(token)
    assert all(name.startswith(("KEY", "EXTRA_KEY")) for name in built), built
    keys = {t.regex for t in Grammar.from_json_schema(schema).terminals if t.name.startswith(("KEY", "EXTRA_KEY"))}
    assert chained and set(chained) <= keys, set(chained) - keys
    assert set(scans) <= keys, set(scans) - keys     # tables of the keys' states only


def test_a_key_excluding_many_names_derives_the_state_after_its_quote(llama3_vocab) -> None:
    # thirty names with a dozen first letters: more differing bytes than MAX_DIFFERING_BYTES,
    # but few tokens below them, so the vocabulary's weights let the state be derived
    names = [f"{c}{w}" for c in "abcdefghijklm" for w in ("pple", "rea", "x")][:30]
    main, excluding = _names_excluded(names)
    dfa = compile_terminal(main, excluding=excluding)
    tables = TokenTables(llama3_vocab, None)
    after_quote = int(dfa.transitions[1, ord('"')])
    assert np.count_nonzero(dfa.transitions[after_quote] != dfa.transitions[int(
        dfa.transitions[after_quote, ord("z")])]) > MAX_DIFFERING_BYTES
    assert reference_state(dfa, after_quote) is None                     # unweighed: scanned in full
    ref = reference_state(dfa, after_quote, tables.tokens_per_first_byte)
    assert ref is not None
    _assert_equal(llama3_vocab, derive_table(tables, dfa, after_quote, ref), dfa, after_quote)
    _assert_equal(llama3_vocab, tables.get(dfa, after_quote), dfa, after_quote)
    # a state reading a few bytes, most of whose tokens start with the differing ones: no reference
    weights = np.zeros(257, np.int64)
    weights[[ord(n[0]) for n in names]] = 1000
    weights[ord("z")] = 1
    assert reference_state(dfa, after_quote, weights) is None


def test_warm_up_computes_the_tables_of_counted_strings(llama3_vocab, monkeypatch) -> None:
    # a minLength 5 string's states have the residuals of the last states of warm_up's
    # minLength 24 string: their tables are found, not scanned
    from constrained import Grammar, warm_up
    from constrained.automata.byte_dfa import START, compile_terminal
    from constrained.engine.token_tables import default_cache_dir

    warm_up(llama3_vocab, formats=False)
    tables = TokenTables.for_vocabulary(llama3_vocab, default_cache_dir())
    scans = []
    monkeypatch.setattr(TokenTables, "_scan_table", lambda self, dfa, q: scans.append(q))
    for schema in ({"type": "string", "minLength": 5}, {"type": "string", "maxLength": 7}):
        (t,) = [t for t in Grammar.from_json_schema(schema).terminals if t.regex.startswith('"')]
        dfa = compile_terminal(t.regex, t.also, t.excluding)
        q = dfa.step(START, ord('"'))
        for ch in b"abcdef":
            assert tables.get(dfa, q) is not None
            q = dfa.step(q, ch)
    assert scans == []
