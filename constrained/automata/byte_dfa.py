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
from dataclasses import dataclass, field

import numpy as np

from constrained.automata.regex_parser import literal_alternatives, parse_regex, size_estimate
from constrained.automata.utf8 import utf8_sequences
from constrained.errors import CompileLimitError, RegexError

DEAD = 0
START = 1
DEFAULT_MAX_STATES = 20_000
DEFAULT_MAX_NFA_STATES = 400_000
_INT_KEY_SPAN = 2 ** 62  # product tuples are keyed by a mixed-radix int64 below this many tuples


@dataclass(frozen=True, eq=False)
class ByteDFA:
    """A deterministic automaton over bytes; state 0 is the absorbing dead state.

    ``transitions[q, b]`` is the next state (int32); ``accepting[q]`` says whether
    the bytes read so far form a match.  Every non-dead state can reach an
    accepting state (the DFA is trimmed), so "not dead" means "viable prefix".

    ``regex``, ``also`` and ``excluding`` record what it was compiled from (see
    `compile_terminal`); ``digest`` hashes the (minimal, canonically numbered)
    tables, so it depends on the language only and keys the token tables.
    """

    transitions: np.ndarray
    accepting: np.ndarray
    regex: str = ""
    digest: str = field(default="")
    also: tuple[str, ...] = ()
    excluding: tuple[str, ...] = ()

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


