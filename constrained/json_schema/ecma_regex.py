"""ECMA-262 regular expressions (JSON Schema ``pattern``) -> Python regexes.

JSON Schema draft 2020-12 says ``pattern`` is an ECMA-262 regex and recommends
the ``u`` (Unicode) flag; this module implements exactly that dialect: the
pattern is a sequence of code points (an astral character is one character),
``\\u{...}`` escapes are allowed, and the strict ``u``-mode grammar applies
(a lone ``{``, ``}`` or ``]``, an unknown identity escape like ``\\-`` outside a
class, or ``\\c1`` is a syntax error, as in any ``u``-mode engine).

Character classes are expanded to explicit code point sets, so the output does
not depend on Python's Unicode-wide ``\\d \\w \\s``:

* ``.``  = any code point but ``\\n \\r \\u2028 \\u2029``;
* ``\\d`` = ``[0-9]``, ``\\w`` = ``[A-Za-z0-9_]``, ``\\s`` = ECMA WhiteSpace and
  LineTerminator (incl. ``\\ufeff`` and the Unicode ``Zs`` set);
* ``[^]`` = any code point, ``[]`` = nothing;
* ``\\p{..}``/``\\P{..}``: General_Category values (short or long names, with or
  without ``gc=``/``General_Category=``) and ``Any``, ``ASCII``, ``Assigned``,
  taken from Python's `unicodedata` (its Unicode version may differ slightly from
  the validator's).  Other properties (scripts, emoji, ...) raise `RegexError`.

Lone surrogates are not characters here (Python strings decoded from valid JSON
and our byte automata never contain them), so they are dropped from every set.

Refused with `RegexError` (message and 0-based position): look-aheads and
look-behinds, back-references (``\\1``, ``\\k<n>``), word boundaries (``\\b``,
``\\B``), inline modifiers, and syntax errors.  Capture groups, named groups and
lazy quantifiers lose their distinctions (all groups become non-capturing, all
quantifiers greedy): the set of strings in which a match exists is unchanged.

Two entry points:

* `ecma_to_python` -- a Python pattern for ``re.search`` equivalent to the ECMA
  pattern (anchors become ``\\A``/``\\Z``: ECMA ``$`` without the ``m`` flag
  matches only at the very end, unlike Python ``$``);
* `pattern_search_regex` -- an anchor-free Python regex whose FULL-match set is
  exactly the strings in which the ECMA pattern finds a match (JSON Schema's
  unanchored semantics); ``^``/``$`` anywhere (also inside groups, alternatives
  and quantifiers) are eliminated exactly.

Example:
    >>> import re
    >>> rx = pattern_search_regex(r"^\\d+$")
    >>> [bool(re.fullmatch(rx, s)) for s in ["12", "12\\n", "a1", "\\u0661"]]
    [True, False, False, False]
"""

from __future__ import annotations

import functools
import unicodedata

from constrained.automata.regex_parser import complement_ranges, normalize_ranges, nullable
from constrained.automata.utf8 import MAX_CODE_POINT
from constrained.errors import RegexError

Ranges = tuple[tuple[int, int], ...]
Node = tuple

EPS: Node = ("seq", ())
EMPTY: Node = ("chars", ())
ANY: Node = ("chars", normalize_ranges([(0, MAX_CODE_POINT)]))
BOL: Node = ("assert", "^")
EOL: Node = ("assert", "$")

_LINE_TERMINATORS: Ranges = ((0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029))
_DIGIT: Ranges = ((0x30, 0x39),)
_WORD: Ranges = ((0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A))
# WhiteSpace (TAB VT FF SP NBSP ZWNBSP + Zs) and LineTerminator (LF CR LS PS).
_SPACE: Ranges = normalize_ranges([(0x09, 0x0D), (0x20, 0x20), (0xA0, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A),
                             (0x2028, 0x2029), (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000),
                             (0xFEFF, 0xFEFF)])
_SYNTAX_CHARS = "^$\\.*+?()[]{}|"
_CONTROL_ESCAPES = {"f": 0x0C, "n": 0x0A, "r": 0x0D, "t": 0x09, "v": 0x0B}
_HEX = "0123456789abcdefABCDEF"


