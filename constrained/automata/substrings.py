"""Byte automata of a text's substrings (factor automata), for grounded values.

A grounded JSON value must copy characters of an input text.  Its terminal is the
string terminal of its schema intersected (`compile_terminal`'s ``also``) with the
automaton built here: the suffix automaton of the text over characters (at most
``2n - 1`` states, built in linear time; a state reached from the root spells a
substring), each character edge spelled in bytes and minimised.

The automaton accepts the text's *spans*: its non-empty substrings that neither start
nor end with whitespace (``str.isspace``).  The empty string is a substring of every
text and so grounds nothing, and a value padded with the text's spaces (``"Facebook.
"``) is never the value meant; its trimmed span is one too.  The root accepts nothing
and has no whitespace edge; a state accepts where its strings end with a
non-whitespace character (all strings of a suffix-automaton state end with the same
character).

Two spellings:

* ``quoted=True``: a JSON string ``"..."`` whose characters form a span of the
  text, each character in its canonical JSON spelling (``json.dumps(c,
  ensure_ascii=False)``: UTF-8, ``\\"``, ``\\\\``, ``\\n``, ``\\u001f``...).  One
  spelling per character is a sound restriction of the JSON text (the value is the
  same) and keeps the automaton linear in the text.
* ``quoted=False``: the UTF-8 bytes of a span, raw (for numbers, whose JSON
  spelling is their text).

The automaton travels inside a grammar as a *marker regex*, ``substrings_regex(text)``:
a string `compile_regex` recognises and builds with `substrings_dfa` (no Python
regex parser sees it; ``re`` itself refuses the marker, so no tool can silently read
it as something else).  The text is encoded in the marker, so a grammar holding it is
self-contained (hashes, caches, other processes).

Example:
    >>> from constrained.automata.byte_dfa import compile_regex
    >>> dfa = compile_regex(substrings_regex('say "hi" now'))
    >>> dfa.matches(b'"hi"'), dfa.matches(b'"\\\\"hi\\\\""'), dfa.matches(b'"hey"'), dfa.matches(b'""')
    (True, True, False, False)
    >>> dfa.matches(b'"hi\\\\" now"'), dfa.matches(b'" now"'), dfa.matches(b'"now "')
    (True, False, False)
"""

from __future__ import annotations

import base64
import functools
import json

import numpy as np

from constrained.errors import CompileLimitError, RegexError

MARKER = "(*substrings:"
"""Start of a substring marker regex (``(*`` is a syntax error for Python's ``re``)."""


