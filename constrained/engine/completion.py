"""The shortest way to finish: the fewest bytes after a state that end in the language.

`shortest_completion` reads the answer off the grammar instead of searching over
bytes (a byte search blows up on deep nesting: finishing 40 open objects with
required members is hundreds of bytes, each a search level).  For a recognizer
state, i.e. a set of configurations ``(parser node, lexeme, DFA state)``:

* a lexeme being read is finished along the shortest path to an accepting state
  of its DFA (one reverse breadth-first search per terminal);
* from the parser node, each Earley item ``A -> α • β`` (origin ``o``) costs the
  shortest yield of ``β`` (per nonterminal by Knuth's generalisation of Dijkstra's
  algorithm, which also picks a well-founded derivation to spell it) plus the cost
  of completing ``A`` at ``o``: the cheapest item of ``o`` waiting for ``A``, and so on
  down the parse stack to the root (memoised per (node, nonterminal); origins are
  older nodes, items predicted in the node itself are solved by relaxation).

The minimum over configurations is exact (`tests/test_matcher_api.py` checks it
against brute force and a byte-level breadth-first search, `bfs_completion`).
Value checks (`constrained.engine.checked`) may refuse that completion (e.g.
``minProperties`` or ``uniqueItems`` decided on the finished value): then
`checked_completion` runs an A* search over bytes through the checks, with the
grammar's shortest completion as its (admissible, consistent) heuristic.
`completion_tokens` turns bytes into tokens the matcher accepts (the canonical
encoding when it is text, else a greedy longest match over the token bytes).  The
decoding loop uses them to finish inside a token budget (`constrained.decoding`).

Example:
    >>> from constrained import Grammar, TokenVocabulary, compile_grammar
    >>> vocab = TokenVocabulary.from_token_bytes([bytes([b]) for b in range(32, 127)] + [b""], eos_ids=[95])
    >>> m = compile_grammar(Grammar.from_regex(r'\\{"a": \\[[0-9]+(, [0-9]+)*\\]\\}'), vocab, cache_dir=None).matcher()
    >>> m.advance_many(vocab.encode('{"a": [1')) and m.shortest_completion()
    b']}'
"""

from __future__ import annotations

import heapq
import itertools
import math
import re
from typing import Any

import numpy as np

from constrained.automata.byte_dfa import START
from constrained.engine.earley import SELF
from constrained.engine.recognizer import BOUNDARY, DEAD_STATE
from constrained.errors import MatcherError
from constrained.grammar.checks import (
    SupportsBlankInsignificance,
    SupportsDeficit,
    SupportsFailure,
    SupportsPadding,
)

MAX_COMPLETION_BYTES = 1 << 16     # the grammar completion is computed whole anyway; past this it is not verified
MAX_CHECKED_EXPANSIONS = 4000     # A* expansions before `checked_completion` gives up
MAX_SEARCHED_COMPLETION = 4096    # a refused grammar completion longer than this is not searched from
GREEDY_WEIGHT = 3                 # weighted A* (g + 3h) in the rounds that merge texts
_TABLES_ATTR = "_completion_tables"
_BLANKS = frozenset(b" \t\n\r")
# bytes that may change a check's state even where the grammar's state stays (JSON structure)
_STRUCTURAL = frozenset(b'"\\{}[],: \t\n\r')
# bytes in the order completions prefer them: printable ASCII (space first), then the rest
_PREFERRED = np.array(list(range(0x20, 0x7F)) + [b for b in range(256) if not 0x20 <= b < 0x7F])
_INF = math.inf
_NUMBER_BYTES = frozenset(b"-+.eE0123456789")
_NUMBER = re.compile(rb"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")   # a JSON number's text


class CompletionSearchError(MatcherError):
    """The search for a completion that passes the value checks gave up within its
    budget without proving that none exists (`checked_completion` with ``strict=True``).

    ``keyword`` and ``pointer`` name the check that refuses the grammar's own shortest
    completion (e.g. ``minProperties`` at ``/properties/feeds/minProperties``), the
    keyword the search could not satisfy; ``expansions`` is the budget spent."""

    def __init__(self, *, keyword: str | None, pointer: str, expansions: int) -> None:
        self.keyword, self.pointer, self.expansions = keyword, pointer, expansions
        super().__init__(f"no completion found that passes the value check {keyword!r} at {pointer!r} "
                         f"within {expansions} search expansions (none proven impossible either)")


