"""The walk of `VocabTrie.scan` as compiled code (numba): one DFA state's token table.

The trie's levels are flattened into one array per field, nodes numbered level
after level (`FlatTrie`), and the walk goes level by level from the live first
bytes, stepping the DFA once per trie node it reaches (a level's live nodes in
order, so memory is read sequentially): a key literal's
state reaches tens of nodes, a string body a third of the trie.  Compiled, a
node costs nanoseconds; the level-by-level numpy walk it replaces paid a dozen
array operations per level whatever the number of live nodes (hundreds of
microseconds for a literal, milliseconds for a string body of a 128k vocabulary).

Three walks share that loop: `walk` (the inside ids and split points, for
`VocabTrie.scan_ids`), `walk_table` (the same walk made into a token table in the
same call) and `walk_derived_table` (a state's table from a similar state's: the trie
below the bytes where their rows differ, as far as their paths differ).

numba is imported on the first walk, not with the package (it costs ~0.7 s to
import), and compiles `_walk` then; the machine code is cached next to this module
(``cache=True``), so only the first process on a machine compiles it.

Example:
    >>> from constrained.automata.byte_dfa import compile_regex
    >>> from constrained.engine.token_trie import VocabTrie
    >>> trie = VocabTrie([b"a", b"ab", b"abc", b"b", b""])
    >>> ids, split_toks, split_pos = walk(FlatTrie.of(trie), compile_regex("ab?"), 1, None)
    >>> sorted(ids.tolist()), sorted(zip(split_toks.tolist(), split_pos.tolist()))
    ([0, 1], [(1, 1), (2, 1), (2, 2)])
"""

from __future__ import annotations

import functools
import threading
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from constrained.automata.byte_dfa import ByteDFA

if TYPE_CHECKING:
    from constrained.engine.token_trie import VocabTrie

_EMPTY = np.zeros(0, np.int64)
_FLAT: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()    # VocabTrie -> its FlatTrie
_SCRATCH = threading.local()          # per thread: FlatTrie -> work arrays of `_walk`


@dataclass(frozen=True, eq=False)
class FlatTrie:
    """A `VocabTrie`'s levels as flat arrays (node ids global, level after level)."""

    byte: np.ndarray        # int32 per node: its last byte
    lo: np.ndarray          # int32: first sorted token of its subtree
    hi: np.ndarray          # int32: one past its last
    nend: np.ndarray        # int32: tokens equal to its prefix (they open its run)
    child_lo: np.ndarray    # int32: its children (global ids)
    child_hi: np.ndarray
    first: np.ndarray       # int32[256]: the depth-1 node of each byte (-1: none)
    order: np.ndarray       # int64: sorted position -> token id

    @staticmethod
    def of(trie: VocabTrie) -> FlatTrie:
        """The flat arrays of ``trie`` (built once per trie)."""
        hit = _FLAT.get(trie)
        if hit is not None:
            return hit
        starts = np.cumsum([0] + [len(lv.byte) for lv in trie.levels])
        offsets = np.append(starts[1:], starts[-1])    # a level's children start at the next level

        def cat(parts: list[np.ndarray]) -> np.ndarray:
            return np.concatenate(parts).astype(np.int32) if parts else np.zeros(0, np.int32)

        first = np.full(256, -1, np.int32)
        if trie.levels:
            first[trie.levels[0].byte] = np.arange(len(trie.levels[0].byte), dtype=np.int32)
        flat = FlatTrie(byte=cat([lv.byte for lv in trie.levels]), lo=cat([lv.lo for lv in trie.levels]),
                        hi=cat([lv.hi for lv in trie.levels]), nend=cat([lv.nend for lv in trie.levels]),
                        child_lo=cat([lv.child_lo.astype(np.int64) + offsets[d] for d, lv in enumerate(trie.levels)]),
                        child_hi=cat([lv.child_hi.astype(np.int64) + offsets[d] for d, lv in enumerate(trie.levels)]),
                        first=first, order=trie.order.astype(np.int64))
        _FLAT[trie] = flat
        return flat


