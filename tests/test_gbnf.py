"""Tests for the GBNF front end (`constrained.grammar.gbnf`).

The produced IR is checked for its invariants (no terminal matches "", valid
regexes) and for its language: a brute-force recognizer built here from the IR
(lark Earley over the IR's own terminal regexes) is compared with independent
expectations -- hand-written strings, Python checkers, and for generated
grammars a plain Python `re` translation of the GBNF written in this file.
"""

from __future__ import annotations

import contextlib
import functools
import json
import re
import signal
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

from constrained.errors import CompileLimitError, GrammarSyntaxError
from constrained.grammar.gbnf import grammar_from_gbnf
from constrained.grammar.ir import Grammar, Rule, TerminalDef

SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
FEW = settings(SETTINGS, max_examples=60)


# ------------------------------------------------------------ IR recognizer
def check_ir(g: Grammar) -> None:
    """Invariants every GBNF-produced grammar must satisfy."""
    assert g.ignore == ()
    rule_names = {r.lhs for r in g.rules}
    for t in g.terminals:
        re.compile(t.regex)
        assert re.fullmatch(t.regex, "") is None, f"{t.name} /{t.regex}/ matches the empty string"
        assert re.fullmatch(r"[A-Z]+_[0-9]+", t.name), t.name
        assert t.name not in rule_names
    assert len({t.regex for t in g.terminals}) == len(g.terminals), "terminal regexes not shared"


def nullable_symbols(g: Grammar) -> set[str]:
    nullable: set[str] = set()
    changed = True
    while changed:
        changed = False
        for r in g.rules:
            if r.lhs not in nullable and all(s in nullable for s in r.rhs):
                nullable.add(r.lhs)
                changed = True
    return nullable


def recognizer(g: Grammar) -> Callable[[str], bool]:
    """Membership in the IR's language, straight from its definition.

    An Earley recognizer whose scanner tries every substring against a terminal
    with ``re.fullmatch`` (lark's dynamic lexer only tries prefixes of the first
    ``re.match``, which misses e.g. "10" for ``[0-9]|[1-9][0-9]``).  Nullable
    nonterminals are skipped at prediction time (Aycock & Horspool).
    """
    check_ir(g)
    terminals = {t.name: re.compile(t.regex) for t in g.terminals}
    alternatives: dict[str, list[tuple[str, ...]]] = {}
    for r in g.rules:
        alternatives.setdefault(r.lhs, []).append(r.rhs)
    nullable = nullable_symbols(g)

    def accepts(text: str) -> bool:
        n = len(text)
        chart: list[set[tuple]] = [set() for _ in range(n + 1)]
        waiting: list[dict[str, list[tuple]]] = [{} for _ in range(n + 1)]
        goal = ("<goal>", (g.start,), 1, 0)

        def add(i: int, item: tuple, agenda: list[tuple] | None) -> None:
            if item not in chart[i]:
                chart[i].add(item)
                lhs, rhs, dot, _ = item
                if dot < len(rhs):
                    waiting[i].setdefault(rhs[dot], []).append(item)
                if agenda is not None:
                    agenda.append(item)

        chart[0].add(("<goal>", (g.start,), 0, 0))
        waiting[0][g.start] = [("<goal>", (g.start,), 0, 0)]
        for i in range(n + 1):
            agenda = list(chart[i])
            while agenda:
                lhs, rhs, dot, origin = agenda.pop()
                if dot == len(rhs):  # complete
                    for w_lhs, w_rhs, w_dot, w_origin in list(waiting[origin].get(lhs, ())):
                        add(i, (w_lhs, w_rhs, w_dot + 1, w_origin), agenda)
                    continue
                symbol = rhs[dot]
                if symbol in terminals:  # scan every end position
                    pattern = terminals[symbol]
                    for j in range(i + 1, n + 1):
                        if pattern.fullmatch(text, i, j):
                            add(j, (lhs, rhs, dot + 1, origin), None)
                    continue
                for alt in alternatives[symbol]:  # predict
                    add(i, (symbol, alt, 0, i), agenda)
                if symbol in nullable:
                    add(i, (lhs, rhs, dot + 1, origin), agenda)
        return goal in chart[n]

    return accepts