# ---------------------------------------------------------------- code point sets

_GC_GROUPS = {
    "L": ("Lu", "Ll", "Lt", "Lm", "Lo"), "LC": ("Lu", "Ll", "Lt"), "M": ("Mn", "Mc", "Me"),
    "N": ("Nd", "Nl", "No"), "P": ("Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po"), "S": ("Sm", "Sc", "Sk", "So"),
    "Z": ("Zs", "Zl", "Zp"), "C": ("Cc", "Cf", "Cs", "Co", "Cn"),
}
_GC_LONG = {
    "Uppercase_Letter": "Lu", "Lowercase_Letter": "Ll", "Titlecase_Letter": "Lt", "Cased_Letter": "LC",
    "Modifier_Letter": "Lm", "Other_Letter": "Lo", "Letter": "L", "Nonspacing_Mark": "Mn",
    "Spacing_Mark": "Mc", "Enclosing_Mark": "Me", "Mark": "M", "Combining_Mark": "M",
    "Decimal_Number": "Nd", "digit": "Nd", "Letter_Number": "Nl", "Other_Number": "No", "Number": "N",
    "Connector_Punctuation": "Pc", "Dash_Punctuation": "Pd", "Open_Punctuation": "Ps",
    "Close_Punctuation": "Pe", "Initial_Punctuation": "Pi", "Final_Punctuation": "Pf",
    "Other_Punctuation": "Po", "Punctuation": "P", "punct": "P", "Math_Symbol": "Sm",
    "Currency_Symbol": "Sc", "Modifier_Symbol": "Sk", "Other_Symbol": "So", "Symbol": "S",
    "Space_Separator": "Zs", "Line_Separator": "Zl", "Paragraph_Separator": "Zp", "Separator": "Z",
    "Control": "Cc", "cntrl": "Cc", "Format": "Cf", "Surrogate": "Cs", "Private_Use": "Co",
    "Unassigned": "Cn", "Other": "C",
}


@functools.lru_cache(maxsize=1)
def _category_table() -> dict[str, Ranges]:
    """General_Category short name -> code point ranges (from `unicodedata`)."""
    runs: dict[str, list[tuple[int, int]]] = {}
    cur, start = unicodedata.category(chr(0)), 0
    for cp in range(1, MAX_CODE_POINT + 2):
        cat = unicodedata.category(chr(cp)) if cp <= MAX_CODE_POINT else None
        if cat != cur:
            runs.setdefault(cur, []).append((start, cp - 1))
            cur, start = cat, cp
    return {k: normalize_ranges(v) for k, v in runs.items()}


def _property_ranges(spec: str) -> Ranges | None:
    """Ranges of a ``\\p{spec}`` property, or None if unsupported."""
    name, _, value = spec.partition("=")
    if value:
        if name not in ("gc", "General_Category"):
            return None
        spec = value
    elif spec == "Any":
        return ANY[1]
    elif spec == "ASCII":
        return ((0, 0x7F),)
    elif spec == "Assigned":
        return complement_ranges(_category_table().get("Cn", ()))
    short = _GC_LONG.get(spec, spec)
    table = _category_table()
    if short in _GC_GROUPS:
        return normalize_ranges([r for c in _GC_GROUPS[short] for r in table.get(c, ())])
    if short in {c for group in _GC_GROUPS.values() for c in group}:
        return table.get(short, ())
    return None


# ---------------------------------------------------------------- AST smart constructors

def mk_seq(nodes) -> Node:
    """Concatenation, flattened, with ε dropped and ∅ absorbing.

    >>> mk_seq([("chars", ((97, 97),)), EPS])
    ('chars', ((97, 97),))
    """
    out: list[Node] = []
    for n in nodes:
        if n == EMPTY:
            return EMPTY
        if n[0] == "seq":
            out.extend(n[1])
        else:
            out.append(n)
    return out[0] if len(out) == 1 else ("seq", tuple(out))


