"""JSONSchemaBench through vLLM: every structured-output backend on the same prompts, one run.

``constrained bench jsonschemabench --engine vllm --data FILE [--backend NAME ...]``
sends the benchmark's prompts (the schema in the system message, greedy decoding,
``--max-tokens``) through offline vLLM, all requests of a backend in one engine as a
server would batch them, once per backend: ``constrained`` (this project's
structured-output backend), ``constrained-lp`` (its logits processor), and vLLM's
``xgrammar``, ``guidance``, ``outlines``.  vLLM runs in its own virtualenv
(`constrained.integrations.vllm.venv`); `constrained.bench.vllm_runner` is its side.

Per backend: **coverage** (valid outputs / schemas), **compliance** (valid / requests
the backend accepted), requests refused, outputs cut by ``max_tokens`` and how many of
those are invalid, **tokens/s** (output tokens of the run / its wall time, prefill
included), **TTFT** percentiles (from when all requests were added: queueing, grammar
compile and prefill), and for this project's routes every invalid output cut by the
budget is checked against the schema's shortest output (with the model's vocabulary):
``explained`` when even that does not fit.  Validity: ``jsonschema`` with format
checking, on the whole output text.

Written to ``<out>/vllm_jsonschemabench.{jsonl,json,md,png}``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from constrained.bench.results import percentiles, pyplot, read_records, save_figure

STEM = "vllm_jsonschemabench"
BACKENDS = ("constrained", "constrained-lp", "xgrammar", "guidance", "outlines")
SCHEMA_CHARS = 3000          # the schema text in the prompt is cut to this many characters
OURS = ("constrained", "constrained-lp")


def _valid(schema: Any, text: str | None) -> bool:
    from constrained.bench.jsonschemabench import _is_valid

    if text is None:
        return False
    try:
        value = json.loads(text)
    except ValueError:
        return False
    return _is_valid(schema, value)


def shortest_output_tokens(schemas: dict[Any, Any], model_dir: str) -> dict[Any, int | None]:
    """Tokens in each schema's shortest output under this project's default options, per
    key of ``schemas`` (None: no output found, or the schema does not compile); the
    vLLM tests use it to tell an output that ran out of budget from one that had room."""
    from transformers import AutoTokenizer

    from constrained import TokenVocabulary, compile_grammar
    from constrained.errors import ConstrainedError
    from constrained.integrations.spec import ConstraintSpec

    vocab = TokenVocabulary.from_hf(AutoTokenizer.from_pretrained(model_dir))
    out: dict[Any, int | None] = {}
    for sid, schema in schemas.items():
        try:
            c = compile_grammar(ConstraintSpec.from_request({"json_schema": schema}).grammar(), vocab).matcher()
            tokens = c.completion_tokens()
            out[sid] = None if tokens is None else len(tokens)
        except ConstrainedError:
            out[sid] = None
    return out


def _ttft(values: Sequence[float]) -> dict[str, float | None]:
    p = percentiles(values, (50, 90))
    return {"ttft_p50_s": p["p50"], "ttft_p90_s": p["p90"]}


def summarize(rows: Sequence[dict], backends: Sequence[str]) -> dict[str, dict]:
    out = {}
    for b in backends:
        rs = [r for r in rows if r["backend"] == b]
        if not rs:
            continue
        accepted = [r for r in rs if r["outcome"] == "finished"]
        valid = [r for r in accepted if r["valid"]]
        cut = [r for r in accepted if r.get("finish") == "length"]
        wall = max((r["wall_s"] for r in rs), default=0.0)
        tokens = sum(r.get("tokens") or 0 for r in accepted)
        ttft = [r["ttft_s"] for r in accepted if "ttft_s" in r]
        out[b] = {"schemas": len(rs), "refused": len(rs) - len(accepted), "valid": len(valid),
                  "invalid": len(accepted) - len(valid), "coverage": len(valid) / len(rs),
                  "compliance": len(valid) / len(accepted) if accepted else None, "cut": len(cut),
                  "cut_invalid": sum(not r["valid"] for r in cut),
                  "cut_invalid_explained": sum(bool(r.get("explained")) for r in cut if not r["valid"]),
                  "output_tokens": tokens, "wall_s": wall, "tokens_per_s": tokens / wall if wall else None,
                  **_ttft(ttft), "startup_s": rs[0].get("startup_s")}
    return out


def markdown(summary: dict, meta: dict) -> str:
    lines = [f"JSONSchemaBench through offline vLLM {meta['vllm']} (CPU), {meta['schemas']} schemas of "
             f"`{Path(meta['data']).name}`, model {meta['model']}, greedy, max_tokens {meta['max_tokens']}, "
             f"all requests of a backend in one batch; {meta['date']}, commit {meta['commit']}.", "",
             "| backend | coverage | compliance | refused | invalid | cut by max_tokens (invalid, explained) "
             "| tokens/s | TTFT p50 / p90 (s) |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for b, s in summary.items():
        comp = "–" if s["compliance"] is None else f"{s['compliance']:.1%}"
        tps = "–" if s["tokens_per_s"] is None else f"{s['tokens_per_s']:.0f}"
        ttft = "–" if s["ttft_p50_s"] is None else f"{s['ttft_p50_s']:.1f} / {s['ttft_p90_s']:.1f}"
        lines.append(f"| {b} | {s['coverage']:.1%} | {comp} | {s['refused']} | {s['invalid']} | "
                     f"{s['cut']} ({s['cut_invalid']}, {s['cut_invalid_explained']}) | {tps} | {ttft} |")
    lines += ["", "coverage = valid / schemas; compliance = valid / requests the backend accepted; "
              "explained: an invalid output cut by max_tokens where even the schema's shortest output "
              "(this project's options and vocabulary) needs more tokens than the budget (checked for this "
              "project's routes). tokens/s: output tokens / wall time of the whole batch (prefill included)."]
    return "\n".join(lines) + "\n"


def plot(summary: dict, path: Path) -> Path | None:
    try:
        plt = pyplot()
    except ImportError:
        return None
    names = list(summary)
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.2))
    axes[0].bar(names, [summary[b]["coverage"] for b in names], color="tab:green")
    axes[0].set_ylabel("coverage (valid / schemas)")
    axes[0].set_ylim(0, 1)
    axes[1].bar(names, [summary[b]["tokens_per_s"] or 0 for b in names], color="tab:blue")
    axes[1].set_ylabel("output tokens / s")
    for ax in axes:
        ax.tick_params(axis="x", rotation=30)
    fig.tight_layout()
    return save_figure(fig, path)


def _git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=Path(__file__).resolve().parent).stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def run_vllm(records: Sequence[dict], *, backends: Sequence[str], max_tokens: int, model: str, out: Path) -> int:
    """Run every backend on ``records`` and write the report; the CLI's entry."""
    from constrained.bench.jsonschemabench import prompt_messages
    from constrained.integrations.vllm.venv import vllm_python

    python = vllm_python()
    if python is None:
        print("no vLLM venv: python -m constrained.integrations.vllm.venv", file=sys.stderr)
        return 2
    if model == "default":
        from constrained.models.loading import default_model_dir

        model = str(default_model_dir())
    unknown = sorted(set(backends) - set(BACKENDS))
    if unknown:
        print(f"unknown backend(s) {unknown}; choose from {list(BACKENDS)}", file=sys.stderr)
        return 2
    jobs = [{"id": str(r["id"]), "schema": r["schema"], "messages": prompt_messages(r["schema"], schema_chars=SCHEMA_CHARS)}
            for r in records]
    schemas = {j["id"]: j["schema"] for j in jobs}
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        jobs_path = Path(tmp) / "jobs.json"
        jobs_path.write_text(json.dumps({"model": model, "max_tokens": max_tokens, "jobs": jobs}))
        for b in backends:
            res = Path(tmp) / f"{b}.jsonl"
            print(f"vLLM with backend {b}: {len(jobs)} requests", file=sys.stderr)
            proc = subprocess.run([str(python), "-m", "constrained.bench.vllm_runner", str(jobs_path), str(res),
                                   "--backend", b], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            if proc.returncode or not res.is_file():
                print(f"backend {b} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}", file=sys.stderr)
                continue
            rows += read_records(res)
    for r in rows:
        r["valid"] = r["outcome"] == "finished" and _valid(schemas[r["id"]], r.get("text"))
    doubtful = {r["id"] for r in rows if r["backend"] in OURS and not r["valid"] and r.get("finish") == "length"}
    if doubtful:
        need = shortest_output_tokens({i: schemas[i] for i in doubtful}, model)
        for r in rows:
            if r["id"] in doubtful and r["backend"] in OURS:
                shortest = need[r["id"]]
                r["shortest_tokens"] = shortest
                r["explained"] = shortest is None or shortest > max_tokens
    with open(out / f"{STEM}.jsonl", "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    version = subprocess.run([str(python), "-c", "import vllm; print(vllm.__version__)"], capture_output=True,
                             text=True).stdout.strip()
    meta = {"vllm": version, "schemas": len(records), "data": str(records[0].get("_source", "")) if records else "",
            "model": "default (SmolLM2-135M-Instruct)" if "SmolLM2" in model else model, "max_tokens": max_tokens,
            "date": time.strftime("%Y-%m-%d"), "commit": _git_commit()}
    summary = summarize(rows, backends)
    text = markdown(summary, meta)
    (out / f"{STEM}.md").write_text(text)
    (out / f"{STEM}.json").write_text(json.dumps({"meta": meta, "summary": summary}, indent=1))
    plot(summary, out / f"{STEM}.png")
    print(text)
    return 0
