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
  tokens checked against the parser node in one vectorised pass);
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

from constrained.automata.byte_dfa import START, ByteDFA
from constrained.engine.earley import EarleyParser
from constrained.engine.token_scan import scan_tokens
from constrained.engine.token_tables import TokenTables, pack_bits

DEAD_STATE = 0
BOUNDARY = -1

Config = tuple[int, int, int]
_SCALAR_CANDIDATES = 24


class Recognizer:
    """Interned states, transitions and masks for one (grammar, vocabulary)."""

    def __init__(self, parser: EarleyParser, lexer_dfas: list[ByteDFA], num_parser_terminals: int,
                 tables: TokenTables, eos_ids: np.ndarray) -> None:
        self.parser = parser
        self.dfas = lexer_dfas
        # unused terminals have no automaton (never started: no node expects them)
        self.transitions = [d.transitions if d is not None else None for d in lexer_dfas]
        self.accepting_q = [d.accepting if d is not None else None for d in lexer_dfas]
        self.num_parser_terminals = num_parser_terminals
        self.ignore_ids = tuple(range(num_parser_terminals, len(lexer_dfas)))
        # which first bytes can start each lexeme (a cheap filter before scanning)
        self._first_byte_ok = [t[START] != 0 if t is not None else None for t in self.transitions]
        self.tables = tables
        self.vocab_size = tables.size
        self.nbytes = tables.nbytes
        self.eos_ids = eos_ids
        self.token_bytes = tables.vocab.token_bytes
        self._split_stride = int(tables.lengths.max()) + 1  # (token, offset) -> one integer key
        eos_bits = np.zeros(self.vocab_size, bool)
        eos_bits[eos_ids] = True
        self._eos_packed = pack_bits(eos_bits, self.nbytes)
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
        self._crossing_memo: dict[tuple[int, int], tuple] = {}
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
    @staticmethod
    def _buckets(first: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        order = np.argsort(first, kind="stable")
        bounds = np.concatenate([[0], np.cumsum(np.bincount(first, minlength=256))])
        return order, bounds, bounds[1:] > bounds[:-1]

    def viable_from(self, node: int, toks: np.ndarray, offs: np.ndarray, buckets=None) -> np.ndarray:
        """For each candidate, can ``token[off:]`` be read from a boundary at ``node``?

        Candidates are bucketed by their first byte so each start lexeme only
        scans the candidates it can begin with (``buckets`` may be precomputed).
        """
        n = len(toks)
        if n <= _SCALAR_CANDIDATES and buckets is None:
            # few candidates (deep recursion): the memoised byte path beats numpy's call overhead
            start = self.intern(frozenset([(node, BOUNDARY, 0)]))
            tb = self.token_bytes
            return np.fromiter((self.feed(start, tb[t][o:]) != DEAD_STATE for t, o in zip(toks.tolist(), offs.tolist())),
                               dtype=bool, count=n)
        res = np.zeros(n, dtype=bool)
        pending: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}
        bm, lengths = self.tables.byte_matrix, self.tables.lengths
        order, bounds, present = buckets if buckets is not None else self._buckets(bm[toks, offs])
        for lx in self.start_lexemes(node):
            starts = np.flatnonzero(self._first_byte_ok[lx] & present)
            if starts.size == 0:
                continue
            if starts.size == 1:
                b = starts[0]
                todo = order[bounds[b]:bounds[b + 1]]
            else:
                todo = np.concatenate([order[bounds[b]:bounds[b + 1]] for b in starts])
            todo = todo[~res[todo]]
            if todo.size == 0:
                continue
            live_end, si, sp = scan_tokens(self.dfas[lx], START, toks[todo], offs[todo], bm, lengths)
            res[todo[live_end]] = True
            if si.size:
                pending.setdefault(self.after_lexeme(node, lx), []).append((todo[si], sp))
        for target, parts in pending.items():
            cand = np.concatenate([c for c, _ in parts])
            sp = np.concatenate([p for _, p in parts])
            keep = ~res[cand]
            cand, sp = cand[keep], sp[keep]
            if cand.size == 0:
                continue
            # one scan per distinct (token, split point): different lexemes (or an
            # ignored terminal ending at several points) reach the same remainder
            key = toks[cand] * self._split_stride + sp
            _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
            sub = self.viable_from(target, toks[cand[first]], sp[first])
            res[cand[sub[inverse]]] = True
        return res

    def _crossing(self, lex: int, q: int, table):
        """Crossing candidates of a token table, as int64 arrays with their buckets (cached)."""
        key = (lex, q)
        hit = self._crossing_memo.get(key)
        if hit is None:
            toks = table.cross_toks.astype(np.int64)
            offs = table.cross_pos.astype(np.int64)
            hit = (toks, offs, self._buckets(self.tables.byte_matrix[toks, offs]))
            self._crossing_memo[key] = hit
        return hit

    def _cfg_mask(self, cfg: Config) -> np.ndarray:
        hit = self._cfg_mask_memo.get(cfg)
        if hit is not None:
            return hit
        node, lex, q = cfg
        if lex == BOUNDARY:
            out = np.zeros(self.nbytes, np.uint8)
            for lx in self.start_lexemes(node):
                out |= self._cfg_mask((node, lx, START))
        else:
            table = self.tables.get(self.dfas[lex], q)
            out = table.inside.copy()
            if self.accepting_q[lex][q]:
                # the lexeme may end before this token: the whole token starts the next one
                out |= self._cfg_mask((self.after_lexeme(node, lex), BOUNDARY, 0))
            if table.cross_toks.size:
                toks, offs, buckets = self._crossing(lex, q, table)
                ok = self.viable_from(self.after_lexeme(node, lex), toks, offs, buckets)
                if ok.any():
                    bits = np.zeros(self.vocab_size, bool)
                    bits[table.cross_toks[ok]] = True
                    out |= pack_bits(bits, self.nbytes)
        out.setflags(write=False)
        self._cfg_mask_memo[cfg] = out
        return out

    def mask(self, sid: int) -> np.ndarray:
        """Packed allowed-token bitset (uint8, little bit order; view as int32 words)."""
        hit = self._mask_memo.get(sid)
        if hit is not None:
            return hit
        configs = self._states[sid]
        out = np.zeros(self.nbytes, np.uint8)
        for cfg in configs:
            out |= self._cfg_mask(cfg)
        if self.accepting(sid):
            out |= self._eos_packed
        out = out.view(np.int32)
        out.setflags(write=False)
        self._mask_memo[sid] = out
        return out
