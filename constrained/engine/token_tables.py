"""Per-(terminal DFA, DFA state) token tables, shared per vocabulary and cached on disk.

For a lexer in state ``q`` of a terminal's DFA, every token is one of

* **inside**: all its bytes keep the DFA live -> allowed whatever the parser
  state is (every reachable configuration is viable);
* **crossing**: the DFA dies (or would) but passes an accepting state strictly
  inside the token -> the lexeme may end there and the rest of the token must be
  read by the parser's next terminals (checked per parser node, vectorised);
* **dead**: neither -> never allowed from ``q``.

Tables depend only on (vocabulary, DFA), not on the grammar, so every grammar
over a vocabulary shares them (all JSON grammars share the string/number tables).
They are read off the vocabulary's byte trie (`constrained.engine.token_trie`) by one
compiled walk per table, only where the DFA is live (`constrained.engine.trie_walk`), or
derived from a similar state's table (`constrained.engine.table_derivation`), and stored
under ``$CONSTRAINED_CACHE_DIR`` (default ``~/.cache/constrained``) per
vocabulary hash, so a second process loads instead of recomputing.

Computing a table honours the caller's compile deadline (`constrained.deadline`): past
it, `CompileTimeoutError` names the automaton's regex and nothing of that table is kept
(a table is stored only once computed).
"""

from __future__ import annotations

import functools
import os
import tempfile
import threading
from pathlib import Path

import numpy as np

from constrained.automata.byte_dfa import ByteDFA
from constrained.deadline import remaining, timeout_error
from constrained.engine.crossing import CrossingSet, CrossingSets
from constrained.engine.table_derivation import derive_table, reference_state
from constrained.engine.token_trie import VocabTrie
from constrained.engine.trie_walk import FlatTrie, walk_table
from constrained.masks import pack_token_ids

TABLE_FORMAT = 1
# a state reading fewer distinct bytes visits few trie nodes: its table is computed, not
# looked up by residual language (whose digest walks the DFA and would cost more)
SHARE_MIN_LIVE_BYTES = 32
# ... and one whose residual automaton is larger or deeper than this is not looked up
# either: the walk would cost about as much as the table (a string of up to 255
# characters has a residual of thousands of states per position, none of which recurs
# in another terminal), while the residuals worth sharing (a string body, an escape)
# are a few states deep
SHARE_MAX_RESIDUAL = 256
SHARE_MAX_DEPTH = 24
# ... except in an automaton of at most this many states, where the residual is looked
# up whatever its size and depth: a string of at least / at most n characters (n up to
# `MAX_COUNTED_LENGTH`, 24) has ~20 states per character (UTF-8, escapes, surrogate
# pairs), past `SHARE_MAX_RESIDUAL` from 13 characters on, yet the residual after j
# characters of a minLength k string is a minLength k - j string's: schemas share them,
# and `warm_up` computes them once.  The digest (~0.2 ms at 400 states) costs less than
# the table it finds (a string body's walk, ~1-6 ms on a 128k vocabulary).
SHARE_COUNTED_MAX_STATES = 512


