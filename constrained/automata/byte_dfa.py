"""Regex -> minimal, trimmed DFA over UTF-8 bytes.

Pipeline: `parse_regex` (Python's own parser) -> Thompson NFA whose character
edges are expanded to UTF-8 byte-range paths -> subset construction over bytes ->
trim (every state can still reach acceptance) -> Moore minimisation -> states
renumbered breadth-first so equal languages give equal tables.

Limits make compilation bounded on hostile input: the NFA size is estimated
before anything is built (``x{100000}{100000}`` fails at once) and the subset
construction stops at ``max_states``; both raise `CompileLimitError`.

Example:
    >>> dfa = compile_regex(r"[0-9]+")
    >>> dfa.matches(b"123"), dfa.matches(b"12a"), dfa.matches(b"")
    (True, False, False)
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass, field

import numpy as np

from constrained.automata.regex_parser import parse_regex, size_estimate
from constrained.automata.utf8 import utf8_sequences
from constrained.errors import CompileLimitError

DEAD = 0
START = 1
DEFAULT_MAX_STATES = 20_000
DEFAULT_MAX_NFA_STATES = 400_000


@dataclass(frozen=True, eq=False)
class ByteDFA:
    """A deterministic automaton over bytes; state 0 is the absorbing dead state.

    ``transitions[q, b]`` is the next state (int32); ``accepting[q]`` says whether
    the bytes read so far form a match.  Every non-dead state can reach an
    accepting state (the DFA is trimmed), so "not dead" means "viable prefix".
    """

    transitions: np.ndarray
    accepting: np.ndarray
    regex: str = ""
    digest: str = field(default="")

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


class _NFABuilder:
    def __init__(self, limit: int, regex: str, terminal: str | None) -> None:
        self.eps: list[list[int]] = []
        self.edges: list[list[tuple[int, int, int]]] = []
        self.limit = limit
        self.regex = regex
        self.terminal = terminal

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
            trie: dict[tuple[int, tuple[int, int]], int] = {}
            for lo, hi in node[1]:
                for seq in utf8_sequences(lo, hi):
                    cur = s
                    for i, (blo, bhi) in enumerate(seq):
                        if i == len(seq) - 1:
                            self.edges[cur].append((blo, bhi, e))
                        else:
                            key = (cur, (blo, bhi))
                            nxt = trie.get(key)
                            if nxt is None:
                                nxt = trie[key] = self.new()
                                self.edges[cur].append((blo, bhi, nxt))
                            cur = nxt
        elif kind == "seq":
            parts = node[1]
            if not parts:
                self.eps[s].append(e)
                return
            cur = s
            for i, part in enumerate(parts):
                nxt = e if i == len(parts) - 1 else self.new()
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
    while stack:
        s = stack.pop()
        for t in eps[s]:
            if t not in seen:
                seen.add(t)
                stack.append(t)
    return frozenset(seen)


def _determinize(nfa: _NFABuilder, start: int, final: int, max_states: int) -> tuple[np.ndarray, np.ndarray]:
    start_set = _closure(nfa.eps, [start])
    ids: dict[frozenset[int], int] = {frozenset(): DEAD, start_set: START}
    order = [frozenset(), start_set]
    rows: list[np.ndarray] = [np.zeros(256, np.int32)]
    i = 1
    while i < len(order):
        cur = order[i]
        edges = [edge for s in cur for edge in nfa.edges[s]]
        row = np.zeros(256, np.int32)
        if edges:
            points = sorted({lo for lo, _, _ in edges} | {hi + 1 for _, hi, _ in edges})
            for a, b in zip(points, points[1:]):
                targets = [t for lo, hi, t in edges if lo <= a <= hi]
                if not targets:
                    continue
                tset = _closure(nfa.eps, targets)
                tid = ids.get(tset)
                if tid is None:
                    if len(order) >= max_states:
                        raise CompileLimitError("regex needs too many automaton states",
                                                limit="max_dfa_states", value=max_states, terminal=nfa.terminal)
                    tid = ids[tset] = len(order)
                    order.append(tset)
                row[a:b] = tid
        rows.append(row)
        i += 1
    table = np.stack(rows)
    accepting = np.array([final in s for s in order], dtype=bool)
    return table, accepting


def _trim(table: np.ndarray, accepting: np.ndarray) -> np.ndarray:
    """Redirect states that cannot reach acceptance to the dead state."""
    n = table.shape[0]
    live = accepting.copy()
    live[DEAD] = False
    while True:
        reach = live[table].any(axis=1) | live
        reach[DEAD] = False
        if (reach == live).all():
            break
        live = reach
    out = table.copy()
    out[~live[table]] = DEAD
    out[~live] = DEAD
    return out


def _minimize(table: np.ndarray, accepting: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Moore partition refinement, then breadth-first renumbering from START."""
    cls = accepting.astype(np.int64) + 1
    cls[DEAD] = 0
    # bytes with identical columns stay interchangeable: refine over one byte per class
    columns: dict[bytes, int] = {}
    for b in range(256):
        columns.setdefault(table[:, b].tobytes(), b)
    reduced = np.ascontiguousarray(table[:, sorted(columns.values())])
    while True:
        sig = np.ascontiguousarray(np.concatenate([cls[:, None], cls[reduced]], axis=1))
        sig[DEAD, :] = -1
        # rows as opaque byte strings: one 1-D sort instead of a lexicographic one per column
        rows = sig.view(np.dtype((np.void, sig.shape[1] * sig.itemsize))).reshape(-1)
        _, new = np.unique(rows, return_inverse=True)
        new = new.reshape(-1).astype(np.int64)
        if len(np.unique(new)) == len(np.unique(cls)):
            cls = new
            break
        cls = new
    # breadth-first numbering of classes reachable from START
    dead_cls = cls[DEAD]
    order = {dead_cls: DEAD, cls[START]: START}
    queue = [START]
    rep = {DEAD: DEAD, START: START}
    while queue:
        s = queue.pop(0)
        for b in range(256):
            t = table[s, b]
            c = cls[t]
            if c not in order:
                order[c] = len(order)
                rep[order[c]] = t
                queue.append(t)
    m = len(order)
    new_table = np.zeros((m, 256), np.int32)
    new_acc = np.zeros(m, bool)
    for new_id, s in rep.items():
        new_table[new_id] = [order[c] for c in cls[table[s]]]
        new_acc[new_id] = accepting[s] and new_id != DEAD
    return new_table, new_acc


@functools.lru_cache(maxsize=4096)
def compile_regex(regex: str, *, terminal: str | None = None, max_states: int = DEFAULT_MAX_STATES,
                  max_nfa_states: int = DEFAULT_MAX_NFA_STATES) -> ByteDFA:
    """Compile a Python regex into a trimmed, minimal `ByteDFA` (cached per arguments)."""
    ast = parse_regex(regex, terminal=terminal)
    if size_estimate(ast) > max_nfa_states:
        raise CompileLimitError("regex automaton too large (bounded repetitions)", limit="max_nfa_states",
                                value=max_nfa_states, terminal=terminal)
    nfa = _NFABuilder(max_nfa_states, regex, terminal)
    s, e = nfa.new(), nfa.new()
    nfa.build(ast, s, e)
    table, accepting = _determinize(nfa, s, e, max_states)
    table = _trim(table, accepting)
    table, accepting = _minimize(table, accepting)
    table.setflags(write=False)
    accepting.setflags(write=False)
    digest = hashlib.sha256(table.tobytes() + accepting.tobytes()).hexdigest()
    return ByteDFA(transitions=table, accepting=accepting, regex=regex, digest=digest)