def mk_alt(nodes) -> Node:
    """Alternation, flattened and deduplicated; single-character branches are merged.

    >>> mk_alt([("chars", ((97, 97),)), ("chars", ((98, 98),))])
    ('chars', ((97, 98),))
    """
    out: list[Node] = []
    chars: list[tuple[int, int]] = []
    has_chars = False
    for n in nodes:
        for m in (n[1] if n[0] == "alt" else (n,)):
            if m[0] == "chars":
                if m[1]:
                    has_chars = True
                    chars.extend(m[1])
            elif m not in out:
                out.append(m)
    if has_chars:
        out.insert(0, ("chars", normalize_ranges(chars)))
    if not out:
        return EMPTY
    return out[0] if len(out) == 1 else ("alt", tuple(out))


def mk_rep(node: Node, lo: int, hi: int | None) -> Node:
    """Repetition ``node{lo,hi}`` with trivial cases folded.

    >>> mk_rep(EPS, 2, None) == EPS
    True
    """
    if hi == 0 or node == EPS:
        return EPS
    if node == EMPTY:
        return EPS if lo == 0 else EMPTY
    if lo == hi == 1:
        return node
    return ("rep", node, lo, hi)


# ---------------------------------------------------------------- printer

def _escape_cp(cp: int) -> str:
    ch = chr(cp)
    if ch.isascii() and (ch.isalnum() or ch == "_"):
        return ch
    if 0x20 <= cp < 0x7F:
        return "\\" + ch
    if cp < 0x100:
        return f"\\x{cp:02x}"
    if cp < 0x10000:
        return f"\\u{cp:04x}"
    return f"\\U{cp:08x}"


def _class_body(ranges: Ranges) -> str:
    parts = []
    for lo, hi in ranges:
        if lo == hi:
            parts.append(_escape_cp(lo))
        elif hi == lo + 1:
            parts.append(_escape_cp(lo) + _escape_cp(hi))
        else:
            parts.append(f"{_escape_cp(lo)}-{_escape_cp(hi)}")
    return "".join(parts)


def _print_chars(ranges: Ranges) -> str:
    if not ranges:
        return "[^\\x00-\\U0010ffff]"
    if len(ranges) == 1 and ranges[0][0] == ranges[0][1]:
        return _escape_cp(ranges[0][0])
    # complement over all code points *including* surrogates, so that [^...] stays exact
    comp, prev = [], 0
    for lo, hi in ranges:
        if lo > prev:
            comp.append((prev, lo - 1))
        prev = hi + 1
    if prev <= MAX_CODE_POINT:
        comp.append((prev, MAX_CODE_POINT))
    if len(comp) < len(ranges):
        return f"[^{_class_body(tuple(comp))}]"
    return f"[{_class_body(ranges)}]"


def _quantifier(lo: int, hi: int | None) -> str:
    if hi is None:
        return {0: "*", 1: "+"}.get(lo, f"{{{lo},}}")
    if (lo, hi) == (0, 1):
        return "?"
    return f"{{{lo}}}" if lo == hi else f"{{{lo},{hi}}}"


def regex_from_ast(node: Node) -> str:
    """Print an AST (``regex_parser`` node kinds plus ``("assert", "^"|"$")``) as Python regex text.

    Anchors print as ``\\A`` and ``\\Z``.  Parsing the output with
    ``constrained.automata.regex_parser.parse_regex`` gives back the same language.

    >>> regex_from_ast(("seq", (("chars", ((97, 122),)), ("rep", ("alt", (EPS, ("chars", ((46, 46),)))), 0, None))))
    '[a-z](?:|\\\\.)*'
    """
    return _print(node, 0)


def _print(node: Node, prec: int) -> str:
    """``prec``: 0 = alternation context, 1 = concatenation, 2 = quantifier operand."""
    kind = node[0]
    if kind == "chars":
        return _print_chars(node[1])
    if kind == "assert":
        return "\\A" if node[1] == "^" else "\\Z"
    if kind == "seq":
        if not node[1]:
            return "(?:)" if prec > 0 else ""
        if len(node[1]) == 1:
            return _print(node[1][0], prec)
        text = "".join(_print(n, 1) for n in node[1])
        return f"(?:{text})" if prec == 2 else text
    if kind == "alt":
        text = "|".join(_print(n, 0) for n in node[1])
        return text if prec == 0 else f"(?:{text})"
    _, sub, lo, hi = node
    inner = _print(sub, 2)
    while sub[0] == "seq" and len(sub[1]) == 1:
        sub = sub[1][0]
    if sub[0] in ("rep", "assert"):
        inner = f"(?:{inner})"
    return inner + _quantifier(lo, hi)


