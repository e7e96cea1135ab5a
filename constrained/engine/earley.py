"""Earley recognition over terminals with hash-consed (interned) item sets.

An Earley set is identified by its *kernel*: the items produced by scanning a
terminal, with each item's origin replaced by the id of the (already interned)
set it started in.  Two sets with the same kernel have the same closure and the
same future, so a set is a canonical, immutable `ParserNode`, shared by every
sequence and fork that reaches it, and ``scan(node, terminal)`` is a pure
function that is memoised.  Reused, this memo is a lazily built deterministic
parser automaton: for LALR-friendly grammars such as JSON it plays the role of
LR tables (a dict lookup per terminal), while ambiguous and non-LR grammars work
unchanged.  Nullable symbols use Aycock & Horspool's fix (advance over a
nullable nonterminal when predicting it).

Invariant relied on by the mask engine: after non-productive symbols are
removed, every terminal a node expects leads to a node from which the start
symbol can still be completed, i.e. every reachable node is viable.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from itertools import chain

from constrained.errors import EmptyLanguageError
from constrained.grammar.ir import Grammar

SELF = -1  # origin of items predicted in the node itself
CUT = -2   # origin below the context an abstract node keeps (see EarleyParser.abstract)
MAX_COMPLETION_DEPTH = 64  # nested memoised completions before they are done in place


class NeedsContext(Exception):
    """An abstract node's computation reached a cut origin: redo it on the real node."""


@dataclass(frozen=True)
class ParserTables:
    """Grammar rules as integers.  Terminals are ``0..num_terminals-1``; a
    nonterminal ``A`` is ``num_terminals + index``."""

    terminal_names: tuple[str, ...]
    nonterminal_names: tuple[str, ...]
    rule_lhs: tuple[int, ...]
    rule_rhs: tuple[tuple[int, ...], ...]
    rules_by_lhs: dict[int, tuple[int, ...]]
    nullable: frozenset[int]
    start: int

    @property
    def num_terminals(self) -> int:
        return len(self.terminal_names)

    @classmethod
    def from_grammar(cls, grammar: Grammar) -> "ParserTables":
        """Number the grammar and drop rules that use non-productive symbols."""
        terms = [t.name for t in grammar.terminals]
        tindex = {n: i for i, n in enumerate(terms)}
        nts: list[str] = []
        for r in grammar.rules:
            if r.lhs not in nts:
                nts.append(r.lhs)
        nindex = {n: len(terms) + i for i, n in enumerate(nts)}

        def sym(name: str) -> int:
            return tindex[name] if name in tindex else nindex[name]

        rules = [(nindex[r.lhs], tuple(sym(s) for s in r.rhs)) for r in grammar.rules]
        productive: set[int] = set()
        changed = True
        while changed:
            changed = False
            for lhs, rhs in rules:
                if lhs not in productive and all(s < len(terms) or s in productive for s in rhs):
                    productive.add(lhs)
                    changed = True
        start = nindex[grammar.start]
        if start not in productive:
            raise EmptyLanguageError(f"start symbol {grammar.start!r} derives no string "
                                     "(every derivation is infinite)", source=grammar.source)
        rules = [(lhs, rhs) for lhs, rhs in rules
                 if lhs in productive and all(s < len(terms) or s in productive for s in rhs)]
        # keep only rules reachable from the start symbol
        reachable = {start}
        stack = [start]
        while stack:
            a = stack.pop()
            for lhs, rhs in rules:
                if lhs == a:
                    for s in rhs:
                        if s >= len(terms) and s not in reachable:
                            reachable.add(s)
                            stack.append(s)
        rules = [(lhs, rhs) for lhs, rhs in rules if lhs in reachable]
        nullable: set[int] = set()
        changed = True
        while changed:
            changed = False
            for lhs, rhs in rules:
                if lhs not in nullable and all(s in nullable for s in rhs):
                    nullable.add(lhs)
                    changed = True
        by_lhs: dict[int, list[int]] = {}
        for i, (lhs, _) in enumerate(rules):
            by_lhs.setdefault(lhs, []).append(i)
        return cls(terminal_names=tuple(terms), nonterminal_names=tuple(nts),
                   rule_lhs=tuple(l for l, _ in rules), rule_rhs=tuple(r for _, r in rules),
                   rules_by_lhs={k: tuple(v) for k, v in by_lhs.items()},
                   nullable=frozenset(nullable), start=start)


