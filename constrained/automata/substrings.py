"""Byte automata of a text's substrings (factor automata), for grounded values.

A grounded JSON value must copy characters of an input text.  Its terminal is the
string terminal of its schema intersected (`compile_terminal`'s ``also``) with the
automaton built here: the suffix automaton of the text over characters (at most
``2n - 1`` states, built in linear time; a state reached from the root spells a
substring), each character edge spelled in bytes and minimised.

Three modes:

* ``json`` (``quoted=True``): a JSON string ``"..."`` whose characters form a *span*
  of the text — a non-empty substring that neither starts nor ends with whitespace
  (``str.isspace``) — each character in its canonical JSON spelling
  (``json.dumps(c, ensure_ascii=False)``: UTF-8, ``\\"``, ``\\\\``, ``\\n``,
  ``\\u001f``...).  The empty string is a substring of every text and so grounds
  nothing, and a value padded with the text's spaces (``"Facebook. "``) is never the
  value meant; its trimmed span is one too.  The root accepts nothing and has no
  whitespace edge; a state accepts where its strings end with a non-whitespace
  character (all strings of a suffix-automaton state end with the same character).
  One spelling per character is a sound restriction of the JSON text (the value is
  the same) and keeps the automaton linear in the text.
* ``json-sentences`` (``sentences=True``): spans inside one sentence of the text,
  without the character that ends it (`sentence_ends`): the automaton of the text
  with each sentence end replaced by a character the text lacks, whose edges are
  dropped.  ``"Use Facebook. We..."`` grounds ``"Facebook"``, not ``"Facebook."`` or
  ``"Facebook. We"``.
* ``raw`` (``quoted=False``): the UTF-8 bytes of any substring (llguidance's
  ``%regex {"substring_chars": ...}`` in lark grammars).

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


MODES = ("json", "json-sentences", "raw")


def substrings_regex(text: str, *, quoted: bool = True, sentences: bool = False) -> str:
    """The marker regex standing for the spans of ``text`` (``quoted``; within its
    sentences with ``sentences``) or its substrings (raw; see the module docstring).

    Example:
        >>> substrings_regex("ab").startswith(MARKER)
        True
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, not {type(text).__name__}")
    if sentences and not quoted:
        raise ValueError("sentences=True is a mode of quoted spans")
    data = base64.b64encode(text.encode("utf-8", "surrogatepass")).decode("ascii")
    return f"{MARKER}{('json-sentences' if sentences else 'json') if quoted else 'raw'}:{data})"


ABBREVIATIONS = frozenset("mr mrs ms dr prof st sr jr mt ft inc ltd co corp vs etc no nr vol fig approx dept est "
                          "jan feb mar apr jun jul aug sep sept oct nov dec ave rd blvd".split())
"""Words whose period does not end a sentence (``Dr. Smith``, ``St. Louis``); so does
a single letter's (``J. Smith``, ``U.S. Army``)."""


def sentence_ends(text: str) -> list[int]:
    """Indices of the characters that end a sentence of ``text``: a ``.``, ``!`` or ``?``
    followed by the end of the text or by whitespace and then an uppercase letter, a
    digit or a quote, not the period of an abbreviation (`ABBREVIATIONS`) or of a
    word of a single letter (an initial: ``J. Doe``; not the end of ``us-east-1a.``
    or ``12:00:00Z.``).

    Example:
        >>> t = "Ship to St. Louis. Its id: e.g. 7. Ask J. Doe! Done."
        >>> [t[:i + 1][-8:] for i in sentence_ends(t)]
        ['. Louis.', ' e.g. 7.', ' J. Doe!', 'e! Done.']
        >>> t = "Zone us-east-1a. At 12:00:00Z. U.S. Army."
        >>> [t[:i + 1][-6:] for i in sentence_ends(t)]
        ['st-1a.', '0:00Z.', ' Army.']
    """
    out = []
    for i, c in enumerate(text):
        if c not in ".!?":
            continue
        j = i + 1
        if j < len(text):
            if not text[j].isspace():
                continue
            while j < len(text) and text[j].isspace():
                j += 1
            if j < len(text) and not (text[j].isupper() or text[j].isdigit() or text[j] in "\"'\u201c("):
                continue
        if c == ".":
            k = i
            while k > 0 and text[k - 1].isalnum():
                k -= 1
            word = text[k:i]                  # the whole word: "1a" and "00Z" are not initials
            if (len(word) == 1 and word.isalpha()) or word.lower() in ABBREVIATIONS:
                continue
        out.append(i)
    return out


def is_substrings_regex(regex: str) -> bool:
    """Whether ``regex`` is a marker of `substrings_regex`."""
    return isinstance(regex, str) and regex.startswith(MARKER)


def parse_substrings_regex(regex: str) -> tuple[str, bool]:
    """``(text, quoted)`` of a marker; `RegexError` if it is malformed."""
    text, mode = _parse(regex)
    return text, mode != "raw"


def _parse(regex: str) -> tuple[str, str]:
    try:
        body = regex[len(MARKER):]
        if not body.endswith(")"):
            raise ValueError("no closing parenthesis")
        mode, data = body[:-1].split(":", 1)
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}")
        text = base64.b64decode(data.encode("ascii"), validate=True).decode("utf-8", "surrogatepass")
    except (ValueError, UnicodeError) as e:
        raise RegexError(f"malformed substring marker: {e}", pattern=regex[:80]) from None
    return text, mode


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
    text, mode = _parse(regex)
    return _substrings_dfa(regex, text, mode, max_states, terminal)


@functools.lru_cache(maxsize=64)
def _substrings_dfa(regex: str, text: str, mode: str, max_states: int, terminal: str | None):
    from constrained.automata.byte_dfa import DEAD, START, _finished, _minimize

    quoted = mode != "raw"          # JSON spans (quoted, trimmed, non-empty) or raw substrings
    cut = None                 # with sentences: a character not in the text stands for each sentence end
    if mode == "json-sentences":
        cut = next(chr(c) for c in range(0xE000, 0x110000) if chr(c) not in text)
        stops = set(sentence_ends(text))
        text = "".join(cut if i in stops else c for i, c in enumerate(text))
    sam = suffix_automaton(text)
    if 2 * len(sam) > 8 * max_states:
        raise CompileLimitError("the text is too long for a substring automaton", limit="max_dfa_states",
                                value=max_states, terminal=terminal)
    spelling = {c: canonical_spelling(c) if quoted else c.encode("utf-8", "surrogatepass")
                for c in set(text) if c != cut}
    # a span is non-empty and trimmed: the root accepts nothing and has no whitespace edge,
    # and a state accepts where its strings (which all end with the same character, the
    # one on its incoming edges) do not end with whitespace
    last = [""] * len(sam)
    for out in sam:
        for c, target in out.items():
            last[target] = c
    ends = [not quoted or (q > 0 and not last[q].isspace()) for q in range(len(sam))]
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
            if c == cut or (quoted and q == 0 and c.isspace()):
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
