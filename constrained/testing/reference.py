"""A slow, obviously-correct reference recognizer of a `Grammar`'s language over bytes.

Independent of ``constrained.engine``: it shares only the Grammar IR and
``compile_regex`` (each terminal's byte automaton) with the engine.

Construction (textbook, see the IR docstring for the semantics being modelled):

1. Byte-level CFG.  Every terminal ``T`` with DFA ``D`` becomes right-linear
   rules over its live states: ``N[T,q] -> {bytes b with D(q,b)=q'} N[T,q']``
   for each live target ``q'`` (bytes with the same target grouped into one
   byte-set symbol) and ``N[T,q] -> ε`` when ``q`` is accepting; ``T`` itself is
   ``N[T,start]``.
2. Ignored terminals: ``IGN* -> ε | IGN* N[I,start]`` for each ignored ``I``; the
   start becomes ``S' -> IGN* start IGN*`` and ``IGN*`` is inserted between every
   two symbols of every grammar rule (never inside a terminal's expansion).  So
   between any two consecutive terminals of a derivation (whose lowest common
   ancestor rule separates them) ignored matches may occur, and nowhere else.
3. Non-productive symbols (and the rules using them) are removed.
4. Earley recognition with Aycock & Horspool's nullable fix (predicting a nullable
   ``X`` also advances the dot over ``X``), one Earley set per input byte.

Because every remaining symbol is productive, every item in an Earley set lies on
a path to a full parse, so "the set after ``data`` is non-empty" means ``data``
is a prefix of some string in the language.

Part of `constrained.testing`: `assert_mask_exact` compares the engine's masks
with `Reference.mask`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from constrained.automata.byte_dfa import compile_terminal
from constrained.grammar.ir import Grammar

Item = tuple[int, int, int]  # (rule index, dot, origin set index)


# ====================================================================== byte-level CFG
class ByteCFG:
    """The byte-level context-free grammar of a `Grammar` (steps 1-3 above).

    Symbols are ints: nonterminals are ``>= 0``; a byte set ``k`` is ``-(k + 1)``
    and ``byte_sets[k]`` is its 256-bit mask (bit ``b`` set iff byte ``b`` is in it).
    """

    def __init__(self, grammar: Grammar) -> None:
        self.grammar = grammar
        self.nt_ids: dict[tuple, int] = {}
        self.nt_names: list[tuple] = []
        self.byte_sets: list[int] = []
        self._byte_set_ids: dict[int, int] = {}
        rules: list[tuple[int, tuple[int, ...]]] = []
        regex_of = {t.name: t for t in grammar.terminals}
        rule_names = {r.lhs for r in grammar.rules}
        expanded: dict[str, int] = {}

        def nt(key: tuple) -> int:
            i = self.nt_ids.get(key)
            if i is None:
                i = self.nt_ids[key] = len(self.nt_names)
                self.nt_names.append(key)
            return i

        def byte_set(mask: int) -> int:
            k = self._byte_set_ids.get(mask)
            if k is None:
                k = self._byte_set_ids[mask] = len(self.byte_sets)
                self.byte_sets.append(mask)
            return -(k + 1)

        def terminal(name: str) -> int:
            if name in expanded:
                return expanded[name]
            t = regex_of[name]
            dfa = compile_terminal(t.regex, t.also, t.excluding)
            trans = dfa.transitions.tolist()
            acc = dfa.accepting.tolist()
            for q in range(1, len(trans)):
                lhs = nt(("term", name, q))
                targets: dict[int, int] = {}
                for b, q2 in enumerate(trans[q]):
                    if q2 != 0:
                        targets[q2] = targets.get(q2, 0) | (1 << b)
                for q2, mask in sorted(targets.items()):
                    rules.append((lhs, (byte_set(mask), nt(("term", name, q2)))))
                if acc[q]:
                    rules.append((lhs, ()))
            expanded[name] = nt(("term", name, dfa.start))
            return expanded[name]

        def symbol(name: str) -> int:
            return nt(("rule", name)) if name in rule_names else terminal(name)

        ign = nt(("IGN*",)) if grammar.ignore else None
        self.start = nt(("S'",))
        if ign is None:
            rules.append((self.start, (symbol(grammar.start),)))
        else:
            rules.append((self.start, (ign, symbol(grammar.start), ign)))
            rules.append((ign, ()))
            for name in grammar.ignore:
                rules.append((ign, (ign, terminal(name))))
        for r in grammar.rules:
            rhs: list[int] = []
            for i, s in enumerate(r.rhs):
                if i and ign is not None:
                    rhs.append(ign)
                rhs.append(symbol(s))
            rules.append((nt(("rule", r.lhs)), tuple(rhs)))

        # remove non-productive symbols
        productive: set[int] = set()
        changed = True
        while changed:
            changed = False
            for lhs, rhs in rules:
                if lhs not in productive and all(s < 0 or s in productive for s in rhs):
                    productive.add(lhs)
                    changed = True
        self.rules = [(lhs, rhs) for lhs, rhs in rules
                      if lhs in productive and all(s < 0 or s in productive for s in rhs)]
        self.by_lhs: dict[int, list[int]] = {}
        for i, (lhs, _) in enumerate(self.rules):
            self.by_lhs.setdefault(lhs, []).append(i)
        self.nullable: set[int] = set()
        changed = True
        while changed:
            changed = False
            for lhs, rhs in self.rules:
                if lhs not in self.nullable and all(s >= 0 and s in self.nullable for s in rhs):
                    self.nullable.add(lhs)
                    changed = True


# ====================================================================== Earley
class EarleySet:
    """One Earley set: its items, the items waiting on each nonterminal, and scans."""

    __slots__ = ("items", "waiting", "scans", "next_mask", "accepting")

    def __init__(self) -> None:
        self.items: set[Item] = set()
        self.waiting: dict[int, list[Item]] = {}
        self.scans: list[tuple[int, Item]] = []  # (byte mask, item whose next symbol is that set)
        self.next_mask = 0
        self.accepting = False


class Chart:
    """An immutable Earley chart (one set per byte read); `step` returns a new chart."""

    __slots__ = ("ref", "sets")

    def __init__(self, ref: Reference, sets: tuple[EarleySet, ...]) -> None:
        self.ref = ref
        self.sets = sets

    @property
    def last(self) -> EarleySet:
        return self.sets[-1]

    @property
    def viable(self) -> bool:
        return bool(self.last.items)

    @property
    def accepting(self) -> bool:
        return self.last.accepting

    def next_bytes(self) -> set[int]:
        m = self.last.next_mask
        return {b for b in range(256) if (m >> b) & 1}

    def step(self, b: int) -> Chart | None:
        """The chart after one more byte, or None if no item survives."""
        last = self.last
        if not (last.next_mask >> b) & 1:
            return None
        kernel = [(r, d + 1, o) for mask, (r, d, o) in last.scans if (mask >> b) & 1]
        new = self.ref._close(self.sets, kernel)
        return Chart(self.ref, self.sets + (new,))

    def feed(self, data: bytes) -> Chart | None:
        c: Chart | None = self
        for b in data:
            c = c.step(b)
            if c is None:
                return None
        return c


class _TrieNode:
    __slots__ = ("children", "ids")

    def __init__(self) -> None:
        self.children: dict[int, _TrieNode] = {}
        self.ids: list[int] = []


class Reference:
    """The reference recognizer: `viable`, `accepts`, `next_bytes`, `mask`.

    Example:
        >>> ref = Reference(Grammar.from_lark('start: "a" start "b" | "c"'))
        >>> ref.accepts(b"acb"), ref.accepts(b"ab"), ref.viable(b"aa"), sorted(ref.next_bytes(b"a"))
        (True, False, True, [97, 99])
    """

    def __init__(self, grammar: Grammar) -> None:
        self.cfg = ByteCFG(grammar)
        self._tries: dict[tuple[bytes, ...], _TrieNode] = {}
        first = self._close((), [(r, 0, 0) for r in self.cfg.by_lhs.get(self.cfg.start, ())])
        self.initial = Chart(self, (first,))

    # ------------------------------------------------------------------ Earley core
    def _close(self, sets: tuple[EarleySet, ...], kernel: Iterable[Item]) -> EarleySet:
        """Build Earley set number ``len(sets)`` from its kernel (predict + complete)."""
        cfg = self.cfg
        rules, by_lhs, nullable = cfg.rules, cfg.by_lhs, cfg.nullable
        i = len(sets)
        cur = EarleySet()
        items, waiting = cur.items, cur.waiting
        agenda = list(kernel)
        while agenda:
            item = agenda.pop()
            if item in items:
                continue
            items.add(item)
            r, d, o = item
            lhs, rhs = rules[r]
            if d == len(rhs):  # complete
                if lhs == cfg.start and o == 0:
                    cur.accepting = True
                # origin == i: an ε-completion; the Aycock-Horspool advance covers
                # items that start waiting on ``lhs`` after this point.
                source = waiting if o == i else sets[o].waiting
                for r2, d2, o2 in list(source.get(lhs, ())):
                    agenda.append((r2, d2 + 1, o2))
                continue
            x = rhs[d]
            if x < 0:  # byte set
                mask = cfg.byte_sets[-x - 1]
                cur.scans.append((mask, item))
                cur.next_mask |= mask
                continue
            waiting.setdefault(x, []).append(item)
            for r2 in by_lhs.get(x, ()):
                agenda.append((r2, 0, i))
            if x in nullable:
                agenda.append((r, d + 1, o))
        return cur

    # ------------------------------------------------------------------ queries
    def state(self, prefix: bytes = b"") -> Chart | None:
        """The chart after ``prefix`` (None if ``prefix`` is not viable)."""
        c = self.initial
        return c.feed(prefix) if c.viable else None

    def viable(self, data: bytes) -> bool:
        """Whether ``data`` is a prefix of some string of the language."""
        return self.state(data) is not None

    def accepts(self, data: bytes) -> bool:
        """Whether ``data`` is in the language."""
        c = self.state(data)
        return c is not None and c.accepting

    def next_bytes(self, data: bytes) -> set[int]:
        """The bytes that may follow ``data``."""
        c = self.state(data)
        return set() if c is None else c.next_bytes()

    def _trie(self, token_bytes: Sequence[bytes]) -> _TrieNode:
        key = tuple(token_bytes)
        root = self._tries.get(key)
        if root is None:
            root = _TrieNode()
            for t, bs in enumerate(key):
                if not bs:
                    continue
                node = root
                for b in bs:
                    nxt = node.children.get(b)
                    if nxt is None:
                        nxt = node.children[b] = _TrieNode()
                    node = nxt
                node.ids.append(t)
            self._tries[key] = root
        return root

    def mask_from(self, chart: Chart | None, token_bytes: Sequence[bytes], eos_ids: Iterable[int]) -> set[int]:
        """Allowed token ids at ``chart``: tokens whose bytes keep the chart viable;
        EOS ids iff the chart accepts; tokens with no bytes never."""
        allowed: set[int] = set()
        if chart is None or not chart.viable:
            return allowed
        if chart.accepting:
            allowed.update(eos_ids)
        root = self._trie(token_bytes)
        stack = [(root, chart)]
        while stack:
            node, c = stack.pop()
            nm = c.last.next_mask
            for b, child in node.children.items():
                if not (nm >> b) & 1:
                    continue  # dead subtree
                c2 = c.step(b)
                if c2 is None:  # pragma: no cover - next_mask says it cannot happen
                    continue
                allowed.update(child.ids)
                if child.children:
                    stack.append((child, c2))
        return allowed

    def mask(self, prefix: bytes, token_bytes: Sequence[bytes], eos_ids: Iterable[int]) -> set[int]:
        """Allowed token ids after ``prefix`` (see `mask_from`)."""
        return self.mask_from(self.state(prefix), token_bytes, eos_ids)
