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

from constrained.errors import CompileLimitError, CompileTimeoutError, RegexError

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
    every state can still reach acceptance.

    A node of the words' character trie contributes the same states and edges, relative
    to its own state, wherever it is: one per child character and the partial escapes
    its children's spellings share (`_node_template`, memoised per sequence of child
    characters).  So the trie is walked once to number the states, and the edges of
    every node are placed in the table at once."""
    from constrained.automata.byte_dfa import START

    s_table, s_accepting, body = _string_automaton()
    # new states are numbered after the string automaton's (the words fall off into them)
    # or, for the words alone, after the dead state and the start
    n_string = s_table.shape[0] if excluding else 2
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
    string_state = [body] if excluding else [body, 0]   # per new state: the string automaton's state there
    state_of = [-1] * len(children)
    state_of[0] = n_string
    end = -1 if excluding else n_string + 1             # after a whole word's closing quote
    placed: list[tuple[int, int, tuple]] = []           # (node's state, its template's base, template)
    quote_rows: list[int] = []                          # states where a whole word was read
    for node in range(len(children)):                   # parents before children (ids grow downwards)
        here = state_of[node]
        kids = children[node]
        if kids:
            template = _node_template(tuple(kids))
            base = n_string + len(string_state) - 1     # template state r is base + r
            for child, r in zip(kids.values(), template[1]):
                state_of[child] = base + r
            string_state.extend(template[0])
            if n_string + len(string_state) > max_states:
                raise CompileLimitError("the keys need too many automaton states", limit="max_dfa_states",
                                        value=max_states)
            placed.append((here, base, template))
        if ends[node]:
            quote_rows.append(here)
    states = np.asarray(string_state, np.int64)
    if excluding:       # every byte the words do not continue falls off into the string automaton
        table = np.concatenate([s_table, s_table[states]])
        acc = np.concatenate([s_accepting, np.zeros(len(string_state), bool)])
    else:
        table = np.zeros((n_string + len(string_state), 256), np.int32)
        acc = np.zeros(len(table), bool)
        acc[end] = True
    if placed:
        counts = [len(t[2]) for _, _, t in placed]
        src = np.concatenate([t[2] for _, _, t in placed])
        byte = np.concatenate([t[3] for _, _, t in placed])
        dst = np.concatenate([t[4] for _, _, t in placed])
        here_e = np.repeat(np.asarray([h for h, _, _ in placed], np.int64), counts)
        base_e = np.repeat(np.asarray([b for _, b, _ in placed], np.int64), counts)
        table[np.where(src == 0, here_e, base_e + src), byte] = base_e + dst
    table[quote_rows, 0x22] = 0 if excluding else end
    table[START] = 0
    table[START, 0x22] = state_of[0]
    return table, acc, excluding or not skipped


@functools.lru_cache(maxsize=8192)
def _node_template(points: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...], np.ndarray, np.ndarray,
                                                     np.ndarray]:
    """What a trie node whose children are the characters ``points`` adds to
    `words_automaton`, relative to the node's own state 0: ``(string states, child
    states, src, byte, dst)``.  New states are numbered from 1 in the order they are made
    (each child's state, then the partial escapes of its spellings that no earlier child
    made: ``\\``, ``\\u``, ``\\u0``...), ``string states[r - 1]`` is the JSON string
    automaton's state in new state ``r``, ``child states[i]`` the state of the i-th child,
    and the edges ``src --byte--> dst`` (read-only arrays)."""
    s_table, _, body = _string_automaton()
    string_states = [body]                  # per local state (0: the node's own, inside a string)
    edges: list[dict[int, int]] = [{}]

    def new(s: int) -> int:
        edges.append({})
        string_states.append(s)
        return len(edges) - 1

    child_states = []
    for p in points:
        target_of_word = new(body)
        child_states.append(target_of_word)
        for spelling in spellings(p):
            cur = 0
            last = len(spelling) - 1
            for k, byte_set in enumerate(spelling):
                out = edges[cur]
                first = min(byte_set)
                old = out.get(first)
                if k == last:
                    target = target_of_word
                    if old is not None and old != target:
                        raise RegexError("JSON words: overlapping spellings",   # never for JSON spellings
                                         pattern="".join(map(chr, points))[:80])
                elif old is not None:                   # a partial escape shared with another character
                    target = old
                else:
                    target = new(int(s_table[string_states[cur], first]))
                for b in byte_set:
                    out[b] = target
                cur = target
    triples = [(s, b, t) for s, out in enumerate(edges) for b, t in out.items()]
    arrays = [np.asarray([x[i] for x in triples], np.int64) for i in range(3)]
    for a in arrays:
        a.setflags(write=False)
    return tuple(string_states[1:]), tuple(child_states), arrays[0], arrays[1], arrays[2]


def marker_dfa(regex: str, *, max_states: int, terminal: str | None = None):
    """The trimmed `ByteDFA` of a marker regex (`json_words_regex`, `json_string_except_regex`).

    Not minimised: states of the words that end alike (``created_at``, ``updated_at``)
    stay apart.  Nothing needs the minimum here: the automaton is trimmed (what makes
    masks exact), the same words always give the same table (so the same digest, and
    shared token tables), the states past the words are the string automaton's own
    (whose tables every grammar shares), and products with it are minimised as usual.
    Minimising was two thirds of building it."""
    from constrained.automata.byte_dfa import START, _finished, _text_digest, _trim, compile_regex

    excluding, words = parse_marker(regex)
    try:
        table, accepting, trimmed = words_automaton(words, excluding=excluding, max_states=max_states)
    except CompileTimeoutError:
        raise
    except CompileLimitError as e:
        raise CompileLimitError(e.reason, limit=e.limit, value=e.value, terminal=terminal) from None
    if not trimmed:
        table = _trim(table, accepting)
    # the same words always give the same table: the marker text identifies it, where
    # hashing the table read every live entry (the string automaton's ~150 per state of
    # every word prefix: milliseconds for a few dozen keys)
    digest = _text_digest("json-words", regex)
    # the string automaton's states past START are its own (words fall off into them)
    string = compile_regex(STRING_REGEX)
    embeds = (string, START + 1, string.num_states) if excluding else None
    return _finished(regex, np.ascontiguousarray(table, dtype=np.int32), accepting, digest=digest, embeds=embeds)
