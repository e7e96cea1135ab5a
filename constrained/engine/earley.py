"""Earley recognition over terminals with hash-consed (interned) item sets.

An Earley set is identified by its *kernel*: the items produced by scanning a
terminal, with each item's origin replaced by the id of the (already interned)
set it started in.  Two sets with the same kernel have the same closure and the
same future, so a set is a canonical, immutable node (an int id; `ParserNode`
is a view of one), shared by every sequence and fork that reaches it, and
``scan(node, terminal)`` is a pure function that is memoised.  Reused, this
memo is a lazily built deterministic parser automaton: for LALR-friendly
grammars such as JSON it plays the role of LR tables (a dict lookup per
terminal), while ambiguous and non-LR grammars work unchanged.  Nullable
symbols use Aycock & Horspool's fix (advance over a nullable nonterminal when
predicting it).

Items are ints, not tuples: ``((origin + 2) << shift) | position``, where a
*position* numbers every dotted rule of the grammar (rule ``r``'s positions are
consecutive, so advancing the dot is ``item + 1``), the origin field is 0 for
`CUT`, 1 for `SELF` and ``node + 2`` for a real node.  Closures build and hash
hundreds of items per fresh node: ints hash faster than tuples and are not
tracked by the cyclic garbage collector (tuples triggered most of its
collections during mask computation).  `EarleyParser.item` and
`EarleyParser.unpack` convert.

Invariant relied on by the mask engine: after non-productive symbols are
removed, every terminal a node expects leads to a node from which the start
symbol can still be completed, i.e. every reachable node is viable.
"""

from __future__ import annotations

import threading
from array import array
from dataclasses import dataclass
from itertools import accumulate, chain, repeat

from constrained.deadline import check_deadline, passed, timeout_error
from constrained.errors import EmptyLanguageError
from constrained.grammar.ir import Grammar, derivable

SELF = -1  # origin of items predicted in the node itself
CUT = -2   # origin below the context an abstract node keeps (see EarleyParser.abstract)
MAX_COMPLETION_DEPTH = 64  # nested memoised completions before they are done in place
DEADLINE_EVERY = 4096      # rules numbered / items closed between two checks of the compile deadline


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
    def from_grammar(cls, grammar: Grammar) -> ParserTables:
        """Number the grammar and drop rules that use non-productive symbols.

        Honours the open compile deadline (`constrained.deadline`), checked every
        `DEADLINE_EVERY` rules and every 65,536 symbols of the fixpoints (checks in
        proportion to the work done: a small grammar is never checked): past it
        `CompileTimeoutError` names the rule reached or the step."""
        terms = [t.name for t in grammar.terminals]
        tindex = {n: i for i, n in enumerate(terms)}
        nts = list(dict.fromkeys(r.lhs for r in grammar.rules))
        nindex = {n: len(terms) + i for i, n in enumerate(nts)}

        def sym(name: str) -> int:
            return tindex[name] if name in tindex else nindex[name]

        n_terms = len(terms)
        rules = []
        count = len(grammar.rules)
        for i, r in enumerate(grammar.rules):
            if i % DEADLINE_EVERY == DEADLINE_EVERY - 1:      # in proportion to the work: a small grammar never
                check_deadline(rule=str(r.lhs), what=f"numbering rule {i} of {count}")
            rules.append((nindex[r.lhs], tuple(sym(s) for s in r.rhs)))
        productive = derivable(rules, lambda s: s < n_terms, checking="finding the productive rules")
        if len(rules) >= DEADLINE_EVERY:
            check_deadline(what="finding the reachable rules")
        start = nindex[grammar.start]
        if start not in productive:
            raise EmptyLanguageError(f"start symbol {grammar.start!r} derives no string "
                                     "(every derivation is infinite)", source=grammar.source)
        rules = [(lhs, rhs) for lhs, rhs in rules
                 if lhs in productive and all(s < n_terms or s in productive for s in rhs)]
        # keep only rules reachable from the start symbol
        rhs_of: dict[int, list[tuple[int, ...]]] = {}
        for lhs, rhs in rules:
            rhs_of.setdefault(lhs, []).append(rhs)
        reachable = {start}
        stack = [start]
        while stack:
            for rhs in rhs_of.get(stack.pop(), ()):
                for s in rhs:
                    if s >= n_terms and s not in reachable:
                        reachable.add(s)
                        stack.append(s)
        rules = [(lhs, rhs) for lhs, rhs in rules if lhs in reachable]
        nullable = derivable(rules, lambda s: False, checking="finding the nullable rules")
        by_lhs: dict[int, list[int]] = {}
        for i, (lhs, _) in enumerate(rules):
            by_lhs.setdefault(lhs, []).append(i)
        return cls(terminal_names=tuple(terms), nonterminal_names=tuple(nts),
                   rule_lhs=tuple(l for l, _ in rules), rule_rhs=tuple(r for _, r in rules),
                   rules_by_lhs={k: tuple(v) for k, v in by_lhs.items()},
                   nullable=frozenset(nullable), start=start)


