"""The vocabulary as a trie of byte prefixes, and one DFA state's token table read off it.

Sorted by their bytes, the tokens sharing a prefix are a contiguous run, so the
trie is stored level by level as numpy arrays (no Python object per node): a node
at depth ``d`` is the prefix of length ``d`` of the first token of its run, with

* ``byte``: its last byte;
* ``lo``/``hi``: its run of sorted tokens (its subtree);
* ``nend``: how many tokens equal the prefix (they open its run; more than one
  where a vocabulary spells several ids alike);
* ``child_lo``/``child_hi``: its children, a contiguous range of the next level.

`VocabTrie.scan` walks a DFA over it from one state, level by level, keeping only
the nodes where the DFA is still live: a token is *inside* when its own node is
reached, and every token below a node where the DFA accepts may end a lexeme
there (a *split point*).  The work is the number of live trie nodes (a few for a
key literal, about a third of the vocabulary's bytes for a string body), not the
number of tokens times their lengths.

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

_EMPTY = np.zeros(0, np.int64)
DENSE_FRACTION = 4   # step a whole level when at least 1/DENSE_FRACTION of the one above is live
SCALAR_FRONTIER = 4  # step node by node while at most this many nodes are live


@dataclass(frozen=True)
class _Level:
    byte: np.ndarray       # int32: the node's last byte
    lo: np.ndarray         # int32: first sorted token of its subtree
    hi: np.ndarray         # int32: one past its last
    nend: np.ndarray       # int32: tokens equal to the prefix (the first of its run)
    child_lo: np.ndarray   # int32: its children in the next level
    child_hi: np.ndarray
    parent: np.ndarray     # int32: its parent in the previous level (0 at depth 1)
    end_node: np.ndarray   # int32: the nodes tokens end at, once per token
    end_token: np.ndarray  # int32: those tokens


def _ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``concatenate([arange(s, s + c) for s, c in zip(starts, counts)])`` without a loop."""
    total = int(counts.sum())
    if total == 0:
        return _EMPTY
    before = np.cumsum(counts) - counts
    return np.repeat(starts - before, counts) + np.arange(total)


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
            ending = np.flatnonzero(nend)
            i32 = np.int32      # half the memory of int64 (~9 MB for a 128k-token vocabulary)
            self.levels.append(_Level(byte=mat[creators, d - 1].astype(i32), lo=creators.astype(i32),
                                      hi=hi.astype(i32), nend=nend.astype(i32), child_lo=child_lo.astype(i32),
                                      child_hi=child_hi.astype(i32), parent=np.zeros(len(creators), i32),
                                      end_node=np.repeat(ending, nend[ending]).astype(i32),
                                      end_token=self.order[_ranges(creators[ending], nend[ending])].astype(i32)))
            if creators_next is not None:   # the next level's parents
                self.levels[-2].parent[:] = np.repeat(np.arange(len(creators)), child_hi - child_lo)
            creators_next = creators
        self.levels.reverse()              # levels[d - 1] holds depth d
        if self.levels:
            first = self.levels[0]
            self._by_first_byte = np.full(256, -1, np.int64)
            self._by_first_byte[first.byte] = np.arange(len(first.byte))
        self.num_nodes = sum(len(lv.byte) for lv in self.levels)

    def scan(self, dfa: ByteDFA, state: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """From ``state`` of ``dfa``: (inside: bool[vocab size], split tokens, split positions).

        ``inside[t]``: every byte of token ``t`` keeps the DFA live.  The split pairs
        ``(token, position)``: the DFA accepts after ``position`` bytes of a longer
        token (every such point, inside tokens included), in no particular order."""
        inside = np.zeros(self.size, dtype=bool)
        if not self.levels:
            return inside, _EMPTY, _EMPTY
        table = dfa.transitions
        flat = table.reshape(-1)
        accepting = dfa.accepting
        row = table[state]
        live_bytes = np.flatnonzero(row)
        nodes = self._by_first_byte[live_bytes]
        keep = nodes >= 0
        nodes, st = nodes[keep], row[live_bytes[keep]].astype(np.int64)
        runs = _Runs()
        dense = None        # the states of the whole level (0: dead), when it was stepped whole
        d = 0
        while True:
            lv = self.levels[d]
            nxt = self.levels[d + 1] if d + 1 < len(self.levels) else None
            if dense is None and nodes.size <= SCALAR_FRONTIER:
                # a few live nodes (a literal, a key): node by node costs less than whole-array steps
                nodes, st = self._step_few(lv, nxt, d, nodes.tolist(), st.tolist(), table, accepting, runs)
                d += 1
                if nodes.size == 0:
                    break
                continue
            if dense is not None:
                ends = dense.take(lv.end_node) != 0
                runs.inside_tokens.append(lv.end_token[ends])
                acc = np.flatnonzero(accepting.take(dense))
                if acc.size:
                    runs.add_splits(lv.lo[acc] + lv.nend[acc], lv.hi[acc], d + 1)
                live = int(np.count_nonzero(dense))
            else:
                nend = lv.nend[nodes]
                runs.inside_starts.append(lv.lo[nodes])
                runs.inside_counts.append(nend)
                acc = accepting[st]
                if acc.any():       # the lexeme may end after d + 1 bytes of every longer token below
                    runs.add_splits(lv.lo[nodes[acc]] + nend[acc], lv.hi[nodes[acc]], d + 1)
                live = nodes.size
            d += 1
            if live == 0 or nxt is None:
                break
            if live * DENSE_FRACTION >= lv.byte.size:
                # most of the level is live: step the whole next level (dead parents stay dead)
                if dense is None:
                    dense = np.zeros(lv.byte.size, np.int64)
                    dense[nodes] = st
                dense = flat.take(dense.take(nxt.parent) * 256 + nxt.byte)
                continue
            if dense is not None:
                nodes = np.flatnonzero(dense)
                st = dense.take(nodes)
                dense = None
            lo, hi = lv.child_lo[nodes], lv.child_hi[nodes]
            counts = hi - lo
            children = _ranges(lo, counts)
            if not children.size:
                break
            st = flat.take(np.repeat(st, counts) * 256 + nxt.byte.take(children))
            alive = st != 0
            nodes, st = children[alive], st[alive]
        return runs.finish(inside, self.order)

    @staticmethod
    def _step_few(lv: _Level, nxt: _Level | None, d: int, nodes: list[int], states: list[int],
                  table: np.ndarray, accepting: np.ndarray, runs: _Runs) -> tuple[np.ndarray, np.ndarray]:
        """One level of `scan` for a few live ``nodes`` (in DFA ``states``), node by node;
        returns the live nodes and states of the next level."""
        next_nodes, next_states = [], []
        for node, q in zip(nodes, states):
            lo = int(lv.lo[node])
            nend = int(lv.nend[node])
            if nend:
                runs.few_inside.append((lo, nend))
            if accepting[q]:
                runs.few_splits.append((lo + nend, int(lv.hi[node]), d + 1))
            if nxt is None:
                continue
            c0, c1 = int(lv.child_lo[node]), int(lv.child_hi[node])
            if c1 > c0:
                after = table[q].take(nxt.byte[c0:c1])
                alive = np.flatnonzero(after)
                if alive.size:
                    next_nodes.append(alive + c0)
                    next_states.append(after.take(alive))
        if not next_nodes:
            return _EMPTY, _EMPTY
        if len(next_nodes) == 1:
            return next_nodes[0], next_states[0].astype(np.int64)
        return np.concatenate(next_nodes), np.concatenate(next_states).astype(np.int64)


class _Runs:
    """What `VocabTrie.scan` collects level by level: inside tokens (as runs of sorted
    positions, or token ids) and split points (runs of sorted positions at a depth)."""

    __slots__ = ("inside_starts", "inside_counts", "inside_tokens", "few_inside",
                 "split_starts", "split_ends", "split_depths", "few_splits")

    def __init__(self) -> None:
        self.inside_starts: list[np.ndarray] = []
        self.inside_counts: list[np.ndarray] = []
        self.inside_tokens: list[np.ndarray] = []
        self.few_inside: list[tuple[int, int]] = []
        self.split_starts: list[np.ndarray] = []
        self.split_ends: list[np.ndarray] = []
        self.split_depths: list[np.ndarray] = []
        self.few_splits: list[tuple[int, int, int]] = []

    def add_splits(self, starts: np.ndarray, ends: np.ndarray, depth: int) -> None:
        self.split_starts.append(starts)
        self.split_ends.append(ends)
        self.split_depths.append(np.full(len(starts), depth, np.int64))

    def finish(self, inside: np.ndarray, order: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self.few_inside:
            starts, counts = zip(*self.few_inside)
            self.inside_starts.append(np.array(starts, np.int64))
            self.inside_counts.append(np.array(counts, np.int64))
        if self.inside_starts:
            inside[order[_ranges(np.concatenate(self.inside_starts), np.concatenate(self.inside_counts))]] = True
        for toks in self.inside_tokens:
            inside[toks] = True
        if self.few_splits:
            starts, ends, depths = zip(*self.few_splits)
            self.split_starts.append(np.array(starts, np.int64))
            self.split_ends.append(np.array(ends, np.int64))
            self.split_depths.append(np.array(depths, np.int64))
        if not self.split_starts:
            return inside, _EMPTY, _EMPTY
        starts = np.concatenate(self.split_starts)
        counts = np.concatenate(self.split_ends) - starts
        return inside, order[_ranges(starts, counts)], np.repeat(np.concatenate(self.split_depths), counts)
