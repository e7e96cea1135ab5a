"""llama.cpp GBNF -> Grammar IR, with a small hand-written parser.

Syntax (llama.cpp ``grammars/README.md``)::

    root   ::= item ("," ws item)*      # comments run to the end of the line
    item   ::= [a-z]+ | "\\"" [^"]* "\\""
    ws     ::= [ \\t\\n]{0,20}

Rule names are ``[a-zA-Z0-9-]+``.  A rule may continue over several lines; a new
rule starts where ``name ::=`` appears (on a line of its own).  Literals ``"..."``
and classes ``[...]``/``[^...]`` take the escapes ``\\n \\r \\t \\\\ \\" \\[ \\]
\\xHH \\uHHHH \\UHHHHHHHH``; ``.`` is any one character (newline included); the
postfix operators are ``* + ? {m} {m,} {m,n} {,n}``; ``""`` and ``()`` are the
empty string.

How GBNF maps onto the IR (the language is preserved exactly, character for
character, with no ``%ignore``):

* Every maximal *regular* sub-expression -- one built only from literals, classes
  and ``.`` with grouping, sequence, alternation and repetition, no rule
  references -- becomes ONE terminal whose regex is that sub-expression minus the
  empty string (``[0-9]*`` -> ``[0-9]+``), because terminals may not match "".
  Where the sub-expression is nullable, a helper rule ``H -> () | TERM`` (or the
  rule itself, at the top of a rule body) supplies the empty case.  Consecutive
  regular items of a sequence and the regular alternatives of an alternation are
  merged before this step.  Identical regexes share one terminal, named
  ``LIT_n``/``CLASS_n``/``ANY_n``/``PAT_n``.
* Everything containing a rule reference becomes rules.  Helper rules are named
  ``<rule>_<kind>_<n>`` (``_`` never occurs in a GBNF name, so nothing clashes):
  ``x*`` -> ``H -> () | H x``; ``x+`` -> ``H -> x | H x``; ``x?`` -> ``H -> () | x``;
  ``x{m,n}`` -> m copies of x then a chain of n-m nested optional copies.

Decisions where llama.cpp is lax or quirky: a rule defined twice, an empty class
``[]``/``[^]``, a reversed range, a surrogate or out-of-range code point, a raw
line break inside a literal or class, ``{m,n}`` with n < m, and a rule defined
on the same line as the previous one are syntax errors; left recursion is
allowed; ``{,n}`` means ``{0,n}``; a count above 1000 raises `CompileLimitError`.

Loading is bounded by ``timeout`` (`constrained.deadline`): parsing checks the deadline
per rule, lowering per rule and per helper rule (a counted repetition makes up to 1000),
and `CompileTimeoutError` names the rule and its line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from constrained.deadline import DEFAULT_COMPILE_TIMEOUT, compile_deadline, remaining, timeout_error
from constrained.errors import CompileLimitError, GrammarError, GrammarSyntaxError
from constrained.grammar.ir import Grammar, Rule, TerminalDef

MAX_REPEAT = 1000
"""Largest count allowed in ``{m,n}``."""

MAX_NESTING = 100
"""Deepest nesting of groups and postfix operators the parser accepts."""

_WORD = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-")
_HEX = frozenset("0123456789abcdefABCDEF")
_SIMPLE_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", '"': '"', "[": "[", "]": "]"}
_HEX_ESCAPES = {"x": 2, "u": 4, "U": 8}
_POSTFIX = frozenset("*+?{")


# --------------------------------------------------------------------------- AST
@dataclass(frozen=True)
class _Lit:
    text: str


@dataclass(frozen=True)
class _Class:
    ranges: tuple[tuple[int, int], ...]  # sorted, merged, inclusive code point ranges
    negated: bool


@dataclass(frozen=True)
class _Any:
    pass


@dataclass(frozen=True)
class _Ref:
    name: str
    pos: int


@dataclass(frozen=True)
class _Seq:
    items: tuple[_Node, ...]


@dataclass(frozen=True)
class _Alt:
    items: tuple[_Node, ...]


@dataclass(frozen=True)
class _Repeat:
    item: _Node
    min: int
    max: int | None  # None: unbounded


_Node = _Lit | _Class | _Any | _Ref | _Seq | _Alt | _Repeat


@dataclass(frozen=True)
class _RuleDef:
    name: str
    pos: int
    body: _Node


# ------------------------------------------------------------------------ parser
def _line_col(text: str, pos: int) -> tuple[int, int]:
    line = text.count("\n", 0, pos) + 1
    return line, pos - (text.rfind("\n", 0, pos) + 1) + 1


def _check_time(text: str, pos: int, rule: str | None) -> None:
    """`CompileTimeoutError` naming ``rule`` and the line of ``pos``, once the deadline passed
    (the line is counted only then: checks stay O(1))."""
    if remaining() == 0.0:
        raise timeout_error(rule=rule, line=_line_col(text, pos)[0])


def _merge_ranges(ranges: list[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    merged: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if merged and lo <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(hi, merged[-1][1]))
        else:
            merged.append((lo, hi))
    return tuple(merged)


class _Parser:
    """Recursive descent over the GBNF text; ``pos`` indexes code points."""

    def __init__(self, text: str, source: str) -> None:
        self.text = text
        self.source = source
        self.pos = 0
        self.newline_seen = False  # did the last whitespace skip cross a line break?
        self.depth = 0

    # ----------------------------------------------------------- low level
    def error(self, message: str, pos: int | None = None) -> GrammarSyntaxError:
        line, column = _line_col(self.text, self.pos if pos is None else pos)
        return GrammarSyntaxError(message, line=line, column=column, source=self.source)

    def where(self, pos: int) -> str:
        line, column = _line_col(self.text, pos)
        return f"line {line}, column {column}"

    def peek(self, offset: int = 0) -> str:
        i = self.pos + offset
        return self.text[i] if i < len(self.text) else ""

    def skip_space(self) -> None:
        """Skip blanks, line breaks and ``#`` comments; note line breaks."""
        text, pos, newline = self.text, self.pos, False
        while pos < len(text):
            c = text[pos]
            if c == "#":
                while pos < len(text) and text[pos] not in "\r\n":
                    pos += 1
            elif c in " \t\r\n":
                newline = newline or c in "\r\n"
                pos += 1
            else:
                break
        self.pos, self.newline_seen = pos, newline

    def skip_blanks(self) -> None:
        while self.peek() in (" ", "\t"):
            self.pos += 1

    def read_name(self) -> str:
        start = self.pos
        while self.peek() in _WORD:
            self.pos += 1
        return self.text[start:self.pos]

    def at_rule_start(self) -> bool:
        """Is the text at ``pos`` ``name ::=`` (blanks allowed before ``::=``)?"""
        i = self.pos
        while i < len(self.text) and self.text[i] in _WORD:
            i += 1
        if i == self.pos:
            return False
        while i < len(self.text) and self.text[i] in " \t":
            i += 1
        return self.text.startswith("::=", i)

    def stray_error(self) -> GrammarSyntaxError:
        """The error for a character that cannot continue the grammar here."""
        c = self.peek()
        if c == ")":
            return self.error("unmatched ')'")
        if self.text.startswith("::=", self.pos):
            return self.error("'::=' must follow a rule name on the same line")
        if c in ":=":
            return self.error(f"expected '::=' (found {c!r})")
        return self.error(f"unexpected character {c!r}")

    # ----------------------------------------------------------- grammar
    def parse(self) -> list[_RuleDef]:
        rules: dict[str, _RuleDef] = {}
        if self.text.startswith("\ufeff"):  # a byte order mark
            self.pos = 1
        self.skip_space()
        while self.pos < len(self.text):
            _check_time(self.text, self.pos, None)
            rule = self.parse_rule()
            if rule.name in rules:
                first = self.where(rules[rule.name].pos)
                raise self.error(f"rule {rule.name!r} defined twice (first at {first})", rule.pos)
            rules[rule.name] = rule
        return list(rules.values())

    def parse_rule(self) -> _RuleDef:
        start = self.pos
        name = self.read_name()
        if not name:
            raise self.error(f"expected a rule name, found {self.peek()!r}")
        self.skip_blanks()
        if not self.text.startswith("::=", self.pos):
            raise self.error(f"expected '::=' after rule name {name!r}")
        self.pos += 3
        self.skip_space()
        body = self.parse_alternates()
        if self.pos < len(self.text):
            if not self.at_rule_start():
                raise self.stray_error()
            if not self.newline_seen:
                raise self.error("a new rule must start on a new line")
        return _RuleDef(name, start, body)

    def parse_alternates(self) -> _Node:
        alternatives = [self.parse_sequence()]
        while self.peek() == "|":
            self.pos += 1
            self.skip_space()
            alternatives.append(self.parse_sequence())
        return alternatives[0] if len(alternatives) == 1 else _Alt(tuple(alternatives))

    def parse_sequence(self) -> _Node:
        items: list[_Node] = []
        while True:
            if self.peek() in _POSTFIX:
                raise self.error(f"{self.peek()!r} has nothing to repeat")
            item = self.parse_primary()
            if item is None:
                break
            items.append(self.parse_postfix(item))
        return items[0] if len(items) == 1 else _Seq(tuple(items))

    def parse_primary(self) -> _Node | None:
        c = self.peek()
        if c == '"':
            node: _Node = _Lit(self.parse_literal())
        elif c == "[":
            node = self.parse_class()
        elif c == ".":
            self.pos += 1
            node = _Any()
        elif c == "(":
            node = self.parse_group()
        elif c in _WORD and not self.at_rule_start():
            start = self.pos
            node = _Ref(self.read_name(), start)
        else:
            return None
        self.skip_space()
        return node

    def parse_group(self) -> _Node:
        start = self.pos
        self.enter(start)
        self.pos += 1
        self.skip_space()
        body = self.parse_alternates()
        if self.peek() != ")":
            if self.pos < len(self.text) and not self.at_rule_start():
                raise self.stray_error()
            raise self.error(f"expected ')' to close the '(' at {self.where(start)}")
        self.pos += 1
        self.depth -= 1
        return body

    def enter(self, pos: int) -> None:
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise self.error(f"grammar nested deeper than {MAX_NESTING} levels", pos)

    def parse_postfix(self, item: _Node) -> _Node:
        wraps = 0
        while self.peek() in _POSTFIX:
            start = self.pos
            self.enter(start)
            wraps += 1
            c = self.peek()
            self.pos += 1
            if c == "{":
                lo, hi = self.parse_braces(start)
            else:
                lo, hi = {"*": (0, None), "+": (1, None), "?": (0, 1)}[c]
            self.skip_space()
            item = _Repeat(item, lo, hi)
        self.depth -= wraps
        return item

    def parse_braces(self, start: int) -> tuple[int, int | None]:
        """``{m}``, ``{m,}``, ``{m,n}`` or ``{,n}``; ``pos`` is just past ``{``."""
        self.skip_space()
        no_min = self.peek() == ","
        lo = self.parse_count(start, required=not no_min)
        hi: int | None = lo
        if self.peek() == ",":
            self.pos += 1
            self.skip_space()
            hi = self.parse_count(start, required=True) if no_min or self.peek() != "}" else None
        if self.peek() != "}":
            raise self.error("expected '}' to close the repetition")
        self.pos += 1
        if hi is not None and hi < lo:
            raise self.error(f"repetition {{{lo},{hi}}} has its maximum below its minimum", start)
        return lo, hi

    def parse_count(self, start: int, *, required: bool) -> int:
        digits_start = self.pos
        while self.peek().isascii() and self.peek().isdigit():
            self.pos += 1
        digits = self.text[digits_start:self.pos]
        if not digits:
            if required:
                raise self.error("expected a number in the repetition")
            return 0
        value = int(digits)
        if value > MAX_REPEAT:
            line, column = _line_col(self.text, start)
            raise CompileLimitError(
                f"repetition count {value} at line {line}, column {column} exceeds {MAX_REPEAT}",
                limit="repetition", value=MAX_REPEAT)
        self.skip_space()
        return value

    # ----------------------------------------------------------- literals
    def parse_literal(self) -> str:
        start = self.pos
        self.pos += 1
        chars: list[str] = []
        while self.peek() != '"':
            if self.peek() in ("", "\n", "\r"):
                raise self.error("unterminated string literal", start)
            chars.append(chr(self.parse_char()))
        self.pos += 1
        return "".join(chars)

    def parse_class(self) -> _Class:
        start = self.pos
        self.pos += 1
        negated = self.peek() == "^"
        if negated:
            self.pos += 1
        ranges: list[tuple[int, int]] = []
        while self.peek() != "]":
            self.check_class_open(start)
            lo_pos = self.pos
            lo = self.parse_char()
            hi = lo
            if self.peek() == "-" and self.peek(1) != "]":
                self.pos += 1
                self.check_class_open(start)
                hi = self.parse_char()
                if hi < lo:
                    raise self.error("character range is reversed", lo_pos)
            ranges.append((lo, hi))
        self.pos += 1
        if not ranges:
            raise self.error("empty character class", start)
        return _Class(_merge_ranges(ranges), negated)

    def check_class_open(self, start: int) -> None:
        if self.peek() in ("", "\n", "\r"):
            raise self.error("unterminated character class", start)

    def parse_char(self) -> int:
        """One (possibly escaped) character of a literal or class, as a code point."""
        c = self.peek()
        if c != "\\":
            self.pos += 1
            return ord(c)
        start = self.pos
        e = self.peek(1)
        if e in _SIMPLE_ESCAPES:
            self.pos += 2
            return ord(_SIMPLE_ESCAPES[e])
        if e not in _HEX_ESCAPES:
            shown = f"'\\{e}'" if e else "'\\' at the end of the input"
            raise self.error(f"unknown escape {shown}", start)
        size = _HEX_ESCAPES[e]
        digits = self.text[start + 2:start + 2 + size]
        if len(digits) != size or not set(digits) <= _HEX:
            raise self.error(f"'\\{e}' needs {size} hex digits", start)
        value = int(digits, 16)
        if value > 0x10FFFF or 0xD800 <= value <= 0xDFFF:
            raise self.error(f"invalid code point U+{value:04X}", start)
        self.pos = start + 2 + size
        return value


