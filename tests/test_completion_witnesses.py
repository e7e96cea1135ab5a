"""Number witnesses and element growth in the completion search (issue 27, item 2).

`NumberConstraints` gives the number nearest zero that a conjunction of numeric keywords
admits (lcm of the ``multipleOf``s, exclusive bounds, integers); it is checked here
against a brute-force enumeration.  `number_witnesses` turns the numeric keywords of one,
two or three sub-schemas into such numbers (filtered by `jsonschema`), and the completion
search writes them where a value starts and adds whole elements to arrays (`_grown`):
MaskBench dev schema 6849 (``oneOf`` of two arrays of arrays with ``contains`` and
``multipleOf``), which the search used to give up on from its start and after the dead-end
probe's walk 2 (tests/data/dead_end_6849_walk2.json), is finished validly now.
"""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import jsonschema
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from constrained import TokenVocabulary, compile_grammar
from constrained.engine.checked import witnesses_of
from constrained.engine.completion import _grown, _tables, element_witnesses
from constrained.json_schema.compiler import compile_json_schema
from constrained.json_schema.dialect import dialect_of
from constrained.json_schema.witnesses import NumberConstraints, number_text, number_witnesses

FIXTURE = Path(__file__).parent / "data" / "dead_end_6849_walk2.json"
BYTES = TokenVocabulary.from_token_bytes([bytes([b]) for b in range(256)] + [b""], eos_ids=[256])

# ---------------------------------------------------------------------- NumberConstraints

# multiples and bounds are hundredths: the brute force enumerates k / 100
_MULTIPLES = [1, 2, 3, 4, 6, 0.5, 0.25, 0.75, 1.5, 0.2, 2.5]
_BOUNDS = st.one_of(st.none(), st.tuples(st.integers(-80, 80).map(lambda k: k / 4), st.booleans()))
_RANGE = 200 * 100          # |x| <= 200, in hundredths


def _brute(multiples, lower, upper, integer: bool) -> list[Fraction]:
    """Admitted numbers on the grid of hundredths with |x| <= 200, nearest zero first (the
    positive one first at equal distance); where nothing but bounds is asked, those of the
    coarsest of the grids 1, 0.1, 0.01 that has one (the spec of `candidates`)."""
    k = np.arange(-_RANGE, _RANGE + 1)
    ok = np.ones(k.size, bool)
    for m in multiples:
        ok &= k % round(m * 100) == 0
    if integer:
        ok &= k % 100 == 0
    if lower is not None:
        lo = round(lower[0] * 100)
        ok &= (k > lo) if lower[1] else (k >= lo)
    if upper is not None:
        hi = round(upper[0] * 100)
        ok &= (k < hi) if upper[1] else (k <= hi)
    grids = [1] if multiples or integer else [100, 10, 1]
    for g in grids:
        hits = k[ok & (k % g == 0)]
        if hits.size:
            hits = sorted(hits.tolist(), key=lambda x: (abs(x), x < 0))
            return [Fraction(x, 100) for x in hits]
    return []


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_MULTIPLES), max_size=3), _BOUNDS, _BOUNDS, st.booleans())
def test_the_number_nearest_zero_equals_brute_force(multiples, lower, upper, integer) -> None:
    c = NumberConstraints(multiples=[Fraction(str(m)) for m in multiples],
                          lower=None if lower is None else (Fraction(str(lower[0])), lower[1]),
                          upper=None if upper is None else (Fraction(str(upper[0])), upper[1]), integer=integer)
    ref = _brute(multiples, lower, upper, integer)
    got = c.candidates(5)
    assert all(c.admits(x) for x in got)
    if ref and abs(ref[min(4, len(ref) - 1)]) <= 150:       # the reference's window holds the first five
        assert got == ref[:5]
        assert c.smallest() == ref[0]
    elif not ref:
        assert all(abs(x) > 200 for x in got)               # none in the window: any answer lies outside
    else:
        assert got[:1] == ref[:1]