class _CompletionTables:
    """Shortest yields of a recognizer's grammar, memoised (one per recognizer)."""

    def __init__(self, rec) -> None:
        self.rec = rec
        self.parser = rec.parser
        t = self.parser.tables
        self.nt_base = t.num_terminals
        self.rule_lhs, self.rule_rhs = t.rule_lhs, t.rule_rhs
        self._dfa_tails: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._term_min: dict[int, bytes | None] = {}
        self.nt_yield: dict[int, bytes] = {}
        self._suffix: dict[tuple[int, int], bytes | None] = {}
        self._up: dict[int, dict[int, tuple[float, tuple | None]]] = {}
        self._node_memo: dict[int, bytes | None] = {}
        self._state_memo: dict[int, bytes | None] = {}
        # checked searches, keyed by the checks' content hash (not id(): a freed checks
        # object's id is reused), grammar state, check state and text
        self.checked_memo: dict[tuple, tuple[bytes | None, bool]] = {}
        self._knuth()

    # ------------------------------------------------------------------ terminals
    def _tails(self, lex: int) -> tuple[np.ndarray, np.ndarray]:
        """Per DFA state: bytes to the nearest accepting state and the first byte of that path."""
        hit = self._dfa_tails.get(lex)
        if hit is None:
            trans = self.rec.transitions[lex]
            acc = np.asarray(self.rec.accepting_q[lex], bool)
            n = trans.shape[0]
            dist = np.full(n, -1, np.int64)
            first = np.zeros(n, np.int64)
            dist[acc] = 0
            dist[DEAD_STATE] = -1
            frontier = np.zeros(n, bool)
            frontier[acc] = True
            frontier[DEAD_STATE] = False
            level = 0
            while frontier.any():
                level += 1
                hits = frontier[trans]                    # [state, byte]: leads into the frontier
                new = hits.any(axis=1) & (dist < 0)
                new[DEAD_STATE] = False
                dist[new] = level
                first[new] = _PREFERRED[hits[new][:, _PREFERRED].argmax(axis=1)]
                frontier = new
            hit = self._dfa_tails[lex] = (dist, first)
        return hit

    def tail(self, lex: int, q: int) -> bytes | None:
        """The shortest bytes that finish lexeme ``lex`` from DFA state ``q``."""
        dist, first = self._tails(lex)
        if dist[q] < 0:
            return None
        trans = self.rec.transitions[lex]
        out = bytearray()
        while dist[q] > 0:
            b = int(first[q])
            out.append(b)
            q = int(trans[q, b])
        return bytes(out)

    def term_min(self, term: int) -> bytes | None:
        hit = self._term_min.get(term, False)
        if hit is False:
            hit = self._term_min[term] = (self.tail(term, START) if self.rec.transitions[term] is not None
                                          else None)
        return hit

    # ------------------------------------------------------------------ nonterminals
    def _knuth(self) -> None:
        """Shortest yield of every nonterminal (Knuth 1977: Dijkstra over rules)."""
        rhs_of, base = self.rule_rhs, self.nt_base
        pending = [0] * len(rhs_of)
        users: dict[int, list[int]] = {}
        heap: list[tuple[int, int, int]] = []
        for r, rhs in enumerate(rhs_of):
            for s in rhs:
                if s >= base:
                    pending[r] += 1
                    users.setdefault(s, []).append(r)
            if pending[r] == 0:
                self._push_rule(heap, r)
        while heap:
            _, a, r = heapq.heappop(heap)
            if a in self.nt_yield:
                continue
            self.nt_yield[a] = self._spell(rhs_of[r])
            for r2 in users.get(a, ()):
                pending[r2] -= 1
                if pending[r2] == 0:
                    self._push_rule(heap, r2)

    def _push_rule(self, heap: list, r: int) -> None:
        data = self._spell(self.rule_rhs[r])
        if data is not None:
            heapq.heappush(heap, (len(data), self.rule_lhs[r], r))

    def _spell(self, symbols) -> bytes | None:
        out = bytearray()
        for s in symbols:
            part = self.nt_yield.get(s) if s >= self.nt_base else self.term_min(s)
            if part is None:
                return None
            out += part
        return bytes(out)

    def suffix(self, r: int, d: int) -> bytes | None:
        """The shortest yield of rule ``r``'s symbols from position ``d`` on."""
        key = (r, d)
        hit = self._suffix.get(key, False)
        if hit is False:
            hit = self._suffix[key] = self._spell(self.rule_rhs[r][d:])
        return hit

    # ------------------------------------------------------------------ parse stacks
    def _up_of(self, node_id: int) -> dict[int, tuple[float, tuple | None]]:
        """For node ``o``: nonterminal A -> (bytes to finish the parse once A completes with
        origin ``o``, the item taken: (rule, dot, next origin) or None at acceptance)."""
        hit = self._up.get(node_id)
        if hit is not None:
            return hit
        stack = [node_id]
        while stack:                                  # origins first (they are older nodes)
            x = stack[-1]
            if x in self._up:
                stack.pop()
                continue
            unpack = self.parser.unpack
            need = {o for items in self.parser.node(x).waiting.values() for _, _, o in map(unpack, items)
                    if o >= 0 and o != x and o not in self._up}
            if need:
                stack.extend(need)
                continue
            self._up[x] = self._local_up(x)
            stack.pop()
        return self._up[node_id]

    def _local_up(self, x: int) -> dict[int, tuple[float, tuple | None]]:
        node = self.parser.node(x)
        cost: dict[int, tuple[float, tuple | None]] = {}
        if x == self.parser.root:
            cost[self.parser.tables.start] = (0, None)
        waiting = node.waiting
        changed = True
        while changed:                                # relaxation over the node's own predictions
            changed = False
            for a, items in waiting.items():
                best = cost.get(a, (_INF, None))[0]
                for r, d, o in map(self.parser.unpack, items):
                    c, nxt = self._through(x, cost, r, d + 1, o)
                    if c is not None and c < best:
                        best = c
                        cost[a] = (c, (r, d, nxt))
                        changed = True
        return cost

    def _through(self, x: int, own: dict, r: int, start: int, o: int) -> tuple[float | None, int]:
        """Bytes to finish through item ``(r, ·, o)`` of node ``x``: rule ``r``'s symbols from
        ``start`` on, then the stack below its origin (``own``: ``x``'s table); None if impossible."""
        rest = self.suffix(r, start)
        nxt = x if o in (SELF, x) else o
        if rest is None or nxt < 0:                   # nxt < 0: a cut origin (abstract node)
            return None, nxt
        up = (own if nxt == x else self._up_of(nxt)).get(self.rule_lhs[r])
        return (None if up is None else len(rest) + up[0]), nxt

    def _finish(self, up_cost: dict, lhs: int) -> bytes:
        """Spell the cheapest way down the stack once ``lhs`` completes (see `_up_of`)."""
        out = bytearray()
        while True:
            _, via = up_cost[lhs]
            if via is None:
                return bytes(out)
            r, d, nxt = via
            out += self.suffix(r, d + 1)
            lhs = self.rule_lhs[r]
            up_cost = self._up_of(nxt)

    def node_completion(self, node_id: int) -> bytes | None:
        """The shortest bytes after which the parse from ``node_id`` (at a lexeme boundary) is complete."""
        hit = self._node_memo.get(node_id, False)
        if hit is not False:
            return hit
        node = self.parser.node(node_id)
        if node.accepting:
            hit = b""
        else:
            own, best = self._up_of(node_id), None
            for items in node.pending.values():
                for r, d, o in map(self.parser.unpack, items):
                    c, nxt = self._through(node_id, own, r, d, o)
                    if c is not None and (best is None or c < best[0]):
                        best = (c, r, d, nxt)
            hit = None if best is None else (self.suffix(best[1], best[2])
                                             + self._finish(self._up_of(best[3]), self.rule_lhs[best[1]]))
        self._node_memo[node_id] = hit
        return hit

    def state_completion(self, sid: int) -> bytes | None:
        """The shortest completion of recognizer state ``sid`` (memoised)."""
        hit = self._state_memo.get(sid, False)
        if hit is not False:
            return hit
        best = None
        for node, lex, q in self.rec.configs(sid):
            if lex == BOUNDARY:
                head, after = b"", node
            else:
                head = self.tail(lex, q)
                if head is None:
                    continue
                after = self.rec.after_lexeme(node, lex)
                if after < 0:
                    continue
            rest = self.node_completion(after)
            if rest is not None and (best is None or len(head) + len(rest) < len(best)):
                best = head + rest
        if best is not None and len(best) > MAX_COMPLETION_BYTES:
            best = None
        elif best is not None and not self.rec.accepting(self.rec.feed(sid, best)):   # pragma: no cover
            best = bfs_completion(self.rec, sid)        # a bug here must not cost correctness
        self._state_memo[sid] = best
        return best