# ------------------------------------------------------------------ regex side
_ALT, _CONCAT, _ATOM = 0, 1, 2


@dataclass(frozen=True)
class _Re:
    """A regex and its precedence (how much it binds, for safe composition)."""

    text: str
    prec: int


@dataclass(frozen=True)
class _Lang:
    """A regular language: regexes for it and for its non-empty strings.

    Both are None exactly when the language is just the empty string.
    """

    nonempty: _Re | None
    full: _Re | None
    nullable: bool


_EPSILON = _Lang(None, None, True)


def _single(r: _Re) -> _Lang:
    return _Lang(r, r, False)


def _escape_char(cp: int) -> str:
    c = chr(cp)
    if c.isprintable():
        return re.escape(c)
    return f"\\u{cp:04x}" if cp <= 0xFFFF else f"\\U{cp:08x}"


def _group(r: _Re, prec: int) -> str:
    return r.text if r.prec >= prec else f"(?:{r.text})"


def _concat(parts: list[_Re]) -> _Re | None:
    if len(parts) <= 1:
        return parts[0] if parts else None
    return _Re("".join(_group(p, _CONCAT) for p in parts), _CONCAT)


def _union(parts: list[_Re]) -> _Re | None:
    unique = list(dict.fromkeys(parts))
    if len(unique) <= 1:
        return unique[0] if unique else None
    return _Re("|".join(p.text for p in unique), _ALT)