def language(text: str, **kwargs) -> Callable[[str], bool]:
    return recognizer(grammar_from_gbnf(text, **kwargs))


@functools.cache
def cached_language(text: str) -> Callable[[str], bool]:
    return language(text)


def assert_language(accepts: Callable[[str], bool], positive: list[str], negative: list[str]) -> None:
    assert [s for s in positive if not accepts(s)] == []
    assert [s for s in negative if accepts(s)] == []


# ------------------------------------------------------------ IR shape
def test_regular_rule_is_one_terminal() -> None:
    g = grammar_from_gbnf("root ::= [0-9]+")
    assert g.terminals == (TerminalDef("CLASS_0", "[0-9]+"),)
    assert g.rules == (Rule("root", ("CLASS_0",)),)
    assert g.start == "root" and g.ignore == ()


def test_maximal_regular_run_in_sequence_is_one_terminal() -> None:
    g = grammar_from_gbnf('root ::= "a" [b-c]* "d" tail "e"\ntail ::= "t"')
    check_ir(g)
    (root,) = [r for r in g.rules if r.lhs == "root"]
    assert len(root.rhs) == 3 and root.rhs[1] == "tail"
    first = g.terminal(root.rhs[0]).regex
    assert re.fullmatch(first, "ad") and re.fullmatch(first, "abcbd")
    assert not re.fullmatch(first, "a") and not re.fullmatch(first, "abd e")


def test_nullable_regular_part_gets_epsilon_alternative() -> None:
    g = grammar_from_gbnf("root ::= [0-9]*")
    assert g.rules == (Rule("root", ()), Rule("root", ("CLASS_0",)))
    assert g.terminal("CLASS_0").regex == "[0-9]+"
    g = grammar_from_gbnf('root ::= x ("a"? "b"?)\nx ::= "x"')
    check_ir(g)
    helper = [r for r in g.rules if r.lhs not in ("root", "x")]
    assert {r.rhs for r in helper} >= {()}
    assert_language(recognizer(g), ["x", "xa", "xb", "xab"], ["", "xba", "xaa", "a"])


def test_identical_regexes_share_a_terminal_and_names_do_not_clash() -> None:
    g = grammar_from_gbnf('root ::= "(" LIT ")" | "(" ")"\nLIT ::= "x" root "x"')
    check_ir(g)
    assert sorted(t.regex for t in g.terminals) == [r"\(", r"\(\)", r"\)", "x"]
    assert "LIT" in {r.lhs for r in g.rules}


def test_dashed_and_numeric_rule_names_are_kept() -> None:
    g = grammar_from_gbnf('root ::= my-rule-2 2nd\nmy-rule-2 ::= "a"\n2nd ::= "b"')
    assert {"root", "my-rule-2", "2nd"} <= {r.lhs for r in g.rules}
    assert recognizer(g)("ab")


def test_regexes_escape_specials_and_use_code_points() -> None:
    g = grammar_from_gbnf(r'root ::= "a.b*\x00" [\]\[^\\-] [^\n] .')
    (t,) = g.terminals
    assert "\x00" not in t.regex and "\n" not in t.regex
    assert re.fullmatch(t.regex, "a.b*\x00]x\n") and re.fullmatch(t.regex, "a.b*\x00\\a.")
    assert not re.fullmatch(t.regex, "axbb\x00]aa") and not re.fullmatch(t.regex, "a.b*\x00]\na")