# ---------------------------------------------------------------- ECMA parser

class _EcmaParser:
    """Recursive-descent parser for the ECMA-262 ``u``-mode pattern grammar."""

    def __init__(self, pattern: str) -> None:
        self.p = pattern
        self.i = 0

    def error(self, message: str, position: int | None = None) -> RegexError:
        return RegexError(message, pattern=self.p, position=self.i if position is None else position)

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.p[j] if j < len(self.p) else ""

    def eat(self, text: str) -> bool:
        if self.p.startswith(text, self.i):
            self.i += len(text)
            return True
        return False

    def parse(self) -> Node:
        node = self.disjunction()
        if self.i < len(self.p):
            raise self.error("unmatched ')'")
        return node

    def disjunction(self) -> Node:
        branches = [self.alternative()]
        while self.eat("|"):
            branches.append(self.alternative())
        return mk_alt(branches) if len(branches) > 1 else branches[0]

    def alternative(self) -> Node:
        terms = []
        while self.i < len(self.p) and self.peek() not in "|)":
            terms.append(self.term())
        return mk_seq(terms)

    def term(self) -> Node:
        c = self.peek()
        if c in "^$":
            self.i += 1
            if self.peek() in ("*", "+", "?", "{"):
                raise self.error("nothing to repeat (quantified assertion)")
            return BOL if c == "^" else EOL
        if self.p.startswith(("\\b", "\\B"), self.i):
            raise self.error("word boundary assertions (\\b, \\B) are not supported")
        if self.p.startswith(("(?=", "(?!", "(?<=", "(?<!"), self.i):
            raise self.error("look-around assertions are not regular")
        atom = self.atom()
        return self.quantified(atom)

    def quantified(self, atom: Node) -> Node:
        c = self.peek()
        if c == "*":
            lo, hi = 0, None
            self.i += 1
        elif c == "+":
            lo, hi = 1, None
            self.i += 1
        elif c == "?":
            lo, hi = 0, 1
            self.i += 1
        elif c == "{":
            lo, hi = self.braces()
        else:
            return atom
        self.eat("?")  # lazy: same set of matching strings
        if self.peek() in ("*", "+", "?", "{"):
            raise self.error("nothing to repeat")
        return mk_rep(atom, lo, hi)

    def braces(self) -> tuple[int, int | None]:
        pos = self.i
        self.i += 1
        lo = self.number()
        if lo is None:
            raise self.error("lone '{' is a syntax error with the u flag", pos)
        hi: int | None = lo
        if self.eat(","):
            hi = self.number()
        if not self.eat("}"):
            raise self.error("incomplete quantifier", pos)
        if hi is not None and hi < lo:
            raise self.error("numbers out of order in {} quantifier", pos)
        if max(lo, hi or 0) > 2**31:
            raise self.error("quantifier bound too large", pos)
        return lo, hi

    def number(self) -> int | None:
        j = self.i
        while self.peek().isascii() and self.peek().isdigit():
            self.i += 1
        return int(self.p[j:self.i]) if self.i > j else None

    def atom(self) -> Node:
        c = self.peek()
        if c == ".":
            self.i += 1
            return ("chars", complement_ranges(_LINE_TERMINATORS))
        if c == "(":
            return self.group()
        if c == "[":
            return ("chars", self.char_class())
        if c == "\\":
            return self.atom_escape()
        if c in "*+?{":
            raise self.error("nothing to repeat")
        if c in "]}":
            raise self.error(f"lone '{c}' is a syntax error with the u flag")
        self.i += 1
        return ("chars", normalize_ranges([(ord(c), ord(c))]))

    def group(self) -> Node:
        start = self.i
        self.i += 1
        if self.eat("?"):
            if self.eat(":"):
                pass
            elif self.eat("<"):
                self.group_name(start)
            else:
                raise self.error("unsupported group syntax (inline modifiers are not supported)", start)
        node = self.disjunction()
        if not self.eat(")"):
            raise self.error("missing ')'", start)
        return node

    def group_name(self, start: int) -> None:
        j = self.p.find(">", self.i)
        name = self.p[self.i:j] if j >= 0 else ""
        if not name or not (name.replace("$", "_").isidentifier()):
            raise self.error("invalid group name", start)
        self.i = j + 1

    def atom_escape(self) -> Node:
        start = self.i
        c = self.peek(1)
        if c.isascii() and c.isdigit() and c != "0":
            raise self.error("back-references are not regular", start)
        if c == "k":
            raise self.error("back-references are not regular", start)
        if c in ("b", "B"):
            raise self.error("word boundary assertions (\\b, \\B) are not supported", start)
        ranges = self.class_escape_set()
        if ranges is not None:
            return ("chars", ranges)
        cp = self.character_escape(in_class=False)
        return ("chars", normalize_ranges([(cp, cp)]))

    def class_escape_set(self) -> Ranges | None:
        """``\\d \\D \\s \\S \\w \\W \\p{} \\P{}`` at ``self.i`` (the backslash), else None."""
        c = self.peek(1)
        base = {"d": _DIGIT, "s": _SPACE, "w": _WORD}.get(c.lower()) if c else None
        if base is not None:
            self.i += 2
            return complement_ranges(base) if c.isupper() else base
        if c in ("p", "P") and c:
            start = self.i
            self.i += 2
            if not self.eat("{"):
                raise self.error("invalid property escape", start)
            j = self.p.find("}", self.i)
            if j < 0:
                raise self.error("invalid property escape", start)
            spec = self.p[self.i:j]
            ranges = _property_ranges(spec)
            if ranges is None:
                raise self.error(f"unsupported Unicode property {spec!r}", start)
            self.i = j + 1
            return complement_ranges(ranges) if c == "P" else ranges
        return None

    def character_escape(self, *, in_class: bool) -> int:
        """A CharacterEscape (or ClassEscape ``\\b``/``\\-``) at ``self.i``; returns the code point."""
        start = self.i
        self.i += 1
        c = self.peek()
        if not c:
            raise self.error("\\ at end of pattern", start)
        self.i += 1
        if c in _CONTROL_ESCAPES:
            return _CONTROL_ESCAPES[c]
        if c == "c":
            letter = self.peek()
            if not (letter.isascii() and letter.isalpha()):
                raise self.error("invalid control escape \\c", start)
            self.i += 1
            return ord(letter) % 32
        if c == "0":
            if self.peek().isascii() and self.peek().isdigit():
                raise self.error("invalid decimal escape", start)
            return 0
        if c == "x":
            return self.hex_digits(2, start)
        if c == "u":
            return self.unicode_escape(start)
        if c in _SYNTAX_CHARS or c == "/" or (in_class and c in "-b"):
            return 0x08 if c == "b" else ord(c)
        raise self.error(f"invalid escape \\{c} with the u flag", start)

    def hex_digits(self, n: int, start: int) -> int:
        text = self.p[self.i:self.i + n]
        if len(text) != n or any(ch not in _HEX for ch in text):
            raise self.error("invalid hexadecimal escape", start)
        self.i += n
        return int(text, 16)

    def unicode_escape(self, start: int) -> int:
        if self.eat("{"):
            j = self.i
            while self.peek() and self.peek() in _HEX:
                self.i += 1
            if self.i == j or not self.eat("}") or int(self.p[j:self.i - 1], 16) > MAX_CODE_POINT:
                raise self.error("invalid \\u{...} escape", start)
            return int(self.p[j:self.i - 1], 16)
        cp = self.hex_digits(4, start)
        if 0xD800 <= cp <= 0xDBFF and self.p.startswith("\\u", self.i):
            save = self.i
            self.i += 2
            try:
                low = self.hex_digits(4, start)
            except RegexError:
                low = -1
            if 0xDC00 <= low <= 0xDFFF:
                return 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00)
            self.i = save
        return cp

    def char_class(self) -> Ranges:
        start = self.i
        self.i += 1
        negate = self.eat("^")
        ranges: list[tuple[int, int]] = []
        while not self.eat("]"):
            if self.i >= len(self.p):
                raise self.error("unterminated character class", start)
            atom_pos = self.i
            a = self.class_atom()
            if self.peek() == "-" and self.peek(1) not in ("]", ""):
                self.i += 1
                b = self.class_atom()
                if isinstance(a, tuple) or isinstance(b, tuple):
                    raise self.error("character class escape in a range", atom_pos)
                if a > b:
                    raise self.error("range out of order in character class", atom_pos)
                ranges.append((a, b))
            elif isinstance(a, tuple):
                ranges.extend(a)
            else:
                ranges.append((a, a))
        result = normalize_ranges(ranges)
        return complement_ranges(result) if negate else result

    def class_atom(self) -> int | Ranges:
        c = self.peek()
        if c != "\\":
            self.i += 1
            return ord(c)
        nxt = self.peek(1)
        if nxt.isascii() and nxt.isdigit() and nxt != "0" or nxt in ("B", "k"):
            raise self.error(f"invalid escape \\{nxt} in a character class with the u flag")
        ranges = self.class_escape_set()
        if ranges is not None:
            return ranges
        return self.character_escape(in_class=True)


