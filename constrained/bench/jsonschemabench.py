"""JSONSchemaBench with a model: coverage, compliance and speed, constrained vs not.

For each schema of a MaskBench or JSONSchemaBench file (`constrained.bench.datasets`)
the model is asked for an instance the benchmark's way — the schema in the system
prompt ("You need to generate a JSON object that matches the schema below."), the
chat template for instruct models; a schema whose prompt would pass
``--max-prompt-tokens`` (4,096 by default, half the default model's context) is
cut to fit and marked "(schema truncated)", recorded as ``prompt_truncated`` —
and generates greedily, both modes with the
same budget: ``--max-tokens``, raised for a schema whose shortest instance needs
more (to that plus `BUDGET_SLACK`; recorded as ``max_tokens``):

* ``constrained``: the schema compiled with `Grammar.from_json_schema` with sound
  restrictions for generation (compact whitespace, canonical key spelling, and
  where ``additionalProperties`` is absent no members beyond the declared
  ``properties`` — objects that declare none stay open: small models otherwise copy
  schema keywords into records) — **GCT** (grammar
  compile time: schema → grammar → compiled → first mask, with a
  ``--compile-timeout``); jump-forward on; the output is finished within the budget
  (`decode_loop`'s ``finish_within_budget``: where a token would leave no room to
  finish, the shortest completion, value checks included, is appended instead);
  optionally ``--speculative``;
* ``unconstrained`` (``--unconstrained``): the same prompt, no constraint; the
  first JSON value in the output (code fences and prose around it ignored) is the
  answer.

Recorded per (schema, mode): compiled, outcome (``valid``, ``invalid``,
``compile_error``, ``compile_timeout``, ``no_json``, ``budget``, ``dead_end``: the
constraint allowed nothing more, ``crash``: an unexpected exception, traceback
kept), GCT, **TTFT**
(prefill + first token), **TPOT** (time per later output token), output tokens,
the output (first 2,000 characters).  Validity: ``jsonschema`` with format
checking.  Per split: empirical **coverage** = valid / schemas, **compliance** =
valid / compiled, GCT and TPOT percentiles, side by side for both modes.

Results are JSON lines appended to ``<out>/jsonschemabench.jsonl`` (an interrupted
run resumes; ``--fresh`` starts over), then ``jsonschemabench.md`` /
``.json`` and plots (coverage per split, GCT and TPOT distributions).  ``--workers
N`` runs N processes, each with its own copy of the model.

    constrained bench jsonschemabench --data dev.jsonl.gz --model default --limit 200 --unconstrained

``--engine vllm`` runs the same prompts through vLLM instead, with each of its
structured-output backends and this project's two routes (`constrained.bench.vllm_serving`).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from constrained.bench.datasets import DEFAULT_RESULTS, read_schemas
from constrained.bench.results import percentiles, pyplot, read_records, save_figure

STEM = "jsonschemabench"
SYSTEM_PROMPT = "You need to generate a JSON object that matches the schema below. Answer with the JSON only."
OUTCOMES = ("valid", "invalid", "no_json", "budget", "dead_end", "compile_error", "compile_timeout", "crash")
SCHEMA_OPTIONS = {"whitespace": "compact", "fixed_strings": "canonical", "additional_properties": "declared"}
OUTPUT_CHARS = 2000
BUDGET_SLACK = 32       # tokens beyond a schema's shortest instance when that exceeds --max-tokens
MAX_PROMPT_TOKENS = 4096  # half of SmolLM2's 8,192-token context: room for the output, bounded prefill


def prompt_messages(schema: Any, *, schema_chars: int | None = None) -> list[dict]:
    """The benchmark's prompt: instructions and the schema as the system message (its JSON
    text cut to ``schema_chars`` characters and marked so when given)."""
    text = json.dumps(schema)
    if schema_chars is not None and schema_chars < len(text):
        text = text[:schema_chars] + " ... (schema truncated)"
    return [{"role": "system", "content": f"{SYSTEM_PROMPT}\n{text}"},
            {"role": "user", "content": "Generate a JSON value that matches the schema."}]


def prompt_for(lm, schema: Any, max_prompt_tokens: int | None) -> tuple[list[int], bool]:
    """The prompt's token ids, the schema text cut (binary search on its length) until the
    prompt fits in ``max_prompt_tokens``; and whether it was cut."""
    ids = lm.prompt_ids(prompt_messages(schema))
    if max_prompt_tokens is None or len(ids) <= max_prompt_tokens:
        return ids, False
    lo, hi = 0, len(json.dumps(schema))
    best = lm.prompt_ids(prompt_messages(schema, schema_chars=0))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        cand = lm.prompt_ids(prompt_messages(schema, schema_chars=mid))
        if len(cand) <= max_prompt_tokens:
            lo, best = mid, cand
        else:
            hi = mid - 1
    return best, True


def first_json_value(text: str) -> tuple[bool, Any]:
    """The first JSON value in ``text`` (code fences and prose around it skipped)."""
    decoder = json.JSONDecoder()
    stripped = text.strip()
    try:
        return True, json.loads(stripped)
    except ValueError:
        pass
    for i, ch in enumerate(text):
        if ch in "{[":
            try:
                return True, decoder.raw_decode(text, i)[0]
            except ValueError:
                continue
    return False, None


class _Deadline:
    """``with _Deadline(seconds):`` raises TimeoutError after ``seconds`` (Unix main thread)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.armed = seconds > 0 and hasattr(signal, "setitimer")

    def _fire(self, *_):
        raise TimeoutError(f"compile took longer than {self.seconds:g} s")

    def __enter__(self):
        if self.armed:
            self.old = signal.signal(signal.SIGALRM, self._fire)
            signal.setitimer(signal.ITIMER_REAL, self.seconds)
        return self

    def __exit__(self, *exc):
        if self.armed:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self.old)
        return False


