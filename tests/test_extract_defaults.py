"""`extract`'s grammar defaults keep every satisfiable schema satisfiable.

Regression (MaskBench dev ``Handwritten---pnmp10``, found by
benchmarks/extraction_accuracy.py): an object that declares no ``properties`` but needs
``minProperties: 3`` was compiled with "no members beyond the declared ones", so only
``{}`` was left, which the check refuses: a dead end at ``{``.  ``extract`` now
restricts members only where ``properties`` are declared (``additional_properties=
"declared"``).
"""

from __future__ import annotations

import jsonschema

from constrained.app import extract, extraction_grammar
from constrained.models import LanguageModel
from constrained.testing.reference import Reference

SCHEMA = {"type": "object", "not": {"anyOf": [{"propertyNames": {"not": {"enum": ["1", "3"]}}},
                                              {"propertyNames": {"not": {"enum": ["2", "3"]}}}]},
          "minProperties": 3}


def test_object_without_properties_stays_a_map():
    ref = Reference(extraction_grammar(SCHEMA))
    assert ref.accepts(b'{"1":"value1","2":"value2","4":"value4"}')
    declared = Reference(extraction_grammar({"type": "object", "properties": {"a": {"type": "integer"}}}))
    assert declared.accepts(b'{"a":1}') and not declared.accepts(b'{"b":1}')


def test_extract_meets_min_properties_without_declared_properties():
    lm = LanguageModel.tiny(seed=0)
    for grounded in (False, True):
        value = extract(SCHEMA, "The 2 is value2. Note that the 4 is set to value4. 1 — value1.", model=lm,
                        max_tokens=96, grounded=grounded)
        assert jsonschema.Draft202012Validator(SCHEMA).is_valid(value)


def test_declared_properties_make_the_root_an_object():
    """Regression (MaskBench dev ``Github_trivial---o25190``, found by
    benchmarks/extraction_accuracy.py): a schema that declares ``properties`` but no
    ``type`` accepts any value, and the default model answered ``123``; extraction
    restricts such a root to objects (`object_where_declared`), a sound restriction."""
    from constrained.app import object_where_declared

    schema = {"$schema": "http://json-schema.org/draft-06/schema#",
              "properties": {"bar": {"type": "string", "maxLength": 10}, "baz": {"type": "number"}}}
    decoded = object_where_declared(schema)
    assert decoded["type"] == "object" and "type" not in schema
    ref = Reference(extraction_grammar(decoded))
    assert ref.accepts(b'{"bar":"Hello","baz":123}') and not ref.accepts(b"123") and not ref.accepts(b'"x"')
    for other in ({"properties": {"a": {}}, "type": ["object", "string"]}, {"properties": {"a": {}}, "not": {}},
                  {"properties": {"a": {}}, "oneOf": [{"type": "string"}, {}]}, {"properties": {}},
                  {"$ref": "#/definitions/x", "properties": {"a": {}}, "definitions": {"x": {}}}):
        assert object_where_declared(other) == other
    lm = LanguageModel.tiny(seed=0)
    for complete in (False, True):
        value = extract(schema, "Its bar: Hello. We recorded 123 as the baz.", model=lm, max_tokens=40,
                        complete=complete)
        assert isinstance(value, dict) and jsonschema.Draft6Validator(schema).is_valid(value)


def test_the_extraction_benchmark_gives_each_text_a_budget_its_shortest_output_fits() -> None:
    """benchmarks/extraction_accuracy.py: a text whose every valid output needs more tokens
    than ``--max-tokens`` failed in every mode (a harness error, not the model's or the
    engine's); `task_budget` raises such a text's budget, the same for every mode, to the
    longest of the modes' shortest outputs plus the slack, and leaves the others alone."""
    import sys
    from pathlib import Path

    from constrained.bench.jsonschemabench import BUDGET_SLACK

    bench = str(Path(__file__).resolve().parents[1] / "benchmarks")
    if bench not in sys.path:
        sys.path.insert(0, bench)
    import extraction_accuracy

    lm = LanguageModel.tiny()          # a byte vocabulary: one token per byte
    task = {"schema": {"type": "object", "properties": {"a": {"type": "string", "minLength": 40},
                                                         "b": {"type": "integer"}}, "required": ["a"]},
            "text": "The a is " + "x" * 50 + ". The b is 7."}
    modes = ("ungrounded", "grounded", "complete", "grounded-complete")
    assert extraction_accuracy.task_budget(lm, task, 128, modes) == 128
    # shortest outputs: {"a":"x...x"} (48 bytes); asked for every member: {"a":"x...x","b":0} (54)
    assert extraction_accuracy.task_budget(lm, task, 16, ("ungrounded", "grounded")) == 48 + BUDGET_SLACK
    assert extraction_accuracy.task_budget(lm, task, 16, modes) == 54 + BUDGET_SLACK