def parse_ecma(pattern: str) -> Node:
    """Parse an ECMA-262 (``u`` flag) pattern into an AST with ``("assert", "^"|"$")`` anchors.

    >>> parse_ecma("^a|b$")
    ('alt', (('seq', (('assert', '^'), ('chars', ((97, 97),)))), ('seq', (('chars', ((98, 98),)), ('assert', '$')))))
    """
    if not isinstance(pattern, str):
        raise RegexError("pattern must be a str", pattern=repr(pattern))
    try:
        return _EcmaParser(pattern).parse()
    except RecursionError:
        raise RegexError("pattern too deeply nested", pattern=pattern) from None


def ecma_to_python(pattern: str) -> str:
    """A Python ``re`` pattern equivalent to the ECMA-262 ``u``-mode ``pattern`` under ``re.search``.

    >>> ecma_to_python(r"^\\w+$")
    '\\\\A[0-9A-Z_a-z]+\\\\Z'
    """
    return regex_from_ast(parse_ecma(pattern))


# ---------------------------------------------------------------- anchor elimination

Variants = dict[tuple[bool, bool], Node]


def _add(out: Variants, key: tuple[bool, bool], node: Node) -> None:
    if node == EMPTY:
        return
    out[key] = mk_alt([out[key], node]) if key in out else node


