"""Crossing candidates: token remainders that must be read from a lexeme boundary.

When a lexeme may end strictly inside a token, the rest of the token
(``token[offset:]``) has to be read by whatever the parser expects next.  A
`CrossingSet` holds such candidates ``(token, offset)``.  Scanning a set with a
lexeme's DFA is *independent of the parser*: it yields

* ``live``: the tokens whose remainder stays inside that lexeme to the end
  (packed bitset; viable wherever the parser expects the lexeme), and
* ``child``: a new `CrossingSet` of the points where that lexeme may end inside
  the remainder (deduplicated ``(token, offset)`` pairs).

So the scans are cached here, per vocabulary and lexeme DFA digest, and shared
by every parser node, every compile and every grammar over the vocabulary that
uses the same lexemes.  The recognizer only walks the tree of lexeme paths its
parser nodes allow and ORs the cached bitsets (see
`constrained.engine.recognizer.Recognizer.crossing_bits`).
"""

from __future__ import annotations

import hashlib
import threading

import numpy as np

from constrained.automata.byte_dfa import ByteDFA
from constrained.engine.token_scan import scan_remainders
from constrained.masks import pack_mask, pack_token_ids


class CrossingSet:
    """Candidates ``(toks[i], offs[i])``; build roots with `CrossingSets.root`.

    ``uid`` is unique per vocabulary's sets (the memo key for parser-dependent results).
    """

    __slots__ = ("uid", "toks", "offs", "_owner", "_first", "_grouped", "_scans", "_first_bytes", "first_mask")

    def __init__(self, uid: int, toks: np.ndarray, offs: np.ndarray, owner: CrossingSets) -> None:
        self.uid = uid
        self.toks = toks
        self.offs = offs
        self._owner = owner
        self._first = owner.byte_matrix[toks, offs]     # each remainder's first byte
        # (toks, offs, bounds): the candidates grouped by first byte, byte b's group being
        # ``bounds[b]:bounds[b + 1]``; int64, contiguous and read-only: the compiled scan
        # reads the groups of the bytes a lexeme starts with as they are, not every
        # candidate of a large set
        order = np.argsort(self._first, kind="stable")
        self._grouped = (np.array(toks[order], dtype=np.int64), np.array(offs[order], dtype=np.int64),
                         np.concatenate([[0], np.cumsum(np.bincount(self._first, minlength=256))]).astype(np.int64))
        for a in self._grouped:
            a.setflags(write=False)
        self._scans: dict[str, tuple[np.ndarray | None, CrossingSet | None]] = {}
        self._first_bytes: np.ndarray | None = None
        # the first bytes as an int bitmask (bit b for byte b): tested against a lexeme's or a
        # node's start bytes in the crossing walk, where a numpy AND would cost more than the test
        self.first_mask = _bitmask(np.unique(self._first))

    def __len__(self) -> int:
        return len(self.toks)

    @property
    def first_bytes(self) -> np.ndarray:
        """Bool[256]: the first bytes of the remainders (a lexeme that starts with none of
        them finds nothing here)."""
        if self._first_bytes is None:
            fb = np.bincount(self._first, minlength=256) > 0
            fb.setflags(write=False)
            self._first_bytes = fb
        return self._first_bytes

    def scan(self, dfa: ByteDFA) -> tuple[np.ndarray | None, CrossingSet | None]:
        """``(live, child)`` for the lexeme ``dfa`` started at every candidate (cached).

        ``live`` is a token set (`CrossingSets.token_set`: sorted int32 ids, or a packed
        bitset when large) or None when empty; ``child`` is None when the lexeme never
        ends inside a remainder.
        """
        hit = self._scans.get(dfa.digest)
        if hit is None:
            hit = self._scan(dfa)
            self._scans[dfa.digest] = hit
        return hit

    def _scan(self, dfa: ByteDFA) -> tuple[np.ndarray | None, CrossingSet | None]:
        owner = self._owner
        toks, offs, by_first = self._grouped
        live_toks, ctoks, coffs = scan_remainders(dfa, toks, offs, by_first, owner.byte_matrix, owner.lengths,
                                                  owner.split_stride)
        live = owner.token_set(live_toks) if live_toks.size else None
        child = owner.intern_set(ctoks, coffs) if ctoks.size else None
        return live, child


def _bitmask(byte_values: np.ndarray) -> int:
    """The int with bit ``b`` set for each byte value ``b`` of ``byte_values``."""
    mask = 0
    for b in byte_values.tolist():
        mask |= 1 << b
    return mask


def byte_mask(allowed: np.ndarray) -> int:
    """A bool[256] byte set as an int bitmask (bit ``b`` set iff ``allowed[b]``)."""
    return int.from_bytes(np.packbits(allowed, bitorder="little").tobytes(), "little")


class CrossingSets:
    """The crossing sets of one vocabulary (owned by its `TokenTables`); thread-safe."""

    def __init__(self, byte_matrix: np.ndarray, lengths: np.ndarray, size: int, token_bytes=None) -> None:
        self.byte_matrix = byte_matrix
        self.token_bytes = token_bytes      # the bytes per token id (for scanning a few candidates)
        self.lengths = lengths
        self.size = size
        self.split_stride = int(lengths.max()) + 1 if lengths.size else 1
        self._by_content: dict[bytes, CrossingSet] = {}
        self._lock = threading.Lock()

    def token_set(self, toks: np.ndarray) -> np.ndarray:
        """Distinct sorted token ids as a read-only set: the ids (int32) while they are few
        (``<= nbytes // 16``), else a packed bitset (uint8, the layout of `pack`).
        Crossing scans mostly find a handful of tokens: ids cost a few bytes where a packed
        mask costs ``size / 8``."""
        ids = toks
        if ids.size > max(16, ((self.size + 31) // 32) * 4 // 16):
            ids = pack_token_ids(ids, self.size).view(np.uint8)
        ids.setflags(write=False)
        return ids

    @staticmethod
    def pack(bits: np.ndarray) -> np.ndarray:
        packed = pack_mask(bits).view(np.uint8)
        packed.setflags(write=False)
        return packed

    def intern_set(self, toks: np.ndarray, offs: np.ndarray) -> CrossingSet:
        """The set with these candidates (one object per distinct content, so lexeme
        paths that reach the same remainders, e.g. "x"+"xx" and "xx"+"x", share it)."""
        toks = np.ascontiguousarray(toks, dtype=np.int64)
        offs = np.ascontiguousarray(offs, dtype=np.int64)
        digest = hashlib.blake2b(toks.tobytes() + b"|" + offs.tobytes(), digest_size=16).digest()
        hit = self._by_content.get(digest)
        if hit is not None:
            return hit
        with self._lock:
            hit = self._by_content.get(digest)
            if hit is None:
                hit = CrossingSet(len(self._by_content), toks, offs, self)
                self._by_content[digest] = hit
            return hit
