"""The vocabulary as a trie of byte prefixes, and one DFA state's token table read off it.

Sorted by their bytes, the tokens sharing a prefix are a contiguous run, so the
trie is stored level by level as numpy arrays (no Python object per node): a node
at depth ``d`` is the prefix of length ``d`` of the first token of its run, with

* ``byte``: its last byte;
* ``lo``/``hi``: its run of sorted tokens (its subtree);
* ``nend``: how many tokens equal the prefix (they open its run; more than one
  where a vocabulary spells several ids alike);
* ``child_lo``/``child_hi``: its children, a contiguous range of the next level.

`VocabTrie.scan` walks a DFA over it from one state into the nodes where the DFA
is still live (compiled code over the nodes in depth-first preorder:
`constrained.engine.trie_walk`): a
token is *inside* when its own node is reached, and every token below a node
where the DFA accepts may end a lexeme there (a *split point*).  The work is the
number of live trie nodes (a few for a key literal, about a third of the
vocabulary's bytes for a string body), not the number of tokens times their
lengths.

Example:
    >>> import numpy as np
    >>> from constrained.automata.byte_dfa import compile_regex
    >>> trie = VocabTrie([b"a", b"ab", b"abc", b"b", b""])
    >>> inside, cross_toks, cross_pos = trie.scan(compile_regex("ab?"), 1)
    >>> sorted(np.flatnonzero(inside).tolist()), list(zip(cross_toks.tolist(), cross_pos.tolist()))
    ([0, 1], [(1, 1), (2, 1), (2, 2)])
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from constrained.automata.byte_dfa import ByteDFA
from constrained.engine.trie_walk import FlatTrie, walk


@dataclass(frozen=True)
class _Level:
    byte: np.ndarray       # int32: the node's last byte
    lo: np.ndarray         # int32: first sorted token of its subtree
    hi: np.ndarray         # int32: one past its last
    nend: np.ndarray       # int32: tokens equal to the prefix (the first of its run)
    child_lo: np.ndarray   # int32: its children in the next level
    child_hi: np.ndarray


class VocabTrie:
    """The byte trie of a vocabulary's non-empty tokens (see the module docstring)."""

    def __init__(self, token_bytes: Sequence[bytes]) -> None:
        self.size = len(token_bytes)
        ids = [i for i, b in enumerate(token_bytes) if b]
        ids.sort(key=token_bytes.__getitem__)
        self.order = np.asarray(ids, dtype=np.int64)          # sorted position -> token id
        n = len(ids)
        lengths = np.fromiter((len(token_bytes[i]) for i in ids), dtype=np.int64, count=n)
        width = int(lengths.max()) if n else 0
        mat = np.zeros((n, width), dtype=np.uint8)       # sorted tokens' bytes, zero padded
        row_start = np.cumsum(lengths) - lengths
        mat[np.repeat(np.arange(n), lengths), np.arange(int(lengths.sum())) - np.repeat(row_start, lengths)] = \
            np.frombuffer(b"".join(token_bytes[i] for i in ids), dtype=np.uint8)
        # lcp[k]: length of the common prefix of sorted tokens k - 1 and k
        lcp = np.zeros(n, dtype=np.int64)
        if n > 1:
            same = mat[1:] == mat[:-1]
            same &= np.arange(width)[None, :] < np.minimum(lengths[1:], lengths[:-1])[:, None]
            lcp[1:] = np.where(same.all(axis=1), np.minimum(lengths[1:], lengths[:-1]), np.argmin(same, axis=1))
        # run[k]: how many sorted tokens from k on are spelled like token k
        equal_prev = np.zeros(n, dtype=bool)
        equal_prev[1:] = (lcp[1:] == lengths[1:]) & (lengths[1:] == lengths[:-1])
        starts = np.flatnonzero(~equal_prev)
        run = np.zeros(n, dtype=np.int64)
        run[starts] = np.diff(np.append(starts, n))
        self.levels: list[_Level] = []
        creators_next = None
        for d in range(width, 0, -1):      # deepest first: a level's children are the next one's nodes
            creators = np.flatnonzero((lcp < d) & (lengths >= d))   # sorted tokens starting a depth-d node
            bounds = np.flatnonzero(lcp < d)                        # runs of prefix length d end there
            nxt = np.searchsorted(bounds, creators, side="right")
            hi = np.where(nxt < len(bounds), bounds[np.minimum(nxt, len(bounds) - 1)], n)
            if creators_next is None:
                child_lo = child_hi = np.zeros(len(creators), np.int64)
            else:
                child_lo = np.searchsorted(creators_next, creators, side="left")
                child_hi = np.searchsorted(creators_next, hi, side="left")
            nend = np.where(lengths[creators] == d, run[creators], 0)
            i32 = np.int32      # half the memory of int64
            self.levels.append(_Level(byte=mat[creators, d - 1].astype(i32), lo=creators.astype(i32),
                                      hi=hi.astype(i32), nend=nend.astype(i32), child_lo=child_lo.astype(i32),
                                      child_hi=child_hi.astype(i32)))
            creators_next = creators
        self.levels.reverse()              # levels[d - 1] holds depth d
        self.num_nodes = sum(len(lv.byte) for lv in self.levels)

    def scan(self, dfa: ByteDFA, state: int,
             first_bytes: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """From ``state`` of ``dfa``: (inside: bool[vocab size], split tokens, split positions).

        ``inside[t]``: every byte of token ``t`` keeps the DFA live.  The split pairs
        ``(token, position)``: the DFA accepts after ``position`` bytes of a longer
        token (every such point, inside tokens included), in no particular order.
        ``first_bytes`` (byte values) limits the scan to the tokens starting with one
        of them (`constrained.engine.table_derivation`)."""
        inside = np.zeros(self.size, dtype=bool)
        ids, split_toks, split_pos = self.scan_ids(dfa, state, first_bytes)
        inside[ids] = True
        return inside, split_toks, split_pos

    def scan_ids(self, dfa: ByteDFA, state: int,
                 first_bytes: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """`scan` with the inside tokens as distinct ids (int64, in no particular order)
        instead of a vocabulary-sized array: a key literal's state has a handful."""
        return walk(FlatTrie.of(self), dfa, state, first_bytes)