def test_keywords_of_every_draft_and_the_allof_they_sit_in() -> None:
    def smallest(node):
        return NumberConstraints.of(node).smallest()

    assert smallest({"multipleOf": 5, "minimum": 5, "exclusiveMinimum": True}) == 10         # draft 4
    assert smallest({"multipleOf": 5, "minimum": 5, "exclusiveMinimum": False}) == 5
    assert smallest({"multipleOf": 5, "exclusiveMinimum": 5}) == 10                          # draft 6+
    assert smallest({"multipleOf": 5, "exclusiveMaximum": 0}) == -5
    assert smallest({"divisibleBy": 3, "minimum": 1}) == 3                                   # draft 3
    assert smallest({"type": "integer", "minimum": 0.5}) == 1
    assert smallest({"minimum": 0.5}) == 1                          # the coarsest grid first: 1, then 0.1, ...
    assert smallest({"minimum": 0.5, "maximum": 0.7}) == Fraction(1, 2)
    assert smallest({"exclusiveMinimum": 0, "exclusiveMaximum": 1}) == Fraction(1, 10)
    assert smallest({"multipleOf": 0.1, "minimum": 0.25}) == Fraction(3, 10)                 # decimal, not binary
    assert smallest({"type": "integer", "multipleOf": 4, "allOf": [{"multipleOf": 11}, {"minimum": 100}]}) == 132
    assert smallest({"multipleOf": 4, "minimum": 1, "maximum": 3}) is None
    assert NumberConstraints.of({"multipleOf": 0}) is None and NumberConstraints.of({"type": "string"}) is None
    assert [number_text(Fraction(x)) for x in ("132", "-1/4", "3/10", "0")] == ["132", "-0.25", "0.3", "0"]
    assert number_text(Fraction(1, 3)) is None


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from([2, 3, 4, 5, 7, 11]), min_size=1, max_size=3),
       st.one_of(st.none(), st.integers(-60, 60)), st.one_of(st.none(), st.integers(-60, 60)))
def test_number_witnesses_are_the_smallest_numbers_jsonschema_accepts(multiples, lo, hi) -> None:
    """For one sub-schema (integer multipleOfs in allOf, bounds): the witness is the number
    nearest zero that `jsonschema` itself accepts (brute force over the integers)."""
    node: dict = {"allOf": [{"multipleOf": m} for m in multiples]}
    if lo is not None:
        node["minimum"] = lo
    if hi is not None:
        node["exclusiveMaximum"] = hi
    validator = jsonschema.Draft202012Validator(node)
    nearest = next((x for x in sorted(range(-500, 501), key=lambda x: (abs(x), x < 0)) if validator.is_valid(x)),
                   None)
    got = number_witnesses(node)
    if nearest is not None:
        assert str(nearest) in got
    else:                                   # bounds that cross: no number meets the whole node
        assert not any(validator.is_valid(json.loads(w)) for w in got)
    # the others each meet some sub-schema with numeric keywords (an allOf branch alone)
    parts = [jsonschema.Draft202012Validator(p) for p in node["allOf"]] + [validator]
    assert all(any(v.is_valid(json.loads(w)) for v in parts) for w in got)


def test_number_witnesses_meet_several_sub_schemas_at_once_and_their_other_keywords() -> None:
    oneof = json.loads(FIXTURE.read_text(encoding="utf-8"))["schema"]
    assert number_witnesses(oneof) == ["0", "110", "132"]           # items: 4 | contains: 11, >= 100 | both
    # MaskBench 6822: 420 divides it, at least 10000, but not 9 * 420 and not three listed values
    many = {"type": "integer", "multipleOf": 4, "minimum": 10000, "exclusiveMinimum": 9999,
            "allOf": [{"multipleOf": 5}, {"multipleOf": 3}, {"multipleOf": 2}, {"multipleOf": 7},
                      {"not": {"enum": [10500, 10920, 11760]}}],
            "not": {"allOf": [{"multipleOf": 9}, {"multipleOf": 5}, {"multipleOf": 3}, {"multipleOf": 2},
                              {"multipleOf": 7}]}}
    assert "12180" in number_witnesses(many)
    assert jsonschema.Draft202012Validator(many).is_valid(12180)
    assert b"[132]" in element_witnesses(tuple(w.encode() for w in number_witnesses(oneof)))


# ---------------------------------------------------------------------- schema 6849

@pytest.fixture(scope="module")
def case():
    return json.loads(FIXTURE.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def compiled(case):
    return compile_grammar(compile_json_schema(case["schema"]).grammar, BYTES, cache_dir=None)


def _valid(schema, text: bytes) -> bool:
    return dialect_of(schema).validator_class(schema).is_valid(json.loads(text))


def test_a_fresh_matcher_of_6849_is_finished_validly(case, compiled) -> None:
    m = compiled.matcher()
    done = m.shortest_completion(strict=True)
    assert done is not None and _valid(case["schema"], done)
    assert len(done) <= len(b"[[],[132]]")                           # the shortest there is


def test_the_probes_walk_2_of_6849_is_finished_validly(case, compiled) -> None:
    prefix = case["prefix"].encode("utf-8")
    m = compiled.matcher()
    assert m.advance_many(list(prefix)) == len(prefix)
    done = m.shortest_completion(strict=True)
    assert done is not None and _valid(case["schema"], prefix + done)
    assert m.advance_many(list(done)) == len(done) and m.is_accepting()
    # it is element growth that finds it: two elements the grammar's `"]]` does not write
    m = compiled.matcher()
    m.advance_many(list(prefix))
    grown = _grown(m._rec, _tables(m._rec), m._history[-1], m._checks, m._cstates[-1], bytes(m._text),
                   witnesses_of(m._checks), 1000)
    assert grown is not None and _valid(case["schema"], prefix + grown)
