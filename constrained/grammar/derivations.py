"""Random strings of a grammar's language, by random derivation.

Rules are expanded top-down with a depth budget; past the budget only
alternatives of minimal derivation height are taken, so every derivation ends.
Terminal texts come from random walks on the terminal's byte DFA (uniform over
live next bytes, stopping at accepting states with probability ``stop``), which
only ever produce valid UTF-8.  Ignored terminals (whitespace) are inserted
between terminals with probability ``ignore_rate``.

Example:
    >>> import random
    >>> from constrained.grammar.ir import Grammar
    >>> g = Grammar.from_lark('start: "(" start ")" | "x"')
    >>> s = random_string(g, random.Random(0))
    >>> s.count("(") == s.count(")") and s.strip("()") == "x"
    True
"""

from __future__ import annotations

import random

import numpy as np

from constrained.automata.byte_dfa import START, compile_terminal
from constrained.grammar.ir import Grammar


def _heights(grammar: Grammar) -> dict[str, int]:
    terms = {t.name for t in grammar.terminals}
    height: dict[str, int] = {}
    changed = True
    while changed:
        changed = False
        for r in grammar.rules:
            hs = [0 if s in terms else height.get(s) for s in r.rhs]
            if any(h is None for h in hs):
                continue
            h = 1 + max(hs, default=0)
            if h < height.get(r.lhs, 1 << 30):
                height[r.lhs] = h
                changed = True
    return height


def _terminal_text(term, rng: random.Random, stop: float, max_bytes: int) -> bytes:
    dfa = compile_terminal(term.regex, term.also, term.excluding)
    q, out = START, bytearray()
    while True:
        live = np.flatnonzero(dfa.transitions[q])
        if dfa.accepting[q] and (live.size == 0 or rng.random() < stop or len(out) >= max_bytes):
            return bytes(out)
        if len(out) >= max_bytes:
            # head for acceptance: prefer bytes leading to accepting states
            acc = [b for b in live if dfa.accepting[dfa.transitions[q, b]]]
            live = acc or live
        b = int(rng.choice(list(live)))
        out.append(b)
        q = int(dfa.transitions[q, b])


def random_string(grammar: Grammar, rng: random.Random, *, max_depth: int = 12, stop: float = 0.4,
                  ignore_rate: float = 0.15, max_terminal_bytes: int = 24) -> str:
    """One random string of the language of ``grammar`` (see the module docstring)."""
    terms = {t.name: t for t in grammar.terminals}
    heights = _heights(grammar)
    by_lhs: dict[str, list[tuple[str, ...]]] = {}
    for r in grammar.rules:
        if all(s in terms or s in heights for s in r.rhs):
            by_lhs.setdefault(r.lhs, []).append(r.rhs)
    ignore = list(grammar.ignore)
    pieces: list[bytes] = []

    def rule_height(rhs: tuple[str, ...]) -> int:
        return 1 + max((0 if s in terms else heights[s] for s in rhs), default=0)

    def expand(symbol: str, depth: int) -> None:
        if symbol in terms:
            if ignore and pieces and rng.random() < ignore_rate:
                pieces.append(_terminal_text(terms[rng.choice(ignore)], rng, stop, 3))
            pieces.append(_terminal_text(terms[symbol], rng, stop, max_terminal_bytes))
            return
        alts = by_lhs[symbol]
        if depth >= max_depth:
            best = min(rule_height(a) for a in alts)
            alts = [a for a in alts if rule_height(a) == best]
        for s in rng.choice(alts):
            expand(s, depth + 1)

    expand(grammar.start, 0)
    return b"".join(pieces).decode("utf-8")
