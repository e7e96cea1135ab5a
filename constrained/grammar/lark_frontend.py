"""Lark EBNF -> Grammar IR, through lark's own grammar loader.

lark resolves ``%import``, templates, ``?rule``/``_rule`` inlining, EBNF operators
and string/regex terminals; we read its compiled rules and terminal regexes.
Inlining and aliases only shape lark's trees, never the language, so they need no
translation.

Two extensions (llguidance's spelling):

* ``%json {...}`` where an expansion may stand (``args: %json {"type": "object"}``): a
  JSON Schema, compiled with `Grammar.from_json_schema` and embedded; its value checks
  apply to the bytes of that value alone (`constrained.grammar.compose.SectionChecks`).
  lark's ``%ignore`` applies inside the value too (between its JSON tokens).
* ``%regex {"substring_chars": TEXT}``: any non-empty substring of TEXT (an automaton
  of the text's substrings, `constrained.automata.substrings`); other ``%regex`` options
  of llguidance are refused (write regexes as lark's own ``/.../``).  Neither may stand
  inside a terminal's definition (`UnsupportedGrammarError`).
* lark's ``common.lark`` terminals with look-around (``ESCAPED_STRING``,
  ``_STRING_ESC_INNER``) are translated to their exact regular equivalents:
  ``ESCAPED_STRING`` is what lark itself accepts, a quoted string whose quotes inside are
  escaped, ``"(?:[^"\\\n]|\\[^\n])*"``.  Other look-around is refused with a
  `RegexError` saying so.

Loading is bounded by ``timeout`` (`constrained.deadline`): lark's loader (which cannot
check a deadline itself) runs under `interrupt_at_deadline`, our own steps check the
deadline per rule and terminal, and ``%json`` sections get the time that is left.  Only
lark's loader is run, not its parser construction, whose Earley analysis is quadratic in
the number of rules and which this translation never uses; the checks that construction
makes (rules defined twice, undefined rules, terminals that lark cannot compile or that
match the empty string) are made here, with lark's messages.
"""

from __future__ import annotations

import json
import re
from typing import Any

from constrained.deadline import (
    DEFAULT_COMPILE_TIMEOUT,
    compile_deadline,
    interrupt_at_deadline,
    remaining,
    timeout_error,
)
from constrained.errors import (
    GrammarError,
    GrammarSyntaxError,
    RegexError,
    UnsupportedGrammarError,
)
from constrained.grammar.ir import Grammar, Rule, TerminalDef

# lark's common.lark terminals with look-behind, as lark compiles them -> exact equivalents.
# _STRING_ESC_INNER: text without a newline not ending in an odd run of backslashes;
# ESCAPED_STRING: lark's first-match lexing stops at the first unescaped quote, so its
# language is a quoted run of non-quote characters and escape pairs.
_STRING_ESC_INNER = r".*?(?<!\\)(\\\\)*?"
_STRING_ESC_INNER_EXACT = r"(?:(?:[^\n]*[^\\\n])?(?:\\\\)*)"
_ESCAPED_STRING = '"' + _STRING_ESC_INNER + '"'
_ESCAPED_STRING_EXACT = r'"(?:[^"\\\n]|\\[^\n])*"'
_LOOKAROUND = re.compile(r"\(\?<?[=!]")

_POSITION = re.compile(r"at line (\d+) column (\d+)")


def _regex_errors() -> tuple[type[BaseException], ...]:
    """The errors of the regex engines lark compiles terminals with (re, and regex if installed)."""
    try:
        import regex
    except ImportError:
        return (re.error,)
    return (re.error, regex.error)


_REGEX_ERRORS = _regex_errors()
# what lark's loader raises on a terminal regex it cannot compile, besides LarkError
_LOAD_ERRORS: tuple[type[BaseException], ...] = (ValueError, TypeError, KeyError, AttributeError, RecursionError,
                                                 AssertionError, *_REGEX_ERRORS)


def _locate(text: str, word: str) -> tuple[int | None, int | None]:
    """Line and column of the first whole-word occurrence of ``word`` in ``text``."""
    m = re.search(r"(?<![\w$])" + re.escape(word) + r"(?![\w$])", text)
    if not m:
        return None, None
    line = text.count("\n", 0, m.start()) + 1
    column = m.start() - (text.rfind("\n", 0, m.start()) + 1) + 1
    return line, column


