"""Compile time limits of the grammar front ends and of token tables (issue 23).

`Grammar.from_lark` and `Grammar.from_gbnf` take ``timeout=`` (`constrained.deadline`):
grammars written to be slow end with `CompileTimeoutError` naming the rule and line (or
lark's loader), and the work lark's loader does is interrupted at the deadline.  A token
table computed past an open deadline raises and stays uncomputed.

Each check runs like a hostile-corpus case (`test_hostile_corpus.run_cases`): in a forked
child under an address-space cap and a wall limit, so a hang or a blown address space
fails the test instead of stalling the run.  No check times anything: the wall limit is
generous, and only the outcome (typed error, what it names, compiled) is asserted.
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import hostile_strategies as hs
from test_hostile_corpus import BYTES, failure_report, run_cases

from constrained import Grammar, compile_grammar
from constrained.automata.byte_dfa import compile_regex
from constrained.deadline import compile_deadline, interrupt_at_deadline
from constrained.engine.earley import DEADLINE_EVERY, EarleyParser, ParserTables
from constrained.engine.token_tables import TokenTables
from constrained.errors import CompileTimeoutError, GrammarSyntaxError, InvalidTimeoutError

WALL = 30.0


def _in_child(check, *args) -> str:
    """Run ``check(*args)`` in a forked child (address-space cap, wall limit); its note."""
    (result,) = run_cases([(check.__name__, "call", (check, *args))], budget=WALL, wall=WALL)
    assert result.status == "compiled", failure_report([result]) if result.status == "failure" else result
    return result.message


def _timeout_of(load) -> CompileTimeoutError:
    try:
        load()
    except CompileTimeoutError as e:
        return e
    raise AssertionError("compiled within its time limit")


# ---------------------------------------------------------------------- GBNF


def _gbnf_slow_lowering_names_the_rule_and_its_line() -> str:
    # 1000 helper rules per rule: ~6 s to lower, where reading the text takes ~0.05 s (up to
    # ~20x that in a child forked from a test process with a large heap: 0.3 s and 300 rules
    # timed out while still reading there, before any rule)
    text = hs._counted_rules(1000, "gbnf")
    e = _timeout_of(lambda: Grammar.from_gbnf(text, timeout=1.5))
    assert e.limit == "compile_timeout" and e.value == 1.5
    assert e.rule is not None and e.rule.startswith(("r-", "y-")), e
    lines = text.splitlines()
    assert lines[e.line - 1].startswith(f"{e.rule} ::="), (e.rule, e.line)
    assert f"rule {e.rule!r}" in str(e) and f"line {e.line}" in str(e)
    return str(e)


def _gbnf_no_limit_when_asked() -> str:
    g = Grammar.from_gbnf(hs._counted_rules(20, "gbnf"), timeout=None)
    return f"{len(g.rules)} rules"


def _gbnf_from_file_passes_the_timeout(path: str) -> str:
    e = _timeout_of(lambda: Grammar.from_file(path, timeout=0.0))
    assert e.line is not None
    return str(e)


def test_gbnf_lowering_past_its_time_limit_names_the_rule_and_line() -> None:
    _in_child(_gbnf_slow_lowering_names_the_rule_and_its_line)


def test_gbnf_without_a_limit_compiles() -> None:
    assert _in_child(_gbnf_no_limit_when_asked).endswith("rules")


def test_gbnf_files_take_the_timeout(tmp_path) -> None:
    path = tmp_path / "slow.gbnf"
    path.write_text(hs._counted_rules(50, "gbnf"), encoding="utf-8")
    _in_child(_gbnf_from_file_passes_the_timeout, str(path))


# ---------------------------------------------------------------------- lark


def _lark_loader_is_interrupted_at_the_deadline() -> str:
    started = time.monotonic()
    e = _timeout_of(lambda: Grammar.from_lark(hs._unused_chain(4000), timeout=0.5))
    assert "lark's grammar loader" in str(e) and "4002 lines" in str(e), e
    assert time.monotonic() - started < 5.0          # interrupted, not left to finish
    # the interrupted thread goes on normally: no exception is left pending for later code
    total = sum(i for i in range(200_000))
    g = Grammar.from_lark('start: "a" B\nB: /[0-9]+/')
    return f"{e} / then {len(g.terminals)} terminals, {total}"


def _lark_chain_of_3000_rules_compiles() -> str:
    g = Grammar.from_lark(hs._chain_rules(3000, "lark"))
    cg = compile_grammar(g, BYTES, cache_dir=None)
    assert cg.accepts_bytes(b"end") and not cg.accepts_bytes(b"endy")
    assert cg.matcher().mask().any()
    return f"{len(g.rules)} rules"


def _lark_sections_get_the_time_left() -> str:
    bomb = ('{"allOf": [' + ", ".join(
        '{"anyOf": [' + ", ".join(f'{{"type": "object", "properties": {{"p{i}{j}": {{"type": "integer"}}}}, '
                                  f'"required": ["p{i}{j}"]}}' for j in range(6)) + "]}" for i in range(6)) + "]}")
    e = _timeout_of(lambda: Grammar.from_lark(f'start: "call " args\nargs: %json {bomb}', timeout=0.5))
    assert e.pointer is not None and e.pointer.startswith("/allOf/"), e
    return str(e)


def _lark_errors_are_still_lark_s() -> str:
    """The checks lark's parser construction made, made here with its messages."""
    for text, words in [("start: nope", "not defined"), ("start: A\nA: /a*/", "zero-width"),
                        ("start: /[z-a]/", "could not load")]:
        try:
            Grammar.from_lark(text)
        except GrammarSyntaxError as e:
            assert words in str(e), (text, str(e))
        else:
            raise AssertionError(f"{text!r} loaded")
    return "typed"