def _quantify(r: _Re, lo: int, hi: int | None) -> _Re:
    if (lo, hi) == (1, 1):
        return r
    suffix = {(0, 1): "?", (0, None): "*", (1, None): "+"}.get((lo, hi))
    if suffix is None:
        suffix = f"{{{lo}}}" if lo == hi else f"{{{lo},{'' if hi is None else hi}}}"
    return _Re(_group(r, _ATOM) + suffix, _CONCAT)


def _class_regex(node: _Class) -> _Re:
    if not node.negated and len(node.ranges) == 1 and node.ranges[0][0] == node.ranges[0][1]:
        return _Re(_escape_char(node.ranges[0][0]), _ATOM)
    body = "".join(_escape_char(lo) if lo == hi else f"{_escape_char(lo)}-{_escape_char(hi)}"
                   for lo, hi in node.ranges)
    return _Re(f"[{'^' if node.negated else ''}{body}]", _ATOM)


def _fulls(langs: list[_Lang]) -> list[_Re]:
    return [lang.full for lang in langs if lang.full is not None]


def _seq_lang(langs: list[_Lang]) -> _Lang:
    full = _concat(_fulls(langs))
    if not all(lang.nullable for lang in langs):
        return _Lang(full, full, False)
    return _Lang(_nonempty_of_nullables([lang for lang in langs if lang.full is not None]), full, True)


