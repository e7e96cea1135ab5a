"""Python regex text -> a small regular-expression AST over code point sets.

Parsing is done by Python's own regex parser (``re._parser``), so syntax, flags
and character classes mean exactly what they mean to ``re`` (and so to lark,
whose terminals are Python regexes): ``\\d``, ``\\w`` and ``\\s`` are Unicode-wide,
``.`` excludes ``\\n`` unless DOTALL, ``(?i)`` folds case as ``re`` does.

Only regular features are accepted.  Look-arounds, back-references, word
boundaries, conditionals, atomic groups and possessive repeats raise `RegexError`;
``^``/``\\A`` are allowed only at the very start and ``$``/``\\Z`` only at the very
end (where, under full-match semantics, they change nothing).

AST nodes (tuples, hashable):
    ("chars", ((lo, hi), ...))   one code point from a sorted set of ranges
    ("seq", (node, ...))         concatenation ("seq", ()) is the empty string
    ("alt", (node, ...))         alternation
    ("rep", node, lo, hi)        repetition, hi None = unbounded

Example:
    >>> parse_regex("ab|c*")
    ('alt', (('seq', (('chars', ((97, 97),)), ('chars', ((98, 98),)))), ('rep', ('chars', ((99, 99),)), 0, None)))
"""

from __future__ import annotations

import functools
import re
import re._constants as C
import re._parser as sre_parse

from constrained.automata.utf8 import MAX_CODE_POINT
from constrained.errors import RegexError

Ranges = tuple[tuple[int, int], ...]

EMPTY_SEQ = ("seq", ())