def test_lark_loader_past_its_time_limit_is_interrupted() -> None:
    _in_child(_lark_loader_is_interrupted_at_the_deadline)


def test_a_lark_chain_of_3000_rules_compiles_in_time() -> None:
    _in_child(_lark_chain_of_3000_rules_compiles)


def test_lark_json_sections_share_the_grammar_s_time_limit() -> None:
    _in_child(_lark_sections_get_the_time_left)


def test_lark_grammar_errors_are_unchanged() -> None:
    _in_child(_lark_errors_are_still_lark_s)


def _served_grammars_take_the_request_s_timeout() -> str:
    """A serving request's ``timeout`` bounds a lark or GBNF spec's load too; the failure is
    remembered (`GrammarCache`), so the next request fails at once."""
    from constrained.integrations.grammar_cache import GrammarCache
    from constrained.integrations.spec import ConstraintSpec

    cache = GrammarCache(BYTES, cache_dir=None)
    notes = []
    for request in ({"lark": hs._unused_chain(4000), "timeout": 0.3},
                    {"gbnf": hs._counted_rules(300, "gbnf"), "timeout": 0.3}):
        spec = ConstraintSpec.from_request(request)
        started = time.monotonic()
        e = _timeout_of(lambda spec=spec: cache.get(spec))
        assert time.monotonic() - started < 5.0, e
        again = time.monotonic()
        assert _timeout_of(lambda spec=spec: cache.get(spec)) is e and time.monotonic() - again < 0.1
        notes.append(str(e))
    assert cache.stats()["failures"] == 2
    return " / ".join(notes)


def test_served_lark_and_gbnf_specs_take_the_request_s_timeout() -> None:
    _in_child(_served_grammars_take_the_request_s_timeout)


# ---------------------------------------------------------------------- the interrupt itself


def _interrupts_never_leak_past_their_block() -> str:
    """Blocks ending around their deadline, many times: an interrupt is either raised as
    `CompileTimeoutError` inside ``with`` or withdrawn; nothing reaches later code."""
    outcomes = {"timeout": 0, "done": 0}
    for i in range(300):
        budget = 0.0005 * (i % 7)
        try:
            with compile_deadline(budget), interrupt_at_deadline(what="busy loop"):
                end = time.monotonic() + 0.0005 * (i % 5)
                while time.monotonic() < end:
                    pass
            outcomes["done"] += 1
        except CompileTimeoutError:
            outcomes["timeout"] += 1
        # code after the block: a stray interrupt would surface here (it is a BaseException)
        for _ in range(2000):
            pass
    time.sleep(0.05)
    assert outcomes["timeout"] and outcomes["done"], outcomes
    return str(outcomes)


