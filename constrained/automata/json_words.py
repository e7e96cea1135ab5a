"""Byte automata of JSON strings equal to one of a few words, or to none of them.

An object schema's declared keys are JSON strings in every spelling (``"id"``,
``"\\u0069d"``, ``"\\u0069\\u0044"``...), and a key that is not declared is *any*
JSON string but those.  Written as regexes, the second is a difference of two
automata: the key alternation is parsed, determinised and multiplied with the
string automaton for every object of every fresh schema (tens of milliseconds
for a dozen keys, most of a fresh schema's compile).  Built here directly:

* the words' spellings form a DAG: one node per (word prefix, partial escape);
  a character's spellings are its UTF-8 bytes (unless it is ``"``, ``\\`` or a
  control character), the short escapes ``\\" \\\\ \\/ \\b \\f \\n \\r \\t``, and
  ``\\uXXXX`` with hex digits of either case (a surrogate pair for an astral
  character); a lone surrogate has no spelling;
* for *none of the words*, each DAG node also carries the state the plain JSON
  string automaton is in there; every byte the DAG does not continue falls off
  into that automaton (the string can no longer be a word), and the closing
  quote is refused exactly where a whole word was read.

The result is trimmed but not minimised (`marker_dfa` says why); minimised, it equals
the automaton the regex route builds for the same language (the tests check that).

The automata travel inside grammars as *marker regexes* (`json_words_regex`,
`json_string_except_regex`), which `compile_regex` recognises, as it does the
substring markers of `constrained.automata.substrings`.

Example:
    >>> from constrained.automata.byte_dfa import compile_regex
    >>> key = compile_regex(json_words_regex(["id"]))
    >>> [key.matches(s) for s in (b'"id"', b'"\\\\u0069d"', b'"\\\\u0049d"', b'"idx"')]
    [True, True, False, False]
    >>> extra = compile_regex(json_string_except_regex(["id", "name"]))
    >>> [extra.matches(s) for s in (b'"idx"', b'"i"', b'"id"', b'"na\\\\u006De"', b'""')]
    [True, True, False, False, True]
"""

from __future__ import annotations

import base64
import functools
import json
from collections.abc import Sequence

import numpy as np

from constrained.errors import CompileLimitError, RegexError

WORDS_MARKER = "(*json-words:"
EXCEPT_MARKER = "(*json-string-except:"
# the JSON string automaton the words fall off into (any JSON string)
STRING_REGEX = r'"(?:[^"\\\x00-\x1f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"'
_SHORT = {0x22: b'"', 0x5C: b"\\", 0x2F: b"/", 0x08: b"b", 0x0C: b"f", 0x0A: b"n", 0x0D: b"r", 0x09: b"t"}
_HEX = "0123456789abcdef"

ByteSets = tuple[frozenset[int], ...]


def json_words_regex(words: Sequence[str]) -> str:
    """A marker regex for the JSON strings spelling one of ``words`` (every spelling)."""
    return WORDS_MARKER + _encode(words) + ")"


def json_string_except_regex(words: Sequence[str]) -> str:
    """A marker regex for the JSON strings spelling none of ``words``."""
    return EXCEPT_MARKER + _encode(words) + ")"


def parse_marker(regex: str) -> tuple[bool, tuple[str, ...]]:
    """``(except, words)`` of a marker regex; `RegexError` if it is malformed."""
    excluding = regex.startswith(EXCEPT_MARKER)
    head = EXCEPT_MARKER if excluding else WORDS_MARKER
    if not regex.startswith(head) or not regex.endswith(")"):
        raise RegexError("malformed JSON words marker", pattern=regex[:80])
    try:
        words = json.loads(base64.b64decode(regex[len(head):-1], validate=True).decode("utf-8", "surrogatepass"))
    except (ValueError, UnicodeDecodeError) as e:
        raise RegexError(f"malformed JSON words marker ({e})", pattern=regex[:80]) from None
    if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
        raise RegexError("malformed JSON words marker (not a list of strings)", pattern=regex[:80])
    return excluding, tuple(words)


def _encode(words: Sequence[str]) -> str:
    text = json.dumps(sorted(set(words)), ensure_ascii=True)      # \\ud800 for lone surrogates
    return base64.b64encode(text.encode("ascii")).decode("ascii")


@functools.lru_cache(maxsize=4096)
def spellings(code_point: int) -> tuple[ByteSets, ...]:
    """Every JSON spelling of one character, each as a sequence of byte sets (a hex
    letter is the set of its two cases)."""
    if 0xD800 <= code_point <= 0xDFFF:
        return ()                                   # a lone surrogate is no character
    out: list[ByteSets] = []
    if code_point >= 0x20 and code_point not in (0x22, 0x5C):
        out.append(tuple(frozenset((b,)) for b in chr(code_point).encode("utf-8")))
    backslash = frozenset((0x5C,))
    if code_point in _SHORT:
        out.append((backslash, frozenset(_SHORT[code_point])))
    if code_point <= 0xFFFF:
        out.append((backslash,) + _u_escape(code_point))
    else:
        high, low = divmod(code_point - 0x10000, 0x400)
        out.append((backslash,) + _u_escape(0xD800 + high) + (backslash,) + _u_escape(0xDC00 + low))
    return tuple(out)


