"""`constrained bench jsonschemabench --engine vllm`: the report from per-request rows
(without vLLM: the rows are what `constrained.bench.vllm_runner` writes)."""

from __future__ import annotations

import pytest

from constrained.bench.vllm_serving import markdown, summarize


def _row(backend, rid, outcome="finished", valid=True, finish="stop", tokens=10, ttft=1.0, explained=None):
    r = {"id": rid, "backend": backend, "outcome": outcome, "valid": valid, "finish": finish, "tokens": tokens,
         "ttft_s": ttft, "wall_s": 20.0, "startup_s": 5.0}
    if explained is not None:
        r["explained"] = explained
    if outcome != "finished":
        del r["ttft_s"]
        r.update(valid=False, tokens=0, finish=None)
    return r


def test_summary_counts_and_rates():
    rows = [_row("constrained", "a"), _row("constrained", "b", finish="length", tokens=30),
            _row("constrained", "c", valid=False, finish="length", tokens=30, explained=True),
            _row("xgrammar", "a"), _row("xgrammar", "b", outcome="refused"),
            _row("xgrammar", "c", valid=False, finish="length", tokens=30, ttft=3.0)]
    s = summarize(rows, ["constrained", "xgrammar", "guidance"])
    assert set(s) == {"constrained", "xgrammar"}                 # a backend without rows is left out
    c, x = s["constrained"], s["xgrammar"]
    assert (c["valid"], c["invalid"], c["cut"], c["cut_invalid"], c["cut_invalid_explained"]) == (2, 1, 2, 1, 1)
    assert c["coverage"] == pytest.approx(2 / 3) and c["tokens_per_s"] == pytest.approx(70 / 20)
    assert (x["refused"], x["valid"], x["invalid"]) == (1, 1, 1)
    assert x["compliance"] == pytest.approx(0.5) and x["coverage"] == pytest.approx(1 / 3)
    assert x["ttft_p50_s"] == pytest.approx(2.0)
    text = markdown(s, {"vllm": "0.32.0", "schemas": 3, "data": "/x/dev.jsonl.gz", "model": "m", "max_tokens": 96,
                        "date": "2026-11-26", "commit": "abc"})
    assert "| constrained | 66.7% | 66.7% | 0 | 1 | 2 (1, 1) | 4 |" in text
    assert "| xgrammar | 33.3% | 50.0% | 1 | 1 | 1 (1, 0) |" in text