def merge_ranges(ranges) -> Ranges:
    """Sort and merge integer ranges (adjacent ones join).

    >>> merge_ranges([(5, 6), (1, 4), (9, 9)])
    ((1, 6), (9, 9))
    """
    out: list[list[int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return tuple((lo, hi) for lo, hi in out)


def normalize_ranges(ranges) -> Ranges:
    """Sort and merge ranges, dropping surrogates."""
    result = []
    for lo, hi in merge_ranges(ranges):
        if hi < 0xD800 or lo > 0xDFFF:
            result.append((lo, hi))
        else:
            if lo < 0xD800:
                result.append((lo, 0xD7FF))
            if hi > 0xDFFF:
                result.append((0xE000, hi))
    return tuple(result)


def complement_ranges(ranges) -> Ranges:
    """All code points (surrogates excluded) not in ``ranges``.

    >>> complement_ranges(((0, 0x60), (0x7B, 0x10FFFF)))
    ((97, 122),)
    """
    out = []
    prev = 0
    for lo, hi in normalize_ranges(ranges):
        if lo > prev:
            out.append((prev, lo - 1))
        prev = hi + 1
    if prev <= MAX_CODE_POINT:
        out.append((prev, MAX_CODE_POINT))
    return normalize_ranges(out)


@functools.lru_cache(maxsize=1)
def _all_chars() -> str:
    return "".join(map(chr, range(0xD800))) + "".join(map(chr, range(0xE000, MAX_CODE_POINT + 1)))


@functools.lru_cache(maxsize=64)
def _ranges_matching(regex: str, flags: int = 0) -> Ranges:
    """Code point ranges of single characters that ``regex`` matches (exact, via ``re``)."""
    text = _all_chars()
    out = []
    for m in re.finditer(f"(?:{regex})+", text, flags):
        lo, hi = ord(m.group()[0]), ord(m.group()[-1])
        # runs in _all_chars are contiguous code points except across the surrogate gap
        if lo < 0xD800 <= hi:
            out.extend([(lo, 0xD7FF), (0xE000, hi)])
        else:
            out.append((lo, hi))
    return normalize_ranges(out)


_ASCII_CATEGORIES = {
    C.CATEGORY_DIGIT: ((48, 57),),
    C.CATEGORY_SPACE: ((9, 13), (32, 32)),
    C.CATEGORY_WORD: ((48, 57), (65, 90), (95, 95), (97, 122)),
}
_CATEGORY_BASE = {
    C.CATEGORY_DIGIT: (C.CATEGORY_DIGIT, False), C.CATEGORY_NOT_DIGIT: (C.CATEGORY_DIGIT, True),
    C.CATEGORY_SPACE: (C.CATEGORY_SPACE, False), C.CATEGORY_NOT_SPACE: (C.CATEGORY_SPACE, True),
    C.CATEGORY_WORD: (C.CATEGORY_WORD, False), C.CATEGORY_NOT_WORD: (C.CATEGORY_WORD, True),
}
_UNICODE_CATEGORY_REGEX = {C.CATEGORY_DIGIT: r"\d", C.CATEGORY_SPACE: r"\s", C.CATEGORY_WORD: r"\w"}


def _category(cat, ascii_only: bool) -> Ranges:
    if cat not in _CATEGORY_BASE:
        raise ValueError(f"unsupported category {cat}")
    base, negate = _CATEGORY_BASE[cat]
    ranges = _ASCII_CATEGORIES[base] if ascii_only else _ranges_matching(_UNICODE_CATEGORY_REGEX[base])
    return complement_ranges(ranges) if negate else ranges


def _case_variants(cp: int) -> set[int]:
    ch = chr(cp)
    cands = {ch, ch.lower(), ch.upper(), ch.casefold(), ch.title()}
    extra = getattr(getattr(re, "_casefix", None), "_EXTRA_CASES", {})
    for c in list(cands):
        if len(c) == 1:
            for o in extra.get(ord(c.lower()), ()):
                cands.add(chr(o))
    return {ord(c) for c in cands if len(c) == 1}


def _ignore_case(ranges: Ranges, ascii_only: bool) -> Ranges:
    """The set ``re`` matches for a class under IGNORECASE (verified with re itself)."""
    size = sum(hi - lo + 1 for lo, hi in ranges)
    flags = re.IGNORECASE | (re.ASCII if ascii_only else 0)
    if size > 2048:
        members = "".join(f"\\U{lo:08x}-\\U{hi:08x}" for lo, hi in ranges)
        return _ranges_matching(f"[{members}]", flags)
    cls = re.compile("[" + "".join(f"\\U{lo:08x}-\\U{hi:08x}" for lo, hi in ranges) + "]", flags)
    out = set()
    for lo, hi in ranges:
        for cp in range(lo, hi + 1):
            for v in _case_variants(cp):
                if 0xD800 <= v <= 0xDFFF:
                    continue
                if cls.fullmatch(chr(v)):
                    out.add(v)
    return normalize_ranges((c, c) for c in out)


_CHARSET_FLAGS = C.SRE_FLAG_IGNORECASE | C.SRE_FLAG_ASCII  # the flags a character set depends on


@functools.lru_cache(maxsize=16384)
def _charset(ranges: Ranges, flags: int) -> Ranges:
    """The code points a class of ``ranges`` matches under ``flags`` (cached: the same
    classes recur across regexes)."""
    ranges = normalize_ranges(ranges)
    if flags & C.SRE_FLAG_IGNORECASE:
        ranges = _ignore_case(ranges, bool(flags & C.SRE_FLAG_ASCII))
    return ranges


@functools.lru_cache(maxsize=16384)
def _literal_node(code: int, flags: int, negate: bool):
    ranges = _charset(((code, code),), flags)
    return ("chars", complement_ranges(ranges) if negate else ranges)


class _Converter:
    def __init__(self, pattern: str, terminal: str | None) -> None:
        self.pattern = pattern
        self.terminal = terminal

    def error(self, message: str, position: int | None = None) -> RegexError:
        return RegexError(message, pattern=self.pattern, position=position, terminal=self.terminal)

    def convert(self, sub, flags: int, *, top: bool = False):
        items = list(sub)
        if top:
            # anchors at the very start/end are no-ops under full-match semantics
            while items and items[0][0] is C.AT and items[0][1] in (C.AT_BEGINNING, C.AT_BEGINNING_STRING):
                items.pop(0)
            while items and items[-1][0] is C.AT and items[-1][1] in (C.AT_END, C.AT_END_STRING):
                items.pop()
        nodes = [self.item(op, av, flags) for op, av in items]
        return nodes[0] if len(nodes) == 1 else ("seq", tuple(nodes))

    def charset(self, ranges, flags: int):
        return _charset(tuple(ranges), flags & _CHARSET_FLAGS)

    def item(self, op, av, flags: int):
        ascii_only = bool(flags & C.SRE_FLAG_ASCII)
        if op is C.LITERAL:
            return _literal_node(av, flags & _CHARSET_FLAGS, False)
        if op is C.NOT_LITERAL:
            return _literal_node(av, flags & _CHARSET_FLAGS, True)
        if op is C.ANY:
            if flags & C.SRE_FLAG_DOTALL:
                return ("chars", normalize_ranges([(0, MAX_CODE_POINT)]))
            return ("chars", complement_ranges(((10, 10),)))
        if op is C.IN:
            negate = False
            ranges: list[tuple[int, int]] = []
            cats: list[tuple[int, int]] = []
            for iop, iav in av:
                if iop is C.NEGATE:
                    negate = True
                elif iop is C.LITERAL:
                    ranges.append((iav, iav))
                elif iop is C.RANGE:
                    ranges.append(iav)
                elif iop is C.CATEGORY:
                    try:
                        cats.extend(_category(iav, ascii_only))
                    except ValueError:
                        raise self.error(f"unsupported character category {iav}") from None
                else:
                    raise self.error(f"unsupported class item {iop}")
            folded = list(self.charset(ranges, flags)) if ranges else []
            result = normalize_ranges(folded + cats)
            return ("chars", complement_ranges(result) if negate else result)
        if op is C.BRANCH:
            return ("alt", tuple(self.convert(b, flags) for b in av[1]))
        if op is C.SUBPATTERN:
            _group, add_flags, del_flags, p = av
            return self.convert(p, (flags | add_flags) & ~del_flags)
        if op in (C.MAX_REPEAT, C.MIN_REPEAT):
            lo, hi, p = av
            return ("rep", self.convert(p, flags), lo, None if hi is C.MAXREPEAT else hi)
        if op is C.AT:
            raise self.error(f"anchor {av} is only supported at the start (^, \\A) or end ($, \\Z)")
        if op in (C.ASSERT, C.ASSERT_NOT):
            raise self.error(_lookaround_message(op is C.ASSERT_NOT, av[0] < 0), _lookaround_position(self.pattern))
        if op in (C.GROUPREF, C.GROUPREF_EXISTS):
            raise self.error("back-references are not regular")
        name = str(op)
        if "POSSESSIVE" in name or "ATOMIC" in name:
            raise self.error("possessive repeats and atomic groups are not supported")
        raise self.error(f"unsupported regex construct {name}")


def parse_regex(pattern: str, *, terminal: str | None = None):
    """Parse ``pattern`` (Python syntax) into the AST described in the module docstring."""
    if not isinstance(pattern, str):
        raise RegexError("regex must be a str", pattern=repr(pattern), terminal=terminal)
    try:
        parsed = sre_parse.parse(pattern)
    except re.error as e:
        raise RegexError(f"malformed regex: {e.msg}", pattern=pattern, position=e.pos, terminal=terminal) from None
    except (RecursionError, OverflowError) as e:
        raise RegexError(f"regex too deeply nested or too large: {e}", pattern=pattern,
                         terminal=terminal) from None
    flags = parsed.state.flags
    if flags & C.SRE_FLAG_LOCALE:
        raise RegexError("the LOCALE flag is not supported", pattern=pattern, terminal=terminal)
    conv = _Converter(pattern, terminal)
    try:
        return conv.convert(parsed, flags, top=True)
    except RecursionError:
        raise RegexError("regex too deeply nested", pattern=pattern, terminal=terminal) from None


def _lookaround_message(negative: bool, behind: bool) -> str:
    kind = ("(?<!...)" if negative else "(?<=...)") if behind else ("(?!...)" if negative else "(?=...)")
    return (f"look-{'behind' if behind else 'ahead'} assertions such as {kind} are not supported (terminals "
            "compile to automata that read bytes forwards, without assertions); write the terminal without it "
            "(lark's common.ESCAPED_STRING is translated to its exact equivalent automatically)")


def _lookaround_position(pattern: str) -> int | None:
    found = [i for i in (pattern.find(s) for s in ("(?=", "(?!", "(?<=", "(?<!")) if i >= 0]
    return min(found) if found else None


def validate_regex(pattern: str, *, terminal: str | None = None) -> None:
    """Raise `RegexError` unless ``pattern`` is a supported regular expression (or a
    marker: `constrained.automata.substrings`, `constrained.automata.json_words`)."""
    if isinstance(pattern, str) and pattern.startswith("(*substrings:"):
        from constrained.automata.substrings import parse_substrings_regex

        parse_substrings_regex(pattern)
        return
    if isinstance(pattern, str) and pattern.startswith("(*json-"):
        from constrained.automata.json_words import parse_marker

        parse_marker(pattern)
        return
    parse_regex(pattern, terminal=terminal)


def nullable(node) -> bool:
    """Whether the AST matches the empty string."""
    kind = node[0]
    if kind == "chars":
        return False
    if kind == "seq":
        return all(nullable(n) for n in node[1])
    if kind == "alt":
        return any(nullable(n) for n in node[1])
    return node[2] == 0 or nullable(node[1])


def size_estimate(node) -> int:
    """Upper bound on the automaton states Thompson's construction creates for the AST."""
    kind = node[0]
    if kind == "chars":
        return 2 + 4 * len(node[1])
    if kind == "seq" or kind == "alt":
        return 2 + sum(map(size_estimate, node[1]))
    _, sub, lo, hi = node
    copies = max(lo, hi if hi is not None else lo + 1, 1)
    return 2 + copies * size_estimate(sub)


_LITERAL_CHAR = r"(?:[^\\|()\[\]{}*+?.^$]|\\U[0-9a-fA-F]{8}|\\u[0-9a-fA-F]{4}|\\x[0-9a-fA-F]{2}|\\[^A-Za-z0-9])"
_LITERAL_ALTERNATION = re.compile(rf"(?:\(\?:\)|{_LITERAL_CHAR}+)(?:\|(?:\(\?:\)|{_LITERAL_CHAR}+))*")
_LITERAL_ESCAPE = re.compile(r"\\(?:U([0-9a-fA-F]{8})|u([0-9a-fA-F]{4})|x([0-9a-fA-F]{2})|(.))", re.S)


def _unescape(match: re.Match) -> str:
    hexa = match.group(1) or match.group(2) or match.group(3)
    return chr(int(hexa, 16)) if hexa else match.group(4)


def literal_alternatives(pattern: str) -> list[str] | None:
    """The strings of a regex that is only an alternation of literal strings (``abc|d\\.e``,
    optionally inside one ``(?:...)``; ``(?:)`` is the empty string), else None.

    Such a regex (an enum of thousands of strings) has a finite language, which
    `constrained.automata.byte_dfa` builds as a minimal automaton directly, without an NFA.

    Example:
        >>> literal_alternatives(r"(?:ab|c\\.d|\\U000000e9|(?:))")
        ['ab', 'c.d', 'é', '']
        >>> literal_alternatives("ab|c+") is None
        True
    """
    if pattern.startswith("(?:") and pattern.endswith(")") and _LITERAL_ALTERNATION.fullmatch(pattern[3:-1]):
        body = pattern[3:-1]
    elif pattern == "(?:)" or _LITERAL_ALTERNATION.fullmatch(pattern):
        body = pattern
    else:
        return None
    return ["" if piece.group() == "(?:)" else _LITERAL_ESCAPE.sub(_unescape, piece.group())
            for piece in re.finditer(rf"\(\?:\)|{_LITERAL_CHAR}+", body)]


_SPECIAL = frozenset(".^$*+?{}[]\\|()")
# `split_items`' items in one C-speed pass where the regex has no nested group and no escape
# outside a group (a key literal: a quote, then a group of each character's spellings): a
# group, its escapes and classes skipped as the loop skips them, or a character that is not
# special.  A regex it does not cover whole (a quantifier, anything else) goes to the loop.
_SIMPLE_ITEM = re.compile(r"\((?:[^()\[\\]|\\.|\[(?:[^\]\\]|\\.)*\])*\)|[^.^$*+?{}\[\]\\|()]", re.S)
_HEX_ESCAPES = {"x": 2, "u": 4, "U": 8}
_FINITE_MAX_STRINGS = 256     # alternatives one item of `finite_items` may expand to


class _NotFinite(Exception):
    pass


class _FiniteParser:
    """Recursive descent over the quantifier-free subset of Python regex syntax that
    `finite_items` reads: literal characters, escapes of non-alphanumerics, ``\\xHH``
    ``\\uHHHH`` ``\\UHHHHHHHH``, classes of literal characters and ranges (no negation),
    ``(?:...)`` groups and ``|``.  Anything else raises `_NotFinite`."""

    def __init__(self, pattern: str) -> None:
        self.p = pattern
        self.i = 0

    def char(self) -> str:
        p, i = self.p, self.i
        c = p[i]
        if c == "\\":
            if i + 1 >= len(p):
                raise _NotFinite
            e = p[i + 1]
            width = _HEX_ESCAPES.get(e)
            if width is not None:
                digits = p[i + 2:i + 2 + width]
                if len(digits) != width or not all(d in "0123456789abcdefABCDEF" for d in digits):
                    raise _NotFinite
                self.i = i + 2 + width
                cp = int(digits, 16)
                if cp > MAX_CODE_POINT:
                    raise _NotFinite
                c = chr(cp)
            elif not e.isascii() or e.isalnum():
                raise _NotFinite            # \d, \w, \n, \1, \A, ...: the full parser decides
            else:
                self.i = i + 2
                c = e
        elif c in _SPECIAL:
            raise _NotFinite
        else:
            self.i = i + 1
        if 0xD800 <= ord(c) <= 0xDFFF:
            raise _NotFinite                # lone surrogates match nothing: the full route
        return c

    def alternation(self) -> set[str]:
        out = self.sequence()
        while self.i < len(self.p) and self.p[self.i] == "|":
            self.i += 1
            out |= self.sequence()
            if len(out) > _FINITE_MAX_STRINGS:
                raise _NotFinite
        return out

    def sequence(self) -> set[str]:
        out = {""}
        for item in self.items(stop=True):
            out = {a + b for a in out for b in item}
            if len(out) > _FINITE_MAX_STRINGS:
                raise _NotFinite
        return out

    def items(self, *, stop: bool):
        p = self.p
        while self.i < len(p):
            c = p[self.i]
            if c == "|" or c == ")":
                if not stop:
                    raise _NotFinite
                return
            if c == "(":
                if not p.startswith("(?:", self.i):
                    raise _NotFinite
                self.i += 3
                inner = self.alternation()
                if self.i >= len(p) or p[self.i] != ")":
                    raise _NotFinite
                self.i += 1
                yield inner
            elif c == "[":
                yield self.char_class()
            else:
                yield {self.char()}
            if self.i < len(p) and p[self.i] in "*+?{":
                raise _NotFinite

    def char_class(self) -> set[str]:
        p = self.p
        self.i += 1
        if self.i >= len(p) or p[self.i] in "^]":
            raise _NotFinite
        out: set[str] = set()
        while self.i < len(p) and p[self.i] != "]":
            if p[self.i] in "[-&|~" or p.startswith("--", self.i):
                raise _NotFinite            # set operations, nesting, edge dashes: the full parser
            lo = self.char()
            if self.i < len(p) and p[self.i] == "-":
                self.i += 1
                if self.i >= len(p) or p[self.i] in "]-[":
                    raise _NotFinite
                hi = self.char()
                if ord(hi) < ord(lo) or ord(hi) - ord(lo) >= _FINITE_MAX_STRINGS or \
                        (ord(lo) <= 0xDFFF and ord(hi) >= 0xD800):
                    raise _NotFinite
                out.update(chr(cp) for cp in range(ord(lo), ord(hi) + 1))
            else:
                out.add(lo)
            if len(out) > _FINITE_MAX_STRINGS:
                raise _NotFinite
        if self.i >= len(p):
            raise _NotFinite
        self.i += 1
        return out


def finite_items(pattern: str) -> list[set[str]] | None:
    """A quantifier-free regex as a sequence of finite string sets (its language is their
    concatenation), or None when ``pattern`` uses anything outside that subset, or an
    item would expand to more than 256 strings.

    The subset: literal characters, escaped non-alphanumerics (``re.escape``'s output),
    ``\\xHH``/``\\uHHHH``/``\\UHHHHHHHH``, classes of literal characters and ranges,
    ``(?:...)`` groups and ``|`` (a top-level alternation is one item); no flags, no
    quantifiers.  A JSON string literal in every escape spelling (a schema's key) is
    one such regex, which `constrained.automata.byte_dfa` builds as a chain of small
    tries without parsing it with ``re`` or building an NFA.

    Example:
        >>> [sorted(item) for item in finite_items(r'"(?:a|\\\\u0061)[Bb]"')]
        [['"'], ['\\\\u0061', 'a'], ['B', 'b'], ['"']]
        >>> finite_items("a+") is None, finite_items(r"\\d") is None
        (True, True)
    """
    parser = _FiniteParser(pattern)
    try:
        items = list(parser.items(stop=True))
        if parser.i < len(pattern):        # a top-level alternation: one item of its strings
            parser.i = 0
            items = [parser.alternation()]
            if parser.i < len(pattern):
                return None
    except (_NotFinite, IndexError):
        return None
    return items


def split_items(pattern: str) -> list[str] | None:
    """``pattern`` cut into its top-level items (a character, an escape, a class, a
    ``(?:...)`` group), or None where it has a top-level ``|``, a quantifier or anything
    that does not split cleanly.  Concatenating the items gives back ``pattern``, so the
    language is the concatenation of the items' languages: callers read each item on its
    own (`finite_items` of it) and memoise per item, as the same items (one character's
    JSON spellings) recur across regexes."""
    items = _SIMPLE_ITEM.findall(pattern)
    if sum(map(len, items)) == len(pattern):
        return items       # (no top-level escape or nested group: `_split_items_loop` cuts the same)
    return _split_items_loop(pattern)


def _split_items_loop(pattern: str) -> list[str] | None:
    """`split_items`, a character at a time (every regex it accepts)."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "(":
            depth, j = 0, i
            while j < n:
                d = pattern[j]
                if d == "\\":
                    j += 2
                    continue
                if d == "[":
                    j += 1
                    while j < n and pattern[j] != "]":
                        j += 2 if pattern[j] == "\\" else 1
                elif d == "(":
                    depth += 1
                elif d == ")":
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            if j >= n:
                return None
            j += 1
        elif c == "[":
            j = i + 1
            while j < n and pattern[j] != "]":
                j += 2 if pattern[j] == "\\" else 1
            if j >= n:
                return None
            j += 1
        elif c == "\\":
            j = i + 2 + _HEX_ESCAPES.get(pattern[i + 1:i + 2], 0)
        elif c in _SPECIAL:
            return None
        else:
            j = i + 1
        if j < n and pattern[j] in "*+?{":
            return None
        out.append(pattern[i:j])
        i = j
    return out