def _tables(rec) -> _CompletionTables:
    tables = getattr(rec, _TABLES_ATTR, None)
    if tables is None:
        tables = _CompletionTables(rec)
        setattr(rec, _TABLES_ATTR, tables)
    return tables


def shortest_completion(rec, sid: int) -> bytes | None:
    """The shortest bytes after which recognizer state ``sid`` is accepting (None: none,
    or longer than `MAX_COMPLETION_BYTES`); memoised per state."""
    if sid == DEAD_STATE:
        return None
    return _tables(rec).state_completion(sid)


def bfs_completion(rec, sid: int, *, max_states: int = 20000) -> bytes | None:
    """The same by breadth-first search over bytes (the slow reference; None past
    ``max_states`` visited states)."""
    if rec.accepting(sid):
        return b""
    parent: dict[int, tuple[int, int] | None] = {sid: None}
    frontier = [sid]
    while frontier:
        nxt = []
        for s in frontier:
            for b in np.flatnonzero(rec.next_bytes(s)):
                t = rec.byte_step(s, int(b))
                if t == DEAD_STATE or t in parent:
                    continue
                parent[t] = (s, int(b))
                if rec.accepting(t):
                    out = bytearray()
                    while parent[t] is not None:
                        t, byte = parent[t]
                        out.append(byte)
                    return bytes(reversed(out))
                if len(parent) > max_states:
                    return None
                nxt.append(t)
        frontier = nxt
    return None