def _validator(schema):
    import jsonschema

    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator) \
        if isinstance(schema, dict) else jsonschema.Draft202012Validator
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def _is_valid(schema, value) -> bool:
    try:
        return not any(True for _ in _validator(schema).iter_errors(value))
    except Exception:          # a schema jsonschema itself cannot evaluate counts as not validated
        return False


def budget_for(matcher, max_tokens: int) -> int:
    """``max_tokens``, raised where the shortest output ``matcher`` accepts needs more (plus
    `BUDGET_SLACK`): a budget no valid output fits would measure the harness, not the
    engine or the model.  Also used by ``benchmarks/extraction_accuracy.py``."""
    shortest = matcher.completion_tokens()
    return max_tokens if shortest is None else max(max_tokens, len(shortest) + BUDGET_SLACK)


def token_budget(lm, schema: Any, max_tokens: int, compile_timeout: float) -> int:
    """The budget both modes get for ``schema`` (see `budget_for`; ``max_tokens`` if it
    does not compile)."""
    from constrained import Grammar, compile_grammar

    try:
        with _Deadline(compile_timeout):
            compiled = compile_grammar(Grammar.from_json_schema(schema, **SCHEMA_OPTIONS), lm.vocab)
            return budget_for(compiled.matcher(), max_tokens)
    except Exception:                    # noqa: BLE001 - recorded by the constrained run of the schema
        return max_tokens


