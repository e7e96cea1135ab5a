"""The JSON words automata built directly equal the regex route's automata (same minimal DFA)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from constrained.automata.byte_dfa import compile_regex, compile_terminal
from constrained.automata.json_words import (
    STRING_REGEX,
    json_string_except_regex,
    json_words_regex,
    parse_marker,
)
from constrained.automata.regex_parser import validate_regex
from constrained.errors import RegexError
from constrained.json_schema.json_string import json_string_regex

# characters with every kind of spelling: raw ASCII, short escapes, control characters,
# two- to four-byte UTF-8 (astral: surrogate pairs), a lone surrogate (no spelling at all)
_CHARS = ["a", "b", "I", "0", "_", "-", " ", "/", '"', "\\", "\n", "\x01", "\x7f", "\u00e9", "\u20ac", "\U0001f600",
          "\ud800"]
words_strategy = st.lists(st.text(alphabet=st.sampled_from(_CHARS), max_size=5), min_size=1, max_size=6)


def _language(dfa) -> str:
    """The digest of ``dfa``'s minimal automaton: equal for equal languages (an automaton
    identified by its text has its text's digest)."""
    from constrained.automata.byte_dfa import _finished, _minimize

    return _finished("", *_minimize(dfa.transitions, dfa.accepting)).digest


def _literal(word: str) -> str:
    return "".join(f"\\U{ord(c):08x}" for c in word) if word else "(?:)"


def _alternation(words: list[str]) -> str:
    return json_string_regex("(?:" + "|".join(_literal(w) for w in words) + ")")


@settings(max_examples=150, deadline=None)
@given(words=words_strategy)
def test_words_automaton_equals_the_regex_route(words) -> None:
    direct = compile_regex(json_words_regex(words))
    try:
        via_regex = compile_regex(_alternation(words))
    except RegexError:          # every word has a lone surrogate: the regex matches nothing
        assert not direct.accepting.any()
        return
    assert _language(direct) == _language(via_regex)


@settings(max_examples=150, deadline=None)
@given(words=words_strategy)
def test_except_automaton_equals_the_string_minus_the_words(words) -> None:
    direct = compile_regex(json_string_except_regex(words))
    try:
        via_regex = compile_terminal(STRING_REGEX, excluding=(_alternation(words),))
    except RegexError:
        via_regex = compile_regex(STRING_REGEX)
    assert _language(direct) == _language(via_regex)


@pytest.mark.parametrize("words", [["id", "name", "description", "created_at"], ["a" * 40], [""], ["x", "xy", "xyz"]])
def test_typical_keys(words) -> None:
    assert _language(compile_regex(json_words_regex(words))) == _language(compile_regex(_alternation(words)))
    assert (_language(compile_regex(json_string_except_regex(words))) ==
            _language(compile_terminal(STRING_REGEX, excluding=(_alternation(words),))))


def test_automata_are_trimmed_and_the_same_words_give_the_same_table() -> None:
    from constrained.automata.byte_dfa import _trim
    from constrained.automata.json_words import marker_dfa

    for regex in (json_words_regex(["created_at", "updated_at"]), json_string_except_regex(["created_at", "x"])):
        dfa = compile_regex(regex)
        assert (_trim(dfa.transitions, dfa.accepting) == dfa.transitions).all()   # every state can finish
        assert marker_dfa(regex, max_states=20_000).digest == dfa.digest


def test_markers_are_validated_and_malformed_ones_refused() -> None:
    validate_regex(json_words_regex(["a"]))
    assert parse_marker(json_string_except_regex(["b", "a", "a"])) == (True, ("a", "b"))
    for bad in ("(*json-words:!!)", "(*json-words:" + "e30=" + ")", "(*json-string-except:W10"):
        with pytest.raises(RegexError):
            validate_regex(bad)


@pytest.mark.parametrize("excluding", [False, True])
def test_the_state_limit_counts_every_state(excluding: bool) -> None:
    """``max_states`` bounds the table's rows exactly: an automaton of n states builds
    under a limit of n and raises `CompileLimitError` under n - 1."""
    from constrained.automata.json_words import words_automaton
    from constrained.errors import CompileLimitError

    words = ["id", "identifier", "name", "na\u00efve", "\U0001f600x"]
    table, _, _ = words_automaton(words, excluding=excluding, max_states=20_000)
    again, _, _ = words_automaton(words, excluding=excluding, max_states=len(table))
    assert again.tobytes() == table.tobytes()
    with pytest.raises(CompileLimitError):
        words_automaton(words, excluding=excluding, max_states=len(table) - 1)


@settings(max_examples=60, deadline=None)
@given(words=words_strategy)
def test_a_key_outside_the_words_embeds_the_string_automaton_and_shares_its_tables(words) -> None:
    """The states `embeds` names are the string automaton's own (same rows, staying among
    themselves), so their token tables are that automaton's: equal to a full scan."""
    from constrained import TokenVocabulary
    from constrained.engine.token_tables import TokenTables

    dfa = compile_regex(json_string_except_regex(words))
    other, lo, hi = dfa.embeds
    assert other.digest == compile_regex(STRING_REGEX).digest and lo >= 2
    assert (dfa.transitions[lo:hi] == other.transitions[lo:hi]).all()
    assert (dfa.accepting[lo:hi] == other.accepting[lo:hi]).all()
    assert dfa.transitions[lo:hi].max() < hi
    assert compile_regex(json_words_regex(words)).embeds is None
    vocab = TokenVocabulary.from_token_bytes([b'"', b'a"', b'"a', b'\\u', b'\\"', b'ab",', b'"}', b'x'], eos_ids=[])
    tables = TokenTables(vocab, None)
    for q in range(lo, hi):
        shared, scanned = tables.get(dfa, q), tables._scan_table(dfa, q)
        assert shared is tables.get(other, q)
        assert (shared.inside == scanned.inside).all()
        assert shared.cross_toks.tolist() == scanned.cross_toks.tolist()
        assert shared.cross_pos.tolist() == scanned.cross_pos.tolist()
