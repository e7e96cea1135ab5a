"""Random strings of a grammar's language, by random derivation over the `Grammar` IR.

Every choice goes through a `Chooser`, so the same generator runs on a seeded
`random.Random` (`RandomChooser`, for bulk runs) or on hypothesis draws
(`constrained.testing.grammar_strings`, which then shrinks: the first
option of every choice is the simplest one, and "do more" decisions shrink to no).

Alternatives are picked uniformly among those that can still finish within the
depth budget, so every rule and alternative is reached, not only short ones;
past ``max_depth`` only the alternatives with the smallest derivation height are
taken.  Terminal texts are random walks over the terminal's byte automaton
(steered to an accepting state once ``max_terminal_bytes`` is reached); ignored
terminals (``%ignore``) are inserted between terminals.  Texts are valid UTF-8
(terminal automata read whole characters) and in the language by construction.

Example:
    >>> import random
    >>> from constrained import Grammar
    >>> gen = GrammarSampler(Grammar.from_lark('start: "a" start "b" | "c"'))
    >>> text = gen.generate(RandomChooser(random.Random(1)))
    >>> text.count(b"a") == text.count(b"b") and text.endswith(b"c" + b"b" * text.count(b"b"))
    True
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Protocol, TypeVar

from constrained.automata.byte_dfa import compile_terminal
from constrained.grammar.ir import Grammar

T = TypeVar("T")
INF = float("inf")


class Chooser(Protocol):
    """The source of a generator's decisions."""

    def choose(self, options: Sequence[T]) -> T:
        """One of ``options`` (non-empty; the first is the simplest)."""

    def more(self, p: float) -> bool:
        """Whether to do one more optional thing (probability about ``p``; no is simpler)."""


class RandomChooser:
    """Decisions from a `random.Random` (seeded: reproducible)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def choose(self, options):
        return self.rng.choice(options)

    def more(self, p: float) -> bool:
        return self.rng.random() < p


class GrammarSampler:
    """Random derivations of a `Grammar` (see the module docstring)."""

    def __init__(self, grammar: Grammar) -> None:
        self.grammar = grammar
        self.terminal = {t.name: t for t in grammar.terminals}
        self.rules_of: dict[str, list[tuple[str, ...]]] = {}
        for r in grammar.rules:
            self.rules_of.setdefault(r.lhs, []).append(r.rhs)
        # height of the smallest derivation tree of each nonterminal (inf if none)
        height: dict[str, float] = {n: INF for n in self.rules_of}
        changed = True
        while changed:
            changed = False
            for lhs, alts in self.rules_of.items():
                best = min((self._alt_height(rhs, height) for rhs in alts), default=INF)
                if best < height[lhs]:
                    height[lhs] = best
                    changed = True
        self.height = height
        # alternatives simplest first (shrinking goes there), unproductive ones dropped
        for lhs, alts in self.rules_of.items():
            self.rules_of[lhs] = sorted((a for a in alts if self._alt_height(a, height) < INF),
                                        key=lambda a: self._alt_height(a, height))
        self._automata: dict[str, tuple] = {}

    @staticmethod
    def _alt_height(rhs: tuple[str, ...], height: dict[str, float]) -> float:
        return 1 + max((height.get(s, 0) for s in rhs), default=0)

    def _automaton(self, name: str) -> tuple:
        info = self._automata.get(name)
        if info is None:
            t = self.terminal[name]
            dfa = compile_terminal(t.regex, t.also, t.excluding)
            trans = dfa.transitions.tolist()
            acc = dfa.accepting.tolist()
            big = 10**9
            dist = [0 if (q and acc[q]) else big for q in range(len(trans))]   # bytes to acceptance
            changed = True
            while changed:
                changed = False
                for q in range(1, len(trans)):
                    d = min((dist[q2] for q2 in trans[q] if q2), default=big) + 1
                    if d < dist[q]:
                        dist[q] = d
                        changed = True
            # live bytes per state, printable ASCII first (the simplest), grouped by target
            live = []
            for q in range(len(trans)):
                bs = [b for b in range(256) if trans[q][b]]
                live.append(sorted(bs, key=lambda b: (not 0x20 <= b < 0x7F, b)))
            info = self._automata[name] = (trans, acc, dist, dfa.start, live)
        return info

    def terminal_text(self, name: str, chooser: Chooser, max_bytes: int = 12, stop: float = 0.3) -> bytes:
        """A random match of terminal ``name`` (at an accepting state, stop with about ``stop``)."""
        trans, acc, dist, q, live_of = self._automaton(name)
        out = bytearray()
        while True:
            live = live_of[q]
            if acc[q] and (not live or len(out) >= max_bytes or not chooser.more(1 - stop)):
                return bytes(out)
            if len(out) >= max_bytes:    # steer home
                live = [b for b in live if dist[trans[q][b]] < dist[q]]
            else:
                # a target state first, so that rare branches are not drowned out by wide classes
                targets = list(dict.fromkeys(trans[q][b] for b in live))
                target = chooser.choose(targets)
                live = [b for b in live if trans[q][b] == target]
            b = chooser.choose(live)
            out.append(b)
            q = trans[q][b]

    def generate(self, chooser: Chooser, max_depth: int = 8, max_terminal_bytes: int = 12,
                 ignore_p: float = 0.2, max_size: int | None = None, stop: float = 0.3) -> bytes:
        """One random string of the language.  ``max_size`` caps the number of terminals
        (past it, only the shallowest alternatives are taken, as past ``max_depth``)."""
        parts: list[bytes] = []
        ignore = list(self.grammar.ignore)
        count = [0]

        def ignored() -> None:
            while ignore and chooser.more(ignore_p):
                parts.append(self.terminal_text(chooser.choose(ignore), chooser, 3, stop))

        def expand(sym: str, depth: int) -> None:
            alts = self.rules_of.get(sym)
            if alts is None:
                if parts:
                    ignored()
                parts.append(self.terminal_text(sym, chooser, max_terminal_bytes, stop))
                count[0] += 1
                return
            if depth >= max_depth or (max_size is not None and count[0] >= max_size):
                best = self._alt_height(alts[0], self.height)
                alts = [a for a in alts if self._alt_height(a, self.height) == best]
            for s in chooser.choose(alts):
                expand(s, depth + 1)

        ignored()
        expand(self.grammar.start, 0)
        ignored()
        return b"".join(parts)


def random_string(grammar: Grammar, rng: random.Random, *, max_depth: int = 12, stop: float = 0.4,
                  ignore_rate: float = 0.15, max_terminal_bytes: int = 24) -> str:
    """One random string of ``grammar``'s language from ``rng`` (benchmarks, tests).

    Example:
        >>> g = Grammar.from_lark('start: "(" start ")" | "x"')
        >>> s = random_string(g, random.Random(0))
        >>> s.count("(") == s.count(")") and s.strip("()") == "x"
        True
    """
    return GrammarSampler(grammar).generate(RandomChooser(rng), max_depth=max_depth, stop=stop,
                                            ignore_p=ignore_rate, max_terminal_bytes=max_terminal_bytes
                                            ).decode("utf-8")
