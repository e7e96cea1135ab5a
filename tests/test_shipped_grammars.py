"""The grammars shipped in ``grammars/``: each accepts realistic text, rejects
near misses, and is *sound*: every string its language contains is accepted by an
independent reference (json.loads, SQLite, Python's parser, an evaluator).

A grammar's language is what lark's Earley parser with ``lexer='dynamic_complete'``
accepts: any split of the text into terminal matches, with %ignore matches between
any two terminals.  The soundness tests therefore generate sentences from lark's
compiled rules and terminal regexes directly (every split is reachable that way),
with %ignore matches inserted at random gaps, and ask the reference about them.
"""

from __future__ import annotations

import ast
import functools
import json
import keyword
import random
import re
import sqlite3
import string
import warnings
from collections import defaultdict
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lark import Lark, Token
from lark.exceptions import LarkError

GRAMMARS = Path(__file__).resolve().parents[1] / "grammars"
SHIPPED = ("json", "arithmetic", "sql_select", "python_subset")


@functools.cache
def load(name: str) -> Lark:
    text = (GRAMMARS / f"{name}.lark").read_text(encoding="utf-8")
    return Lark(text, parser="earley", lexer="dynamic_complete")


def accepts(name: str, text: str) -> bool:
    try:
        load(name).parse(text)
    except LarkError:
        return False
    return True


# ============================================================== references

def json_reference(text: str) -> None:
    json.loads(text)


def _exact_value(node: ast.AST, source: str) -> Fraction:
    """Value of an arithmetic AST in exact rationals; only + - * /, unary -, numbers."""
    if isinstance(node, ast.Expression):
        return _exact_value(node.body, source)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return Fraction(ast.get_source_segment(source, node))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_exact_value(node.operand, source)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.Div)):
        a, b = _exact_value(node.left, source), _exact_value(node.right, source)
        if isinstance(node.op, ast.Add):
            return a + b
        if isinstance(node.op, ast.Sub):
            return a - b
        if isinstance(node.op, ast.Mult):
            return a * b
        return a / b  # ZeroDivisionError propagates
    raise ValueError(f"not plain arithmetic: {ast.dump(node)}")


def arithmetic_reference(text: str) -> Fraction | None:
    """Python's value of the expression (None for a division by zero)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tree = ast.parse(text, mode="eval")
    try:
        return _exact_value(tree, text)
    except ZeroDivisionError:
        return None


@functools.cache
def _arithmetic_with_positions() -> Lark:
    text = (GRAMMARS / "arithmetic.lark").read_text(encoding="utf-8")
    return Lark(text, parser="earley", lexer="dynamic_complete", propagate_positions=True)


def _tree_value(t, text: str) -> Fraction:
    if isinstance(t, Token):
        assert t.type == "NUMBER", t
        return Fraction(str(t))
    if t.data == "start":
        return _tree_value(t.children[0], text)
    if t.data == "neg":  # one or more minus signs (filtered out of the tree) before the operand
        (operand,) = t.children
        begin = operand.start_pos if isinstance(operand, Token) else operand.meta.start_pos
        signs = text[t.meta.start_pos:begin].count("-")
        assert signs >= 1
        return (-1) ** signs * _tree_value(operand, text)
    a, b = (_tree_value(c, text) for c in t.children)
    return {"add": a.__add__, "sub": a.__sub__, "mul": a.__mul__, "div": a.__truediv__}[t.data](b)


def arithmetic_grammar_value(text: str) -> Fraction | None:
    """The value of lark's tree under the grammar's named alternatives."""
    try:
        return _tree_value(_arithmetic_with_positions().parse(text), text)
    except ZeroDivisionError:
        return None


SQL_SCHEMA = """
CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT, email TEXT, age INTEGER, city TEXT);
CREATE TABLE orders (id INTEGER PRIMARY KEY, user_id INTEGER, product_id INTEGER,
                     amount REAL, status TEXT, created_at TEXT);
