"""The byte-level recognizer of a grammar's language, with token masks.

A *configuration* is ``(node, lexeme, q)``: an interned Earley node (the parser
state), the lexer terminal being read (``-1`` at a lexeme boundary) and its DFA
state.  Because the language allows *every* split of the text into terminals
(lark's ``dynamic_complete``), a matcher state is a set of configurations; sets
are interned to integer *state ids*, so identical futures share one id across
sequences, forks and threads.  Everything below is a pure function of a state id
and memoised:

* ``byte_step(sid, b)`` and ``token_step(sid, t)`` (advance; 0 is the dead state);
* ``mask(sid)``: a packed bitset of the allowed tokens, built from the
  per-(terminal, DFA-state) token tables (inside tokens OR-ed in whole; crossing
  tokens through the parser-independent cached scans of `constrained.engine.crossing`,
  walked along the lexeme paths the parser node allows);
* ``accepting(sid)`` and ``next_bytes(sid)``.

Each first computation of a state's mask or of a token step runs under the compile
deadline ``timeout`` (`constrained.deadline`; the one `compile_grammar` was given):
a first mask that builds thousands of terminals, or walks a huge parser set, ends
with `CompileTimeoutError` saying what it was computing.  Memo entries are written
only once their computation has finished, so nothing partial stays, and asking again
(under a longer ``timeout``, an attribute that may be changed) computes it afresh.
A memo hit enters no deadline.

Exactness: a token is allowed iff reading its bytes from the state leaves a
non-empty set of configurations.  This equals viability because every
configuration is viable: terminal DFAs are trimmed and every Earley node is
(see `constrained.engine.earley`).  The test suite checks masks against this
byte-level definition and that definition against an independent textbook
Earley recognizer.
"""

from __future__ import annotations

import threading

import numpy as np

from constrained.automata.byte_dfa import START
from constrained.deadline import DEFAULT_COMPILE_TIMEOUT, enter_deadline, exit_deadline, passed, timeout_error
from constrained.engine.crossing import CrossingSet, CrossingSets, byte_mask
from constrained.engine.earley import EarleyParser, NeedsContext
from constrained.engine.terminal_automata import Field, TerminalAutomata
from constrained.engine.token_tables import TokenTables
from constrained.masks import or_token_bits

DEAD_STATE = 0
BOUNDARY = -1

Config = tuple[int, int, int]
DEFAULT_MASK_MEMORY = 512 << 20  # bytes of memoised masks before the mask memos are dropped
CONTEXT_DEPTH = 2  # parse-stack levels an abstract node keeps (see Recognizer._cfg_mask)
# Parse-stack depth from which masks are tried on abstract nodes.  Shallower, a new
# stack rarely repeats the top of an earlier one soon enough to pay for the extra
# node (every 30th MaskBench schema: >1.5 ms tokens 1.95% -> 1.55% against depth 0);
# JSON nests ~5 Earley levels per bracket, so 24 is ~5 brackets deep.  Abstract nodes
# pay where stack tops recur: nested parentheses (98% of the tries on nested arithmetic
# were answered from an earlier stack's memo; 3x faster over 60 levels), a generic JSON
# value.  A fresh JSON Schema's grammar has rules of its own at every level: 7% of the
# tries in a 64-request serving batch were answered so, and the rest interned abstract
# nodes, redid work on the real node or left results where the real stack does not look
# (steps ~10% slower, MaskBench per-token p90/p99 ~8% slower).  `compile_grammar` turns
# them off for grammars compiled from JSON Schemas (``Recognizer.min_abstract_depth``).
MIN_ABSTRACT_DEPTH = 24
_NEEDS_REAL_NODE = object()  # see Recognizer._on_stack_top
_NEEDS_CONTEXT = object()    # memo entry: this computation on an abstract node needs a real one
_MISSING = object()