def _combine(left: Variants, right: Variants) -> Variants:
    """Variants of a concatenation.  A variant ``(s, e) -> L`` matches ``w ∈ L`` and
    requires its start at text position 0 when ``s`` and its end at the text end when ``e``."""
    out: Variants = {}
    for (sa, ea), la in left.items():
        for (sb, eb), lb in right.items():
            if ea and sb:       # the text is empty
                if nullable(la) and nullable(lb):
                    _add(out, (True, True), EPS)
            elif sb:            # left part must be empty
                if nullable(la):
                    _add(out, (True, eb), lb)
            elif ea:            # right part must be empty
                if nullable(lb):
                    _add(out, (sa, True), la)
            else:
                _add(out, (sa, eb), mk_seq([la, lb]))
    return out


def _star_tail(v: Variants, m: int | None) -> Variants:
    """Variants of ``X{0,m}``: empty iterations are dropped (they only add conditions), so an
    iteration anchored at the start comes first and one anchored at the end comes last."""
    n, s, e, b = (v.get(k, EMPTY) for k in ((False, False), (True, False), (False, True), (True, True)))

    def ns(k: int | None) -> Node:
        return mk_rep(n, 0, k) if k is None or k >= 0 else EMPTY

    dec = (lambda k: None) if m is None else (lambda k: m - k)
    out: Variants = {}
    _add(out, (False, False), ns(m))
    if m is None or m >= 1:
        _add(out, (True, False), mk_seq([s, ns(dec(1))]))
        _add(out, (False, True), mk_seq([ns(dec(1)), e]))
        _add(out, (True, True), b)
    if m is None or m >= 2:
        _add(out, (True, True), mk_seq([s, ns(dec(2)), e]))
    return out