def _an_interrupt_hits_only_its_own_thread() -> str:
    finished = []

    def other() -> None:
        end = time.monotonic() + 0.5
        while time.monotonic() < end:
            pass
        finished.append(True)

    thread = threading.Thread(target=other)
    thread.start()
    _timeout_of(lambda: _spin_under(0.05))
    thread.join()
    assert finished == [True]
    return "other thread finished"


def _spin_under(seconds: float) -> None:
    with compile_deadline(seconds), interrupt_at_deadline(what="spin"):
        while True:
            pass


def test_interrupts_are_raised_in_the_block_or_withdrawn() -> None:
    _in_child(_interrupts_never_leak_past_their_block)


def test_an_interrupt_hits_only_the_thread_past_its_deadline() -> None:
    _in_child(_an_interrupt_hits_only_its_own_thread)


# ---------------------------------------------------------------------- token tables


def test_token_tables_past_a_deadline_raise_and_keep_nothing() -> None:
    tables = TokenTables(BYTES, None)                # a private instance: nothing shared is touched
    dfa = compile_regex(r'"(?:[^"\\]|\\.){0,40}"')
    with compile_deadline(0.0), pytest.raises(CompileTimeoutError) as caught:
        time.sleep(0.001)
        tables.get(dfa, 2)
    assert "token table of state 2" in str(caught.value)
    assert not tables._tables.get(dfa.digest) and not tables._by_residual
    fresh = TokenTables(BYTES, None).get(dfa, 2)
    again = tables.get(dfa, 2)
    assert np.array_equal(again.inside, fresh.inside) and np.array_equal(again.cross_toks, fresh.cross_toks)


# ---------------------------------------------------------------------- the argument


@pytest.mark.parametrize("timeout", [-1, float("nan"), "5", True])
@pytest.mark.parametrize("load", [lambda t: Grammar.from_lark('start: "a"', timeout=t),
                                  lambda t: Grammar.from_gbnf('root ::= "a"', timeout=t),
                                  lambda t: Grammar.from_json_schema({"type": "integer"}, timeout=t)],
                         ids=["lark", "gbnf", "schema"])
def test_a_timeout_that_is_no_number_of_seconds_is_a_typed_value_error(load, timeout) -> None:
    with pytest.raises(InvalidTimeoutError) as caught:
        load(timeout)
    assert isinstance(caught.value, ValueError) and "timeout must be None or a number" in str(caught.value)


# ---------------------------------------------------------------------- grammar analysis and first masks


def _grammar_analysis_past_its_deadline_names_a_rule() -> str:
    """`compile_grammar` bounds numbering the rules (`ParserTables.from_grammar`), checked in
    proportion to the work (every `DEADLINE_EVERY` rules)."""
    g = Grammar.from_gbnf(hs._counted_rules(20, "gbnf"), timeout=None)
    e = _timeout_of(lambda: compile_grammar(g, BYTES, cache_dir=None, timeout=0.0))
    assert e.value == 0.0 and (e.rule in {str(r.lhs) for r in g.rules} or "rules" in str(e)), e
    tiny = Grammar.from_lark('start: "a"')
    with compile_deadline(0.0):
        time.sleep(0.001)
        e = _timeout_of(lambda: ParserTables.from_grammar(g))
        small = ParserTables.from_grammar(tiny)          # too little work to check
    assert e.rule == str(g.rules[DEADLINE_EVERY - 1].lhs) and f"rule {DEADLINE_EVERY - 1} of" in str(e), e
    assert small.num_terminals == 1
    return f"{len(g.rules)} rules: {e}"


def test_grammar_analysis_honours_the_compile_timeout() -> None:
    _in_child(_grammar_analysis_past_its_deadline_names_a_rule)


