"""Whitespace gaps fused into the punctuation beside them: ``ws "," ws`` becomes one
terminal ``(?:WS)?,(?:WS)?``.

The compiler writes JSON's optional whitespace as a nullable nonterminal ``ws`` (``ws:
| WS``) between tokens.  Each one costs the Earley parser a prediction, a nullable
advance and, where whitespace is read, a set of its own, and a member ``, "key": value``
crosses up to seven symbols.  A run of gaps and punctuation (``, : { } [ ]``) inside one
rule is replaced by one terminal whose regex is the run's concatenation, each gap an
optional `WS`: the same language for that rule, so the same language for the grammar,
and the lexer (a few automata shared by every schema of a process) reads what the
parser did.  Keys and values are left alone: fused with their neighbours they would be
an automaton per key, built fresh for every schema.

Measured on every 8th MaskBench schema with the Llama 3 vocabulary (one process, the
``--vs-llguidance`` protocol): per-token p90 269 -> 214 µs and p99 853 -> 750 µs; in the
serving benchmark at batch 64 the step p99 ratio to llguidance went from 3.4-3.6x to
3.0x (``docs/json-schema.md``, ``benchmarks/RESULTS.md``).

Example:
    >>> from constrained.json_schema.compile.rules import RuleBuilder
    >>> b = RuleBuilder()
    >>> b.rule("ws"); b.rule("ws", b.term("[ ]{1,4}", "WS"))
    >>> b.rule("list", "item", "ws", b.literal(","), "ws", "list")
    >>> [r.rhs for r in fuse_gaps(b.rules, b, "ws")]
    [('item', 'WS_COMMA_WS', 'list')]
    >>> b.terminals_by_name()["WS_COMMA_WS"][0]
    '(?:[ ]{1,4})?,(?:[ ]{1,4})?'
"""

from __future__ import annotations

import re

from constrained.deadline import check_deadline
from constrained.grammar.ir import Rule
from constrained.json_schema.compile.rules import RuleBuilder

PUNCTUATION = {",": "COMMA", ":": "COLON", "{": "LBRACE", "}": "RBRACE", "[": "LSQB", "]": "RSQB"}
"""JSON's structural characters, the terminals gaps are fused into, by the names their
fused terminals are made of."""


def fuse_gaps(rules: list[Rule], builder: RuleBuilder, gap: str) -> list[Rule]:
    """``rules`` with every run of ``gap`` and punctuation symbols (two or more, at least one
    punctuation) replaced by one terminal of their concatenation (made in ``builder``).
    ``gap`` is the whitespace nonterminal: exactly the rules ``gap:`` and ``gap: WS`` for
    one plain terminal ``WS``.  Its rules are dropped once nothing reads it.  Bounded by
    the open compile deadline (`constrained.deadline`)."""
    gap_rules = [r for r in rules if r.lhs == gap]
    readers = [r.rhs[0] for r in gap_rules if r.rhs]
    by_name = builder.terminals_by_name()
    if sorted(len(r.rhs) for r in gap_rules) != [0, 1] or by_name[readers[0]][1:] != ((), ()):
        raise ValueError(f"{gap!r} is not an optional plain terminal: {gap_rules}")
    pieces = {gap: ("(?:" + by_name[readers[0]][0] + ")?", "WS")}
    for text, name in PUNCTUATION.items():
        symbol = builder.terminals.get((re.escape(text), (), ()))
        if symbol is not None:
            pieces[symbol] = (re.escape(text), name)
    out: list[Rule] = []
    for i, rule in enumerate(rules):
        if not i & 0x3FF:
            check_deadline(what="fusing whitespace into punctuation")
        if rule.lhs == gap or not any(s in pieces for s in rule.rhs):
            out.append(rule)
            continue
        rhs: list[str] = []
        run: list[str] = []
        for symbol in (*rule.rhs, None):      # (None: the end, which ends the last run)
            if symbol is not None and symbol in pieces:
                run.append(symbol)
                continue
            if len(run) >= 2 and any(s != gap for s in run):
                rhs.append(builder.term("".join(pieces[s][0] for s in run), "_".join(pieces[s][1] for s in run)))
            else:
                rhs += run
            run = []
            if symbol is not None:
                rhs.append(symbol)
        out.append(Rule(rule.lhs, tuple(rhs)))
    if not any(gap in r.rhs for r in out):
        out = [r for r in out if r.lhs != gap]
    return out
