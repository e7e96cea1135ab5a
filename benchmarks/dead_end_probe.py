"""Dead-end probe: random masked walks over MaskBench schemas, then the engine's completion.

For each selected dev schema: compile it (`compile_json_schema`, then `compile_grammar`
with the Llama 3 vocabulary; a typed `ConstrainedError` counts as *not compiled*, one
past the compile limit as *compile timeout*), then per walk, from a fresh matcher:

* a random number of steps (3-40): a uniformly random allowed non-EOS token of
  ``m.mask()``; stop early where only EOS is allowed, or where the matcher accepts and
  a coin says stop;
* ask the engine to finish: ``m.shortest_completion()``; feed its tokens
  (``m.completion_tokens``); the matcher must then accept and allow EOS;
* validate the text with `jsonschema`'s validator of the schema's draft (the library's
  format checker; duplicate keys count as invalid).

Outcomes per walk: ``valid``; ``invalid`` (the engine finished with text the schema
refuses: a soundness bug); ``dead_end`` (no completion: the mask let the walk into a
prefix the engine cannot finish; recorded with the schema's value-checked keywords,
`SchemaCompilation.checked`, and the keyword that explains it: the one the bounded
search gave up on, `shortest_completion(strict=True)` raising `CompletionSearchError`,
or, where no completion exists, the one that refuses the grammar's own completion); ``error`` (an exception, a mask-allowed token the matcher
refuses, a completion the matcher refuses); ``timeout`` (the walk ran past its limit:
the schema's remaining walks are skipped).  A final text the reference validator
itself cannot evaluate (it raises) is ``validator_error``, not held against the engine.

Seeded per (seed, schema index): the same options give the same walks in any order or
number of workers.

    python benchmarks/dead_end_probe.py --schemas 300 --walks 3 --seed 0 --workers 2
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
import traceback
from collections import Counter, defaultdict
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import _common
import numpy as np
from _common import DEFAULT_DATA, DEFAULT_VOCAB, RESULTS_DIR, load_vocabulary

MIN_STEPS, MAX_STEPS = 3, 40
STOP_COIN = 0.5          # chance to stop at an accepting state
OUTCOMES = ("valid", "invalid", "dead_end", "error", "timeout", "validator_error")


class _Timeout(BaseException):
    """Raised by the alarm (a BaseException: library code catching Exception lets it through)."""


def _on_alarm(signum, frame):  # pragma: no cover - timing dependent
    raise _Timeout()


class _alarm:
    """Wall-clock limit on the block (SIGALRM; main thread only, else no limit).
    An outer timer (pytest-timeout's) is kept: if it fires first this one is not armed,
    else it is re-armed with its remaining time on exit."""

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self.armed = False
        self.outer = 0.0

    def __enter__(self):
        import threading

        if self.seconds and threading.current_thread() is threading.main_thread() and hasattr(signal, "SIGALRM"):
            outer, _ = signal.getitimer(signal.ITIMER_REAL)
            if outer and outer <= self.seconds:
                return self
            self.outer, self.t0 = outer, time.monotonic()
            self.old = signal.signal(signal.SIGALRM, _on_alarm)
            signal.setitimer(signal.ITIMER_REAL, self.seconds)
            self.armed = True
        return self

    def __exit__(self, *exc):
        if self.armed:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self.old)
            if self.outer:
                signal.setitimer(signal.ITIMER_REAL, max(0.001, self.outer - (time.monotonic() - self.t0)))
        return False


# ---------------------------------------------------------------------- selection

def select_indices(records: list[dict], n: int) -> list[int]:
    """``n`` record indices spread over every split (quota proportional to its size,
    at least one per split while ``n`` allows) and evenly over each split's records."""
    by_split: dict[str, list[int]] = defaultdict(list)
    for i, r in enumerate(records):
        by_split[str(r.get("split", "all"))].append(i)
    n = min(n, len(records))
    splits = sorted(by_split)
    total = len(records)
    exact = {s: n * len(by_split[s]) / total for s in splits}
    quota = {s: min(len(by_split[s]), int(exact[s])) for s in splits}
    if n >= len(splits):
        for s in splits:
            quota[s] = max(quota[s], 1)
    # largest remainders first, then trim the largest quotas if the minimum overshot
    for s in sorted(splits, key=lambda s: exact[s] - int(exact[s]), reverse=True):
        if sum(quota.values()) >= n:
            break
        if quota[s] < len(by_split[s]):
            quota[s] += 1
    while sum(quota.values()) < n:     # small splits full: fill from the largest
        s = max((s for s in splits if quota[s] < len(by_split[s])), key=lambda s: len(by_split[s]) - quota[s])
        quota[s] += 1
    while sum(quota.values()) > n:
        s = max(splits, key=lambda s: quota[s])
        quota[s] -= 1
    out = []
    for s in splits:
        idx = by_split[s]
        k = quota[s]
        if k:
            out += [idx[j] for j in np.linspace(0, len(idx) - 1, k).round().astype(int)]
    return sorted(set(out))


# ---------------------------------------------------------------------- one walk

def _no_duplicates(pairs):
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise ValueError("duplicate key")
    return dict(pairs)


def _validate(schema, text: bytes) -> tuple[str, str | None]:
    """('valid' | 'invalid' | 'validator_error', why)."""
    from constrained.json_schema.dialect import dialect_of
    from constrained.json_schema.validation import format_checker

    try:
        value = json.loads(text.decode("utf-8"), object_pairs_hook=_no_duplicates)
    except (UnicodeDecodeError, ValueError) as e:
        return "invalid", f"not JSON: {e}"
    try:
        validator = dialect_of(schema).validator_class(schema, format_checker=format_checker())
        errors = list(validator.iter_errors(value))
    except RecursionError as e:
        return "validator_error", f"RecursionError: {e}"
    except Exception as e:  # noqa: BLE001  (the reference validator cannot evaluate it)
        return "validator_error", f"{type(e).__name__}: {str(e)[:300]}"
    if errors:
        e = errors[0]
        return "invalid", (f"{e.message[:300]} at {'/'.join(map(str, e.absolute_path))} "
                           f"(schema {'/'.join(map(str, e.absolute_schema_path))})")
    return "valid", None


def walk(compiled, schema, rng: np.random.Generator) -> dict:
    """One random masked walk and the engine's completion (see the module docstring)."""
    from constrained.masks import unpack_mask

    vocab = compiled.vocab
    size = len(vocab.token_bytes)
    eos = np.array(sorted(compiled.eos_ids), dtype=np.int64)
    m = compiled.matcher()
    steps = int(rng.integers(MIN_STEPS, MAX_STEPS + 1))
    tokens: list[int] = []
    rec: dict = {"steps": steps}

    def text_of(ts) -> bytes:
        return b"".join(vocab.token_bytes[t] for t in ts)

    stop = "steps"
    for _ in range(steps):
        allowed = unpack_mask(m.mask(), size)
        eos_ok = bool(allowed[eos].any())
        allowed[eos] = False
        ids = np.flatnonzero(allowed)
        if ids.size == 0:
            stop = "only EOS" if eos_ok else "empty mask"
            break
        if eos_ok and rng.random() < STOP_COIN:
            stop = "coin"
            break
        t = int(ids[rng.integers(ids.size)])
        if not m.advance(t):
            rec.update(outcome="error", phase="advance", tokens=tokens + [t],
                       prefix=text_of(tokens).decode("utf-8", "replace"),
                       detail=f"the mask allows token {t} ({vocab.token_bytes[t]!r}) but advance refuses it")
            return rec
        tokens.append(t)
    prefix = text_of(tokens)
    rec.update(stop=stop, tokens=tokens, prefix=prefix.decode("utf-8", "replace"))
    from constrained.engine.checked import CheckedMatcher
    from constrained.engine.completion import CompletionSearchError

    t0 = time.perf_counter()
    try:
        completion = m.shortest_completion(strict=True) if isinstance(m, CheckedMatcher) else m.shortest_completion()
    except CompletionSearchError as e:   # the search gave up, naming the check it could not satisfy
        completion = None
        rec["gave_up"] = {"keyword": e.keyword, "pointer": e.pointer}
    rec["completion_s"] = round(time.perf_counter() - t0, 4)
    if completion is None:
        rec.update(outcome="dead_end", _matcher=m)
        if "gave_up" not in rec:
            rec["refused"] = refused_keyword(m)
        return rec
    rec["completion"] = completion.decode("utf-8", "replace")
    finish = m.completion_tokens(completion) if hasattr(m, "completion_tokens") else None
    if finish is None:
        if not compiled.accepts_bytes(prefix + completion):
            rec.update(outcome="error", phase="complete",
                       detail="the grammar refuses prefix + shortest_completion (no tokens spell it)")
            return rec
        text = prefix + completion
        rec["fed"] = "bytes"
    else:
        if m.advance_many(finish) != len(finish) or not m.is_accepting() \
                or not all(m.allows(int(e)) for e in eos[:1]):
            rec.update(outcome="error", phase="complete", completion_tokens=finish,
                       detail="the matcher refuses the completion's tokens or EOS after them")
            return rec
        tokens = tokens + finish
        text = text_of(tokens)
        rec["fed"] = "tokens"
    rec["text"] = text.decode("utf-8", "replace")
    outcome, why = _validate(schema, text)
    rec["outcome"] = outcome
    if why:
        rec["detail"] = why
    return rec


def refused_keyword(m) -> dict | None:
    """The check that refuses the grammar's own shortest completion of ``m`` (keyword and
    schema pointer, `JsonValueChecks.failure`); None where the grammar itself has none."""
    from constrained.engine import completion as C

    rec, history, checks = getattr(m, "_rec", None), getattr(m, "_history", None), getattr(m, "_checks", None)
    if rec is None or history is None or checks is None or not hasattr(checks, "failure"):
        return None
    first = C.shortest_completion(rec, history[-1])
    if first is None:
        return None
    f = checks.failure(m._cstates[-1], bytes(m._text), first)
    return None if f is None else {"keyword": f.keyword, "pointer": f.pointer}


def dead_end_keyword(d: dict) -> str | None:
    """The keyword a dead end is explained by: the one the search gave up on, else the one
    that refuses the grammar's completion where no completion exists."""
    why = d.get("gave_up") or d.get("refused") or {}
    return why.get("keyword")


def diagnose_dead_end(m, budget_factor: int = 10) -> dict:
    """Why ``m`` (a matcher with no shortest completion) has none: the grammar's own
    shortest completion (which a value check then refused, or None: the grammar itself
    is stuck) and whether the checked search finds one with ``budget_factor`` times its
    expansions (then the dead end is the search's budget, not the prefix).  Reads the
    matcher's internals; {} where they are not there."""
    from constrained.engine import completion as C

    rec, history = getattr(m, "_rec", None), getattr(m, "_history", None)
    if rec is None or history is None:
        return {}
    out: dict = {}
    grammar_only = C.shortest_completion(rec, history[-1])
    out["grammar_completion"] = None if grammar_only is None else grammar_only.decode("utf-8", "replace")
    checks = getattr(m, "_checks", None)
    if grammar_only is None:
        # the grammar's shortest completion may only be past `MAX_COMPLETION_BYTES`: ask
        # separate tables (the matcher's memo keeps its answer) without that cap
        cap = C.MAX_COMPLETION_BYTES
        try:
            C.MAX_COMPLETION_BYTES = 10 ** 7
            with _alarm(10.0):
                long = C._CompletionTables(rec).state_completion(history[-1])
        except _Timeout:
            long = None
        finally:
            C.MAX_COMPLETION_BYTES = cap
        if long is not None:
            out["cause"] = f"completion past MAX_COMPLETION_BYTES ({len(long)} > {cap} bytes)"
        else:
            out["cause"] = "grammar has no completion"
        return out
    if checks is None:
        out["cause"] = "no completion, no checks (?)"
        return out
    from constrained.engine.checked import witnesses_of

    budget = C.MAX_CHECKED_EXPANSIONS * budget_factor
    t0 = time.perf_counter()
    try:
        with _alarm(10.0):
            found = C.checked_completion(rec, history[-1], checks, m._cstates[-1], bytes(m._text),
                                         witnesses=witnesses_of(checks), max_expansions=budget)
    except _Timeout:
        out.update(cause="unknown (larger search timed out)", larger_search_s=10.0)
        return out
    out["larger_search_s"] = round(time.perf_counter() - t0, 2)
    if found is not None:
        out.update(cause=f"search budget (found with {budget} expansions)",
                   larger_completion=found.decode("utf-8", "replace"))
    else:
        out["cause"] = f"checks refuse the grammar's completion; none found with {budget} expansions"
    return out


# ---------------------------------------------------------------------- one schema

def probe_schema(index: int, record: dict, vocab, *, walks: int, seed: int, walk_timeout: float | None = 20.0,
                 compile_timeout: float = 20.0, diagnose: bool = True) -> dict:
    """Compile schema ``index`` and run ``walks`` walks (reproducible from (seed, index));
    ``diagnose``: explain each dead end (`diagnose_dead_end`)."""
    from constrained import compile_grammar
    from constrained.errors import CompileTimeoutError, ConstrainedError
    from constrained.json_schema.compiler import compile_json_schema

    schema = record["schema"]
    out: dict = {"index": index, "id": record.get("id"), "split": record.get("split"), "walks": []}
    t0 = time.perf_counter()
    try:
        # the library's own limits, plus a hard backstop should a compile loop not check them
        with _alarm(compile_timeout * 2 + 5):
            sc = compile_json_schema(schema, timeout=compile_timeout)
            left = max(0.1, compile_timeout - (time.perf_counter() - t0))
            compiled = compile_grammar(sc.grammar, vocab, cache_dir=None, timeout=left)
    except CompileTimeoutError as e:
        out.update(status="compile_timeout", detail=str(e)[:300])
        return out
    except _Timeout:
        out.update(status="compile_timeout", detail="hard backstop alarm")
        return out
    except ConstrainedError as e:
        out.update(status="not_compiled", detail=f"{type(e).__name__}: {str(e)[:300]}")
        return out
    except Exception as e:  # noqa: BLE001  (an untyped compile error: a bug to report)
        out.update(status="compile_error", detail=f"{type(e).__name__}: {e}"[:500],
                   traceback=traceback.format_exc()[-2000:])
        return out
    out["compile_s"] = round(time.perf_counter() - t0, 3)
    if out["compile_s"] > compile_timeout:
        out.update(status="compile_timeout", detail=f"compiled in {out['compile_s']} s")
        return out
    out["status"] = "compiled"
    out["checked"] = [list(c) for c in sc.checked]
    rng = np.random.default_rng([seed, index])
    for w in range(walks):
        t1 = time.perf_counter()
        try:
            with _alarm(walk_timeout):
                rec = walk(compiled, schema, rng)
        except _Timeout:
            out["walks"].append({"walk": w, "outcome": "timeout", "seconds": round(time.perf_counter() - t1, 2)})
            break          # shared caches may be mid-update: leave this schema
        except Exception as e:  # noqa: BLE001
            rec = {"outcome": "error", "phase": "exception", "detail": f"{type(e).__name__}: {e}"[:500],
                   "traceback": traceback.format_exc()[-2000:]}
        rec["walk"] = w
        rec["seconds"] = round(time.perf_counter() - t1, 3)
        if rec["outcome"] == "dead_end" and diagnose:
            if "fresh_completion" not in out:
                try:
                    with _alarm(walk_timeout):
                        fresh = compiled.matcher().shortest_completion()  # None where the search gives up
                    out["fresh_completion"] = None if fresh is None else fresh.decode("utf-8", "replace")
                except _Timeout:
                    out["fresh_completion"] = "(timed out)"
            m = rec.pop("_matcher")
            try:
                rec["diagnosis"] = diagnose_dead_end(m)
            except Exception as e:  # noqa: BLE001
                rec["diagnosis"] = {"cause": f"diagnosis failed: {type(e).__name__}: {e}"[:300]}
        rec.pop("_matcher", None)
        out["walks"].append(rec)
    return out


# ---------------------------------------------------------------------- summary

def _cause_class(cause: str | None) -> str:
    if not cause:
        return "not diagnosed"
    return cause.split(" (")[0].split(";")[0]


def summarize(results: list[dict]) -> dict:
    status = Counter(r["status"] for r in results)
    outcomes = Counter(w["outcome"] for r in results for w in r["walks"])
    walks = sum(outcomes.values())
    by_keyword: Counter = Counter()
    dead_schemas_by_keyword: dict[str, set] = defaultdict(set)
    detail = {k: [] for k in ("invalid", "dead_end", "error", "timeout", "validator_error")}
    for r in results:
        for w in r["walks"]:
            if w["outcome"] not in detail:
                continue
            item = {"index": r["index"], "id": r["id"], "split": r["split"], "walk": w["walk"],
                    "checked": r.get("checked", [])}
            item.update({k: w[k] for k in ("phase", "detail", "prefix", "completion", "text", "tokens", "stop",
                                            "diagnosis", "gave_up", "refused") if k in w})
            if w["outcome"] == "dead_end":
                item["fresh_completion"] = r.get("fresh_completion")
            detail[w["outcome"]].append(item)
            if w["outcome"] == "dead_end":
                kws = sorted({kw for _, kw in r.get("checked", [])}) or ["(no value checks)"]
                by_keyword[" + ".join(kws)] += 1
                for kw in kws:
                    dead_schemas_by_keyword[kw].add(r["index"])
    by_cause = Counter(_cause_class(d.get("diagnosis", {}).get("cause")) for d in detail["dead_end"])
    by_refused = Counter((f"search gave up on {dead_end_keyword(d)}" if "gave_up" in d
                          else f"no completion; the grammar's is refused by {dead_end_keyword(d)}")
                         for d in detail["dead_end"])
    checked_schemas = sum(1 for r in results if r.get("checked"))
    return {
        "schemas": len(results), "compiled": status.get("compiled", 0),
        "compiled_with_value_checks": checked_schemas,
        "not_compiled": status.get("not_compiled", 0), "compile_timeout": status.get("compile_timeout", 0),
        "compile_error": status.get("compile_error", 0),
        "walks": walks, **{o: outcomes.get(o, 0) for o in OUTCOMES},
        "dead_end_pct": round(100 * outcomes.get("dead_end", 0) / walks, 2) if walks else 0.0,
        "dead_ends_by_checked_keywords": dict(by_keyword.most_common()),
        "dead_ends_by_cause": dict(by_cause.most_common()),
        "dead_ends_by_refused_keyword": dict(by_refused.most_common()),
        "dead_end_schemas_by_keyword": {k: sorted(v) for k, v in sorted(dead_schemas_by_keyword.items())},
        "compile_errors": [{"index": r["index"], "id": r["id"], "detail": r.get("detail")}
                           for r in results if r["status"] == "compile_error"],
        "details": detail,
    }


def markdown(summary: dict, meta: dict) -> str:
    s = summary
    lines = [
        "# Dead-end probe: random masked walks, then the engine's completion",
        "",
        (f"MaskBench dev, {s['schemas']} schemas "
         + (f"(indices {meta['indices']})" if meta.get("indices") else "spread over every split")
         + f", {meta['walks_per_schema']} walks each, "
         f"seed {meta['seed']}, Llama 3 vocabulary; walk limit {meta['walk_timeout']} s, compile limit "
         f"{meta['compile_timeout']} s; {meta['seconds']:.0f} s on {meta['workers']} worker(s).  "
         "`python benchmarks/dead_end_probe.py "
         + (f"--indices {meta['indices']}" if meta.get("indices") else f"--schemas {s['schemas']}")
         + f" --walks {meta['walks_per_schema']} --seed {meta['seed']}`."),
        "",
        (f"Schemas: {s['compiled']} compiled ({s['compiled_with_value_checks']} with value checks), "
         f"{s['not_compiled']} not compiled (typed error), {s['compile_timeout']} past the compile limit, "
         f"{s['compile_error']} untyped compile errors."),
        "",
        "| walks | valid | invalid | dead ends | dead ends % | errors | timeouts | validator errors |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
        (f"| {s['walks']} | {s['valid']} | {s['invalid']} | {s['dead_end']} | {s['dead_end_pct']:.2f} | "
         f"{s['error']} | {s['timeout']} | {s['validator_error']} |"),
        "",
    ]
    if s["dead_ends_by_checked_keywords"]:
        lines += ["## Dead ends by the schema's value-checked keywords", "",
                  "| checked keywords | dead ends | schemas (index) |", "|---|---:|---|"]
        per: dict[str, set] = defaultdict(set)
        for d in s["details"]["dead_end"]:
            kws = " + ".join(sorted({kw for _, kw in d["checked"]})) or "(no value checks)"
            per[kws].add(d["index"])
        for kws, n in s["dead_ends_by_checked_keywords"].items():
            lines.append(f"| {kws} | {n} | {', '.join(map(str, sorted(per[kws])))} |")
        lines.append("")
        lines += ["| cause of the dead end | dead ends |", "|---|---:|"]
        lines += [f"| {c} | {n} |" for c, n in s["dead_ends_by_cause"].items()]
        lines.append("")
        lines += ["| the engine's answer (`shortest_completion(strict=True)`) | dead ends |", "|---|---:|"]
        lines += [f"| {c} | {n} |" for c, n in s.get("dead_ends_by_refused_keyword", {}).items()]
        lines.append("")

    def esc(x: str, n: int = 160) -> str:
        x = x if len(x) <= n else x[:n] + "…"
        return x.replace("|", "\\|").replace("\n", "\\n").replace("`", "'")

    for kind, title in (("dead_end", "Dead ends"), ("invalid", "INVALID outputs"), ("error", "Errors"),
                        ("timeout", "Timeouts"), ("validator_error", "Validator errors")):
        items = s["details"][kind]
        if not items:
            continue
        lines += [f"## {title}", "", "| schema | split | walk | checked (pointer keyword) | "
                  + ("cause | grammar's completion | prefix |" if kind == "dead_end" else "detail / text |"),
                  "|---:|---|---:|---|" + ("---|---|---|" if kind == "dead_end" else "---|")]
        for d in items:
            checked = ", ".join(f"{p or '#'} {kw}" for p, kw in d["checked"][:6]) + \
                      (" …" if len(d["checked"]) > 6 else "")
            if kind == "dead_end":
                diag = d.get("diagnosis", {})
                cause = diag.get("cause", "") + ("; a fresh matcher has none either"
                                                 if d.get("fresh_completion") is None else "")
                if "gave_up" in d:
                    cause = f"gave up on {d['gave_up']['keyword']} at {d['gave_up']['pointer']}; " + cause
                elif d.get("refused"):
                    cause = f"refused by {d['refused']['keyword']} at {d['refused']['pointer']}; " + cause
                prefix = json.dumps(d.get("prefix", ""), ensure_ascii=False)
                prefix = prefix if len(prefix) <= 200 else prefix[:80] + " … " + prefix[-100:]
                lines.append(f"| {d['index']} | {d['split']} | {d['walk']} | {esc(checked, 200)} | "
                             f"{esc(cause)} | `{esc(str(diag.get('grammar_completion')), 60)}` | "
                             f"`{esc(prefix, 240)}` |")
                continue
            body = f"{d.get('phase', '')} {d.get('detail', '')} — text " \
                   f"{json.dumps(d.get('text', d.get('prefix', '')), ensure_ascii=False)}"
            lines.append(f"| {d['index']} | {d['split']} | {d['walk']} | {esc(checked, 200)} | "
                         f"`{esc(body, 400)}` |")
        lines.append("")
    if s["compile_errors"]:
        lines += ["## Untyped compile errors", ""] + [f"- {c['index']}: {c['detail']}" for c in s["compile_errors"]]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------- driver

_WORKER: dict = {}


def _init_worker(vocab_path: str, options: dict) -> None:
    _common.pin_numeric_threads()
    _WORKER["vocab"] = load_vocabulary(vocab_path)
    _WORKER["options"] = options


def _run_one(job: tuple[int, dict]) -> dict:
    index, record = job
    return probe_schema(index, record, _WORKER["vocab"], **_WORKER["options"])


def run(records: list[dict], indices: list[int], vocab_path: str, *, walks: int, seed: int, workers: int,
        walk_timeout: float, compile_timeout: float, progress: bool = True) -> list[dict]:
    from tqdm import tqdm

    options = {"walks": walks, "seed": seed, "walk_timeout": walk_timeout, "compile_timeout": compile_timeout}
    jobs = [(i, records[i]) for i in indices]
    bar = tqdm(total=len(jobs), disable=not progress, desc="schemas", unit="schema")
    results = []
    if workers <= 1:
        _init_worker(vocab_path, options)
        for job in jobs:
            results.append(_run_one(job))
            bar.update()
    else:
        with ProcessPoolExecutor(workers, initializer=_init_worker, initargs=(vocab_path, options)) as pool:
            for r in pool.map(_run_one, jobs, chunksize=1):
                results.append(r)
                bar.update()
    bar.close()
    return sorted(results, key=lambda r: r["index"])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default=str(DEFAULT_DATA))
    p.add_argument("--vocab", default=str(DEFAULT_VOCAB), help="HF tokenizer directory or TokenVocabulary .npz")
    p.add_argument("--schemas", type=int, default=300, help="schemas, spread over the file and every split")
    p.add_argument("--indices", default=None,
                   help="comma-separated record indices (0-based) to probe instead of --schemas")
    p.add_argument("--walks", type=int, default=3, help="walks per schema")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--walk-timeout", type=float, default=20.0)
    p.add_argument("--compile-timeout", type=float, default=20.0)
    p.add_argument("--out", default=str(Path(RESULTS_DIR) / "dead_end_probe"),
                   help="output path without suffix (.json and .md are written)")
    a = p.parse_args(argv)
    from constrained.bench.datasets import read_schemas

    records = read_schemas(a.data)
    indices = [int(i) for i in a.indices.split(",") if i.strip()] if a.indices else select_indices(records, a.schemas)
    t0 = time.perf_counter()
    results = run(records, indices, a.vocab, walks=a.walks, seed=a.seed, workers=a.workers,
                  walk_timeout=a.walk_timeout, compile_timeout=a.compile_timeout)
    meta = {"data": os.path.relpath(a.data, _common.REPO.parent) if os.path.isabs(a.data) else a.data,
            "schemas": len(indices), "indices": a.indices, "walks_per_schema": a.walks, "seed": a.seed,
            "workers": a.workers,
            "walk_timeout": a.walk_timeout, "compile_timeout": a.compile_timeout,
            "seconds": round(time.perf_counter() - t0, 1), "python": sys.version.split()[0]}
    summary = summarize(results)
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps({"meta": meta, "summary": summary, "schemas": results},
                                                   indent=1, ensure_ascii=False) + "\n", encoding="utf-8",
                                         errors="backslashreplace")     # a lone surrogate from a "\\ud800" value
    out.with_suffix(".md").write_text(markdown(summary, meta), encoding="utf-8", errors="backslashreplace")
    keys = ("walks", "valid", "invalid", "dead_end", "dead_end_pct", "error", "timeout", "validator_error",
            "compiled", "not_compiled", "compile_timeout", "compile_error")
    print(json.dumps({k: summary[k] for k in keys}))
    print(f"wrote {out.with_suffix('.json')} and {out.with_suffix('.md')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