def run_one(lm, record: dict, mode: str, *, max_tokens: int, compile_timeout: float, speculative=None,
            max_prompt_tokens: int | None = MAX_PROMPT_TOKENS) -> dict:
    """One schema in one mode (see the module docstring); returns its result record."""
    from constrained import Grammar, compile_grammar
    from constrained.decoding import decode_loop
    from constrained.errors import ConstrainedError
    from samplers import Greedy
    from samplers.constraint import Unconstrained

    schema = record["schema"]
    out: dict[str, Any] = {"id": record["id"], "split": record["split"], "mode": mode, "compiled": None,
                           "gct_s": None}
    constraint = Unconstrained(lm.logits_width)
    if mode == "unconstrained":
        max_tokens = token_budget(lm, schema, max_tokens, compile_timeout)
    else:
        t0 = time.perf_counter()
        try:
            with _Deadline(compile_timeout):
                compiled = compile_grammar(Grammar.from_json_schema(schema, **SCHEMA_OPTIONS), lm.vocab)
                constraint = compiled.matcher()
                constraint.mask()
        except TimeoutError as e:
            return {**out, "compiled": False, "outcome": "compile_timeout", "error": str(e)}
        except (ConstrainedError, RecursionError) as e:
            return {**out, "compiled": False, "outcome": "compile_error",
                    "error": f"{type(e).__name__}: {str(e)[:300]}"}
        except Exception:           # an engine bug: recorded (with its traceback), the run goes on
            import traceback

            return {**out, "compiled": False, "outcome": "crash", "error": traceback.format_exc()[-2000:]}
        out["gct_s"] = time.perf_counter() - t0
        out["compiled"] = True
        max_tokens = budget_for(constraint, max_tokens)
    prompt, cut = prompt_for(lm, schema, max_prompt_tokens)
    out.update(prompt_tokens=len(prompt), prompt_truncated=cut)
    t0 = time.perf_counter()
    session = lm.session(prompt)
    first: dict[str, float | None] = {"t": None}

    def choose(masked, generator, _greedy=Greedy()):  # noqa: B008 - one rule for the run
        if first["t"] is None:
            first["t"] = time.perf_counter()
        return _greedy.choose(masked, generator)

    if speculative is not None and mode == "constrained":
        from constrained.speculative import speculative_decode

        sample = speculative_decode(session, constraint, lm.eos_ids, drafter=speculative, max_tokens=max_tokens)
        first["t"] = first["t"] or t0
    else:
        sample = decode_loop(session, constraint, lm.eos_ids, choose, max_tokens=max_tokens,
                             jump_forward=mode == "constrained", finish_within_budget=mode == "constrained")
    total = time.perf_counter() - t0
    n = len(sample.tokens) + (sample.stop == "eos")
    ttft = (first["t"] - t0) if first["t"] is not None else total
    text = b"".join(lm.vocab.token_bytes[t] for t in sample.tokens).decode("utf-8", "replace")
    out.update(max_tokens=max_tokens, ttft_s=ttft, tpot_s=(total - ttft) / (n - 1) if n > 1 else None, tokens=n, stop=sample.stop,
               output=text[:OUTPUT_CHARS])
    if mode == "constrained":
        ok, value = (False, None) if sample.stop != "eos" else first_json_value(text)
        if sample.stop != "eos":
            out["outcome"] = "dead_end" if sample.stop == "dead_end" else "budget"
        else:
            out["outcome"] = "valid" if ok and _is_valid(schema, value) else "invalid"
    else:
        ok, value = first_json_value(text)
        out["outcome"] = "no_json" if not ok else ("valid" if _is_valid(schema, value) else "invalid")
    return out


# ------------------------------------------------------------------ running
_LM = None


def _worker_init(model: str) -> None:
    global _LM
    from constrained.models import LanguageModel

    _LM = LanguageModel.load(model)


def _worker_run(job) -> dict:
    record, mode, options = job
    speculative = None
    if options.get("speculative") and mode == "constrained":
        from constrained.speculative import drafter_from_spec

        speculative = drafter_from_spec(options["speculative"], _LM)
    return run_one(_LM, record, mode, max_tokens=options["max_tokens"], compile_timeout=options["compile_timeout"],
                   speculative=speculative, max_prompt_tokens=options.get("max_prompt_tokens", MAX_PROMPT_TOKENS))