def checked_completion(rec, sid: int, checks, cstate, text: bytes, *, witnesses: tuple[bytes, ...] = (),
                       max_expansions: int = MAX_CHECKED_EXPANSIONS, strict: bool = False) -> bytes | None:
    """The shortest bytes that complete ``text`` (at grammar state ``sid`` and check state
    ``cstate``) so that the grammar accepts and every value check passes.

    The grammar's own shortest completion is tried first; if a check refuses it, A*
    over bytes with that completion's length as the heuristic (never more than the
    checked answer, and consistent: one byte changes it by at most one), in rounds
    of ``max_expansions / 4`` expansions.  First the witness round: where the
    grammar reads free content (a byte that leaves the grammar and check states as
    they are: a string's characters), content is written only as whole
    ``witnesses`` (JSON-escaped string contents that the schema's ``format``,
    ``pattern``, ... accept, `constrained.json_schema.witnesses`; at the start also
    their suffixes, to finish a string already begun), everything else byte by
    byte, texts of one length merged as below unless they wrote different
    witnesses: a check on string content (an ``email`` format left to validation,
    a non-regular ``pattern``, a ``oneOf`` of overlapping patterns), which no
    byte-wise search can satisfy (the check speaks only when the enclosing value
    closes), is met by writing an address whole.  Then exhaustive (the shortest);
    then expanding
    once the texts of one length that reach the same grammar state and check state
    (e.g. every character at one position of a string; the byte kept depends on the
    position, so strings written at different places differ: distinct keys for
    ``minProperties``), plain and weighted (``g + 3h``, heading for the end sooner);
    then keeping such texts apart by their last byte (distinct scalars for
    ``uniqueItems`` or ``contains``; weighted); the merging rounds write ASCII where
    it is allowed (a string's content then has ~95 choices, not ~220 with UTF-8
    lead bytes).  The witness round also writes the number witnesses (a JSON number's
    text among ``witnesses``: `constrained.json_schema.witnesses.number_witnesses`)
    where a value starts, since it writes no number's digits byte by byte after the
    first.  After the witness round, the value-by-value repair (`_repair`), then
    element growth (`_grown`: the grammar's completion with whole values added to the
    arrays it closes, for a ``contains`` or ``oneOf`` branch that needs more elements).
    Answers of the later rounds are short rather than provably shortest; whatever is
    returned went byte by byte through the checks.

    None if no round finds one (memoised per state on the recognizer's tables).  The
    search is bounded: ``max_expansions``, and no search at all from a refused grammar
    completion longer than `MAX_SEARCHED_COMPLETION` bytes (every expansion reads one
    about that long: a ``minItems: 600`` array of objects took 20 s to give up).  So
    None means "none found", not "none exists", unless the exhaustive round ran out of
    texts; ``strict=True`` tells them apart: `CompletionSearchError` (naming the
    keyword that refuses the grammar's completion) where the search gave up, None only
    where no completion exists.
    """
    tables = _tables(rec)
    first = tables.state_completion(sid)
    if first is None:
        return None
    after = checks.step(cstate, text, first)
    if after is not None and checks.accepts_end(after, text + first):
        return first
    key = (checks.content_hash(), sid, cstate, bytes(text), max_expansions, witnesses)
    memo = tables.checked_memo
    hit = memo.get(key)
    if hit is None:
        found, proven = None, False
        share = max_expansions // (len(_ROUNDS) - 1)
        # each expansion reads a completion of about this length: past the cap no search
        rounds = _ROUNDS if len(first) <= MAX_SEARCHED_COMPLETION else ()
        found = _padded(rec, sid, checks, cstate, text, first)
        if found is not None:
            rounds = ()
        for i, (merge, weight, witnessed) in enumerate(rounds):
            stats: dict = {}
            found = _a_star(rec, tables, sid, checks, cstate, text, len(first), share,
                            merge=merge, weight=weight, witnesses=witnesses if witnessed else None, stats=stats)
            if found is None and merge is None and stats.get("exhausted"):
                proven = True                 # the exhaustive round ran out of texts: there is none
                break
            if found is None and i == 0:
                found = _repair(rec, tables, sid, checks, cstate, text, witnesses, share)
            if found is None and i == 0:
                found = _grown(rec, tables, sid, checks, cstate, text, witnesses, share)
            if found is not None:
                break
        if len(memo) >= 64:
            memo.clear()
        hit = memo[key] = (found, proven)
    found, proven = hit
    if found is None and strict and not proven:
        f = checks.failure(cstate, text, first) if isinstance(checks, SupportsFailure) else None
        raise CompletionSearchError(keyword=None if f is None else f.keyword,
                                    pointer="" if f is None else f.pointer, expansions=max_expansions)
    return found


