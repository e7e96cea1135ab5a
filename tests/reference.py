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

Also here: small test helpers that do not depend on the engine (a random string
generator over the Grammar IR, sub-vocabulary construction, random token splits).
"""

from __future__ import annotations

import random
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

    def __init__(self, ref: "Reference", sets: tuple[EarleySet, ...]) -> None:
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

    def step(self, b: int) -> "Chart | None":
        """The chart after one more byte, or None if no item survives."""
        last = self.last
        if not (last.next_mask >> b) & 1:
            return None
        kernel = [(r, d + 1, o) for mask, (r, d, o) in last.scans if (mask >> b) & 1]
        new = self.ref._close(self.sets, kernel)
        return Chart(self.ref, self.sets + (new,))

    def feed(self, data: bytes) -> "Chart | None":
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


# ====================================================================== test helpers
class StringGenerator:
    """Random strings of a Grammar's language, by random derivation over the IR.

    Terminal texts come from random walks over the terminal's `ByteDFA` (steered to
    an accepting state once long enough); ignored terminals are sprinkled between
    terminals.  The result is always valid UTF-8 (terminal automata read whole
    characters) and in the language by construction, up to bugs: callers check it
    with an independent oracle.
    """

    def __init__(self, grammar: Grammar) -> None:
        self.grammar = grammar
        self.regex_of = {t.name: t for t in grammar.terminals}
        self.rules_of: dict[str, list[tuple[str, ...]]] = {}
        for r in grammar.rules:
            self.rules_of.setdefault(r.lhs, []).append(r.rhs)
        # height of the smallest derivation tree of each nonterminal (inf if none)
        inf = float("inf")
        height: dict[str, float] = {n: inf for n in self.rules_of}

        def h(s: str) -> float:
            return height[s] if s in height else 0

        changed = True
        while changed:
            changed = False
            for lhs, alts in self.rules_of.items():
                best = min((1 + max((h(s) for s in rhs), default=0) for rhs in alts), default=inf)
                if best < height[lhs]:
                    height[lhs] = best
                    changed = True
        self.height = height
        self._dfa_info: dict[str, tuple] = {}

    def _dfa(self, name: str):
        info = self._dfa_info.get(name)
        if info is None:
            t = self.regex_of[name]
            dfa = compile_terminal(t.regex, t.also, t.excluding)
            trans = dfa.transitions.tolist()
            acc = dfa.accepting.tolist()
            n = len(trans)
            # distance (in bytes) to acceptance (Bellman-Ford style fixpoint)
            big = 10**9
            dist = [0 if (q and acc[q]) else big for q in range(n)]
            changed = True
            while changed:
                changed = False
                for q in range(1, n):
                    d = min((dist[q2] for q2 in trans[q] if q2), default=big) + 1
                    if d < dist[q]:
                        dist[q] = d
                        changed = True
            info = self._dfa_info[name] = (trans, acc, dist, dfa.start)
        return info

    def terminal_text(self, name: str, rng: random.Random, max_len: int = 12) -> bytes:
        trans, acc, dist, q = self._dfa(name)
        out = bytearray()
        while True:
            live = [b for b in range(256) if trans[q][b]]
            if acc[q] and (not live or len(out) >= max_len or rng.random() < 0.3):
                return bytes(out)
            if len(out) >= max_len:  # steer home
                live = [b for b in live if dist[trans[q][b]] < dist[q]]
            else:
                ascii_live = [b for b in live if 0x20 <= b < 0x7F]
                if ascii_live and rng.random() < 0.7:
                    live = ascii_live
                elif rng.random() < 0.5:
                    # pick a target state first, so rare branches are not drowned out
                    targets = sorted({trans[q][b] for b in live})
                    t = rng.choice(targets)
                    live = [b for b in live if trans[q][b] == t]
            b = rng.choice(live)
            out.append(b)
            q = trans[q][b]

    def generate(self, rng: random.Random, max_depth: int = 8, ignore_p: float = 0.2) -> bytes:
        parts: list[bytes] = []
        ignore = list(self.grammar.ignore)

        def ign() -> None:
            while ignore and rng.random() < ignore_p:
                parts.append(self.terminal_text(rng.choice(ignore), rng, 3))

        def expand(sym: str, depth: int) -> None:
            if sym not in self.rules_of:
                if parts:
                    ign()
                parts.append(self.terminal_text(sym, rng))
                return
            alts = self.rules_of[sym]
            if depth >= max_depth:
                best = min(1 + max((self.height.get(s, 0) for s in rhs), default=0) for rhs in alts)
                alts = [rhs for rhs in alts
                        if 1 + max((self.height.get(s, 0) for s in rhs), default=0) == best]
            else:
                alts = [rhs for rhs in alts
                        if all(self.height.get(s, 0) != float("inf") for s in rhs)]
            for s in rng.choice(alts):
                expand(s, depth + 1)

        ign()
        expand(self.grammar.start, 0)
        ign()
        return b"".join(parts)


def random_split(data: bytes, token_ids_by_bytes: dict[bytes, list[int]], rng: random.Random,
                 max_len: int = 32) -> list[int] | None:
    """A random segmentation of ``data`` into vocabulary tokens (None if impossible).

    DP from the end: ``ok[i]`` says ``data[i:]`` can be segmented; then walk forward
    choosing uniformly among the tokens that match at ``i`` and keep ``ok``.
    """
    n = len(data)
    ok = [False] * (n + 1)
    ok[n] = True
    for i in range(n - 1, -1, -1):
        ok[i] = any(ok[i + k] and data[i:i + k] in token_ids_by_bytes for k in range(1, min(max_len, n - i) + 1))
    if not ok[0]:
        return None
    out: list[int] = []
    i = 0
    while i < n:
        choices = [k for k in range(1, min(max_len, n - i) + 1)
                   if ok[i + k] and data[i:i + k] in token_ids_by_bytes]
        k = rng.choice(choices)
        out.append(rng.choice(token_ids_by_bytes[data[i:i + k]]))
        i += k
    return out


def ids_by_bytes(token_bytes: Sequence[bytes]) -> dict[bytes, list[int]]:
    """Map token bytes -> every id spelling them (tokens with no bytes left out)."""
    out: dict[bytes, list[int]] = {}
    for i, b in enumerate(token_bytes):
        if b:
            out.setdefault(b, []).append(i)
    return out


def is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def sub_vocabulary_bytes(full_token_bytes: Sequence[bytes], samples: Iterable[bytes], rng: random.Random,
                         size: int = 2000, punctuation: bytes = b'{}[](),:;"\'\\=+-*/.<>|!?@#$%^&~`') -> list[bytes]:
    """~``size`` distinct token byte strings drawn from a real vocabulary.

    Always: every single-byte token, every token that occurs inside one of the
    ``samples`` (strings of the grammar), some partial-UTF-8 tokens and some
    tokens with punctuation; then random tokens up to ``size``.  Shuffled.
    """
    distinct = sorted({b for b in full_token_bytes if b})
    present = set(distinct)
    chosen: set[bytes] = {b for b in distinct if len(b) == 1}
    for s in samples:
        for i in range(len(s)):
            for k in range(2, min(16, len(s) - i) + 1):
                if s[i:i + k] in present:
                    chosen.add(s[i:i + k])
    partial = [b for b in distinct if len(b) > 1 and not is_utf8(b)]
    chosen.update(rng.sample(partial, min(len(partial), size // 20)))
    punct = set(punctuation)
    with_punct = [b for b in distinct if len(b) > 1 and any(c in punct for c in b)]
    chosen.update(rng.sample(with_punct, min(len(with_punct), size // 6)))
    rest = [b for b in distinct if b not in chosen]
    need = max(0, size - len(chosen))
    chosen.update(rng.sample(rest, min(len(rest), need)))
    out = sorted(chosen)
    rng.shuffle(out)
    return out


# ====================================================================== shared grammar cases
INLINE_LARK: dict[str, str] = {
    # JSON written differently from grammars/json.lark: lark's common terminals, %ignore WS
    "json_inline": r'''
?start: value
?value: object | array | STRING | SIGNED_NUMBER | "true" | "false" | "null"
array  : "[" [value ("," value)*] "]"
object : "{" [pair ("," pair)*] "}"
pair   : STRING ":" value
STRING : /"(?:[^"\\\n]|\\["\\\/bfnrtu])*"/
%import common.SIGNED_NUMBER
%import common.WS
%ignore WS
''',
    # ambiguous: "xxx" has many derivations
    "ambiguous": 'start: a+\na: "x" | "xx" | "x" "x"\n',
    # greedy lexing of /a+/ would eat the "a" that B needs
    "dynamic_split": 'start: A B\nA: /a+/\nB: /ab/\n',
    # nullable rules and left recursion, an ignored space
    "nullable_leftrec": r'''
start: seq
seq: seq item
   | empty
empty:
item: "(" seq ")" | NAME bang
bang: "!" | empty
NAME: /[a-z]+/
%ignore " "
''',
    # left-recursive arithmetic with ignored whitespace.  (common.WS, not WS_INLINE:
    # with an ignored /[ \t]+/ the engine's mask is exponential in the length of a
    # token like 48 spaces + "\n", which Llama 3 has; see test_exactness's xfail test.)
    "expr": r'''
start: sum
?sum: product | sum ("+"|"-") product
?product: atom | product ("*"|"/") atom
?atom: NUMBER | "-" atom | "(" sum ")"
%import common.NUMBER
%import common.WS
%ignore WS
''',
    # adjacent WORDs may split anywhere; the ignored space overlaps nothing
    "words": 'start: WORD+\nWORD: /[a-z]+/\n%ignore " "\n',
}

INLINE_REGEX: dict[str, str] = {
    "regex_greek": r"[α-ω]+é?",
    "regex_mixed": r"(?:[α-ω]+é?|[0-9]{2,4}|€+)(?:-[a-zé]{1,3})*",
}

INLINE_GBNF: dict[str, str] = {
    "gbnf_list": r'''
root ::= "<" ws (item ("," ws item)*)? ">"
item ::= [a-z]+ | "'" [^'<>]* "'" | root
ws ::= [ \t\n]*
''',
    # regex metacharacters in literals and classes (must be escaped in the IR)
    "gbnf_brackets": r'''
root ::= "[" ws (item ("," ws item)*)? "]"
item ::= [a-z.^-]+ | "\"" [^"\\]* "\"" | "(" root ")*" | "{" [0-9]{1,3} "}"
ws ::= [ \t\n]*
''',
}


# Longest prefix (bytes) tests should explore per case.  "ambiguous": the engine's
# state after n x's holds Fib(n) configurations (see test_exactness's xfail test),
# so walks stay short there.  "nullable_leftrec": in a run of n letters the engine
# keeps n configurations (one parser node per split point, same root cause), and
# each needs its own token mask, so long runs make masks slow (not wrong).
MAX_BYTES: dict[str, int] = {"ambiguous": 8, "nullable_leftrec": 24}


class Case:
    """A grammar under test and, where there is one, an independent oracle for it."""

    def __init__(self, name: str, kind: str, text: str, path: str | None = None) -> None:
        self.name = name
        self.max_bytes = MAX_BYTES.get(name, 10**9)
        self.kind = kind  # "lark" | "regex" | "gbnf"
        self.text = text
        self.path = path
        self._grammar = None
        self._lark = None
        self._reference = None

    def __repr__(self) -> str:
        return f"Case({self.name})"

    @property
    def grammar(self) -> Grammar:
        if self._grammar is None:
            if self.kind == "lark":
                self._grammar = Grammar.from_lark(self.text, source=self.path or self.name)
            elif self.kind == "regex":
                self._grammar = Grammar.from_regex(self.text, source=self.name)
            else:
                self._grammar = Grammar.from_gbnf(self.text, source=self.path or self.name)
        return self._grammar

    @property
    def reference(self) -> Reference:
        if self._reference is None:
            self._reference = Reference(self.grammar)
        return self._reference

    def oracle(self, data: bytes) -> bool | None:
        """Independent membership: lark's Earley parser (``dynamic_complete``) for lark
        grammars, ``re.fullmatch`` for regexes; None where there is none (GBNF)."""
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return False
        if self.kind == "regex":
            import re
            return re.fullmatch(self.text, text) is not None
        if self.kind == "lark":
            import lark
            if self._lark is None:
                self._lark = lark.Lark(self.text, parser="earley", lexer="dynamic_complete")
            try:
                self._lark.parse(text)
                return True
            except lark.exceptions.LarkError:
                return False
        return None


def shipped_cases(root) -> list[Case]:
    """Cases for every grammar file shipped in ``<root>/grammars`` (at run time)."""
    from pathlib import Path

    out = []
    gdir = Path(root) / "grammars"
    for p in sorted(gdir.glob("*")):
        kind = {".lark": "lark", ".gbnf": "gbnf", ".regex": "regex", ".re": "regex"}.get(p.suffix.lower())
        if kind is None:
            continue
        text = p.read_text(encoding="utf-8")
        if kind == "regex":
            text = text.rstrip("\n")
        out.append(Case(f"{p.name}", kind, text, path=str(p)))
    return out


def inline_cases() -> list[Case]:
    out = [Case(n, "lark", t) for n, t in INLINE_LARK.items()]
    out += [Case(n, "regex", t) for n, t in INLINE_REGEX.items()]
    try:
        import constrained.grammar.gbnf  # noqa: F401
    except ImportError:  # pragma: no cover - the GBNF front end is optional
        pass
    else:
        out += [Case(n, "gbnf", t) for n, t in INLINE_GBNF.items()]
    return out