def read_results(path: Path) -> dict[tuple[str, str], dict]:
    """Records already in ``path`` by (schema id, mode) (`results.read_records`: a torn
    last line is cut off)."""
    return {(str(rec["id"]), rec["mode"]): rec for rec in read_records(path)}


def round_robin_by_split(records: Sequence[dict]) -> list[dict]:
    """``records`` taking one schema of each split in turn (file order within a split), so
    that a run stopped early has covered every split."""
    by_split: dict[str, list[dict]] = {}
    for r in records:
        by_split.setdefault(r["split"], []).append(r)
    queues = list(by_split.values())
    return [q[i] for i in range(max(map(len, queues), default=0)) for q in queues if i < len(q)]


def run(records: Sequence[dict], results_path: Path, *, model: str, modes: Sequence[str], max_tokens: int,
        compile_timeout: float, workers: int = 1, speculative: str | None = None, progress: bool = True,
        max_prompt_tokens: int | None = MAX_PROMPT_TOKENS) -> None:
    """Run every (record, mode) not yet in ``results_path``, appending one line each."""
    from tqdm import tqdm

    done = read_results(results_path)
    jobs = [(r, m, {"max_tokens": max_tokens, "compile_timeout": compile_timeout, "speculative": speculative,
                    "max_prompt_tokens": max_prompt_tokens})
            for r in round_robin_by_split(records) for m in modes if (str(r["id"]), m) not in done]
    if not jobs:
        return
    results_path.parent.mkdir(parents=True, exist_ok=True)
    with open(results_path, "a", encoding="utf-8") as f, \
            tqdm(total=len(jobs), desc="jsonschemabench", unit="run", disable=not progress) as bar:
        def write(rec: dict) -> None:
            f.write(json.dumps(rec) + "\n")
            f.flush()
            bar.update(1)

        if workers <= 1:
            _worker_init(model)
            for job in jobs:
                write(_worker_run(job))
        else:
            import multiprocessing as mp

            from constrained.bench.datasets import pin_numeric_threads

            pin_numeric_threads()
            with mp.get_context("spawn").Pool(workers, initializer=_worker_init, initargs=(model,)) as pool:
                for rec in pool.imap_unordered(_worker_run, jobs):
                    write(rec)


# ------------------------------------------------------------------ reporting
def summarize(records: Sequence[dict]) -> dict:
    """Per split and overall, per mode: schemas, compiled, valid, coverage, compliance,
    outcome counts, GCT and TPOT percentiles."""
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for r in records:
        groups[(r["split"], r["mode"])].append(r)
        groups[("all", r["mode"])].append(r)
    out: dict = {}
    for (split, mode), rs in sorted(groups.items()):
        n = len(rs)
        compiled = sum(1 for r in rs if r.get("compiled") is not False)
        valid = sum(r["outcome"] == "valid" for r in rs)
        out.setdefault(split, {})[mode] = {
            "schemas": n, "compiled": compiled, "valid": valid, "coverage": valid / n if n else 0.0,
            "compliance": valid / compiled if compiled else 0.0,
            "outcomes": {o: sum(r["outcome"] == o for r in rs) for o in OUTCOMES},
            "gct_ms": {k: (v * 1e3 if v is not None else None) for k, v in percentiles(r.get("gct_s") for r in rs).items()},
            "tpot_ms": {k: (v * 1e3 if v is not None else None) for k, v in percentiles(r.get("tpot_s") for r in rs).items()},
            "ttft_ms": {k: (v * 1e3 if v is not None else None) for k, v in percentiles(r.get("ttft_s") for r in rs).items()},
            "mean_tokens": float(np.mean([r.get("tokens") or 0 for r in rs])) if rs else 0.0,
            "prompt_truncated": sum(bool(r.get("prompt_truncated")) for r in rs),
            "budgets": {str(b): sum(r.get("max_tokens") == b for r in rs)
                        for b in sorted({r["max_tokens"] for r in rs if r.get("max_tokens")})}}
    return out