def _padded(rec, sid: int, checks, cstate, text: bytes, first: bytes) -> bytes | None:
    """The grammar's completion ``first`` with the values a check refuses for being too
    short grown (``checks.pad``: strings by copies of a content byte, `grown_strings`; an
    array by copies of its last element), where that passes every check and the grammar:
    ``minItems`` above what the grammar counts asks for hundreds of elements,
    ``minLength`` above it for dozens of characters, past any byte-wise search's budget
    (the search writes no run of content bytes).  None otherwise."""
    if not isinstance(checks, SupportsPadding) or not isinstance(checks, SupportsFailure):
        return None
    padded, f = grown_strings(rec, sid, checks, cstate, text, first)
    if f is not None:
        padded = checks.pad(cstate, text, padded, f)
    if padded is None or checks.failure(cstate, text, padded) is not None or not rec.accepting(rec.feed(sid, padded)):
        return None
    return padded


MAX_GROWN_STRINGS = 64   # strings `grown_strings` grows in one completion


def grown_strings(rec, sid: int, checks, cstate, text: bytes, data: bytes) -> tuple[bytes, Any]:
    """``data`` (a completion of ``text``, at grammar state ``sid`` and check state
    ``cstate``) with each string a check refuses for too few characters grown
    (``checks.pad`` with `content_bytes`), in turn; and the first failure left (None:
    it passes every check).  A short string is refused at its closing quote, before an
    earlier value that only its container's close refuses: growing it first lets the
    search see which value is really wrong."""
    failure_of = checks.failure if isinstance(checks, SupportsFailure) else None
    if failure_of is None:
        return data, None
    f = failure_of(cstate, text, data)
    if not isinstance(checks, SupportsPadding):
        return data, f
    for _ in range(MAX_GROWN_STRINGS):
        if f is None or f.keyword != "minLength":
            break
        grown = checks.pad(cstate, text, data, f, content_bytes(rec, sid, len(text), data))
        if grown is None:
            break
        data, f = grown, failure_of(cstate, text, grown)
    return data, f


MAX_CONTENT_BYTES = 4    # content units `content_bytes` offers a padding to repeat


def content_bytes(rec, sid: int, base: int, data: bytes):
    """For ``checks.pad``: the units of printable ASCII that bring the grammar back where
    it is at offset ``at`` of the text read to ``sid`` (``base`` bytes) followed by
    ``data`` (a string's content there): single bytes that keep its state (a blank
    first), else pairs (``a0`` under ``^([a-z][0-9])+$``); at most `MAX_CONTENT_BYTES`."""
    def ascii_next(s: int) -> list[int]:
        return [b for b in _PREFERRED[rec.next_bytes(s)[_PREFERRED]].tolist() if b < 0x80]

    def content(at: int) -> list[bytes]:
        if at < base:
            return []
        s = rec.feed(sid, data[:at - base])
        if s == DEAD_STATE:
            return []
        firsts = ascii_next(s)
        out = [bytes((b,)) for b in firsts if rec.byte_step(s, b) == s][:MAX_CONTENT_BYTES]
        for b in firsts if not out else ():
            s1 = rec.byte_step(s, b)
            out += [bytes((b, c)) for c in ascii_next(s1) if rec.byte_step(s1, c) == s][:MAX_CONTENT_BYTES - len(out)]
            if len(out) >= MAX_CONTENT_BYTES:
                break
        return out
    return content


_ROUNDS = (("length", 1, True), (None, 1, False), ("length", 1, False), ("length", GREEDY_WEIGHT, False),
           ("last byte", GREEDY_WEIGHT, False))


MACRO_PENALTY = 2     # the witness round's extra priority per witness written: fewer witnesses first
MAX_REPAIRS = 64      # values `_repair` rewrites one after the other


