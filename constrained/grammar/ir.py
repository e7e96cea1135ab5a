"""The Grammar IR: rules over terminals; terminals are regular expressions.

Every front end (lark EBNF, GBNF, a bare regex, JSON Schema, structural tags) produces
a `Grammar`; the compiler only ever sees this type (docs/grammars.md).

Semantics (the contract the whole engine is tested against):

* A terminal's language is the set of strings its regex *fully* matches
  (``re.fullmatch``, Python syntax and flags) that also fully match every regex in
  its ``also`` and fully match no regex in its ``excluding`` (intersection and
  difference of regular languages; most terminals have neither).  Terminals may
  not match the empty string, nor nothing at all.
* The grammar's language is the set of strings that split into a sequence of
  terminal matches, in any way at all, that the rules derive from ``start``, with
  any number of ``ignore`` terminal matches before, between and after them.  This
  is what lark's Earley parser with ``lexer='dynamic_complete'`` accepts.
* Where lark differs, the regular-language reading above wins: lark's dynamic
  lexer only tries prefixes of Python's first ``re.match``, so an alternation whose
  preferred branch is a prefix of a longer one (``/[0-9]|[1-9][0-9]/`` on ``"10"``)
  loses matches in lark but not here.  Shipped grammars avoid such terminals, so
  lark agrees with the engine on them (tested).
* Strings are Unicode text; the engine works on their UTF-8 bytes, so a byte
  string is in the language iff it is valid UTF-8 and its text is.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from constrained.deadline import DEFAULT_COMPILE_TIMEOUT, passed, remaining, timeout_error
from constrained.errors import GrammarError, RegexError
from constrained.grammar.checks import ValueChecks

JSON_SCHEMA_SOURCE = "<json schema>"   # the `Grammar.source` of grammars compiled from JSON Schemas


def derivable(rules: Iterable[tuple[Hashable, Sequence[Hashable]]], base: Callable[[Hashable], bool], *,
              checking: str | None = None) -> set:
    """The left-hand sides with a rule whose every symbol is ``base`` or (recursively)
    derivable: productive nonterminals (``base``: terminals), nullable ones (``base``:
    nothing).  A worklist over symbol uses, linear in the grammar's size (a chain of
    thousands of nonterminals is not swept once per link).  With ``checking`` (what is
    being done, for the error), the open compile deadline (`constrained.deadline`) is
    checked every 65,536 symbols, in proportion to the work: `CompileTimeoutError` once
    it has passed.

    >>> sorted(derivable([("a", ("x",)), ("b", ("a", "c")), ("c", ("c",))], lambda s: s == "x"))
    ['a']
    """
    rules = list(rules)
    missing = []                                 # per rule: symbols not yet known to qualify
    uses: dict[Hashable, list[int]] = {}
    done: set = set()
    ready: list = []
    check = checking is not None and remaining() is not None
    seen = 0
    for i, (lhs, rhs) in enumerate(rules):
        if check:
            seen += len(rhs)
            if seen >= 0x10000:
                seen = 0
                if passed():
                    raise timeout_error(what=checking)
        pending = [s for s in rhs if not base(s)]
        missing.append(len(pending))
        for sym in pending:
            uses.setdefault(sym, []).append(i)
        if not pending:
            ready.append(lhs)
    while ready:
        a = ready.pop()
        if a in done:
            continue
        done.add(a)
        for i in uses.get(a, ()):
            missing[i] -= 1
            if missing[i] == 0:
                ready.append(rules[i][0])
    return done


@dataclass(frozen=True)
class TerminalDef:
    """A named terminal: a Python regex matched in full, optionally intersected
    with the ``also`` regexes and minus the ``excluding`` ones.

    Its language is the strings that fully match ``regex`` and every regex in
    ``also``, and fully match no regex in ``excluding`` (all Python syntax, the
    same semantics as ``regex``).  Sequences given for ``also``/``excluding`` are
    stored as tuples; the regexes themselves are checked when the grammar is
    compiled (`RegexError` naming the terminal).

    Example:
        >>> TerminalDef("INT", r"[0-9]+").regex
        '[0-9]+'
        >>> TerminalDef("NAME", "[a-z]+", also=(".{1,8}",), excluding=("if|else",)).excluding
        ('if|else',)
    """

    name: str
    regex: str
    also: tuple[str, ...] = ()
    excluding: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for attr in ("also", "excluding"):
            value = getattr(self, attr)
            if isinstance(value, str):
                raise GrammarError(f"terminal {self.name!r}: {attr} must be a sequence of regexes, not one str")
            value = tuple(value)
            for r in value:
                if not isinstance(r, str):
                    raise RegexError("regex must be a str", pattern=repr(r), terminal=self.name)
            object.__setattr__(self, attr, value)

    def regexes(self) -> tuple[str, ...]:
        """Every regex the terminal's language depends on: ``regex``, ``also``, ``excluding``."""
        return (self.regex,) + self.also + self.excluding

    def validate(self) -> None:
        """Raise `RegexError` (naming this terminal) unless every regex is supported."""
        from constrained.automata.regex_parser import validate_regex

        for r in self.regexes():
            validate_regex(r, terminal=self.name)


