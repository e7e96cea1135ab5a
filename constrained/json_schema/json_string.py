"""Regexes over JSON string *text* for a language of decoded strings.

A JSON Schema string keyword (``pattern``, ``minLength``, ``format``, ...) talks
about the *decoded* string, while a grammar constrains the JSON *text*.  Given a
Python regex over characters, `json_string_body_regex` rewrites its AST (from
`constrained.automata.regex_parser.parse_regex`) so that every character node
accepts every valid JSON encoding of its characters:

* raw, unless the character is ``"``, ``\\`` or a control character U+0000-U+001F;
* ``\\uXXXX`` with hex digits of either case (BMP characters), or a surrogate pair
  ``\\uD8xx\\uDCxx`` (either case) for astral characters;
* the short escapes ``\\" \\\\ \\/ \\b \\f \\n \\r \\t``.

So ``json.loads`` of any accepted text full-matches the character regex, and every
encoding of every such string is accepted.  Lone surrogates are not characters
(``\\ud800`` alone is never accepted).  Each encoded character counts as one
character, so counted repetitions (``minLength``/``maxLength``) count code points.

Example:
    >>> import re
    >>> rx = json_string_regex("[a-c]+")
    >>> [bool(re.fullmatch(rx, t)) for t in ['"ab"', '"\\\\u0061"', '"\\\\U0061"', '""']]
    [True, True, False, False]
"""

from __future__ import annotations

import functools

from constrained.automata.regex_parser import merge_ranges, normalize_ranges, parse_regex
from constrained.json_schema.ecma_regex import EMPTY, EPS, mk_alt, mk_rep, mk_seq, regex_from_ast

Ranges = tuple[tuple[int, int], ...]
Node = tuple

_SHORT_ESCAPES = {0x22: '"', 0x5C: "\\", 0x2F: "/", 0x08: "b", 0x0C: "f", 0x0A: "n", 0x0D: "r", 0x09: "t"}
_NOT_RAW: Ranges = ((0x00, 0x1F), (0x22, 0x22), (0x5C, 0x5C))
_BACKSLASH: Node = ("chars", ((0x5C, 0x5C),))
_U: Node = ("chars", ((0x75, 0x75),))


def _lit(cp: int) -> Node:
    return ("chars", ((cp, cp),))


def _intersect(ranges: Ranges, lo: int, hi: int) -> Ranges:
    """The part of ``ranges`` inside ``[lo, hi]``."""
    return tuple((max(a, lo), min(b, hi)) for a, b in ranges if a <= hi and b >= lo)


def _subtract(ranges: Ranges, remove: Ranges) -> Ranges:
    out: list[tuple[int, int]] = []
    for a, b in ranges:
        cur = a
        for c, d in remove:
            if d < cur or c > b:
                continue
            if c > cur:
                out.append((cur, c - 1))
            cur = max(cur, d + 1)
        if cur <= b:
            out.append((cur, b))
    return tuple(out)


def _hex_digit_class(digits: list[int]) -> Node:
    """One hex digit with a value in ``digits``, either letter case."""
    cps = []
    for d in digits:
        if d < 10:
            cps.append((0x30 + d, 0x30 + d))
        else:
            cps.extend([(0x61 + d - 10,) * 2, (0x41 + d - 10,) * 2])
    return ("chars", normalize_ranges(cps))


@functools.lru_cache(maxsize=4096)
def hex_number_ast(ranges: Ranges, width: int) -> Node:
    """AST of the ``width``-digit hex numerals (either case) whose values lie in ``ranges``.

    Digits with identical suffix sets share one class, so dense sets stay small.

    >>> regex_from_ast(hex_number_ast(((0, 0xFF),), 2))
    '[0-9A-Fa-f]{2}'
    """
    if width == 0:
        return EPS if ranges else EMPTY
    block = 16 ** (width - 1)
    if ranges == ((0, 16 * block - 1),):
        return mk_rep(_hex_digit_class(list(range(16))), width, width)
    groups: dict[Ranges, list[int]] = {}
    for d in range(16):
        sub = _intersect(ranges, d * block, d * block + block - 1)
        if sub:
            shifted = tuple((a - d * block, b - d * block) for a, b in sub)
            groups.setdefault(shifted, []).append(d)
    return mk_alt([mk_seq([_hex_digit_class(ds), hex_number_ast(sub, width - 1)]) for sub, ds in groups.items()])