def test_rule_level_repetition_shapes() -> None:
    g = grammar_from_gbnf('root ::= x* "," x+ "," x? "," x{2,4}\nx ::= "x" | "(" root ")"')
    check_ir(g)
    rules = {(r.lhs, r.rhs) for r in g.rules}
    star = [lhs for lhs, rhs in rules if rhs == (lhs, "x") and (lhs, ()) in rules]
    plus = [lhs for lhs, rhs in rules if rhs == (lhs, "x") and (lhs, ("x",)) in rules]
    assert star and plus
    accepts = recognizer(g)
    assert_language(accepts, [",x,,xx", "xx,x,x,xxxx", ",(,x,,xx),,xxx"],
                    ["x,,,xx", ",x,xx,xx", ",x,,xxxxx", ",x,,x"])


def test_from_gbnf_and_from_file(tmp_path: Path) -> None:
    path = tmp_path / "g.gbnf"
    path.write_text('root ::= "a"+\n', encoding="utf-8")
    g = Grammar.from_file(path)
    assert g.source == str(path) and recognizer(g)("aaa")
    assert Grammar.from_gbnf('start ::= "b"', start="start").start == "start"


# ------------------------------------------------------------ realistic grammars
JSON_GBNF = r"""
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws

object ::=
  "{" ws (
            string ":" ws value
    ("," ws string ":" ws value)*
  )? "}" ws

array  ::=
  "[" ws (
            value
    ("," ws value)*
  )? "]" ws

string ::=
  "\"" (
    [^"\\\x7F\x00-\x1F] |
    "\\" (["\\bfnrt] | "u" [0-9a-fA-F]{4}) # escapes
  )* "\"" ws

number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws

# Optional space: by convention, applied in grammar, not defined in grammar
ws ::= | " " | "\n" [ \t]{0,20}
"""

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**15, 10**15) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=6)


@pytest.fixture(scope="module")
def json_accepts() -> Callable[[str], bool]:
    return cached_language(JSON_GBNF)


def test_json_hand_written(json_accepts: Callable[[str], bool]) -> None:
    assert_language(json_accepts,
                    ['{}', '{"a": 1}', '{"a":[1, -2.5e-3, true, null, "x\\u00e9\\n"]}',
                     '{ "k" : {"n": {}}, "e": [] }\n', '{"a": 0}', '{"\u00e9": "\U0001F600"}'],
                    ['', '[]', '{"a": 01}', '{"a": 1,}', "{'a': 1}", '{"a": "\n"}', '{"a": tru}',
                     '{"a": "\\q"}', '{"a": "\x7f"}', '{"a" 1}', '{"a": 1}}'])


@FEW
@given(value=st.dictionaries(st.text(max_size=4), json_values, max_size=3),
       compact=st.booleans())
def test_json_accepts_json_dumps(json_accepts: Callable[[str], bool], value: dict, compact: bool) -> None:
    text = json.dumps(value, separators=(",", ":") if compact else None)
    assert json_accepts(text)
    assert not json_accepts(text[:-1])


ARITHMETIC_GBNF = r"""
# arithmetic over decimals with the usual precedence
root   ::= expr
expr   ::= term (ws [-+] ws term)*
term   ::= factor (ws [*/] ws factor)*
factor ::= number | "(" ws expr ws ")" | "-" factor
number ::= [0-9]+ ("." [0-9]+)?
ws     ::= [ \t]*
"""


def test_arithmetic_hand_written() -> None:
    assert_language(language(ARITHMETIC_GBNF),
                    ["1", "1+2", "1 + 2 * (3 - 4.5) / -6", "((1))", "--1", "2*\t3", "( 1 )"],
                    ["", "1+", "+1", "(1", "1)", "1..2", "1 2", "()", "1+*2", " 1", "1. 5"])


expressions = st.recursive(
    st.from_regex(r"[0-9]{1,3}(\.[0-9]{1,2})?", fullmatch=True),
    lambda inner: st.one_of(
        st.tuples(inner, st.sampled_from(["+", " - ", "*", " / "]), inner).map("".join),
        inner.map(lambda e: f"({e})"),
        inner.map(lambda e: f"-({e})")),
    max_leaves=5)


