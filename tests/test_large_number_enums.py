"""Enums of more than `LARGE_ENUM` numbers compile to a few terminals (issue 23, item 1).

An enum of N numbers used to compile to N terminals, so a first mask built N automata
and N token tables (seconds for 10,000 numbers).  Past `LARGE_ENUM` numbers the compiler
writes their spellings as two terminals of finitely many words and one ``.0+`` tail
(`literals._large_number_enum`).  The language must stay the one of a terminal per
number, with each draft's integer semantics (``3`` and ``3.0`` where the draft makes
them the same value, `number_forms`): checked here against the per-number route (the
same enum compiled with `LARGE_ENUM` raised) on generated enums, by acceptance of every
value's spellings and near misses, and by masks along random walks.
"""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from constrained import Grammar, TokenVocabulary, compile_grammar
from constrained.errors import UnsatisfiableSchemaError
from constrained.json_schema.compile import literals
from constrained.json_schema.compiler import compile_json_schema

BYTES = TokenVocabulary.from_token_bytes([bytes([b]) for b in range(1, 128)] + [b"", b"1.0", b".00", b"0,"],
                                         eos_ids=[127])
DRAFTS = {"draft4": "http://json-schema.org/draft-04/schema#",
          "draft7": "http://json-schema.org/draft-07/schema#",
          "2020-12": "https://json-schema.org/draft/2020-12/schema"}

numbers = st.one_of(
    st.integers(-300, 300),
    st.integers(-(2 ** 60), 2 ** 60),
    st.integers(-300, 300).map(float),                                  # integral floats: 3.0
    st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False),
    st.sampled_from([2 ** 53, 2 ** 53 + 1, float(2 ** 53), 1e20, 10 ** 20, 1e-7, -0.0, 0.5]),
)
extra = st.sampled_from([{}, {"type": "integer"}, {"type": "number"}, {"minimum": 0}, {"multipleOf": 3},
                         {"not": {"type": "integer"}}, {"exclusiveMaximum": 100}])


def _compile(schema: dict, *, per_number: bool):
    saved = literals.LARGE_ENUM
    if per_number:
        literals.LARGE_ENUM = 10 ** 9
    try:
        g = Grammar.from_json_schema(schema)
    finally:
        literals.LARGE_ENUM = saved
    return g, compile_grammar(g, BYTES, cache_dir=None)


def _allowed(mask: np.ndarray) -> list[int]:
    return np.flatnonzero(np.unpackbits(mask.view(np.uint8), bitorder="little")[:len(BYTES)]).tolist()


def _probes(values: list) -> list[bytes]:
    """Each value's spellings with and without tails, and near misses."""
    out = []
    for v in values:
        text = json.dumps(v)
        whole = str(int(v)) if isinstance(v, float) and v.is_integer() else text
        out += [text, whole, whole + ".0", whole + ".000", whole + ".", whole + "0", "-" + whole, whole[:-1],
                whole + ".01", text + " "]
    return [p.encode() for p in out]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values=st.lists(numbers, min_size=literals.LARGE_ENUM + 1, max_size=literals.LARGE_ENUM + 40),
       more=extra, draft=st.sampled_from(sorted(DRAFTS)), seed=st.integers(0, 1000))
def test_a_large_number_enum_has_the_language_of_a_terminal_per_number(values, more, draft, seed) -> None:
    schema = {"$schema": DRAFTS[draft], "enum": values, **more}
    try:
        g_small, small = _compile(schema, per_number=True)
    except UnsatisfiableSchemaError:               # no value left: the large route says so too
        with pytest.raises(UnsatisfiableSchemaError):
            _compile(schema, per_number=False)
        return
    g_large, large = _compile(schema, per_number=False)
    assert len(g_large.terminals) <= 3 < len(g_small.terminals) or len(g_small.terminals) <= 3
    for probe in _probes(values):
        assert large.accepts_bytes(probe) == small.accepts_bytes(probe), probe
        assert large.is_prefix_bytes(probe) == small.is_prefix_bytes(probe), probe
    rng = random.Random(seed)
    for _ in range(4):
        a, b = large.matcher(), small.matcher()
        for _ in range(30):
            allowed = _allowed(a.mask())
            assert allowed == _allowed(b.mask())
            steps = [t for t in allowed if t not in BYTES.eos_ids]
            if not steps:
                break
            t = rng.choice(steps)
            assert a.advance(t) and b.advance(t)


def test_a_large_number_enum_is_noted_and_keeps_both_integral_forms() -> None:
    values = list(range(100)) + [2.5]
    compilation = compile_json_schema({"enum": values})
    assert any(n.keyword == "enum" and "an enum of 101 numbers" in n.note for n in compilation.notes)
    g = Grammar.from_json_schema({"enum": values})
    assert sorted(t.name for t in g.terminals) == ["ENUM_NUM", "ENUM_NUM_BASE", "ENUM_NUM_TAIL"]
    cg = compile_grammar(g, BYTES, cache_dir=None)
    for text, ok in [(b"7", True), (b"7.0", True), (b"7.000", True), (b"2.5", True), (b"2.50", False),
                     (b"100", False), (b"7.", False), (b"07", False), (b"-7", False)]:
        assert cg.accepts_bytes(text) is ok, text
    draft4 = Grammar.from_json_schema({"$schema": DRAFTS["draft4"], "type": "integer", "enum": values})
    cg4 = compile_grammar(draft4, BYTES, cache_dir=None)
    assert cg4.accepts_bytes(b"7") and not cg4.accepts_bytes(b"7.0") and not cg4.accepts_bytes(b"2.5")
