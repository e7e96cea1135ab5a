"""MaskBench protocol for the core engine: time to first mask and per-token cost.

Single thread.  For each case a grammar is compiled and a matcher walks the
canonical tokenization of a valid string; we time

* **TTFM** (time to first mask): ``compile_grammar`` + the first ``mask()``,
  *cold* (empty disk cache, fresh process state) and *warm* (token tables on disk);
* **per token**: ``mask()`` + ``advance(token)`` for every token, EOS included.

Cases: the generic JSON grammar (``grammars/json.lark``) on the valid instances
of MaskBench (``../shared/data/maskbench/dev.jsonl.gz``, serialised compactly),
compiled afresh *per schema* as MaskBench does (the fresh CompiledGrammar starts
with empty state/mask memos; only the per-vocabulary token tables and crossing
scans, which depend on the vocabulary and the lexemes alone, stay in memory as
they would in a server); then every other shipped grammar on random strings of
its language (``random_string`` defaults), one compile per grammar shared by
all its strings.

    python benchmarks/maskbench_grammars.py --vocab ../shared/data/tokenizers/llama3

writes ``benchmarks/results/maskbench_grammars.json`` and a plot of the per-token
time distribution next to it, and prints the Markdown table for RESULTS.md.
"""

from __future__ import annotations

import _common  # noqa: F401  (first: pins numeric libraries to one thread)

import argparse  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
from _common import DEFAULT_DATA, DEFAULT_VOCAB, REPO, load_vocabulary, read_maskbench, summarize  # noqa: E402
from tqdm import tqdm  # noqa: E402

from constrained import Grammar, TokenVocabulary, compile_grammar  # noqa: E402
from constrained.automata.byte_dfa import compile_regex  # noqa: E402
from constrained.engine.token_tables import TokenTables  # noqa: E402
from constrained.grammar.derivations import random_string  # noqa: E402


def _forget_memory_caches() -> None:
    """Drop in-process caches so a compile behaves as in a new process."""
    TokenTables._registry.clear()
    compile_regex.cache_clear()


def ttfm(grammar: Grammar, vocab: TokenVocabulary, cache_dir: Path) -> float:
    _forget_memory_caches()
    t0 = time.perf_counter()
    cg = compile_grammar(grammar, vocab, cache_dir=cache_dir)
    cg.matcher().mask()
    return time.perf_counter() - t0


def walk(cg, ids: list[int], eos: int, times: list[float]) -> bool:
    m = cg.matcher()
    for t in [*ids, eos]:
        t0 = time.perf_counter()
        m.mask()
        ok = m.advance(t)
        times.append(time.perf_counter() - t0)
        if not ok:
            return False
    return True


def json_cases(data: Path, limit: int | None) -> list[list[str]]:
    cases = []
    for row in read_maskbench(data):
        texts = [json.dumps(t["data"], separators=(",", ":"), ensure_ascii=False)
                 for t in row["tests"] if t["valid"]]
        if texts:
            cases.append(texts)
        if limit and len(cases) >= limit:
            break
    return cases


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vocab", default=str(DEFAULT_VOCAB))
    ap.add_argument("--data", default=str(DEFAULT_DATA))
    ap.add_argument("--limit", type=int, default=None, help="number of MaskBench schemas (default: all)")
    ap.add_argument("--strings", type=int, default=100, help="generated strings per other grammar")
    ap.add_argument("--out", default=str(REPO / "benchmarks/results/maskbench_grammars.json"))
    args = ap.parse_args()

    vocab = load_vocabulary(args.vocab)
    eos = vocab.eos_ids[0]
    results: dict[str, dict] = {"vocab": args.vocab, "vocab_size": len(vocab)}
    per_token: dict[str, list[float]] = {}

    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp)
        json_grammar = Grammar.from_file(REPO / "grammars/json.lark")
        cold = ttfm(json_grammar, vocab, cache)
        warm = [ttfm(json_grammar, vocab, cache) for _ in range(5)]
        cases = json_cases(Path(args.data), args.limit)
        times: list[float] = []
        ttfm_per_schema: list[float] = []
        failures = 0
        for texts in tqdm(cases, desc="MaskBench schemas (json.lark)"):
            t0 = time.perf_counter()
            cg = compile_grammar(json_grammar, vocab, cache_dir=cache)
            cg.matcher().mask()
            ttfm_per_schema.append(time.perf_counter() - t0)
            for text in texts:
                failures += not walk(cg, vocab.encode(text), eos, times)
        results["json"] = {"schemas": len(cases), "instances": sum(map(len, cases)), "failures": failures,
                           "ttfm_cold_ms": cold * 1e3, "ttfm_warm_ms": float(np.median(warm)) * 1e3,
                           "ttfm_per_schema_p50_ms": float(np.median(ttfm_per_schema)) * 1e3,
                           **summarize(times)}
        per_token["json (MaskBench)"] = times

        rng = random.Random(0)
        for path in sorted((REPO / "grammars").glob("*.lark")):
            if path.name == "json.lark":
                continue
            g = Grammar.from_file(path)
            cold = ttfm(g, vocab, cache)
            warm = ttfm(g, vocab, cache)
            cg = compile_grammar(g, vocab, cache_dir=cache)
            times = []
            failures = 0
            lengths = []
            for _ in tqdm(range(args.strings), desc=path.name):
                text = random_string(g, rng)
                lengths.append(len(text.encode()))
                failures += not walk(cg, vocab.encode(text), eos, times)
            results[path.stem] = {"strings": args.strings, "failures": failures, "ttfm_cold_ms": cold * 1e3,
                                  "ttfm_warm_ms": warm * 1e3, "median_bytes": float(np.median(lengths)),
                                  **cg.stats(), **summarize(times)}
            per_token[path.stem] = times

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    print(f"\nvocabulary {args.vocab} ({len(vocab)} ids); single thread\n")
    print("| grammar | cases | tokens | TTFM cold ms | TTFM warm ms | per-token p50 µs | p90 µs | p99 µs "
          "| p99.9 µs | max µs | mean µs | failures |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, r in results.items():
        if not isinstance(r, dict):
            continue
        n = r.get("instances", r.get("strings"))
        print(f"| {name} | {n} | {r['tokens']} | {r['ttfm_cold_ms']:.0f} | {r['ttfm_warm_ms']:.1f} | "
              f"{r['p50_us']:.1f} | {r['p90_us']:.1f} | {r['p99_us']:.0f} | {r['p999_us']:.0f} | "
              f"{r['max_us']:.0f} | {r['mean_us']:.1f} | {r['failures']} |")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(7, 4))
        for name, ts in per_token.items():
            a = np.sort(np.asarray(ts) * 1e6)
            ax.plot(a, np.arange(1, a.size + 1) / a.size, label=name)
        ax.set_xscale("log")
        ax.axvline(50, ls=":", c="gray")
        ax.axvline(1000, ls=":", c="gray")
        ax.set_xlabel("mask + advance per token (µs, log)")
        ax.set_ylabel("fraction of tokens")
        ax.set_title(f"Per-token cost, {Path(args.vocab).name} vocabulary, single thread")
        ax.legend()
        fig.tight_layout()
        fig.savefig(out.with_suffix(".png"), dpi=120)
        print(f"\nplot: {out.with_suffix('.png')}")
    except ImportError:
        print("(matplotlib not installed: no plot)")


if __name__ == "__main__":
    main()
