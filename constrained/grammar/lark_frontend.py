"""Lark EBNF -> Grammar IR, through lark's own grammar loader.

lark resolves ``%import``, templates, ``?rule``/``_rule`` inlining, EBNF operators
and string/regex terminals; we read its compiled rules and terminal regexes.
Inlining and aliases only shape lark's trees, never the language, so they need no
translation.
"""

from __future__ import annotations

import re

from constrained.errors import GrammarError, GrammarSyntaxError, UnsupportedGrammarError
from constrained.grammar.ir import Grammar, Rule, TerminalDef

_POSITION = re.compile(r"at line (\d+) column (\d+)")


def _regex_errors() -> tuple[type[BaseException], ...]:
    """The errors of the regex engines lark compiles terminals with (re, and regex if installed)."""
    try:
        import regex
    except ImportError:
        return (re.error,)
    return (re.error, regex.error)


_REGEX_ERRORS = _regex_errors()


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


def grammar_from_lark(text: str, *, start: str = "start", source: str = "<lark>") -> Grammar:
    """Compile lark EBNF text into the Grammar IR.

    Example:
        >>> g = grammar_from_lark('start: WORD ("," WORD)*\\n%import common.WORD')
        >>> sorted(t.name for t in g.terminals)
        ['COMMA', 'WORD']
    """
    try:
        from lark import Lark
        from lark.exceptions import LarkError
    except ImportError as e:  # pragma: no cover - lark is a hard dependency
        raise GrammarError("lark is required for lark grammars") from e
    if not isinstance(text, str):
        raise GrammarError(f"a lark grammar must be a str, not {type(text).__name__}", source=source)
    try:
        parser = Lark(text, parser="earley", lexer="dynamic_complete", start=start)
    except LarkError as e:
        raise _lark_error(e, text, source) from None
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError, AssertionError, *_REGEX_ERRORS) as e:
        # re's and the regex module's errors: a terminal regex lark itself cannot compile
        raise GrammarSyntaxError(f"lark could not load the grammar: {e}", source=source) from None
    except OSError as e:                # %import of a grammar that does not exist
        raise GrammarSyntaxError(f"lark could not import a grammar: {e}", source=source) from None

    terminals = []
    for t in parser.terminals:
        pattern = getattr(t, "pattern", None)
        if pattern is None:
            line, column = _locate(text, t.name)
            raise UnsupportedGrammarError(
                f"terminal {t.name!r} has no definition (%declare needs a custom lexer)",
                line=line, column=column, source=source)
        terminals.append(TerminalDef(t.name, pattern.to_regexp()))
    used = {s.name for r in parser.rules for s in r.expansion if s.is_term} | set(parser.ignore_tokens)
    declared = {t.name for t in terminals}
    for name in sorted(used - declared):
        line, column = _locate(text, name)
        raise UnsupportedGrammarError(f"terminal {name!r} has no definition (%declare needs a custom lexer)",
                                      line=line, column=column, source=source)
    rules = tuple(Rule(r.origin.name, tuple(s.name for s in r.expansion)) for r in parser.rules)
    try:
        return Grammar(terminals=tuple(terminals), rules=rules, start=start,
                       ignore=tuple(parser.ignore_tokens), source=source)
    except GrammarError as e:
        raise GrammarSyntaxError(e.message, source=source) from None
