"""`warm_up`: build at start what every later request over a vocabulary shares.

A server compiles a fresh grammar per request, but some of the work behind the
first masks does not depend on the request, only on the vocabulary or on the
library itself:

* the vocabulary's byte trie and its flat arrays (`constrained.engine.token_trie`);
* the compiled loops: the trie walks (`constrained.engine.trie_walk`), the crossing
  scan (`constrained.engine.token_scan`) and the OR of token ids into masks
  (`constrained.masks`); numba loads their machine code from the on-disk cache, or
  compiles it the first time on a machine;
* the token tables of the string bodies every JSON Schema grammar reads (any JSON
  string, a string of Unicode scalar values, a line of them): ~5 ms each on a 128k
  vocabulary, paid by the first request whose string reaches one;
* the token tables of strings with a length bound counted by the automaton (a
  ``minLength`` or ``maxLength`` of 24): one per character, ~6 ms each, and every
  shorter bound's states have the same residual languages, so they share them
  (`constrained.engine.token_tables.SHARE_COUNTED_MAX_STATES`);
* the token classes the JSON value checks read (`constrained.json_schema.value_checks`),
  and their format checker (`constrained.json_schema.validation.format_checker`: ~0.2 s
  of regexes, paid by the first schema whose values a format check reads);
* the automata of the built-in string formats (``date-time``, ``hostname``, ``uri``,
  ...: `constrained.json_schema.formats`), which are the same in every schema;
* the structure every JSON Schema grammar shares: the punctuation terminals with
  their optional blanks (``{``, ``:``, ``,``, ``}``, ``[``, ``]``; ~1 ms each to build,
  for their bounded runs of blanks), numbers and literals, the token tables of their
  states and the crossing sets of the tokens that read past them (``": "`` into a
  value): ~60 ms on a 128k vocabulary, ~15 ms of it paid by the first request otherwise.

Without a warm-up the first request that needs one of them pays for it (a
hostname format alone is ~0.4 s).  `warm_up` pays once, up front, and says how
long each part took.  Everything it builds lives in process-wide caches, so one
call serves every later `compile_grammar` over the vocabulary, in every thread.

Example:
    >>> from constrained import TokenVocabulary, warm_up
    >>> vocab = TokenVocabulary.from_token_bytes([b"a", b"1", b'"', b"{", b"}", b":", b",", b""], eos_ids=[7])
    >>> report = warm_up(vocab, formats=("date",))
    >>> sorted(report)
    ['counted strings', 'formats', 'json structure', 'string bodies', 'trie', 'value checks']
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from constrained.errors import ConstrainedError

_DEFAULT: Any = object()      # compile_grammar's default token-table cache directory

_CHECKED_SCHEMA = {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}
# the string forms the JSON Schema compiler emits whatever the schema: any JSON string, a
# string of Unicode scalar values (a length bound, a format, a pattern's dotall `.`) and a
# line of them (a pattern's `.`); states of other strings share their body's table by
# residual language (`constrained.engine.token_tables`)
_STRINGS_SCHEMA = {"type": "array", "items": {"anyOf": [{"type": "string"}, {"type": "string", "minLength": 1},
                                                        {"type": "string", "pattern": "^.*$"}]}}


_COUNTED_STRINGS = ("minLength", "maxLength")
# a value of every JSON type, walked token by token in the compact spelling and in
# Python's (blanks after ``:`` and ``,``): the structural automata every JSON Schema
# grammar reads, and the tables and crossing sets of their states
_STRUCTURE_SCHEMA = {"type": "object", "properties": {
    "s": {"type": "string"}, "n": {"type": "number"}, "i": {"type": "integer"}, "b": {"type": "boolean"},
    "z": {"type": "null"}, "a": {"type": "array", "items": {"type": "string"}}, "o": {"type": "object"}}}
_STRUCTURE_INSTANCE = {"s": "a b", "n": -1.5, "i": 2, "b": True, "z": None, "a": ["x", "y"], "o": {"k": [1, {}]}}


def warm_up(vocab, *, formats: bool | Iterable[str] = True,
            cache_dir: Any = _DEFAULT) -> dict[str, float]:
    """Build the vocabulary's shared structures and the format automata now; returns the
    seconds each part took (``trie``, ``value checks``, ``string bodies``, ``counted strings``,
    ``json structure``, ``formats``).

    ``formats``: True for every built-in format, False for none, or the names to build.
    ``cache_dir``: the token-table cache directory later compiles use (`compile_grammar`'s
    ``cache_dir``, and its default when not given; the trie is shared whatever it is).  Formats too large for one automaton
    (``email``) are left to validation by the compiler either way; building them here only
    settles that once."""
    from constrained.automata.byte_dfa import START, compile_regex
    from constrained.automata.json_words import json_string_except_regex
    from constrained.engine.compiled import compile_grammar
    from constrained.engine.token_tables import TokenTables, default_cache_dir, residual_digest
    from constrained.grammar.ir import Grammar
    from constrained.json_schema.compile.strings import MAX_COUNTED_LENGTH
    from constrained.json_schema.validation import format_checker
    from constrained.json_schema.value_checks import vocabulary_profiles
    from constrained.masks import _compiled_or_bits

    report: dict[str, float] = {}
    t0 = time.perf_counter()
    directory = default_cache_dir() if cache_dir is _DEFAULT else (None if cache_dir is None else Path(cache_dir))
    tables = TokenTables.for_vocabulary(vocab, directory)
    tables.trie.scan_ids(compile_regex("[a-z]"), 1)        # the flat trie, and the compiled walk loaded
    tables.get(compile_regex("[a-z]"), 1)                   # ... and the walk that makes a table in one call
    key = compile_regex(json_string_except_regex(["a"]))    # ... and the one that derives a table (a key
    tables.get(key, key.step(START, ord('"')))              # that is not "a", after its quote; the string body)
    _compiled_or_bits()                                     # the compiled loop that ORs token ids into masks
    crossing = tables.crossing.intern_set(np.zeros(1, np.int64), np.zeros(1, np.int64))
    crossing.scan(compile_regex("[a-z]"))                   # (and the crossing scan's)
    literal = compile_regex('"(?:a|\\\\u0061)"')             # a key literal: a byte-wide table, whose
    tables.get(literal, START)                              # walks are compiled versions of their own
    crossing.scan(literal)
    residual_digest(key, START)                             # the walk that identifies residual languages
    report["trie"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    matcher = compile_grammar(Grammar.from_json_schema(_CHECKED_SCHEMA), vocab, cache_dir=directory).matcher()
    matcher.mask()                                          # value checks' token classes for the vocabulary
    vocabulary_profiles(vocab).plain_code_points()          # ... and the characters of plain string tokens
    vocabulary_profiles(vocab).begun_characters()           # ... and those any token begins in a string
    format_checker()                                        # the value checks' format regexes (~0.2 s)
    report["value checks"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    for dfa in _string_automata(_STRINGS_SCHEMA):           # a string body's table: a third of the trie
        tables.get(dfa, dfa.step(dfa.step(START, ord('"')), ord("a")))
    report["string bodies"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    for bound in _COUNTED_STRINGS:      # the tables after each character of the longest counted strings:
        (dfa,) = _string_automata({"type": "string", bound: MAX_COUNTED_LENGTH})
        q = dfa.step(START, ord('"'))   # every shorter bound's states have the same residuals
        for _ in range(MAX_COUNTED_LENGTH + 1):
            tables.get(dfa, q)
            q = dfa.step(q, ord("a"))
    report["counted strings"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    compiled = compile_grammar(Grammar.from_json_schema(_STRUCTURE_SCHEMA), vocab, cache_dir=directory)
    for separators in ((",", ":"), (", ", ": ")):
        _walk(compiled.matcher(), json.dumps(_STRUCTURE_INSTANCE, separators=separators))
    report["json structure"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    for name in _format_names(formats):
        try:
            Grammar.from_json_schema({"type": "string", "format": name})
        except ConstrainedError:
            pass          # a format the options refuse: nothing to build
    report["formats"] = time.perf_counter() - t0
    return report


def _walk(matcher, text: str) -> None:
    """Ask ``matcher`` for the mask before each token spelling ``text`` (`completion_tokens`:
    the vocabulary's encoding, else its greedy one) and read the token; nothing where no
    spelling is accepted."""
    from constrained.engine.completion import completion_tokens

    for token in completion_tokens(matcher, text.encode("utf-8")) or ():
        matcher.mask()
        matcher.advance(token)


def _string_automata(schema: dict) -> list:
    """The automata of the string terminals ``schema`` compiles to."""
    from constrained.automata.byte_dfa import compile_terminal
    from constrained.grammar.ir import Grammar

    return [compile_terminal(t.regex, t.also, t.excluding) for t in Grammar.from_json_schema(schema).terminals
            if t.regex.startswith('"')]


def _format_names(formats: bool | Iterable[str]) -> list[str]:
    from constrained.json_schema.formats import FORMAT_REGEXES

    if formats is True:
        return sorted(FORMAT_REGEXES)
    if formats is False:
        return []
    return [str(f) for f in formats]


__all__ = ["warm_up"]
