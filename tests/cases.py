"""Grammar cases shared by the engine's exactness and soundness tests: every shipped
grammar plus inline grammars that stress ambiguity, nullable rules, dynamic
splits and non-ASCII regexes, each with an independent oracle where one exists."""

from __future__ import annotations

from constrained.grammar.ir import Grammar
from constrained.testing.reference import Reference

INLINE_LARK: dict[str, str] = {
    # JSON written differently from grammars/json.lark: lark's common terminals, %ignore WS
    "json_inline": r'''
?start: value
?value: object | array | STRING | SIGNED_NUMBER | "true" | "false" | "null"
array  : "[" [value ("," value)*] "]"
object : "{" [pair ("," pair)*] "}"
pair   : STRING ":" value
STRING : /"(?:[^"\\\n]|\\["\\\/bfnrtu])*"/
%import common.SIGNED_NUMBER
%import common.WS
%ignore WS
''',
    # ambiguous: "xxx" has many derivations
    "ambiguous": 'start: a+\na: "x" | "xx" | "x" "x"\n',
    # greedy lexing of /a+/ would eat the "a" that B needs
    "dynamic_split": 'start: A B\nA: /a+/\nB: /ab/\n',
    # nullable rules and left recursion, an ignored space
    "nullable_leftrec": r'''
start: seq
seq: seq item
   | empty
empty:
item: "(" seq ")" | NAME bang
bang: "!" | empty
NAME: /[a-z]+/
%ignore " "
''',
    # left-recursive arithmetic with ignored whitespace.  (common.WS, not WS_INLINE:
    # with an ignored /[ \t]+/ the engine's mask is exponential in the length of a
    # token like 48 spaces + "\n", which Llama 3 has; see test_exactness's xfail test.)
    "expr": r'''
start: sum
?sum: product | sum ("+"|"-") product
?product: atom | product ("*"|"/") atom
?atom: NUMBER | "-" atom | "(" sum ")"
%import common.NUMBER
%import common.WS
%ignore WS
''',
    # adjacent WORDs may split anywhere; the ignored space overlaps nothing
    "words": 'start: WORD+\nWORD: /[a-z]+/\n%ignore " "\n',
}

INLINE_REGEX: dict[str, str] = {
    "regex_greek": r"[α-ω]+é?",
    "regex_mixed": r"(?:[α-ω]+é?|[0-9]{2,4}|€+)(?:-[a-zé]{1,3})*",
}

INLINE_GBNF: dict[str, str] = {
    "gbnf_list": r'''
root ::= "<" ws (item ("," ws item)*)? ">"
item ::= [a-z]+ | "'" [^'<>]* "'" | root
ws ::= [ \t\n]*
''',
    # regex metacharacters in literals and classes (must be escaped in the IR)
    "gbnf_brackets": r'''
root ::= "[" ws (item ("," ws item)*)? "]"
item ::= [a-z.^-]+ | "\"" [^"\\]* "\"" | "(" root ")*" | "{" [0-9]{1,3} "}"
ws ::= [ \t\n]*
''',
}


# Longest prefix (bytes) tests should explore per case.  "ambiguous": the engine's
# state after n x's holds Fib(n) configurations (see test_exactness's xfail test),
# so walks stay short there.  "nullable_leftrec": in a run of n letters the engine
# keeps n configurations (one parser node per split point, same root cause), and
# each needs its own token mask, so long runs make masks slow (not wrong).
MAX_BYTES: dict[str, int] = {"ambiguous": 8, "nullable_leftrec": 24}


class Case:
    """A grammar under test and, where there is one, an independent oracle for it."""

    def __init__(self, name: str, kind: str, text: str, path: str | None = None) -> None:
        self.name = name
        self.max_bytes = MAX_BYTES.get(name, 10**9)
        self.kind = kind  # "lark" | "regex" | "gbnf"
        self.text = text
        self.path = path
        self._grammar = None
        self._lark = None
        self._reference = None

    def __repr__(self) -> str:
        return f"Case({self.name})"

    @property
    def grammar(self) -> Grammar:
        if self._grammar is None:
            if self.kind == "lark":
                self._grammar = Grammar.from_lark(self.text, source=self.path or self.name)
            elif self.kind == "regex":
                self._grammar = Grammar.from_regex(self.text, source=self.name)
            else:
                self._grammar = Grammar.from_gbnf(self.text, source=self.path or self.name)
        return self._grammar

    @property
    def reference(self) -> Reference:
        if self._reference is None:
            self._reference = Reference(self.grammar)
        return self._reference

    def oracle(self, data: bytes) -> bool | None:
        """Independent membership: lark's Earley parser (``dynamic_complete``) for lark
        grammars, ``re.fullmatch`` for regexes; None where there is none (GBNF)."""
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return False
        if self.kind == "regex":
            import re
            return re.fullmatch(self.text, text) is not None
        if self.kind == "lark":
            import lark
            if self._lark is None:
                self._lark = lark.Lark(self.text, parser="earley", lexer="dynamic_complete")
            try:
                self._lark.parse(text)
                return True
            except lark.exceptions.LarkError:
                return False
        return None


def shipped_cases(root) -> list[Case]:
    """Cases for every grammar file shipped in ``<root>/grammars`` (at run time)."""
    from pathlib import Path

    out = []
    gdir = Path(root) / "grammars"
    for p in sorted(gdir.glob("*")):
        kind = {".lark": "lark", ".gbnf": "gbnf", ".regex": "regex", ".re": "regex"}.get(p.suffix.lower())
        if kind is None:
            continue
        text = p.read_text(encoding="utf-8")
        if kind == "regex":
            text = text.rstrip("\n")
        out.append(Case(f"{p.name}", kind, text, path=str(p)))
    return out


def inline_cases() -> list[Case]:
    out = [Case(n, "lark", t) for n, t in INLINE_LARK.items()]
    out += [Case(n, "regex", t) for n, t in INLINE_REGEX.items()]
    try:
        import constrained.grammar.gbnf  # noqa: F401
    except ImportError:  # pragma: no cover - the GBNF front end is optional
        pass
    else:
        out += [Case(n, "gbnf", t) for n, t in INLINE_GBNF.items()]
    return out
