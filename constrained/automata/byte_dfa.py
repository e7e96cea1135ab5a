"""Regex -> minimal, trimmed DFA over UTF-8 bytes.

Pipeline: `parse_regex` (Python's own parser) -> Thompson NFA whose character
edges are expanded to UTF-8 byte-range paths -> subset construction over bytes ->
trim (every state can still reach acceptance) -> Moore minimisation -> states
renumbered breadth-first so equal languages give equal tables.

Limits make compilation bounded on hostile input: the NFA size is estimated
before anything is built (``x{100000}{100000}`` fails at once) and the subset
construction stops at ``max_states``; both raise `CompileLimitError`.

`compile_terminal` adds intersection and difference (a grammar terminal's
``also``/``excluding`` regexes): the product of the component DFAs over their
reachable state tuples, stepped once per joint byte class (bytes every
component treats alike), then trimmed, minimised and renumbered like any other
DFA, so equal languages still give equal tables and digests.

Example:
    >>> dfa = compile_regex(r"[0-9]+")
    >>> dfa.matches(b"123"), dfa.matches(b"12a"), dfa.matches(b"")
    (True, False, False)
    >>> word = compile_terminal(r"[a-z]+", also=(r".{2,3}",), excluding=(r"if|for",))
    >>> [word.matches(w) for w in (b"x", b"in", b"if", b"for", b"four")]
    [False, True, False, False, False]
"""

from __future__ import annotations

import functools
import hashlib
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Literal

import numpy as np

from constrained.automata.regex_parser import (
    finite_items,
    literal_alternatives,
    parse_regex,
    size_estimate,
    split_items,
)
from constrained.automata.utf8 import utf8_sequences
from constrained.deadline import check_deadline
from constrained.errors import CompileLimitError, RegexError

DEAD = 0
START = 1
DEFAULT_MAX_STATES = 20_000
DEFAULT_MAX_NFA_STATES = 400_000
# NFA states summed over the subset construction's sets (epsilon closures and DFA states):
# each costs ~10-20 bytes in a frozenset, so this bounds its memory (~100-200 MB) where a
# few states are each a huge set (nested bounded repetitions: (?:(?:x?){0,127}){0,127})
MAX_SUBSET_ELEMENTS = 8_000_000
_INT_KEY_SPAN = 2 ** 62  # product tuples are keyed by a mixed-radix int64 below this many tuples


@dataclass(frozen=True, eq=False)
class ByteDFA:
    """A deterministic automaton over bytes; state 0 is the absorbing dead state.

    ``transitions[q, b]`` is the next state (int32, or uint8 where every state number
    fits in a byte: see `state_dtype`); ``accepting[q]`` says whether
    the bytes read so far form a match.  Every non-dead state can reach an
    accepting state (the DFA is trimmed), so "not dead" means "viable prefix".

    ``regex``, ``also`` and ``excluding`` record what it was compiled from (see
    `compile_terminal`); ``digest`` keys the token tables: it hashes the (minimal,
    canonically numbered) tables, so it depends on the language only, except for the
    automata built from their text (key literals, JSON words markers), whose digest
    is their text's (one table per text).
    ``embeds``, where set, is ``(other, lo, hi)``: states ``lo..hi-1`` are ``other``'s
    states of the same numbers (the same rows, leading only among themselves), so
    they have ``other``'s residual languages and token tables (a key that is none of
    the declared names falls off into the JSON string automaton's states).
    """

    transitions: np.ndarray
    accepting: np.ndarray
    regex: str = ""
    digest: str = field(default="")
    also: tuple[str, ...] = ()
    excluding: tuple[str, ...] = ()
    embeds: tuple[ByteDFA, int, int] | None = None

    @property
    def start(self) -> int:
        return START

    @property
    def num_states(self) -> int:
        return int(self.transitions.shape[0])

    def step(self, state: int, byte: int) -> int:
        """The state after reading ``byte`` in ``state`` (0 when dead)."""
        return int(self.transitions[state, byte])

    def run(self, data: bytes, state: int = START) -> int:
        """The state after reading ``data`` from ``state``."""
        t = self.transitions
        for b in data:
            state = t[state, b]
            if state == DEAD:
                return DEAD
        return int(state)

    def matches(self, data: bytes) -> bool:
        """Whether ``data`` is in the language (full match)."""
        return bool(self.accepting[self.run(data)])

    def is_prefix(self, data: bytes) -> bool:
        """Whether ``data`` can be extended to a match."""
        return self.run(data) != DEAD

    def matches_empty(self) -> bool:
        return bool(self.accepting[START])


@functools.lru_cache(maxsize=8192)
def _utf8_trie(ranges: tuple[tuple[int, int], ...]) -> tuple[tuple[tuple[int, int, int, int], ...], int]:
    """The UTF-8 byte-range paths of a code point set, shared as a trie, as `_NFABuilder`
    lays them out: ``(steps, count)``, steps ``(parent, lo, hi, child)`` where trie node 0
    is the path's start, nodes 1 to ``count`` are numbered as created, and child -1 is
    the end.  Cached per set: the same character classes recur in every JSON string regex."""
    steps: list[tuple[int, int, int, int]] = []
    trie: dict[tuple[int, int, int], int] = {}
    for lo, hi in ranges:
        for seq in utf8_sequences(lo, hi):
            cur = 0
            last = len(seq) - 1
            for i, (blo, bhi) in enumerate(seq):
                if i == last:
                    steps.append((cur, blo, bhi, -1))
                else:
                    key = (cur, blo, bhi)
                    nxt = trie.get(key)
                    if nxt is None:
                        nxt = trie[key] = len(trie) + 1
                        steps.append((cur, blo, bhi, nxt))
                    cur = nxt
    return tuple(steps), len(trie)