def _f(x, digits: int = 1) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def markdown(summary: dict, meta: dict) -> str:
    modes = sorted({m for s in summary.values() for m in s})
    lines = [f"JSONSchemaBench, model {meta.get('model')}, max {meta.get('max_tokens')} tokens, "
             f"{meta.get('date', '')}", "",
             "| split | schemas | " + " | ".join(f"{m} coverage | {m} compliance" for m in modes) + " |",
             "|---|---:|" + "---:|---:|" * len(modes)]
    for split in sorted(summary, key=lambda s: (s == "all", s)):
        row = summary[split]
        n = max(v["schemas"] for v in row.values())
        cells = []
        for m in modes:
            v = row.get(m)
            cells += ["–", "–"] if v is None else [f"{100 * v['coverage']:.1f}% ({v['valid']}/{v['schemas']})",
                                                    f"{100 * v['compliance']:.1f}% ({v['valid']}/{v['compiled']})"]
        lines.append(f"| {split} | {n} | " + " | ".join(cells) + " |")
    lines += ["", "| mode | GCT p50 / p90 / p99 ms | TTFT p50 ms | TPOT p50 / p90 ms | mean tokens | outcomes |",
              "|---|---|---:|---|---:|---|"]
    for m in modes:
        v = summary["all"][m]
        outcomes = ", ".join(f"{k} {c}" for k, c in v["outcomes"].items() if c)
        lines.append(f"| {m} | {_f(v['gct_ms']['p50'])} / {_f(v['gct_ms']['p90'])} / {_f(v['gct_ms']['p99'])} | "
                     f"{_f(v['ttft_ms']['p50'], 0)} | {_f(v['tpot_ms']['p50'])} / {_f(v['tpot_ms']['p90'])} | "
                     f"{v['mean_tokens']:.1f} | {outcomes} |")
    v = next(iter(summary["all"].values()), None) if "all" in summary else None
    if v is not None:
        base = meta.get("max_tokens")
        raised = {int(b): c for b, c in v["budgets"].items() if base is not None and int(b) > base}
        lines += ["", f"Prompts cut to fit {meta.get('max_prompt_tokens')} tokens: {v['prompt_truncated']} of "
                      f"{v['schemas']} schemas.  Budgets raised above {base} tokens (the schema's shortest instance "
                      f"needs more): {sum(raised.values())} schemas" + (f", up to {max(raised)}" if raised else "")
                      + "."]
    return "\n".join(lines) + "\n"