def _scratch(flat: FlatTrie) -> tuple[np.ndarray, ...]:
    """This thread's work arrays for walks over ``flat`` (one per token, one per level node)."""
    per = getattr(_SCRATCH, "arrays", None)
    if per is None:
        per = _SCRATCH.arrays = weakref.WeakKeyDictionary()
    hit = per.get(flat)
    if hit is None:
        tokens = int(flat.order.size)
        hit = per[flat] = tuple(np.empty(tokens + 256, np.int32) for _ in range(7))
    return hit


def walk(flat: FlatTrie, dfa: ByteDFA, state: int,
         first_bytes: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`VocabTrie.scan_ids`: (distinct inside token ids, split tokens, split positions)."""
    row = dfa.transitions[state]
    starts = np.flatnonzero(row).astype(np.int32)
    if first_bytes is not None:
        starts = np.intersect1d(starts, first_bytes).astype(np.int32)
    if starts.size == 0 or flat.byte.size == 0:
        return _EMPTY, _EMPTY, _EMPTY
    table = np.ascontiguousarray(dfa.transitions, dtype=np.int32)
    inside_pos, cur_node, cur_state, nxt_node, nxt_state = _scratch(flat)[:5]
    n_inside, split_lo, split_hi, split_depth, n_split = _compiled_walk()(
        flat.byte, flat.lo, flat.hi, flat.nend, flat.child_lo, flat.child_hi, flat.first, starts,
        table, dfa.accepting.view(np.uint8), np.int32(state), inside_pos, cur_node, cur_state, nxt_node, nxt_state)
    ids = flat.order[inside_pos[:n_inside]]
    if n_split == 0:
        return ids, _EMPTY, _EMPTY
    lo = split_lo[:n_split].astype(np.int64)
    counts = split_hi[:n_split].astype(np.int64) - lo
    return ids, flat.order[_ranges(lo, counts)], np.repeat(split_depth[:n_split].astype(np.int64), counts)


def walk_table(flat: FlatTrie, dfa: ByteDFA, state: int, size: int,
               sparse_max: int) -> tuple[np.ndarray | None, np.ndarray | None, np.ndarray, np.ndarray]:
    """One DFA state's token table from one compiled call: the walk of `walk` from every
    live byte made into the parts of a `StateTokenTable` (`StateTokenTable.of_walk`),
    ``(inside_ids, inside, cross_toks, cross_pos)``: the inside tokens as sorted int32 ids when at most
    ``sparse_max`` (``inside`` None), else as a packed bitset (``inside_ids`` None); the
    crossing points of the tokens not inside, sorted by position, then token.

    A table computed while the mask of a new parser state is asked for would otherwise
    pay a dozen numpy calls around the walk (~20 us on a 128k vocabulary, most of a key
    literal state's table)."""
    inside_pos, cur_node, cur_state, nxt_node, nxt_state = _scratch(flat)[:5]
    ids, packed, cross_toks, cross_pos, dense = _compiled_table_walk()(
        flat.byte, flat.lo, flat.hi, flat.nend, flat.child_lo, flat.child_hi, flat.first, flat.order,
        np.ascontiguousarray(dfa.transitions, dtype=np.int32), dfa.accepting.view(np.uint8), np.int32(state),
        np.int64(size), np.int64(sparse_max), inside_pos, cur_node, cur_state, nxt_node, nxt_state)
    return (None, packed, cross_toks, cross_pos) if dense else (ids, None, cross_toks, cross_pos)


def walk_derived_table(flat: FlatTrie, dfa: ByteDFA, state: int, ref: int, differing: np.ndarray,
                       base_inside: np.ndarray, base_cross_toks: np.ndarray, base_cross_pos: np.ndarray,
                       size: int, sparse_max: int) -> tuple[np.ndarray | None, np.ndarray | None, np.ndarray, np.ndarray]:
    """`walk_table` for a state whose row differs from state ``ref``'s only on the bytes
    ``differing`` (`constrained.engine.table_derivation`), from ``ref``'s table (``base_*``,
    its inside set packed).  Same result layout as `walk_table`.

    The trie is walked below the differing bytes only, with ``ref``'s state beside the
    state's, and a subtree is left to the reference's table where the two paths meet: at a
    node where both are in the same DFA state, having accepted at the same positions on the
    way, every token below reads the same from both.  A key that is none of a few names
    meets the string body one byte after each name's prefix stops, so the walk follows the
    names, not the thousands of tokens that start like them."""
    cur_node, cur_state, cur_ref, nxt_node, nxt_state, nxt_ref = _scratch(flat)[1:]
    ids, packed, cross_toks, cross_pos, dense = _compiled_derived_walk()(
        flat.byte, flat.lo, flat.hi, flat.nend, flat.child_lo, flat.child_hi, flat.first, flat.order,
        np.ascontiguousarray(dfa.transitions, dtype=np.int32), dfa.accepting.view(np.uint8), np.int32(state),
        np.int32(ref), np.asarray(differing, dtype=np.int32), base_inside, np.asarray(base_cross_toks, dtype=np.int32),
        np.asarray(base_cross_pos, dtype=np.int32), np.int64(size), np.int64(sparse_max),
        cur_node, cur_state, cur_ref, nxt_node, nxt_state, nxt_ref)
    return (None, packed, cross_toks, cross_pos) if dense else (ids, None, cross_toks, cross_pos)


def _ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``concatenate([arange(s, s + c) for s, c in zip(starts, counts)])`` without a loop."""
    before = np.cumsum(counts) - counts
    return np.repeat(starts - before, counts) + np.arange(int(counts.sum()))


@functools.cache
def _compiled_walk():
    """`_walk` compiled (numba imported and its helper compiled first: `_walk` calls it by name)."""
    import numba

    global _push_split
    _push_split = numba.njit(cache=True, nogil=True)(_push_split_python)
    return numba.njit(cache=True, nogil=True)(_walk)


@functools.cache
def _compiled_table_walk():
    """`_table_walk` compiled (after `_walk`, which it calls by name)."""
    import numba

    _compile_helpers()
    return numba.njit(cache=True, nogil=True)(_table_walk)


@functools.cache
def _compiled_derived_walk():
    """`_derived_walk` compiled (after the helpers it calls by name)."""
    import numba

    _compile_helpers()
    return numba.njit(cache=True, nogil=True)(_derived_walk)


@functools.cache
def _compile_helpers() -> None:
    """The compiled versions of what `_table_walk` and `_derived_walk` call by name."""
    import numba

    global _walk_compiled, _crossing_keys, _table_parts, _set_dead
    _walk_compiled = _compiled_walk()
    _set_dead = numba.njit(cache=True, nogil=True)(_set_dead)
    _crossing_keys = numba.njit(cache=True, nogil=True)(_crossing_keys)
    _table_parts = numba.njit(cache=True, nogil=True)(_table_parts)


def _table_walk(byte, lo, hi, nend, child_lo, child_hi, first, order, table, accepting, state, size, sparse_max,
                inside_pos, cur_node, cur_state, nxt_node, nxt_state):  # pragma: no cover
    # (compiled: the tests compare the tables it makes with a per-token reference scan)
    row = table[state]
    count = 0
    for b in range(256):
        if row[b] != 0:
            count += 1
    starts = np.empty(count, np.int32)
    count = 0
    for b in range(256):
        if row[b] != 0:
            starts[count] = b
            count += 1
    n_inside, split_lo, split_hi, split_depth, n_split = _walk_compiled(
        byte, lo, hi, nend, child_lo, child_hi, first, starts, table, accepting, state,
        inside_pos, cur_node, cur_state, nxt_node, nxt_state)
    packed = np.zeros(((size + 31) // 32) * 4, np.uint8)     # the inside set (little bit order)
    for i in range(n_inside):
        t = order[inside_pos[i]]
        packed[t >> 3] |= np.uint8(1 << (t & 7))
    keys = _crossing_keys(order, packed, split_lo, split_hi, split_depth, n_split, size)
    return _table_parts(order, inside_pos, n_inside, packed, keys, size, sparse_max)


def _derived_walk(byte, lo, hi, nend, child_lo, child_hi, first, order, table, accepting, state, ref, differing,
                  base_inside, base_cross_toks, base_cross_pos, size, sparse_max,
                  cur_node, cur_state, cur_ref, nxt_node, nxt_state, nxt_ref):  # pragma: no cover
    # (compiled: the tests compare derived tables with a per-token reference scan)
    # ``redo``: the tokens whose entries the walk decides (they end at a node it walks, or
    # below a child where the state dies); every other token keeps the reference's entries.
    # A frontier entry's reference state is -1 once the two paths accepted differently.
    steps = table.ravel()
    packed = base_inside.copy()
    redo = np.zeros(packed.size, np.uint8)
    split = np.empty((3, 64), np.int32)      # split ranges: first and past-last token, depth
    n_split = 0
    n_cur = 0
    for k in range(differing.size):
        b = differing[k]
        node = first[b]
        if node < 0:
            continue
        q = table[state, b]
        if q == 0:
            _set_dead(order, lo[node], hi[node], packed, redo)
            continue
        r = table[ref, b]
        cur_node[n_cur] = node
        cur_state[n_cur] = q
        cur_ref[n_cur] = r if accepting[q] == accepting[r] else -1
        n_cur += 1
    depth = 1
    while n_cur > 0:
        n_nxt = 0
        for i in range(n_cur):
            node = cur_node[i]
            q = cur_state[i]
            r = cur_ref[i]
            start = lo[node]
            ends = nend[node]
            for p in range(start, start + ends):         # tokens spelled like this prefix: inside
                t = order[p]
                packed[t >> 3] |= np.uint8(1 << (t & 7))
                redo[t >> 3] |= np.uint8(1 << (t & 7))
            if accepting[q] and start + ends < hi[node]:
                split = _push_split(split, n_split, start + ends, hi[node], depth)
                n_split += 1
            base = q * 256
            for c in range(child_lo[node], child_hi[node]):
                q2 = steps[base + byte[c]]
                if q2 == 0:
                    _set_dead(order, lo[c], hi[c], packed, redo)
                    continue
                r2 = -1
                if r >= 0:
                    r2 = steps[r * 256 + byte[c]]
                    if r2 == q2:
                        continue                           # the paths meet: the reference's entries stand
                    if accepting[q2] != accepting[r2]:
                        r2 = -1
                nxt_node[n_nxt] = c
                nxt_state[n_nxt] = q2
                nxt_ref[n_nxt] = r2
                n_nxt += 1
        cur_node, nxt_node = nxt_node, cur_node
        cur_state, nxt_state = nxt_state, cur_state
        cur_ref, nxt_ref = nxt_ref, cur_ref
        n_cur = n_nxt
        depth += 1
    # crossing points: the reference's of the tokens the walk left alone, the walk's of
    # those it decided (a split range also covers tokens in subtrees left to the reference)
    total = base_cross_toks.size
    for j in range(n_split):
        total += split[1, j] - split[0, j]
    keys = np.empty(total, np.int64)
    m = 0
    for j in range(base_cross_toks.size):
        t = base_cross_toks[j]
        if not (redo[t >> 3] >> (t & 7)) & 1:
            keys[m] = base_cross_pos[j] * size + t
            m += 1
    for j in range(n_split):
        for p in range(split[0, j], split[1, j]):
            t = order[p]
            if (redo[t >> 3] >> (t & 7)) & 1 and not (packed[t >> 3] >> (t & 7)) & 1:
                keys[m] = split[2, j] * size + t
                m += 1
    keys = np.sort(keys[:m])
    n = 0
    for v in packed.view(np.uint32):          # popcount (SWAR): the packed size is a multiple of 4 bytes
        v = v - ((v >> 1) & 0x55555555)
        v = (v & 0x33333333) + ((v >> 2) & 0x33333333)
        n += (((v + (v >> 4)) & 0x0F0F0F0F) * 0x01010101 & 0xFFFFFFFF) >> 24
    if n > sparse_max:
        return np.empty(0, np.int32), packed, (keys % size).astype(np.int32), (keys // size).astype(np.int32), True
    ids = np.empty(n, np.int32)
    n = 0
    for i in range(packed.size):
        v = packed[i]
        if v:
            for bit in range(8):
                if (v >> bit) & 1:
                    ids[n] = i * 8 + bit
                    n += 1
    return ids, np.empty(0, np.uint8), (keys % size).astype(np.int32), (keys // size).astype(np.int32), False


def _set_dead(order, lo, hi, packed, redo):  # pragma: no cover
    """The tokens at sorted positions ``lo..hi`` are not inside, and decided by the walk."""
    for p in range(lo, hi):
        t = order[p]
        packed[t >> 3] &= np.uint8(~(1 << (t & 7)) & 255)
        redo[t >> 3] |= np.uint8(1 << (t & 7))


def _crossing_keys(order, packed, split_lo, split_hi, split_depth, n_split, size):  # pragma: no cover
    """Sorted ``position * size + token`` of the walk's split points of tokens not inside
    ``packed``."""
    total = 0
    for j in range(n_split):
        total += split_hi[j] - split_lo[j]
    keys = np.empty(total, np.int64)
    m = 0
    for j in range(n_split):
        for k in range(split_lo[j], split_hi[j]):
            t = order[k]
            if not (packed[t >> 3] >> (t & 7)) & 1:
                keys[m] = split_depth[j] * size + t
                m += 1
    return np.sort(keys[:m])


def _table_parts(order, inside_pos, n_inside, packed, keys, size, sparse_max):  # pragma: no cover
    """`_table_walk`'s result: sorted ids (few inside tokens) or the packed set, and the
    crossing points by position, then token."""
    cross_pos = (keys // size).astype(np.int32)
    cross_toks = (keys % size).astype(np.int32)
    if n_inside > sparse_max:
        return np.empty(0, np.int32), packed, cross_toks, cross_pos, True
    ids = np.empty(n_inside, np.int32)
    for i in range(n_inside):
        ids[i] = order[inside_pos[i]]
    ids.sort()
    return ids, np.empty(0, np.uint8), cross_toks, cross_pos, False


def _walk(byte, lo, hi, nend, child_lo, child_hi, first, starts, table, accepting, state,
          inside_pos, cur_node, cur_state, nxt_node, nxt_state):  # pragma: no cover
    # (compiled: coverage cannot see it; tests compare it with a per-token reference scan)
    # Breadth first: a level's live nodes in increasing order, so their children (contiguous
    # ranges of the next level, in the same order) are read sequentially, not by jumps.
    # ``inside_pos`` holds every token and a frontier every node of a level (at most one per
    # token, plus the first bytes): no bounds to check in the loops.
    steps = table.ravel()
    n_cur = 0
    for k in range(starts.size):
        b = starts[k]
        node = first[b]
        if node >= 0:
            cur_node[n_cur] = node
            cur_state[n_cur] = table[state, b]
            n_cur += 1
    n_inside = 0
    split = np.empty((3, 64), np.int32)      # split ranges: first and past-last token, depth
    n_split = 0
    depth = 1
    while n_cur > 0:
        n_nxt = 0
        for i in range(n_cur):
            node = cur_node[i]
            q = cur_state[i]
            start = lo[node]
            ends = nend[node]
            for j in range(ends):                # tokens spelled exactly like this prefix
                inside_pos[n_inside] = start + j
                n_inside += 1
            if accepting[q] and start + ends < hi[node]:    # the lexeme may end after `depth` bytes
                split = _push_split(split, n_split, start + ends, hi[node], depth)
                n_split += 1
            base = q * 256
            for c in range(child_lo[node], child_hi[node]):
                q2 = steps[base + byte[c]]
                if q2 != 0:
                    nxt_node[n_nxt] = c
                    nxt_state[n_nxt] = q2
                    n_nxt += 1
        cur_node, nxt_node = nxt_node, cur_node
        cur_state, nxt_state = nxt_state, cur_state
        n_cur = n_nxt
        depth += 1
    return n_inside, split[0], split[1], split[2], n_split


def _push_split_python(split, n, first, past, depth):  # pragma: no cover
    """``split`` (3 rows: a range's first token, past-last token, depth) with entry ``n``
    set, doubled first when full."""
    if n == split.shape[1]:
        grown = np.empty((3, 2 * n), np.int32)
        grown[:, :n] = split
        split = grown
    split[0, n] = first
    split[1, n] = past
    split[2, n] = depth
    return split


_push_split = _push_split_python   # replaced by its compiled version in `_compiled_walk`
_walk_compiled = _walk    # replaced by its compiled version in `_compiled_table_walk`
