"""Run one byte DFA over many tokens at once (numpy; no per-token Python loop).

For candidates ``i`` (token ``toks[i]``, starting at byte offset ``offs[i]`` in DFA
state ``starts[i]``) `scan_tokens` reports:

* ``live_end[i]``: the DFA is still live after the token's last byte (the token
  stays inside the lexeme, which may or may not be complete there);
* ``(split_idx, split_pos)``: every point strictly inside the token where the
  DFA is in an accepting state, i.e. where the lexeme may end and the remaining
  bytes ``token[split_pos:]`` must be read by whatever follows.

`scan_tokens` is the reference (numpy, and Python for a few candidates);
`scan_remainders` is the crossing walk's scan as one compiled loop (numba): the array
scan pays a dozen numpy calls per byte position whatever the number of candidates,
the compiled loop nanoseconds per byte.
"""

from __future__ import annotations

import functools

import numpy as np

from constrained.automata.byte_dfa import START, ByteDFA, compiled_table

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


def scan_remainders(dfa: ByteDFA, toks: np.ndarray, offs: np.ndarray, by_first: np.ndarray, byte_matrix: np.ndarray,
                    lengths: np.ndarray, stride: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The crossing walk's scan of a lexeme over candidate remainders, as one compiled loop
    (numba: loaded on first use, and by `constrained.warm_up`).  The candidates ``(toks[i],
    offs[i])`` are grouped by the first byte of their remainder, byte ``b``'s group being
    ``by_first[b]:by_first[b + 1]``; the groups of the bytes the lexeme can start with are
    read from the DFA's start state.  Returns ``(live, split_toks, split_offs)``: the
    distinct tokens that stay inside the lexeme to their end (sorted int32), and the
    distinct points where the lexeme may end strictly inside a remainder, sorted by
    ``tok * stride + off``.  `scan_tokens` is the reference (the tests compare them).

    Example:
        >>> from constrained.automata.byte_dfa import compile_regex
        >>> from constrained import TokenVocabulary
        >>> v = TokenVocabulary.from_token_bytes([b"ab", b"a,b", b"aa", b"b"], eos_ids=[])
        >>> toks, offs = np.array([0, 1, 2, 3]), np.array([0, 0, 1, 0])   # first bytes a, a, a, b
        >>> by_first = np.searchsorted([97, 97, 97, 98], np.arange(257))
        >>> live, st, so = scan_remainders(compile_regex("a,?"), toks, offs, by_first, v.byte_matrix, v.lengths, 4)
        >>> live.tolist(), st.tolist(), so.tolist()
        ([2], [0, 1, 1], [1, 1, 2])
    """
    return _compiled_remainders()(
        compiled_table(dfa), dfa.accepting.view(np.uint8),
        _read_only(toks, np.int64), _read_only(offs, np.int64), _read_only(by_first, np.int64),
        byte_matrix, np.asarray(lengths, dtype=np.int32), np.int64(stride))


def _read_only(a: np.ndarray, dtype) -> np.ndarray:
    """``a`` as a contiguous read-only array of ``dtype`` (itself when it is one already: the
    crossing sets keep theirs so), so that the compiled loop sees one set of argument types."""
    if a.dtype == dtype and a.flags.c_contiguous and not a.flags.writeable:
        return a
    out = np.array(a, dtype=dtype)
    out.setflags(write=False)
    return out


@functools.cache
def _compiled_remainders():
    import numba

    return numba.njit(cache=True, nogil=True)(_remainders_loop)


def _remainders_loop(table, accepting, toks, offs, by_first, byte_matrix, lengths, stride):  # pragma: no cover
    # (compiled: tests compare it with `scan_tokens`)
    n = 0
    room = 0                                    # split points: at most one per byte read
    for b in range(256):
        if table[START, b] != 0:
            for i in range(by_first[b], by_first[b + 1]):
                n += 1
                room += lengths[toks[i]] - offs[i]
    live = np.empty(n, np.int32)
    n_live = 0
    keys = np.empty(room, np.int64)
    m = 0
    for b in range(256):
        if table[START, b] == 0:
            continue
        for i in range(by_first[b], by_first[b + 1]):
            tok = toks[i]
            last = lengths[tok]
            q = START
            pos = offs[i]
            while pos < last:
                q = table[q, byte_matrix[tok, pos]]
                if q == 0:
                    break
                pos += 1
                if pos < last and accepting[q]:
                    keys[m] = tok * stride + pos
                    m += 1
            if pos == last and q != 0:
                live[n_live] = tok
                n_live += 1
    live = np.unique(live[:n_live])
    keys = np.unique(keys[:m])
    return live.astype(np.int32), keys // stride, keys % stride