_MASK_SCHEMA = {"type": "object", "properties": {
    "name": {"type": "string", "pattern": "^[a-z]+$"}, "n": {"enum": list(range(0, 300, 7))},
    "tags": {"type": "array", "items": {"enum": ["alpha", "beta", "gamma"]}}}, "required": ["name"]}


def _masks_along(cg, seed: int, steps: int = 30) -> list[bytes]:
    from constrained.testing.walks import masks_along

    return masks_along(cg, seed, steps)


def _first_mask_and_step_past_their_deadline_keep_nothing() -> str:
    """A first mask or token step past the recognizer's deadline raises, names what it was
    computing, memoises nothing of it, and a retry under a longer limit is exact."""
    g = Grammar.from_json_schema(_MASK_SCHEMA)
    cg = compile_grammar(g, BYTES, cache_dir=None, first_mask=False)
    rec = cg.recognizer
    rec.timeout = 0.0
    e = _timeout_of(lambda: cg.matcher().mask())
    assert e.value == 0.0 and ("mask" in str(e) or e.terminal or "token table" in str(e)), e
    assert not rec._mask_memo and not rec._dense_masks
    token = BYTES.token_bytes.index(b"{")
    step = _timeout_of(lambda: cg.matcher().advance(token))
    assert f"reading token {token}" in str(step) or step.terminal, step
    assert not rec._token_memo
    rec.timeout = 30.0
    reference = compile_grammar(g, BYTES, cache_dir=None)
    for seed in range(3):
        assert _masks_along(cg, seed) == _masks_along(reference, seed)
    return f"{e} / {step}"


def test_a_first_mask_past_its_deadline_raises_and_a_retry_is_exact() -> None:
    _in_child(_first_mask_and_step_past_their_deadline_keep_nothing)


def _chain_after_endx_is_exact() -> str:
    """``r_i: r_{i+1} "x"?`` after ``endx``: every r_i completes into the root (issue 23;
    quadratic, then cubic in the parts unioned, before completions into one origin were
    memoised)."""
    g = Grammar.from_lark(hs._chain_rules(400, "lark"))
    cg = compile_grammar(g, BYTES, cache_dir=None)
    for text, ok in [(b"end", True), (b"endx", True), (b"end" + b"x" * 400, True),
                     (b"end" + b"x" * 401, False), (b"endy", False)]:
        assert cg.accepts_bytes(text) is ok, text
    m = cg.matcher()
    for b in b"endxx":
        assert m.advance(BYTES.token_bytes.index(bytes([b])))
    allowed = {BYTES.token_bytes[t] for t in np.flatnonzero(
        np.unpackbits(m.mask().view(np.uint8), bitorder="little")[:len(BYTES)]) if t not in BYTES.eos_ids}
    assert allowed == {b"x"} and m.is_accepting()
    return f"{len(g.rules)} rules"


def test_a_chain_of_optional_suffixes_is_read_exactly() -> None:
    _in_child(_chain_after_endx_is_exact)



def test_parser_sets_past_a_deadline_raise_and_keep_nothing() -> None:
    """Closing a parser set checks the deadline at each completion it computes (a chain of
    rules is many small ones); nothing of it is memoised, and a retry gives the same set."""
    tables = ParserTables.from_grammar(Grammar.from_lark(hs._chain_rules(300, "lark")))
    p, fresh = EarleyParser(tables), EarleyParser(tables)
    end, x = p.terminal_id("END"), p.terminal_id("X")
    with compile_deadline(0.0), pytest.raises(CompileTimeoutError) as caught:
        time.sleep(0.001)
        p.scan(p.root, end)
    assert "completing" in str(caught.value) or "parser set" in str(caught.value), caught.value
    assert p.num_nodes == 1 and not p._scan_memo and not p._completion_memo
    got, want = p.scan(p.scan(p.root, end), x), fresh.scan(fresh.scan(fresh.root, end), x)
    assert p.node(got).kernel == fresh.node(want).kernel
    assert {k: set(v) for k, v in p.node(got).expect.items()} == {k: set(v) for k, v in fresh.node(want).expect.items()}