def _nonempty_of_nullables(langs: list[_Lang]) -> _Re | None:
    """Non-empty strings of a sequence of nullable parts, split in halves A B.

    A non-empty string of A B is non-empty in A (then anything in B) or empty in
    A and non-empty in B: ``ne(A) full(B) | ne(B)``.  Halving keeps the regex
    O(n log n) long and O(log n) deep.
    """
    if len(langs) <= 1:
        return langs[0].nonempty if langs else None
    mid = len(langs) // 2
    left, right = _nonempty_of_nullables(langs[:mid]), _nonempty_of_nullables(langs[mid:])
    longer = _concat([left, *_fulls(langs[mid:])]) if left is not None else None
    return _union([r for r in (longer, right) if r is not None])


def _alt_lang(langs: list[_Lang]) -> _Lang:
    nonempty = _union([lang.nonempty for lang in langs if lang.nonempty is not None])
    if nonempty is None:
        return _EPSILON
    if any(lang.full is None for lang in langs):  # a bare "" alternative
        return _Lang(nonempty, _quantify(nonempty, 0, 1), True)
    return _Lang(nonempty, _union(_fulls(langs)), any(lang.nullable for lang in langs))


def _repeat_lang(lang: _Lang, lo: int, hi: int | None) -> _Lang:
    if lang.nonempty is None or hi == 0:
        return _EPSILON
    if lang.nullable:  # padding with "" makes every count up to hi reachable
        lo = 0
    nonempty = _quantify(lang.nonempty, max(lo, 1), hi)
    return _Lang(nonempty, _quantify(lang.nonempty, lo, hi), lo == 0)