class _NFABuilder:
    """Thompson's construction with UTF-8 byte-range edges ``(lo, hi, target)``.

    ``dead_end`` is set when a character set is empty (``[^\\s\\S]``, a lone surrogate):
    only then can a state fail to reach the final one, so only then does the subset
    automaton need trimming (every other construct links its start to its end)."""

    def __init__(self, limit: int, regex: str, terminal: str | None) -> None:
        self.eps: list[list[int]] = []
        self.edges: list[list[tuple[int, int, int]]] = []
        self.limit = limit
        self.regex = regex
        self.terminal = terminal
        self.dead_end = False
        self.mixed: set[int] = set()  # states with the edges of several character sets

    def new(self) -> int:
        if len(self.eps) >= self.limit:
            raise CompileLimitError("regex automaton too large", limit="max_nfa_states",
                                    value=self.limit, terminal=self.terminal)
        self.eps.append([])
        self.edges.append([])
        return len(self.eps) - 1

    def build(self, node, s: int, e: int) -> None:
        kind = node[0]
        if kind == "chars":
            steps, count = _utf8_trie(node[1])
            if not steps:
                self.dead_end = True
                return
            edges = self.edges
            if edges[s]:
                self.mixed.add(s)
            if not count:  # one byte per character (ASCII): straight to the end
                out = edges[s]
                for _, lo, hi, _ in steps:
                    out.append((lo, hi, e))
                return
            base = len(self.eps) - 1   # trie node j > 0 is state base + j
            if base + 1 + count > self.limit:
                raise CompileLimitError("regex automaton too large", limit="max_nfa_states",
                                        value=self.limit, terminal=self.terminal)
            self.eps.extend([] for _ in range(count))
            edges.extend([] for _ in range(count))
            for parent, lo, hi, child in steps:
                edges[base + parent if parent else s].append((lo, hi, base + child if child > 0 else e))
        elif kind == "seq":
            parts = node[1]
            if not parts:
                self.eps[s].append(e)
                return
            cur = s
            last = len(parts) - 1
            for i, part in enumerate(parts):
                nxt = e if i == last else self.new()
                self.build(part, cur, nxt)
                cur = nxt
        elif kind == "alt":
            for part in node[1]:
                self.build(part, s, e)
        else:
            _, sub, lo, hi = node
            cur = s
            for _ in range(lo):
                nxt = self.new()
                self.build(sub, cur, nxt)
                cur = nxt
            if hi is None:
                loop = self.new()
                self.eps[cur].append(loop)
                body_end = self.new()
                self.build(sub, loop, body_end)
                self.eps[body_end].append(loop)
                self.eps[loop].append(e)
            else:
                self.eps[cur].append(e)
                for _ in range(hi - lo):
                    nxt = self.new()
                    self.build(sub, cur, nxt)
                    self.eps[nxt].append(e)
                    cur = nxt


def _closure(eps: list[list[int]], states) -> frozenset[int]:
    seen = set(states)
    stack = list(states)
    pops = 0
    while stack:
        pops += 1
        if not pops & 0xFFF:             # a closure of a huge NFA can take long: honour the deadline
            check_deadline()
        s = stack.pop()
        for t in eps[s]:
            if t not in seen:
                seen.add(t)
                stack.append(t)
    return frozenset(seen)


# One NFA state's edges over byte classes, ``(first class, end class, target)``, or
# False when they overlap (the row is then built byte class by byte class).
_Span = list[tuple[int, int, int]] | Literal[False]


