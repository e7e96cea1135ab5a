"""Serving benchmark: N concurrent requests with fresh JSON Schemas, one batched mask per step.

The scenario of a server with structured output on: N requests arrive together,
each with its own schema (drawn from MaskBench ``../shared/data/maskbench/dev.jsonl.gz``
with seed ``--seed``; no schema twice in a run), each compiled fresh; then every
decoding step fills the masks of all live requests into one int32 array and commits
each request's next token.  A request's tokens are its first valid instance,
``json.dumps``-ed and tokenized canonically (the tokenizer's own encoding, as in
MaskBench); after them comes EOS, and the request leaves the batch.

Engines, in the same run on the same requests and tokens:

* **ours**: ``Grammar.from_json_schema(schema, property_order=...)`` + ``compile_grammar(grammar,
  vocab, cache_dir=None)`` (no disk cache) + ``matcher()``; per step
  ``constrained.fill_masks(live, out, rows=slots)`` then ``m.advance(token)`` each;
* **llguidance** (optional: skipped when it is not installed):
  ``LLMatcher(LLTokenizer(tokenizer.json, eos_token=<our EOS ids>),
  LLMatcher.grammar_from_json_schema(schema))`` (default options: flexible
  whitespace, so ``json.dumps`` spacing is allowed); per step
  ``llguidance.numpy.fill_next_token_bitmask_par`` on a one-thread ``LLExecutor``
  then ``consume_token`` each.

Property order: by default (``--property-order schema``) ours reads members in the
order the schema declares them, as llguidance does (it refuses other orders) and as
the engine's defaults and the vLLM integration do: both engines then enforce the same
language.  ``--property-order any`` runs ours with MaskBench's option instead (members
in any order: a superset grammar whose required members and unique keys are value
checks -- more work per token than llguidance does for the same requests).

Only requests both engines accept are used: every drawn schema is first screened
in a throw-away process (both engines compile it and accept its instance, within
``--screen-timeout``); the skipped ones are counted by reason in the report.

Isolation: the vocabulary (and llguidance's tokenizer) is loaded once and, unless
``--no-warmup``, our engine does what a server does at start, `constrained.warm_up`
(the vocabulary's trie and compiled walk, the value checks' token classes, the
built-in format automata: nothing of the requests), and compiles MaskBench's two
warm-up schemas (generic JSON, a flat object), and llguidance builds matchers for
them, as a server that is up would have; then every (batch size, batch, engine) runs in its own forked
process, so no run sees another's in-memory caches (the harness's own objects, the
MaskBench records dropped, are frozen out of the garbage collector first:
``gc.freeze()``; after the warm-up the start-up heap is frozen too (imports, the
warm-up's caches), as vLLM's engine core does once it is up (``freeze_gc_heap``), so
collections during a run scan what the requests made; ``--no-freeze-startup`` leaves
the start-up heap to them).  Peak memory = the peak RSS
of that process (reset at its start) minus its RSS at the start: compiled
grammars, matchers, caches built during the run and the mask array.

Reported per batch size (batches pooled): compile-all time (all requests of a
batch, sequentially; mean over batches), step time p50/p99 (one step = fill +
commit for every live request), mean time per request-token (sum of step times /
tokens committed, EOS included), the first step (every request's first mask, all
live), peak memory, and the ratios ours/llguidance; for ours also the split of
step time into mask fill, commit and garbage collection (and GC's share of compile).
One core: numeric libraries and llguidance run one thread each.

    python benchmarks/serving_batch.py --batch-sizes 1,16,64,256 --batches 2 [--seed 0] [--out benchmarks/results]

Writes ``<out>/serving_batch.{json,md,png}``.
"""

from __future__ import annotations

import argparse
import gc
import json
import multiprocessing as mp
import os
import platform
import random
import re
import signal
import time
import traceback
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import _common  # noqa: F401  (before numpy: pins numeric libraries to one thread)
import numpy as np
from _common import (
    DEFAULT_DATA,
    DEFAULT_VOCAB,
    RESULTS_DIR,
    load_vocabulary,
    read_maskbench,
    summarize,
)

from constrained.bench.maskbench import SCHEMA_OPTIONS, WARMUP, _git_state, _prepare

STEM = "serving_batch"
ENGINES = ("ours", "llguidance")


# =============================================================================== engines

def llguidance_available() -> bool:
    try:
        import llguidance
        import llguidance.numpy  # noqa: F401
    except ImportError:
        return False
    return True


