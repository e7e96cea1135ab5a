"""The walk of `VocabTrie.scan` as compiled code (numba): one DFA state's token table.

The trie's nodes are flattened into one array per field in depth-first preorder
(`FlatTrie`): a node's subtree is the nodes that follow it up to ``skip``, so the
walk reads every array front to back, steps the DFA once per node it reaches
(the state after each depth kept on a small stack) and leaves a node where the
DFA dies with one jump past its subtree.  A key literal's state reaches tens of
nodes, a string body nearly all of them (~270,000 for Llama 3's 128k tokens:
~1.2 ms; the level-by-level walk this replaced, with a frontier array per level,
took ~6 ms, and the numpy walk before it a dozen array operations per level).

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

from constrained.automata.byte_dfa import ByteDFA, compiled_table

if TYPE_CHECKING:
    from constrained.engine.token_trie import VocabTrie

_EMPTY = np.zeros(0, np.int64)
_FLAT: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()    # VocabTrie -> its FlatTrie
_SCRATCH = threading.local()          # per thread: FlatTrie -> work arrays of `_walk`


@dataclass(frozen=True, eq=False)
class FlatTrie:
    """A `VocabTrie`'s nodes in depth-first preorder (a node before its subtree, siblings
    in byte order), one flat array per field.  Sorted tokens and preorder agree: a
    subtree is the nodes from its root to ``skip[root]``, so a walk leaves a dead one
    with one jump and otherwise reads every array front to back."""

    byte: np.ndarray        # int32 per node: its last byte
    depth: np.ndarray       # int32: its prefix's length (1 for a token's first byte)
    lo: np.ndarray          # int32: first sorted token of its subtree
    hi: np.ndarray          # int32: one past its last
    nend: np.ndarray        # int32: tokens equal to its prefix (they open its run)
    skip: np.ndarray        # int32: the first node after its subtree
    first: np.ndarray       # int32[256]: the depth-1 node of each byte (-1: none)
    order: np.ndarray       # int64: sorted position -> token id
    max_depth: int          # the longest token's length

    @staticmethod
    def of(trie: VocabTrie) -> FlatTrie:
        """The flat arrays of ``trie`` (built once per trie)."""
        hit = _FLAT.get(trie)
        if hit is not None:
            return hit

        def cat(field: str) -> np.ndarray:
            parts = [getattr(lv, field) for lv in trie.levels]
            return np.concatenate(parts).astype(np.int32) if parts else np.zeros(0, np.int32)

        depth = np.concatenate([np.full(len(lv.byte), d + 1, np.int32) for d, lv in enumerate(trie.levels)]) \
            if trie.levels else np.zeros(0, np.int32)
        lo = cat("lo")
        # preorder: by first token, a node before its descendants sharing it (they are deeper)
        pre = np.lexsort((depth, lo))
        lo, hi, depth = lo[pre], cat("hi")[pre], depth[pre]
        first = np.full(256, -1, np.int32)
        roots = np.flatnonzero(depth == 1)
        byte = cat("byte")[pre]
        first[byte[roots]] = roots
        flat = FlatTrie(byte=byte, depth=depth, lo=lo, hi=hi, nend=cat("nend")[pre],
                        skip=np.searchsorted(lo, hi, side="left").astype(np.int32), first=first,
                        order=trie.order.astype(np.int64), max_depth=len(trie.levels))
        _FLAT[trie] = flat
        return flat


def _scratch(flat: FlatTrie) -> tuple[np.ndarray, ...]:
    """This thread's work arrays for walks over ``flat``: the inside tokens' positions (one
    per token, with room to write one past the last), three for split ranges (at most one
    per node) and two state stacks (one entry per depth)."""
    per = getattr(_SCRATCH, "arrays", None)
    if per is None:
        per = _SCRATCH.arrays = weakref.WeakKeyDictionary()
    hit = per.get(flat)
    if hit is None:
        nodes = int(flat.byte.size) + 1
        stack = flat.max_depth + 1
        hit = per[flat] = (np.empty(int(flat.order.size) + 1, np.int32), np.empty(nodes, np.int32),
                           np.empty(nodes, np.int32), np.empty(nodes, np.int32),
                           np.empty(stack, np.int64), np.empty(stack, np.int64))
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
    inside_pos, split_lo, split_hi, split_depth, stack, _ = _scratch(flat)
    n_inside, n_split = _compiled_walk()(
        flat.byte, flat.depth, flat.lo, flat.hi, flat.nend, flat.skip, flat.first, starts,
        compiled_table(dfa), dfa.accepting.view(np.uint8), np.int32(state),
        inside_pos, split_lo, split_hi, split_depth, stack)
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
    inside_pos, split_lo, split_hi, split_depth, stack, _ = _scratch(flat)
    ids, packed, cross_toks, cross_pos, dense = _compiled_table_walk()(
        flat.byte, flat.depth, flat.lo, flat.hi, flat.nend, flat.skip, flat.first, flat.order,
        compiled_table(dfa), dfa.accepting.view(np.uint8), np.int32(state),
        np.int64(size), np.int64(sparse_max), inside_pos, split_lo, split_hi, split_depth, stack)
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
    _, split_lo, split_hi, split_depth, stack, ref_stack = _scratch(flat)
    ids, packed, cross_toks, cross_pos, dense = _compiled_derived_walk()(
        flat.byte, flat.depth, flat.lo, flat.hi, flat.nend, flat.skip, flat.first, flat.order,
        compiled_table(dfa), dfa.accepting.view(np.uint8), np.int32(state),
        np.int32(ref), np.asarray(differing, dtype=np.int32), base_inside, np.asarray(base_cross_toks, dtype=np.int32),
        np.asarray(base_cross_pos, dtype=np.int32), np.int64(size), np.int64(sparse_max),
        split_lo, split_hi, split_depth, stack, ref_stack)
    return (None, packed, cross_toks, cross_pos) if dense else (ids, None, cross_toks, cross_pos)


def _ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``concatenate([arange(s, s + c) for s, c in zip(starts, counts)])`` without a loop."""
    before = np.cumsum(counts) - counts
    return np.repeat(starts - before, counts) + np.arange(int(counts.sum()))