def _lark_error(e: Exception, text: str, source: str) -> GrammarError:
    message = str(e).split("\n", 1)[0].strip()
    line = getattr(e, "line", None)
    column = getattr(e, "column", None)
    if line is None or line < 0:
        m = _POSITION.search(str(e))
        if m:
            line, column = int(m.group(1)), int(m.group(2))
    if line is None or line < 0:
        quoted = re.findall(r"'([^']+)'", message)
        if len(e.args) > 1 and hasattr(e.args[1], "name"):
            quoted.insert(0, e.args[1].name)
        for word in quoted:
            line, column = _locate(text, word)
            if line is not None:
                break
    return GrammarSyntaxError(message, line=line, column=column, source=source)


_PLACEHOLDER = "_JSONSCHEMA{}"
_REGEX_PLACEHOLDER = "_REGEXSPEC{}"
_EXTENSION = re.compile(r"<%extension\\? (\d+)>")   # a placeholder's text inlined into another terminal


def _json_sections(text: str, source: str) -> tuple[str, list[tuple[str, Any, int, int]]]:
    """``text`` with every ``%json {...}`` and ``%regex {...}`` replaced by a placeholder
    terminal (defined at the end), and their specs: ``(placeholder, spec, line, column)``
    (placeholders of ``%regex`` are named `_REGEX_PLACEHOLDER`).  Lark strings, regexes and
    comments are skipped."""
    if "%json" not in text and "%regex" not in text:
        return text, []
    out: list[str] = []
    sections: list[tuple[str, Any, int, int]] = []
    decoder = json.JSONDecoder()
    i, n, last = 0, len(text), 0
    while i < n:
        c = text[i]
        if c == '"' or (c == "/" and not text.startswith("//", i)):
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            i = j + 1
            continue
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        word = "%json" if text.startswith("%json", i) else "%regex" if text.startswith("%regex", i) else None
        k = i + len(word) if word else i
        if word and not (k < n and (text[k].isalnum() or text[k] == "_")):
            line = text.count("\n", 0, i) + 1
            column = i - (text.rfind("\n", 0, i) + 1) + 1
            while k < n and text[k] in " \t":
                k += 1
            what = "a JSON Schema" if word == "%json" else "a JSON object (e.g. {\"substring_chars\": ...})"
            try:
                spec, end = decoder.raw_decode(text, k)
            except json.JSONDecodeError as e:
                raise GrammarSyntaxError(f"{word} must be followed by {what}: {e.msg}", line=line,
                                         column=column, source=source) from None
            if not isinstance(spec, dict if word == "%regex" else (dict, bool)):
                raise GrammarSyntaxError(f"{word} must be followed by {what}", line=line, column=column,
                                         source=source)
            name = (_PLACEHOLDER if word == "%json" else _REGEX_PLACEHOLDER).format(len(sections))
            sections.append((name, spec, line, column))
            out.append(text[last:i] + " " + name + " ")
            i = last = end
            continue
        i += 1
    if not sections:
        return text, []
    out.append(text[last:])
    out.extend(f'\n{name}: "<%extension {k}>"' for k, (name, _, _, _) in enumerate(sections))
    return "".join(out) + "\n", sections


def _regex_terminal(name: str, spec: dict, line: int, column: int, source: str) -> TerminalDef:
    """The terminal of ``%regex {...}`` (llguidance's spelling): ``substring_chars`` is any
    non-empty substring of the given text."""
    from constrained.automata.substrings import substrings_regex

    keys = sorted(spec)
    if keys != ["substring_chars"]:
        other = [k for k in keys if k != "substring_chars"] or keys
        raise UnsupportedGrammarError(f"%regex supports only {{\"substring_chars\": TEXT}}, not {other}; "
                                      "write other regexes as lark /.../ terminals", line=line, column=column,
                                      source=source)
    text = spec["substring_chars"]
    if not isinstance(text, str) or not text:
        raise GrammarSyntaxError("%regex substring_chars must be a non-empty string", line=line, column=column,
                                 source=source)
    return TerminalDef(name, "(?s:.+)", also=(substrings_regex(text, quoted=False),))


def _terminal_regex(name: str, regex: str) -> str:
    """``regex`` with lark's look-behind common terminals replaced by their exact equivalents;
    `RegexError` for any other look-around."""
    if _ESCAPED_STRING in regex:
        regex = regex.replace(_ESCAPED_STRING, _ESCAPED_STRING_EXACT)
    if _STRING_ESC_INNER in regex:
        regex = regex.replace(_STRING_ESC_INNER, _STRING_ESC_INNER_EXACT)
    m = _LOOKAROUND.search(regex)
    if m:
        from constrained.automata.regex_parser import _lookaround_message

        kind = m.group()
        raise RegexError(_lookaround_message("!" in kind, "<" in kind), pattern=regex, position=m.start(),
                         terminal=name)
    return regex