@FEW
@given(expressions)
def test_arithmetic_accepts_generated_expressions(expr: str) -> None:
    accepts = cached_language(ARITHMETIC_GBNF)
    assert accepts(expr)
    assert not accepts(expr + "+")
    assert not accepts("(" + expr)


LIST_GBNF = r"""
root ::= "[" item ("," item){1,3} "]"   # two to four items
item ::= [a-z]{1,3} | "<" root ">"
"""


def test_list_with_bounded_repetition() -> None:
    assert_language(language(LIST_GBNF),
                    ["[a,b]", "[abc,d,e,f]", "[a,<[x,y]>,zz]", "[<[a,b]>,<[c,d,e]>]"],
                    ["[a]", "[a,b,c,d,e]", "[abcd,e]", "[a,,b]", "[a,<b>]", "[]", "[a,b"])


REGULAR_LIST_GBNF = 'root ::= "[" ([a-z]{1,3} ("," [a-z]{1,3}){,3})? "]"'
REGULAR_LIST_RE = r"\[(?:[a-z]{1,3}(?:,[a-z]{1,3}){0,3})?\]"


@FEW
@given(st.from_regex(REGULAR_LIST_RE, fullmatch=True) | st.text(alphabet="[],abz", max_size=12))
def test_regular_list_matches_python_re(text: str) -> None:
    g = grammar_from_gbnf(REGULAR_LIST_GBNF)
    assert len(g.terminals) == 1
    assert recognizer(g)(text) == bool(re.fullmatch(REGULAR_LIST_RE, text))


MULTILINE_GBNF = """# leading comment

root ::= "a"     # a comment right after an item
   "b"           # the rule goes on
   | "c" (
       "d" |     # inside a group
       "e"
     )
other ::= "x"
  tail
tail ::= "y"
"""


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_comments_and_multiline_rules(newline: str) -> None:
    accepts = language(MULTILINE_GBNF.replace("\n", newline))
    assert_language(accepts, ["ab", "cd", "ce"], ["a", "b", "abcd", "c", "xy"])
    assert language(MULTILINE_GBNF, start="other")("xy")


def test_escapes_in_literals_and_classes() -> None:
    gbnf = r'root ::= "\x41\u00e9\U0001F600\t\r\n\\\"\[\]" [\x30-\x39\u00C0-\u00C1] [^\]\\]'
    assert_language(language(gbnf),
                    ['A\u00e9\U0001F600\t\r\n\\"[]0a', 'A\u00e9\U0001F600\t\r\n\\"[]\u00c1\n'],
                    ['A\u00e9\U0001F600\t\r\n\\"[]0]', 'A\u00e9\U0001F600\t\r\n\\"[]a0', 'x'])


def test_negated_classes_and_dot_match_newlines() -> None:
    accepts = language('root ::= "<" [^>]* ">" . [^a-c-]')
    assert_language(accepts, ["<>\n\n", "<a\nb>xd", "<>>\U0001F600"],
                    ["<>xa", "<>x-", "<>x", "<a>>b", "<>\n"])


def test_stacked_postfix_and_empty_forms() -> None:
    assert_language(language('root ::= "ab"+? "" () ("" | "c")'),
                    ["", "c", "ab", "ababc"], ["a", "abb", "cc"])
    assert_language(language("root ::=\nx ::= \"a\""), [""], ["a"])
    assert_language(language('root ::= | "a"{0} "b"{,2} ("c"?){2,}'),
                    ["", "b", "bb", "ccc", "bbc"], ["bbb", "a", "cb"])