class OurEngine:
    """`compile_grammar` per request; `fill_masks` + `advance` per step."""

    name = "ours"

    def __init__(self, vocab, property_order: str = "schema") -> None:
        from constrained import fill_masks

        self.vocab = vocab
        self.options = {**SCHEMA_OPTIONS, "property_order": property_order}
        self.words = (len(vocab) + 31) // 32
        self._fill = fill_masks

    def compile(self, schema: Any):
        from constrained import Grammar, compile_grammar

        grammar = Grammar.from_json_schema(schema, **self.options)
        return compile_grammar(grammar, self.vocab, cache_dir=None).matcher()

    def fill(self, matchers: list, rows: list[int], out: np.ndarray) -> None:
        self._fill(matchers, out, rows)

    @staticmethod
    def commit(matchers: list, tokens: list[int]) -> list[bool]:
        return [m.advance(t) for m, t in zip(matchers, tokens)]

    @staticmethod
    def copy(matcher):
        """A second matcher at the same (start) state, sharing the compiled grammar."""
        return matcher.fork()

    @staticmethod
    def accepts(matcher, tokens: Sequence[int], eos: int) -> bool:
        return matcher.advance_many(tokens) == len(tokens) and matcher.advance(eos)


class LLGuidanceEngine:
    """`LLMatcher` per request; `fill_next_token_bitmask_par` (one thread) + `consume_token`."""

    name = "llguidance"

    def __init__(self, tokenizer_dir: str | os.PathLike[str], eos_ids: Sequence[int]) -> None:
        import llguidance

        self.tokenizer = llguidance.LLTokenizer(str(Path(tokenizer_dir) / "tokenizer.json"),
                                                eos_token=[int(t) for t in eos_ids])
        self.words = (self.tokenizer.vocab_size + 31) // 32
        self._executor = None

    def compile(self, schema: Any):
        import llguidance

        m = llguidance.LLMatcher(self.tokenizer, llguidance.LLMatcher.grammar_from_json_schema(schema), log_level=0)
        if m.is_error():
            raise ValueError(m.get_error())
        return m

    @staticmethod
    def copy(matcher):
        """A second matcher at the same (start) state, sharing the compiled grammar."""
        return matcher.deep_copy()

    def fill(self, matchers: list, rows: list[int], out: np.ndarray) -> None:
        from llguidance.numpy import fill_next_token_bitmask_par

        if self._executor is None:   # made in the process that uses it (its threads do not survive a fork)
            import llguidance

            self._executor = llguidance.LLExecutor(num_threads=1)
        fill_next_token_bitmask_par(self._executor, list(zip(matchers, rows)), out)

    @staticmethod
    def commit(matchers: list, tokens: list[int]) -> list[bool]:
        return [m.consume_token(t) for m, t in zip(matchers, tokens)]

    @staticmethod
    def accepts(matcher, tokens: Sequence[int], eos: int) -> bool:
        return matcher.consume_tokens(list(tokens)) and matcher.is_accepting() and matcher.consume_token(eos)


# =============================================================================== processes

def _child(conn, fn: Callable, args: tuple) -> None:
    try:
        conn.send(("ok", fn(*args)))
    except BaseException as e:  # noqa: BLE001 - reported to the parent
        conn.send(("error", f"{type(e).__name__}: {e}\n{traceback.format_exc()}"))
    finally:
        conn.close()


def in_fork(fn: Callable, *args: Any, isolate: bool = True) -> Any:
    """``fn(*args)`` in a forked child (fresh copy of this process: later runs do not
    see its caches), or here when ``isolate`` is False."""
    if not isolate:
        return fn(*args)
    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(child, fn, args), daemon=True)
    proc.start()
    child.close()
    try:
        status, value = parent.recv()
    except EOFError:
        proc.join()
        raise RuntimeError(f"benchmark child died (exit code {proc.exitcode})") from None
    finally:
        proc.join(30)
        parent.close()
    if status != "ok":
        raise RuntimeError(f"benchmark child failed: {value}")
    return value


def _status_kib(field: str) -> int | None:
    try:
        m = re.search(rf"^{field}:\s+(\d+) kB", Path("/proc/self/status").read_text(), re.MULTILINE)
    except OSError:
        return None
    return int(m.group(1)) if m else None


def _reset_peak_rss() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