def _regular_lang(node: _Node) -> _Lang:
    """The language of a reference-free node, as regexes (see `_Lang`)."""
    if isinstance(node, _Lit):
        if not node.text:
            return _EPSILON
        text = "".join(_escape_char(ord(c)) for c in node.text)
        return _single(_Re(text, _ATOM if len(node.text) == 1 else _CONCAT))
    if isinstance(node, _Class):
        return _single(_class_regex(node))
    if isinstance(node, _Any):
        return _single(_Re("(?s:.)", _ATOM))
    if isinstance(node, _Seq):
        return _seq_lang([_regular_lang(i) for i in node.items])
    if isinstance(node, _Alt):
        return _alt_lang([_regular_lang(i) for i in node.items])
    if isinstance(node, _Repeat):
        return _repeat_lang(_regular_lang(node.item), node.min, node.max)
    raise TypeError(f"not a regular node: {node!r}")


def _is_regular(node: _Node) -> bool:
    if isinstance(node, _Ref):
        return False
    if isinstance(node, (_Seq, _Alt)):
        return all(_is_regular(i) for i in node.items)
    if isinstance(node, _Repeat):
        return _is_regular(node.item)
    return True


def _terminal_kind(node: _Node) -> str:
    """A readable stem for a terminal name: ``[0-9]+`` is a CLASS, ``"a" [b]`` a PAT."""
    if isinstance(node, _Lit):
        return "LIT"
    while isinstance(node, _Repeat):
        node = node.item
    return {_Class: "CLASS", _Any: "ANY"}.get(type(node), "PAT")