def substrings_regex(text: str, *, quoted: bool = True) -> str:
    """The marker regex standing for the substrings of ``text`` (see the module docstring).

    Example:
        >>> substrings_regex("ab").startswith(MARKER)
        True
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, not {type(text).__name__}")
    data = base64.b64encode(text.encode("utf-8", "surrogatepass")).decode("ascii")
    return f"{MARKER}{'json' if quoted else 'raw'}:{data})"


def is_substrings_regex(regex: str) -> bool:
    """Whether ``regex`` is a marker of `substrings_regex`."""
    return isinstance(regex, str) and regex.startswith(MARKER)


def parse_substrings_regex(regex: str) -> tuple[str, bool]:
    """``(text, quoted)`` of a marker; `RegexError` if it is malformed."""
    try:
        body = regex[len(MARKER):]
        if not body.endswith(")"):
            raise ValueError("no closing parenthesis")
        mode, data = body[:-1].split(":", 1)
        if mode not in ("json", "raw"):
            raise ValueError(f"unknown mode {mode!r}")
        text = base64.b64decode(data.encode("ascii"), validate=True).decode("utf-8", "surrogatepass")
    except (ValueError, UnicodeError) as e:
        raise RegexError(f"malformed substring marker: {e}", pattern=regex[:80]) from None
    return text, mode == "json"


def suffix_automaton(text: str) -> list[dict[str, int]]:
    """The suffix automaton of ``text`` over characters: ``edges[q]`` maps a character
    to the next state; state 0 is the root.  Every path from the root spells a
    substring, and every substring has one path (Blumer et al.; linear construction).

    Example:
        >>> len(suffix_automaton("abcbc"))
        8
    """
    edges: list[dict[str, int]] = [{}]
    link = [-1]
    length = [0]
    last = 0
    for c in text:
        cur = len(edges)
        edges.append({})
        length.append(length[last] + 1)
        link.append(0)
        p = last
        while p != -1 and c not in edges[p]:
            edges[p][c] = cur
            p = link[p]
        if p != -1:
            q = edges[p][c]
            if length[p] + 1 == length[q]:
                link[cur] = q
            else:
                clone = len(edges)
                edges.append(dict(edges[q]))
                length.append(length[p] + 1)
                link.append(link[q])
                while p != -1 and edges[p].get(c) == q:
                    edges[p][c] = clone
                    p = link[p]
                link[q] = link[cur] = clone
        last = cur
    return edges


def canonical_spelling(c: str) -> bytes:
    """The bytes of character ``c`` inside ``json.dumps(..., ensure_ascii=False)``.

    Example:
        >>> canonical_spelling('"'), canonical_spelling("é"), canonical_spelling("\\x01")
        (b'\\\\"', b'\\xc3\\xa9', b'\\\\u0001')
    """
    return json.dumps(c, ensure_ascii=False)[1:-1].encode("utf-8", "surrogatepass")


def substrings_dfa(regex: str, *, max_states: int, terminal: str | None = None):
    """The trimmed, minimal `ByteDFA` of a marker regex (see `substrings_regex`);
    `CompileLimitError` past ``max_states`` states."""
    text, quoted = parse_substrings_regex(regex)
    return _substrings_dfa(regex, text, quoted, max_states, terminal)


@functools.lru_cache(maxsize=64)
def _substrings_dfa(regex: str, text: str, quoted: bool, max_states: int, terminal: str | None):
    from constrained.automata.byte_dfa import DEAD, START, _finished, _minimize

    sam = suffix_automaton(text)
    if 2 * len(sam) > 8 * max_states:
        raise CompileLimitError("the text is too long for a substring automaton", limit="max_dfa_states",
                                value=max_states, terminal=terminal)
    spelling = {c: canonical_spelling(c) if quoted else c.encode("utf-8", "surrogatepass")
                for c in set(text)}
    # a span is non-empty and trimmed: the root accepts nothing and has no whitespace edge,
    # and a state accepts where its strings (which all end with the same character, the
    # one on its incoming edges) do not end with whitespace
    last = [""] * len(sam)
    for out in sam:
        for c, target in out.items():
            last[target] = c
    ends = [q > 0 and not last[q].isspace() for q in range(len(sam))]
    # byte states: 0 dead, 1 start; quoted: start -"-> root, an accepting SAM state -"-> final
    edges: list[dict[int, int]] = [{}, {}]
    accepting = [False, False]
    base = 1 if not quoted else 2                  # SAM state q is byte state base + q
    if quoted:
        edges[START][ord('"')] = base
    edges.extend({} for _ in sam)
    accepting.extend([False] * len(sam))
    if not quoted:
        for q, end in enumerate(ends):
            accepting[base + q] = end
    final = None
    if quoted:
        final = len(edges)
        edges.append({})
        accepting.append(True)
    for q, out in enumerate(sam):
        node_of: dict[bytes, int] = {}
        here = base + q
        if quoted and ends[q]:
            edges[here][ord('"')] = final          # type: ignore[assignment]
        for c, target in out.items():
            if q == 0 and c.isspace():
                continue
            b = spelling[c]
            node = here
            for i in range(len(b) - 1):
                prefix = b[:i + 1]
                nxt = node_of.get(prefix)
                if nxt is None:
                    nxt = node_of[prefix] = len(edges)
                    edges.append({})
                    accepting.append(False)
                    edges[node][b[i]] = nxt
                node = nxt
            edges[node][b[-1]] = base + target
        if len(edges) > 8 * max_states:
            raise CompileLimitError("the text is too long for a substring automaton", limit="max_dfa_states",
                                    value=max_states, terminal=terminal)
    table = np.zeros((len(edges), 256), np.int32)
    rows = [q for q, out in enumerate(edges) for _ in out]
    cols = [b for out in edges for b in out]
    targets = [t for out in edges for t in out.values()]
    table[rows, cols] = targets
    table[DEAD] = DEAD
    acc = np.array(accepting, bool)
    table, acc = _minimize(table, acc)
    if table.shape[0] > max_states:
        raise CompileLimitError("the text is too long for a substring automaton", limit="max_dfa_states",
                                value=max_states, terminal=terminal)
    return _finished(regex, table, acc)