class Recognizer:
    """Interned states, transitions and masks for one (grammar, vocabulary)."""

    def __init__(self, parser: EarleyParser, lexer_dfas: TerminalAutomata, num_parser_terminals: int,
                 tables: TokenTables, eos_ids: np.ndarray, max_mask_memory: int = DEFAULT_MASK_MEMORY,
                 timeout: float | None = DEFAULT_COMPILE_TIMEOUT) -> None:
        self.parser = parser
        # seconds each first mask / token step may take (None: no limit); see the module docstring
        self.timeout = timeout
        # parse-stack depth from which masks are tried on abstract nodes (None: never)
        self.min_abstract_depth: int | None = MIN_ABSTRACT_DEPTH
        # terminal index -> automaton, built on first lookup; unused terminals have none
        # (never started: no node expects them)
        self.dfas = lexer_dfas
        self.transitions = Field(lexer_dfas, "transitions")
        self.accepting_q = Field(lexer_dfas, "accepting")
        self.num_parser_terminals = num_parser_terminals
        self.ignore_ids = tuple(range(num_parser_terminals, lexer_dfas.count))
        self._lex_span = lexer_dfas.count + 1           # lexemes and BOUNDARY, in `_cfg_step`'s keys
        self.tables = tables
        self.vocab_size = tables.size
        self.nbytes = tables.nbytes
        self.eos_ids = eos_ids
        self.token_bytes = tables.vocab.token_bytes
        eos_bits = np.zeros(self.vocab_size, bool)
        eos_bits[eos_ids] = True
        self._no_tokens = CrossingSets.pack(np.zeros(self.vocab_size, bool))
        self._eos_bits: Bits = ((), np.flatnonzero(eos_bits).astype(np.int32))
        # token sets up to this many ids are kept as ids (a quarter of a packed mask's bytes)
        self._sparse_max = max(16, self.nbytes // 16)
        self._dense_masks: dict[int, np.ndarray] = {}   # the last materialised state masks (LRU)
        self._start_bytes_memo: dict[int, np.ndarray] = {}
        self._start_mask_memo: dict[int, int] = {}      # node -> its start bytes as an int bitmask
        self._lex_start_mask: dict[int, int] = {}       # lexeme -> the bytes its DFA can start with
        self._inside_bits: dict[int, Bits | None] = {}   # lexeme << 32 | DFA state -> `_node_free_bits`
        self._lock = threading.Lock()
        # a state's configurations as a sorted tuple: a canonical key, like a frozenset, but
        # one the cyclic garbage collector stops tracking after one pass (tuples of ints)
        self._states: list[tuple[Config, ...]] = [()]
        self._state_ids: dict[tuple[Config, ...], int] = {(): DEAD_STATE}
        self._accepting: dict[int, bool] = {DEAD_STATE: False}
        # (int keys and values: a dict holding only ints is never tracked by the cyclic GC,
        # where a dict that receives a new tuple is tracked again, and each full collection
        # then visits every entry)
        self._byte_memo: dict[int, int] = {}            # sid << 8 | byte -> sid
        self._token_memo: dict[int, int] = {}           # sid * vocabulary size + token -> sid
        self._cfg_step_memo: dict[int, tuple[Config, ...]] = {}   # see `_cfg_step` for the key
        self._cfg_mask_memo: dict[Config, Bits] = {}
        self._mask_memo: dict[int, Bits] = {}
        self._next_bytes_memo: dict[int, np.ndarray] = {}
        self._start_lex: dict[int, tuple[int, ...]] = {}
        self._crossing_memo: dict[int, Bits | None] = {}   # node << 32 | crossing set uid -> tokens
        # masks are pure functions of states/nodes: when their memos outgrow the budget
        # they are dropped (and recomputed on demand); states and transitions are kept
        self.max_mask_memory = max_mask_memory
        self._mask_memory = 0
        self.mask_memo_resets = 0
        self.initial = self.intern(((parser.root, BOUNDARY, 0),))

    # ------------------------------------------------------------------ states
    def intern(self, configs: tuple[Config, ...]) -> int:
        """The id of the state of ``configs`` (a sorted tuple of distinct configurations)."""
        sid = self._state_ids.get(configs)
        if sid is not None:
            return sid
        with self._lock:
            sid = self._state_ids.get(configs)
            if sid is None:
                sid = len(self._states)
                self._states.append(configs)
                self._state_ids[configs] = sid
            return sid

    def configs(self, sid: int) -> tuple[Config, ...]:
        return self._states[sid]

    @property
    def num_states(self) -> int:
        return len(self._states)

    def start_lexemes(self, node: int) -> tuple[int, ...]:
        """Lexer terminals that may start at a boundary in ``node``: expected + ignored."""
        hit = self._start_lex.get(node)
        if hit is None:
            hit = self._start_lex[node] = self.parser.terminals(node) + self.ignore_ids
        return hit

    def after_lexeme(self, node: int, lexeme: int) -> int:
        """The parser node once ``lexeme`` ends (ignored lexemes leave it unchanged)."""
        if lexeme >= self.num_parser_terminals:
            return node
        return self.parser.scan(node, lexeme)

    # ------------------------------------------------------------------ stepping
    def _cfg_step(self, cfg: Config, b: int) -> tuple[Config, ...]:
        node, lex, q = cfg
        # an int key: a tuple key is one more object per entry for the cyclic GC to visit
        key = ((node * self._lex_span + lex + 1) << 40) | (q << 8) | b
        hit = self._cfg_step_memo.get(key)
        if hit is not None:
            return hit
        out: list[Config] = []
        if lex == BOUNDARY:
            lex_start = self._lex_start_mask
            for lx in self.start_lexemes(node):
                m = lex_start.get(lx)
                if not ((self._lexeme_start_mask(lx) if m is None else m) >> b) & 1:
                    continue            # (an int test where most lexemes cannot start with b)
                out.append((node, lx, int(self.transitions[lx][START, b])))
        else:
            q2 = int(self.transitions[lex][q, b])
            if q2:
                out.append((node, lex, q2))
            if self.accepting_q[lex][q]:
                out.extend(self._cfg_step((self.after_lexeme(node, lex), BOUNDARY, 0), b))
        result = tuple(out)
        self._cfg_step_memo[key] = result
        return result

    def byte_step(self, sid: int, b: int) -> int:
        """State after byte ``b`` (``DEAD_STATE`` if no configuration survives)."""
        key = sid << 8 | b
        hit = self._byte_memo.get(key)
        if hit is not None:
            return hit
        configs = self._states[sid]
        if len(configs) == 1:
            out = set(self._cfg_step(configs[0], b))
        else:
            out = set()
            for cfg in configs:
                out.update(self._cfg_step(cfg, b))
        result = self.intern(self._merge_splits(out))
        self._byte_memo[key] = result
        return result

    def _merge_splits(self, configs: set[Config]) -> tuple[Config, ...]:
        """Merge configurations reading the same lexeme in the same DFA state.

        ``(n1, lex, q)`` and ``(n2, lex, q)`` have the same future as
        ``(union(n1, n2), lex, q)``, so a state keeps at most one configuration
        per (lexeme, DFA state) besides the root's: different splits of the text
        into terminals then cost one parser node per position, not one per split.
        """
        if len(configs) <= 1:
            return tuple(configs)
        root = self.parser.root
        groups: dict[tuple[int, int], list[int]] = {}
        for node, lex, q in configs:
            if node != root:
                groups.setdefault((lex, q), []).append(node)
        if all(len(nodes) == 1 for nodes in groups.values()):
            return tuple(sorted(configs))
        merged = {cfg for cfg in configs if cfg[0] == root}
        for (lex, q), nodes in groups.items():
            merged.add((self.parser.union(nodes), lex, q))
        return tuple(sorted(merged))

    def feed(self, sid: int, data: bytes, *, token: int | None = None) -> int:
        """State after ``data``; an open deadline (`constrained.deadline`) is checked before
        each byte not yet memoised (``token``: the token ``data`` spells, for its message).
        Bytes that stay inside one lexeme are read without the states between them
        (`_inside_lexeme`); the others step byte by byte (`byte_step`)."""
        inside = self._inside_lexeme(sid, data)
        if inside is not None:
            return inside
        start = sid
        memo = self._byte_memo
        for b in data:
            nxt = memo.get(sid << 8 | b)
            if nxt is None:
                if passed():
                    raise timeout_error(what=f"reading {'token ' + str(token) if token is not None else 'bytes'}"
                                             f" from state {start}")
                nxt = self.byte_step(sid, b)
            sid = nxt
            if sid == DEAD_STATE:
                return DEAD_STATE
        return sid

    def token_step(self, sid: int, token: int) -> int:
        """State after the bytes of ``token`` (dead for special or unknown ids)."""
        if not 0 <= token < self.vocab_size:
            return DEAD_STATE                   # (not memoised: the key below is for vocabulary ids)
        key = sid * self.vocab_size + token
        hit = self._token_memo.get(key)
        if hit is not None:
            return hit
        if self.token_bytes[token]:
            opened = enter_deadline(self.timeout)      # compile_deadline, at a tenth of its cost
            try:
                result = self.feed(sid, self.token_bytes[token], token=token)
            finally:
                exit_deadline(opened)
        else:
            result = DEAD_STATE
        self._token_memo[key] = result
        return result

    def _inside_lexeme(self, sid: int, data: bytes) -> int | None:
        """`feed` of ``data`` where the state is one configuration inside a lexeme and no
        state the lexeme's automaton passes before the last byte accepts: then every byte
        only moves that automaton (no lexeme can end, `_cfg_step`), and the state after is
        the one configuration at its end state, or dead.  None where that does not hold
        (`feed` steps byte by byte).  Most tokens inside a string value are read so,
        without making the states between their bytes (each one interned, with its byte
        and step memos: the most objects a commit left behind)."""
        configs = self._states[sid]
        if len(configs) != 1:
            return None
        node, lex, q = configs[0]
        if lex == BOUNDARY:
            return None
        table, accepting = self.transitions[lex], self.accepting_q[lex]
        for b in data:
            if accepting[q]:
                return None
            q = int(table[q, b])
            if not q:
                return DEAD_STATE
        return self.intern(((node, lex, q),))

    # ------------------------------------------------------------------ queries
    def _cfg_accepting(self, cfg: Config) -> bool:
        node, lex, q = cfg
        if lex == BOUNDARY:
            return self.parser.accepting(node)
        if not self.accepting_q[lex][q]:
            return False
        return self.parser.accepting(self.after_lexeme(node, lex))

    def accepting(self, sid: int) -> bool:
        """Whether the text read so far is in the language (EOS allowed)."""
        hit = self._accepting.get(sid)
        if hit is None:
            hit = self._accepting[sid] = any(self._cfg_accepting(c) for c in self._states[sid])
        return hit

    def _cfg_next_bytes(self, cfg: Config) -> np.ndarray:
        node, lex, q = cfg
        if lex == BOUNDARY:
            return self._start_bytes(node)
        out = self.transitions[lex][q] != 0
        if self.accepting_q[lex][q]:
            out = out | self._cfg_next_bytes((self.after_lexeme(node, lex), BOUNDARY, 0))
        return out

    def next_bytes(self, sid: int) -> np.ndarray:
        """Bool[256]: which bytes may come next."""
        hit = self._next_bytes_memo.get(sid)
        if hit is None:
            hit = np.zeros(256, bool)
            for cfg in self._states[sid]:
                hit |= self._cfg_next_bytes(cfg)
            hit.setflags(write=False)
            self._next_bytes_memo[sid] = hit
        return hit

    # ------------------------------------------------------------------ masks
    #
    # Token sets are memoised as `Bits`: ``(dense, ids)``, the OR of read-only packed
    # bitsets ``dense`` (mostly token tables' inside sets, shared by every state) and an
    # int32 array ``ids`` of further token ids (or None; repeats allowed: merging by
    # concatenation costs less than sorting, and writing them is an OR).  Crossing results,
    # key-literal inside sets and the like hold a handful of tokens: as ids they cost a
    # few bytes instead of a packed mask each, and a union is a tuple of references
    # plus a merge of small id arrays.  A set is made one owned packed array only when
    # it has more than `MAX_DENSE_PARTS` dense parts or more than ``_sparse_max`` ids.
    # Dense masks are made only where asked for (`mask`, `mask_into`).
    def crossing_bits(self, node: int, cset: CrossingSet) -> Bits | None:
        """The tokens of ``cset`` whose remainder can be read from a lexeme boundary at
        ``node`` (`Bits`; None if none).

        Walks the lexeme paths ``node`` allows over the parser-independent scans
        cached in ``cset``; results are memoised per (node, set), and per abstract
        node when the path never needs deeper context (see `_cfg_mask`).
        """
        key = node << 32 | cset.uid         # (an int: see `_cfg_step`)
        hit = self._crossing_memo.get(key, _MISSING)
        if hit is not _MISSING and hit is not _NEEDS_CONTEXT:
            return hit
        if self.min_abstract_depth is None:     # no abstract node is tried: straight to the real one
            out = self._crossing_memo[key] = self._crossing_bits_exact(node, cset)
            return out
        return self._memoised(self._crossing_memo, key, node, lambda top: self.crossing_bits(top, cset),
                              lambda: self._crossing_bits_exact(node, cset))

    def _crossing_bits_exact(self, node: int, cset: CrossingSet) -> Bits | None:
        if passed():
            raise timeout_error(what=f"the tokens crossing into parser node {node}")
        parts = []
        first = cset.first_mask
        lex_start = self._lex_start_mask
        for lx in self.start_lexemes(node):
            starts = lex_start.get(lx)
            if starts is None:
                starts = self._lexeme_start_mask(lx)
            if not starts & first:      # the lexeme starts with no remainder's first byte
                continue
            live, child = cset.scan(self.dfas[lx])
            if live is not None:
                parts.append(((live,), None) if live.itemsize == 1 else ((), live))
            if child is None:
                continue
            # no remainder starts with a byte that can start a lexeme after it: nothing to walk.
            # The node after the lexeme is built to ask (a walk of its items that stops short
            # of it cost more than it saved: the next tokens of an instance mostly build it)
            after = self.after_lexeme(node, lx)
            if child.first_mask & self._start_mask(after):
                sub = self.crossing_bits(after, child)
                if sub is not None:
                    parts.append(sub)
        return self._union(parts)

    def _lexeme_start_mask(self, lx: int) -> int:
        """The bytes lexeme ``lx`` can start with, as an int bitmask (bit ``b`` for byte ``b``)."""
        hit = self._lex_start_mask.get(lx)
        if hit is None:
            hit = self._lex_start_mask[lx] = byte_mask(self.transitions[lx][START] != 0)
        return hit

    def _start_mask(self, node: int) -> int:
        """`_start_bytes` of ``node`` as an int bitmask (bit ``b`` for byte ``b``): the OR of
        its lexemes' masks (ints, no numpy per lexeme)."""
        hit = self._start_mask_memo.get(node)
        if hit is None:
            hit = self._start_mask_memo[node] = self._lexemes_start_mask(self.start_lexemes(node))
        return hit

    def _lexemes_start_mask(self, lexemes) -> int:
        """The OR of the lexemes' `_lexeme_start_mask` (ints, no numpy per lexeme)."""
        out = 0
        lex_start = self._lex_start_mask
        for lx in lexemes:
            m = lex_start.get(lx)
            out |= self._lexeme_start_mask(lx) if m is None else m
        return out

    def _start_bytes(self, node: int) -> np.ndarray:
        """Bool[256]: the bytes that can start a lexeme at a boundary in ``node``."""
        hit = self._start_bytes_memo.get(node)
        if hit is None:
            hit = np.zeros(256, bool)
            for lx in self.start_lexemes(node):
                hit |= self.transitions[lx][START] != 0
            hit.setflags(write=False)
            self._start_bytes_memo[node] = hit
        return hit

    def _union(self, parts: list[Bits]) -> Bits | None:
        """The union of token sets (one part is returned as is, none is None)."""
        if len(parts) <= 1:
            return parts[0] if parts else None
        dense: list[np.ndarray] = []
        ids: list[np.ndarray] = []
        seen: set[int] = set()          # ids of the dense parts taken (alive: ``parts`` holds them)
        for d, i in parts:
            for a in d:
                k = id(a)
                if k not in seen:
                    seen.add(k)
                    dense.append(a)
            if i is not None:
                ids.append(i)
        merged = None
        if ids:
            merged = ids[0] if len(ids) == 1 else np.concatenate(ids)   # repeats are harmless (OR)
        if len(dense) > MAX_DENSE_PARTS or (merged is not None and merged.size > self._sparse_max):
            out = np.empty(self.nbytes, np.uint8)
            _materialise((dense, merged), out)
            out.setflags(write=False)
            self._account(out.nbytes)
            return (out,), None
        if len(ids) > 1:
            merged.setflags(write=False)
            self._account(merged.nbytes)
        return tuple(dense), merged

    def _cfg_mask(self, cfg: Config) -> Bits:
        """Allowed tokens of one configuration (`Bits`).

        Computed on the node's abstract version (top ``CONTEXT_DEPTH`` levels of
        its parse stack) when that suffices, so new stacks with a familiar top,
        e.g. one more level of nesting, reuse the masks of earlier ones.
        """
        hit = self._cfg_mask_memo.get(cfg)
        if hit is not None and hit is not _NEEDS_CONTEXT:
            return hit
        node, lex, q = cfg
        if lex != BOUNDARY:
            key = lex << 32 | q
            free = self._inside_bits.get(key, _MISSING)
            if free is _MISSING:
                free = self._inside_bits[key] = self._node_free_bits(lex, q)
            if free is not None:
                return free
        if self.min_abstract_depth is None:     # no abstract node is tried: straight to the real one
            out = self._cfg_mask_memo[cfg] = self._cfg_mask_exact(node, lex, q)
            return out
        return self._memoised(self._cfg_mask_memo, cfg, node, lambda top: self._cfg_mask((top, lex, q)),
                              lambda: self._cfg_mask_exact(node, lex, q))

    def _memoised(self, memo: dict, key, node: int, on_top, exact):
        """The slow path of a per-node memo (`crossing_bits`, `_cfg_mask`): ``on_top(top)``
        on ``node``'s abstract version when that suffices, else ``exact()``.  A computation
        on an abstract node that needs deeper context is remembered as such, so other
        walks reaching it fall back at once instead of redoing it."""
        if memo.get(key, _MISSING) is _NEEDS_CONTEXT:
            raise NeedsContext
        out = self._on_stack_top(node, on_top)
        if out is _NEEDS_REAL_NODE:
            try:
                out = exact()
            except NeedsContext:     # only on an abstract node
                memo[key] = _NEEDS_CONTEXT
                raise
        memo[key] = out
        return out

    def _on_stack_top(self, node: int, compute):
        """``compute(top)`` on ``node``'s abstract version (its top ``CONTEXT_DEPTH``
        stack levels), or `_NEEDS_REAL_NODE` when there is none, the stack is shallower
        than ``min_abstract_depth`` (never when None) or the computation needs deeper context."""
        depth = self.min_abstract_depth
        if depth is None:
            return _NEEDS_REAL_NODE
        abstract, node_depth = self.parser.stack_depth(node)
        if abstract or node_depth < depth:
            return _NEEDS_REAL_NODE
        top = self.parser.abstract(node, CONTEXT_DEPTH)
        if top == node:
            return _NEEDS_REAL_NODE
        try:
            return compute(top)
        except NeedsContext:
            return _NEEDS_REAL_NODE

    def _account(self, nbytes: int) -> None:
        self._mask_memory += nbytes
        if self._mask_memory > self.max_mask_memory:
            self._mask_memo.clear()
            self._dense_masks.clear()
            self._cfg_mask_memo.clear()
            self._crossing_memo.clear()
            self._mask_memory = 0
            self.mask_memo_resets += 1

    def _cfg_mask_exact(self, node: int, lex: int, q: int) -> Bits:
        if passed():
            raise timeout_error(what=f"the mask of configuration {(node, lex, q)} (parser node, lexeme, "
                                     f"DFA state)")
        if lex == BOUNDARY:
            parts = [self._cfg_mask((node, lx, START)) for lx in self.start_lexemes(node)]
        else:
            dfa = self.dfas[lex]
            table = self.tables.get(dfa, q)
            parts = [_inside_part(table)]
            if self.accepting_q[lex][q]:
                # the lexeme may end before this token: the whole token starts the next one
                parts.append(self._cfg_mask((self.after_lexeme(node, lex), BOUNDARY, 0)))
            if table.cross_toks.size:
                crossing = self.crossing_bits(self.after_lexeme(node, lex), self.tables.crossing_root(dfa, q))
                if crossing is not None:
                    parts.append(crossing)
        out = self._union(parts)
        return _NO_BITS if out is None else out

    def _node_free_bits(self, lex: int, q: int) -> Bits | None:
        """The mask of configuration ``(node, lex, q)`` where it is the same for every
        parser node: the lexeme cannot end before a token does (``q`` does not accept)
        and no token crosses out of it from ``q`` (its table has no crossing tokens), so
        the mask is the table's inside set; None where the node matters (`_cfg_mask`
        memoises it per lexeme and state, for every node: the states inside a key after
        ``, "`` are one configuration per key still possible, each on a new node)."""
        if self.accepting_q[lex][q]:
            return None
        table = self.tables.get(self.dfas[lex], q)
        return None if table.cross_toks.size else _inside_part(table)

    def prepare_mask(self, sid: int) -> None:
        """Compute and memoise the mask of ``sid`` now (what `mask` and `mask_into` will
        read), within the open deadline if one is earlier than the mask's own."""
        self._state_bits(sid)

    def _state_bits(self, sid: int) -> Bits:
        hit = self._mask_memo.get(sid)
        if hit is None:
            opened = enter_deadline(self.timeout)
            try:
                hit = self._state_bits_exact(sid)
            finally:
                exit_deadline(opened)
            self._mask_memo[sid] = hit
        return hit

    def _state_bits_exact(self, sid: int) -> Bits:
        """`_state_bits` of ``sid``, computed (under the mask deadline: see the module docstring)."""
        parts = []
        for cfg in self._states[sid]:
            if passed():
                raise timeout_error(what=f"the first mask of state {sid}")
            parts.append(self._cfg_mask(cfg))
        if self.accepting(sid):
            parts.append(self._eos_bits)
        out = self._union(parts)
        return _NO_BITS if out is None else out

    def mask(self, sid: int) -> np.ndarray:
        """Packed allowed-token bitset (int32 words, little bit order; read-only, shared)."""
        hit = self._dense_masks.get(sid)
        if hit is not None:
            return hit
        dense, ids = bits = self._state_bits(sid)
        if ids is None and len(dense) == 1:
            out = dense[0].view(np.int32)       # one shared set (a table's, or an owned union)
        elif ids is None and not dense:
            out = self._no_tokens.view(np.int32)
        else:
            out8 = np.empty(self.nbytes, np.uint8)
            _materialise(bits, out8)
            out = out8.view(np.int32)
            self._account(out8.nbytes)
        out.setflags(write=False)
        memo = self._dense_masks
        if len(memo) >= DENSE_MASKS:
            del memo[next(iter(memo))]
        memo[sid] = out
        return out

    def mask_into(self, sid: int, row: np.ndarray) -> None:
        """Write `mask` of ``sid`` into ``row`` (int32, ``nbytes // 4`` words) without
        making (or keeping) a dense mask of its own."""
        hit = self._dense_masks.get(sid)
        if hit is None and not row.flags.c_contiguous:
            hit = self.mask(sid)          # a strided row: no byte view of it to write through
        if hit is not None:
            row[:] = hit
        else:
            _materialise(self._state_bits(sid), row.view(np.uint8))


Bits = tuple  # (tuple of packed uint8 bitsets, int32 token ids or None): see Recognizer.crossing_bits
_NO_BITS: Bits = ((), None)
MAX_DENSE_PARTS = 4     # dense parts a `Bits` keeps before they are OR-ed into one owned array
DENSE_MASKS = 8         # materialised state masks kept per recognizer (most recent)


def _inside_part(table) -> Bits:
    """A token table's inside set as `Bits` (its ids where it keeps them sparse)."""
    ids = table.inside_ids
    return ((), ids) if ids is not None else ((table.inside,), None)


def _materialise(bits, out: np.ndarray) -> None:
    """Write the packed form of ``bits`` (``(dense parts, ids)``) into ``out`` (uint8)."""
    dense, ids = bits
    if dense:
        np.copyto(out, dense[0])
        for a in dense[1:]:
            np.bitwise_or(out, a, out=out)
    else:
        out.fill(0)
    if ids is not None and ids.size:
        or_token_bits(out, ids)