def _determinize(nfa: _NFABuilder, start: int, final: int,
                 max_states: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Subset construction over byte classes: ``(table, accepting, byte_class)`` where
    ``table[q, byte_class[b]]`` is the successor of DFA state ``q`` on byte ``b``.

    The classes are the intervals between the NFA's edge bounds (in byte order), so all
    bytes of a class move every NFA state alike.  DFA states are the epsilon closures
    reached (the same sets, so the same ``max_states`` limit, as byte by byte); most
    are one NFA state, whose row is read off its edges (over classes, computed once);
    closures are unions of per-state closures computed once."""
    eps, edges = nfa.eps, nfa.edges
    bounds = {0, 256}
    for out in edges:
        for lo, hi, _ in out:
            bounds.add(lo)
            bounds.add(hi + 1)
    points = sorted(bounds)
    k = len(points) - 1
    class_at = {p: c for c, p in enumerate(points)}
    byte_class = np.repeat(np.arange(k, dtype=np.intp), np.diff(points))
    with_edges = frozenset(s for s, out in enumerate(edges) if out)
    overlapping = nfa.mixed                       # states whose edges may overlap
    closures: dict[int, frozenset[int]] = {}
    spans: dict[int, _Span] = {}  # NFA state -> its edges over classes
    start_set = _closure(eps, (start,))
    ids: dict[frozenset[int], int] = {frozenset(): DEAD, start_set: START}
    order = [frozenset(), start_set]
    dead_row = array("i", bytes(4 * k))
    rows: list[array] = [dead_row]
    union = frozenset().union
    get_closure, get_id, get_span = closures.get, ids.get, spans.get

    def closure(t: int) -> frozenset[int]:
        c = closures[t] = _closure(eps, (t,)) if eps[t] else frozenset((t,))
        hold(len(c))
        return c

    held = [0]      # NFA states held by closures and subsets so far (what the memory grows with)

    def hold(n: int) -> None:
        held[0] += n
        if held[0] > MAX_SUBSET_ELEMENTS:
            raise CompileLimitError("regex automaton too large (its states are large sets of NFA states)",
                                    limit="max_subset_elements", value=MAX_SUBSET_ELEMENTS, terminal=nfa.terminal)

    def state_id(tset: frozenset[int]) -> int:
        check_deadline(terminal=nfa.terminal)
        if len(order) >= max_states:
            raise CompileLimitError("regex needs too many automaton states",
                                    limit="max_dfa_states", value=max_states, terminal=nfa.terminal)
        hold(len(tset))
        tid = ids[tset] = len(order)
        order.append(tset)
        return tid

    def span_of(s: int) -> _Span:
        """``s``'s edges as ``(first class, end class, target)``, False if they overlap."""
        span = [(class_at[lo], class_at[hi + 1], t) for lo, hi, t in edges[s]]
        if s in overlapping:
            span.sort()
            if any(x[1] > y[0] for x, y in pairwise(span)):
                spans[s] = False
                return False
        spans[s] = span
        return span

    for cur in order:  # grows while it is read
        if len(cur) == 1:  # most subsets: one NFA state
            active = cur
            (s,) = cur
            span = get_span(s)
            if span is None:
                span = span_of(s)
        elif not cur:
            continue
        else:
            active = cur & with_edges
            if len(active) == 1:
                (s,) = active
                span = get_span(s)
                if span is None:
                    span = span_of(s)
            else:
                span = False if active else []
        if span:  # one member with edges, which do not overlap: a target per edge
            row = array("i", dead_row)
            for c0, c1, t in span:
                tset = get_closure(t) or closure(t)
                tid = get_id(tset) or state_id(tset)  # (only the empty set has id 0)
                if c1 - c0 == 1:
                    row[c0] = tid
                else:
                    row[c0:c1] = array("i", (tid,)) * (c1 - c0)
        elif span is not False:  # no edges
            row = dead_row
        else:
            row = array("i", dead_row)
            targets: dict[int, list[int]] = {}
            for s in active:
                for lo, hi, t in edges[s]:
                    for c in range(class_at[lo], class_at[hi + 1]):
                        got = targets.get(c)
                        if got is None:
                            targets[c] = [t]
                        else:
                            got.append(t)
            memo: dict[tuple[int, ...], int] = {}
            for c, ts in targets.items():
                key = tuple(ts)
                target = memo.get(key)
                if target is None:
                    if len(ts) == 1:
                        tset = get_closure(ts[0]) or closure(ts[0])
                    else:
                        tset = union(*[get_closure(t) or closure(t) for t in ts])
                    target = memo[key] = get_id(tset) or state_id(tset)
                row[c] = target
        rows.append(row)
    table = np.frombuffer(b"".join(rows), dtype=np.int32).reshape(len(rows), k)
    accepting = np.array([final in s for s in order], dtype=bool)
    return table, accepting, byte_class


def _trim(table: np.ndarray, accepting: np.ndarray) -> np.ndarray:
    """Redirect states that cannot reach acceptance to the dead state (any columns:
    bytes or byte classes): one backward search from the accepting states."""
    n, k = table.shape
    flat = table.reshape(-1)
    edge = np.flatnonzero(flat)                     # edges into the dead state lead nowhere
    dst = flat[edge]
    by_dst = np.argsort(dst, kind="stable")
    sources = (edge[by_dst] // k).tolist()
    starts = np.searchsorted(dst[by_dst], np.arange(n + 1)).tolist()
    live = accepting.tolist()
    live[DEAD] = False
    stack = [q for q in range(n) if live[q]]
    while stack:
        q = stack.pop()
        for p in sources[starts[q]:starts[q + 1]]:
            if not live[p]:
                live[p] = True
                stack.append(p)
    live_arr = np.array(live, dtype=bool)
    if live_arr[1:].all():
        return table
    out = table.copy()
    out[~live_arr[table]] = DEAD
    out[~live_arr] = DEAD
    return out


_REFINE_WEIGHTS = np.random.default_rng(0x5EED).integers(1, 2 ** 63, size=257, dtype=np.uint64)
_MIX, _SHIFT = np.uint64(0xBF58476D1CE4E5B9), np.uint64(30)  # from splitmix64


def _dense_ids(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(keys, return_index=True, return_inverse=True)[::-1]``, cheaper: dense ids
    of 1-D keys in sorted key order, and one position holding each id."""
    order = np.argsort(keys)
    ordered = keys[order]
    step = np.empty(len(keys), np.int64)
    step[0] = 1
    np.not_equal(ordered[1:], ordered[:-1], out=step[1:])
    starts = np.flatnonzero(step)
    ids = np.empty(len(keys), np.int64)
    ids[order] = np.cumsum(step) - 1
    return ids, order[starts]


def _distinct(keys: np.ndarray) -> int:
    ordered = np.sort(keys)
    return 1 + int(np.count_nonzero(ordered[1:] != ordered[:-1]))


def _refine(initial: np.ndarray, reduced: np.ndarray) -> np.ndarray:
    """Moore refinement of the partition ``initial`` (class 0 = just the dead state)
    to the coarsest one stable under ``reduced``'s transitions: dense class ids.

    Rounds label each state by a 64-bit hash of its signature (its label and its
    successors' labels) until the number of labels stops growing; the result is
    then checked exactly (a stable partition refining ``initial`` is the coarsest
    one, as hashing never splits states with equal signatures), and recomputed with
    exact signatures in the astronomically rare case a collision made it unstable.
    """
    n, k = reduced.shape
    weights = _REFINE_WEIGHTS[:k + 1] if k < 256 else np.random.default_rng(0x5EED).integers(
        1, 2 ** 63, size=k + 1, dtype=np.uint64)
    initial = np.ascontiguousarray(initial, dtype=np.int64)

    def stable(cls: np.ndarray, rep: np.ndarray) -> bool:
        of = rep[cls]
        successors = cls[reduced]
        return bool((initial == initial[of]).all() and (successors == successors[of]).all()
                    and np.count_nonzero(cls == cls[DEAD]) == 1)

    # a state's signature: its own label (column 0) and its successors'
    own_and_successors = np.empty((n, k + 1), np.intp)
    own_and_successors[:, 0] = np.arange(n)
    own_and_successors[:, 1:] = reduced
    labels = initial.view(np.uint64)
    count = _distinct(labels)
    while True:
        h = labels[own_and_successors] @ weights
        h ^= h >> _SHIFT  # mixed, so that labels of labels do not degenerate (a linear
        h *= _MIX         # combination's even weights would shift bits out, round by round)
        h[DEAD] = 0  # the dead state keeps a class of its own (checked below)
        labels = h
        new_count = _distinct(labels)
        if new_count == n:  # equal signatures always get equal labels: no two states are equivalent
            return np.arange(n, dtype=np.int64)
        if new_count == count:
            break
        count = new_count
    cls, rep = _dense_ids(labels)
    if stable(cls, rep):
        return cls
    # exact signatures (rows as opaque byte strings: one 1-D sort, not one per column)
    cls, count = initial, _distinct(initial)
    while True:
        sig = np.ascontiguousarray(np.concatenate([cls[:, None], cls[reduced]], axis=1))
        sig[DEAD, :] = -1
        _, rep, cls = np.unique(sig.view(np.dtype((np.void, sig.shape[1] * sig.itemsize))).reshape(-1),
                                return_index=True, return_inverse=True)
        cls = cls.reshape(-1).astype(np.int64)
        if len(rep) == count:
            break
        count = len(rep)
    if stable(cls, rep):
        return cls
    raise AssertionError("exact partition refinement is always stable")  # pragma: no cover


def _column_classes(table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(reduced, column_class)``: one column per distinct column of ``table`` (the first
    of each, in column order) and, per column, its index in ``reduced``."""
    columns = np.ascontiguousarray(table.T)
    index: dict[bytes, int] = {}
    column_class = [index.setdefault(column.tobytes(), len(index)) for column in columns]
    if len(index) == len(column_class):
        return table, np.arange(len(column_class), dtype=np.intp)
    first = [0] * len(index)
    for c in range(len(column_class) - 1, -1, -1):
        first[column_class[c]] = c
    return np.ascontiguousarray(table[:, first]), np.array(column_class, dtype=np.intp)


def _minimize(table: np.ndarray, accepting: np.ndarray, byte_class: np.ndarray | None = None, *,
              minimal: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Moore partition refinement (`_refine`; skipped when the caller knows the DFA is
    ``minimal`` already), then breadth-first renumbering from START with each state's
    targets in byte order: equal languages, equal tables.

    ``table`` has one column per byte class, ``byte_class[b]`` being byte ``b``'s column,
    where the classes are numbered in the order of their first bytes; without
    ``byte_class``, one column per byte.  The result has one column per byte."""
    # bytes with identical columns stay interchangeable: refine over one column per class
    # (the first of each: the columns keep the order of their first bytes)
    reduced, column_class = _column_classes(table)
    byte_class = column_class if byte_class is None else column_class[byte_class]
    if minimal:
        cls = np.arange(table.shape[0], dtype=np.int64)
    else:
        cls = accepting.astype(np.int64) + 1
        cls[DEAD] = 0
        cls = _refine(cls, reduced)
    # breadth-first numbering of the classes reachable from START, each state's targets in
    # byte order (the reduced columns are in byte order); only the transitions to live
    # states are read, grouped by state
    targets = cls[reduced]
    states, columns = np.nonzero(reduced)
    target_classes = targets[states, columns].tolist()
    target_states = reduced[states, columns].tolist()
    bounds = np.searchsorted(states, np.arange(len(cls) + 1)).tolist()
    new_of = [-1] * (int(cls.max()) + 1)
    new_of[cls[DEAD]] = DEAD
    new_of[cls[START]] = START
    reps = [DEAD, START]
    for s in reps:  # grows while it is read
        for j in range(bounds[s], bounds[s + 1]):
            c = target_classes[j]
            if new_of[c] < 0:
                new_of[c] = len(reps)
                reps.append(target_states[j])
    rep = np.asarray(reps, np.int64)
    new_table = np.ascontiguousarray(np.asarray(new_of, np.int32)[targets[rep]][:, byte_class])
    new_acc = accepting[rep].astype(bool)
    new_acc[DEAD] = False
    return new_table, new_acc


@functools.lru_cache(maxsize=4096)
def compile_regex(regex: str, *, terminal: str | None = None, max_states: int = DEFAULT_MAX_STATES,
                  max_nfa_states: int = DEFAULT_MAX_NFA_STATES) -> ByteDFA:
    """Compile a Python regex into a trimmed, minimal `ByteDFA` (cached per arguments).

    An alternation of literal strings (an enum) is built as a finite automaton directly
    (`_finite_dfa`), with room for ``8 * max_states`` states: no subset construction can
    blow up there, and the result is the same minimal DFA the NFA route would give.
    A substring marker (`constrained.automata.substrings.substrings_regex`, grounded
    values) is built from its text directly, and so are the JSON words markers of
    object keys (`constrained.automata.json_words`)."""
    if regex.startswith("(*substrings:"):
        from constrained.automata.substrings import substrings_dfa

        return substrings_dfa(regex, max_states=max_states, terminal=terminal)
    if regex.startswith("(*json-"):
        from constrained.automata.json_words import marker_dfa

        return marker_dfa(regex, max_states=max_states, terminal=terminal)
    words = _literal_words(regex)
    if words is not None:
        table, accepting = _finite_dfa(words, 8 * max_states, terminal)
        return _finished(regex, table, accepting)
    chain = _chain_dfa(regex, max_states) if 40 * len(regex) <= max_nfa_states else None
    if chain is not None:       # (numbered item after item: identified by its regex, see `_chain_dfa`)
        return _finished(regex, *chain, digest=_text_digest("chain", regex))
    ast = parse_regex(regex, terminal=terminal)
    if size_estimate(ast) > max_nfa_states:
        raise CompileLimitError("regex automaton too large (bounded repetitions)", limit="max_nfa_states",
                                value=max_nfa_states, terminal=terminal)
    nfa = _NFABuilder(max_nfa_states, regex, terminal)
    s, e = nfa.new(), nfa.new()
    nfa.build(ast, s, e)
    table, accepting, byte_class = _determinize(nfa, s, e, max_states)
    if nfa.dead_end:
        table = _trim(table, accepting)
    return _finished(regex, *_minimize(table, accepting, byte_class))


def _finished(regex: str, table: np.ndarray, accepting: np.ndarray, digest: str | None = None,
              embeds: tuple[ByteDFA, int, int] | None = None) -> ByteDFA:
    table.setflags(write=False)
    accepting.setflags(write=False)
    return ByteDFA(transitions=table, accepting=accepting, regex=regex,
                   digest=_table_digest(table, accepting) if digest is None else digest, embeds=embeds)


# The constructions whose automata are identified by their text (`_chain_dfa`, the JSON
# words markers): bump when either numbers its states differently, so that token tables
# cached on disk under the old digests (`TokenTables`, by digest) are not read for the new
# numbering.
TEXT_CONSTRUCTION_VERSION = 1


def _text_digest(kind: str, text: str) -> str:
    """The digest of an automaton identified by the text it is built from (a chain regex,
    a JSON words marker): the same text always gives the same table, and hashing the
    text costs nothing beside hashing the table."""
    h = hashlib.sha256(f"{kind}/{TEXT_CONSTRUCTION_VERSION}/".encode())
    h.update(text.encode("utf-8", "surrogatepass"))
    return f"{kind}-" + h.hexdigest()


def _literal_words(regex: str) -> list[bytes] | None:
    """The UTF-8 strings of a regex that is an alternation of literals (None otherwise, or
    when one of them is not encodable, a lone surrogate: the regex route decides those)."""
    strings = literal_alternatives(regex)
    if strings is None:
        return None
    try:
        return sorted({text.encode("utf-8") for text in strings})
    except UnicodeEncodeError:
        return None


def _chain_dfa(regex: str, max_states: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The minimal DFA of a quantifier-free regex whose items (`finite_items`) are each a
    prefix-free set of byte strings, e.g. a key literal in every JSON escape spelling
    (``"(?:a|\\\\u0061)..."``): None for any other regex (the NFA route builds it).

    Each item is a trie from the state before it whose leaves all go to one state after
    it (prefix-free: no leaf is also an inner node, so this is deterministic), minimised
    on its own and memoised with its edges as arrays (`_item_dag`: one character's
    JSON spellings recur across every key).  The chain of these minimal DAGs is already
    minimal: no state of one item has the right language of a state of another.
    (Revuz: merging goes backwards from the final state; a first merge across items
    would need a common successor class, and the only state two items share is the entry
    of the later one, which no state of that item leads back to.)  The states are
    numbered item after item (dead 0, start 1, the final state last), not in
    `_minimize`'s breadth-first order: the table is the items' edges placed at their
    offsets in one assignment, and the automaton is identified by its regex (`compile_regex`
    gives it the regex's digest), which the compiler writes one way per literal.  The
    tests compare it, minimised, with the NFA route's tables on random keys, state
    counts included.
    Limits as on that route: its subset construction reaches one subset per trie node at
    most (a prefix inside an item determines the NFA states), so a chain whose tries fit
    in ``max_states`` never exceeds it there; a larger one is left to that route, which
    raises the error.  (The caller leaves regexes whose NFA could exceed
    ``max_nfa_states`` to that route too: at most ~6 NFA states per regex character.)"""
    edges = _chain_edges(regex, max_states)
    if edges is None:
        return None
    size, src, col, dst = edges
    table: np.ndarray = np.zeros((size, 256), state_dtype(size))
    table[src, col] = dst
    accepting = np.zeros(size, bool)
    accepting[size - 1] = True
    return table, accepting


def _chain_edges(regex: str, max_states: int) -> tuple[int, np.ndarray, np.ndarray, np.ndarray] | None:
    """`_chain_dfa`'s automaton as ``(states, sources, bytes, targets)``: its edges (the
    dead state 0 and the start 1 counted; the last state the only accepting one), or
    None where `_chain_dfa` is."""
    pieces = split_items(regex)
    if pieces is None:
        return None
    sources: list[np.ndarray] = []
    columns: list[np.ndarray] = []
    targets: list[np.ndarray] = []
    offsets: list[int] = []                # per item: its states' offset (item k's state s is START + offset + s)
    counts: list[int] = []
    placed = 0                             # item states placed so far
    trie_states = 1
    for piece in pieces:
        edges = _item_dag(piece)
        if edges is None:
            return None
        trie_size, size, src, byte, dst = edges
        if not size:                       # the empty string
            continue
        trie_states += trie_size
        if trie_states + 1 > max_states:   # (+ the dead state)
            return None                    # the NFA route decides (and raises the limit error)
        sources.append(src)
        columns.append(byte)
        targets.append(dst)                # (an item's exit is the next item's entry)
        offsets.append(START + placed)
        counts.append(len(src))
        placed += size
    if not sources:
        return placed + 2, _NO_EDGES, _NO_EDGES, _NO_EDGES
    # (offsets added once for all items: a key has one item per character)
    shift = np.repeat(np.asarray(offsets, np.int64), counts)
    return placed + 2, np.concatenate(sources) + shift, np.concatenate(columns), np.concatenate(targets) + shift


def chain_dfas(regexes: Sequence[str], max_states: int = DEFAULT_MAX_STATES,
               max_nfa_states: int = DEFAULT_MAX_NFA_STATES) -> list[ByteDFA | None]:
    """`compile_regex` of each regex that it builds as a chain (`_chain_dfa`: a key literal
    in every JSON escape spelling), all in one pass: the same tables and digests, the
    byte-wide ones in one allocation (each automaton's table a view of its rows).  None
    for a regex `compile_regex` builds another way, or that it would refuse or find empty.

    A fresh schema's key literals are built so when it is compiled, hundreds at a time:
    one array and one assignment for all of them instead of a dozen numpy calls and a
    fresh table each.

    Example:
        >>> a, b, c = chain_dfas(['"(?:a|b)(?:c|d)"', "[0-9]+", '"(?:x|y)"'])
        >>> a.matches(b'"bc"'), b, c.digest == compile_regex('"(?:x|y)"').digest
        (True, None, True)
    """
    out: list[ByteDFA | None] = [None] * len(regexes)
    found: list[tuple[int, tuple[int, np.ndarray, np.ndarray, np.ndarray]]] = []
    for i, regex in enumerate(regexes):
        if i and not i % 256:          # (as the compile's other passes: every so many units of work)
            check_deadline(what=f"building key literals' automata ({i} of {len(regexes)})")
        if regex.startswith("(*") or 40 * len(regex) > max_nfa_states or _literal_words(regex) is not None:
            continue                       # (compile_regex's other constructions, in its order)
        edges = _chain_edges(regex, max_states)
        if edges is not None and edges[0] > 2:       # (an empty chain matches the empty string)
            found.append((i, edges))
    narrow = [(i, e) for i, e in found if state_dtype(e[0]) is np.uint8]
    rows = sum(e[0] for _, e in narrow)
    if narrow:
        table = np.zeros((rows, 256), np.uint8)
        row_of = np.cumsum([0] + [e[0] for _, e in narrow[:-1]])
        lengths = [len(e[1]) for _, e in narrow]
        base = np.repeat(row_of, lengths)
        table[np.concatenate([e[1] for _, e in narrow]) + base, np.concatenate([e[2] for _, e in narrow])] = \
            np.concatenate([e[3] for _, e in narrow])
        table.setflags(write=False)
        for (i, (size, _, _, _)), at in zip(narrow, row_of.tolist()):
            accepting = np.zeros(size, bool)
            accepting[size - 1] = True
            out[i] = _finished(regexes[i], table[at:at + size], accepting, digest=_text_digest("chain", regexes[i]))
    for i, (size, src, col, dst) in found:
        if out[i] is None:
            wide: np.ndarray = np.zeros((size, 256), state_dtype(size))
            wide[src, col] = dst
            accepting = np.zeros(size, bool)
            accepting[size - 1] = True
            out[i] = _finished(regexes[i], wide, accepting, digest=_text_digest("chain", regexes[i]))
    return out


def state_dtype(num_states: int) -> type:
    """The dtype of a new table of ``num_states`` rows: uint8 where every state number
    fits in a byte, else int32.

    A table is 256 entries per state and stays in memory as long as its automaton; a
    key literal's has ~6 states per character (five of them inside its ``\\uXXXX``
    spellings), ~70 KB as int32 for a ten-letter key.  A fresh schema builds hundreds,
    and writing pages the process never had costs more than the rest of the build
    (page faults: a 70 KB table took ~35 us to zero, a 17 KB one ~4 us).  The compiled
    walks (`constrained.engine.trie_walk`, `constrained.engine.token_scan`) read both
    widths; the digests hash the states as int32 either way."""
    return np.uint8 if num_states <= 256 else np.int32


def compiled_table(dfa: ByteDFA) -> np.ndarray:
    """``dfa``'s transitions as the compiled walks take them: C-contiguous, uint8 or
    int32 (each width is one compiled version of a walk; other widths are widened)."""
    table = dfa.transitions
    if table.dtype != np.uint8 and table.dtype != np.int32:
        table = table.astype(np.int32)
    return np.ascontiguousarray(table)


def _numbered_table(rows: Sequence[dict[int, int]], accepts: Sequence[bool]) -> tuple[np.ndarray, np.ndarray]:
    """``(table, accepting)`` of an automaton that is minimal already, in the canonical
    numbering `_minimize` gives (breadth-first from state 0, each state's targets in byte
    order; dead 0, start 1), the states it does not reach left out.  ``rows[s]`` maps
    state ``s``'s bytes, in byte order, to their targets; ``accepts[s]`` whether it
    accepts.  (`_finite_dfa`: reading the numbering off the edges costs less than
    `_minimize`'s column classes of a dense table.)"""
    number = [0] * len(rows)
    number[0] = START
    queue = [0]
    sources: list[int] = []
    columns: list[int] = []
    targets: list[int] = []
    for s in queue:                        # grows while it is read
        k_s = number[s]
        for byte, t in rows[s].items():
            k = number[t]
            if not k:
                k = number[t] = len(queue) + 1
                queue.append(t)
            sources.append(k_s)
            columns.append(byte)
            targets.append(k)
    table = np.zeros((len(queue) + 1, 256), np.int32)
    table[sources, columns] = targets
    accepting = np.zeros(len(queue) + 1, bool)
    accepting[[number[s] for s in queue if accepts[s]]] = True
    return table, accepting


@functools.lru_cache(maxsize=16384)
def _item_dag(piece: str) -> tuple[int, int, np.ndarray, np.ndarray, np.ndarray] | None:
    """The minimal DAG of one item of `_chain_dfa` (its trie, `_item_trie`, with states of
    equal right language merged), memoised: ``(trie states, states, src, byte, dst)``,
    the edges ``src --byte--> dst`` in local state numbers (read-only int64 arrays), state
    0 the entry and ``dst == states`` the state after the item; no states for the empty
    string.  None where `_item_trie` is."""
    trie = _item_trie(piece)
    if trie is None:
        return None
    inner, steps = trie
    if not steps:
        return 0, 0, _NO_EDGES, _NO_EDGES, _NO_EDGES
    edges: list[dict[int, int]] = [{} for _ in range(inner + 1)]
    exit_ = inner + 1
    for parent, byte, child in steps:
        edges[parent][byte] = exit_ if child < 0 else child
    # Revuz: children are made after their parents, so reverse creation order is a
    # reverse topological order; merge states of equal transitions
    canon = list(range(inner + 2))
    register: dict[tuple, int] = {}
    for s in range(inner, -1, -1):
        sig = tuple(sorted((b, canon[t]) for b, t in edges[s].items()))
        canon[s] = register.setdefault(sig, s)
    kept = sorted({canon[s] for s in range(inner + 1)})        # the entry (0) first
    local = {s: i for i, s in enumerate(kept)}
    local[exit_] = len(kept)
    triples = [(i, b, local[canon[t]]) for i, s in enumerate(kept) for b, t in edges[s].items()]
    arrays = [np.fromiter((x[k] for x in triples), np.int64, len(triples)) for k in range(3)]
    for a in arrays:
        a.setflags(write=False)     # (shared by every chain: read, never changed)
    return inner + 1, len(kept), arrays[0], arrays[1], arrays[2]


_NO_EDGES = np.zeros(0, np.int64)
_NO_EDGES.setflags(write=False)


def _item_trie(piece: str) -> tuple[int, tuple[tuple[int, int, int], ...]] | None:
    """The trie of one item of `_chain_dfa` (a regex piece from `split_items`; memoised as
    its minimal DAG by `_item_dag`): ``(inner, steps)``, steps ``(parent, byte, child)`` with node 0 the item's start, 1 to
    ``inner`` its inner nodes (each made after its parent) and child -1 the state after
    the item; ``steps`` empty for the empty string.  None unless the piece's strings are
    finite (`finite_items`), encodable and prefix-free."""
    items = finite_items(piece)
    if items is None:
        return None
    strings = {""}
    for item in items:                     # a piece is one item, but read it as a sequence anyway
        strings = {a + b for a in strings for b in item}
        if len(strings) > 256:
            return None
    try:
        words = sorted({w.encode("utf-8") for w in strings})
    except UnicodeEncodeError:
        return None
    if not words:
        return None
    if words == [b""]:
        return 0, ()
    if not words[0] or any(b.startswith(a) for a, b in pairwise(words)):
        return None                        # not prefix-free (or the empty string beside others)
    children: list[dict[int, int]] = [{}]
    steps: list[tuple[int, int, int]] = []
    for w in words:
        node = 0
        for byte in w[:-1]:
            nxt = children[node].get(byte)
            if nxt is None:
                nxt = children[node][byte] = len(children)
                children.append({})
                steps.append((node, byte, nxt))
            node = nxt
        steps.append((node, w[-1], -1))
    return len(children) - 1, tuple(steps)


def _finite_dfa(words: list[bytes], max_states: int, terminal: str | None) -> tuple[np.ndarray, np.ndarray]:
    """The minimal DFA of a finite set of byte strings (sorted, distinct), canonically numbered.

    Daciuk et al.'s incremental construction for sorted input: each word is added after
    the longest prefix already present, and the states of the previous word's path below
    that prefix are replaced by an equivalent registered state (same finality, same
    transitions) or registered themselves; the result is minimal, in time linear in the
    words' total length."""
    edges: list[dict[int, int]] = [{}]            # state 0 here is the root (START below)
    final = [False]
    register: dict[tuple, int] = {}
    path: list[int] = [0]                         # states along the previous word

    def settle(depth: int) -> None:               # minimise the previous word's path below depth
        while len(path) - 1 > depth:
            child = path.pop()
            parent = path[-1]
            signature = (final[child], tuple(sorted(edges[child].items())))
            twin = register.get(signature)
            if twin is None:
                register[signature] = child
            else:
                last = max(edges[parent])
                edges[parent][last] = twin

    previous = b""
    for count, word in enumerate(words):
        if not count & 0x3FF:
            check_deadline(terminal=terminal)
        common = 0
        for a, b in zip(previous, word):
            if a != b:
                break
            common += 1
        settle(common)
        state = path[-1]
        for byte in word[common:]:
            edges.append({})
            final.append(False)
            if len(edges) > max_states:
                raise CompileLimitError("alternation of literals needs too many automaton states",
                                        limit="max_dfa_states", value=max_states, terminal=terminal)
            edges[state][byte] = state = len(edges) - 1
            path.append(state)
        final[state] = True
        previous = word
    settle(0)
    # the result is minimal already: what remains is the canonical numbering (each state's
    # edges were added in byte order, the words being sorted)
    return _numbered_table(edges, final)


def _table_digest(table: np.ndarray, accepting: np.ndarray) -> str:
    """The identity of a minimal, canonically numbered DFA (so: of its language).

    Hashes where the table's entries are nonzero (a bitmap) and their targets rather than
    its bytes: most rows of a minimal DFA go to the dead state almost everywhere (a key
    literal's ~60 states have ~90 live entries of ~15,000), so this hashes ~3 KB, not 60."""
    live = table != 0
    h = hashlib.sha256(np.asarray(table.shape, np.int64).tobytes())
    h.update(np.packbits(live).tobytes())
    h.update(table[live].astype(np.int32, copy=False).tobytes())
    h.update(accepting.astype(bool, copy=False).tobytes())
    return h.hexdigest()


def compile_terminal(regex: str, also=(), excluding=(), *, terminal: str | None = None,
                     max_states: int = DEFAULT_MAX_STATES) -> ByteDFA:
    """A trimmed, minimal `ByteDFA` for the strings that fully match ``regex`` and
    every regex in ``also``, and no regex in ``excluding`` (cached per arguments).

    Each regex is compiled with `compile_regex` (a bad one raises `RegexError`
    naming ``terminal``).  Without ``also``/``excluding`` this *is*
    ``compile_regex(regex)``; otherwise the product automaton is built over the
    reachable state tuples and minimised, so its tables and digest equal those of
    any other DFA of the same language.  More than ``max_states`` states (in a
    component or in the product) raise `CompileLimitError`.

    Example:
        >>> compile_terminal("a+", also=("[ab]+",)).digest == compile_regex("a+").digest
        True
        >>> compile_terminal("[0-9]+", excluding=("0[0-9]+",)).matches(b"007")
        False
    """
    also_t, excluding_t = tuple(also), tuple(excluding)
    for r in also_t + excluding_t:
        if not isinstance(r, str):
            raise RegexError("regex must be a str", pattern=repr(r), terminal=terminal)
    try:  # cached without the terminal's name, which only error messages need
        return _compile_terminal(regex, also_t, excluding_t, None, max_states)
    except (RegexError, CompileLimitError) as e:
        if terminal is None or e.terminal is not None:
            raise
        # named here rather than compiled again with the name: a regex that fails late
        # (a limit met after seconds of parsing) would otherwise cost its time twice
        raise e.named(terminal) from None


@functools.lru_cache(maxsize=1024)
def _compile_terminal(regex: str, also: tuple[str, ...], excluding: tuple[str, ...], terminal: str | None,
                      max_states: int) -> ByteDFA:
    main = compile_regex(regex, terminal=terminal, max_states=max_states)
    must = [main] + [compile_regex(r, terminal=terminal, max_states=max_states) for r in also]
    cannot = [compile_regex(r, terminal=terminal, max_states=max_states) for r in excluding]
    if not also and not excluding:
        return main

    def finish(table: np.ndarray, accepting: np.ndarray) -> ByteDFA:
        table.setflags(write=False)
        accepting.setflags(write=False)
        return ByteDFA(transitions=table, accepting=accepting, regex=regex,
                       digest=_table_digest(table, accepting), also=also, excluding=excluding)

    def distinct(dfas: list[ByteDFA]) -> list[ByteDFA]:
        return list({d.digest: d for d in dfas}.values())

    # drop components that cannot change the language: repeats, excluded empty languages
    must = distinct(must)
    cannot = distinct([d for d in cannot if d.accepting.any()])
    if (any(not d.accepting.any() for d in must)
            or {d.digest for d in cannot} & {d.digest for d in must}):
        table, accepting = _minimize(np.zeros((2, 256), np.int32), np.zeros(2, bool))
        return finish(table, accepting)
    if len(must) == 1 and not cannot:
        return finish(main.transitions, main.accepting)

    comps = must + cannot
    n_must, k = len(must), len(must) + len(cannot)
    # joint byte classes (in the order of their first bytes): bytes whose column is
    # identical in every component
    joint, byte_class = _column_classes(np.concatenate([d.transitions for d in comps], axis=0))
    offsets = np.cumsum([0] + [d.num_states for d in comps])
    reduced = [joint[a:b].astype(np.int64) for a, b in zip(offsets[:-1], offsets[1:])]
    num_classes = joint.shape[1]
    # a tuple's key: mixed-radix integer when it fits in int64, else its raw bytes
    strides, span = [], 1
    for d in comps:
        strides.append(span)
        span *= d.num_states
    int_keys = span < _INT_KEY_SPAN
    if int_keys:
        stride_arr = np.array(strides, np.int64)

        def keys_of(tuples: np.ndarray) -> np.ndarray:
            return tuples @ stride_arr
    else:
        void = np.dtype((np.void, 8 * k))

        def keys_of(tuples: np.ndarray) -> np.ndarray:
            return np.ascontiguousarray(tuples).view(void).reshape(-1)

    def as_keys(keys: np.ndarray) -> list:
        return keys.tolist() if int_keys else [key.tobytes() for key in keys]

    # breadth-first over reachable tuples, one whole level at a time; tuple (0, ..) = dead
    start = np.full((1, k), START, np.int64)
    dead_key, start_key = as_keys(keys_of(np.concatenate([np.zeros((1, k), np.int64), start])))
    ids = {dead_key: DEAD, start_key: START}
    states = [np.zeros((1, k), np.int64), start]
    rows = [np.zeros((1, num_classes), np.int64)]
    frontier = start
    while len(frontier):
        check_deadline(terminal=terminal)
        nxt = np.stack([reduced[j][frontier[:, j]] for j in range(k)], axis=-1).reshape(-1, k)
        nxt[(nxt[:, :n_must] == DEAD).any(axis=1)] = DEAD
        uniq, first, inverse = np.unique(keys_of(nxt), return_index=True, return_inverse=True)
        uniq_ids = np.empty(len(uniq), np.int64)
        fresh = []
        for u, key in enumerate(as_keys(uniq)):
            q = ids.get(key)
            if q is None:
                q = ids[key] = len(ids)
                fresh.append(first[u])
            uniq_ids[u] = q
        if len(ids) > max_states:
            raise CompileLimitError("terminal (regex with also/excluding) needs too many automaton states",
                                    limit="max_dfa_states", value=max_states, terminal=terminal)
        rows.append(uniq_ids[inverse.reshape(-1)].reshape(-1, num_classes))
        frontier = nxt[np.asarray(fresh, np.int64)]
        states.append(frontier)
    tuples = np.concatenate(states, axis=0)
    table = np.concatenate(rows, axis=0)
    accepting = np.ones(len(tuples), bool)
    for j, d in enumerate(comps):
        acc = d.accepting[tuples[:, j]]
        accepting &= acc if j < n_must else ~acc
    accepting[DEAD] = False
    table = _trim(table, accepting)
    table, accepting = _minimize(table, accepting, byte_class)
    return finish(table, accepting)