class _GcTimer:
    """Time spent in the cyclic garbage collector while ``on`` (gc.callbacks)."""

    def __init__(self) -> None:
        self.on = False
        self.seconds = 0.0
        self.collections = Counter()
        self._t0 = 0.0

    def __call__(self, phase: str, info: dict) -> None:
        if not self.on:
            return
        if phase == "start":
            self._t0 = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._t0
            self.collections[f"gen{info['generation']}"] += 1


# =============================================================================== screening

def _screen(engines: list, requests: list[dict], eos: int, timeout_s: float, progress: bool) -> list[str | None]:
    """Per request: None if every engine compiles its schema and accepts its tokens + EOS,
    else the reason (the first engine that fails)."""

    def alarm(signum, frame):
        raise TimeoutError(f"over {timeout_s:g} s")

    signal.signal(signal.SIGALRM, alarm)
    out: list[str | None] = []
    bar = _bar(progress, len(requests), "screening schemas")
    for r in requests:
        reason = None
        for eng in engines:
            signal.setitimer(signal.ITIMER_REAL, timeout_s)
            try:
                m = eng.compile(r["schema"])
                if not eng.accepts(m, r["tokens"], eos):
                    reason = f"{eng.name}: instance rejected"
            except TimeoutError:
                reason = f"{eng.name}: compile + instance over {timeout_s:g} s"
            except Exception as e:  # noqa: BLE001 - any refusal skips the schema
                reason = f"{eng.name}: compile error ({type(e).__name__}: {_gist(e)})"
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            if reason:
                break
        out.append(reason)
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    return out


def _gist(e: BaseException) -> str:
    """The kind of an error message: its first line, numbers and quoted names blanked, cut short."""
    line = (str(e).strip().splitlines() or [""])[0]
    line = re.sub(r"\"[^\"]*\"|'[^']*'|`[^`]*`", "…", line)
    return re.sub(r"\d+", "N", line)[:80]


def _bar(progress: bool, total: int | None, desc: str, **kw):
    if not progress:
        return None
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, leave=False, **kw)


# =============================================================================== one run

def run_batch(engine, requests: list[dict], eos: int, progress: bool = False,
              second_pass: bool = False) -> dict[str, Any]:
    """Compile every request fresh, then step the batch to the end (see the module docstring).
    ``second_pass``: then step the same requests again through second matchers of the
    same compiled grammars, made before the first pass (``second_step_s``)."""
    clock = time.perf_counter
    rss0 = _status_kib("VmRSS")
    peak_reset = _reset_peak_rss()
    gct = _GcTimer()
    gc.callbacks.append(gct)
    try:
        compile_s: list[float] = []
        matchers: list = []
        failed = Counter()
        bar = _bar(progress, len(requests), f"{engine.name}: compile")
        gct.on = True
        t_all = clock()
        for r in requests:
            t0 = clock()
            try:
                matchers.append(engine.compile(r["schema"]))
            except Exception as e:  # noqa: BLE001 - screened already; counted if it happens
                failed[f"compile error ({type(e).__name__})"] += 1
                matchers.append(None)
            compile_s.append(clock() - t0)
            if bar is not None:
                bar.update(1)
        compile_all_s = clock() - t_all
        if bar is not None:
            bar.close()
        gct.on = False
        gc_compile_s, gct.seconds = gct.seconds, 0.0
        gc_compile_n, gct.collections = dict(gct.collections), Counter()
        spares = [engine.copy(m) if m is not None else None for m in matchers] if second_pass else None
        gct.on = True
        first = _step_through(engine, matchers, requests, eos, progress)
        gct.on = False
        peak = _status_kib("VmHWM") if peak_reset else None
        second = _step_through(engine, spares, requests, eos, progress) if spares is not None else None
    finally:
        gc.callbacks.remove(gct)
    tokens = int(sum(first["sizes"]))
    steps = first["steps"]
    out = {
        "engine": engine.name, "requests": len(requests), "compile_failed": dict(failed), "tokens": tokens,
        "steps": len(steps), "compile_all_s": compile_all_s, "compile_s": compile_s, "gc_compile_s": gc_compile_s,
        "gc_compile_collections": gc_compile_n,
        "step_s": steps, "fill_s": float(sum(first["fills"])), "commit_s": float(sum(first["commits"])),
        "gc_steps_s": gct.seconds, "gc_collections": dict(gct.collections), "batch_sizes": first["sizes"],
        "per_token_mean_us": float(sum(steps)) / max(tokens, 1) * 1e6,
        "peak_mib": (peak - rss0) / 1024 if peak is not None and rss0 is not None else None,
        "mask_refused_committed_token": first["bad_mask"], "commit_refused": first["refused"],
    }
    if second is not None:
        out["second_step_s"] = second["steps"]
        out["mask_refused_committed_token"] += second["bad_mask"]
        out["commit_refused"] += second["refused"]
    return out


