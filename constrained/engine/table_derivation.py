"""A DFA state's token table derived from a similar state's table.

Two states ``q`` and ``r`` of one DFA whose rows agree on byte ``b`` (the same
successor, so the same future) treat every token that starts with ``b`` alike:
it is inside from both or from neither, and the DFA accepts after the same
positions of it.  So the table of ``q`` is the table of ``r`` restricted to the
tokens whose first byte leads both states to the same successor, plus a scan of
the vocabulary trie below the few first bytes where the rows differ.

That is the common case of automata built from JSON Schemas for fresh requests:
a key that is any string but the declared names, a string that must not equal
an enum's values, a pattern with a literal prefix.  Their states along the
excluded words read almost every byte like the plain string body (whose table is
shared by every grammar over the vocabulary) and differ on one or two bytes, the
next letter of an excluded word and the backslash of its escapes.  A full scan of
such a state walks a third of the vocabulary's trie (milliseconds for a 128k
vocabulary); the derivation walks the subtrees of the differing bytes.

Example:
    >>> from constrained.automata.byte_dfa import compile_terminal
    >>> from constrained import TokenVocabulary
    >>> from constrained.engine.token_tables import TokenTables
    >>> vocab = TokenVocabulary.from_token_bytes([b"a", b"ab", b"b", b'b"', b'"', b"x"], eos_ids=[])
    >>> tables = TokenTables(vocab, None)
    >>> dfa = compile_terminal('"[abx]*"', excluding=('"ab"',))
    >>> q = int(dfa.transitions[dfa.transitions[1, ord('"')], ord("a")])   # after '"a'
    >>> r = reference_state(dfa, q)
    >>> r is not None and r != q
    True
    >>> derived = derive_table(tables, dfa, q, r)
    >>> full = tables._scan_table(dfa, q)
    >>> bool((derived.inside == full.inside).all()), derived.cross_toks.tolist() == full.cross_toks.tolist()
    (True, True)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from constrained.automata.byte_dfa import ByteDFA

if TYPE_CHECKING:
    from constrained.engine.token_tables import StateTokenTable, TokenTables

MAX_DIFFERING_BYTES = 8   # rows differing on more first bytes than this are scanned in full, unless weighed
MAX_RESCANNED_SHARE = 0.5  # ... and the tokens below them are at most this share of the state's tokens


def reference_state(dfa: ByteDFA, state: int, tokens_per_byte: np.ndarray | None = None) -> int | None:
    """The state to derive ``state``'s table from, or None.

    The candidate is the successor most of ``state``'s bytes lead to (a string
    body, for a state inside an excluded word) when that successor loops to itself
    on most bytes too (so its own table is computed, never derived: no chains of
    derivations) and the two rows differ on at most `MAX_DIFFERING_BYTES` bytes.
    With ``tokens_per_byte`` (the vocabulary's token count per first byte,
    `TokenTables.tokens_per_first_byte`) rows differing on more bytes qualify too
    when the tokens starting with those bytes, the ones the derivation scans, are at
    most `MAX_RESCANNED_SHARE` of the tokens starting with a byte ``state`` reads:
    the state after the opening quote of a key that is none of thirty declared
    names differs from the string body on a dozen first letters, a tenth of the
    tokens a full scan walks."""
    row = dfa.transitions[state]
    live = row[row != 0]
    if live.size == 0:
        return None
    ref = int(np.bincount(live).argmax())        # (the smallest of the most frequent, as np.unique's)
    if ref == state:
        return None
    ref_row = dfa.transitions[ref]
    if np.count_nonzero(ref_row == ref) * 2 < np.count_nonzero(ref_row):
        return None          # the candidate is no body state: it would be derived in turn
    differing = row != ref_row
    if np.count_nonzero(differing) > MAX_DIFFERING_BYTES:
        if tokens_per_byte is None:
            return None
        weights = tokens_per_byte[:256]
        if weights[differing].sum() > MAX_RESCANNED_SHARE * weights[row != 0].sum():
            return None
    return ref


def derive_table(tables: TokenTables, dfa: ByteDFA, state: int, ref: int) -> StateTokenTable:
    """The table of ``state`` from the table of ``ref`` (`TokenTables.get`) and a scan of
    the first bytes on which their rows differ; equal to a full scan's table.  One
    compiled call (`constrained.engine.trie_walk.walk_derived_table`)."""
    from constrained.engine.token_tables import StateTokenTable
    from constrained.engine.trie_walk import FlatTrie, walk_derived_table

    differing = np.flatnonzero(dfa.transitions[state] != dfa.transitions[ref])
    base = tables.get(dfa, ref)
    return StateTokenTable.of_walk(walk_derived_table(
        FlatTrie.of(tables.trie), dfa, state, ref, differing, base.inside, base.cross_toks, base.cross_pos,
        tables.size, tables.sparse_max), tables.size)