CREATE TABLE products (id INTEGER PRIMARY KEY, title TEXT, price REAL, category TEXT);
"""
SQL_SYNTAX_ERRORS = ("syntax error", "incomplete input", "unrecognized token")


@functools.cache
def _sqlite() -> sqlite3.Connection:
    con = sqlite3.connect(":memory:")
    con.executescript(SQL_SCHEMA)
    return con


def sql_reference(query: str, *, strict: bool = False) -> None:
    """Raise unless SQLite parses ``query``.  Errors about unknown tables,
    columns or functions are not syntax errors and pass, unless ``strict``."""
    try:
        _sqlite().execute("EXPLAIN " + query).fetchall()
    except sqlite3.OperationalError as e:
        if strict or any(k in str(e) for k in SQL_SYNTAX_ERRORS):
            raise
    # sqlite3.ProgrammingError / Warning (two statements) and ValueError (NUL
    # character) are no "missing name" errors: they propagate as rejections.


def python_reference(source: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ast.parse(source)


# ============================================================== identifiers

# SQLite's keywords (https://sqlite.org/lang_keywords.html, SQLite 3.40).
SQLITE_KEYWORDS = """
ABORT ACTION ADD AFTER ALL ALTER ALWAYS ANALYZE AND AS ASC ATTACH AUTOINCREMENT BEFORE
BEGIN BETWEEN BY CASCADE CASE CAST CHECK COLLATE COLUMN COMMIT CONFLICT CONSTRAINT CREATE
CROSS CURRENT CURRENT_DATE CURRENT_TIME CURRENT_TIMESTAMP DATABASE DEFAULT DEFERRABLE
DEFERRED DELETE DESC DETACH DISTINCT DO DROP EACH ELSE END ESCAPE EXCEPT EXCLUDE EXCLUSIVE
EXISTS EXPLAIN FAIL FILTER FIRST FOLLOWING FOR FOREIGN FROM FULL GENERATED GLOB GROUP
GROUPS HAVING IF IGNORE IMMEDIATE IN INDEX INDEXED INITIALLY INNER INSERT INSTEAD INTERSECT
INTO IS ISNULL JOIN KEY LAST LEFT LIKE LIMIT MATCH MATERIALIZED NATURAL NO NOT NOTHING
NOTNULL NULL NULLS OF OFFSET ON OR ORDER OTHERS OUTER OVER PARTITION PLAN PRAGMA PRECEDING
PRIMARY QUERY RAISE RANGE RECURSIVE REFERENCES REGEXP REINDEX RELEASE RENAME REPLACE
RESTRICT RETURNING RIGHT ROLLBACK ROW ROWS SAVEPOINT SELECT SET TABLE TEMP TEMPORARY THEN
TIES TO TRANSACTION TRIGGER UNBOUNDED UNION UNIQUE UPDATE USING VACUUM VALUES VIEW VIRTUAL
WHEN WHERE WINDOW WITH WITHOUT
""".split()

IDENT_FIRST = string.ascii_letters + "_"
IDENT_REST = string.ascii_letters + string.digits + "_"


def _char_class(chars) -> str:
    chars = sorted(set(chars))
    out, i = [], 0
    while i < len(chars):
        j = i
        while j + 1 < len(chars) and ord(chars[j + 1]) == ord(chars[j]) + 1:
            j += 1
        out.append(chars[i] + "-" + chars[j] if j - i >= 2 else "".join(chars[i:j + 1]))
        i = j + 1
    return "[" + "".join(out) + "]"


def keyword_free_identifier(name: str, keywords, *, ignore_case: bool, after: str = "") -> str:
    """Lark definitions of terminal ``name``: [A-Za-z_][A-Za-z0-9_]* minus ``keywords``.

    This generates the identifier terminals of sql_select.lark and python_subset.lark
    (regular expressions have no "except these words", and the grammars may use no
    look-arounds).  The regex walks a trie of the keywords: at each keyword prefix it
    either leaves the trie (a character no keyword continues with, then anything) or
    follows an edge; it may stop only where no keyword ends.  With ``ignore_case``
    letters are spelled [Xx], never with re.IGNORECASE, which would also fold
    non-ASCII letters (U+017F, U+212A) onto ASCII ones.  One sub-terminal per first
    character keeps lines readable; lark joins them into one regex.  ``after`` is a
    regex appended to the whole terminal.
    """
    fold = str.lower if ignore_case else (lambda s: s)
    trie: dict = {}
    for word in keywords:
        node = trie
        for ch in fold(word):
            node = node.setdefault(ch, {})
        node[""] = {}
    rest = _char_class(IDENT_REST)

    def variants(ch):
        return {ch.lower(), ch.upper()} if ignore_case else {ch}

    def edge(ch):
        v = variants(ch)
        return _char_class(v) if len(v) > 1 else ch

    def suffix(node):
        kids = sorted(k for k in node if k)
        if not kids:  # a whole keyword: the identifier must go on
            return rest + "+"
        used = set().union(*map(variants, kids))
        alts = [_char_class(set(IDENT_REST) - used) + rest + "*"]
        alts += [edge(k) + suffix(node[k]) for k in kids]
        return "(?:" + "|".join(alts) + ")" + ("" if "" in node else "?")

    kids = sorted(k for k in trie if k)
    used = set().union(*map(variants, kids))
    parts = [(f"_{name}_OTHER", _char_class(set(IDENT_FIRST) - used) + rest + "*")]
    for k in kids:
        label = ("CAP_" if k.isupper() and not ignore_case else "") + k.upper()
        parts.append((f"_{name}_{label}", edge(k) + suffix(trie[k])))
    union = " | ".join(p for p, _ in parts)
    head = f"{name}: ({union}) /{after}/" if after else f"{name}: {union}"
    return "\n".join([head] + [f"{p}: /{rx}/" for p, rx in parts]) + "\n"


IDENTIFIER_TERMINALS = {
    # grammar: (terminal, keywords, ignore_case, after, trailing text allowed by the terminal)
    "sql_select": ("IDENT", SQLITE_KEYWORDS, True, "", ""),
    "python_subset": ("NAME", keyword.kwlist, False, "[ \\t]*", " \t"),
}


def _terminal_regex(grammar: str, terminal: str) -> str:
    return next(t.pattern.to_regexp() for t in load(grammar).terminals if t.name == terminal)


@pytest.mark.parametrize("grammar", sorted(IDENTIFIER_TERMINALS))
def test_identifier_terminal_is_generated(grammar):
    name, words, ignore_case, after, _ = IDENTIFIER_TERMINALS[grammar]
    text = (GRAMMARS / f"{grammar}.lark").read_text(encoding="utf-8")
    assert keyword_free_identifier(name, words, ignore_case=ignore_case, after=after) in text, (
        f"regenerate {name} in {grammar}.lark with keyword_free_identifier()")


@pytest.mark.parametrize("grammar", sorted(IDENTIFIER_TERMINALS))
def test_identifier_terminal_excludes_exactly_the_keywords(grammar):
    name, words, ignore_case, _, trailing = IDENTIFIER_TERMINALS[grammar]
    regex = re.compile(_terminal_regex(grammar, name))
    fold = str.lower if ignore_case else (lambda s: s)
    reserved = {fold(w) for w in words}
    candidates = {"a", "_", "x1", "é", "ſelect", "\u212aey", "ıf", "1a", "a-b", ""}
    for w in words:  # each keyword, its case variants, and all one-edit neighbours
        for v in {w, w.lower(), w.upper(), w.capitalize(), w.swapcase()}:
            for i in range(len(v) + 1):
                candidates |= {v[:i], v[:i] + v[i + 1:]}
                for c in "aZ_9eE":
                    candidates |= {v[:i] + c + v[i:], v[:i] + c + v[i + 1:]}
    for w in sorted(candidates):
        expected = re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", w) is not None and fold(w) not in reserved
        assert (regex.fullmatch(w) is not None) == expected, w
        if expected and trailing:
            assert regex.fullmatch(w + trailing)


def test_python_names_are_exactly_what_python_accepts():
    regex = re.compile(_terminal_regex("python_subset", "NAME"))
    for w in keyword.kwlist + ["match", "case", "type", "_", "print", "x1", "Nonex"]:
        ok = regex.fullmatch(w) is not None
        try:
            python_reference(f"{w} = 1")
            assert ok, w
        except SyntaxError:
            assert not ok, w


# ============================================================== terminals

@pytest.mark.parametrize("grammar", SHIPPED)
def test_terminals_are_plain_nonempty_regexes(grammar):
    from constrained.automata.regex_parser import nullable, parse_regex  # the engine's own checks
    from constrained.grammar.ir import Grammar

    g = Grammar.from_file(GRAMMARS / f"{grammar}.lark")
    for t in g.terminals:
        assert not nullable(parse_regex(t.regex, terminal=t.name)), t.name
        assert re.fullmatch(t.regex, "") is None, t.name
        assert not re.search(r"\\[dwsDWSbB]", t.regex), f"{t.name}: use explicit classes"


def test_files_begin_with_a_description():
    for grammar in SHIPPED:
        head = (GRAMMARS / f"{grammar}.lark").read_text(encoding="utf-8")[:4000]
        assert head.startswith("//")
        assert "excluded" in head.lower() and "reference" in head.lower(), grammar


# ============================================================== JSON

JSON_POSITIVE = [
    '{"name": "Ada", "age": 36, "languages": ["en", "fr"], "retired": false}',
    '[1, -2, 3.25, 0, -0, 1e10, 2.5E-3, 6.02e+23, -0.0]',
    '"just a string"',
    "42",
    "true",
    "null",
    "{}",
    "[]",
    '  \n\t{ "a" : [ ] , "b" : { } }\r\n',
    '{"nested": {"deep": {"deeper": [[[{"x": null}]]]}}}',
    '"escapes: \\" \\\\ \\/ \\b \\f \\n \\r \\t \\u00e9 \\uD83D\\uDE00"',
    '"unicode: é ü 漢字 😀"',
    '{"": "", "k": "v"}',
    '[true,false,null,"x",{"y":1}]',
    '{"id":12345678901234567890,"price":19.99,"tags":[]}',
]

JSON_NEGATIVE = [
    "[1,]", '{"a": 1,}', "01", "[01]", "-01", "{'a': 1}", "{a: 1}", "NaN", "Infinity", "-",
    "1.", ".5", "+1", '"\t"', '"\\x41"', '"\\u12"', "tru", "nul", "True", "[1 2]", '{"a" 1}',
    '{"a":}', "[", "", "   ", '"abc', "true false", "1 2", '"a" "b"', "[1]]", "// c\n1",
    "0x10", "1e", "--1", '{"a":1 "b":2}', "[,1]", "\u00a01",
]


@pytest.mark.parametrize("text", JSON_POSITIVE)
def test_json_accepts(text):
    assert accepts("json", text)
    json_reference(text)


@pytest.mark.parametrize("text", JSON_NEGATIVE)
def test_json_rejects(text):
    assert not accepts("json", text)


# ============================================================== arithmetic

ARITHMETIC_POSITIVE = [
    "1 + 2 * 3", "(1 + 2) * 3", "-(4 - 1.5) / 2", "((7))", "10 / 4 - 2.5", "-2*3", "2*-3",
    "1 - -1", "--1", "1--1", "0", "3.14159", "100 - 20 - 30", "8 / 2 / 2", "1/0",
    "( 1 +2 )*( 3- 4 )", "1\t+\t2 ", "-(-(-(1)))", "0.5 * (2 + 3.75) - 10 / (1 - 0.25)",
]

ARITHMETIC_NEGATIVE = [
    "01", "007", "1 +", "(1", "1)", "()", "", " ", " 1", "1..2", ".5", "5.", "1e3", "2**3",
    "2//3", "2 % 3", "+1", "a", "1 2", "1\n+2", "(1)(2)", "2(3)", "--", "1 + * 2", "1_000",
    "(1 + 2", "1 + 2)", "1,5",
]


@pytest.mark.parametrize("text", ARITHMETIC_POSITIVE)
def test_arithmetic_accepts(text):
    assert accepts("arithmetic", text)
    assert arithmetic_grammar_value(text) == arithmetic_reference(text)


@pytest.mark.parametrize("text", ARITHMETIC_NEGATIVE)
def test_arithmetic_rejects(text):
    assert not accepts("arithmetic", text)


def test_arithmetic_precedence_and_associativity():
    assert arithmetic_grammar_value("1 + 2 * 3") == 7
    assert arithmetic_grammar_value("100 - 20 - 30") == 50
    assert arithmetic_grammar_value("8 / 2 / 2") == 2
    assert arithmetic_grammar_value("-2 * 3 + 1") == -5
    assert arithmetic_grammar_value("(1 + 2) * 3") == 9
    assert arithmetic_grammar_value("1 - -1") == 2
    assert arithmetic_grammar_value("1/0") is None


# ============================================================== SQL

SQL_POSITIVE = [
    "SELECT * FROM users",
    "select id, name from users where age >= 18 order by name",
    "SELECT DISTINCT city FROM users WHERE city IS NOT NULL ORDER BY city ASC;",
    "SELECT u.name, COUNT(*) AS n_orders, SUM(o.amount) AS total FROM users AS u "
    "JOIN orders AS o ON o.user_id = u.id GROUP BY u.name HAVING COUNT(*) > 2 "
    "ORDER BY total DESC LIMIT 10",
    "SELECT name FROM users WHERE email LIKE '%@example.com' AND NOT age < 21",
    "SELECT * FROM orders WHERE status IN ('shipped', 'delivered') AND amount BETWEEN 10 AND 99.5",
    "SELECT title, price * 1.2 AS gross FROM products WHERE category = 'book' OR price < .5",
    "SELECT u.*, o.amount FROM users AS u LEFT OUTER JOIN orders AS o ON u.id = o.user_id",
    "SELECT name FROM users WHERE id IN (SELECT user_id FROM orders WHERE amount > 100)",
    "SELECT count(DISTINCT city) FROM users",
    "SELECT 1",
    "SELECT 1 + 2 * 3, 'it''s', NULL, -4.5e-3",
    "SELECT name FROM users WHERE age IS NULL OR city NOT IN ('Paris', 'Rome') LIMIT 5 OFFSET 10",
    "SELECT CASE WHEN age < 18 THEN 'minor' WHEN age < 65 THEN 'adult' ELSE 'senior' END AS bracket "
    "FROM users",
    "SELECT CASE status WHEN 'new' THEN 1 ELSE 0 END FROM orders",
    "SELECT p.title FROM products AS p, orders AS o WHERE p.id = o.product_id AND o.status <> 'void'",
    'SELECT "name", upper(name) || \'!\' AS shout FROM "users"',
    "SELECT name FROM users WHERE EXISTS (SELECT 1 FROM orders WHERE orders.user_id = users.id)",
    "SELECT t.c FROM (SELECT city AS c FROM users) AS t",
    "SELECT name FROM users WHERE name NOT LIKE 'A%' AND city GLOB '[A-Z]*' AND age NOT BETWEEN 30 AND 40",
    "SELECT max(price), min(price), avg(price) FROM products GROUP BY category",
    "SELECT a.id FROM users AS a CROSS JOIN users AS b INNER JOIN orders ON orders.user_id = a.id",
    "  SELECT\n\tid\nFROM\n\tusers\nWHERE\n\tage != 3 ;  ",
    "SELECT amount - -1, amount % 2 = 0, (amount) FROM orders",
    "SELECT coalesce(city, 'unknown') FROM users ORDER BY 1 DESC, name",
    "SELECT (SELECT max(amount) FROM orders) AS top",
]

SQL_NEGATIVE = [
    "SELECT FROM users", "SELECTid FROM users", "SELECT id FROMusers", "SELECT idFROM users",
    "SELECT id FROM usersWHERE age = 1", "SELECT id FROM users WHEREage = 1", "SELECT * FROM",
    "SELECT", "SELECT id FROM users WHERE", "SELECT id FROM users WHERE name = 'x",
    "SELECT id,, name FROM users", "SELECT id FROM users ORDER id", "SELECT id FROM users LIMIT",
    "SELECT from FROM users", "SELECT id FROM select", "SELECT order FROM users",
    "SELECT id FROM users WHERE id --1 > 0", "SELECT id FROM users WHERE id-- 1 > 0",
    "SELECT id FROM users WHERE id--1", "SELECT id FROM users WHERE - -id > 0",
    "SELECT id FROM users -- comment", "SELECT id /* c */ FROM users", "SELECT *",
    "SELECT 1; SELECT 2", "ſelect 1", "SELECT (1", "SELECT id FROM users HAVING id > 1",
    "SELECT id i FROM users", "SELECT id FROM users u", "SELECT id FROM users WHERE id IN ()",
    "DELETE FROM users", "SELECT 1 UNION SELECT 2", "SELECT id FROM users WHERE id NOTIN (1)",
    "SELECT id FROM users WHERE id ISNULL", "SELECT count(DISTINCT id, name) FROM users",
    "SELECT 1e", "SELECT 1a", "SELECT id FROM users WHERE id IN(1)", "SELECT id ORDER BY id DESCLIMIT 1",
    "SELECT id FROM users ORDER BY id ASC DESC", "SELECT 'a' 'b'", "SELECT id FROM users LIMIT 1.5",
    "SELECT id FROM users WHERE NOT(id = 1)", "SELECT NULL NULL", "SELECT * FROM users AS key",
]


@pytest.mark.parametrize("query", SQL_POSITIVE)
def test_sql_accepts(query):
    assert accepts("sql_select", query)
    sql_reference(query, strict=True)  # the schema has every name these use


@pytest.mark.parametrize("query", SQL_NEGATIVE)
def test_sql_rejects(query):
    assert not accepts("sql_select", query)


def test_sql_keywords_are_case_insensitive():
    assert accepts("sql_select", "SeLeCt DiStInCt id FrOm users wHeRe id iS nOt NuLl OrDeR bY id DeSc")


# ============================================================== Python

PYTHON_POSITIVE = [
    "x = 1",
    "a, b = b, a",
    "total = price * quantity + tax",
    "print('hello, world')",
    "result = max(values, key=lambda v: v[1])",
    "squares = [n ** 2 for n in range(10) if n % 2 == 0]",
    "config = {'debug': True, 'level': None, 'ratio': 0.75}",
    "point = (3, 4); dist = (point[0] ** 2 + point[1] ** 2) ** 0.5",
    "counter += 1\ncounter -= 2\ncounter *= 3",
    "ok = x is not None and not (y in items or z not in items)",
    "label = 'big' if n > 100 else 'small'",
    "obj.attr.sub = f(g(x), h(y=2))[0]",
    'parts = ", ".join(names) if names else "-".join(other)',
    "matrix[i][j] = row[:] + col[1:3] + rest[::2] + m[1, 2]",
    "assert len(stack) > 0, 'empty stack'",
    "del cache[key], self.tmp",
    "pass",
    "x = y = z = ()",
    "empty = []; one = (1,); s = {1, 2, 3}; d = {}",
    "add = lambda a, b: a + b\nidentity = lambda: None\n",
    "\nflag = not done\n\nvalue = -x + +y - ~z\n",
    "pairs = [(k, v) for k, v in items for _ in range(2)]",
    "match = 1; case = 2; type = 3",
    "s = 'it\\'s \\x41\\u00e9\\n'; t = \"q\\\"uote\"",
    "e = 1e-5 + 2.5E3 + 0 + 0.0 + 10",
    "f(a, b,)",
    "x = a < b <= c == d != e > f >= g",
    "t.method(1, 2, key='v', other=[1])",
]

PYTHON_NEGATIVE = [
    "  x = 1", "x = 1\n  y = 2", "x = 1\n\ty = 2", "x = aand b", "x = a andb", "x = 01",
    "if x: y", "def f(): pass", "x = (1", "x = [1, 2", "x = 1 +", "for = 1", "None = 1",
    "f(a=1, 2)", "x = 1if y else 2", 'x = "\\N{DASH}"', 'x = "\\d"', "x == = 1", "x = 1.real",
    "import os", "return x", "x = not(y)", "x; ;y", ";", 'x = """a"""', "x = f'a'", "x = a.1",
    "x = 'a", "x = 1 # c", "print x", "x = a if b", "(a, b) += 1", "x = *y", "a := 1",
    "x = a is(b)", "x = [i fori in y]", "x = lambdax: 1", "x = y\\\n+1", "x = (1,\n2)",
    "x = 1 = 2", "f() = 1", "x = 1 2", "x = 'a' 'b'", "x = yield", "True = 1", "lambda x=1: x",
    "x = 0x10", "x = 1_000", "x = a ** ** b", "x = a <> b", "x = {a := 1}",
]


@pytest.mark.parametrize("source", PYTHON_POSITIVE)
def test_python_accepts(source):
    assert accepts("python_subset", source)
    python_reference(source)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        compile(source, "<positive>", "exec")


@pytest.mark.parametrize("source", PYTHON_NEGATIVE)
def test_python_rejects(source):
    assert not accepts("python_subset", source)


# ============================================================== soundness

# Characters a sampled character class picks from: ASCII, controls, and
# non-ASCII letters, spaces and line breaks that lexers get wrong.
SAMPLE_ALPHABET = "".join(map(chr, range(0x80))) + (
    "\x85\xa0\xe9\u0130\u0131\u017f\u212a\u2028\u2029\u3000\ufeff\u6f22\U0001f600\U0010ffff")


class RegexSampler:
    """Random full matches of a Python regex: a walk over ``re``'s parse tree,
    repeats capped at 3 past their minimum, characters drawn from
    SAMPLE_ALPHABET.  Every sample is checked against the regex."""

    def __init__(self, regex: str) -> None:
        import re._parser as sre_parse

        self.regex = re.compile(regex)
        self.tree = sre_parse.parse(regex)
        self._classes: dict[int, list[str]] = {}

    def _class(self, node_id: int, items) -> list[str]:
        import re._constants as C

        if node_id not in self._classes:
            def member(ch):
                negate = False
                for op, av in items:
                    if op is C.NEGATE:
                        negate = True
                    elif op is C.LITERAL and ord(ch) == av:
                        return not negate
                    elif op is C.RANGE and av[0] <= ord(ch) <= av[1]:
                        return not negate
                    elif op is C.CATEGORY:
                        raise AssertionError("use explicit classes, not \\d \\w \\s")
                return negate

            self._classes[node_id] = [ch for ch in SAMPLE_ALPHABET if member(ch)]
        return self._classes[node_id]

    def _walk(self, seq, rng, out: list[str]) -> None:
        import re._constants as C

        for op, av in seq:
            if op is C.LITERAL:
                out.append(chr(av))
            elif op is C.NOT_LITERAL:
                out.append(rng.choice([c for c in SAMPLE_ALPHABET if ord(c) != av]))
            elif op is C.ANY:
                out.append(rng.choice([c for c in SAMPLE_ALPHABET if c != "\n"]))
            elif op is C.IN:
                out.append(rng.choice(self._class(id(av), av)))
            elif op is C.BRANCH:
                self._walk(rng.choice(av[1]), rng, out)
            elif op is C.SUBPATTERN:
                self._walk(av[3], rng, out)
            elif op in (C.MAX_REPEAT, C.MIN_REPEAT):
                lo, hi, sub = av
                for _ in range(rng.randint(lo, min(hi, lo + 3))):
                    self._walk(sub, rng, out)
            else:
                raise AssertionError(f"unexpected regex construct {op}")

    def sample(self, seed: int) -> str:
        out: list[str] = []
        self._walk(self.tree, random.Random(seed), out)
        text = "".join(out)
        assert self.regex.fullmatch(text), (self.regex.pattern, text)
        return text


class SentenceGenerator:
    """Random sentences of a lark grammar, from its compiled rules and terminals.

    A sentence is a function of a byte string that hypothesis draws (and shrinks):
    each byte makes one choice, and bytes past the end read as 0 (a terminal's
    sample also depends on its position, so zeros still vary the text).  Choices are:
    which expansion of a nonterminal (0 = the one that finishes soonest), whether
    to put an %ignore match in a gap (before the first terminal, after each one;
    0 = no: shrinking glues tokens together), and each terminal's text: one of
    the ``tricky`` strings its regex matches, or a `RegexSampler` sample.  Past
    ``max_depth``, or once ``max_terminals`` terminals are out, only expansions
    that fit the remaining budget are chosen (a nonterminal's height is the least
    depth it can finish in).  This is much faster than drawing each choice, or
    each terminal with ``from_regex``, from hypothesis.
    """

    def __init__(self, lark: Lark, *, max_depth: int, max_terminals: int = 30, tricky=()) -> None:
        self.rules = defaultdict(list)
        for r in lark.rules:
            self.rules[r.origin.name].append(tuple((s.name, s.is_term) for s in r.expansion))
        self.start = lark.options.start[0]
        self.max_depth = max_depth
        self.max_terminals = max_terminals
        self.ignore = list(lark.ignore_tokens)
        self.samplers = {t.name: RegexSampler(t.pattern.to_regexp()) for t in lark.terminals}
        self.tricky = {t.name: sorted(w for w in tricky if re.fullmatch(t.pattern.to_regexp(), w))
                       for t in lark.terminals}
        self.height = self._heights()
        for exps in self.rules.values():
            exps.sort(key=lambda e: self._exp_height(e, self.height))  # stable: 0 finishes soonest

    def _heights(self) -> dict[str, int]:
        height: dict[str, float] = defaultdict(lambda: float("inf"))
        changed = True
        while changed:
            changed = False
            for name, exps in self.rules.items():
                best = min(self._exp_height(e, height) for e in exps)
                if best < height[name]:
                    height[name], changed = best, True
        return dict(height)

    @staticmethod
    def _exp_height(expansion, height) -> float:
        return 1 + max((height[n] for n, is_term in expansion if not is_term), default=0)

    def sentence(self, tape: bytes) -> str:
        position = 0

        def byte() -> int:
            nonlocal position
            position += 1
            return tape[position - 1] if position <= len(tape) else 0

        out: list[str] = []

        def terminal(name: str) -> None:
            tricky = self.tricky[name]
            if tricky and byte() % 4 == 1:
                out.append(tricky[byte() % len(tricky)])
            else:
                seed = int.from_bytes(bytes(byte() for _ in range(3)), "big")
                out.append(self.samplers[name].sample(seed * 4099 + position))

        def gap() -> None:
            if self.ignore and byte() % 2:
                terminal(self.ignore[byte() % len(self.ignore)])

        def expand(name: str, depth: int) -> None:
            budget = self.height[name]
            if len(out) < self.max_terminals:
                budget = max(self.max_depth - depth, budget)
            options = [e for e in self.rules[name] if self._exp_height(e, self.height) <= budget]
            deeper = [e for e in options if self._exp_height(e, self.height) > self.height[name]]
            b = byte()
            if b >= 192 and deeper:  # a quarter of the time, grow the tree
                options = deeper
            for sym, is_term in options[b % len(options)]:
                if is_term:
                    terminal(sym)
                    gap()
                else:
                    expand(sym, depth + 1)

        gap()
        expand(self.start, 0)
        return "".join(out)

    def strategy(self):
        return st.binary(min_size=512, max_size=2048).map(self.sentence)


def _valid_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


TRICKY_WORDS = (
    ["a", "b", "e", "E", "f", "r", "u", "x", "j", "l", "_", "rb", "fr", "e1", "x1", "a_b",
     "0", "1", "9", "00", "01", "1e5", "1E5", "1.5", "1.", ".5", "0.0", "10", " ", "\t", "\n"]
    + keyword.kwlist + [k + "x" for k in keyword.kwlist] + ["x" + k for k in keyword.kwlist]
    + [k.lower() for k in SQLITE_KEYWORDS] + [k.lower() + "_" for k in SQLITE_KEYWORDS]
    + ["x" + k.lower() for k in SQLITE_KEYWORDS]
)

SOUNDNESS = {
    # grammar: (max_depth, reference)
    "json": (8, json_reference),
    "arithmetic": (14, arithmetic_reference),
    "sql_select": (24, sql_reference),
    "python_subset": (30, python_reference),
}
SOUNDNESS_SETTINGS = settings(max_examples=200, deadline=None, derandomize=True,
                              suppress_health_check=[HealthCheck.too_slow,
                                                     HealthCheck.data_too_large,
                                                     HealthCheck.filter_too_much])


@functools.cache
def generator(grammar: str, max_terminals: int = 30) -> SentenceGenerator:
    return SentenceGenerator(load(grammar), max_depth=SOUNDNESS[grammar][0],
                             max_terminals=max_terminals, tricky=TRICKY_WORDS)


# Checks that parse generated sentences with lark's Earley parser (slow on long
# text) use shorter sentences and fewer examples.
LARK_CHECK_SETTINGS = settings(max_examples=12, deadline=None, derandomize=True,
                               suppress_health_check=[HealthCheck.too_slow,
                                                      HealthCheck.data_too_large,
                                                      HealthCheck.filter_too_much])


@pytest.mark.parametrize("grammar", SHIPPED)
def test_generated_sentences_are_accepted_by_the_reference(grammar):
    reference = SOUNDNESS[grammar][1]

    @SOUNDNESS_SETTINGS
    @given(generator(grammar).strategy().filter(_valid_utf8))
    def check(text):
        try:
            reference(text)
        except Exception as e:  # noqa: BLE001 - any rejection is a soundness bug
            raise AssertionError(f"{grammar} accepts {text!r}, but the reference rejects it: "
                                 f"{type(e).__name__}: {e}") from None

    check()


def test_generated_arithmetic_has_pythons_value():
    """Precedence and associativity: lark's tree evaluates as Python does."""

    @settings(LARK_CHECK_SETTINGS, max_examples=60)
    @given(generator("arithmetic", max_terminals=15).strategy())
    def check(text):
        assert arithmetic_grammar_value(text) == arithmetic_reference(text), text

    check()


@pytest.mark.parametrize("grammar", SHIPPED)
def test_generator_produces_sentences_lark_accepts(grammar):
    """The generator really samples the grammar's language (checks the check)."""

    @LARK_CHECK_SETTINGS
    @given(generator(grammar, max_terminals=6).strategy().filter(_valid_utf8))
    def check(text):
        assert accepts(grammar, text), text

    check()