def test_long_nullable_sequence_stays_small() -> None:
    g = grammar_from_gbnf("root ::= " + " ".join(['"a"?'] * 300))
    (t,) = g.terminals
    assert len(t.regex) < 20 * 300
    assert g.rules == (Rule("root", ()), Rule("root", (t.name,)))
    re.compile(t.regex)
    small = grammar_from_gbnf("root ::= " + " ".join(['"a"?'] * 12)).terminals[0].regex
    # (Python's backtracking makes longer ones slow to test, not to compile.)
    assert [k for k in range(15) if re.fullmatch(small, "a" * k)] == list(range(1, 13))


def test_byte_order_mark_is_skipped() -> None:
    assert language('\ufeffroot ::= "a"')("a")


@FEW
@given(st.text(alphabet="()", max_size=10))
def test_recursive_star_grammar_is_balanced_parentheses(text: str) -> None:
    accepts = cached_language('root ::= ("(" root ")")*')
    depth, ok = 0, True
    for c in text:
        depth += 1 if c == "(" else -1
        ok = ok and depth >= 0
    assert accepts(text) == (ok and depth == 0)


# ------------------------------------------------------------ generated grammars
# Expressions are tuples: ("lit", s) ("class", ranges, negated) ("any",) ("ref", name)
# ("seq", items) ("alt", items) ("rep", item, lo, hi).
ALPHABET = "ab\n\t\"\\]-^\u00e9\U0001F600"
LIT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\x09", "\u00e9": "\\u00E9",
               "\U0001F600": "\\U0001F600"}
CLASS_ESCAPES = {"]": "\\]", "\\": "\\\\", "-": "\\x2D", "^": "\\x5E", '"': '\\"', "\n": "\\n",
                 "\t": "\\t", "\u00e9": "\\U000000e9"}

chars = st.sampled_from(ALPHABET)
leaves = st.one_of(
    st.text(alphabet=ALPHABET, max_size=3).map(lambda s: ("lit", s)),
    st.tuples(st.lists(st.tuples(chars, chars).map(lambda p: tuple(sorted(p))), min_size=1, max_size=3),
              st.booleans()).map(lambda x: ("class", tuple(x[0]), x[1])),
    st.just(("any",)),
)
bounds = st.sampled_from([(0, None), (1, None), (0, 1), (2, None), (1, 1), (0, 2), (2, 3), (0, 0), (1, 2)])


def extend(inner: st.SearchStrategy) -> st.SearchStrategy:
    return st.one_of(
        st.lists(inner, max_size=3).map(lambda items: ("seq", tuple(items))),
        st.lists(inner, min_size=2, max_size=3).map(lambda items: ("alt", tuple(items))),
        st.tuples(inner, bounds).map(lambda x: ("rep", x[0], *x[1])),
    )


def expressions_over(refs: list[str]) -> st.SearchStrategy:
    base = leaves | st.sampled_from([("ref", r) for r in refs]) if refs else leaves
    return st.recursive(base, extend, max_leaves=5)


def to_gbnf(e: tuple) -> str:
    kind = e[0]
    if kind == "lit":
        return '"' + "".join(LIT_ESCAPES.get(c, c) for c in e[1]) + '"'
    if kind == "class":
        body = "".join(CLASS_ESCAPES.get(lo, lo) + ("" if lo == hi else "-" + CLASS_ESCAPES.get(hi, hi))
                       for lo, hi in e[1])
        return "[" + ("^" if e[2] else "") + body + "]"
    if kind == "any":
        return "."
    if kind == "ref":
        return e[1]
    if kind == "seq":
        return "(" + " ".join(to_gbnf(i) for i in e[1]) + ")"
    if kind == "alt":
        return "(" + " | ".join(to_gbnf(i) for i in e[1]) + ")"
    item, lo, hi = to_gbnf(e[1]), e[2], e[3]
    op = {(0, None): "*", (1, None): "+", (0, 1): "?"}.get((lo, hi))
    if op is None:
        op = f"{{{lo},}}" if hi is None else f"{{{lo}}}" if lo == hi else f"{{,{hi}}}" if lo == 0 else f"{{{lo},{hi}}}"
    return f"({item}){op}"


