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
from constrained.engine.earley import EarleyParser, NeedsContext
from constrained.engine.crossing import CrossingSet, CrossingSets
from constrained.engine.terminal_automata import Field, TerminalAutomata
from constrained.engine.token_tables import TokenTables

DEAD_STATE = 0
BOUNDARY = -1

Config = tuple[int, int, int]
DEFAULT_MASK_MEMORY = 512 << 20  # bytes of memoised masks before the mask memos are dropped
CONTEXT_DEPTH = 2  # parse-stack levels an abstract node keeps (see Recognizer._cfg_mask)
# Parse-stack depth from which masks are tried on abstract nodes.  Shallower, a new
# stack rarely repeats the top of an earlier one soon enough to pay for the extra
# node (every 30th MaskBench schema: >1.5 ms tokens 1.95% -> 1.55% against depth 0);
# JSON nests ~5 Earley levels per bracket, so 24 is ~5 brackets deep.
MIN_ABSTRACT_DEPTH = 24
_NEEDS_REAL_NODE = object()  # see Recognizer._on_stack_top
_NEEDS_CONTEXT = object()    # memo entry: this computation on an abstract node needs a real one
_MISSING = object()


class Recognizer:
    """Interned states, transitions and masks for one (grammar, vocabulary)."""

    def __init__(self, parser: EarleyParser, lexer_dfas: TerminalAutomata, num_parser_terminals: int,
                 tables: TokenTables, eos_ids: np.ndarray, max_mask_memory: int = DEFAULT_MASK_MEMORY) -> None:
        self.parser = parser
        # terminal index -> automaton, built on first lookup; unused terminals have none
        # (never started: no node expects them)
        self.dfas = lexer_dfas
        self.transitions = Field(lexer_dfas, "transitions")
        self.accepting_q = Field(lexer_dfas, "accepting")
        self.num_parser_terminals = num_parser_terminals
        self.ignore_ids = tuple(range(num_parser_terminals, lexer_dfas.count))
        self.tables = tables
        self.vocab_size = tables.size
        self.nbytes = tables.nbytes
        self.eos_ids = eos_ids
        self.token_bytes = tables.vocab.token_bytes
        eos_bits = np.zeros(self.vocab_size, bool)
        eos_bits[eos_ids] = True
        self._eos_packed = CrossingSets.pack(eos_bits)
        self._no_tokens = CrossingSets.pack(np.zeros(self.vocab_size, bool))
        self._lock = threading.Lock()
        self._states: list[frozenset[Config]] = [frozenset()]
        self._state_ids: dict[frozenset[Config], int] = {frozenset(): DEAD_STATE}
        self._accepting: dict[int, bool] = {DEAD_STATE: False}
        self._byte_memo: dict[tuple[int, int], int] = {}
        self._token_memo: dict[tuple[int, int], int] = {}
        self._cfg_step_memo: dict[tuple[Config, int], tuple[Config, ...]] = {}
        self._cfg_mask_memo: dict[Config, np.ndarray] = {}
        self._mask_memo: dict[int, np.ndarray] = {}
        self._next_bytes_memo: dict[int, np.ndarray] = {}
        self._start_lex: dict[int, tuple[int, ...]] = {}
        self._crossing_memo: dict[tuple[int, int], np.ndarray | None] = {}
        # masks are pure functions of states/nodes: when their memos outgrow the budget
        # they are dropped (and recomputed on demand); states and transitions are kept
        self.max_mask_memory = max_mask_memory
        self._mask_memory = 0
        self.mask_memo_resets = 0
        self.initial = self.intern(frozenset([(parser.root, BOUNDARY, 0)]))

    # ------------------------------------------------------------------ states
    def intern(self, configs: frozenset[Config]) -> int:
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

    def configs(self, sid: int) -> frozenset[Config]:
        return self._states[sid]

    @property
    def num_states(self) -> int:
        return len(self._states)

    def start_lexemes(self, node: int) -> tuple[int, ...]:
        """Lexer terminals that may start at a boundary in ``node``: expected + ignored."""
        hit = self._start_lex.get(node)
        if hit is None:
            hit = self._start_lex[node] = self.parser.node(node).terminals + self.ignore_ids
        return hit

    def after_lexeme(self, node: int, lexeme: int) -> int:
        """The parser node once ``lexeme`` ends (ignored lexemes leave it unchanged)."""
        if lexeme >= self.num_parser_terminals:
            return node
        return self.parser.scan(node, lexeme)

    # ------------------------------------------------------------------ stepping
    def _cfg_step(self, cfg: Config, b: int) -> tuple[Config, ...]:
        key = (cfg, b)
        hit = self._cfg_step_memo.get(key)
        if hit is not None:
            return hit
        node, lex, q = cfg
        out: list[Config] = []
        if lex == BOUNDARY:
            for lx in self.start_lexemes(node):
                q2 = int(self.transitions[lx][START, b])
                if q2:
                    out.append((node, lx, q2))
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
        key = (sid, b)
        hit = self._byte_memo.get(key)
        if hit is not None:
            return hit
        out: set[Config] = set()
        for cfg in self._states[sid]:
            out.update(self._cfg_step(cfg, b))
        result = self.intern(self._merge_splits(out))
        self._byte_memo[key] = result
        return result

    def _merge_splits(self, configs: set[Config]) -> frozenset[Config]:
        """Merge configurations reading the same lexeme in the same DFA state.

        ``(n1, lex, q)`` and ``(n2, lex, q)`` have the same future as
        ``(union(n1, n2), lex, q)``, so a state keeps at most one configuration
        per (lexeme, DFA state) besides the root's: different splits of the text
        into terminals then cost one parser node per position, not one per split.
        """
        root = self.parser.root
        groups: dict[tuple[int, int], list[int]] = {}
        for node, lex, q in configs:
            if node != root:
                groups.setdefault((lex, q), []).append(node)
        if all(len(nodes) == 1 for nodes in groups.values()):
            return frozenset(configs)
        merged = {cfg for cfg in configs if cfg[0] == root}
        for (lex, q), nodes in groups.items():
            merged.add((self.parser.union(nodes), lex, q))
        return frozenset(merged)

    def feed(self, sid: int, data: bytes) -> int:
        """State after ``data``."""
        for b in data:
            sid = self.byte_step(sid, b)
            if sid == DEAD_STATE:
                return DEAD_STATE
        return sid

    def token_step(self, sid: int, token: int) -> int:
        """State after the bytes of ``token`` (dead for special or unknown ids)."""
        key = (sid, token)
        hit = self._token_memo.get(key)
        if hit is not None:
            return hit
        if 0 <= token < self.vocab_size and self.token_bytes[token]:
            result = self.feed(sid, self.token_bytes[token])
        else:
            result = DEAD_STATE
        self._token_memo[key] = result
        return result

    # ------------------------------------------------------------------ queries
    def _cfg_accepting(self, cfg: Config) -> bool:
        node, lex, q = cfg
        if lex == BOUNDARY:
            return self.parser.node(node).accepting
        if not self.accepting_q[lex][q]:
            return False
        return self.parser.node(self.after_lexeme(node, lex)).accepting

    def accepting(self, sid: int) -> bool:
        """Whether the text read so far is in the language (EOS allowed)."""
        hit = self._accepting.get(sid)
        if hit is None:
            hit = self._accepting[sid] = any(self._cfg_accepting(c) for c in self._states[sid])
        return hit

    def _cfg_next_bytes(self, cfg: Config) -> np.ndarray:
        node, lex, q = cfg
        if lex == BOUNDARY:
            out = np.zeros(256, bool)
            for lx in self.start_lexemes(node):
                out |= self.transitions[lx][START] != 0
            return out
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
    def crossing_bits(self, node: int, cset: CrossingSet) -> np.ndarray | None:
        """Packed bitset of the tokens of ``cset`` whose remainder can be read from a
        lexeme boundary at ``node`` (None if none).

        Walks the lexeme paths ``node`` allows over the parser-independent scans
        cached in ``cset``; results are memoised per (node, set), and per abstract
        node when the path never needs deeper context (see `_cfg_mask`).
        """
        key = (node, cset.uid)
        hit = self._crossing_memo.get(key, _MISSING)
        if hit is not _MISSING and hit is not _NEEDS_CONTEXT:
            return hit
        return self._memoised(self._crossing_memo, key, node, lambda top: self.crossing_bits(top, cset),
                              lambda: self._crossing_bits_exact(node, cset))

    def _crossing_bits_exact(self, node: int, cset: CrossingSet) -> np.ndarray | None:
        parts = []
        for lx in self.start_lexemes(node):
            live, child = cset.scan(self.dfas[lx])
            if live is not None:
                parts.append(live)
            if child is not None:
                sub = self.crossing_bits(self.after_lexeme(node, lx), child)
                if sub is not None:
                    parts.append(sub)
        return self._union(parts)

    def _union(self, parts: list[np.ndarray]) -> np.ndarray | None:
        """The OR of packed bitsets (read-only); one part is returned as is, none is None."""
        if len(parts) <= 1:
            return parts[0] if parts else None
        out = parts[0] | parts[1]      # (reduce() over a list would stack it first: a copy)
        for part in parts[2:]:
            out |= part
        out.setflags(write=False)
        self._account(out.nbytes)
        return out

    def _cfg_mask(self, cfg: Config) -> np.ndarray:
        """Allowed tokens of one configuration (packed, read-only).

        Computed on the node's abstract version (top ``CONTEXT_DEPTH`` levels of
        its parse stack) when that suffices, so new stacks with a familiar top,
        e.g. one more level of nesting, reuse the masks of earlier ones.
        """
        hit = self._cfg_mask_memo.get(cfg)
        if hit is not None and hit is not _NEEDS_CONTEXT:
            return hit
        node, lex, q = cfg
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
        than ``MIN_ABSTRACT_DEPTH`` or the computation needs deeper context."""
        n = self.parser.node(node)
        if n.abstract or n.depth < MIN_ABSTRACT_DEPTH:
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
            self._cfg_mask_memo.clear()
            self._crossing_memo.clear()
            self._mask_memory = 0
            self.mask_memo_resets += 1

    def _cfg_mask_exact(self, node: int, lex: int, q: int) -> np.ndarray:
        if lex == BOUNDARY:
            parts = [self._cfg_mask((node, lx, START)) for lx in self.start_lexemes(node)]
        else:
            dfa = self.dfas[lex]
            table = self.tables.get(dfa, q)
            parts = [table.inside]
            if self.accepting_q[lex][q]:
                # the lexeme may end before this token: the whole token starts the next one
                parts.append(self._cfg_mask((self.after_lexeme(node, lex), BOUNDARY, 0)))
            if table.cross_toks.size:
                crossing = self.crossing_bits(self.after_lexeme(node, lex), self.tables.crossing_root(dfa, q))
                if crossing is not None:
                    parts.append(crossing)
        out = self._union(parts)
        return self._no_tokens if out is None else out

    def mask(self, sid: int) -> np.ndarray:
        """Packed allowed-token bitset (uint8, little bit order; view as int32 words)."""
        hit = self._mask_memo.get(sid)
        if hit is not None:
            return hit
        parts = [self._cfg_mask(cfg) for cfg in self._states[sid]]
        if self.accepting(sid):
            parts.append(self._eos_packed)
        out = self._union(parts)
        out = (self._no_tokens if out is None else out).view(np.int32)
        out.setflags(write=False)
        self._mask_memo[sid] = out
        return out