def grammar_from_lark(text: str, *, start: str = "start", source: str = "<lark>",
                      timeout: float | None = DEFAULT_COMPILE_TIMEOUT, **schema_options: Any) -> Grammar:
    """Compile lark EBNF text into the Grammar IR; ``%json {...}`` sections are compiled with
    `Grammar.from_json_schema` (``schema_options``).  Past ``timeout`` seconds (None: no
    limit) `CompileTimeoutError` names the rule or terminal and its line.

    Example:
        >>> g = grammar_from_lark('start: WORD ("," WORD)*\\n%import common.WORD')
        >>> sorted(t.name for t in g.terminals)
        ['COMMA', 'WORD']
        >>> g = grammar_from_lark('start: "call " args\\nargs: %json {"type": "array", "uniqueItems": true}')
        >>> type(g.checks).__name__
        'SectionChecks'
    """
    if not isinstance(text, str):
        raise GrammarError(f"a lark grammar must be a str, not {type(text).__name__}", source=source)
    with compile_deadline(timeout):
        return _grammar_from_lark(text, start, source, timeout, schema_options)


def _grammar_from_lark(text: str, start: str, source: str, timeout: float | None,
                       schema_options: dict[str, Any]) -> Grammar:
    original = text
    text, sections = _json_sections(text, source)
    lark_terminals, lark_rules, ignore_tokens = _load(text, original, start, source)

    placeholders = {name for name, _, _, _ in sections}
    where = {name: (line, column) for name, _, line, column in sections}
    by_index = [name for name, _, _, _ in sections]
    regex_specs = {name: spec for name, spec, _, _ in sections if name.startswith("_REGEXSPEC")}
    sections = [s for s in sections if s[0] not in regex_specs]
    terminals = []
    for t in lark_terminals:
        _check_time(original, terminal=t.name)
        if t.name in regex_specs:
            terminals.append(_regex_terminal(t.name, regex_specs[t.name], *where[t.name], source))
            continue
        if t.name in placeholders:
            continue
        inside = _EXTENSION.search(t.pattern.to_regexp()) if sections or regex_specs else None
        if inside:
            name = by_index[int(inside.group(1))]
            kind = "%json" if name.startswith("_JSONSCHEMA") else "%regex"
            raise UnsupportedGrammarError(f"{kind} inside the definition of terminal {t.name!r}: use it in a rule "
                                          "(a terminal is one regular expression)", line=where[name][0],
                                          column=where[name][1], source=source)
        pattern = getattr(t, "pattern", None)
        if pattern is None:
            line, column = _locate(original, t.name)
            raise UnsupportedGrammarError(
                f"terminal {t.name!r} has no definition (%declare needs a custom lexer)",
                line=line, column=column, source=source)
        terminals.append(TerminalDef(t.name, _terminal_regex(t.name, pattern.to_regexp())))
    used = {s.name for r in lark_rules for s in r.expansion if s.is_term} | set(ignore_tokens)
    declared = {t.name for t in terminals} | placeholders
    for name in sorted(used - declared):
        line, column = _locate(original, name)
        raise UnsupportedGrammarError(f"terminal {name!r} has no definition (%declare needs a custom lexer)",
                                      line=line, column=column, source=source)
    rules = tuple(Rule(r.origin.name, tuple(s.name for s in r.expansion)) for r in lark_rules)
    try:
        if not sections:
            return Grammar(terminals=tuple(terminals), rules=rules, start=start,
                           ignore=tuple(ignore_tokens), source=source)
        return _with_json_sections(terminals, rules, start, tuple(ignore_tokens), sections, source,
                                   {**schema_options, "timeout": timeout})
    except GrammarError as e:
        if type(e) is GrammarError:       # the IR's own checks (a name used twice, ...)
            raise GrammarSyntaxError(e.message, source=source) from None
        raise                             # a %json schema's error, typed and located


def _load(text: str, original: str, start: str, source: str) -> tuple[list, list, list]:
    """lark's terminals, rules (BNF, after inlining and templates) and ignored terminal names
    of ``text``, loaded by lark's own loader within the deadline, with the checks lark's
    parser construction would make (`_check_like_lark`)."""
    try:
        from lark.exceptions import LarkError
        from lark.load_grammar import load_grammar
    except ImportError as e:  # pragma: no cover - lark is a hard dependency
        raise GrammarError("lark is required for lark grammars") from e
    lines = original.count("\n") + 1
    try:
        with interrupt_at_deadline(what=f"in lark's grammar loader, a grammar of {lines} lines"):
            grammar, _ = load_grammar(text, "<string>", [], False)
            lark_terminals, lark_rules, ignore_tokens = grammar.compile([start], set())
        _check_like_lark(lark_terminals, lark_rules, start, original)
    except LarkError as e:
        raise _lark_error(e, original, source) from None
    except _LOAD_ERRORS as e:
        # re's and the regex module's errors: a terminal regex lark itself cannot compile
        raise GrammarSyntaxError(f"lark could not load the grammar: {e}", source=source) from None
    except OSError as e:                # %import of a grammar that does not exist
        raise GrammarSyntaxError(f"lark could not import a grammar: {e}", source=source) from None
    return lark_terminals, lark_rules, ignore_tokens