# ---------------------------------------------------------------------- lowering
_Symbols = tuple[str, ...]


class _Lowering:
    """Turns rule ASTs into IR rules, terminals and helper rules."""

    def __init__(self, text: str = "") -> None:
        self.terminals: list[TerminalDef] = []
        self.rules: list[Rule] = []
        self._by_regex: dict[str, str] = {}
        self._helpers: dict[object, str] = {}
        self._count = 0
        self._owner = ""
        self._text = text            # the GBNF text, and where the rule being lowered starts in it
        self._owner_pos = 0

    def add_rule(self, name: str, body: _Node, pos: int = 0) -> None:
        self._owner, self._owner_pos = name, pos
        _check_time(self._text, pos, name)
        at = len(self.rules)
        own = [Rule(name, rhs) for rhs in self._alternatives(body)]
        self.rules[at:at] = own  # the rule first, then the helpers it created

    def _fresh(self, stem: str) -> str:
        _check_time(self._text, self._owner_pos, self._owner)
        self._count += 1
        return f"{stem}_{self._count - 1}"

    def _terminal(self, regex: str, kind: str) -> str:
        if regex not in self._by_regex:
            name = self._fresh(kind)
            self._by_regex[regex] = name
            self.terminals.append(TerminalDef(name, regex))
        return self._by_regex[regex]

    def _helper(self, kind: str, alternatives: list[_Symbols]) -> str:
        key = tuple(alternatives)
        if key not in self._helpers:
            name = self._fresh(f"{self._owner}_{kind}")
            self._helpers[key] = name
            self.rules.extend(Rule(name, rhs) for rhs in alternatives)
        return self._helpers[key]

    def _recursive_helper(self, kind: str, item: str) -> str:
        """``star``: H -> () | H item;  ``plus``: H -> item | H item."""
        key = (kind, item)
        if key not in self._helpers:
            name = self._fresh(f"{self._owner}_{kind}")
            self._helpers[key] = name
            base: _Symbols = () if kind == "star" else (item,)
            self.rules.extend([Rule(name, base), Rule(name, (name, item))])
        return self._helpers[key]

    def _alternatives(self, node: _Node) -> list[_Symbols]:
        if _is_regular(node):
            return self._regular_alternatives(node)
        if not isinstance(node, _Alt):
            return [self._symbols(node)]
        regular = [a for a in node.items if _is_regular(a)]
        out: list[_Symbols] = []
        for item in node.items:
            if not _is_regular(item):
                out.append(self._symbols(item))
            elif item is regular[0]:
                merged = regular[0] if len(regular) == 1 else _Alt(tuple(regular))
                out.extend(self._regular_alternatives(merged))
        return list(dict.fromkeys(out))

    def _regular_alternatives(self, node: _Node) -> list[_Symbols]:
        lang = _regular_lang(node)
        out: list[_Symbols] = [()] if lang.nullable else []
        if lang.nonempty is not None:
            out.append((self._terminal(lang.nonempty.text, _terminal_kind(node)),))
        return out

    def _symbols(self, node: _Node) -> _Symbols:
        """A symbol string deriving exactly the language of ``node``."""
        if isinstance(node, _Ref):
            return (node.name,)
        if isinstance(node, _Seq) and not _is_regular(node):
            return self._sequence(node.items)
        if isinstance(node, _Repeat) and not _is_regular(node):
            return self._repeat(node)
        alternatives = self._alternatives(node)
        if len(alternatives) == 1:
            return alternatives[0]
        return (self._helper("opt" if () in alternatives else "alt", alternatives),)

    def _sequence(self, items: tuple[_Node, ...]) -> _Symbols:
        out: list[str] = []
        run: list[_Node] = []
        for item in (*items, None):
            if item is not None and _is_regular(item):
                run.append(item)
                continue
            if run:
                out.extend(self._symbols(run[0] if len(run) == 1 else _Seq(tuple(run))))
                run = []
            if item is not None:
                out.extend(self._symbols(item))
        return tuple(out)

    def _repeat(self, node: _Repeat) -> _Symbols:
        body = self._symbols(node.item)
        if not body or node.max == 0:
            return ()
        item = body[0] if len(body) == 1 else self._helper("seq", [body])
        if node.max is None:
            if node.min == 0:
                return (self._recursive_helper("star", item),)
            return (item,) * (node.min - 1) + (self._recursive_helper("plus", item),)
        tail: _Symbols = ()
        for _ in range(node.max - node.min):  # O_k -> () | item O_(k-1)
            tail = (self._helper("opt", [(), (item, *tail)]),)
        return (item,) * node.min + tail


