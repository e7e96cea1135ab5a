"""Run one byte DFA over many tokens at once (numpy; no per-token Python loop).

For candidates ``i`` (token ``toks[i]``, starting at byte offset ``offs[i]`` in DFA
state ``starts[i]``) `scan_tokens` reports:

* ``live_end[i]``: the DFA is still live after the token's last byte (the token
  stays inside the lexeme, which may or may not be complete there);
* ``(split_idx, split_pos)``: every point strictly inside the token where the
  DFA is in an accepting state, i.e. where the lexeme may end and the remaining
  bytes ``token[split_pos:]`` must be read by whatever follows.

`scan_tokens` is the reference (numpy, and Python for a few candidates);
`scan_tokens_compiled` is the same scan as one compiled loop (numba), which the
crossing walk uses: the array scan pays a dozen numpy calls per byte position
whatever the number of candidates, the compiled loop nanoseconds per byte.
"""

from __future__ import annotations

import functools

import numpy as np

from constrained.automata.byte_dfa import ByteDFA

SCALAR_CANDIDATES = 16   # up to this many candidates, byte by byte in Python beats whole-array steps


def scan_tokens(dfa: ByteDFA, starts: np.ndarray | int, toks: np.ndarray, offs: np.ndarray,
                byte_matrix: np.ndarray, lengths: np.ndarray,
                token_bytes=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """See the module docstring.  ``offs[i] < lengths[toks[i]]`` is required.  With
    ``token_bytes`` (the vocabulary's bytes per token id), a few candidates are stepped
    one by one in Python (same result)."""
    n = len(toks)
    if token_bytes is not None and 0 < n <= SCALAR_CANDIDATES:
        return _scan_few(dfa, starts, toks, offs, token_bytes)
    live_end = np.zeros(n, dtype=bool)
    if n == 0:
        empty = np.zeros(0, np.int64)
        return live_end, empty, empty
    table = dfa.transitions
    accepting = dfa.accepting
    idx = np.arange(n)
    st = np.broadcast_to(np.asarray(starts, dtype=np.int32), (n,)).copy()
    pos = offs.astype(np.int64, copy=True)
    ends = lengths[toks].astype(np.int64)
    rows = toks
    split_i: list[np.ndarray] = []
    split_p: list[np.ndarray] = []
    while idx.size:
        st = table[st, byte_matrix[rows, pos]]
        alive = st != 0
        if not alive.all():
            idx, st, pos, rows, ends = idx[alive], st[alive], pos[alive], rows[alive], ends[alive]
        pos += 1
        done = pos == ends
        if done.any():
            live_end[idx[done]] = True
            keep = ~done
            idx, st, pos, rows, ends = idx[keep], st[keep], pos[keep], rows[keep], ends[keep]
        acc = accepting[st]
        if acc.any():
            split_i.append(idx[acc])
            split_p.append(pos[acc])
    if split_i:
        return live_end, np.concatenate(split_i), np.concatenate(split_p)
    empty = np.zeros(0, np.int64)
    return live_end, empty, empty


def _scan_few(dfa: ByteDFA, starts: np.ndarray | int, toks: np.ndarray, offs: np.ndarray,
              token_bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`scan_tokens` for a few candidates, byte by byte."""
    step = dfa.transitions.item      # item(q, b): a Python int, no array scalar per byte
    accepting = dfa.accepting.item
    n = len(toks)
    first = [int(starts)] * n if np.ndim(starts) == 0 else np.asarray(starts).tolist()
    live_end = np.zeros(n, dtype=bool)
    split_i: list[int] = []
    split_p: list[int] = []
    for i, (tok, off, q) in enumerate(zip(toks.tolist(), offs.tolist(), first)):
        data = token_bytes[tok]
        last = len(data)
        for pos in range(off, last):
            q = step(q, data[pos])
            if not q:
                break
            if pos + 1 < last and accepting(q):
                split_i.append(i)
                split_p.append(pos + 1)
        else:
            live_end[i] = True
    return live_end, np.array(split_i, np.int64), np.array(split_p, np.int64)


def scan_tokens_compiled(dfa: ByteDFA, starts: np.ndarray | int, toks: np.ndarray, offs: np.ndarray,
                         byte_matrix: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`scan_tokens` as one compiled loop (numba: loaded on first use, and by
    `constrained.warm_up`); the same results, the split points in candidate order.

    Example:
        >>> from constrained.automata.byte_dfa import compile_regex
        >>> from constrained import TokenVocabulary
        >>> v = TokenVocabulary.from_token_bytes([b"ab", b"a,b", b"aa"], eos_ids=[])
        >>> live, si, sp = scan_tokens_compiled(compile_regex("a,?"), 1, np.array([0, 1, 2]), np.array([0, 0, 1]),
        ...                                     v.byte_matrix, v.lengths)
        >>> live.tolist(), si.tolist(), sp.tolist()
        ([False, False, True], [0, 1, 1], [1, 1, 2])
    """
    n = len(toks)
    if np.ndim(starts) == 0:
        first = np.full(n, int(starts), np.int32)
    else:
        first = np.asarray(starts, dtype=np.int32)
    live_end, split_i, split_p = _compiled_scan()(
        np.ascontiguousarray(dfa.transitions, dtype=np.int32), dfa.accepting.view(np.uint8), first,
        np.array(toks, dtype=np.int64), np.array(offs, dtype=np.int64), byte_matrix,
        np.asarray(lengths, dtype=np.int32))   # (own copies of the candidates: one set of argument types)
    return live_end.view(bool), split_i, split_p


@functools.cache
def _compiled_scan():
    import numba

    return numba.njit(cache=True, nogil=True)(_scan_loop)


def _scan_loop(table, accepting, starts, toks, offs, byte_matrix, lengths):  # pragma: no cover
    # (compiled: tests compare it with `scan_tokens`)
    n = toks.size
    room = 0                                    # split points: at most one per byte read
    for i in range(n):
        room += lengths[toks[i]] - offs[i]
    live_end = np.zeros(n, np.uint8)
    split_i = np.empty(room, np.int64)
    split_p = np.empty(room, np.int64)
    m = 0
    for i in range(n):
        tok = toks[i]
        last = lengths[tok]
        q = starts[i]
        pos = offs[i]
        while pos < last:
            q = table[q, byte_matrix[tok, pos]]
            if q == 0:
                break
            pos += 1
            if pos < last and accepting[q]:
                split_i[m] = i
                split_p[m] = pos
                m += 1
        if pos == last and q != 0:
            live_end[i] = 1
    return live_end, split_i[:m].copy(), split_p[:m].copy()