def u(c: str) -> str:
    return f"\\U{ord(c):08x}"


def to_python_re(e: tuple, rules: dict[str, tuple]) -> str:
    """An independent, straightforward translation (it may match "")."""
    kind = e[0]
    if kind == "lit":
        return "(?:" + "".join(u(c) for c in e[1]) + ")"
    if kind == "class":
        return "[" + ("^" if e[2] else "") + "".join(f"{u(lo)}-{u(hi)}" for lo, hi in e[1]) + "]"
    if kind == "any":
        return r"[\s\S]"
    if kind == "ref":
        return to_python_re(rules[e[1]], rules)
    if kind == "seq":
        return "(?:" + "".join(to_python_re(i, rules) for i in e[1]) + ")"
    if kind == "alt":
        return "(?:" + "|".join(to_python_re(i, rules) for i in e[1]) + ")"
    hi = "" if e[3] is None else str(e[3])
    return f"(?:{to_python_re(e[1], rules)}){{{e[2]},{hi}}}"


def sample(e: tuple, rules: dict[str, tuple], draw: Callable) -> str:
    """A string that is (usually) in the expression's language."""
    kind = e[0]
    if kind == "lit":
        return e[1]
    if kind == "class":
        inside = [c for c in ALPHABET + "z" if any(lo <= c <= hi for lo, hi in e[1]) != e[2]]
        return draw(st.sampled_from(inside)) if inside else "z"
    if kind == "any":
        return draw(chars)
    if kind == "ref":
        return sample(rules[e[1]], rules, draw)
    if kind == "seq":
        return "".join(sample(i, rules, draw) for i in e[1])
    if kind == "alt":
        return sample(draw(st.sampled_from(e[1])), rules, draw)
    count = draw(st.integers(e[2], e[2] + 2 if e[3] is None else e[3]))
    return "".join(sample(e[1], rules, draw) for _ in range(count))


def candidates(e: tuple, rules: dict[str, tuple], draw: Callable) -> list[str]:
    member = sample(e, rules, draw)[:12]  # short: Python's backtracking can be slow
    i = draw(st.integers(0, len(member)))
    return [member, member[:i] + member[i + 1:], member[:i] + draw(chars) + member[i:],
            draw(st.text(alphabet=ALPHABET, max_size=5))]


@contextlib.contextmanager
def backtracking_limit(seconds: int = 2):
    """Skip the example when Python's backtracking `re` (both oracles here use it)
    takes more than ``seconds``: nested quantifiers such as ``((a*)*)*`` on a
    string that fails are exponential there (``re`` checks signals, so SIGALRM
    interrupts it).  Without SIGALRM (Windows) there is no limit."""
    if not hasattr(signal, "SIGALRM"):
        yield
        return

    def expired(*_):
        raise TimeoutError

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    except TimeoutError:
        reject()
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@SETTINGS
@given(st.data())
def test_generated_regular_grammars_match_python_re(data: st.DataObject) -> None:
    e = data.draw(expressions_over([]))
    g = grammar_from_gbnf(f"root ::= {to_gbnf(e)}")
    assert len(g.terminals) <= 1 and {r.lhs for r in g.rules} == {"root"}
    accepts = recognizer(g)
    oracle = re.compile(to_python_re(e, {}))
    for text in candidates(e, {}, data.draw):
        with backtracking_limit():
            got, want = accepts(text), bool(oracle.fullmatch(text))
        assert got == want, (to_gbnf(e), text)