# ------------------------------------------------------------------------- entry
def _check_references(rules: list[_RuleDef], parser: _Parser) -> None:
    """`GrammarSyntaxError` at the first reference to a rule that is not defined."""
    defined = {r.name for r in rules}

    def walk(node: _Node) -> None:
        if isinstance(node, _Ref) and node.name not in defined:
            raise parser.error(f"undefined rule {node.name!r}", node.pos)
        if isinstance(node, (_Seq, _Alt)):
            for item in node.items:
                walk(item)
        elif isinstance(node, _Repeat):
            walk(node.item)

    for rule in rules:
        _check_time(parser.text, rule.pos, rule.name)
        walk(rule.body)


def grammar_from_gbnf(text: str, *, start: str = "root", source: str = "<gbnf>",
                      timeout: float | None = DEFAULT_COMPILE_TIMEOUT) -> Grammar:
    """Compile llama.cpp GBNF text into the Grammar IR.

    Regular parts become single terminals; see the module docstring for the mapping.
    Past ``timeout`` seconds (None: no limit) `CompileTimeoutError` names the rule being
    read or lowered and its line.

    Example:
        >>> g = grammar_from_gbnf('root ::= [0-9]+ ("," [0-9]+)*')
        >>> [t.regex for t in g.terminals]
        ['[0-9]+(?:,[0-9]+)*']
        >>> g = grammar_from_gbnf('root ::= "(" root ")" | [a-z]*')
        >>> [(r.lhs, r.rhs) for r in g.rules]
        [('root', ('LIT_0', 'root', 'LIT_1')), ('root', ()), ('root', ('CLASS_2',))]
        >>> g.terminal('CLASS_2').regex
        '[a-z]+'
    """
    if not isinstance(text, str):
        raise GrammarError(f"a GBNF grammar must be a str, not {type(text).__name__}", source=source)
    with compile_deadline(timeout):
        return _grammar_from_gbnf(text, start, source)


def _grammar_from_gbnf(text: str, start: str, source: str) -> Grammar:
    parser = _Parser(text, source)
    rules = parser.parse()
    _check_references(rules, parser)
    if start not in {r.name for r in rules}:
        raise GrammarSyntaxError(f"start rule {start!r} is not defined", line=1, column=1,
                                 source=source)
    lowering = _Lowering(text)
    for rule in rules:
        lowering.add_rule(rule.name, rule.body, rule.pos)
    try:
        return Grammar(terminals=tuple(lowering.terminals), rules=tuple(dict.fromkeys(lowering.rules)),
                       start=start, ignore=(), source=source)
    except GrammarError as e:  # pragma: no cover - the lowering only builds valid IR
        raise GrammarSyntaxError(e.message, source=source) from None