def default_cache_dir() -> Path:
    """``$CONSTRAINED_CACHE_DIR`` or ``~/.cache/constrained``."""
    env = os.environ.get("CONSTRAINED_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "constrained"


class StateTokenTable:
    """Tokens inside / crossing for one DFA state (see the module docstring).

    ``inside`` is a packed bitset (uint8, little bit order, read-only); a table with
    few inside tokens (a key literal's states) keeps them as ``inside_ids`` (sorted
    int32) and makes ``inside`` only when asked for it."""

    __slots__ = ("_inside", "inside_ids", "cross_toks", "cross_pos", "_size", "crossing")

    def __init__(self, inside: np.ndarray | None, cross_toks: np.ndarray, cross_pos: np.ndarray,
                 inside_ids: np.ndarray | None = None, size: int = 0) -> None:
        self._inside = inside
        self.inside_ids = inside_ids     # sorted int32 token ids, or None (then ``inside`` is given)
        self.cross_toks = cross_toks     # token ids (int32) with a split point and not inside
        self.cross_pos = cross_pos       # byte offset of the split point (int32)
        self._size = size
        self.crossing: CrossingSet | None = None     # the crossing candidates as a set (`crossing_root`)

    @staticmethod
    def of_walk(walked: tuple, size: int) -> StateTokenTable:
        """The table of a compiled walk's result ``(inside_ids, inside, cross_toks, cross_pos)``
        (`constrained.engine.trie_walk.walk_table`; one of ``inside_ids`` and ``inside`` is None)."""
        ids, inside, cross_toks, cross_pos = walked
        for a in (ids, inside, cross_toks, cross_pos):
            if a is not None:
                a.setflags(write=False)
        if inside is not None:
            return StateTokenTable(inside, cross_toks, cross_pos)
        return StateTokenTable(None, cross_toks, cross_pos, ids, size)

    @property
    def inside(self) -> np.ndarray:
        if self._inside is None:
            assert self.inside_ids is not None, "built with inside or inside_ids"
            packed = pack_token_ids(self.inside_ids, self._size).view(np.uint8)
            packed.setflags(write=False)
            self._inside = packed
        return self._inside


class TokenTables:
    """The token tables of one vocabulary; obtain with `TokenTables.for_vocabulary`."""

    _registry: dict[tuple[str, str], TokenTables] = {}
    _registry_lock = threading.Lock()
    _tries: dict[str, VocabTrie] = {}     # per vocabulary hash: shared by every cache directory
    _tries_lock = threading.Lock()
    MAX_TRIES = 8

    def __init__(self, vocab, cache_dir: Path | None) -> None:
        self.vocab = vocab
        self.byte_matrix = vocab.byte_matrix
        self.lengths = vocab.lengths
        self.size = len(vocab)
        self.nbytes = ((self.size + 31) // 32) * 4
        self._trie: VocabTrie | None = None
        self.cache_dir = None if cache_dir is None else Path(cache_dir) / "tables" / vocab.content_hash()[:24]
        self._tables: dict[str, dict[int, StateTokenTable]] = {}
        self._by_residual: dict[str, StateTokenTable] = {}
        self._lock = threading.Lock()
        self.crossing = CrossingSets(self.byte_matrix, self.lengths, self.size, vocab.token_bytes)
        self._first_bytes: np.ndarray | None = None
        self._tokens_per_first_byte: np.ndarray | None = None

    @classmethod
    def for_vocabulary(cls, vocab, cache_dir: Path | None) -> TokenTables:
        key = (vocab.content_hash(), str(cache_dir))
        with cls._registry_lock:
            hit = cls._registry.get(key)
            if hit is None:
                hit = cls._registry[key] = cls(vocab, cache_dir)
            return hit

    def get(self, dfa: ByteDFA, state: int) -> StateTokenTable:
        """The table for ``state`` of ``dfa``, computed on first use.

        A table depends only on the state's *residual* automaton (what the DFA
        does from there), so tables are shared by residual digest across every
        DFA of the vocabulary: the body of a string is one table whether it sits
        in ``STRING``, in a key that excludes declared names or in a pattern."""
        per = self._tables.get(dfa.digest)
        if per is None:
            with self._lock:
                per = self._tables.setdefault(dfa.digest, self._load(dfa) or {})
        table = per.get(state)
        if table is None and dfa.embeds is not None:
            other, lo, hi = dfa.embeds
            if lo <= state < hi:        # another automaton's state: its table (no residual digest)
                table = per[state] = self.get(other, state)
        if table is None and remaining() == 0.0:       # a deadline is open and has passed
            shown = dfa.regex if len(dfa.regex) <= 80 else dfa.regex[:80] + "..."
            raise timeout_error(what=f"the token table of state {state} of /{shown}/")
        if table is None:
            row = dfa.transitions[state]
            live = np.count_nonzero(row)
            if live < SHARE_MIN_LIVE_BYTES:      # few tokens to scan, unless a lexeme's last byte
                key = last_byte_key(dfa, row) if live == 1 else None
                table = per[state] = self._scan_table(dfa, state) if key is None else self._shared(key, dfa, state)
        if table is None:
            ref = reference_state(dfa, state, self.tokens_per_first_byte)
            if ref is not None:     # a body state's table and a short scan: cheaper than the residual's digest
                table = per[state] = derive_table(self, dfa, state, ref)
        if table is None:
            if dfa.num_states <= SHARE_COUNTED_MAX_STATES:       # any residual of it (a counted string)
                key = residual_digest(dfa, state)
            else:
                key = residual_digest(dfa, state, max_states=SHARE_MAX_RESIDUAL, max_depth=SHARE_MAX_DEPTH)
            table = per[state] = self._scan_table(dfa, state) if key is None else self._shared(key, dfa, state)
        return table

    def _shared(self, key: str, dfa: ByteDFA, state: int) -> StateTokenTable:
        """The table every state of residual identity ``key`` shares (`residual_digest`,
        `last_byte_key`), scanned from ``state`` when it is the first one."""
        table = self._by_residual.get(key)
        if table is None:
            table = self._by_residual[key] = self._scan_table(dfa, state)
        return table

    def load_cached(self, dfa: ByteDFA) -> bool:
        """Load the tables of ``dfa`` from the disk cache if they are there (no computing)."""
        if dfa.digest in self._tables:
            return True
        per = self._load(dfa)
        if per is None:
            return False
        with self._lock:
            self._tables.setdefault(dfa.digest, per)
        return True

    def crossing_root(self, dfa: ByteDFA, state: int) -> CrossingSet:
        """The crossing candidates of ``state`` of ``dfa`` as a `CrossingSet` (shared)."""
        table = self.get(dfa, state)
        found = table.crossing
        if found is None:      # (a table shared by residual shares its set too: no content hash)
            found = table.crossing = self.crossing.intern_set(table.cross_toks, table.cross_pos)
        return found

    def ensure(self, dfa: ByteDFA) -> dict[int, StateTokenTable]:
        """Load or compute the tables of every live state of ``dfa``."""
        per = self._tables.get(dfa.digest)
        if per is not None:
            return per
        with self._lock:
            per = self._tables.get(dfa.digest)
            if per is not None:
                return per
            per = self._load(dfa)
            if per is None:
                known = self._tables.get(dfa.digest, {})
                per = {q: known[q] if q in known else self._compute(dfa, q) for q in range(1, dfa.num_states)}
                self._save(dfa, per)
            self._tables[dfa.digest] = per
            return per

    @property
    def trie(self) -> VocabTrie:
        """The vocabulary's byte trie (built on first use, shared by every `TokenTables`
        of the same vocabulary)."""
        if self._trie is None:
            key = self.vocab.content_hash()
            with TokenTables._tries_lock:
                trie = TokenTables._tries.get(key)
                if trie is None:
                    trie = VocabTrie(self.vocab.token_bytes)
                    if len(TokenTables._tries) >= TokenTables.MAX_TRIES:
                        TokenTables._tries.pop(next(iter(TokenTables._tries)))
                    TokenTables._tries[key] = trie
            self._trie = trie
        return self._trie

    def _compute(self, dfa: ByteDFA, state: int) -> StateTokenTable:
        """The table of ``state``: derived from a state whose row differs on a few bytes
        (`constrained.engine.table_derivation`), else scanned in full."""
        if np.count_nonzero(dfa.transitions[state]) >= SHARE_MIN_LIVE_BYTES:
            ref = reference_state(dfa, state, self.tokens_per_first_byte)
            if ref is not None:
                return derive_table(self, dfa, state, ref)
        return self._scan_table(dfa, state)

    @property
    def sparse_max(self) -> int:
        """Token sets up to this many ids are kept as sorted ids, larger ones packed."""
        return max(16, self.nbytes // 16)

    @property
    def first_bytes(self) -> np.ndarray:
        """Int16 per token id: its first byte (256 for an empty token)."""
        first = self._first_bytes
        if first is None:
            # int16 before the choice: numpy >= 2.5 refuses 256 beside a uint8 column
            column = self.byte_matrix[:, 0] if self.byte_matrix.shape[1] else np.zeros(len(self.lengths), np.uint8)
            first = np.where(self.lengths > 0, column.astype(np.int16), np.int16(256))
            first.setflags(write=False)
            self._first_bytes = first
        return first

    @property
    def tokens_per_first_byte(self) -> np.ndarray:
        """Int64[257]: how many tokens start with each byte (256: empty tokens); what a
        trie walk below those bytes visits (`reference_state` weighs derivations by it)."""
        counts = self._tokens_per_first_byte
        if counts is None:
            counts = np.bincount(self.first_bytes, minlength=257)
            counts.setflags(write=False)
            self._tokens_per_first_byte = counts
        return counts

    def _scan_table(self, dfa: ByteDFA, state: int) -> StateTokenTable:
        """The table of ``state`` by a scan of the vocabulary's trie from it (one compiled
        call: `constrained.engine.trie_walk.walk_table`)."""
        return StateTokenTable.of_walk(walk_table(FlatTrie.of(self.trie), dfa, state, self.size, self.sparse_max),
                                       self.size)

    # ------------------------------------------------------------------ disk
    def _path(self, dfa: ByteDFA) -> Path | None:
        if self.cache_dir is None:
            return None
        return self.cache_dir / f"v{TABLE_FORMAT}-{dfa.digest[:32]}.npz"

    def _load(self, dfa: ByteDFA) -> dict[int, StateTokenTable] | None:
        path = self._path(dfa)
        if path is None or not path.exists():
            return None
        try:
            with np.load(path) as z:
                inside, offsets = z["inside"], z["offsets"]
                ctoks, cpos = z["cross_toks"], z["cross_pos"]
            if inside.shape != (dfa.num_states - 1, self.nbytes):
                return None
        except (OSError, ValueError, KeyError):
            return None
        per = {}
        for i in range(dfa.num_states - 1):
            a, b = offsets[i], offsets[i + 1]
            t = StateTokenTable(inside[i], ctoks[a:b], cpos[a:b])
            for arr in (t.inside, t.cross_toks, t.cross_pos):
                arr.setflags(write=False)
            per[i + 1] = t
        return per

    def _save(self, dfa: ByteDFA, per: dict[int, StateTokenTable]) -> None:
        path = self._path(dfa)
        if path is None:
            return
        states = range(1, dfa.num_states)
        offsets = np.zeros(len(states) + 1, np.int64)
        for i, q in enumerate(states):
            offsets[i + 1] = offsets[i] + len(per[q].cross_toks)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
            with os.fdopen(fd, "wb") as f:
                np.savez(f, inside=np.stack([per[q].inside for q in states]) if len(states) else
                         np.zeros((0, self.nbytes), np.uint8), offsets=offsets,
                         cross_toks=np.concatenate([per[q].cross_toks for q in states] + [np.zeros(0, np.int32)]),
                         cross_pos=np.concatenate([per[q].cross_pos for q in states] + [np.zeros(0, np.int32)]))
            os.replace(tmp, path)
        except OSError:
            pass  # a read-only or full cache directory only costs recomputation


def residual_digest(dfa: ByteDFA, state: int, successors: list[list[int]] | None = None, *,
                    max_states: int | None = None, max_depth: int | None = None) -> str | None:
    """The identity of the language accepted from ``state`` (a canonical numbering of
    the states reachable from it; equal for equal residual languages of minimal DFAs).
    None when more than ``max_states`` states are reachable from ``state`` or the
    breadth-first walk has more than ``max_depth`` levels.

    The numbering is breadth first, each state's successors in the order of the first
    byte leading there; what is hashed is the renumbered rows, each row as runs of
    equal targets (a string's row is a dozen runs, not 256 entries), and the accepting
    flags.  ``successors`` (`successor_lists` of ``dfa``) walks it state by state in
    Python (the reference); without it one compiled loop walks and encodes (a counted
    string's residual, ~400 states: ~1.5 ms as a level-by-level numpy walk and a hash
    of the whole renumbered table, a tenth of that compiled)."""
    import hashlib

    table = np.ascontiguousarray(dfa.transitions, dtype=np.int32)   # (one compiled version)
    if successors is not None:
        number = {0: 0, state: 1}
        queue = [state]
        for q in queue:        # breadth first, successors in byte order: a canonical numbering
            for s in successors[q]:
                if s not in number:
                    number[s] = len(queue) + 1
                    queue.append(s)
        if max_states is not None and len(queue) > max_states:
            return None
        order = np.asarray(queue, dtype=np.int64)
    else:
        order = _compiled_residual()[0](table, np.int64(state), np.int64(-1 if max_states is None else max_states),
                                        np.int64(-1 if max_depth is None else max_depth))
        if order.size == 0:
            return None
    runs = _compiled_residual()[1](table, order)
    h = hashlib.sha256(np.int64(order.size).tobytes())
    h.update(runs.tobytes())
    h.update(dfa.accepting[order].tobytes())
    return h.hexdigest()


@functools.cache
def _compiled_residual():
    """`_residual_order` and `_residual_runs` compiled (numba imported on first use)."""
    import numba

    return (numba.njit(cache=True, nogil=True)(_residual_order),
            numba.njit(cache=True, nogil=True)(_residual_runs))


def _residual_order(table, state, max_states, max_depth):  # pragma: no cover
    # (compiled: the tests compare it with the state-by-state walk of `residual_digest`)
    # The states reachable from ``state`` in breadth-first order, successors in byte
    # order; empty past ``max_states`` states or ``max_depth`` levels (-1: no limit).
    n = table.shape[0]
    level = np.full(n, -1, np.int64)
    level[0] = -2                       # the dead state is never numbered
    order = np.empty(n, np.int64)
    order[0] = state
    level[state] = 0
    count = 1
    head = 0
    while head < count:
        q = order[head]
        head += 1
        if max_depth >= 0 and level[q] + 1 > max_depth:
            return order[:0]
        for b in range(256):
            s = table[q, b]
            if level[s] == -1:
                level[s] = level[q] + 1
                order[count] = s
                count += 1
        if max_states >= 0 and count > max_states:
            return order[:0]
    return order[:count]


def _residual_runs(table, order):  # pragma: no cover
    # (compiled) The rows of ``order`` renumbered (``order[i]`` is i + 1, dead 0), each as
    # (target, run length) pairs of equal consecutive targets; rows are 256 entries, so
    # the pairs decode to one table only.
    renumber = np.zeros(table.shape[0], np.int32)
    for i in range(order.size):
        renumber[order[i]] = i + 1
    out = np.empty(2 * 256 * order.size, np.int32)
    m = 0
    for i in range(order.size):
        q = order[i]
        run = 1
        prev = renumber[table[q, 0]]
        for b in range(1, 256):
            cur = renumber[table[q, b]]
            if cur == prev:
                run += 1
            else:
                out[m] = prev
                out[m + 1] = run
                m += 2
                prev = cur
                run = 1
        out[m] = prev
        out[m + 1] = run
        m += 2
    return out[:m]


def last_byte_key(dfa: ByteDFA, row: np.ndarray) -> str | None:
    """The key under which `TokenTables` shares the table of a state whose row ``row``
    reads one byte, into an accepting state that reads nothing more; else None.

    Such a state is the last byte of a literal (before a key's closing quote, the ``e``
    of ``true``): the tokens equal to that byte are inside and every longer token
    starting with it crosses after one byte, so its table depends on the byte alone.
    On Llama 3 over a thousand tokens start with ``"``, and the walk of that subtree was
    repeated for every fresh key of every schema at the mask just before its closing
    quote.  (The residual digest would find the same table at about the cost of the walk.)

    Example:
        >>> from constrained.automata.byte_dfa import compile_regex
        >>> a, b = compile_regex('"ab"'), compile_regex('"xyz"')
        >>> key = lambda d, text: last_byte_key(d, d.transitions[d.run(text)])
        >>> key(a, b'"ab'), key(b, b'"xyz'), key(a, b'"a')
        ('last-byte:34', 'last-byte:34', None)
    """
    byte = int(row.argmax())
    after = int(row[byte])
    if after == 0 or not dfa.accepting[after] or dfa.transitions[after].any():
        return None
    return f"last-byte:{byte}"


def successor_lists(dfa: ByteDFA) -> list[list[int]]:
    """Per state, its distinct successor states in order of the first byte leading there."""
    return [list(dict.fromkeys(row)) for row in dfa.transitions.tolist()]