# How the parser keeps its interned sets and memoised completions.  Tens of thousands of
# them are made while a batch of fresh requests steps, each alive as long as its grammar.
# Held in objects and dicts of tuples (tracked by the cyclic garbage collector until a
# full collection) or in nested tuples (one collection untracks one level of nesting),
# they were most of what the collector moved into its oldest generation, which is what
# triggers its full collections, and what those then walked.  So each field of a node is
# kept in a list of its own (`EarleyParser._node_kernel` ...), as ints and flat tuples of
# ints, which the first collection that sees them stops tracking, and its items wait in a
# `Pending` dict of ints, which the collector never tracks.

# A node's (or memoised completion's) items grouped by the symbol after their dot
# (terminal and nonterminal ids are disjoint): symbol -> the index of the items' tuple in
# `EarleyParser._item_lists`.  Never modified once built (a single part is shared).
Pending = dict[int, int]


class ParserNode:
    """One interned Earley set (a view made by `EarleyParser.node`): what it expects and
    whether input may end here.  `expect` and `waiting` give the two halves of its
    pending items (copies, for inspection)."""

    __slots__ = ("id", "kernel", "pending", "accepting", "terminals", "abstract", "depth")

    def __init__(self, node_id: int, kernel: tuple[int, ...], pending: dict[int, tuple[int, ...]],
                 terminals: tuple[int, ...], accepting: bool, abstract: bool, depth: int = 0) -> None:
        self.id = node_id
        self.depth = depth            # parse-stack depth: 1 + the deepest origin's (the root: 0)
        self.kernel = kernel          # the scanned items it is closed from, sorted (ints: see EarleyParser.item)
        self.abstract = abstract      # some origin below it is CUT
        self.pending = pending        # symbol -> the items whose dot is before it
        self.accepting = accepting
        self.terminals = terminals    # the terminals it expects, sorted

    @property
    def expect(self) -> dict[int, tuple[int, ...]]:
        """Terminal -> the items waiting for it (a new dict)."""
        return {t: self.pending[t] for t in self.terminals}

    @property
    def waiting(self) -> dict[int, tuple[int, ...]]:
        """Nonterminal -> the items waiting for it (a new dict)."""
        terminals = set(self.terminals)
        return {k: v for k, v in self.pending.items() if k not in terminals}


