"""Speculative constrained decoding vs plain decoding: tokens/s per drafter (default model, CPU or GPU).

Tasks: JSON extraction where the text contains the values — MaskBench dev records
whose first valid instance is a small object, written as ``key: value; ...`` prose;
the schema is the record's, compiled with `extract`'s grammar options.  Per task,
greedy decoding from the same chat prompt in every mode: ``unconstrained``,
``constrained`` (every token sampled), ``jump_forward`` (forced tokens appended
without sampling) and speculative with each drafter (``forced``, ``lookup``,
``suffix``, ``chain``, ``layer-skip``).  One untimed constrained run per task first
warms the grammar's state caches, so every mode sees warm masks.  Timed after the
prompt's prefill.  Reported: output tokens/s (EOS counts), the speed-up over
``constrained``, mean tokens per target forward pass (accepted length + 1), and
whether each speculative output equals the ``constrained`` one token for token.
On a GPU the masks along a draft are computed during the target's forward pass
(``overlap_masks``); ``--overlap-compare`` adds each drafter with the masks computed
in line (``<drafter>/inline``).  ``--device`` / ``--dtype`` choose where the model
runs (default: a GPU if there is one, float16 there, float32 on the CPU);
``--name`` is the stem of the result files.

    python benchmarks/speculative_speed.py [--tasks 12] [--max-tokens 64] [--out benchmarks/results]
        [--data ../shared/data/maskbench/dev.jsonl.gz] [--device cuda] [--dtype float16]
        [--overlap-compare] [--name speculative_speed]
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _environment import environment  # noqa: E402
from tqdm import tqdm  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "maskbench" / "dev.jsonl.gz"
DRAFTERS = ("forced", "lookup", "suffix", "chain", "layer-skip")


def extraction_tasks(n: int, path: Path = DATA) -> list[tuple[dict, str]]:
    """``n`` (schema, text) pairs: MaskBench dev records with a small valid object
    instance, the text listing its members as ``key: value``."""
    rows = []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            rec = json.loads(line)
            valid = [t["data"] for t in rec.get("tests", []) if t.get("valid")]
            if not valid or not isinstance(valid[0], dict) or not valid[0]:
                continue
            if len(json.dumps(rec["schema"])) >= 800 or len(json.dumps(valid[0])) >= 200:
                continue
            text = "; ".join(f"{k}: {json.dumps(v) if not isinstance(v, str) else v}" for k, v in valid[0].items())
            rows.append((rec["schema"], text))
            if len(rows) >= n:
                break
    return rows


def run(model: str, n_tasks: int, max_tokens: int, *, data: Path = DATA, device: str | None = None,
        dtype: str | None = None, overlap_compare: bool = False) -> dict:
    from constrained import compile_grammar
    from constrained.app import DEFAULT_INSTRUCTIONS, extraction_grammar
    from constrained.decoding import decode_loop
    from constrained.errors import ConstrainedError
    from constrained.models import LanguageModel
    from constrained.speculative import drafter_from_spec, speculative_decode
    from samplers import Greedy
    from samplers.constraint import Unconstrained

    lm = LanguageModel.load(model, device=device, dtype=dtype)
    drafters = {name: drafter_from_spec(name, lm) for name in DRAFTERS}
    inline = {f"{name}/inline": drafter_from_spec(name, lm) for name in DRAFTERS} if overlap_compare else {}
    speculative = {**drafters, **inline}
    modes = ("constrained", "unconstrained", "jump_forward", *speculative)
    rows = []
    tasks = extraction_tasks(n_tasks * 2, data)
    done = 0
    for schema, text in tqdm(tasks, desc="tasks"):
        if done >= n_tasks:
            break
        try:
            compiled = compile_grammar(extraction_grammar(schema), lm.vocab)
        except ConstrainedError:
            continue
        done += 1
        prompt = lm.prompt_ids(text, instructions=DEFAULT_INSTRUCTIONS.replace("{schema}", json.dumps(schema)))
        decode_loop(lm.session(prompt), compiled.matcher(), lm.eos_ids, Greedy().choose, max_tokens=max_tokens)
        reference = None
        for mode in modes:
            session = lm.session(prompt)
            t0 = time.perf_counter()
            if mode in speculative:
                out = speculative_decode(session, compiled.matcher(), lm.eos_ids, drafter=speculative[mode],
                                         max_tokens=max_tokens, overlap_masks=False if mode in inline else None)
                speculative[mode].observe(out.tokens)
            else:
                constraint = Unconstrained(lm.logits_width) if mode == "unconstrained" else compiled.matcher()
                out = decode_loop(session, constraint, lm.eos_ids, Greedy().choose, max_tokens=max_tokens,
                                  jump_forward=mode == "jump_forward")
            seconds = time.perf_counter() - t0
            if mode == "constrained":
                reference = out
            rows.append({"task": done, "mode": mode, "tokens": len(out.tokens) + (out.stop == "eos"),
                         "seconds": seconds, "forwards": out.info.get("forwards"),
                         "overlap_masks": out.info.get("overlap_masks"),
                         "identical": out.tokens == reference.tokens and out.stop == reference.stop
                         if mode in speculative else None})
    summary = {}
    for mode in ("unconstrained", "constrained", "jump_forward", *speculative):
        rs = [r for r in rows if r["mode"] == mode]
        tokens = sum(r["tokens"] for r in rs)
        seconds = sum(r["seconds"] for r in rs)
        summary[mode] = {"runs": len(rs), "tokens": tokens, "seconds": seconds, "tokens_per_s": tokens / seconds}
        if mode in speculative:
            summary[mode]["tokens_per_forward"] = tokens / max(1, sum(r["forwards"] for r in rs))
            summary[mode]["identical"] = sum(bool(r["identical"]) for r in rs)
    base = summary["constrained"]["tokens_per_s"]
    for m in summary.values():
        m["speedup"] = m["tokens_per_s"] / base
    return {"environment": environment(lm), "summary": summary, "rows": rows}


def report(summary: dict) -> str:
    lines = ["| mode | runs | tokens | seconds | tokens/s | × constrained | tokens / forward | identical |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for mode, m in summary.items():
        tpf = f"{m['tokens_per_forward']:.2f}" if "tokens_per_forward" in m else ""
        same = f"{m['identical']}/{m['runs']}" if "identical" in m else ""
        lines.append(f"| {mode} | {m['runs']} | {m['tokens']} | {m['seconds']:.1f} | {m['tokens_per_s']:.1f} | "
                     f"{m['speedup']:.2f} | {tpf} | {same} |")
    return "\n".join(lines) + "\n"


def plot(summary: dict, path: Path, where: str = "CPU") -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    modes = list(summary)
    fig, ax = plt.subplots(figsize=(8, 3.6))
    colors = ["#999" if m in ("unconstrained", "constrained", "jump_forward") else
              "#9cd" if m.endswith("/inline") else "#3a7" for m in modes]
    ax.bar(modes, [summary[m]["tokens_per_s"] for m in modes], color=colors)
    ax.axhline(summary["constrained"]["tokens_per_s"], color="k", lw=0.8, ls="--")
    ax.set_ylabel("output tokens / s (greedy)")
    ax.set_title(f"Speculative constrained extraction per drafter (default model, {where})")
    ax.tick_params(axis="x", rotation=30 if len(modes) > 8 else 20)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="default")
    ap.add_argument("--tasks", type=int, default=12)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    ap.add_argument("--data", default=str(DATA), help="MaskBench dev set (jsonl.gz)")
    ap.add_argument("--device", default=None, help="cpu, cuda, ... (default: a GPU if there is one)")
    ap.add_argument("--dtype", default=None, help="float32, float16, bfloat16 (default: float16 on a GPU)")
    ap.add_argument("--overlap-compare", action="store_true",
                    help="also run each drafter with the draft's masks computed in line")
    ap.add_argument("--name", default="speculative_speed", help="stem of the result files")
    args = ap.parse_args()
    result = run(args.model, args.tasks, args.max_tokens, data=Path(args.data), device=args.device,
                 dtype=args.dtype, overlap_compare=args.overlap_compare)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{args.name}.json").write_text(json.dumps(result, indent=1))
    env = result["environment"]
    text = report(result["summary"])
    (out / f"{args.name}.md").write_text(f"{env}\n\n{text}")
    where = env["device_name"].removeprefix("NVIDIA ").split(" ")[0] if env["device"].startswith("cuda") else "CPU"
    plot(result["summary"], out / f"{args.name}.png", f"{where}, {env['dtype'].replace('torch.', '')}")
    print(env)
    print(text)


if __name__ == "__main__":
    main()