def _check_time(original: str, *, rule: str | None = None, terminal: str | None = None) -> None:
    """`CompileTimeoutError` naming the rule or terminal and its line, once the deadline passed."""
    if remaining() == 0.0:
        line, _ = _locate(original, rule or terminal or "")
        raise timeout_error(rule=rule, terminal=terminal, line=line)


def _check_like_lark(terminals: list, rules: list, start: str, original: str) -> None:
    """What ``Lark(parser="earley", lexer="dynamic_complete")`` checks when it builds its
    parser, with its errors: a rule defined twice, a rule that uses an undefined rule (or
    an undefined start), a terminal regex that ``re`` cannot compile or that matches the
    empty string.  Linear in the grammar, unlike that construction."""
    import re as re_module

    from lark.exceptions import GrammarError as LarkGrammarError
    from lark.grammar import NonTerminal
    from lark.utils import get_regexp_width

    seen: set = set()
    origins = {r.origin for r in rules}
    for r in rules:
        _check_time(original, rule=r.origin.name)
        if r in seen:
            raise LarkGrammarError(f"Rule '{r}' already exists")
        seen.add(r)
    for r in [*rules, None]:
        expansion = [NonTerminal(start)] if r is None else r.expansion
        for sym in expansion:
            if not (sym.is_term or sym in origins):
                raise LarkGrammarError(f"Using an undefined rule: {sym}")
    for t in terminals:
        _check_time(original, terminal=t.name)
        regexp = t.pattern.to_regexp()
        try:
            width = get_regexp_width(regexp)[0]
        except ValueError:
            raise LarkGrammarError(f"Bad regexp in token {t.name}: {regexp}") from None
        if width == 0:
            raise LarkGrammarError("Dynamic Earley doesn't allow zero-width regexps", t)
        re_module.compile(regexp)


def _with_json_sections(terminals, rules, start, ignore, sections, source, schema_options) -> Grammar:
    """The lark grammar with each ``%json`` placeholder replaced by its embedded schema grammar."""
    from constrained.grammar.compose import GrammarBuilder
    from constrained.grammar.structural_tag import mergeable_schema

    # a rule whose alternatives are several bare %json sections: one section of their anyOf
    # (apart, each schema's checks would apply to a value the other alternative may be reading)
    sections = list(sections)
    schema_of = {name: schema for name, schema, _, _ in sections}
    by_lhs: dict[str, list[str]] = {}
    for r in rules:
        if len(r.rhs) == 1 and r.rhs[0] in schema_of and mergeable_schema(schema_of[r.rhs[0]]):
            by_lhs.setdefault(r.lhs, []).append(r.rhs[0])
    merged_rules = list(rules)
    for lhs, names in by_lhs.items():
        if len(set(names)) < 2:
            continue
        name = _PLACEHOLDER.format(len(sections))
        first = next(s for s in sections if s[0] == names[0])
        sections.append((name, {"anyOf": [schema_of[n] for n in dict.fromkeys(names)]}, first[2], first[3]))
        merged_rules = [r for r in merged_rules if not (r.lhs == lhs and len(r.rhs) == 1 and r.rhs[0] in names)]
        merged_rules.append(Rule(lhs, (name,)))
    used = {s for r in merged_rules for s in r.rhs}
    sections = [s for s in sections if s[0] in used]
    rules = merged_rules

    b = GrammarBuilder(source)
    b.adopt(terminals, (), ignore)
    starts = {}
    for name, schema, line, column in sections:
        from constrained.errors import SchemaError

        try:
            sub = Grammar.from_json_schema(schema, **schema_options)
        except SchemaError as e:
            e.args = (f"{e.args[0] if e.args else e} (in %json at line {line}, column {column} of {source})",)
            raise
        starts[name] = b.embed(sub, f"json{name[len('_JSONSCHEMA'):]}")
    b.adopt((), [Rule(r.lhs, tuple(starts.get(s, s) for s in r.rhs)) for r in rules], ())
    return b.build(start)
