"""benchmarks/extraction_accuracy.py's tasks and scoring: flat instances field by
member, nested ones (``--nested``) field by scalar leaf, scored at its path."""

from __future__ import annotations

import gzip
import json
import random
import sys
from pathlib import Path

import pytest

BENCH = str(Path(__file__).resolve().parents[1] / "benchmarks")
if BENCH not in sys.path:
    sys.path.insert(0, BENCH)
import extraction_accuracy as ea  # noqa: E402

NESTED = {"name": "Ada", "home": {"city": "Paris", "zip": "75001", "geo": {"lat": 48.8}}, "vip": True}


def test_leaves_walk_nested_objects_in_order() -> None:
    assert ea.leaves(NESTED) == [(("name",), "Ada"), (("home", "city"), "Paris"), (("home", "zip"), "75001"),
                                 (("home", "geo", "lat"), 48.8), (("vip",), True)]
    assert ea.leaves({"a": 1, "b": "x"}) == [(("a",), 1), (("b",), "x")]


def test_at_and_without_follow_paths() -> None:
    assert ea.at(NESTED, ("home", "geo", "lat")) == 48.8
    assert ea.at(NESTED, ("home", "street")) is ea.MISSING and ea.at(NESTED, ("name", "x")) is ea.MISSING
    assert ea.without(NESTED, ("home", "geo", "lat")) == {"name": "Ada", "home": {"city": "Paris", "zip": "75001"},
                                                          "vip": True}
    assert ea.without(NESTED, ("vip",)) == {k: v for k, v in NESTED.items() if k != "vip"}


def test_prose_names_each_leaf_by_its_path_in_words() -> None:
    text = ea.prose({"homeAddress": {"zip_code": "75001"}, "n": 2}, random.Random(0))
    assert "home address zip code" in text.lower() and "75001" in text and " 2" in text


def test_nested_fields_are_scored_at_their_paths() -> None:
    task = {"id": "t", "split": "s", "text": "Ada lives in Paris, 75001.", "instance": NESTED,
            "schema": {"type": "object"}}
    got = {"name": "Ada", "home": {"city": "Ada", "geo": {"lat": 48.8}}, "vip": 1}
    row = ea.score(task, got)
    assert (row["fields"], row["correct"], row["string_fields"], row["string_correct"]) == (5, 2, 3, 1)
    assert [ea.string_miss({**row}, p) for p in (("name",), ("home", "city"), ("home", "zip"))] == \
        ["right", "another field's value", "missing member"]
    assert ea.misses([row])["right"] == 1
    assert ea.score(task, {"home": "Paris"})["correct"] == 0          # a scalar where an object was
    assert ea.score(task, ValueError("x"))["error"].startswith("ValueError")


@pytest.fixture()
def records(tmp_path: Path) -> Path:
    def rec(i, split, data):
        return {"id": f"r{i}", "split": split, "schema": {"type": "object"}, "tests": [{"data": data, "valid": True}]}
    rows = [rec(0, "a", {"x": "one", "y": 2}),                          # flat
            rec(1, "a", {"x": {"y": "two", "z": 3}}),                   # nested, 2 leaves
            rec(2, "b", {"x": {"y": ["list"]}, "z": "s"}),              # a list leaf: neither
            rec(3, "b", {"x": {"y": {}}, "z": "s"}),                    # an empty object: one leaf
            rec(4, "b", {"x": {"y": "v"}, "q": {"r": 1.5}}),            # nested, 2 leaves
            rec(5, "a", {"tags": ["red", "sky blue"], "n": "v"}),       # an array the prose can list
            rec(6, "a", {"tags": ["a, b", "c"], "n": "v"}),             # an element with a comma: neither
            rec(7, "b", {"tags": ["x"] * 5, "n": "v"}),                 # too long an array: neither
            rec(8, "b", {"tags": ["x", "y"], "n": 2})]                  # no string member: neither
    path = tmp_path / "dev.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    return path


def test_the_nested_task_set_takes_objects_that_nest_scalar_leaves(records: Path) -> None:
    assert sorted(t["id"] for t in ea.tasks(10, records)) == ["r0"]
    nested = ea.tasks(10, records, nested=True)
    assert sorted(t["id"] for t in nested) == ["r1", "r4"]
    for t in nested:
        assert all(spelled in t["text"] for spelled in (ea.spelled(v) for _, v in ea.leaves(t["instance"])))


def test_the_array_task_set_lists_each_array_in_one_sentence(records: Path) -> None:
    (task,) = ea.tasks(10, records, arrays=True)
    assert task["id"] == "r5" and "red and sky blue" in task["text"]
    assert ea.spelled(["a", 2, "c"]) == "a, 2 and c" and ea.spelled(["a"]) == "a"
    row = ea.score(task, {"tags": ["red", "sky blue"], "n": "w"})
    assert (row["fields"], row["correct"], row["string_fields"]) == (2, 1, 1)
    assert ea.score(task, {"tags": ["red"], "n": "v"})["correct"] == 1


def test_an_absent_leaf_leaves_the_text_and_the_instance(records: Path) -> None:
    for t in ea.tasks(10, records, nested=True, absent=True):
        assert len(ea.leaves(t["instance"])) == 1 and ea.at(t["instance"], tuple(t["absent"])) is ea.MISSING
        row = ea.score(t, {"x": {"y": "two", "z": 3}, "q": {"r": 1.5}})
        assert row["absent_filled"] is True


def test_evidence_grounds_each_member_in_the_sentence_that_writes_it() -> None:
    """``--evidence gold``: each root member's spans come from the one sentence of the prose
    that writes its value (``x-grounded-text``); the grammar then refuses the other
    sentences' spans for it; members the prose does not write stay on the whole text."""
    from constrained.json_schema.compiler import compile_json_schema
    from constrained.json_schema.grounding import Grounding
    from constrained.testing.reference import Reference

    instance = {"name": "my-subnet", "az": "us-east-1a", "cidr": "10.0.0.0/18"}
    schema = {"type": "object", "properties": {k: {"type": "string"} for k in [*instance, "tag"]}}
    task = {"id": "t", "schema": schema, "instance": instance, "text": ea.prose(instance, random.Random(3))}
    parts = ea.sentences(task["text"])
    assert len(parts) == 3 and all(ea.gold_sentence(parts, k, v) is not None for k, v in instance.items())
    annotated = ea.with_evidence(None, task, "gold")
    assert "x-grounded-text" not in schema["properties"]["name"]            # the task's schema is left as it is
    for k, v in instance.items():
        assert annotated["properties"][k]["x-grounded-text"] == parts[ea.gold_sentence(parts, k, v)]
    assert "x-grounded-text" not in annotated["properties"]["tag"]
    ref = Reference(compile_json_schema(annotated, grounding=Grounding(task["text"]), whitespace="compact").grammar)
    assert ref.accepts(b'{"az":"us-east-1a"}') and not ref.accepts(b'{"az":"my-subnet"}')
    assert ref.accepts(b'{"tag":"my-subnet"}')