def _refine(initial: np.ndarray, reduced: np.ndarray) -> np.ndarray:
    """Moore refinement of the partition ``initial`` (class 0 = just the dead state)
    to the coarsest one stable under ``reduced``'s transitions: dense class ids.

    Rounds key each state's signature (its class and its successors' classes) by a
    64-bit hash, sorted as integers; the result is then checked exactly (a stable
    partition refining ``initial`` is the coarsest one, as hashing never splits
    states with equal signatures), and recomputed with exact signatures in the
    astronomically rare case a collision made it unstable.
    """
    weights = np.random.default_rng(0x5EED).integers(1, 2 ** 63, size=reduced.shape[1] + 1, dtype=np.uint64)

    def signatures(cls: np.ndarray) -> np.ndarray:
        sig = np.ascontiguousarray(np.concatenate([cls[:, None], cls[reduced]], axis=1))
        sig[DEAD, :] = -1
        return sig

    def hashed(cls: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore"):
            h = cls.astype(np.uint64) * weights[0] + (cls[reduced].astype(np.uint64) * weights[1:]).sum(axis=1)
        h[DEAD] = 0  # the dead state keeps a class of its own (checked below)
        return h

    def exact(cls: np.ndarray) -> np.ndarray:
        sig = signatures(cls)
        # rows as opaque byte strings: one 1-D sort instead of a lexicographic one per column
        return sig.view(np.dtype((np.void, sig.shape[1] * sig.itemsize))).reshape(-1)

    for key in (hashed, exact):
        cls, count = initial, len(np.unique(initial))
        while True:
            _, new = np.unique(key(cls), return_inverse=True)
            cls = new.reshape(-1).astype(np.int64)
            if int(cls.max()) + 1 == count:
                break
            count = int(cls.max()) + 1
        _, rep = np.unique(cls, return_index=True)
        sig = np.concatenate([initial[:, None], signatures(cls)], axis=1)
        if (sig == sig[rep[cls]]).all():
            return cls
    raise AssertionError("exact partition refinement is always stable")  # pragma: no cover


def _minimize(table: np.ndarray, accepting: np.ndarray, *,
              minimal: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Moore partition refinement (`_refine`; skipped when the caller knows the DFA is
    ``minimal`` already), then breadth-first renumbering from START with each state's
    targets in byte order: equal languages, equal tables."""
    # bytes with identical columns stay interchangeable: refine over one byte per class
    used = np.flatnonzero(table.any(axis=0))
    columns: dict[bytes, int] = {}
    for b in used.tolist():
        columns.setdefault(table[:, b].tobytes(), b)
    if len(used) < 256:
        columns.setdefault(b"", int(np.flatnonzero(~table.any(axis=0))[0]))   # one all-dead column
    reduced = np.ascontiguousarray(table[:, sorted(columns.values())])
    if minimal:
        cls = np.arange(table.shape[0], dtype=np.int64)
    else:
        cls = accepting.astype(np.int64) + 1
        cls[DEAD] = 0
        cls = _refine(cls, reduced)
    count = int(cls.max()) + 1
    # breadth-first numbering of classes reachable from START, each state's targets in
    # byte order; the reduced columns are in byte order, so per state only the first
    # column of each class it reaches is visited: (state, column) pairs, grouped by state
    targets = cls[reduced]
    by_class = np.argsort(targets, axis=1, kind="stable")
    ordered = np.take_along_axis(targets, by_class, axis=1)
    first = np.ones(ordered.shape, bool)
    first[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
    is_first = np.zeros(first.shape, bool)
    np.put_along_axis(is_first, by_class, first, axis=1)
    states, columns_at = np.nonzero(is_first)
    first_cls = targets[states, columns_at].tolist()
    first_tgt = reduced[states, columns_at].tolist()
    bounds = np.searchsorted(states, np.arange(table.shape[0] + 1)).tolist()
    new_of = [-1] * count
    new_of[cls[DEAD]] = DEAD
    new_of[cls[START]] = START
    reps = [DEAD, START]
    i = START
    while i < len(reps):
        s = reps[i]
        for j in range(bounds[s], bounds[s + 1]):
            c = first_cls[j]
            if new_of[c] < 0:
                new_of[c] = len(reps)
                reps.append(first_tgt[j])
        i += 1
    new_of_arr = np.asarray(new_of, np.int64)
    rep = np.asarray(reps, np.int64)
    new_table = new_of_arr[cls[table[rep]]].astype(np.int32)
    new_acc = accepting[rep].astype(bool)
    new_acc[DEAD] = False
    return new_table, new_acc


@functools.lru_cache(maxsize=4096)
def compile_regex(regex: str, *, terminal: str | None = None, max_states: int = DEFAULT_MAX_STATES,
                  max_nfa_states: int = DEFAULT_MAX_NFA_STATES) -> ByteDFA:
    """Compile a Python regex into a trimmed, minimal `ByteDFA` (cached per arguments).

    An alternation of literal strings (an enum) is built as a finite automaton directly
    (`_finite_dfa`), with room for ``8 * max_states`` states: no subset construction can
    blow up there, and the result is the same minimal DFA the NFA route would give."""
    words = _literal_words(regex)
    if words is not None:
        table, accepting = _finite_dfa(words, 8 * max_states, terminal)
        return _finished(regex, table, accepting)
    ast = parse_regex(regex, terminal=terminal)
    if size_estimate(ast) > max_nfa_states:
        raise CompileLimitError("regex automaton too large (bounded repetitions)", limit="max_nfa_states",
                                value=max_nfa_states, terminal=terminal)
    nfa = _NFABuilder(max_nfa_states, regex, terminal)
    s, e = nfa.new(), nfa.new()
    nfa.build(ast, s, e)
    table, accepting = _determinize(nfa, s, e, max_states)
    table = _trim(table, accepting)
    return _finished(regex, *_minimize(table, accepting))


def _finished(regex: str, table: np.ndarray, accepting: np.ndarray) -> ByteDFA:
    table.setflags(write=False)
    accepting.setflags(write=False)
    return ByteDFA(transitions=table, accepting=accepting, regex=regex, digest=_table_digest(table, accepting))


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
    for word in words:
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
    # the registered states (and the root) in a dense table: dead 0, root 1
    live = sorted({0} | set(register.values()))
    number = {old: new + 1 for new, old in enumerate(live)}
    rows, columns, targets = [], [], []
    for old in live:
        row = number[old]
        for byte, target in edges[old].items():
            rows.append(row)
            columns.append(byte)
            targets.append(number[target])
    table = np.zeros((len(live) + 1, 256), np.int32)
    table[rows, columns] = targets
    accepting = np.zeros(len(live) + 1, bool)
    accepting[1:] = [final[old] for old in live]
    return _minimize(table, accepting, minimal=True)


def _table_digest(table: np.ndarray, accepting: np.ndarray) -> str:
    """The identity of a minimal, canonically numbered DFA (so: of its language)."""
    return hashlib.sha256(table.tobytes() + accepting.tobytes()).hexdigest()


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
    except (RegexError, CompileLimitError):
        if terminal is None:
            raise
        return _compile_terminal.__wrapped__(regex, also_t, excluding_t, terminal, max_states)


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
    # joint byte classes: bytes whose column is identical in every component
    stacked = np.ascontiguousarray(np.concatenate([d.transitions for d in comps], axis=0).T)
    cols = stacked.view(np.dtype((np.void, stacked.shape[1] * stacked.itemsize))).reshape(-1)
    _, first_byte, byte_class = np.unique(cols, return_index=True, return_inverse=True)
    byte_class = byte_class.reshape(-1)
    reduced = [np.ascontiguousarray(d.transitions[:, first_byte]).astype(np.int64) for d in comps]
    num_classes = len(first_byte)
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
    table, accepting = _minimize(np.ascontiguousarray(table[:, byte_class]).astype(np.int32), accepting)
    return finish(table, accepting)