def _repair(rec, tables: _CompletionTables, sid: int, checks, cstate, text: bytes, witnesses: tuple[bytes, ...],
            max_expansions: int) -> bytes | None:
    """A completion found value by value: follow the grammar's shortest completion up to
    the value a check refuses (``checks.failure``: the container whose closing byte is
    refused, narrowed to the member or element `jsonschema`'s first error names), rewrite
    that value (a witness written in its place, `_substituted`; else a local A*:
    witnesses first, then texts merged by length) until the
    refusal moves past it (the grammar's completion from there fails later, or not at
    all), and go on from there.  A whole-text A* must first exhaust every cheaper detour
    anywhere before the refused value (a dozen required date-times spell thousands of
    equally short variants); this one changes only the value that is wrong.  Short, not
    provably shortest; None where a value cannot be rewritten within the budget (or
    the checks cannot say where they fail)."""
    failure_of = checks.failure if isinstance(checks, SupportsFailure) else None
    if failure_of is None:
        return None
    pad = checks.pad if isinstance(checks, SupportsPadding) else None
    done = b""
    s, cs = sid, cstate
    for _ in range(MAX_REPAIRS):
        c = tables.state_completion(s)
        if c is None:
            return None
        whole = text + done
        c, f = grown_strings(rec, s, checks, cs, whole, c)    # short strings grown
        if f is None:
            return done + c
        padded = pad(cs, whole, c, f) if pad is not None and f.keyword != "minLength" else None
        if padded is not None:               # too few elements: the last one repeated
            f2 = failure_of(cs, whole, padded)
            if f2 is None and rec.accepting(rec.feed(s, padded)):
                return done + padded
            if f2 is not None and f2.offset > f.value_end - len(c) + len(padded):
                c, f = padded, f2            # the array passes now; something after it fails
        at = max(f.offset, len(whole))       # text already produced stays as it is
        k = at - len(whole)
        s0, cs0 = s, cs
        if k:
            s0 = rec.feed(s, c[:k])
            cs0 = checks.step(cs, whole, c[:k])
            if s0 == DEAD_STATE or cs0 is None:      # pragma: no cover - a prefix of a viable completion
                return None
        base = whole + c[:k]

        def progress(s2, cs2, data, base=base, at=at):
            rest = tables.state_completion(s2)
            if rest is None:
                return False
            f2 = grown_strings(rec, s2, checks, cs2, base + data, rest)[1]
            return f2 is None or f2.offset > at

        local = _substituted(rec, s0, checks, cs0, base, witnesses, progress)
        for merge, weight, wit in (("length", 1, True), ("length", GREEDY_WEIGHT, False),
                                   ("last byte", GREEDY_WEIGHT, False)) if local is None else ():
            local = _a_star(rec, tables, s0, checks, cs0, base, len(c) - k, max_expansions // 3, merge=merge,
                            weight=weight, witnesses=witnesses if wit else None, goal=progress,
                            deficit=checks.deficit if isinstance(checks, SupportsDeficit) else None)
            if local is not None:
                break
        if local is None:
            return None
        done = done + c[:k] + local
        s = rec.feed(s0, local)
        cs = checks.step(cs0, base, local)
    return None


MAX_SUBSTITUTIONS = 64  # witnesses `_substituted` writes in place of one refused value


def _substituted(rec, sid: int, checks, cstate, text: bytes, witnesses: tuple[bytes, ...], goal) -> bytes | None:
    """For `_repair`: the refused value that starts here written as a witness, at once: a
    ``"`` and the witness where a string starts (the witness alone inside one, or as a
    number), the first that the grammar and the checks take and after which ``goal``
    holds.  A check on a string's content that speaks only when its container closes (a
    ``pattern`` too large for the automaton, under a long grammar completion) is met
    directly; the local A* would first spend its budget on every detour as cheap as the
    witness's penalty anywhere in that completion.  None where no witness does."""
    tried = 0
    for w in witnesses:
        for data in (b'"' + w, w):
            s2 = rec.feed(sid, data)
            if s2 == DEAD_STATE:
                continue
            cs2 = checks.step(cstate, text, data)
            if cs2 is None:
                continue
            if goal(s2, cs2, data):
                return data
            tried += 1
            if tried >= MAX_SUBSTITUTIONS:
                return None
    return None


MAX_GROWN = 4          # elements `_grown` adds to the arrays of one completion
MAX_GROWN_VALUES = 32  # element witnesses it tries at each array close


def element_witnesses(witnesses: tuple[bytes, ...]) -> tuple[bytes, ...]:
    """Whole JSON values to add to an array (`_grown`), from the checks' ``witnesses``:
    ``[]``, ``{}``, ``""``, the number witnesses, the first string witnesses quoted, and
    arrays of one number or string witness (``[132]``: an element that must hold a
    multiple of 44 under one ``oneOf`` branch's ``contains``); shortest first."""
    numbers = [w for w in witnesses if _NUMBER.fullmatch(w)]
    strings = [b'"' + w + b'"' for w in witnesses if w not in numbers][:8]
    out = [b"[]", b"{}", b'""'] + numbers + strings + [b"[" + v + b"]" for v in numbers + strings[:4]]
    return tuple(sorted(dict.fromkeys(out), key=len)[:MAX_GROWN_VALUES])