def _u_escape(unit: int) -> ByteSets:
    digits = f"{unit:04x}"
    return (frozenset((0x75,)),) + tuple(frozenset({ord(d), ord(d.upper())}) for d in digits)


@functools.lru_cache(maxsize=1)
def _string_automaton() -> tuple[np.ndarray, np.ndarray, int]:
    """The JSON string automaton's table, accepting flags and its body state (after ``"``)."""
    from constrained.automata.byte_dfa import START, compile_regex

    dfa = compile_regex(STRING_REGEX)
    return dfa.transitions, dfa.accepting, int(dfa.transitions[START, 0x22])


def words_automaton(words: Sequence[str], *, excluding: bool,
                    max_states: int) -> tuple[np.ndarray, np.ndarray, bool]:
    """``(table, accepting, trimmed)`` (not minimised) of the JSON strings spelling one of
    ``words`` (``excluding=False``) or none of them (see the module docstring); ``trimmed``:
    every state can still reach acceptance."""
    from constrained.automata.byte_dfa import START

    s_table, s_accepting, body = _string_automaton()
    # new states are numbered after the string automaton's (the words fall off into them)
    # or, for the words alone, after the dead state and the start
    n_string = s_table.shape[0] if excluding else 2
    edges: list[dict[int, int]] = []     # per new state: byte -> target (the DAG's own bytes)
    string_state: list[int] = []         # per new state: the string automaton's state there

    def new(s: int) -> int:
        if n_string + len(edges) >= max_states:
            raise CompileLimitError("the keys need too many automaton states", limit="max_dfa_states",
                                    value=max_states)
        edges.append({})
        string_state.append(s)
        return n_string + len(edges) - 1

    # the word trie over characters: node -> {character: child}, and which nodes end a word
    children: list[dict[int, int]] = [{}]
    ends = [False]
    skipped = False
    for word in words:
        points = [ord(c) for c in word]
        if any(0xD800 <= p <= 0xDFFF for p in points):
            skipped = True
            continue                                  # no spelling at all
        node = 0
        for p in points:
            nxt = children[node].get(p)
            if nxt is None:
                nxt = children[node][p] = len(children)
                children.append({})
                ends.append(False)
            node = nxt
        ends[node] = True
    state_of = [-1] * len(children)
    state_of[0] = new(body)
    end = new(0) if not excluding else -1            # after a whole word's closing quote
    for node in range(len(children)):               # parents before children (ids grow downwards)
        here = state_of[node]
        for p, child in children[node].items():
            if state_of[child] < 0:
                state_of[child] = new(body)
            target_of_word = state_of[child]
            for spelling in spellings(p):
                cur = here
                last = len(spelling) - 1
                for k, byte_set in enumerate(spelling):
                    out = edges[cur - n_string]
                    first = min(byte_set)
                    old = out.get(first)
                    if k == last:
                        target = target_of_word
                        if old is not None and old != target:
                            raise RegexError("JSON words: overlapping spellings",   # never for JSON spellings
                                             pattern=json.dumps(list(words))[:200])
                    elif old is not None:                   # a partial escape shared with another character
                        target = old
                    else:
                        target = new(int(s_table[string_state[cur - n_string], first]))
                    for b in byte_set:
                        out[b] = target
                    cur = target
        if ends[node]:
            edges[here - n_string][0x22] = 0 if excluding else end
    n = n_string + len(edges)
    states = np.asarray(string_state, np.int64)
    if excluding:       # every byte the words do not continue falls off into the string automaton
        table = np.concatenate([s_table, s_table[states]])
        acc = np.concatenate([s_accepting, np.zeros(len(edges), bool)])
    else:
        table = np.zeros((n, 256), np.int32)
        acc = np.zeros(n, bool)
        acc[end] = True
    rows = [n_string + i for i, out in enumerate(edges) for _ in out]
    columns = [b for out in edges for b in out]
    targets = [t for out in edges for t in out.values()]
    table[rows, columns] = targets
    table[START] = 0
    table[START, 0x22] = state_of[0]
    return table, acc, excluding or not skipped


def marker_dfa(regex: str, *, max_states: int, terminal: str | None = None):
    """The trimmed `ByteDFA` of a marker regex (`json_words_regex`, `json_string_except_regex`).

    Not minimised: states of the words that end alike (``created_at``, ``updated_at``)
    stay apart.  Nothing needs the minimum here: the automaton is trimmed (what makes
    masks exact), the same words always give the same table (so the same digest, and
    shared token tables), the states past the words are the string automaton's own
    (whose tables every grammar shares), and products with it are minimised as usual.
    Minimising was two thirds of building it."""
    from constrained.automata.byte_dfa import _finished, _trim

    excluding, words = parse_marker(regex)
    try:
        table, accepting, trimmed = words_automaton(words, excluding=excluding, max_states=max_states)
    except CompileLimitError as e:
        raise CompileLimitError(e.reason, limit=e.limit, value=e.value, terminal=terminal) from None
    if not trimmed:
        table = _trim(table, accepting)
    return _finished(regex, np.ascontiguousarray(table, dtype=np.int32), accepting)