@SETTINGS
@given(st.data())
def test_generated_grammars_with_references_match_inlined_re(data: st.DataObject) -> None:
    names = ["root", "mid-1", "leaf-x"]
    rules: dict[str, tuple] = {}
    for i in reversed(range(len(names))):  # rule i refers only to rules after it
        rules[names[i]] = data.draw(expressions_over(names[i + 1:]))
    text = "\n".join(f"{n} ::= {to_gbnf(rules[n])}" for n in names)
    accepts = recognizer(grammar_from_gbnf(text))
    oracle = re.compile(to_python_re(rules["root"], rules))
    for s in candidates(rules["root"], rules, data.draw):
        with backtracking_limit():
            got, want = accepts(s), bool(oracle.fullmatch(s))
        assert got == want, (text, s)


# ------------------------------------------------------------ errors
ERRORS = [
    # (grammar, line, column, part of the message)
    ('root ::= "a" (', 1, 15, "expected ')'"),
    ('root ::= ( "a"\n  "b"\nx ::= "c"\n', 3, 1, "expected ')'"),
    ('root ::= "abc', 1, 10, "unterminated string"),
    ('root ::= "x"\nitem ::= "ab\ncd"', 2, 10, "unterminated string"),
    ("root ::= [abc", 1, 10, "unterminated character class"),
    ('root ::= "a\\qb"', 1, 12, "unknown escape"),
    ('root ::= "\\x4"', 1, 11, "hex digits"),
    ("root ::= [a\\z]", 1, 12, "unknown escape"),
    ('root ::= "\\UFFFFFFFF"', 1, 11, "invalid code point"),
    ("root ::= item\n", 1, 10, "undefined rule 'item'"),
    ('root ::= "a"\n  | foo-bar "b"\n', 2, 5, "undefined rule 'foo-bar'"),
    ('item ::= "a"', 1, 1, "start rule 'root'"),
    ("", 1, 1, "start rule 'root'"),
    ('root ::= "a"\nx ::= "b"\nroot ::= "c"', 3, 1, "defined twice"),
    ('root "a"', 1, 6, "expected '::='"),
    ('root ::= x\nx = "b"', 2, 3, "expected '::='"),
    ('root ::= "a"\n  ::= "b"', 2, 3, "'::='"),
    ("root ::= * \"a\"", 1, 10, "nothing to repeat"),
    ('root ::= ("a" | +)', 1, 17, "nothing to repeat"),
    ('root ::= "a")', 1, 13, "unmatched ')'"),
    ('root ::= "a" x ::= "b"', 1, 14, "new line"),
    ("root ::= []", 1, 10, "empty character class"),
    ("root ::= [z-a]", 1, 11, "reversed"),
    ('root ::= "a"{2,1}', 1, 13, "maximum below"),
    ('root ::= "a"{x}', 1, 14, "expected a number"),
    ('root ::= "a"{2', 1, 15, "expected '}'"),
    ('root ::= "a"{,}', 1, 15, "expected a number"),
    ('root ::= "a" !', 1, 14, "unexpected character"),
    ('"a" ::= "b"', 1, 1, "expected a rule name"),
]


@pytest.mark.parametrize(("text", "line", "column", "message"), ERRORS)
def test_syntax_errors_have_positions(text: str, line: int, column: int, message: str) -> None:
    with pytest.raises(GrammarSyntaxError) as info:
        grammar_from_gbnf(text, source="t.gbnf")
    assert (info.value.line, info.value.column) == (line, column), str(info.value)
    assert message in info.value.message
    assert info.value.source == "t.gbnf"


@pytest.mark.parametrize("text", ['root ::= "a"{1001}', 'root ::= x{0,5000}\nx ::= "x"'])
def test_huge_repetition_counts_hit_the_limit(text: str) -> None:
    with pytest.raises(CompileLimitError) as info:
        grammar_from_gbnf(text)
    assert info.value.limit == "repetition"


def test_deep_nesting_is_a_syntax_error_not_a_crash() -> None:
    with pytest.raises(GrammarSyntaxError) as info:
        grammar_from_gbnf("root ::= " + "(" * 500 + '"a"' + ")" * 500)
    assert info.value.line == 1