@functools.cache
def _compiled_walk():
    """`_walk` compiled (numba imported on the first walk)."""
    import numba

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


def _table_walk(byte, depth, lo, hi, nend, skip, first, order, table, accepting, state, size, sparse_max,
                inside_pos, split_lo, split_hi, split_depth, stack):  # pragma: no cover
    # (compiled: the tests compare the tables it makes with a per-token reference scan)
    starts = np.arange(256, dtype=np.int32)     # (a dead first byte is left at once)
    n_inside, n_split = _walk_compiled(byte, depth, lo, hi, nend, skip, first, starts, table, accepting, state,
                                       inside_pos, split_lo, split_hi, split_depth, stack)
    packed = np.zeros(((size + 31) // 32) * 4, np.uint8)     # the inside set (little bit order)
    for i in range(n_inside):
        t = order[inside_pos[i]]
        packed[t >> 3] |= np.uint8(1 << (t & 7))
    keys = _crossing_keys(order, packed, split_lo, split_hi, split_depth, n_split, size)
    return _table_parts(order, inside_pos, n_inside, packed, keys, size, sparse_max)


def _derived_walk(byte, depth, lo, hi, nend, skip, first, order, table, accepting, state, ref, differing,
                  base_inside, base_cross_toks, base_cross_pos, size, sparse_max,
                  split_lo, split_hi, split_depth, stack, ref_stack):  # pragma: no cover
    # (compiled: the tests compare derived tables with a per-token reference scan)
    # ``redo``: the tokens whose entries the walk decides (they end at a node it walks, or
    # below a child where the state dies); every other token keeps the reference's entries.
    # ``ref_stack[d]``: the reference's state beside the walk's at depth ``d``, -1 once the
    # two paths accepted differently.
    steps = table.ravel()
    packed = base_inside.copy()
    redo = np.zeros(packed.size, np.uint8)
    n_split = 0
    stack[0] = state
    ref_stack[0] = ref
    for k in range(differing.size):
        root = first[differing[k]]
        if root < 0:
            continue
        i = root
        end = skip[root]
        while i < end:
            d = depth[i]
            q = steps[stack[d - 1] * 256 + byte[i]]
            if q == 0:
                _set_dead(order, lo[i], hi[i], packed, redo)
                i = skip[i]
                continue
            r = ref_stack[d - 1]
            r2 = -1
            if r >= 0:
                r2 = steps[r * 256 + byte[i]]
                if r2 == q and d > 1:
                    i = skip[i]                  # the paths meet: the reference's entries stand
                    continue
                if accepting[q] != accepting[r2]:
                    r2 = -1
            stack[d] = q
            ref_stack[d] = r2
            start = lo[i]
            ends = nend[i]
            for p in range(start, start + ends):         # tokens spelled like this prefix: inside
                t = order[p]
                packed[t >> 3] |= np.uint8(1 << (t & 7))
                redo[t >> 3] |= np.uint8(1 << (t & 7))
            if accepting[q] and start + ends < hi[i]:
                split_lo[n_split] = start + ends
                split_hi[n_split] = hi[i]
                split_depth[n_split] = d
                n_split += 1
            i += 1
    # crossing points: the reference's of the tokens the walk left alone, the walk's of
    # those it decided (a split range also covers tokens in subtrees left to the reference)
    total = base_cross_toks.size
    for j in range(n_split):
        total += split_hi[j] - split_lo[j]
    keys = np.empty(total, np.int64)
    m = 0
    for j in range(base_cross_toks.size):
        t = base_cross_toks[j]
        if not (redo[t >> 3] >> (t & 7)) & 1:
            keys[m] = base_cross_pos[j] * size + t
            m += 1
    for j in range(n_split):
        for p in range(split_lo[j], split_hi[j]):
            t = order[p]
            if (redo[t >> 3] >> (t & 7)) & 1 and not (packed[t >> 3] >> (t & 7)) & 1:
                keys[m] = split_depth[j] * size + t
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


def _walk(byte, depth, lo, hi, nend, skip, first, starts, table, accepting, state,
          inside_pos, split_lo, split_hi, split_depth, stack):  # pragma: no cover
    # (compiled: coverage cannot see it; tests compare it with a per-token reference scan)
    # Depth first over each live first byte's subtree, in preorder: every array is read
    # front to back, a dead node is left with one jump past its subtree, and
    # ``stack[d]`` holds the state after the node's first ``d`` bytes.  The loop has no
    # branch on whether a node ends tokens (most end one or none): its first position is
    # written either way, past the last one read when it ends none (``inside_pos`` has
    # room for that).  Split ranges: at most one per node.
    steps = table.ravel()
    stack[0] = state
    n_inside = 0
    n_split = 0
    for k in range(starts.size):
        root = first[starts[k]]
        if root < 0:
            continue
        i = root
        end = skip[root]
        while i < end:
            d = depth[i]
            q = steps[stack[d - 1] * 256 + byte[i]]
            if q == 0:
                i = skip[i]
                continue
            stack[d] = q
            start = lo[i]
            ends = nend[i]
            inside_pos[n_inside] = start
            for j in range(1, ends):             # a vocabulary spelling several ids alike
                inside_pos[n_inside + j] = start + j
            n_inside += ends
            if accepting[q] and start + ends < hi[i]:    # the lexeme may end after `d` bytes
                split_lo[n_split] = start + ends
                split_hi[n_split] = hi[i]
                split_depth[n_split] = d
                n_split += 1
            i += 1
    return n_inside, n_split


_walk_compiled = _walk    # replaced by its compiled version in `_compiled_table_walk`