def _grown(rec, tables: _CompletionTables, sid: int, checks, cstate, text: bytes, witnesses: tuple[bytes, ...],
           max_expansions: int) -> bytes | None:
    """A completion that follows the grammar's shortest one but adds up to `MAX_GROWN`
    whole elements (`element_witnesses`) to the arrays it closes: where a ``contains``,
    or the ``oneOf`` branch the open array can still meet, asks for an element the
    grammar's completion does not write (``",110],[132]]`` after ``[["x`` under
    MaskBench 6849's ``oneOf``: the open element needs a multiple of 11 of at least 100,
    the outer array one more element that meets both branches' ``items``).  A byte-wise A* has to try every shorter text first
    (every scalar and empty container at every position: tens of thousands of texts);
    this one adds values only where an array closes.  Best first by length (each
    element added costs `MACRO_PENALTY` more); every text went byte by byte through
    the grammar and the checks.  None where nothing is found within ``max_expansions``."""
    outside = checks.blank_is_insignificant if isinstance(checks, SupportsBlankInsignificance) else None
    values = element_witnesses(witnesses)
    if outside is None or not values:
        return None
    order = itertools.count()
    heap = [(0, next(order), sid, cstate, b"", 0)]
    seen: set[bytes] = set()
    expansions = 0
    while heap and expansions < max_expansions:
        _, _, s, cs, done, added = heapq.heappop(heap)
        if done in seen:
            continue
        seen.add(done)
        expansions += 1
        whole = text + done
        rest = tables.state_completion(s)
        if rest is None:
            continue
        j, cs_j = rest.find(b"]"), None
        while j != -1:                         # the next byte of the completion that closes an array
            # (outside a string: where a blank would be whitespace between tokens)
            cs_j = checks.step(cs, whole, rest[:j])
            if cs_j is None or outside(cs_j):
                break
            j = rest.find(b"]", j + 1)
        if j == -1:                            # no array left to close: the completion as it is
            end = checks.step(cs, whole, rest)
            if end is not None and checks.accepts_end(end, whole + rest) and rec.accepting(rec.feed(s, rest)):
                return done + rest
            continue
        if cs_j is None:                       # something before the close fails: no element added helps
            continue
        steps = [(rest[:j + 1], added)]        # close the array as the grammar does, or add an element first
        if added < MAX_GROWN:
            empty = (whole + rest[:j]).rstrip(b" \t\n\r").endswith(b"[")
            steps += [(rest[:j] + (b"" if empty else b",") + v, added + 1) for v in values]
        for data, n in steps:
            s2 = rec.feed(s, data)
            after = _viable(tables, checks, s2, cs, whole, data)
            if after is None:
                continue
            h, cs2 = after
            heapq.heappush(heap, (len(done) + len(data) + len(h) + MACRO_PENALTY * n, next(order), s2, cs2,
                                  done + data, n))
    return None


