"""The MaskBench JSON Schema benchmark machinery (constrained.bench.maskbench)
on a few hand-written schemas and a tiny byte vocabulary: outcomes, counts, the
results file, the timeout path and the schema selection."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from constrained import TokenVocabulary
from constrained.bench import maskbench as mb


def _record(id_, schema, valid=(), invalid=()):
    return {"id": id_, "split": id_.split("_")[0], "schema": schema,
            "tests": [{"valid": True, "data": d} for d in valid] + [{"valid": False, "data": d} for d in invalid]}


SCHEMAS = [
    _record("objects_person", {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
                               "required": ["name"], "additionalProperties": False},
            valid=[{"name": "Al", "age": 3}, {"name": "B"}], invalid=[{"age": 3}, {"name": 5}, {"name": "x", "z": 1}]),
    _record("arrays_bools", {"type": "array", "items": {"type": "boolean"}, "maxItems": 2},
            valid=[[True, False], []], invalid=[[True, True, True], ["x"], {}]),
    _record("enums_abc", {"enum": ["a", "b", 1]}, valid=["a", 1], invalid=["c", 2, None]),
    # an invalid schema: refused at compile time
    _record("errors_badtype", {"type": "nonsense"}, valid=["x"]),
    # a valid instance listed as invalid: must come out as an invalidation error
    _record("wrong_invalid", {"type": "integer"}, valid=[5], invalid=[7]),
    # an invalid instance listed as valid: a validation error
    _record("wrong_valid", {"type": "boolean"}, valid=[True, 1], invalid=["true"]),
    # both: counts as an invalidation error
    _record("wrong_both", {"type": "boolean"}, valid=[1], invalid=[False]),
]


@pytest.fixture(scope="module")
def tiny_vocab_path(tmp_path_factory) -> str:
    """Every single byte, some multi-byte JSON pieces, and an EOS (greedy encoder)."""
    pieces = [bytes([b]) for b in range(256)] + [
        b'{"', b'":', b'", "', b', "', b'"}', b'true', b'false', b'null', b'name', b'age', b'], [', b'"a"', b'": "']
    vocab = TokenVocabulary.from_token_bytes([*pieces, b""], eos_ids=[len(pieces)])
    path = tmp_path_factory.mktemp("vocab") / "tiny.npz"
    vocab.save(path)
    return str(path)


def test_outcomes_counts_and_results_file(tiny_vocab_path, tmp_path):
    s = mb.run_sample(SCHEMAS, tiny_vocab_path, workers=1, timeout=60, out_dir=tmp_path, cache_dir=None,
                      reports=True)
    by_id = {r["id"]: r for r in s["records"]}
    assert {k: r["outcome"] for k, r in by_id.items()} == {
        "objects_person": "passing", "arrays_bools": "passing", "enums_abc": "passing",
        "errors_badtype": "compile error", "wrong_invalid": "invalidation error",
        "wrong_valid": "validation error", "wrong_both": "invalidation error"}
    err = by_id["errors_badtype"]["error"]
    assert err["class"] == "InvalidSchemaError" and err["keyword"] == "type" and err["pointer"] == ""
    assert by_id["errors_badtype"]["ttfm_s"] is None
    assert by_id["wrong_valid"]["counts"] == {"invalid_rejected": 1, "valid_accepted": 1, "valid_rejected": 1}
    assert by_id["objects_person"]["counts"] == {"valid_accepted": 2, "invalid_rejected": 3}
    # one TBM sample per token walked; valid instances walk all their tokens
    for r in s["records"]:
        assert r["n_tokens"] == sum(map(len, r["tbm_us"]))
        for inst, ts in zip(r["instances"], r["tbm_us"], strict=True):
            if inst["accepted"]:
                assert len(ts) == inst["n_tokens"]
    assert s["outcomes"] == {"passing": 3, "compile error": 1, "validation error": 1, "invalidation error": 2,
                             "engine inconsistency": 0, "timeout": 0, "crash": 0}
    assert s["instances"]["invalid_accepted"] == 2 and s["instances"]["inconsistencies"] == 0
    assert s["tbm_us"]["n"] == sum(r["n_tokens"] for r in s["records"]) > 0
    assert s["ttfm_ms"]["n"] == 6
    assert s["top_refusals"][0]["class"] == "InvalidSchemaError"
    assert {d["id"] for d in s["invalidation_errors"]} == {"wrong_invalid", "wrong_both"}
    lines = (tmp_path / "maskbench_json_schema.jsonl").read_text().splitlines()
    assert len(lines) == len(SCHEMAS) and all(json.loads(x)["outcome"] for x in lines)
    assert "| invalidation error | 2 |" in (tmp_path / "maskbench_json_schema.md").read_text()


def test_timeout_kills_the_worker(tiny_vocab_path):
    s = mb.run_sample(SCHEMAS[:1], tiny_vocab_path, timeout=1e-4, cache_dir=None, warmup=False)
    (rec,) = s["records"]
    assert rec["outcome"] == "timeout" and rec["error"]["class"] == "Timeout"


def test_selection_and_torn_results_file(tmp_path):
    recs = [{"index": i, "split": "ab"[i >= 6]} for i in range(10)]
    assert [r["index"] for r in mb.select(recs, every=3)] == [0, 3, 6, 9]
    assert [r["index"] for r in mb.select(recs, per_split=2)] == [1, 4, 7, 9]
    assert [r["index"] for r in mb.select(recs, per_split=9, limit=7)] == list(range(7))
    path = tmp_path / "r.jsonl"
    path.write_text('{"index": 1, "outcome": "passing"}\n{"index": 2, "outc')
    assert list(mb.read_results(path)) == [1]
    assert path.read_text() == '{"index": 1, "outcome": "passing"}\n'


def test_stratified_dev_sample_has_no_invalid_accepted(tmp_path) -> None:
    """The real protocol on a stratified sample of the MaskBench dev set (12 schemas per
    split, ~230 schemas, llama3 vocabulary): no invalid instance is ever accepted, no
    engine inconsistency, and nearly every schema passes."""
    from constrained.bench.datasets import DEFAULT_MASKBENCH as DEFAULT_DATA
    from constrained.bench.datasets import DEFAULT_VOCAB, read_maskbench

    if not Path(DEFAULT_DATA).exists() or not Path(DEFAULT_VOCAB).exists():
        pytest.skip("../shared/data (MaskBench dev set, llama3 tokenizer) is not available")
    records = [{"index": k, "id": r.get("id"), "split": r.get("split"), "schema": r["schema"],
                "tests": r["tests"]} for k, r in enumerate(read_maskbench(DEFAULT_DATA))]
    chosen = mb.select(records, per_split=12)
    assert len(chosen) >= 200
    summary = mb.run_sample(chosen, DEFAULT_VOCAB, workers=2, timeout=60.0, out_dir=tmp_path)
    counts = summary["outcomes"]
    assert counts.get("invalidation error", 0) == 0, summary
    assert counts.get("engine inconsistency", 0) == 0, summary
    assert counts.get("passing", 0) >= 0.95 * len(chosen), summary
