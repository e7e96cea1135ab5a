"""The grammar a schema compiles to, while it is built: terminals deduplicated by their
regexes, rules in the order they are added, fresh nonterminal names; and the regexes of
JSON's own tokens.

Example:
    >>> builder = RuleBuilder()
    >>> builder.literal("{") == builder.literal("{"), builder.fresh("s_root"), builder.fresh("s_root")
    (True, 's_root', 's_root_2')
    >>> builder.rule("start", builder.literal("{"))
    >>> productive_rules(builder.rules, set(builder.terminals.values()))
    [Rule(lhs='start', rhs=('LIT_P',))]
"""

from __future__ import annotations

import re

from constrained.automata.json_words import (
    STRING_REGEX as STRING_REGEX,  # (one definition: the words automata fall off into it)
)
from constrained.grammar.ir import Rule, TerminalDef, derivable

NUMBER_REGEX = r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"
RAW_STRING_REGEX = r'"[^"\\\x00-\x1f]*"'     # JSON strings written without escapes

Alternatives = list[tuple[str, ...]]
"""The right-hand sides of one nonterminal (a conjunction's alternatives)."""

TerminalKey = tuple[str, tuple[str, ...], tuple[str, ...]]
"""A terminal's identity: its regex, and the regexes it must also match / must not match."""


class RuleBuilder:
    """Accumulates terminals (one per distinct `TerminalKey`) and rules."""

    def __init__(self) -> None:
        self.terminals: dict[TerminalKey, str] = {}     # (regex, also, excluding) -> name
        self.rules: list[Rule] = []
        self._names: set[str] = set()
        self._next_suffix: dict[str, int] = {}

    def fresh(self, hint: str) -> str:
        """A name no symbol has yet, made from ``hint`` (``hint``, ``hint_2``, ...)."""
        base = re.sub(r"[^a-zA-Z0-9_]", "_", hint)[:40] or "s"
        name, suffix = base, self._next_suffix.get(base, 1)
        while name in self._names:
            suffix += 1
            name = f"{base}_{suffix}"
        self._next_suffix[base] = suffix
        self._names.add(name)
        return name

    def term(self, regex: str, hint: str, also: tuple[str, ...] = (), excluding: tuple[str, ...] = ()) -> str:
        """The terminal of ``regex`` (intersected with ``also``, minus ``excluding``)."""
        key = (regex, tuple(also), tuple(excluding))
        name = self.terminals.get(key)
        if name is None:
            name = self.terminals[key] = self.fresh(hint.upper())
        return name

    def literal(self, text: str) -> str:
        """The terminal of exactly ``text``."""
        return self.term(re.escape(text), "LIT_" + ("".join(c for c in text if c.isalnum()) or "P"))

    def rule(self, lhs: str, *rhs: str) -> None:
        self.rules.append(Rule(lhs, tuple(rhs)))

    def terminals_by_name(self) -> dict[str, TerminalKey]:
        """Each terminal's `TerminalKey` (regex, also, excluding) by its name."""
        return {name: key for key, name in self.terminals.items()}

    def terminal_defs(self) -> tuple[TerminalDef, ...]:
        out = []
        for (regex, also, excluding), name in self.terminals.items():
            if also or excluding:
                out.append(TerminalDef(name, regex, also=also, excluding=excluding))
            else:
                out.append(TerminalDef(name, regex))
        return tuple(out)


def productive_rules(rules: list[Rule], terminals: set[str]) -> list[Rule]:
    """The rules whose symbols all derive some string (recursion without a base case drops
    out); bounded by the open compile deadline (`constrained.deadline`)."""
    productive = derivable(((r.lhs, r.rhs) for r in rules), terminals.__contains__,
                           checking="finding the schema's productive rules")
    return [r for r in rules if r.lhs in productive and all(s in terminals or s in productive for s in r.rhs)]
