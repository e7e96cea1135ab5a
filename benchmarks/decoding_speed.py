"""Tokens per second of constrained vs unconstrained decoding (JSON extraction, default model).

For each extraction task (a schema and a text), greedy decoding runs three times from
the same chat prompt: ``unconstrained`` (every token allowed, stops at EOS or the
budget); ``constrained`` by `extract`'s grammar for the schema, every token sampled
(the engine's overhead per token: mask, advance); and ``jump_forward``: the same
constraint with forced tokens appended without sampling, in the forward pass of the
sampled token before them (a forced EOS needs no forward pass at all).  Then
``batch_jump_forward``: the five tasks decoded together (`decode_batch`, one forward
pass per step for all rows, each row under its own schema's matcher).  Timed after
the prompt's prefill; per run: output tokens (EOS counts as one), forced tokens,
seconds.  Reported: tokens/s of each mode and the ratios to unconstrained.

    python benchmarks/decoding_speed.py [--model default] [--repeats 2] [--out benchmarks/results]
        [--device cuda] [--dtype float16] [--name decoding_speed]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _environment import environment  # noqa: E402
from tqdm import tqdm  # noqa: E402

TASKS = [
    ({"type": "object", "properties": {"name": {"type": "string"}, "email": {"type": "string", "format": "email"},
                                       "phone": {"type": "string"}}, "required": ["name", "email", "phone"]},
     "Contact Ada Lovelace at ada@example.org or +44 20 7946 0958."),
    ({"type": "object", "properties": {"invoice_number": {"type": "string"}, "total": {"type": "number"},
                                       "currency": {"enum": ["EUR", "USD", "GBP"]}, "paid": {"type": "boolean"}},
      "required": ["invoice_number", "total", "currency", "paid"]},
     "Invoice INV-2041: total 1,250.00 EUR, still unpaid."),
    ({"type": "object", "properties": {"city": {"type": "string"}, "country": {"type": "string"},
                                       "population": {"type": "integer", "minimum": 0}},
      "required": ["city", "country", "population"]},
     "Lyon, in France, has about 520,000 inhabitants."),
    ({"type": "object", "properties": {"title": {"type": "string"}, "year": {"type": "integer"},
                                       "authors": {"type": "array", "items": {"type": "string"}, "maxItems": 4}},
      "required": ["title", "year", "authors"]},
     "'Attention Is All You Need' (2017) by Vaswani, Shazeer, Parmar and others."),
    ({"type": "object", "properties": {"product": {"type": "string"}, "rating": {"type": "integer", "minimum": 1,
                                                                                "maximum": 5},
                                       "pros": {"type": "array", "items": {"type": "string"}}},
      "required": ["product", "rating", "pros"]},
     "The X200 headphones: 4 stars. Great battery, comfortable, cheap."),
]


MODES = ("unconstrained", "constrained", "jump_forward", "batch_jump_forward")


def _row(mode: str, outs: list, seconds: float) -> dict:
    return {"mode": mode, "tokens": sum(len(o.tokens) + (o.stop == "eos") for o in outs),
            "forced": sum(o.forced for o in outs), "seconds": seconds, "stops": [o.stop for o in outs]}


def run(model: str, repeats: int, max_tokens: int, *, device: str | None = None, dtype: str | None = None) -> dict:
    from constrained import compile_grammar
    from constrained.app import DEFAULT_INSTRUCTIONS, extraction_grammar
    from constrained.decoding import decode_batch, decode_loop
    from constrained.models import LanguageModel
    from samplers import Greedy
    from samplers.constraint import Unconstrained

    lm = LanguageModel.load(model, device=device, dtype=dtype)
    rows = []
    tasks = []
    for schema, text in TASKS:
        compiled = compile_grammar(extraction_grammar(schema), lm.vocab)
        prompt = lm.prompt_ids(text, instructions=DEFAULT_INSTRUCTIONS.replace("{schema}", json.dumps(schema)))
        tasks.append((compiled, prompt))
    for _ in tqdm(range(repeats), desc="repeats"):
        for compiled, prompt in tqdm(tasks, desc="tasks", leave=False):
            for mode in MODES[:3]:
                session = lm.session(prompt)             # prefill outside the timing
                constraint = Unconstrained(lm.logits_width) if mode == "unconstrained" else compiled.matcher()
                t0 = time.perf_counter()
                out = decode_loop(session, constraint, lm.eos_ids, Greedy().choose, max_tokens=max_tokens,
                                  jump_forward=mode == "jump_forward")
                seconds = time.perf_counter() - t0
                rows.append(_row(mode, [out], seconds))
        batch = lm.batch_session([prompt for _, prompt in tasks])
        t0 = time.perf_counter()
        outs = decode_batch(batch, [compiled.matcher() for compiled, _ in tasks], lm.eos_ids, Greedy().choose,
                            max_tokens=max_tokens, jump_forward=True)
        rows.append(_row("batch_jump_forward", outs, time.perf_counter() - t0))
    summary = {}
    for mode in MODES:
        rs = [r for r in rows if r["mode"] == mode]
        tokens = sum(r["tokens"] for r in rs)
        forced = sum(r["forced"] for r in rs)
        seconds = sum(r["seconds"] for r in rs)
        summary[mode] = {"runs": len(rs), "tokens": tokens, "forced_tokens": forced, "seconds": seconds,
                         "tokens_per_s": tokens / seconds}
    base = summary["unconstrained"]["tokens_per_s"]
    summary["ratio_constrained"] = summary["constrained"]["tokens_per_s"] / base
    summary["ratio_jump_forward"] = summary["jump_forward"]["tokens_per_s"] / base
    summary["ratio_batch_jump_forward"] = summary["batch_jump_forward"]["tokens_per_s"] / base
    return {"environment": environment(lm), "summary": summary, "rows": rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="default")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    ap.add_argument("--device", default=None, help="cpu, cuda, ... (default: a GPU if there is one)")
    ap.add_argument("--dtype", default=None, help="float32, float16, bfloat16 (default: float16 on a GPU)")
    ap.add_argument("--name", default="decoding_speed", help="stem of the result files")
    args = ap.parse_args()
    result = run(args.model, args.repeats, args.max_tokens, device=args.device, dtype=args.dtype)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{args.name}.json").write_text(json.dumps(result, indent=1))
    s = result["summary"]
    lines = ["| mode | runs | output tokens | forced tokens | seconds | tokens/s |", "|---|---:|---:|---:|---:|---:|"]
    for mode in MODES:
        m = s[mode]
        lines.append(f"| {mode} | {m['runs']} | {m['tokens']} | {m['forced_tokens']} | {m['seconds']:.1f} | "
                     f"{m['tokens_per_s']:.1f} |")
    lines.append(f"\nconstrained / unconstrained: {s['ratio_constrained']:.2f}x tokens/s (every token sampled); "
                 f"{s['ratio_jump_forward']:.2f}x with jump-forward; "
                 f"{s['ratio_batch_jump_forward']:.2f}x with the tasks decoded as one batch")
    (out / f"{args.name}.md").write_text(f"{result['environment']}\n\n" + "\n".join(lines) + "\n")
    print(result["environment"])
    print("\n".join(lines))


if __name__ == "__main__":
    main()
