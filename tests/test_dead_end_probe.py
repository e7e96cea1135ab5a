"""Dead-end probe (`benchmarks/dead_end_probe.py`): random masked walks over MaskBench
dev schemas with the Llama 3 vocabulary, then the engine's shortest completion, fed
as tokens and validated with `jsonschema`.

No walk may end in an INVALID output (a soundness bug) or an error.  Dead ends (no
completion after a mask-allowed prefix: a value check refuses what the grammar can
still finish) are reported (``-s`` prints them, and a warning names them); each must be
explained by a keyword that docs/json-schema-keywords.md lists as *not* exact on
prefixes, and at scale (the slow test) at most 2% of the walks may end in one.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import warnings
from pathlib import Path

import pytest
from conftest import load_vocab

REPO = Path(__file__).resolve().parents[1]
PROBE = REPO / "benchmarks" / "dead_end_probe.py"
DATA = REPO.parent / "shared" / "data" / "maskbench" / "dev.jsonl.gz"


def _probe_module():
    if str(PROBE.parent) not in sys.path:
        sys.path.insert(0, str(PROBE.parent))        # for its `_common`
    spec = importlib.util.spec_from_file_location("dead_end_probe", PROBE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def probe():
    return _probe_module()


@pytest.fixture(scope="module")
def records():
    if not DATA.is_file():
        pytest.skip(f"MaskBench dev data not found at {DATA}")
    from constrained.bench.datasets import read_schemas

    return read_schemas(DATA)


def _vocab():
    vocab = load_vocab("llama3")
    vocab.encode("{}")      # the cached vocabulary loads its tokenizer on first use: not inside a timed walk
    return vocab


def _sweep(probe, records, n: int, walks: int, seed: int) -> dict:
    vocab = _vocab()
    results = [probe.probe_schema(i, records[i], vocab, walks=walks, seed=seed)
               for i in probe.select_indices(records, n)]
    summary = probe.summarize(results)
    keys = ("schemas", "compiled", "walks", "valid", "invalid", "dead_end", "dead_end_pct", "error", "timeout",
            "validator_error", "not_compiled", "compile_timeout", "compile_error")
    print("\ndead-end probe:", json.dumps({k: summary[k] for k in keys}))
    for d in summary["details"]["dead_end"]:
        print(f"  dead end: schema {d['index']} walk {d['walk']} checked {d['checked']} "
              f"cause {d.get('diagnosis', {}).get('cause')!r} prefix {d.get('prefix', '')[:120]!r}")
    if summary["dead_end"]:
        warnings.warn(f"dead-end probe: {summary['dead_end']} of {summary['walks']} walks reached a dead end "
                      f"(schemas {sorted({d['index'] for d in summary['details']['dead_end']})}; "
                      f"by checked keywords {summary['dead_ends_by_checked_keywords']})", stacklevel=2)
    return summary


DOCS = REPO / "docs" / "json-schema-keywords.md"


def not_exact_on_prefixes() -> set[str]:
    """Keywords the docs' table lists as checked at completion or at the end of a part
    (its rows whose "on a prefix" column does not say "exact on prefixes" alone)."""
    import re

    out: set[str] = set()
    for line in DOCS.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or cells[0] in ("keyword", "---"):
            continue
        if cells[2] == "exact on prefixes" or cells[2].startswith(("—", "refused")):
            continue
        head = cells[0].split(" (")[0]                  # the keywords, not the examples after them
        out.update(k.split(":")[0] for k in re.findall(r"`([^`]+)`", head))
        if cells[0].startswith("duplicate keys"):
            out.add("duplicate key")
    return out


def _unexplained(probe, summary: dict) -> list:
    listed = not_exact_on_prefixes()
    return [{k: d.get(k) for k in ("index", "walk", "gave_up", "refused", "prefix")}
            for d in summary["details"]["dead_end"] if probe.dead_end_keyword(d) not in listed]


def test_the_docs_table_lists_the_keywords_not_exact_on_prefixes() -> None:
    listed = not_exact_on_prefixes()
    assert {"minProperties", "uniqueItems", "contains", "not", "multipleOf", "duplicate key"} <= listed
    assert not {"maxProperties", "maxItems", "enum", "const", "items"} & listed


def _bugs(summary: dict, kind: str) -> list:
    return [{k: d.get(k) for k in ("index", "id", "walk", "phase", "detail", "text", "tokens")}
            for d in summary["details"][kind]]


def test_select_indices_spread_over_splits(probe, records):
    picked = probe.select_indices(records, 30)
    assert len(picked) == 30 and picked == sorted(set(picked))
    splits = {r["split"] for r in records}
    assert {records[i]["split"] for i in picked} == splits          # 21 splits, 30 picks: every split
    assert probe.select_indices(records, 30) == picked              # deterministic


def test_probe_is_reproducible(probe, records):
    vocab = _vocab()
    i = probe.select_indices(records, 12)[3]
    a = probe.probe_schema(i, records[i], vocab, walks=2, seed=7, diagnose=False)
    b = probe.probe_schema(i, records[i], vocab, walks=2, seed=7, diagnose=False)

    def strip(r):
        return [{k: v for k, v in w.items() if k not in ("seconds", "completion_s")} for w in r["walks"]]

    assert strip(a) == strip(b)


def test_dead_end_probe_ci_scale(probe, records):
    """12 schemas over every split x 3 walks: no invalid output, no error."""
    summary = _sweep(probe, records, n=12, walks=3, seed=0)
    assert summary["walks"] >= 20
    assert summary["invalid"] == 0, _bugs(summary, "invalid")
    assert summary["error"] == 0, _bugs(summary, "error")
    assert summary["compile_error"] == 0, summary["compile_errors"]
    assert not _unexplained(probe, summary)


@pytest.mark.slow
@pytest.mark.timeout(5400)
def test_dead_end_probe_at_scale(probe, records):
    """400 schemas x 5 walks (2,000 walks): no invalid output, at most 2% of the walks
    without a completion, each explained by a keyword not exact on prefixes."""
    summary = _sweep(probe, records, n=400, walks=5, seed=1)
    assert summary["walks"] >= 1500
    assert summary["invalid"] == 0, _bugs(summary, "invalid")
    assert summary["error"] == 0, _bugs(summary, "error")
    assert summary["dead_end_pct"] <= 2.0, summary["dead_ends_by_refused_keyword"]
    assert not _unexplained(probe, summary)


def test_the_walk_that_had_a_completion_the_search_missed_is_finished(probe):
    """Schema 6849, walk 2 of ``--schemas 400 --walks 5 --seed 1`` (tokens replayed from
    tests/data/dead_end_6849_walk2.json): the prefix has a completion (an element holding
    a multiple of 11 of at least 100, then one that is a multiple of 44 too), which the
    search gave up on (`CompletionSearchError` on ``oneOf``) before number witnesses and
    element growth; now it is finished, fed as tokens, and `jsonschema` accepts it."""
    from constrained import compile_grammar
    from constrained.json_schema.compiler import compile_json_schema

    case = json.loads((REPO / "tests" / "data" / "dead_end_6849_walk2.json").read_text(encoding="utf-8"))
    vocab = _vocab()
    compiled = compile_grammar(compile_json_schema(case["schema"]).grammar, vocab, cache_dir=None)
    m = compiled.matcher()
    assert m.advance_many(case["tokens"]) == len(case["tokens"])
    assert bytes(m._text) == case["prefix"].encode("utf-8")
    done = m.shortest_completion(strict=True)
    assert done is not None
    finish = m.completion_tokens(done)
    assert m.advance_many(finish) == len(finish) and m.is_accepting()
    text = b"".join(vocab.token_bytes[t] for t in case["tokens"] + finish)
    assert probe._validate(case["schema"], text) == ("valid", None)