def _variants(node: Node, pattern: str) -> Variants:
    kind = node[0]
    if kind == "chars":
        return {(False, False): node} if node[1] else {}
    if kind == "assert":
        return {(True, False) if node[1] == "^" else (False, True): EPS}
    if kind == "seq":
        acc: Variants = {(False, False): EPS}
        for part in node[1]:
            acc = _combine(acc, _variants(part, pattern))
        return acc
    if kind == "alt":
        out: Variants = {}
        for part in node[1]:
            for key, lang in _variants(part, pattern).items():
                _add(out, key, lang)
        return out
    _, sub, lo, hi = node
    v = _variants(sub, pattern)
    if set(v) <= {(False, False)}:
        return {(False, False): mk_rep(v.get((False, False), EMPTY), lo, hi)}
    if lo > 64:
        raise RegexError("anchor inside a repetition with a minimum above 64 is not supported", pattern=pattern)
    acc = {(False, False): EPS}
    for _ in range(lo):
        acc = _combine(acc, v)
    return _combine(acc, _star_tail(v, None if hi is None else hi - lo))


@functools.lru_cache(maxsize=4096)
def pattern_search_regex(pattern: str) -> str:
    """A Python regex (no anchors) whose full matches are the strings where ``pattern`` finds a match.

    ``pattern`` is ECMA-262 with the ``u`` flag, searched unanchored as JSON Schema's
    ``pattern`` keyword requires.

    >>> import re
    >>> rx = pattern_search_regex("^ab|c$")
    >>> [bool(re.fullmatch(rx, s)) for s in ["abz", "zab", "zc", "c\\n", ""]]
    [True, False, True, False, False]
    """
    return _search_regex(parse_ecma(pattern), pattern)


def _search_regex(node: Node, pattern: str) -> str:
    """`pattern_search_regex` of the parsed ``node`` of ``pattern``."""
    any_star = mk_rep(ANY, 0, None)
    branches = []
    variants = _variants(node, pattern)
    free = variants.get((False, False))
    for (s, e), lang in variants.items():
        if not s and not e and nullable(lang):
            return regex_from_ast(any_star)
        if (s or e) and lang == free:
            continue  # subsumed by the unanchored variant
        branches.append(mk_seq([EPS if s else any_star, lang, EPS if e else any_star]))
    return regex_from_ast(mk_alt(branches))


LOOSE_COUNT = 4
"""Counted repetitions above this `pattern_loosened_search_regex` leaves uncounted."""


def pattern_loosened_search_regex(pattern: str, max_count: int = LOOSE_COUNT) -> str | None:
    """A superset of `pattern_search_regex` (``pattern``): every repetition counted past
    ``max_count`` left uncounted above its minimum (``X{1,200}`` as ``X+``, ``X{30}`` as
    ``X{4,}``); None where nothing is counted that high.  For a pattern whose automaton
    is too large (a class of hundreds of ranges, counted to 200) the grammar keeps this
    necessary condition, and the pattern itself is checked when the value completes.

    >>> import re
    >>> rx = pattern_loosened_search_regex("^[a-z]{1,200}$")
    >>> [bool(re.fullmatch(rx, s)) for s in ["", "a", "a" * 300, "A"]]
    [False, True, True, False]
    >>> pattern_loosened_search_regex("^[a-z]{1,3}$") is None
    True
    """
    node = parse_ecma(pattern)
    loose = _loosened(node, max_count)
    return None if loose == node else _search_regex(loose, pattern)


def _loosened(node: Node, max_count: int) -> Node:
    kind = node[0]
    if kind in ("seq", "alt"):
        parts = tuple(_loosened(n, max_count) for n in node[1])
        return node if parts == node[1] else (mk_seq(parts) if kind == "seq" else mk_alt(parts))
    if kind == "rep":
        _, sub, lo, hi = node
        inner = _loosened(sub, max_count)
        if (hi is not None and hi > max_count) or lo > max_count:
            return mk_rep(inner, min(lo, max_count), None)
        return node if inner == sub else mk_rep(inner, lo, hi)
    return node