def _a_star(rec, tables: _CompletionTables, sid: int, checks, cstate, text: bytes, h0: int,
            max_expansions: int, *, merge: str | None, weight: int = 1,
            witnesses: tuple[bytes, ...] | None = None, goal=None, stats: dict | None = None,
            deficit=None) -> bytes | None:
    """One round of `checked_completion` (see there for ``merge`` and ``weight``).  The
    merging rounds also take a byte that leaves both states as they are (a character
    in a string, a digit of a fraction, a blank) at most once in a row: such runs only
    make texts longer, and one character is enough to tell two keys apart.

    With ``witnesses`` (the witness round), such a *content* byte is never taken
    alone: at a state that has content bytes a witness is written whole (at most one
    per stretch of content, `MACRO_PENALTY` added to the priority of each), and the
    other bytes are taken only where they shorten the grammar's completion (the
    closing quote; not an escape or a multi-byte character).  Witnesses are also
    written right after a ``"`` (a string whose characters the grammar does
    constrain: a uuid pattern, whose all-digit shortest spelling an overlapping
    ``oneOf`` refuses) and at the start (their suffixes too: a string may be half
    written).  Texts merge only if they wrote the same witnesses."""
    order = itertools.count()
    # (priority, -g, tie, grammar state, check state, bytes so far, content byte or witness last, witnesses)
    heap = [(weight * h0, 0, next(order), sid, cstate, b"", False, ())]
    closed: set = set()
    expansions = 0
    # blanks outside strings mean nothing to a value check: taken only on the grammar's shortest way
    insignificant = checks.blank_is_insignificant if isinstance(checks, SupportsBlankInsignificance) else None
    starts = () if witnesses is None else sorted(dict.fromkeys(w[k:] for w in witnesses for k in range(len(w))),
                                                 key=len)
    # number witnesses (one-byte ones are byte moves already)
    numbers = () if witnesses is None else tuple(w for w in witnesses if len(w) > 1 and _NUMBER.fullmatch(w))
    while heap and expansions < max_expansions:
        _, _, _, s, cs, done, looped, wrote = heapq.heappop(heap)
        if merge is not None:
            key = (s, cs, len(done), done[-1:] if merge == "last byte" else b"", wrote)
            if key in closed:
                continue
            closed.add(key)
        expansions += 1
        whole = text + done
        if goal is not None:
            if done and goal(s, cs, done):
                return done
        elif rec.accepting(s) and checks.accepts_end(cs, whole):
            return done
        blank = set()
        nexts = _PREFERRED[rec.next_bytes(s)[_PREFERRED]].tolist()
        if merge is not None:
            ascii_only = [b for b in nexts if b < 0x80]
            nexts = ascii_only or nexts           # multi-byte characters only where nothing else goes
            if len(nexts) > 1:                    # representatives differ by position: distinct keys
                k = 1 + (len(whole) * 97) % (len(nexts) - 1)
                nexts = nexts[:1] + nexts[k:] + nexts[1:k]
        g = len(done) + 1
        here_len = len(tables.state_completion(s))
        penalty = MACRO_PENALTY * len(wrote)
        content = False
        moves = []
        looped_here = False
        # a number witness is not gone on with (``132`` into ``132.5``, ``132e1``)
        after_number = looped and bool(wrote) and wrote[-1] in numbers and done.endswith(wrote[-1])
        for b in nexts:
            if after_number and b in _NUMBER_BYTES:
                continue
            s2 = rec.byte_step(s, b)
            if looped_here and s2 == s and b not in _STRUCTURAL and merge == "length":
                continue                      # another byte of the same content: one stands for all
            byte = bytes((b,))
            after = _viable(tables, checks, s2, cs, whole, byte)
            if after is None:
                continue
            h, cs2 = after
            loop = s2 == s and cs2 == cs
            looped_here = looped_here or loop
            content = content or loop
            if loop and (witnesses is not None or (merge is not None and looped)):
                continue
            if b in _BLANKS:                  # whitespace bytes with one future: one of them
                if (s2, cs2) in blank:
                    continue
                if insignificant is not None and len(h) >= here_len and insignificant(cs):
                    continue                  # a blank between tokens: only where the grammar needs it
                blank.add((s2, cs2))
            extra = deficit(cs2) if deficit is not None else 0
            moves.append((g + weight * (len(h) + extra) + penalty, -g, s2, cs2, done + byte, loop, len(h)))
        if witnesses is not None and (content or not done or whole.endswith(b'"')):
            if content:
                moves = [m for m in moves if m[6] < here_len]  # inside content: only the way out
            written = () if looped else starts if not done else witnesses
        else:
            # where a value may start (after ``[``, ``,``, ``:``): the number witnesses, whose
            # digits this round does not write byte by byte (after the first they are content)
            value_start = bool(numbers) and whole[-256:].rstrip(b" \t\n\r")[-1:] in (b"[", b",", b":")
            written = numbers if value_start else ()
        if written:
            for w in written:
                s2 = rec.feed(s, w)
                after = _viable(tables, checks, s2, cs, whole, w)
                if after is None:
                    continue
                h, cs2 = after
                g2 = len(done) + len(w)
                extra = deficit(cs2) if deficit is not None else 0
                heapq.heappush(heap, (g2 + weight * (len(h) + extra) + penalty + MACRO_PENALTY, -g2, next(order), s2, cs2,
                                      done + w, True, wrote + (w,)))
        for f, neg_g, s2, cs2, data, loop, _ in moves:
            heapq.heappush(heap, (f, neg_g, next(order), s2, cs2, data, loop, wrote))
    if stats is not None:
        stats["exhausted"] = not heap
    return None


def _viable(tables, checks, s2: int, cs, whole: bytes, data: bytes):
    """``(grammar completion of s2, check state)`` after ``data`` was read to reach ``s2``,
    or None where the grammar or a check leaves no way to finish."""
    if s2 == DEAD_STATE:
        return None
    h = tables.state_completion(s2)
    if h is None:
        return None
    cs2 = checks.step(cs, whole, data)
    return None if cs2 is None else (h, cs2)


def completion_tokens(matcher, data: bytes) -> list[int] | None:
    """Tokens spelling ``data`` that ``matcher`` accepts in turn (it is not moved)."""
    from constrained.errors import VocabularyError

    vocab = matcher.compiled.vocab
    candidates = []
    try:
        candidates.append(vocab.encode(data.decode("utf-8")))
    except (UnicodeDecodeError, VocabularyError):
        pass
    try:
        candidates.append(vocab.encode_bytes(data))
    except VocabularyError:
        pass
    for tokens in candidates:
        if b"".join(vocab.token_bytes[t] for t in tokens) != data:
            continue
        probe = matcher.fork()
        if probe.advance_many(tokens) == len(tokens):
            return tokens
    return None