def _step_through(engine, matchers: list, requests: list[dict], eos: int, progress: bool) -> dict[str, Any]:
    """Step every live matcher to the end of its request's tokens (then EOS), one batched
    fill and one commit per step; the timings and the untimed checks of each step."""
    clock = time.perf_counter
    n = len(requests)
    out = np.zeros((n, engine.words), dtype=np.int32)
    live = [i for i in range(n) if matchers[i] is not None]
    pos = [0] * n
    steps, fills, commits, sizes = [], [], [], []
    bad_mask = refused = 0
    bar = _bar(progress, None, f"{engine.name}: steps (batch {n})", unit="step")
    while live:
        ms = [matchers[i] for i in live]
        toks = [requests[i]["tokens"][pos[i]] if pos[i] < len(requests[i]["tokens"]) else eos for i in live]
        t0 = clock()
        engine.fill(ms, live, out)
        t1 = clock()
        ok = engine.commit(ms, toks)
        t2 = clock()
        fills.append(t1 - t0)
        commits.append(t2 - t1)
        steps.append(t2 - t0)
        sizes.append(len(live))
        nxt = []
        for i, t, accepted in zip(live, toks, ok):          # untimed checks and bookkeeping
            if not (int(out[i, t >> 5]) >> (t & 31)) & 1:
                bad_mask += 1
            if not accepted:
                refused += 1
            elif t != eos:
                pos[i] += 1
                nxt.append(i)
        live = nxt
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    return {"steps": steps, "fills": fills, "commits": commits, "sizes": sizes, "bad_mask": bad_mask,
            "refused": refused}


# =============================================================================== the benchmark

def _draw(records: list[dict], rng: random.Random) -> list[dict]:
    """Records with a valid instance, shuffled, as requests (schema, tokens, ...)."""
    order = list(range(len(records)))
    rng.shuffle(order)
    out = []
    for k in order:
        rec = records[k]
        test = next((t for t in rec.get("tests", []) if t.get("valid")), None)
        if test is None:
            continue
        out.append({"index": k, "id": rec.get("id"), "split": rec.get("split"), "schema": rec["schema"],
                    "test": test})
    return out


def _tokenize(req: dict, vocab) -> dict | None:
    _, (info,) = _prepare({"tests": [req["test"]]}, vocab)
    if not info["roundtrip"]:
        return None
    return {**req, "tokens": [int(t) for t in info["tokens"]]}


def _pool(runs: list[dict]) -> dict[str, Any]:
    steps = [t for r in runs for t in r["step_s"]]
    tokens = sum(r["tokens"] for r in runs)
    total = sum(steps)
    peaks = [r["peak_mib"] for r in runs if r["peak_mib"] is not None]
    return {
        "batches": len(runs), "requests": sum(r["requests"] for r in runs), "tokens": tokens,
        "steps": len(steps),
        "compile_all_s": float(np.mean([r["compile_all_s"] for r in runs])),
        "compile_per_request_ms": {k.replace("_us", "_ms"): v / 1e3 for k, v in
                                   summarize([t for r in runs for t in r["compile_s"]]).items() if k != "tokens"},
        "step_us": summarize(steps),
        "per_token_mean_us": total / max(tokens, 1) * 1e6,
        "first_step_ms": (float(np.mean([r["step_s"][0] for r in runs if r["step_s"]])) * 1e3
                          if any(r["step_s"] for r in runs) else None),
        "fill_share": sum(r["fill_s"] for r in runs) / total if total else None,
        "commit_share": sum(r["commit_s"] for r in runs) / total if total else None,
        "gc_share": sum(r["gc_steps_s"] for r in runs) / total if total else None,
        "gc_compile_share": (sum(r["gc_compile_s"] for r in runs) / sum(r["compile_all_s"] for r in runs)
                             if sum(r["compile_all_s"] for r in runs) else None),
        "peak_mib": max(peaks) if peaks else None,
        "mask_refused_committed_token": sum(r["mask_refused_committed_token"] for r in runs),
        "commit_refused": sum(r["commit_refused"] for r in runs),
        "compile_failed": sum(sum(r["compile_failed"].values()) for r in runs),
        "second_step_us": (summarize([t for r in runs for t in r["second_step_s"]])
                           if runs and all("second_step_s" in r for r in runs) else None),
    }


