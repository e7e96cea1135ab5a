"""MaskBench for JSON Schemas: `constrained.bench.maskbench` (the same as
``constrained bench maskbench``) with this checkout's defaults (data under
``../shared``, results in ``benchmarks/results``).

    python benchmarks/maskbench_json_schema.py --every 50 --workers 2

``--vs-llguidance`` runs the protocol's timings side by side with llguidance instead
(no validity checks: those are the full protocol's): for every selected schema that
both engines compile, in one process and interleaved schema by schema (so both see
the same machine load), time to first mask (compile + first mask) and the cost of each
token of its valid instances (mask + advance; llguidance: ``fill_next_token_bitmask``
+ ``consume_token``; one engine over a whole instance, then the other), with a fresh
compile per schema for both (our in-process
automaton caches stay warm, as llguidance's do).  Ours reads object members in
declared order, as llguidance does (`serving_batch.OurEngine`'s default), and
warms up as the protocol's workers do (`constrained.warm_up`).  Writes
``<out>/maskbench_vs_llguidance.{json,md}``.

    python benchmarks/maskbench_json_schema.py --vs-llguidance --every 30
"""

import sys

import _common  # noqa: F401  (before numpy: pins numeric libraries to one thread)

from constrained.bench.maskbench import main  # noqa: E402


def side_by_side(argv: list[str]) -> None:
    import argparse
    import gc
    import json
    import time
    from pathlib import Path

    import numpy as np
    import serving_batch as sb
    from _common import (add_dataset_arguments, load_vocabulary, read_maskbench, time_tokens,
                         warm_up_ours)

    ap = argparse.ArgumentParser(description="MaskBench timings side by side with llguidance")
    ap.add_argument("--vs-llguidance", action="store_true")
    ap.add_argument("--every", type=int, default=30, help="every K-th schema of the file (default 30)")
    ap.add_argument("--limit", type=int, default=None)
    add_dataset_arguments(ap)
    a = ap.parse_args(argv)
    vocab = load_vocabulary(a.vocab)
    eos = int(min(vocab.eos_ids))
    ours, llg = sb.OurEngine(vocab), sb.LLGuidanceEngine(a.vocab, vocab.eos_ids)
    records = list(read_maskbench(a.data))[::a.every][:a.limit]
    warm_up_ours(ours, vocab)                       # as the protocol's workers do, and a server at start
    for schema, inst in sb.WARMUP:
        llg.accepts(llg.compile(schema), [int(t) for t in vocab.encode(json.dumps(inst))], eos)
    gc.collect()
    gc.freeze()
    import llguidance.numpy as lln

    bitmask = lln.allocate_token_bitmask(1, llg.tokenizer.vocab_size)
    clock = time.perf_counter
    ttfm: dict[str, list[float]] = {"ours": [], "llguidance": []}
    tbm: dict[str, list[float]] = {"ours": [], "llguidance": []}
    skipped = 0
    t_start = time.time()
    load0 = [round(x, 2) for x in __import__("os").getloadavg()]
    from tqdm import tqdm

    for rec in tqdm(records, desc="side by side", unit="schema"):
        tests = [t for t in rec.get("tests", []) if t.get("valid")]
        instances = [[int(t) for t in vocab.encode(json.dumps(t["data"]))] for t in tests]
        try:
            t0 = clock()
            mo = ours.compile(rec["schema"])
            mo.mask()
            t1 = clock()
            ml = llg.compile(rec["schema"])
            lln.fill_next_token_bitmask(ml, bitmask, 0)
            t2 = clock()
        except Exception:  # noqa: BLE001 - a schema one engine refuses is skipped
            skipped += 1
            continue
        ttfm["ours"].append(t1 - t0)
        ttfm["llguidance"].append(t2 - t1)
        for k, toks in enumerate(instances):
            if k:
                mo, ml = mo.compiled.matcher(), llg.compile(rec["schema"])
            else:
                ml = llg.compile(rec["schema"])     # (its first matcher was consumed by the first mask)
                mo = mo.compiled.matcher()
            # one engine over the whole instance, then the other (no cache interference
            # between them token by token); both instance by instance, as the same load
            def ours_step(t: int, m=mo) -> bool:
                m.mask()
                return m.advance(t)

            def llguidance_step(t: int, m=ml) -> bool:
                lln.fill_next_token_bitmask(m, bitmask, 0)
                return m.consume_token(t)

            times_o = time_tokens(ours_step, toks + [eos])
            times_l = time_tokens(llguidance_step, toks + [eos])
            if len(times_o) == len(times_l) == len(toks) + 1:   # both accepted it
                tbm["ours"] += times_o
                tbm["llguidance"] += times_l
    res = {"meta": {"date": time.strftime("%Y-%m-%d %H:%M"), "every": a.every, "schemas": len(records),
                    "skipped": skipped, "loadavg_at_start": load0,
                    "loadavg_at_end": [round(x, 2) for x in __import__("os").getloadavg()],
                    "wall_s": round(time.time() - t_start, 1)},
           "ttfm_ms": {k: {q: float(np.percentile(v, q)) * 1e3 for q in (50, 90, 99)} for k, v in ttfm.items()},
           "tbm_us": {k: {q: float(np.percentile(v, q)) * 1e6 for q in (50, 90, 99)} for k, v in tbm.items()},
           "n": {"schemas": len(ttfm["ours"]), "tokens": len(tbm["ours"])}}
    lines = [f"# MaskBench timings side by side with llguidance ({res['meta']['date']})", "",
             f"`python benchmarks/maskbench_json_schema.py --vs-llguidance --every {a.every}`: "
             f"{res['n']['schemas']} schemas ({skipped} skipped: an engine refused them), "
             f"{res['n']['tokens']:,} tokens of valid instances; interleaved schema by schema in one process; "
             f"load average {load0[0]:.1f} at start, {res['meta']['loadavg_at_end'][0]:.1f} at end.", "",
             "| timing | ours p50 / p90 / p99 | llguidance p50 / p90 / p99 | ratio p50 / p90 / p99 |",
             "|---|---|---|---|"]
    for name, key, unit in (("TTFM", "ttfm_ms", "ms"), ("per token", "tbm_us", "µs")):
        o, g = res[key]["ours"], res[key]["llguidance"]
        lines.append(f"| {name} ({unit}) | " + " / ".join(f"{o[q]:,.1f}" for q in (50, 90, 99)) + " | "
                     + " / ".join(f"{g[q]:,.1f}" for q in (50, 90, 99)) + " | "
                     + " / ".join(f"{o[q] / g[q]:.1f}×" for q in (50, 90, 99)) + " |")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "maskbench_vs_llguidance.json").write_text(json.dumps(res, indent=1))
    (out / "maskbench_vs_llguidance.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    if "--vs-llguidance" in sys.argv[1:]:
        side_by_side(sys.argv[1:])
    else:
        main()