class EarleyParser:
    """Interns Earley sets and memoises terminal scans; thread-safe.

    Example:
        >>> from constrained.grammar.ir import Grammar
        >>> p = EarleyParser(ParserTables.from_grammar(Grammar.from_lark('start: "a" "b"')))
        >>> n = p.scan(p.root, p.terminal_id("A"))
        >>> p.node(p.scan(n, p.terminal_id("B"))).accepting
        True
        >>> [p.unpack(i) for i in p.node(n).kernel]      # (rule, dot, origin node)
        [(0, 1, 0)]
    """

    def __init__(self, tables: ParserTables) -> None:
        self.tables = tables
        # dotted-rule positions: rule r's dots are offsets[r] .. offsets[r] + len(rhs)
        # (built by iterators, not a loop per rule: a fresh schema's grammar has hundreds)
        rhs_of = tables.rule_rhs
        if len(rhs_of) >= DEADLINE_EVERY:
            check_deadline(what=f"numbering the dotted rules of {len(rhs_of)} rules")
        dots = [len(rhs) + 1 for rhs in rhs_of]
        offsets = tuple(accumulate(dots, initial=0))[:-1]
        sym_at = tuple(chain.from_iterable((*rhs, -1) for rhs in rhs_of))   # the symbol after the dot, -1 at the end
        lhs_at = tuple(chain.from_iterable(map(repeat, tables.rule_lhs, dots)))
        rule_at = tuple(chain.from_iterable(map(repeat, range(len(dots)), dots)))
        self._sym_at, self._lhs_at, self._rule_at = sym_at, lhs_at, rule_at
        self._offsets = offsets
        self._shift = max(1, len(sym_at).bit_length())
        self._pmask = (1 << self._shift) - 1
        self._nterm = tables.num_terminals
        self._nsym = tables.num_terminals + len(tables.nonterminal_names)
        # node id -> each field of the node (see `ParserNode`; lists of ints and flat tuples)
        self._node_kernel: list[tuple[int, ...]] = []
        self._node_pending: list[Pending] = []
        self._item_lists: list[tuple[int, ...]] = []     # what `Pending` dicts point at
        self._node_terminals: list[tuple[int, ...]] = []
        # (flags and depths in arrays of machine ints: a list's every element is a reference
        # the cyclic GC visits at each collection of the list's generation)
        self._node_accepting = bytearray()
        self._node_abstract = bytearray()
        self._node_depth = array("l")
        self._by_kernel: dict[object, int] = {}
        self._scan_memo: dict[int, int] = {}
        self._lock = threading.RLock()
        self._own: dict[int, tuple[Pending, tuple, bool]] = {}
        self._by_future: dict[tuple, int] = {}
        # key -> (accepting, number of predicts, predicts..., children...): see `_completion`
        self._completion_memo: dict[int, tuple[int, ...]] = {}
        self._completion_pending: dict[int, Pending] = {}
        self._prediction_memo: dict[int, tuple[int, ...]] = {}
        # nonterminal -> its predictions as one Pending, and their terminals (`_close_single`)
        self._prediction_merged: dict[int, Pending] = {}
        self._prediction_terminals: dict[int, tuple[int, ...]] = {}
        self._prediction_items: dict[int, tuple[int, ...]] = {}
        # completion key -> what a node whose kernel is that one completed item holds, its
        # terminals and all its items
        self._completion_closed: dict[int, Pending] = {}
        self._completion_closed_terminals: dict[int, tuple[int, ...]] = {}
        self._completion_closed_items: dict[int, tuple[int, ...]] = {}
        self.root = self._intern(("root",), [self.item(r, 0, SELF) for r in tables.rules_by_lhs[tables.start]])
        self._union_memo: dict[tuple[int, ...], int] = {}
        self._abstract_memo: dict[tuple[int, int], int] = {}

    def item(self, rule: int, dot: int, origin: int) -> int:
        """The int encoding of Earley item ``(rule, dot, origin)`` (origin: a node, `SELF` or `CUT`)."""
        return ((origin + 2) << self._shift) | (self._offsets[rule] + dot)

    def unpack(self, item: int) -> tuple[int, int, int]:
        """``(rule, dot, origin)`` of an item (see `item`)."""
        p = item & self._pmask
        r = self._rule_at[p]
        return r, p - self._offsets[r], (item >> self._shift) - 2

    def _symbol_name(self, sym: int) -> str:
        t = self.tables
        return str(t.terminal_names[sym] if sym < t.num_terminals else t.nonterminal_names[sym - t.num_terminals])

    def terminal_id(self, name: str) -> int:
        return self.tables.terminal_names.index(name)

    def node(self, node_id: int) -> ParserNode:
        """Node ``node_id`` (a view of it, made for each call)."""
        lists = self._item_lists
        return ParserNode(node_id, self._node_kernel[node_id],
                          {k: lists[i] for k, i in self._node_pending[node_id].items()},
                          self._node_terminals[node_id], bool(self._node_accepting[node_id]),
                          bool(self._node_abstract[node_id]), self._node_depth[node_id])

    def terminals(self, node_id: int) -> tuple[int, ...]:
        """The terminals node ``node_id`` expects, sorted."""
        return self._node_terminals[node_id]

    def accepting(self, node_id: int) -> bool:
        """Whether input may end at node ``node_id``."""
        return bool(self._node_accepting[node_id])

    def stack_depth(self, node_id: int) -> tuple[bool, int]:
        """``(abstract, depth)`` of node ``node_id`` (see `ParserNode`)."""
        return bool(self._node_abstract[node_id]), self._node_depth[node_id]

    @property
    def num_nodes(self) -> int:
        return len(self._node_kernel)

    def _waiting(self, node_id: int, symbol: int) -> tuple[int, ...]:
        """The items of node ``node_id`` whose dot is before ``symbol`` (``()`` if none)."""
        at = self._node_pending[node_id].get(symbol)
        return self._item_lists[at] if at is not None else ()

    def _advanced(self, item: int, origin: int) -> int:
        """``item`` with the dot advanced and origin `SELF` replaced by ``origin``."""
        return item + 1 + ((origin + 1) << self._shift) if item >> self._shift == 1 else item + 1

    def _advanced_into(self, items, origin: int) -> list[int]:
        """`_advanced` of each of ``items`` (one comprehension: no call per item)."""
        shift = self._shift
        lo, hi, bump = 1 << shift, 2 << shift, (origin + 1) << shift
        return [i + 1 + bump if lo <= i < hi else i + 1 for i in items]

    def scan(self, node_id: int, terminal: int) -> int:
        """The node after ``terminal`` is read at ``node_id``; -1 if not expected.

        Raises `NeedsContext` when ``node_id`` is abstract and the scan completes
        an item whose origin was cut.
        """
        key = node_id * self._nsym + terminal
        hit = self._scan_memo.get(key)
        if hit is not None:
            if hit == CUT:
                raise NeedsContext
            return hit
        items = self._waiting(node_id, terminal) if terminal < self._nterm else None
        if not items:
            result = -1
        else:
            if len(items) == 1:             # (most scans: one item waits for the terminal)
                kernel = (self._advanced(items[0], node_id),)
            else:
                kernel = _kernel(self._advanced_into(items, node_id))
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
        if node_id == self.root or self._node_abstract[node_id] or depth <= 0:
            return node_id
        key = (node_id, depth)
        hit = self._abstract_memo.get(key)
        if hit is None:
            shift, pmask = self._shift, self._pmask
            items = []
            for i in self._node_kernel[node_id]:
                field = i >> shift
                if field >= 2:      # a real origin: cut below, or abstracted one level less
                    o = self.abstract(field - 2, depth - 1) if depth > 1 else CUT
                    i = ((o + 2) << shift) | (i & pmask)
                items.append(i)
            kernel = _kernel(items)
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
        key = _kernel(node_ids)
        if len(key) == 1:
            return key[0]
        hit = self._union_memo.get(key)
        if hit is not None:
            return hit
        if self.root in key:
            raise ValueError("the root node's predictions are relative to itself; it cannot be merged")
        if any(self._node_abstract[n] for n in key):
            raise ValueError("abstract nodes are for memo sharing only; they cannot be merged")
        kernel = _kernel(chain.from_iterable(self._node_kernel[n] for n in key))
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
            node_id = len(self._node_kernel)
            kernel, pending, terminals, accepting, abstract, depth, items = self._close(node_id, kernel_items)
            # Two sets with the same items (predicted ones with origin SELF) and flags
            # are interchangeable: scans, completions into them and acceptance all read
            # only those.  So a kernel whose closure equals an earlier set's maps to that
            # set, e.g. the ends of every member's value in an object, and every memo
            # keyed by the node (masks, crossing walks) is shared.  The root is excluded:
            # completing the start symbol accepts only with the root as origin.
            # (sorted int tuples, not frozensets: the cyclic GC stops tracking them)
            if items is None:
                items = _all_items(self._item_lists, pending)
            future = (accepting, abstract, *items)
            same = self._by_future.get(future) if node_id else None
            if same is not None:
                self._by_kernel[key] = same
                return same
            self._node_kernel.append(kernel)
            self._node_pending.append(pending)
            self._node_terminals.append(terminals)
            self._node_accepting.append(accepting)
            self._node_abstract.append(abstract)
            self._node_depth.append(depth)
            self._by_kernel[key] = node_id
            if node_id:
                self._by_future[future] = node_id
            return node_id

    def _predicted(self, x: int) -> tuple[tuple[int, ...], tuple]:
        """What predicting nonterminal ``x`` adds to any node, computed once per grammar.

        Returns ``(reach, own)``: the nonterminals the prediction reaches (``x`` first,
        through left corners and nullable advances) and, per nonterminal ``y``,
        ``own[y] = (pending, nonterminals, completes_start)``: the contributions of the
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
                pending: dict[int, list] = {}
                completes = False
                for r in t.rules_by_lhs.get(y, ()):
                    rhs = t.rule_rhs[r]
                    for d in range(len(rhs) + 1):
                        if d == len(rhs):
                            completes = y == t.start
                            break
                        z = rhs[d]
                        if z < nt_base:
                            pending.setdefault(z, []).append(self.item(r, d, SELF))
                            break
                        pending.setdefault(z, []).append(self.item(r, d, SELF))
                        if z not in t.nullable:
                            break
                self._own[y] = (self._union(pending, []),
                                tuple(k for k in pending if k >= nt_base), completes)
            for z in self._own[y][1]:
                if z not in seen:
                    seen.add(z)
                    reach.append(z)
        hit = self._prediction_memo[x] = tuple(reach)
        return hit

    def _close(self, node_id: int, kernel_items) -> tuple:
        """Node ``node_id``'s fields (as `ParserNode` takes them): the closure of ``kernel_items``,
        and all its items, sorted, where known without a walk of them (else None)."""
        kernel = kernel_items if isinstance(kernel_items, tuple) else _kernel(kernel_items)
        if len(kernel) == 1 and node_id:
            fields = self._close_single(kernel[0])
            if fields is not None:
                return (kernel, *fields)
        pending, parts, accepting, origins = self._closure(node_id, kernel_items)
        abstracts, depths = self._node_abstract, self._node_depth
        abstract = any(f == 0 or (f >= 2 and abstracts[f - 2]) for f in origins)
        depth = 1 + max((depths[f - 2] for f in origins if f >= 2), default=0) if node_id else 0
        merged = self._union(pending, parts)
        return kernel, merged, self._terminals_of(merged), accepting, abstract, depth, None

    def _terminals_of(self, pending: Pending) -> tuple[int, ...]:
        """The terminals ``pending`` waits for, sorted."""
        nterm = self._nterm
        return tuple(sorted(k for k in pending if k < nterm))

    def _close_single(self, item: int) -> tuple | None:
        """`_close`'s fields but the kernel (its items included) for a kernel of one
        ``item`` with a real origin (not the root's): most new nodes (a lexeme read before
        the next one, a value about to be predicted, one completed).  Their closure is one
        of three shapes, each built directly instead of through the general agenda: the
        item alone (its dot before a terminal); the item and the predictions of its
        nonterminal, merged once per nonterminal; or what completing its rule adds
        (`_completion`) and the predictions that brings, merged once per completion.  None
        for an item the general closure handles (a cut or `SELF` origin, a nullable
        nonterminal next)."""
        shift = self._shift
        field = item >> shift
        if field < 2:
            return None
        origin = field - 2
        abstract = bool(self._node_abstract[origin])
        depth = 1 + self._node_depth[origin]
        p = item & self._pmask
        x = self._sym_at[p]
        lists = self._item_lists
        if 0 <= x < self._nterm:                    # a terminal next: the item alone
            lists.append((item,))
            return {x: len(lists) - 1}, (x,), False, abstract, depth, (item,)
        if x >= 0:                                  # a nonterminal next
            if x in self.tables.nullable:
                return None
            merged = self._predictions_merged(x)
            terminals = self._prediction_terminals[x]
            pending = dict(merged)
            at = merged.get(x)                      # (left recursion: x predicts itself)
            lists.append((item,) if at is None else (item, *lists[at]))
            pending[x] = len(lists) - 1
            # predicted items have origin SELF (field 1): all below ``item``
            return pending, terminals, False, abstract, depth, (*self._prediction_items[x], item)
        lhs = self._lhs_at[p]                       # the end of a rule: complete it into the origin
        key = origin * self._nsym + lhs
        pending = self._completion_closed.get(key)
        if pending is None:
            c_predicts, _, _ = self._completion(origin, lhs, 1)
            c_pending = self._completion_pending[key]
            parts = [c_pending] if c_pending else []
            self._add_predictions(c_predicts, parts)
            pending = self._completion_closed[key] = self._union({}, parts)
            self._completion_closed_terminals[key] = self._terminals_of(pending)
            self._completion_closed_items[key] = _all_items(self._item_lists, pending)
        # (whether the start symbol completes at the root: the completion's memo says)
        accepting = bool(self._completion_memo[key][0]) or (lhs == self.tables.start and origin == 0)
        return (pending, self._completion_closed_terminals[key], accepting, abstract, depth,
                self._completion_closed_items[key])

    def _predictions_merged(self, x: int) -> Pending:
        """The items predicting nonterminal ``x`` adds to a node (`_predicted`), as one
        `Pending` (memoised per nonterminal, with its terminals, sorted, in
        ``_prediction_terminals``)."""
        hit = self._prediction_merged.get(x)
        if hit is None:
            hit = self._prediction_merged[x] = self._union({}, [self._own[y][0] for y in self._predicted(x)])
            self._prediction_terminals[x] = self._terminals_of(hit)
            self._prediction_items[x] = _all_items(self._item_lists, hit)
        return hit

    def _closure(self, node_id: int, kernel_items) -> tuple[dict[int, list], list[Pending], bool, set[int]]:
        """The closure of a kernel (of node ``node_id``, or -1 for one not interned):
        ``(pending, parts, accepting, origins)``: the items found here by the symbol after
        their dot (lists), the memoised dicts to union with them (completions borrowed,
        predictions merged per nonterminal), whether the start symbol completes at the
        root, and the kernel's origin fields (CUT 0, SELF 1, node + 2)."""
        shift = self._shift
        pending: dict[int, list] = {}
        parts: list[dict] = []
        predicts: set[int] = set()
        agenda = []
        origins: set[int] = set()       # origin fields of the kernel (CUT 0, SELF 1, node + 2)
        for item in kernel_items:
            field = item >> shift
            origins.add(field)
            if field == 1:     # SELF: the root's kernel, its start rules predicted in place
                predicts.add(self._lhs_at[item & self._pmask])
            else:
                agenda.append(item)
        accepting, _ = self._advance_items(agenda, pending, parts, predicts, frozenset(), set(), 0)
        # predicted items (origin SELF) are merged per nonterminal, not derived item by item
        if self._add_predictions(predicts, parts) and node_id == 0:
            accepting = True
        return pending, parts, accepting, origins

    def _add_predictions(self, predicts, parts: list[Pending]) -> bool:
        """Append to ``parts`` the items predicting each of ``predicts`` adds (`_predicted`:
        each reached nonterminal's once); whether one of them completes the start symbol
        (which accepts at the root)."""
        completes_start = False
        predicted: set[int] = set()
        for x in predicts:
            for y in self._predicted(x):
                if y not in predicted:
                    predicted.add(y)
                    own_pending, _, completes = self._own[y]
                    parts.append(own_pending)
                    completes_start |= completes
        return completes_start

    def _advance_items(self, agenda: list, pending: dict, parts: list, predicts: set, computing: frozenset,
                       inline_done: set, depth: int) -> tuple[bool, tuple]:
        """Close ``agenda`` (items with real or cut origins) into ``pending``
        (items found here, in lists, by the symbol after the dot) and ``parts`` (memoised dicts to be
        unioned with them, borrowed: never modified), collecting the nonterminals to
        predict; True if the start symbol completes at the root.  Completing ``lhs``
        back into an origin ``o`` borrows the memoised `_completion` of ``(o, lhs)``,
        the same for every set that completes it (e.g. the ends of all members of an
        object advance the same list items), except for a completion in ``computing``
        (those being computed further up: a cycle of unit or nullable rules) and past
        `MAX_COMPLETION_DEPTH` nested completions (right recursion), done in place.

        A completion into the same origin is memoised too, not done in place: a chain
        ``r_i: r_{i+1} "x"?`` completes ``r_{n-1}, ..., r_0`` into one origin, and a set
        whose kernel completes every ``r_i`` then borrows ``r_{i-1}``'s completion from
        ``r_i``'s instead of redoing the rest of the chain once per ``i`` (quadratic).
        A memoised completion holds everything of the completions it borrowed (its
        fourth field names them), so of the completions borrowed here only those no
        other one borrowed are unioned: the chain's set takes ``r_{n-1}``'s alone
        instead of n overlapping parts (quadratic per set, cubic over ``endxx...x``).
        Returns (whether the start symbol completes at the root, the borrowed keys)."""
        t = self.tables
        nt_base, nullable, start, nsym = t.num_terminals, t.nullable, t.start, self._nsym
        shift, pmask, sym_at, lhs_at = self._shift, self._pmask, self._sym_at, self._lhs_at
        accepting = False
        seen: set = set()
        merged: set = set()
        borrowed: list = []             # (key, memoised completion) in the order met
        while agenda:
            item = agenda.pop()
            if item in seen:
                continue
            seen.add(item)
            if not len(seen) % DEADLINE_EVERY and passed():
                raise timeout_error(what=f"closing a parser set ({len(seen)} Earley items so far)")
            p = item & pmask
            x = sym_at[p]
            if x < 0:                   # complete: back into the origin
                field = item >> shift
                if field == 0:
                    raise NeedsContext
                o = field - 2
                lhs = lhs_at[p]
                if lhs == start and o == 0:
                    accepting = True
                key = o * nsym + lhs
                if key in inline_done:
                    continue
                if key in computing or depth >= MAX_COMPLETION_DEPTH:
                    inline_done.add(key)
                    agenda.extend(self._advanced_into(self._waiting(o, lhs), o))
                elif key not in merged:
                    merged.add(key)
                    borrowed.append((key, self._completion(o, lhs, depth + 1, computing)))
                continue
            pending.setdefault(x, []).append(item)
            if x < nt_base:
                continue
            predicts.add(x)
            if x in nullable:
                agenda.append(item + 1)
        # a completion that another borrowed one borrowed itself is part of that one: skip it
        covered = set(chain.from_iterable(c[2] for _, c in borrowed)) if len(borrowed) > 1 else ()
        completion_pending = self._completion_pending
        for key, (c_predicts, c_accepting, _) in borrowed:
            if key in covered:
                continue
            c_pending = completion_pending[key]
            if c_pending:
                parts.append(c_pending)
            predicts.update(c_predicts)
            accepting |= c_accepting
        return accepting, tuple(key for key, _ in borrowed)

    def _union(self, own: dict[int, list], parts: list[Pending]) -> Pending:
        """``own`` (item lists built here) and ``parts`` (memoised `Pending` dicts, read
        only) as one `Pending`, each item once.  A single part is returned itself, not
        copied: node and memo dicts are never modified once built.

        Parts overlap (nested completions of a chain of rules each hold the rest of the
        chain): an item list is joined once from all its contributions and deduplicated,
        not grown part by part (quadratic in the parts, and the duplicates would be
        advanced again by every scan)."""
        if not own:
            if not parts:
                return {}
            if len(parts) == 1:
                return parts[0]
        lists = self._item_lists
        base = len(lists)
        if not parts:
            lists.extend(map(tuple, own.values()))
            return dict(zip(own, range(base, len(lists))))
        groups: dict[int, list] = {k: [v] for k, v in own.items()}   # a list built here, or an index
        for part in parts:
            for k, i in part.items():
                group = groups.get(k)
                if group is None:
                    groups[k] = [i]
                else:
                    group.append(i)
        out: Pending = {}
        made: list[tuple[int, ...]] = []
        for k, g in groups.items():
            if len(g) == 1 and type(g[0]) is int:
                out[k] = g[0]
                continue
            out[k] = base + len(made)
            made.append(tuple(g[0]) if len(g) == 1 else tuple(dict.fromkeys(chain.from_iterable(
                lists[x] if type(x) is int else x for x in g))))
        lists.extend(made)
        return out

    def _completion(self, origin: int, lhs: int, depth: int,
                    computing: frozenset = frozenset()) -> tuple[tuple, bool, tuple]:
        """What completing ``lhs`` with origin ``origin`` adds to a set: the closure of the
        items of ``origin`` waiting for ``lhs``, advanced (memoised: sets are immutable).
        ``computing``: the completions being computed further up (done in place here).
        The result is the whole closure whatever ``computing`` holds: a completion done
        in place is derived again here, not left to the caller.  Returns ``(predicted
        nonterminals, whether the start symbol completes at the root, the keys of the
        completions it borrowed)``; its items, by the symbol after their dot, are kept in
        ``_completion_pending[key]``."""
        key = origin * self._nsym + lhs
        hit = self._completion_memo.get(key)
        if hit is not None:
            n = hit[1]
            return hit[2:n + 2], bool(hit[0]), hit[n + 2:]
        if passed():            # many small completions (a chain of rules) add up too
            raise timeout_error(what=f"completing {self._symbol_name(lhs)!r} into parser node {origin}")
        waiting = self._waiting(origin, lhs)
        if len(waiting) == 1:
            done = self._completion_single(key, waiting[0], origin, depth, computing)
            if done is not None:
                return done
        pending: dict[int, list] = {}
        parts: list[dict] = []
        predicts: set[int] = set()
        agenda = self._advanced_into(waiting, origin)
        accepting, children = self._advance_items(agenda, pending, parts, predicts, computing | {key}, {key}, depth)
        self._completion_pending[key] = self._union(pending, parts)
        self._completion_memo[key] = (int(accepting), len(predicts), *predicts, *children)
        return tuple(predicts), accepting, children

    def _completion_single(self, key: int, item: int, origin: int, depth: int,
                           computing: frozenset) -> tuple[tuple, bool, tuple] | None:
        """`_completion` of ``key`` where one ``item`` of ``origin`` waits for the completed
        symbol (most completions), built directly: the advanced item alone, waiting for a
        terminal or a nonterminal to predict, or the completion it makes in turn, borrowed
        whole.  None where the general agenda is needed (a nullable nonterminal next, a
        completion being computed further up or past `MAX_COMPLETION_DEPTH`)."""
        item = self._advanced(item, origin)
        p = item & self._pmask
        x = self._sym_at[p]
        if x >= 0:
            predicts: tuple[int, ...] = ()
            if x >= self._nterm:
                if x in self.tables.nullable:
                    return None
                predicts = (x,)
            lists = self._item_lists
            lists.append((item,))
            self._completion_pending[key] = {x: len(lists) - 1}
            self._completion_memo[key] = (0, len(predicts), *predicts)
            return predicts, False, ()
        field = item >> self._shift
        if field == 0:
            raise NeedsContext
        inner_origin, inner_lhs = field - 2, self._lhs_at[p]
        inner = inner_origin * self._nsym + inner_lhs
        if inner == key or inner in computing or depth >= MAX_COMPLETION_DEPTH:
            return None
        c_predicts, c_accepting, _ = self._completion(inner_origin, inner_lhs, depth + 1, computing | {key})
        accepting = c_accepting or (inner_lhs == self.tables.start and inner_origin == 0)
        self._completion_pending[key] = self._completion_pending[inner] or {}
        self._completion_memo[key] = (int(accepting), len(c_predicts), *c_predicts, inner)
        return tuple(c_predicts), accepting, (inner,)


def _all_items(lists: list[tuple[int, ...]], pending: Pending) -> tuple[int, ...]:
    """Every item of ``pending`` once, sorted."""
    return tuple(sorted(set(chain.from_iterable(map(lists.__getitem__, pending.values())))))


def _kernel(items) -> tuple[int, ...]:
    """A set of items (or node ids) in its canonical form, a sorted tuple: a dict key
    and node field that the cyclic garbage collector stops tracking after one pass (a
    frozenset stays tracked, and tens of thousands of kernels made every full collection
    walk them all)."""
    return tuple(sorted(set(items)))