def run(batch_sizes: Sequence[int] = (1, 16, 64), batches: int = 2, seed: int = 0, *,
        data: str | os.PathLike[str] = DEFAULT_DATA, vocab_path: str | os.PathLike[str] = DEFAULT_VOCAB,
        vocab=None, engines: Sequence[str] = ENGINES, warmup: bool = True, isolate: bool = True,
        screen_timeout: float = 30.0, progress: bool = False, records: list[dict] | None = None,
        property_order: str = "schema", freeze_startup: bool = True, second_pass: bool = False) -> dict[str, Any]:
    """Run the benchmark and return its results (what ``serving_batch.json`` holds).

    ``vocab``: an already loaded `TokenVocabulary` of ``vocab_path`` (a tokenizer
    directory; llguidance reads its ``tokenizer.json``).  ``engines``: llguidance is
    dropped (and noted) when not installed.  ``records``: MaskBench records to draw
    from instead of reading ``data``.  ``isolate=False`` runs everything in this
    process (for tests; then runs share in-memory caches).  ``freeze_startup``: after the
    warm-up, freeze what start-up made (imports, warm-up caches) out of the garbage
    collector, as vLLM's engine core does once it is up (`freeze_gc_heap`).
    ``second_pass``: each run also steps its requests a second time (see `run_batch`).
    """
    t_start = time.time()
    notes = []
    engines = [e for e in engines if e in ENGINES]
    if "llguidance" in engines and not llguidance_available():
        engines.remove("llguidance")
        notes.append("llguidance is not installed: ours only")
    if vocab is None:
        vocab = load_vocabulary(vocab_path)
    eos = int(min(vocab.eos_ids))
    objs = {}
    if "ours" in engines:
        objs["ours"] = OurEngine(vocab, property_order)
    if "llguidance" in engines:
        objs["llguidance"] = LLGuidanceEngine(vocab_path, vocab.eos_ids)
    rng = random.Random(seed)
    data_name = str(data) if records is None else "<records>"
    records = list(records) if records is not None else list(read_maskbench(data))
    pool = _draw(records, rng)
    needed = sum(batch_sizes) * batches
    chosen: list[dict] = []
    usable = 0
    skipped: Counter[str] = Counter()
    at = 0
    while len(chosen) < needed and at < len(pool):
        chunk = []
        while at < len(pool) and len(chunk) < int((needed - len(chosen)) * 1.2) + 4:
            req = _tokenize(pool[at], vocab)
            at += 1
            if req is None:
                skipped["tokenization does not round-trip"] += 1
            else:
                chunk.append(req)
        reasons = in_fork(_screen, list(objs.values()), chunk, eos, screen_timeout, progress, isolate=isolate)
        for req, why in zip(chunk, reasons):
            if why is not None:
                skipped[why] += 1
                continue
            usable += 1
            if len(chosen) < needed:
                chosen.append(req)
    if len(chosen) < needed:
        raise ValueError(f"only {len(chosen)} usable requests for {needed} (batch sizes {list(batch_sizes)} x "
                         f"{batches} batches)")
    del records, pool
    gc.collect()
    gc.freeze()     # the harness's objects (vocabulary, requests) stay out of the runs' collections (not warm-up's)
    try:
        if warmup:
            if "ours" in objs:
                from constrained import warm_up

                warm_up(vocab, cache_dir=None)      # the token tables OurEngine's compiles read
            for schema, inst in WARMUP:
                toks = [int(t) for t in vocab.encode(json.dumps(inst))]
                for eng in objs.values():
                    m = eng.compile(schema)
                    if eng.name == "ours":
                        for t in toks:
                            m.mask()
                            m.advance(t)
                    else:
                        eng.accepts(m, toks, eos)
        if freeze_startup:      # the start-up heap is static from here on, as vLLM marks it
            gc.collect()
            gc.freeze()
        runs: list[dict] = []
        used = 0
        bar = _bar(progress, len(batch_sizes) * batches * len(objs), "serving runs")
        for b in batch_sizes:
            for k in range(batches):
                reqs = chosen[used:used + b]
                used += b
                for eng in objs.values():
                    load = [round(x, 2) for x in os.getloadavg()]
                    res = in_fork(run_batch, eng, reqs, eos, progress, second_pass, isolate=isolate)
                    res.update(batch_size=b, batch=k, schema_indices=[r["index"] for r in reqs], loadavg_at_start=load)
                    runs.append(res)
                    if bar is not None:
                        bar.update(1)
        if bar is not None:
            bar.close()
    finally:
        gc.unfreeze()
    summary: dict[str, Any] = {}
    for b in batch_sizes:
        summary[str(b)] = {name: _pool([r for r in runs if r["batch_size"] == b and r["engine"] == name])
                           for name in objs}
    ratios = {}
    if len(objs) == 2:
        for b, per in summary.items():
            o, g = per["ours"], per["llguidance"]
            ratios[b] = {"compile_all": _ratio(o["compile_all_s"], g["compile_all_s"]),
                         "step_p50": _ratio(o["step_us"].get("p50_us"), g["step_us"].get("p50_us")),
                         "step_p99": _ratio(o["step_us"].get("p99_us"), g["step_us"].get("p99_us")),
                         "per_token_mean": _ratio(o["per_token_mean_us"], g["per_token_mean_us"]),
                         "first_step": _ratio(o["first_step_ms"], g["first_step_ms"]),
                         "peak_memory": _ratio(o["peak_mib"], g["peak_mib"])}
    meta = {"date": time.strftime("%Y-%m-%d %H:%M"), "command_args": {
                "batch_sizes": list(batch_sizes), "batches": batches, "seed": seed, "warmup": warmup,
                "property_order": property_order, "freeze_startup": freeze_startup, "second_pass": second_pass,
                "screen_timeout_s": screen_timeout, "isolate": isolate},
            "data": data_name, "vocab": str(vocab_path),
            "vocab_size": len(vocab), "eos": eos, "engines": list(objs),
            "machine": f"{platform.machine()} {os.cpu_count()} CPUs, Python {platform.python_version()}",
            "loadavg_at_start": list(os.getloadavg()), "wall_s": None, "notes": notes}
    meta["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    meta["git"] = _git_state()
    try:
        import llguidance

        meta["llguidance_version"] = llguidance.__version__
    except ImportError:
        pass
    meta["wall_s"] = round(time.time() - t_start, 1)
    return {"meta": meta, "screening": {"screened": at, "usable": usable, "used": len(chosen),
                                        "skipped": dict(skipped.most_common())},
            "summary": summary, "ratios": ratios,
            "runs": [{k: v for k, v in r.items() if k not in ("step_s", "compile_s", "batch_sizes")}
                     | {"step_us": summarize(r["step_s"]), "compile_ms": [round(t * 1e3, 2) for t in r["compile_s"]]}
                     for r in runs]}


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else a / b


# =============================================================================== reports

def _f(x: float | None, digits: int = 0) -> str:
    return "–" if x is None else f"{x:,.{digits}f}"


def _cell(per: dict, ratio: dict | None, key: str, value: Callable[[dict], float | None], digits: int) -> str:
    o = value(per["ours"]) if "ours" in per else None
    if "llguidance" not in per:
        return _f(o, digits)
    g = value(per["llguidance"])
    r = ratio.get(key) if ratio else None
    return f"{_f(o, digits)} / {_f(g, digits)} (**{_f(r, 1)}×**)" if r is not None else f"{_f(o, digits)} / {_f(g, digits)}"


def markdown(res: dict) -> str:
    meta, summ = res["meta"], res["summary"]
    both = len(meta["engines"]) == 2
    head = "ours / llguidance (ratio)" if both else meta["engines"][0]
    a = meta["command_args"]
    lines = [f"# Serving benchmark: fresh JSON Schemas, batched masks ({meta['date']})", "",
             f"`python benchmarks/serving_batch.py --batch-sizes {','.join(map(str, a['batch_sizes']))} "
             f"--batches {a['batches']} --seed {a['seed']}"
             f"{'' if a['warmup'] else ' --no-warmup'}"
             f"{' --property-order any' if a.get('property_order') == 'any' else ''}"
             f"{' --no-freeze-startup' if a.get('freeze_startup') is False else ''}"
             f"{' --second-pass' if a.get('second_pass') else ''}`; "
             f"ours: members {'in any order' if a.get('property_order') == 'any' else 'in declared order'}; "
             f"{meta['machine']}; one thread per engine; "
             f"vocabulary {Path(meta['vocab']).name} ({meta['vocab_size']:,} tokens)"
             + (f"; llguidance {meta['llguidance_version']}" if both and meta.get("llguidance_version") else "")
             + (f"; commit {meta['git']['commit'][:7]}" if meta.get("git", {}).get("commit") else "")
             + (" (+ uncommitted engine changes)" if meta.get("git", {}).get("dirty_paths") else "")
             + f"; load average {meta['loadavg_at_start'][0]:.1f} at start, {meta['loadavg_at_end'][0]:.1f} at end",
             "", (f"Cells: {head}.  Compile all = every request of a batch compiled in turn (mean of "
                 f"{a['batches']} batches); a step = fill every live request's mask into one array + commit "
                 "each one's token; per token = sum of step times / request-tokens (EOS included); first step = "
                 "the first step of a batch (every request's first mask, all live; mean of batches); peak "
                 "memory = peak RSS growth of the run's process."), "",
             ("| batch | requests / tokens | compile all (s) | step p50 (µs) | step p99 (µs) | "
             "per token mean (µs) | first step (ms) | peak memory (MiB) |"), "|---|---|---|---|---|---|---|---|"]
    for b, per in summ.items():
        r = res["ratios"].get(b)
        first = next(iter(per.values()))
        lines.append(f"| {b} | {first['requests']} / {first['tokens']:,} | "
                     f"{_cell(per, r, 'compile_all', lambda p: p['compile_all_s'], 3)} | "
                     f"{_cell(per, r, 'step_p50', lambda p: p['step_us'].get('p50_us'), 0)} | "
                     f"{_cell(per, r, 'step_p99', lambda p: p['step_us'].get('p99_us'), 0)} | "
                     f"{_cell(per, r, 'per_token_mean', lambda p: p['per_token_mean_us'], 1)} | "
                     f"{_cell(per, r, 'first_step', lambda p: p['first_step_ms'], 1)} | "
                     f"{_cell(per, r, 'peak_memory', lambda p: p['peak_mib'], 1)} |")
    if any("ours" in per for per in summ.values()):
        lines += ["", "Ours, where step time goes and per-request compile time:", "",
                  ("| batch | step: mask fill | step: commit | step: of which GC | compile p50 (ms) | compile p99 (ms) | "
                   "compile max (ms) | compile: of which GC |"),
                  "|---|---|---|---|---|---|---|---|"]
        for b, per in summ.items():
            o = per.get("ours")
            if o:
                c = o["compile_per_request_ms"]
                lines.append(f"| {b} | {_f(100 * o['fill_share'], 1)}% | {_f(100 * o['commit_share'], 1)}% | "
                             f"{_f(100 * o['gc_share'], 1)}% | {_f(c.get('p50_ms'), 1)} | {_f(c.get('p99_ms'), 1)} | "
                             f"{_f(c.get('max_ms'), 1)} | {_f(100 * o['gc_compile_share'], 1)}% |")
    if any(p.get("second_step_us") for per in summ.values() for p in per.values()):
        lines += ["", "Schemas seen before: the same requests stepped a second time, through matchers made "
                      "before the first pass from the same compiled grammars (what a server sees when "
                      "requests repeat a schema and the compiled grammar is cached):", "",
                  "| batch | step p50 (µs) | step p99 (µs) |", "|---|---|---|"]
        for b, per in summ.items():
            cells = []
            for q in ("p50_us", "p99_us"):
                vals = [per[e]["second_step_us"][q] if per[e].get("second_step_us") else None for e in per]
                text = " / ".join(_f(v, 0) for v in vals)
                if len(vals) == 2 and None not in vals and vals[1]:
                    text += f" (**{vals[0] / vals[1]:.1f}×**)"
                cells.append(text)
            lines.append(f"| {b} | {cells[0]} | {cells[1]} |")
    sc = res["screening"]
    lines += ["", f"Requests: {sc['used']} used; {sc['screened']} MaskBench records with a valid instance drawn "
                  f"(seed {a['seed']}) and screened, {sc['usable']} usable; skipped: "
              + (", ".join(f"{why}: {n}" for why, n in list(sc["skipped"].items())[:8]) or "none")
              + (f", and {len(sc['skipped']) - 8} other reasons (see the JSON)" if len(sc["skipped"]) > 8 else "")
              + "."]
    problems = {(b, e): (p["mask_refused_committed_token"], p["commit_refused"], p["compile_failed"])
                for b, per in summ.items() for e, p in per.items() if any((p["mask_refused_committed_token"],
                                                                           p["commit_refused"], p["compile_failed"]))}
    lines.append("Every committed token was allowed by its mask and accepted." if not problems else
                 "Problems (batch, engine: mask refused committed token, commit refused, compile failed): "
                 + "; ".join(f"{b} {e}: {v}" for (b, e), v in problems.items()))
    lines += [f"Notes: {'; '.join(meta['notes'])}." if meta["notes"] else "", f"Wall time {meta['wall_s']} s."]
    return "\n".join(x for x in lines if x is not None) + "\n"


def plot(res: dict, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summ = res["summary"]
    sizes = [int(b) for b in summ]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    colors = {"ours": "#1f77b4", "llguidance": "#d62728"}
    for eng in res["meta"]["engines"]:
        c = colors.get(eng)
        ax1.plot(sizes, [summ[str(b)][eng]["step_us"].get("p50_us") for b in sizes], "o-", color=c,
                 label=f"{eng} p50")
        ax1.plot(sizes, [summ[str(b)][eng]["step_us"].get("p99_us") for b in sizes], "s--", color=c,
                 label=f"{eng} p99")
        ax2.plot(sizes, [summ[str(b)][eng]["compile_all_s"] for b in sizes], "o-", color=c, label=eng)
    for ax in (ax1, ax2):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("batch size (concurrent requests)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    ax1.set_ylabel("step time (µs): fill all masks + commit all")
    ax1.set_title("Step time")
    ax2.set_ylabel("compile all requests (s)")
    ax2.set_title("Fresh compiles")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_reports(res: dict, out: str | os.PathLike[str], *, with_plot: bool = True) -> list[Path]:
    d = Path(out)
    d.mkdir(parents=True, exist_ok=True)
    paths = [d / f"{STEM}.json", d / f"{STEM}.md"]
    paths[0].write_text(json.dumps(res, indent=1) + "\n")
    paths[1].write_text(markdown(res))
    if with_plot:
        paths.append(plot(res, d / f"{STEM}.png"))
    return paths


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch-sizes", default="1,16,64,256", help="comma-separated (default: %(default)s)")
    ap.add_argument("--batches", type=int, default=2, help="batches per batch size (default 2)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(RESULTS_DIR), help="results directory (default: %(default)s)")
    ap.add_argument("--data", default=str(DEFAULT_DATA))
    ap.add_argument("--vocab", default=str(DEFAULT_VOCAB), help="tokenizer directory (with tokenizer.json)")
    ap.add_argument("--engines", default=",".join(ENGINES), help="comma-separated: ours, llguidance")
    ap.add_argument("--no-warmup", action="store_true", help="no warm-up compiles before the runs")
    ap.add_argument("--screen-timeout", type=float, default=30.0, help="seconds per schema when screening")
    ap.add_argument("--no-progress", action="store_true")
    ap.add_argument("--property-order", choices=("schema", "any"), default="schema",
                    help="ours: members in declared order (default; llguidance's semantics) or in any order "
                         "(MaskBench's option)")
    ap.add_argument("--no-freeze-startup", action="store_true",
                    help="leave the start-up heap (imports, warm-up) to the garbage collector's full collections "
                         "(by default it is frozen after the warm-up, as vLLM's engine core does once up)")
    ap.add_argument("--second-pass", action="store_true",
                    help="also step every batch's requests a second time through fresh matchers of the same "
                         "compiled grammars (schemas seen before)")
    args = ap.parse_args(argv)
    res = run([int(x) for x in args.batch_sizes.split(",") if x], args.batches, args.seed, data=args.data,
              vocab_path=args.vocab, engines=[e.strip() for e in args.engines.split(",") if e.strip()],
              warmup=not args.no_warmup, screen_timeout=args.screen_timeout, progress=not args.no_progress,
              property_order=args.property_order, freeze_startup=not args.no_freeze_startup,
              second_pass=args.second_pass)
    paths = write_reports(res, args.out)
    print(markdown(res))
    print("wrote " + ", ".join(map(str, paths)))
    return res


if __name__ == "__main__":
    main()