class ParserNode:
    """One interned Earley set: what it expects and whether input may end here."""

    __slots__ = ("id", "kernel", "expect", "waiting", "accepting", "terminals", "abstract", "depth")

    def __init__(self, node_id: int, kernel: frozenset, expect: dict[int, tuple],
                 waiting: dict[int, tuple], accepting: bool, abstract: bool, depth: int = 0) -> None:
        self.id = node_id
        self.depth = depth            # parse-stack depth: 1 + the deepest origin's (the root: 0)
        self.kernel = kernel          # the scanned items (rule, dot, origin node) it is closed from
        self.abstract = abstract      # some origin below it is CUT
        self.expect = expect          # terminal -> items (rule, dot, origin) waiting for it
        self.waiting = waiting        # nonterminal -> items waiting for it
        self.accepting = accepting
        self.terminals = tuple(sorted(expect))


class EarleyParser:
    """Interns Earley sets and memoises terminal scans; thread-safe.

    Example:
        >>> from constrained.grammar.ir import Grammar
        >>> p = EarleyParser(ParserTables.from_grammar(Grammar.from_lark('start: "a" "b"')))
        >>> n = p.scan(p.root, p.terminal_id("A"))
        >>> p.node(p.scan(n, p.terminal_id("B"))).accepting
        True
    """

    def __init__(self, tables: ParserTables) -> None:
        self.tables = tables
        self._nodes: list[ParserNode] = []
        self._by_kernel: dict[object, int] = {}
        self._scan_memo: dict[tuple[int, int], int] = {}
        self._lock = threading.RLock()
        self._own: dict[int, tuple[dict, dict, bool]] = {}
        self._by_future: dict[tuple, int] = {}
        self._completion_memo: dict[tuple[int, int], tuple[dict, dict, frozenset, bool]] = {}
        self._prediction_memo: dict[int, tuple[int, ...]] = {}
        self.root = self._intern(("root",), [(r, 0, SELF) for r in tables.rules_by_lhs[tables.start]])
        self._union_memo: dict[frozenset[int], int] = {}
        self._abstract_memo: dict[tuple[int, int], int] = {}

    def terminal_id(self, name: str) -> int:
        return self.tables.terminal_names.index(name)

    def node(self, node_id: int) -> ParserNode:
        return self._nodes[node_id]

    @property
    def num_nodes(self) -> int:
        return len(self._nodes)

    def scan(self, node_id: int, terminal: int) -> int:
        """The node after ``terminal`` is read at ``node_id``; -1 if not expected.

        Raises `NeedsContext` when ``node_id`` is abstract and the scan completes
        an item whose origin was cut.
        """
        key = (node_id, terminal)
        hit = self._scan_memo.get(key)
        if hit is not None:
            if hit == CUT:
                raise NeedsContext
            return hit
        items = self._nodes[node_id].expect.get(terminal)
        if not items:
            result = -1
        else:
            kernel = frozenset((r, d + 1, node_id if o == SELF else o) for r, d, o in items)
            result = self._by_kernel.get(kernel)
            if result is None:
                try:
                    result = self._intern(kernel, kernel)
                except NeedsContext:
                    self._scan_memo[key] = CUT
                    raise
        self._scan_memo[key] = result
        return result

    def abstract(self, node_id: int, depth: int) -> int:
        """``node_id`` with its origin chains cut ``depth`` levels down.

        The abstract node has the same items as the real one except that origins
        deeper than ``depth`` are `CUT`; any computation on it that never completes
        into a cut origin (`NeedsContext` otherwise) gives the real node's answer,
        so results memoised on it are shared by every real node with the same
        top-of-stack context: what makes new parse stacks (deep nesting) cheap.
        A node whose own closure needs its cut origins is kept real (uncut), so
        the result may be ``node_id`` itself.
        """
        if node_id == self.root or self._nodes[node_id].abstract or depth <= 0:
            return node_id
        key = (node_id, depth)
        hit = self._abstract_memo.get(key)
        if hit is None:
            kernel = frozenset((r, d, o if o < 0 else (self.abstract(o, depth - 1) if depth > 1 else CUT))
                               for r, d, o in self._nodes[node_id].kernel)
            hit = self._by_kernel.get(kernel)
            if hit is None:
                try:
                    hit = self._intern(kernel, kernel)
                except NeedsContext:
                    hit = node_id
            self._abstract_memo[key] = hit
        return hit

    def union(self, node_ids) -> int:
        """The node whose items are the union of the given nodes' items (not the root).

        Sound because an Earley set's future is the union of its items' futures:
        completion only looks back into each item's own origin.  The recognizer
        merges the configurations of different splits that read the same lexeme
        from different nodes, so ambiguous splits share one node per position
        instead of one per split history (which grows like Fibonacci numbers).
        """
        key = frozenset(node_ids)
        if len(key) == 1:
            return next(iter(key))
        hit = self._union_memo.get(key)
        if hit is not None:
            return hit
        if self.root in key:
            raise ValueError("the root node's predictions are relative to itself; it cannot be merged")
        if any(self._nodes[n].abstract for n in key):
            raise ValueError("abstract nodes are for memo sharing only; they cannot be merged")
        kernel = frozenset().union(*(self._nodes[n].kernel for n in key))
        result = self._by_kernel.get(kernel)
        if result is None:
            result = self._intern(kernel, kernel)
        self._union_memo[key] = result
        return result

    def _intern(self, key, kernel_items) -> int:
        with self._lock:
            hit = self._by_kernel.get(key)
            if hit is not None:
                return hit
            node_id = len(self._nodes)
            node = self._close(node_id, kernel_items)
            # Two sets with the same items (predicted ones with origin SELF) and flags
            # are interchangeable: scans, completions into them and acceptance all read
            # only those.  So a kernel whose closure equals an earlier set's maps to that
            # set, e.g. the ends of every member's value in an object, and every memo
            # keyed by the node (masks, crossing walks) is shared.  The root is excluded:
            # completing the start symbol accepts only with the root as origin.
            future = (frozenset(chain.from_iterable(node.expect.values())),
                      frozenset(chain.from_iterable(node.waiting.values())), node.accepting, node.abstract)
            same = self._by_future.get(future) if node_id else None
            if same is not None:
                self._by_kernel[key] = same
                return same
            self._nodes.append(node)
            self._by_kernel[key] = node_id
            if node_id:
                self._by_future[future] = node_id
            return node_id

    def _predicted(self, x: int) -> tuple[tuple[int, ...], tuple]:
        """What predicting nonterminal ``x`` adds to any node, computed once per grammar.

        Returns ``(reach, own)``: the nonterminals the prediction reaches (``x`` first,
        through left corners and nullable advances) and, per nonterminal ``y``,
        ``own[y] = (expect, waiting, completes_start)``: the contributions of the
        items ``(rule of y, dot, SELF)`` with only nullable symbols before the dot.
        The items of different nonterminals are disjoint (they differ in their
        rule), so a node's predicted items are the union of ``own`` over what it
        reaches: merged per nonterminal instead of re-derived item by item."""
        hit = self._prediction_memo.get(x)
        if hit is not None:
            return hit
        t = self.tables
        nt_base = t.num_terminals
        reach = [x]
        seen = {x}
        for y in reach:
            if y not in self._own:
                expect: dict[int, list] = {}
                waiting: dict[int, list] = {}
                completes = False
                for r in t.rules_by_lhs.get(y, ()):
                    rhs = t.rule_rhs[r]
                    for d in range(len(rhs) + 1):
                        if d == len(rhs):
                            completes = y == t.start
                            break
                        z = rhs[d]
                        if z < nt_base:
                            expect.setdefault(z, []).append((r, d, SELF))
                            break
                        waiting.setdefault(z, []).append((r, d, SELF))
                        if z not in t.nullable:
                            break
                self._own[y] = ({k: tuple(v) for k, v in expect.items()},
                                {k: tuple(v) for k, v in waiting.items()}, completes)
            for z in self._own[y][1]:
                if z not in seen:
                    seen.add(z)
                    reach.append(z)
        hit = self._prediction_memo[x] = tuple(reach)
        return hit

    def _close(self, node_id: int, kernel_items) -> ParserNode:
        t = self.tables
        expect: dict[int, list] = {}
        waiting: dict[int, list] = {}
        parts_e: list[dict] = []
        parts_w: list[dict] = []
        predicts: set[int] = set()
        agenda = []
        for item in kernel_items:
            if item[2] == SELF:     # the root's kernel: its start rules, predicted in place
                predicts.add(t.rule_lhs[item[0]])
            else:
                agenda.append(item)
        accepting = self._advance_items(agenda, expect, waiting, parts_e, parts_w, predicts, None, set(), 0)
        # predicted items (origin SELF) are merged per nonterminal, not derived item by item
        predicted: set[int] = set()
        for x in predicts:
            for y in self._predicted(x):
                if y in predicted:
                    continue
                predicted.add(y)
                own_expect, own_waiting, completes = self._own[y]
                parts_e.append(own_expect)
                parts_w.append(own_waiting)
                if completes and node_id == 0:
                    accepting = True
        abstract = any(o == CUT or (o >= 0 and self._nodes[o].abstract) for _, _, o in kernel_items)
        kernel = kernel_items if isinstance(kernel_items, frozenset) else frozenset(kernel_items)
        depth = 1 + max((self._nodes[o].depth for _, _, o in kernel if o >= 0), default=0) if node_id else 0
        return ParserNode(node_id, kernel, _union(expect, parts_e), _union(waiting, parts_w), accepting, abstract,
                          depth)

    def _advance_items(self, agenda: list, expect: dict, waiting: dict, parts_e: list, parts_w: list,
                       predicts: set, inline_origin: int | None, inline_done: set, depth: int) -> bool:
        """Close ``agenda`` (items with real or cut origins) into ``expect``/``waiting``
        (items found here, in lists) and ``parts_e``/``parts_w`` (memoised dicts to be
        unioned with them, borrowed: never modified), collecting the nonterminals to
        predict; True if the start symbol completes at the root.  Completing ``lhs``
        back into an origin ``o`` borrows the memoised `_completion` of ``(o, lhs)``,
        the same for every set that completes it (e.g. the ends of all members of an
        object advance the same list items), except into ``inline_origin`` (the
        completion being computed) and past `MAX_COMPLETION_DEPTH` nested completions
        (right recursion), done in place."""
        t = self.tables
        nt_base = t.num_terminals
        rule_rhs, rule_lhs, nullable = t.rule_rhs, t.rule_lhs, t.nullable
        accepting = False
        seen: set = set()
        merged: set = set()
        while agenda:
            item = agenda.pop()
            if item in seen:
                continue
            seen.add(item)
            r, d, o = item
            rhs = rule_rhs[r]
            if d == len(rhs):
                if o == CUT:
                    raise NeedsContext
                lhs = rule_lhs[r]
                if lhs == t.start and o == 0:
                    accepting = True
                if o == inline_origin or depth >= MAX_COMPLETION_DEPTH:
                    if (o, lhs) not in inline_done:
                        inline_done.add((o, lhs))
                        agenda.extend((r2, d2 + 1, o if o2 == SELF else o2)
                                      for r2, d2, o2 in self._nodes[o].waiting.get(lhs, ()))
                elif (o, lhs) not in merged:
                    merged.add((o, lhs))
                    c_expect, c_waiting, c_predicts, c_accepting = self._completion(o, lhs, depth + 1)
                    if c_expect:
                        parts_e.append(c_expect)
                    if c_waiting:
                        parts_w.append(c_waiting)
                    predicts |= c_predicts
                    accepting |= c_accepting
                continue
            x = rhs[d]
            if x < nt_base:
                expect.setdefault(x, []).append(item)
                continue
            waiting.setdefault(x, []).append(item)
            predicts.add(x)
            if x in nullable:
                agenda.append((r, d + 1, o))
        return accepting

    def _completion(self, origin: int, lhs: int, depth: int) -> tuple[dict, dict, frozenset, bool]:
        """What completing ``lhs`` with origin ``origin`` adds to a set: the closure of the
        items of ``origin`` waiting for ``lhs``, advanced (memoised: sets are immutable)."""
        key = (origin, lhs)
        hit = self._completion_memo.get(key)
        if hit is not None:
            return hit
        expect: dict[int, list] = {}
        waiting: dict[int, list] = {}
        parts_e: list[dict] = []
        parts_w: list[dict] = []
        predicts: set[int] = set()
        agenda = [(r2, d2 + 1, origin if o2 == SELF else o2) for r2, d2, o2 in self._nodes[origin].waiting.get(lhs, ())]
        accepting = self._advance_items(agenda, expect, waiting, parts_e, parts_w, predicts, origin,
                                        {(origin, lhs)}, depth)
        hit = self._completion_memo[key] = (_union(expect, parts_e), _union(waiting, parts_w),
                                            frozenset(predicts), accepting)
        return hit


def _union(own: dict[int, list], parts: list[dict[int, tuple]]) -> dict[int, tuple]:
    """``own`` (item lists built here) and ``parts`` (memoised dicts of item tuples,
    read only) as one dict of item tuples.  A single part is returned itself, not
    copied: node and memo dicts are never modified once built."""
    if not own:
        if not parts:
            return {}
        if len(parts) == 1:
            return parts[0]
        out = dict(parts[0])
        rest = parts[1:]
    else:
        out = {k: tuple(v) for k, v in own.items()}
        rest = parts
    for part in rest:
        for k, v in part.items():
            cur = out.get(k)
            out[k] = v if cur is None else cur + v
    return out