@dataclass(frozen=True)
class Rule:
    """One production ``lhs -> rhs``; ``rhs`` names terminals and nonterminals.

    Example:
        >>> Rule("sum", ("sum", "PLUS", "INT")).rhs[1]
        'PLUS'
    """

    lhs: str
    rhs: tuple[str, ...]


@dataclass(frozen=True)
class Grammar:
    """A context-free grammar over regex terminals (see the module docstring).

    Build one with a front end rather than by hand:

    Example:
        >>> g = Grammar.from_lark('start: "a"+')
        >>> g.start
        'start'
        >>> Grammar.from_regex(r"[0-9]{3}").rules[0].rhs
        ('REGEX',)
    """

    terminals: tuple[TerminalDef, ...]
    rules: tuple[Rule, ...]
    start: str
    ignore: tuple[str, ...] = ()
    source: str = field(default="<grammar>", compare=False)
    checks: ValueChecks | None = field(default=None, compare=False)
    """Value-level checks beside the rules (`constrained.grammar.checks.ValueChecks`;
    the JSON Schema compiler's `JsonValueChecks`), or None: the language is then
    the strings of the grammar that also pass the checks."""

    def __post_init__(self) -> None:
        names = [t.name for t in self.terminals]
        if len(set(names)) != len(names):
            dup = sorted({n for n in names if names.count(n) > 1})
            raise GrammarError(f"terminal defined twice: {', '.join(dup)}", source=self.source)
        term_names = set(names)
        nonterminals = {r.lhs for r in self.rules}
        clash = term_names & nonterminals
        if clash:
            raise GrammarError(f"names used both as terminal and rule: {', '.join(sorted(clash))}",
                               source=self.source)
        if self.start not in nonterminals:
            raise GrammarError(f"start symbol {self.start!r} has no rule", source=self.source)
        for r in self.rules:
            for s in r.rhs:
                if s not in term_names and s not in nonterminals:
                    raise GrammarError(f"rule {r.lhs!r} uses undefined symbol {s!r}", source=self.source)
        for name in self.ignore:
            if name not in term_names:
                raise GrammarError(f"ignored terminal {name!r} is not defined", source=self.source)

    # ----------------------------------------------------------------- front ends
    @classmethod
    def from_lark(cls, text: str, *, start: str = "start", source: str = "<lark>",
                  **schema_options: Any) -> Grammar:
        """Load lark EBNF with lark's own loader (imports, templates, %ignore); ``%json {...}``
        sections are JSON Schemas compiled with ``schema_options``.  ``timeout`` (seconds,
        `constrained.deadline.DEFAULT_COMPILE_TIMEOUT` by default, None: no limit) bounds
        the whole load, sections included."""
        from constrained.grammar.lark_frontend import grammar_from_lark

        return grammar_from_lark(text, start=start, source=source, **schema_options)

    @classmethod
    def from_gbnf(cls, text: str, *, start: str = "root", source: str = "<gbnf>",
                  timeout: float | None = DEFAULT_COMPILE_TIMEOUT) -> Grammar:
        """Load a llama.cpp GBNF grammar (``root ::= ...``); ``timeout`` as in `from_lark`."""
        from constrained.grammar.gbnf import grammar_from_gbnf

        return grammar_from_gbnf(text, start=start, source=source, timeout=timeout)

    @classmethod
    def from_regex(cls, pattern: str, *, source: str = "<regex>") -> Grammar:
        """The language of one regex (Python syntax, matched in full)."""
        from constrained.automata.regex_parser import validate_regex

        validate_regex(pattern, terminal="REGEX")
        return cls(terminals=(TerminalDef("REGEX", pattern),), rules=(Rule("start", ("REGEX",)),),
                   start="start", source=source)

    @classmethod
    def from_json_schema(cls, schema, **options) -> Grammar:
        """The language of JSON values valid for ``schema`` (a parsed JSON Schema;
        options as in `constrained.json_schema.options.JsonSchemaOptions`, plus ``timeout``
        in seconds, `constrained.deadline.DEFAULT_COMPILE_TIMEOUT` by default)."""
        from constrained.json_schema.compiler import compile_json_schema

        return compile_json_schema(schema, **options).grammar

    @classmethod
    def from_structural_tag(cls, spec: dict | str, **schema_options: Any) -> Grammar:
        """vLLM/XGrammar structural tags (a dict or its JSON text): free text, and after a
        trigger a tagged JSON value of its schema (`constrained.grammar.structural_tag`).

        >>> g = Grammar.from_structural_tag({"type": "structural_tag", "triggers": ["<f>"],
        ...     "structures": [{"begin": "<f>", "schema": {"type": "integer"}, "end": "</f>"}]})
        """
        from constrained.grammar.structural_tag import grammar_from_structural_tag

        return grammar_from_structural_tag(spec, **schema_options)

    @classmethod
    def from_tools(cls, tools: list[dict], *, format: str = "hermes", tool_choice: str | dict = "auto",
                   **options: Any) -> Grammar:
        """OpenAI-style tools as a grammar of the model family's tool-call format
        (`constrained.tools.tools_grammar`: ``hermes``, ``llama3``, ``mistral``).

        >>> g = Grammar.from_tools([{"type": "function", "function": {"name": "f", "parameters": {}}}])
        """
        from constrained.tools import tools_grammar

        return tools_grammar(tools, format=format, tool_choice=tool_choice, **options)

    @classmethod
    def from_file(cls, path: str | Path, **kwargs) -> Grammar:
        """Load ``.lark``, ``.gbnf`` or ``.regex`` files by their suffix."""
        p = Path(path)
        try:
            text = p.read_text(encoding="utf-8")
        except OSError as e:
            raise GrammarError(f"cannot read grammar file: {e.strerror}", source=str(p)) from e
        suffix = p.suffix.lower()
        if suffix == ".lark":
            return cls.from_lark(text, source=str(p), **kwargs)
        if suffix == ".gbnf":
            return cls.from_gbnf(text, source=str(p), **kwargs)
        if suffix in (".regex", ".re"):
            return cls.from_regex(text.rstrip("\n"), source=str(p))
        raise GrammarError(f"unknown grammar file suffix {suffix!r} (use .lark, .gbnf or .regex)",
                           source=str(p))

    # ----------------------------------------------------------------- identity
    def content_hash(self) -> str:
        """A stable hash of the language definition (not of `source`)."""
        def terminal_entry(t: TerminalDef) -> list:
            # the extra keys only when present, so plain terminals hash as they always have
            extra = {k: list(v) for k, v in (("also", t.also), ("excluding", t.excluding)) if v}
            return [t.name, t.regex, extra] if extra else [t.name, t.regex]

        payload = json.dumps({
            "terminals": [terminal_entry(t) for t in self.terminals],
            "rules": [[r.lhs, list(r.rhs)] for r in self.rules],
            "start": self.start,
            "ignore": list(self.ignore),
        }, sort_keys=True, ensure_ascii=False)
        if self.checks is not None:
            payload += "\nchecks:" + self.checks.content_hash()
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()

    def terminal(self, name: str) -> TerminalDef:
        """The terminal called ``name``."""
        for t in self.terminals:
            if t.name == name:
                return t
        raise KeyError(name)