def plots(records: Sequence[dict], summary: dict, out: Path) -> list[Path]:
    plt = pyplot()
    written = []
    splits = sorted(s for s in summary if s != "all")
    modes = sorted({m for s in summary.values() for m in s})
    fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(splits) + 2), 3.6))
    width = 0.8 / max(1, len(modes))
    for k, m in enumerate(modes):
        ax.bar([i + k * width for i in range(len(splits))],
               [100 * summary[s].get(m, {}).get("coverage", 0.0) for s in splits], width, label=m)
    ax.set_xticks([i + width * (len(modes) - 1) / 2 for i in range(len(splits))], splits, rotation=20)
    ax.set_ylabel("coverage: valid / schemas (%)")
    ax.set_ylim(0, 100)
    ax.legend()
    ax.set_title("JSONSchemaBench coverage per split")
    fig.tight_layout()
    written.append(save_figure(fig, out / f"{STEM}_coverage.png"))
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.4))
    gct = [r["gct_s"] * 1e3 for r in records if r.get("gct_s")]
    if gct:
        axes[0].hist(np.log10(gct), bins=30, color="#37a")
    axes[0].set_xlabel("log10 GCT (ms)")
    axes[0].set_title("grammar compile time")
    for m in modes:
        tp = [r["tpot_s"] * 1e3 for r in records if r["mode"] == m and r.get("tpot_s")]
        if tp:
            axes[1].hist(tp, bins=30, alpha=0.6, label=m)
    axes[1].set_xlabel("TPOT (ms)")
    axes[1].set_title("time per output token")
    axes[1].legend()
    fig.tight_layout()
    written.append(save_figure(fig, out / f"{STEM}_times.png"))
    return written


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="constrained bench jsonschemabench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, help="MaskBench .jsonl(.gz) or JSONSchemaBench .jsonl/.json file")
    ap.add_argument("--model", default="default", help="'default' (SmolLM2-135M-Instruct) or a local HF model dir")
    ap.add_argument("--split", action="append", default=None, help="only these splits (repeatable)")
    ap.add_argument("--limit", type=int, default=None, help="at most N schemas, spread evenly over the file")
    ap.add_argument("--unconstrained", action="store_true", help="also generate without the constraint")
    ap.add_argument("--speculative", default=None, metavar="DRAFTER", help="constrained runs decode speculatively")
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--max-prompt-tokens", type=int, default=MAX_PROMPT_TOKENS,
                    help="cut the schema in the prompt to fit (0: never)")
    ap.add_argument("--compile-timeout", type=float, default=60.0, help="seconds per schema compile (0: none)")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--out", default=str(DEFAULT_RESULTS))
    ap.add_argument("--fresh", action="store_true", help="discard earlier results in --out")
    ap.add_argument("--summarize-only", action="store_true")
    ap.add_argument("--engine", choices=["project", "vllm"], default="project",
                    help="vllm: the prompts through offline vLLM, once per --backend (constrained.bench.vllm_serving)")
    ap.add_argument("--backend", action="append", default=None,
                    help="with --engine vllm: constrained, constrained-lp, xgrammar, guidance, outlines "
                         "(repeatable; default all)")
    args = ap.parse_args(argv)

    records = read_schemas(args.data)
    if args.split:
        records = [r for r in records if r["split"] in set(args.split)]
        if not records:
            ap.error(f"no schemas in splits {args.split}")
    if args.limit and len(records) > args.limit:
        step = len(records) / args.limit
        records = [records[int(i * step)] for i in range(args.limit)]
    out = Path(args.out)
    if args.engine == "vllm":
        from constrained.bench.vllm_serving import BACKENDS, run_vllm

        for r in records:
            r.setdefault("_source", os.path.abspath(args.data))
        return run_vllm(records, backends=args.backend or list(BACKENDS), max_tokens=args.max_tokens,
                        model=args.model, out=out)
    out.mkdir(parents=True, exist_ok=True)
    results_path = out / f"{STEM}.jsonl"
    if args.fresh and not args.summarize_only:
        results_path.unlink(missing_ok=True)
    modes = ["constrained"] + (["unconstrained"] if args.unconstrained else [])
    if not args.summarize_only:
        run(records, results_path, model=args.model, modes=modes, max_tokens=args.max_tokens,
            compile_timeout=args.compile_timeout, workers=args.workers, speculative=args.speculative,
            progress=sys.stderr.isatty(), max_prompt_tokens=args.max_prompt_tokens or None)
    done = read_results(results_path)
    chosen = [done[(str(r["id"]), m)] for r in records for m in modes if (str(r["id"]), m) in done]
    meta = {"model": args.model, "max_tokens": args.max_tokens, "max_prompt_tokens": args.max_prompt_tokens, "data": os.path.abspath(args.data),
            "date": time.strftime("%Y-%m-%d"), "schemas": len(records), "speculative": args.speculative,
            "schema_options": SCHEMA_OPTIONS}
    summary = summarize(chosen)
    text = markdown(summary, meta)
    (out / f"{STEM}.md").write_text(text)
    (out / f"{STEM}.json").write_text(json.dumps({"meta": meta, "summary": summary}, indent=1))
    written = plots(chosen, summary, out) if chosen else []
    print(text)
    print("written: " + ", ".join(str(p) for p in [out / f"{STEM}.md", out / f"{STEM}.json", *written]),
          file=sys.stderr)
    return 0
