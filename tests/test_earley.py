"""The Earley parser's int-encoded items and memoised closures against a textbook closure."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

from constrained.engine.earley import CUT, SELF, EarleyParser, NeedsContext, ParserTables
from constrained.errors import EmptyLanguageError
from constrained.grammar.ir import Grammar

GRAMMARS = Path(__file__).resolve().parents[1] / "grammars"

NULLABLE_GRAMMAR = """
start: a b "x" | start "," start
a: "a"* | b a
b: | "b" b
"""

# a chain ``r_i: r_{i+1} "x"?`` longer than MAX_COMPLETION_DEPTH: after "end" (and each "x")
# every r_i completes into one origin, nested (memoised, then in place past the depth)
CHAIN_GRAMMAR = "start: r0\n" + "".join(f'r{i}: r{i + 1} "x"?\n' for i in range(90)) + 'r90: "end"\n'
# unit and nullable cycles: completing one nonterminal into an origin completes it again
CYCLE_GRAMMAR = """
start: a ("," a)*
a: b "x"? | "y" | c
b: a | c "z"? | "w"
c: b | a e
e: | "e"
"""
SOURCES = ["json.lark", "arithmetic.lark", NULLABLE_GRAMMAR, CHAIN_GRAMMAR, CYCLE_GRAMMAR]


def _parser(source: str) -> EarleyParser:
    """The parser of a shipped grammar file (``*.lark``) or of grammar text."""
    text = (GRAMMARS / source).read_text() if source.endswith(".lark") else source
    return EarleyParser(ParserTables.from_grammar(Grammar.from_lark(text)))


@pytest.mark.parametrize("source", ["json.lark", "arithmetic.lark", NULLABLE_GRAMMAR])
def test_items_round_trip_at_every_dotted_position(source):
    p = _parser(source)
    t = p.tables
    seen = set()
    for r, rhs in enumerate(t.rule_rhs):
        for d in range(len(rhs) + 1):
            for o in (SELF, CUT, 0, 1, 7, 10**6):
                item = p.item(r, d, o)
                assert p.unpack(item) == (r, d, o)
                assert item not in seen
                seen.add(item)
            if d < len(rhs):
                assert p.unpack(p.item(r, d, 5) + 1) == (r, d + 1, 5)   # the dot advances by +1


def _textbook_closure(p: EarleyParser, node_id: int) -> tuple[set, set, bool]:
    """Closure of a node's kernel, item by item with (rule, dot, origin) tuples: predict
    every rule of an expected nonterminal, advance over nullable ones (Aycock & Horspool,
    so an item completed with origin SELF adds nothing), complete into the origins'
    closures as the parser stores them."""
    t = p.tables
    nt_base = t.num_terminals
    items = {p.unpack(i) for i in p.node(node_id).kernel}
    agenda = list(items)
    accepting = False
    while agenda:
        r, d, o = agenda.pop()
        rhs = t.rule_rhs[r]
        new = []
        if d == len(rhs):
            lhs = t.rule_lhs[r]
            if lhs == t.start and (o == 0 or (o == SELF and node_id == p.root)):
                accepting = True
            if o >= 0:
                for w in p.node(o).waiting.get(lhs, ()):
                    r2, d2, o2 = p.unpack(w)
                    new.append((r2, d2 + 1, o if o2 == SELF else o2))
        elif rhs[d] >= nt_base:
            new = [(r2, 0, SELF) for r2 in t.rules_by_lhs.get(rhs[d], ())]
            if rhs[d] in t.nullable:
                new.append((r, d + 1, o))
        for it in new:
            if it not in items:
                items.add(it)
                agenda.append(it)
    pending = [(t.rule_rhs[r][d], (r, d, o)) for r, d, o in items if d < len(t.rule_rhs[r])]
    expect = {(x, it) for x, it in pending if x < nt_base}
    waiting = {(x, it) for x, it in pending if x >= nt_base}
    return expect, waiting, accepting


def _compare_with_textbook(p: EarleyParser, rng: random.Random, nodes: int, cut_share: float,
                           cut_depth: int) -> int:
    """Walk up to ``nodes`` random nodes over scans (abstract ones too, a ``cut_share`` of
    the time) and check each one's items and acceptance against `_textbook_closure`;
    returns how many were checked."""
    frontier = [p.root]
    visited = set()
    while frontier and len(visited) < nodes:
        n = frontier.pop(rng.randrange(len(frontier)))
        if n in visited:
            continue
        visited.add(n)
        for term in p.node(n).terminals:
            try:
                m = p.scan(n, term)
            except NeedsContext:
                continue
            frontier.append(m)
            if rng.random() < cut_share:
                frontier.append(p.abstract(m, cut_depth))
    for n in visited:
        node = p.node(n)
        for items in (*node.expect.values(), *node.waiting.values()):
            assert len(set(items)) == len(items), n          # each item once (parts overlap)
        expect, waiting, accepting = _textbook_closure(p, n)
        got_e = {(x, p.unpack(i)) for x, items in node.expect.items() for i in items}
        got_w = {(x, p.unpack(i)) for x, items in node.waiting.items() for i in items}
        assert got_e == expect, n
        assert got_w == waiting, n
        assert node.accepting == accepting, n
    return len(visited)


@pytest.mark.parametrize("source", SOURCES, ids=["json", "arithmetic", "nullable", "chain", "cycles"])
def test_memoised_closures_equal_the_textbook_closure(source):
    assert _compare_with_textbook(_parser(source), random.Random(7), 400, 0.2, 2) > 5


_SYMBOLS = ["a", "b", "c", '"x"', '"y"', '"z"']


@st.composite
def _random_grammars(draw) -> str:
    """Small random CFGs: nullable, left- and right-recursive, cyclic rules."""
    lines = ["start: " + " | ".join(" ".join(draw(st.lists(st.sampled_from(_SYMBOLS), max_size=3)))
                                     for _ in range(draw(st.integers(1, 3))))]
    for nt in "abc":
        alts = [" ".join(draw(st.lists(st.sampled_from(_SYMBOLS), max_size=3))) for _ in range(draw(st.integers(1, 3)))]
        lines.append(f"{nt}: " + " | ".join(alts))
    return "\n".join(lines) + "\n"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_random_grammars(), st.integers(0, 2**16))
def test_memoised_closures_equal_the_textbook_closure_on_random_grammars(source, seed):
    """Closures with memoised completions and merged predictions against the textbook
    closure, on random grammars (nullable, recursive, cyclic), abstract nodes too."""
    try:
        p = _parser(source)
    except EmptyLanguageError:
        assume(False)
    _compare_with_textbook(p, random.Random(seed), 40, 0.3, 1)


@pytest.mark.parametrize("source", SOURCES)
def test_what_the_parser_keeps_is_not_tracked_by_the_garbage_collector(source: str) -> None:
    """Nodes and memoised completions live as long as the grammar, tens of thousands per
    serving batch: whatever the cyclic GC still tracks when it promotes them triggers its
    full collections.  After the collections a new object meets before it gets old (a
    young and a middle-generation one), nothing the parser keeps per node or completion
    is tracked (objects, dicts of tuples or tuples of tuples would be)."""
    import gc

    p = _parser(source)
    rng = random.Random(0)
    frontier = [p.root]
    for _ in range(200):                     # random scans: nodes, completions
        node = rng.choice(frontier)
        terminals = p.terminals(node)
        if not terminals:
            continue
        nxt = p.scan(node, rng.choice(terminals))
        if nxt >= 0:
            frontier.append(nxt)
    assert p.num_nodes > 3
    gc.collect(0)
    gc.collect(1)
    kept = [p._node_kernel, p._node_pending, p._node_terminals, p._item_lists,
            list(p._completion_pending.values()), list(p._completion_memo.values()),
            list(p._completion_memo), list(p._by_future), list(p._by_kernel),
            list(p._prediction_merged.values()), list(p._prediction_terminals.values()),
            list(p._completion_closed.values()), list(p._completion_closed_terminals.values()),
            list(p._prediction_items.values()), list(p._completion_closed_items.values())]
    tracked = [type(x).__name__ for group in kept for x in group if gc.is_tracked(x)]
    assert not tracked, f"{len(tracked)} tracked, e.g. {tracked[:5]}"
    node = p.node(frontier[-1])                  # the view still reads them
    assert set(node.terminals) == {k for k in node.pending if k < p.tables.num_terminals}