def _surrogate_pairs(ranges: Ranges) -> Node:
    """``X\\uYYYY`` (after a leading ``\\u``) for the astral code points in ``ranges``."""
    by_low: dict[Ranges, list[tuple[int, int]]] = {}
    for a, b in ranges:
        ha, la = divmod(a - 0x10000, 0x400)
        hb, lb = divmod(b - 0x10000, 0x400)
        if ha == hb:
            by_low.setdefault(((0xDC00 + la, 0xDC00 + lb),), []).append((ha, ha))
            continue
        by_low.setdefault(((0xDC00 + la, 0xDFFF),), []).append((ha, ha))
        if hb > ha + 1:
            by_low.setdefault(((0xDC00, 0xDFFF),), []).append((ha + 1, hb - 1))
        by_low.setdefault(((0xDC00, 0xDFFF + lb - 0x3FF),), []).append((hb, hb))
    branches = []
    for low, highs in by_low.items():
        high = merge_ranges((0xD800 + x, 0xD800 + y) for x, y in highs)
        branches.append(mk_seq([hex_number_ast(high, 4), _BACKSLASH, _U, hex_number_ast(low, 4)]))
    return mk_alt(branches)


@functools.lru_cache(maxsize=4096)
def encoded_chars_ast(ranges: Ranges) -> Node:
    """AST over JSON text matching every JSON encoding of one character from ``ranges``.

    >>> regex_from_ast(encoded_chars_ast(((0x41, 0x41),)))
    'A|\\\\\\\\u0041'
    """
    ranges = normalize_ranges(ranges)
    raw = _subtract(ranges, _NOT_RAW)
    short = [_lit(ord(_SHORT_ESCAPES[cp])) for cp in sorted(_SHORT_ESCAPES) if _intersect(ranges, cp, cp)]
    bmp = _intersect(ranges, 0, 0xFFFF)
    astral = _intersect(ranges, 0x10000, 0x10FFFF)
    unicode_forms = mk_alt([hex_number_ast(bmp, 4) if bmp else EMPTY,
                            _surrogate_pairs(astral) if astral else EMPTY])
    escaped = mk_seq([_BACKSLASH, mk_alt(short + [mk_seq([_U, unicode_forms])])]) if ranges else EMPTY
    return mk_alt([("chars", raw), escaped])


def _encode(node: Node) -> Node:
    kind = node[0]
    if kind == "chars":
        return encoded_chars_ast(node[1]) if node[1] else EMPTY
    if kind == "seq":
        return mk_seq([_encode(n) for n in node[1]])
    if kind == "alt":
        return mk_alt([_encode(n) for n in node[1]])
    _, sub, lo, hi = node
    return mk_rep(_encode(sub), lo, hi)


@functools.lru_cache(maxsize=4096)
def json_string_body_regex(char_regex: str) -> str:
    """Python regex over the JSON text between the quotes, for strings ``char_regex`` full-matches.

    A top-level alternation is wrapped in ``(?:...)``, so the result can be concatenated.

    >>> json_string_body_regex("a?")
    '(?:a|\\\\\\\\u0061)?'
    >>> json_string_body_regex("a|")
    '(?:a|\\\\\\\\u0061|)'
    """
    ast = _encode(parse_regex(char_regex))
    text = regex_from_ast(ast)
    return f"(?:{text})" if ast[0] == "alt" else text


def json_string_regex(char_regex: str) -> str:
    """``json_string_body_regex`` with the surrounding double quotes.

    >>> import re
    >>> bool(re.fullmatch(json_string_regex("\\n|"), '"\\\\n"'))
    True
    """
    return '"' + json_string_body_regex(char_regex) + '"'


def length_bounded_any_string(min_len: int = 0, max_len: int | None = None) -> str:
    """Regex for a JSON string (quotes included) of ``min_len`` to ``max_len`` code points.

    ``max_len=None`` means unbounded.  Every encoding (raw, short escape, ``\\uXXXX``,
    surrogate pair) counts as one character.  The DFA grows linearly with the bounds
    (a few tens of states per character), so callers should cap large bounds.

    >>> import re
    >>> rx = length_bounded_any_string(1, 2)
    >>> [bool(re.fullmatch(rx, t)) for t in ['""', '"a"', '"\\\\ud83d\\\\ude00\\\\n"', '"abc"']]
    [False, True, True, False]
    """
    if min_len < 0 or (max_len is not None and max_len < min_len):
        raise ValueError(f"invalid string length bounds [{min_len}, {max_len}]")
    upper = "" if max_len is None else str(max_len)
    return json_string_regex(f"(?s:.){{{min_len},{upper}}}")
