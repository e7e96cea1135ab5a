"""Per-token cost inside length-bounded strings, ours and llguidance in the same run.

A string value with ``maxLength`` is a counter: every character read is a state of
its own (the number left), so each token of the value enters a state whose token
table has not been built yet, where an unbounded string's tokens all share one.
This benchmark isolates that cost: ``{"type": "object", "properties": {"d":
{"type": "string", "maxLength": N}}}`` for each N of ``--max-lengths`` (``0``: no
bound), fed instances whose value is a 60-character English phrase (cut to N), token
by token (canonical tokens, Llama 3 vocabulary), each engine and N in a forked
process of its own (no cache carried from another case).  The first instance meets
every state for the first time; the next ones (other phrases of the same lengths)
find them built.  The vocabulary is loaded and ours warmed up (`constrained.warm_up`,
as a server does at start) before the forks.

Reported per engine and N: per-token p50 / p90 / max (µs) of ``mask`` + commit over
the tokens of the first instance, and over the later ones.

    python benchmarks/bounded_strings.py [--max-lengths 0,256,128,64,16] [--instances 4]
        [--out benchmarks/results]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from _common import DEFAULT_VOCAB, RESULTS_DIR, load_vocabulary
from serving_batch import LLGuidanceEngine, OurEngine, in_fork, llguidance_available

PHRASES = ("The quick brown fox jumps over the lazy dog and keeps running",
           "Please deliver the parcel to the side door after five o'clock",
           "Our quarterly report shows steady growth in all three regions",
           "A light rain is expected tomorrow morning across the whole city",
           "Bring two copies of the signed form to the front desk by noon",
           "The museum opens at nine and closes at six on most weekdays too")


def schema_for(max_length: int) -> dict:
    """The case's schema: one string member, bounded by ``max_length`` (0: unbounded)."""
    string = {"type": "string", **({"maxLength": max_length} if max_length else {})}
    return {"type": "object", "properties": {"d": string}, "required": ["d"]}


def _case(vocab, engine_name: str, max_length: int, instances: int) -> dict:
    eos = int(min(vocab.eos_ids))
    engine = OurEngine(vocab) if engine_name == "ours" else LLGuidanceEngine(DEFAULT_VOCAB, vocab.eos_ids)
    matcher = engine.compile(schema_for(max_length))
    out = np.zeros((1, engine.words), dtype=np.int32)
    per_instance = []
    for phrase in PHRASES[:instances]:
        m = engine.copy(matcher)
        text = json.dumps({"d": phrase[:max_length] if max_length else phrase})
        times = []
        for token in [int(t) for t in vocab.encode(text)] + [eos]:
            t0 = time.perf_counter()
            engine.fill([m], [0], out)
            ok = engine.commit([m], [token])[0]
            times.append(time.perf_counter() - t0)
            if not ok:
                raise RuntimeError(f"{engine_name} refused token {token} of {text!r}")
        per_instance.append(times)
    return {"first": per_instance[0], "later": [t for ts in per_instance[1:] for t in ts]}


def _stats(times: list[float]) -> dict:
    if not times:
        return {"tokens": 0, "p50": None, "p90": None, "max": None}
    a = np.asarray(times) * 1e6
    return {"tokens": int(a.size), "p50": float(np.percentile(a, 50)), "p90": float(np.percentile(a, 90)),
            "max": float(a.max())}


def run(max_lengths: list[int], instances: int) -> dict:
    from constrained import warm_up

    engines = ["ours"] + (["llguidance"] if llguidance_available() else [])
    vocab = load_vocabulary(str(DEFAULT_VOCAB))
    warm_up(vocab, cache_dir=None)      # as a server does at start (the forks inherit it)
    rows = []
    for n in max_lengths:
        for name in engines:
            res = in_fork(_case, vocab, name, n, instances)
            rows.append({"engine": name, "max_length": n, "first": _stats(res["first"]),
                         "later": _stats(res["later"])})
            print(json.dumps(rows[-1]), flush=True)
    return {"engines": engines, "instances": instances, "rows": rows}


def markdown(res: dict) -> str:
    def cell(s: dict) -> str:
        return "–" if s["p50"] is None else f"{s['p50']:.0f} / {s['p90']:.0f} / {s['max']:.0f}"

    lines = ["| maxLength | engine | first instance: p50 / p90 / max µs | later instances: p50 / p90 / max µs |",
             "|---|---|---|---|"]
    for r in res["rows"]:
        lines.append(f"| {r['max_length'] or 'none'} | {r['engine']} | {cell(r['first'])} | {cell(r['later'])} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--max-lengths", default="0,256,128,64,16",
                    help="comma-separated maxLength values (0: no bound)")
    ap.add_argument("--instances", type=int, default=4, help="instances fed per case (first: cold states)")
    ap.add_argument("--out", type=Path, default=RESULTS_DIR)
    args = ap.parse_args()
    res = run([int(x) for x in args.max_lengths.split(",")], max(1, min(args.instances, len(PHRASES))))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bounded_strings.json").write_text(json.dumps(res, indent=1))
    (args.out / "bounded_strings.md").write_text(markdown(res) + "\n")
    print(markdown(res))


if __name__ == "__main__":
    main()
