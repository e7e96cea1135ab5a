"""AWRS vs full masking, and SMC vs masking, on the default model (CPU).

Part 1 — constraint work per token.  Temperature-1 sampling under the shipped JSON
and SQL grammars, the same prompts and seeds, two samplers that draw from the same
per-step distribution: masking (`AncestralSampler(Temperature(1))`: a full mask
every step, i.e. every vocabulary token decided) and `AWRSSampler` (only the drawn
tokens checked with ``allows``).  Each sampler gets its own freshly compiled grammar
(both start cold).  Reported per token: constraint checks, milliseconds spent in the
constraint, total milliseconds.

Part 2 — SMC vs masking on a real task: inventing a JSON record for a schema.
Masking draws one sample per run; SMC runs ``--particles`` particles and returns
one drawn by weight.  Reported: mean model log-likelihood of the outputs (the
model's log P(w), EOS included: the target of grammar-aligned sampling is the
model's own distribution restricted to the language, so likelier outputs are
closer to it), validity (finished and jsonschema-valid), diversity (distinct
outputs / outputs), seconds per output, and SMC's estimate of P(L).

    python benchmarks/aligned_sampling.py [--runs 4] [--smc-runs 8] [--particles 8] [--out benchmarks/results]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tqdm import tqdm  # noqa: E402

GRAMMAR_TASKS = [
    ("json", ROOT / "grammars" / "json.lark", "Write a JSON object describing a book (title, author, year)."),
    ("sql", ROOT / "grammars" / "sql_select.lark", "Write one SQL query that lists the customers older than 30."),
]
SMC_SCHEMA = {"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 24}, "age": {"type": "integer", "minimum": 0, "maximum": 120},
    "city": {"type": "string", "maxLength": 24}}, "required": ["name", "age", "city"]}
SMC_PROMPT = "Invent a person and give their name, age and city as JSON."


class _Timed:
    """A constraint wrapper that counts checks and time spent in the constraint."""

    def __init__(self, inner, vocab_size: int) -> None:
        self.inner, self.vocab_size = inner, vocab_size
        self.checks = 0
        self.seconds = 0.0

    def _timed(self, fn, *args):
        t0 = time.perf_counter()
        out = fn(*args)
        self.seconds += time.perf_counter() - t0
        return out

    def mask(self):
        self.checks += self.vocab_size               # a mask decides every token
        return self._timed(self.inner.mask)

    def allows(self, t):
        self.checks += 1
        return self._timed(self.inner.allows, t)

    def is_accepting(self):
        return self._timed(self.inner.is_accepting)

    def advance(self, t):
        return self._timed(self.inner.advance, t)

    def fork(self):   # pragma: no cover - not used by these samplers
        return self.inner.fork()

    def rollback(self, n=1):   # pragma: no cover
        self.inner.rollback(n)


def part_awrs(lm, runs: int, max_tokens: int) -> list[dict]:
    import torch

    from constrained import Grammar, compile_grammar
    from samplers import AncestralSampler, AWRSSampler, Temperature

    rows = []
    for name, path, prompt in GRAMMAR_TASKS:
        ids = lm.prompt_ids(prompt)
        grammar = Grammar.from_file(path)
        compiled = {s: compile_grammar(grammar, lm.vocab, cache_dir=None) for s in ("masking", "awrs")}
        for run in tqdm(range(runs), desc=f"awrs vs masking: {name}"):
            for sampler_name in (("masking", "awrs") if run % 2 == 0 else ("awrs", "masking")):
                sampler = AncestralSampler(Temperature(1.0)) if sampler_name == "masking" else AWRSSampler()
                con = _Timed(compiled[sampler_name].matcher(), len(lm.vocab))
                session = lm.session(ids)
                t0 = time.perf_counter()
                out = sampler.run(session, con, lm.eos_ids, max_tokens=max_tokens,
                                  generator=torch.Generator().manual_seed(run))[0]
                seconds = time.perf_counter() - t0
                steps = len(out.tokens) + (out.stop == "eos")
                rows.append({"grammar": name, "sampler": sampler_name, "run": run, "steps": steps,
                             "checks": con.checks, "constraint_s": con.seconds, "seconds": seconds,
                             "stop": out.stop})
    return rows


def part_smc(lm, runs: int, particles: int, max_tokens: int) -> list[dict]:
    import jsonschema
    import torch

    from constrained import compile_grammar
    from constrained.app import extraction_grammar
    from samplers import SMC, AncestralSampler, Temperature

    compiled = compile_grammar(extraction_grammar(SMC_SCHEMA), lm.vocab)
    ids = lm.prompt_ids(SMC_PROMPT)
    validator = jsonschema.Draft202012Validator(SMC_SCHEMA)
    rows = []
    for run in tqdm(range(runs), desc="smc vs masking"):
        gen = torch.Generator().manual_seed(run)
        t0 = time.perf_counter()
        masked = AncestralSampler(Temperature(1.0)).run(lm.session(ids), compiled.matcher(), lm.eos_ids,
                                                        max_tokens=max_tokens, generator=gen)[0]
        rows.append(_smc_row("masking", run, masked, time.perf_counter() - t0, lm, validator))
        t0 = time.perf_counter()
        out = SMC(n_particles=particles).run(lm.session(ids), compiled.matcher(), lm.eos_ids,
                                             max_tokens=max_tokens, generator=gen)
        seconds = time.perf_counter() - t0
        weights = torch.tensor([s.info["weight"] for s in out], dtype=torch.float64)
        if weights.sum() > 0:
            chosen = out[int(torch.multinomial(weights, 1, generator=gen))]
        else:
            chosen = out[0]
        row = _smc_row("smc", run, chosen, seconds, lm, validator)
        row.update(log_ml=out[0].info["log_ml"], resamples=out[0].info["resamples"],
                   checks_per_token=out[0].info["checks"] / max(1, sum(len(s.tokens) + 1 for s in out)))
        rows.append(row)
    return rows


def _smc_row(sampler: str, run: int, sample, seconds: float, lm, validator) -> dict:
    text = b"".join(lm.vocab.token_bytes[t] for t in sample.tokens).decode("utf-8", "replace")
    try:
        valid = sample.finished and not list(validator.iter_errors(json.loads(text)))
    except ValueError:
        valid = False
    return {"sampler": sampler, "run": run, "text": text, "logprob": sample.logprob, "valid": bool(valid),
            "tokens": len(sample.tokens), "seconds": seconds, "stop": sample.stop}


def summarise(awrs_rows: list[dict], smc_rows: list[dict]) -> dict:
    summary: dict = {"awrs": {}, "smc": {}}
    for name, _, _ in GRAMMAR_TASKS:
        for sampler in ("masking", "awrs"):
            rs = [r for r in awrs_rows if r["grammar"] == name and r["sampler"] == sampler]
            steps = sum(r["steps"] for r in rs)
            summary["awrs"][f"{name}/{sampler}"] = {
                "steps": steps, "checks_per_token": sum(r["checks"] for r in rs) / steps,
                "constraint_ms_per_token": 1e3 * sum(r["constraint_s"] for r in rs) / steps,
                "ms_per_token": 1e3 * sum(r["seconds"] for r in rs) / steps,
                "finished": sum(r["stop"] == "eos" for r in rs), "runs": len(rs)}
    for sampler in ("masking", "smc"):
        rs = [r for r in smc_rows if r["sampler"] == sampler]
        summary["smc"][sampler] = {
            "runs": len(rs), "mean_logprob": sum(r["logprob"] for r in rs) / len(rs),
            "valid": sum(r["valid"] for r in rs), "distinct": len({r["text"] for r in rs}),
            "seconds_per_output": sum(r["seconds"] for r in rs) / len(rs)}
    smc = [r for r in smc_rows if r["sampler"] == "smc"]
    finite = [r["log_ml"] for r in smc if r["log_ml"] > -math.inf]
    summary["smc"]["smc"]["mean_log_ml"] = sum(finite) / len(finite) if finite else -math.inf
    return summary


def report(summary: dict, args) -> str:
    lines = ["| grammar | sampler | tokens | checks / token | constraint ms / token | ms / token | finished |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for key, m in summary["awrs"].items():
        g, s = key.split("/")
        lines.append(f"| {g} | {s} | {m['steps']} | {m['checks_per_token']:.1f} | "
                     f"{m['constraint_ms_per_token']:.2f} | {m['ms_per_token']:.1f} | {m['finished']}/{m['runs']} |")
    lines += ["", "| sampler | outputs | mean log P(output) | valid | distinct | s / output |",
              "|---|---:|---:|---:|---:|---:|"]
    for s, m in summary["smc"].items():
        lines.append(f"| {s} | {m['runs']} | {m['mean_logprob']:.2f} | {m['valid']}/{m['runs']} | "
                     f"{m['distinct']}/{m['runs']} | {m['seconds_per_output']:.1f} |")
    lines.append(f"\nSMC: {args.particles} particles, mean log P(L) estimate {summary['smc']['smc']['mean_log_ml']:.2f}")
    return "\n".join(lines) + "\n"


def plot(summary: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = list(summary["awrs"])
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    axes[0].bar(keys, [summary["awrs"][k]["checks_per_token"] for k in keys], color=["#999", "#3a7"] * 2)
    axes[0].set_yscale("log")
    axes[0].set_ylabel("constraint checks per token (log)")
    axes[0].set_title("AWRS vs full masking")
    axes[0].tick_params(axis="x", rotation=20)
    samplers = list(summary["smc"])
    axes[1].bar(samplers, [summary["smc"][s]["mean_logprob"] for s in samplers], color=["#999", "#37a"])
    axes[1].set_ylabel("mean model log P(output)")
    axes[1].set_title("SMC vs masking (JSON record)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="default")
    ap.add_argument("--runs", type=int, default=4)
    ap.add_argument("--smc-runs", type=int, default=8)
    ap.add_argument("--particles", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    args = ap.parse_args()
    from constrained.models import LanguageModel

    lm = LanguageModel.load(args.model)
    awrs_rows = part_awrs(lm, args.runs, args.max_tokens)
    smc_rows = part_smc(lm, args.smc_runs, args.particles, args.max_tokens)
    summary = summarise(awrs_rows, smc_rows)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "aligned_sampling.json").write_text(json.dumps({"summary": summary, "awrs": awrs_rows,
                                                           "smc": smc_rows}, indent=1))
    text = report(summary, args)
    (out / "aligned_sampling.md").write_text(text)
    plot(summary, out / "aligned_sampling.png")
    print(text)


if __name__ == "__main__":
    main()
