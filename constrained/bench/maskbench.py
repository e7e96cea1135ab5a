"""MaskBench for JSON Schemas: compile every schema, then walk its test instances.

The protocol of guidance-ai's MaskBench / JSONSchemaBench, on
``../shared/data/maskbench/dev.jsonl.gz`` (one record per line: ``id``,
``split``, ``schema``, ``tests`` = ``[{"valid", "data", ...}]``).  Per schema, in
a child process with a wall-time limit (``--timeout``, default 60 s, compile and
instances together) and an address-space limit (``--memory-gb``, default 4 GiB,
``RLIMIT_AS``):

* **TTFM** (time to first mask): ``Grammar.from_json_schema(schema, property_order="any")`` +
  ``compile_grammar(grammar, vocab)`` + ``compiled.matcher().mask()``.  A
  ``ConstrainedError`` there is a *compile error* (class, message, and the
  ``keyword`` / ``pointer`` of schema errors are recorded); any other exception
  is a *crash* (traceback recorded).
* per test instance: ``text = json.dumps(data)`` (default separators, ASCII
  escapes), ``tokens = vocab.encode(text)`` (the tokenizer's canonical encoding,
  no special tokens; tokenized in the parent, bytes checked to round-trip), a
  fresh matcher, and for every token **TBM** = ``mask()`` + ``advance(token)``
  timed together (one sample per token).  The token's mask bit must agree with
  ``advance()``; at the end ``is_accepting()`` (and, untimed, the EOS bits of the
  final mask must agree with it).  A disagreement is an *engine inconsistency*.
  A valid instance must be accepted (else *validation error*), an invalid one
  rejected (else *invalidation error*, the serious one).

Outcome per schema, first that applies: timeout, crash, compile error,
invalidation error, engine inconsistency, validation error, passing.

Environment of a worker (documented deviations from "a fresh process per
schema"): workers are reused across schemas (replaced after a timeout or crash,
after ``--recycle-after`` schemas, or when their address space passes half the
memory limit), so per-vocabulary caches (token tables of terminals already met,
crossing scans) stay in memory as in a server; before its first schema a worker
does what a server does at start, `constrained.warm_up` (the vocabulary's trie
and compiled walk, the value checks' token classes, the built-in format
automata), and compiles two small warm-up schemas (generic JSON and a flat
object), so the generic string/number/literal tables are not charged to the
first schema it gets (``--no-warmup`` to charge them).  The on-disk token-table cache is off by
default (``--cache-dir none``): with it, a second run would read the tables of
the very same schemas from disk and TTFM would not be comparable (and it grows
by ~10 MB per schema).  A crash of a worker that had already run other schemas
(e.g. ``MemoryError`` from accumulated caches) is retried once on a fresh worker.

Results: one JSON line per schema appended to ``<out>/maskbench_json_schema.jsonl``
(an interrupted run resumes where it stopped; ``--fresh`` starts over), with
every TBM sample in µs rounded to 0.1 (so percentiles over all tokens are exact
up to that rounding); summary in ``<out>/maskbench_json_schema.{md,json}`` and
plots ``<out>/maskbench_json_schema_{outcomes,ttfm,tbm}.png``.

    constrained bench maskbench --every 50 --workers 2
    constrained bench maskbench --summarize-only
    python benchmarks/maskbench_json_schema.py ...      (the same, from a checkout)
"""

from __future__ import annotations

import argparse  # noqa: E402
import json  # noqa: E402
import multiprocessing as mp  # noqa: E402
import os  # noqa: E402
import platform  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
from collections import Counter, defaultdict, deque  # noqa: E402
from collections.abc import Sequence  # noqa: E402
from multiprocessing.connection import wait as _wait  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

from constrained.bench.datasets import (  # noqa: E402
    DEFAULT_MASKBENCH as DEFAULT_DATA,
    DEFAULT_RESULTS as RESULTS_DIR,
    DEFAULT_VOCAB,
    REPO,
    load_vocabulary,
    pin_numeric_threads,
    read_maskbench,
)
from constrained.bench.results import distribution, pyplot, read_records, save_figure  # noqa: E402

PROTOCOL = "maskbench-json-schema/1"
STEM = "maskbench_json_schema"
OUTCOMES = ("passing", "compile error", "validation error", "invalidation error",
            "engine inconsistency", "timeout", "crash")
MESSAGE_CHARS = 300
TRACEBACK_CHARS = 4000

# Warm-up of a fresh worker (not timed): generic JSON and a flat object.
WARMUP: list[tuple[dict, Any]] = [
    ({}, {"a": [1, -2.5e3, "x y", True, False, None], "b": {}}),
    ({"type": "object", "properties": {"s": {"type": "string"}, "i": {"type": "integer"},
                                       "n": {"type": "number"}, "b": {"type": "boolean"},
                                       "a": {"type": "array", "items": {"type": "string"}}}},
     {"s": "hello world", "i": 42, "n": 0.5, "b": True, "a": ["q", "r"]}),
]


# =============================================================================== worker side

def _vm_bytes() -> int:
    """This process's address space (what RLIMIT_AS bounds), 0 if unknown."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _error_info(e: BaseException, *, with_traceback: bool) -> dict[str, Any]:
    info: dict[str, Any] = {"class": type(e).__name__, "message": str(e)[:MESSAGE_CHARS]}
    for attr in ("keyword", "pointer", "limit"):
        v = getattr(e, attr, None)
        if v is not None:
            info[attr] = v if isinstance(v, (str, int, float)) else str(v)
    if with_traceback:
        tb = "".join(traceback.format_exception(e))
        info["traceback"] = tb[-TRACEBACK_CHARS:]
    return info


def _bit(mask: np.ndarray, token: int) -> bool:
    return bool((int(mask[token >> 5]) >> (token & 31)) & 1)


def _walk(compiled, tokens: Sequence[int], eos_ids: Sequence[int]) -> dict[str, Any]:
    """One instance: fresh matcher, TBM per token, mask/advance agreement, acceptance."""
    clock = time.perf_counter
    m = compiled.matcher()
    times: list[float] = []
    inconsistency = None
    for k, tok in enumerate(tokens):
        t0 = clock()
        mask = m.mask()
        ok = m.advance(tok)
        times.append(clock() - t0)
        if _bit(mask, tok) != ok and inconsistency is None:
            inconsistency = f"token {k} (id {tok}): mask bit {int(not ok)}, advance() returned {ok}"
        if not ok:
            return {"accepted": False, "reject_at": k, "reason": "token refused",
                    "inconsistency": inconsistency, "tbm_us": [round(t * 1e6, 1) for t in times]}
    accepting = m.is_accepting()
    if eos_ids and inconsistency is None:
        final = m.mask()
        eos_allowed = any(_bit(final, e) for e in eos_ids)
        if eos_allowed != accepting:
            inconsistency = f"end: is_accepting() {accepting}, EOS mask bit {int(eos_allowed)}"
    return {"accepted": accepting, "reject_at": None if accepting else len(tokens),
            "reason": None if accepting else "not accepting at end",
            "inconsistency": inconsistency, "tbm_us": [round(t * 1e6, 1) for t in times]}


# The protocol feeds instances with their keys in their own order, so members may come
# in any order (required members and unique keys are then checked when objects close).
SCHEMA_OPTIONS = {"property_order": "any"}


def _run_schema(schema: Any, instances: Sequence[tuple[bool, Sequence[int]]], vocab,
                cache_dir: str | None, conn=None) -> dict[str, Any]:
    """Compile ``schema`` and walk ``instances`` ((valid, tokens) pairs).  Exceptions
    are recorded in the result (``fatal`` after a MemoryError: the worker should go)."""
    from constrained import Grammar, compile_grammar
    from constrained.errors import ConstrainedError

    res: dict[str, Any] = {"ttfm_s": None, "error": None, "instances": [], "fatal": False}
    clock = time.perf_counter
    try:
        t0 = clock()
        grammar = Grammar.from_json_schema(schema, **SCHEMA_OPTIONS)
        t1 = clock()
        if cache_dir == "default":
            compiled = compile_grammar(grammar, vocab)
        else:
            compiled = compile_grammar(grammar, vocab, cache_dir=cache_dir)
        t2 = clock()
        compiled.matcher().mask()
        t3 = clock()
    except ConstrainedError as e:
        res["outcome"] = "compile error"
        res["error"] = _error_info(e, with_traceback=False)
        return res
    except MemoryError as e:
        res["outcome"] = "crash"
        res["error"] = {**_error_info(e, with_traceback=True), "phase": "compile"}
        res["fatal"] = True
        return res
    except Exception as e:  # noqa: BLE001 - any other exception is a crash, recorded
        res["outcome"] = "crash"
        res["error"] = {**_error_info(e, with_traceback=True), "phase": "compile"}
        return res
    res.update(ttfm_s=t3 - t0, schema_s=t1 - t0, compile_s=t2 - t1, first_mask_s=t3 - t2)
    if conn is not None:
        conn.send(("compiled", res["ttfm_s"]))
    eos = list(vocab.eos_ids)
    try:
        for valid, tokens in instances:
            res["instances"].append({"valid": valid, "n_tokens": len(tokens), **_walk(compiled, tokens, eos)})
        res["stats"] = compiled.stats()
    except MemoryError as e:
        res["outcome"] = "crash"
        res["error"] = {**_error_info(e, with_traceback=True), "phase": "instances"}
        res["fatal"] = True
    except Exception as e:  # noqa: BLE001
        res["outcome"] = "crash"
        res["error"] = {**_error_info(e, with_traceback=True), "phase": "instances"}
    return res


def _worker_main(conn, vocab_file: str, memory_bytes: int, cache_dir: str | None,
                 warmup: list[tuple[Any, list[int] | None]]) -> None:
    """Worker loop: ("ready", pid) once loaded, then per task ("compiled", ttfm) and
    ("done", index, result); exits on ``None`` or after a MemoryError."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C
    if memory_bytes:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    from constrained import TokenVocabulary, warm_up

    vocab = TokenVocabulary.load(vocab_file)
    if warmup:
        warm_up(vocab, cache_dir=cache_dir)
    for schema, tokens in warmup:
        _run_schema(schema, [(True, tokens)] if tokens else [], vocab, cache_dir)
    try:
        conn.send(("ready", os.getpid(), _vm_bytes()))
        while True:
            msg = conn.recv()
            if msg is None:
                break
            index, schema, instances = msg
            res = _run_schema(schema, instances, vocab, cache_dir, conn)
            res["vm_bytes"] = _vm_bytes()
            conn.send(("done", index, res))
            if res["fatal"]:
                break
    except (EOFError, BrokenPipeError, ConnectionResetError):
        pass


# =============================================================================== parent side

class _Worker:
    def __init__(self, ctx, worker_args: tuple) -> None:
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker_main, args=(child, *worker_args), daemon=True)
        self.proc.start()
        child.close()
        self.ready = False
        self.task: dict | None = None
        self.deadline = 0.0
        self.sent_at = 0.0
        self.ttfm: float | None = None
        self.tasks_done = 0
        self.vm_bytes = 0
        self.retire = False

    def stop(self, *, kill: bool) -> None:
        if kill:
            if self.proc.is_alive():
                self.proc.kill()
        else:
            try:
                self.conn.send(None)
            except OSError:
                pass
        self.proc.join(10)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(5)
        self.conn.close()


def _prepare(task: dict, vocab) -> tuple[list[tuple[bool, list[int]]], list[dict]]:
    """Tokenize the instances of a task: ((valid, tokens) for the worker, per-instance info)."""
    instances, info = [], []
    tb = vocab.token_bytes
    for t in task["tests"]:
        text = json.dumps(t["data"])
        tokens = list(vocab.encode(text))
        roundtrip = b"".join(tb[i] for i in tokens) == text.encode("utf-8")
        instances.append((bool(t["valid"]), tokens))
        info.append({"text": text, "tokens": tokens, "roundtrip": roundtrip})
    return instances, info


def _make_record(task: dict, res: dict, info: list[dict] | None, vocab, **extra) -> dict[str, Any]:
    """The JSON line of one schema (outcome decided here)."""
    insts = res.get("instances", [])
    counts: Counter[str] = Counter()
    tbm: list[list[float]] = []
    out_insts = []
    for k, inst in enumerate(insts):
        valid, accepted = inst["valid"], inst["accepted"]
        key = ("valid_accepted" if accepted else "valid_rejected") if valid else \
              ("invalid_accepted" if accepted else "invalid_rejected")
        counts[key] += 1
        counts["inconsistencies"] += inst["inconsistency"] is not None
        tbm.append(inst["tbm_us"])
        o = {key2: inst[key2] for key2 in ("valid", "n_tokens", "accepted", "reject_at", "reason", "inconsistency")}
        if info is not None:
            counts["tokenization_mismatch"] += not info[k]["roundtrip"]
            if not info[k]["roundtrip"]:
                o["tokenization_mismatch"] = True
            if valid and not accepted and inst["reject_at"] is not None:
                toks = info[k]["tokens"]
                off = sum(len(vocab.token_bytes[i]) for i in toks[:inst["reject_at"]])
                raw = info[k]["text"].encode("utf-8")
                o["reject_offset"] = off
                o["context"] = (raw[max(0, off - 60):off].decode("utf-8", "replace") + "⟦"
                                + raw[off:off + 30].decode("utf-8", "replace"))
        out_insts.append(o)
    n_valid = sum(1 for t in task["tests"] if t["valid"])
    outcome = res.get("outcome")
    if outcome is None:
        if counts["invalid_accepted"]:
            outcome = "invalidation error"
        elif counts["inconsistencies"]:
            outcome = "engine inconsistency"
        elif counts["valid_rejected"]:
            outcome = "validation error"
        else:
            outcome = "passing"
    rec: dict[str, Any] = {
        "index": task["index"], "id": task.get("id"), "split": task.get("split"), "outcome": outcome,
        "ttfm_s": res.get("ttfm_s"), "schema_s": res.get("schema_s"), "compile_s": res.get("compile_s"),
        "first_mask_s": res.get("first_mask_s"),
        "n_valid": n_valid, "n_invalid": len(task["tests"]) - n_valid,
        "n_tokens": sum(len(x) for x in tbm),
        "tbm_summary_us": distribution(np.concatenate([np.asarray(x, np.float64) for x in tbm]) if tbm else np.zeros(0),
                                (50, 99)),
        "counts": {k: int(v) for k, v in sorted(counts.items()) if v},
        "error": res.get("error"), "stats": res.get("stats"), **extra,
        "instances": out_insts, "tbm_us": tbm,
    }
    return rec


def _git_state() -> dict[str, Any]:
    def git(*a: str) -> str:
        return subprocess.run(["git", *a], cwd=REPO, capture_output=True, text=True, timeout=10).stdout.rstrip()

    try:
        return {"commit": git("rev-parse", "HEAD"),
                "dirty_paths": git("status", "--porcelain", "--", "constrained").splitlines()[:50]}
    except (OSError, subprocess.SubprocessError):
        return {}


def run_benchmark(tasks: Sequence[dict], vocab, vocab_file: str, results_path: Path, *, workers: int = 1,
                  timeout: float = 60.0, memory_gb: float = 4.0, cache_dir: str | None = None,
                  warmup: bool = True, recycle_after: int = 100, progress: bool = True,
                  start_method: str = "spawn") -> None:
    """Run ``tasks`` (records with ``index``, ``schema``, ``tests``, ``split``, ``id``)
    on a pool of worker processes, appending one JSON line per schema to ``results_path``."""
    pin_numeric_threads()
    ctx = mp.get_context(start_method)
    memory_bytes = int(memory_gb * 2**30) if memory_gb else 0
    warm: list[tuple[Any, list[int] | None]] = []
    if warmup:
        for schema, inst in WARMUP:
            try:
                warm.append((schema, list(vocab.encode(json.dumps(inst)))))
            except Exception:  # noqa: BLE001 - a vocabulary that cannot encode it: compile only
                warm.append((schema, None))
    worker_args = (vocab_file, memory_bytes, cache_dir, warm)
    pending = deque(tasks)
    retry: deque[dict] = deque()
    pool: list[_Worker] = [_Worker(ctx, worker_args) for _ in range(max(1, min(workers, len(tasks))))]
    startup_failures = 0
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(tasks), desc="MaskBench JSON schemas", unit="schema", smoothing=0.05)
    tally: Counter[str] = Counter()
    infos: dict[int, list[dict]] = {}

    def write(rec: dict) -> None:
        with open(results_path, "a", encoding="utf-8") as f:
            f.write(json.dumps(rec, ensure_ascii=False, separators=(",", ":")) + "\n")
        tally[rec["outcome"]] += 1
        if bar is not None:
            bar.update(1)
            bar.set_postfix({k[:12]: v for k, v in tally.items()}, refresh=False)

    def finish(w: _Worker, res: dict, **extra) -> None:
        task = w.task
        assert task is not None
        w.task = None
        rec = _make_record(task, res, infos.pop(task["index"], None), vocab,
                           wall_s=round(time.monotonic() - w.sent_at, 4),
                           worker_schemas_before=w.tasks_done, retried=bool(task.get("_retried")), **extra)
        w.tasks_done += 1
        write(rec)

    def crashed(w: _Worker, res: dict) -> None:
        """A crash: retried once on a fresh worker if this one had run other schemas."""
        task = w.task
        assert task is not None
        if w.tasks_done > 0 and not task.get("_retried"):
            task["_retried"] = True
            infos.pop(task["index"], None)
            retry.append(task)
            w.task = None
        else:
            finish(w, res)

    try:
        while pending or retry or any(w.task is not None for w in pool):
            # ---- dispatch
            for w in pool:
                if not w.ready or w.task is not None or w.retire:
                    continue
                if retry and w.tasks_done == 0:
                    task = retry.popleft()
                elif pending:
                    task = pending.popleft()
                else:
                    continue
                w.task, w.ttfm = task, None
                try:
                    instances, infos[task["index"]] = _prepare(task, vocab)
                except Exception as e:  # noqa: BLE001 - recorded, not fatal
                    w.sent_at = time.monotonic()
                    finish(w, {"outcome": "crash", "error": {**_error_info(e, with_traceback=True),
                                                            "phase": "tokenize"}})
                    continue
                w.sent_at = time.monotonic()
                w.deadline = w.sent_at + timeout
                w.conn.send((task["index"], task["schema"], instances))
            # ---- wait for a message, a death or the next deadline
            busy = [w.deadline for w in pool if w.task is not None]
            wait_s = max(0.0, min(busy) - time.monotonic()) if busy else 1.0
            _wait([w.conn for w in pool] + [w.proc.sentinel for w in pool], timeout=wait_s)
            # ---- handle every worker
            for i, w in enumerate(pool):
                dead = False
                try:
                    while w.conn.poll():
                        msg = w.conn.recv()
                        if msg[0] == "ready":
                            w.ready = True
                            w.vm_bytes = msg[2]
                            startup_failures = 0
                        elif msg[0] == "compiled":
                            w.ttfm = msg[1]
                        elif msg[0] == "done":
                            res = msg[2]
                            w.vm_bytes = res.pop("vm_bytes", 0)
                            if res.get("fatal"):
                                w.retire = True
                                crashed(w, res)
                            else:
                                finish(w, res)
                except (EOFError, OSError):
                    dead = True
                if not dead and not w.proc.is_alive():
                    dead = True
                replace = kill = dead
                if dead:
                    code = w.proc.exitcode
                    if w.task is not None:
                        sig = f" (signal {signal.Signals(-code).name})" if code is not None and code < 0 else ""
                        crashed(w, {"outcome": "crash", "ttfm_s": w.ttfm,
                                    "error": {"class": "WorkerDied",
                                              "message": f"worker exited with code {code}{sig}",
                                              "phase": "compile" if w.ttfm is None else "instances"}})
                    elif not w.ready and not w.retire:
                        startup_failures += 1
                        if startup_failures >= 3:
                            raise RuntimeError(f"workers die while starting (exit code {code}); "
                                               "is --memory-gb too small?")
                    replace = True
                elif w.task is not None and time.monotonic() > w.deadline:
                    w.proc.kill()
                    kill = True
                    finish(w, {"outcome": "timeout", "ttfm_s": w.ttfm,
                               "error": {"class": "Timeout",
                                         "message": f"no result within {timeout:g} s",
                                         "phase": "compile" if w.ttfm is None else "instances"}})
                    replace = True
                elif w.task is None and w.ready and (
                        w.retire or (recycle_after and w.tasks_done >= recycle_after)
                        or (memory_bytes and w.vm_bytes > memory_bytes // 2)):
                    replace = True
                if replace:
                    w.stop(kill=kill)
                    if pending or retry or w.task is not None:
                        pool[i] = _Worker(ctx, worker_args)
                    else:
                        pool[i] = None  # type: ignore[call-overload]
            pool = [w for w in pool if w is not None]
            if not pool and (pending or retry):
                pool = [_Worker(ctx, worker_args)]
    finally:
        for w in pool:
            w.stop(kill=w.task is not None)
        if bar is not None:
            bar.close()


# =============================================================================== results file

def read_results(path: Path) -> dict[int, dict]:
    """Records of a results file by index (last one wins); a torn last line is cut off
    (`results.read_records`)."""
    return {rec["index"]: rec for rec in read_records(path)}


# =============================================================================== summary

def summarize_records(records: Sequence[dict], meta: dict | None = None) -> dict[str, Any]:
    """The summary of a run (counts, percentiles, refusal reasons) from its records."""
    records = sorted(records, key=lambda r: r["index"])
    outcomes = Counter(r["outcome"] for r in records)
    per_split: dict[str, Counter] = defaultdict(Counter)
    for r in records:
        per_split[r["split"]][r["outcome"]] += 1
    ttfm_ms = [r["ttfm_s"] * 1e3 for r in records if r.get("ttfm_s") is not None]
    tbm_all: list[float] = []
    tbm_valid: list[float] = []
    inst: Counter[str] = Counter()
    for r in records:
        for i, ts in zip(r.get("instances", []), r.get("tbm_us", []), strict=True):
            tbm_all.extend(ts)
            if i["valid"]:
                tbm_valid.extend(ts)
        for k, v in r.get("counts", {}).items():
            inst[k] += v
    refusals: dict[tuple, dict] = {}
    crashes: dict[str, dict] = {}
    for r in records:
        e = r.get("error") or {}
        if r["outcome"] == "compile error":
            key = (e.get("class"), e.get("keyword"))
            d = refusals.setdefault(key, {"class": key[0], "keyword": key[1], "schemas": 0,
                                          "example": e.get("message"), "example_index": r["index"]})
            d["schemas"] += 1
        elif r["outcome"] == "crash":
            d = crashes.setdefault(str(e.get("class")), {"class": e.get("class"), "schemas": 0,
                                                   "example": e.get("message"), "example_index": r["index"]})
            d["schemas"] += 1
    n = len(records)
    summary: dict[str, Any] = {
        "protocol": PROTOCOL,
        **(meta or {}),
        "schemas": n,
        "outcomes": {o: outcomes.get(o, 0) for o in OUTCOMES},
        "pass_rate": outcomes.get("passing", 0) / n if n else None,
        "schemas_without_tests": sum(1 for r in records if r["n_valid"] + r["n_invalid"] == 0),
        "passing_without_tests": sum(1 for r in records
                                     if r["n_valid"] + r["n_invalid"] == 0 and r["outcome"] == "passing"),
        "per_split": {s: {"schemas": sum(c.values()), **{o: c.get(o, 0) for o in OUTCOMES}}
                      for s, c in sorted(per_split.items())},
        "instances": {
            "valid": inst["valid_accepted"] + inst["valid_rejected"], "valid_accepted": inst["valid_accepted"],
            "invalid": inst["invalid_accepted"] + inst["invalid_rejected"],
            "invalid_rejected": inst["invalid_rejected"], "invalid_accepted": inst["invalid_accepted"],
            "inconsistencies": inst["inconsistencies"], "tokenization_mismatches": inst["tokenization_mismatch"],
            "note": "instances of schemas that compiled and did not time out or crash before them",
        },
        "ttfm_ms": distribution(ttfm_ms, (50, 90, 99)),
        "tbm_us": distribution(np.asarray(tbm_all), (50, 90, 99, 99.9)),
        "tbm_valid_us": distribution(np.asarray(tbm_valid), (50, 90, 99, 99.9)),
        "top_refusals": sorted(refusals.values(), key=lambda d: (-d["schemas"], str(d["class"]), str(d["keyword"]))),
        "crashes": sorted(crashes.values(), key=lambda d: -d["schemas"]),
        "invalidation_errors": [{"index": r["index"], "id": r["id"], "split": r["split"]}
                                for r in records if r["outcome"] == "invalidation error"],
        "engine_inconsistencies": [{"index": r["index"], "id": r["id"], "split": r["split"],
                                    "detail": next((i["inconsistency"] for i in r["instances"]
                                                    if i["inconsistency"]), None)}
                                   for r in records if r["outcome"] == "engine inconsistency"],
        "timeouts": [{"index": r["index"], "id": r["id"], "split": r["split"],
                      "phase": (r.get("error") or {}).get("phase")}
                     for r in records if r["outcome"] == "timeout"],
    }
    return summary


def _fmt(x: float | None, digits: int = 1) -> str:
    if x is None:
        return "–"
    return f"{x:,.{digits}f}"


def markdown(s: dict[str, Any], top: int = 15) -> str:
    n = s["schemas"]
    lines = [f"## MaskBench, JSON Schema ({s.get('date', '')})", ""]
    if "vocab" in s:
        lines += [f"Vocabulary `{s['vocab']}` ({s.get('vocab_size', '?'):,} ids); data `{s.get('data')}`; "
                  f"selection: {s.get('selection')}; {s.get('workers')} worker(s), single-threaded each; "
                  f"timeout {s.get('timeout_s')} s, memory {s.get('memory_gb')} GiB per schema; "
                  f"token-table disk cache: {s.get('cache_dir')}; warm-up: {s.get('warmup')}; "
                  f"commit {str(s.get('git', {}).get('commit', '?'))[:10]}"
                  + (" (with uncommitted changes under constrained/)" if s.get("git", {}).get("dirty_paths") else "")
                  + f"; {s.get('machine', '')}"
                  + (f"; load average (1/5/15 min) {s['loadavg_at_start']} at start, {s.get('loadavg_at_end')} "
                     "at end" if s.get("loadavg_at_start") else "") + ".", ""]
    lines += ["| outcome | schemas | % |", "|---|---:|---:|"]
    for o in OUTCOMES:
        c = s["outcomes"][o]
        lines.append(f"| {o} | {c} | {100 * c / n if n else 0:.1f} |")
    lines.append(f"| **total** | **{n}** | 100 |")
    if s.get("schemas_without_tests"):
        lines += ["", f"{s['schemas_without_tests']} schemas have no test instance ({s['passing_without_tests']} "
                  "of them count as passing: they compiled)."]
    i = s["instances"]
    lines += ["", f"Instances (of schemas that compiled): valid accepted {i['valid_accepted']} / {i['valid']}; "
              f"invalid rejected {i['invalid_rejected']} / {i['invalid']} "
              f"(**{i['invalid_accepted']} invalid accepted**); engine inconsistencies {i['inconsistencies']}; "
              f"tokenization round-trip mismatches {i['tokenization_mismatches']}.", ""]
    t, b, bv = s["ttfm_ms"], s["tbm_us"], s["tbm_valid_us"]
    lines += ["| timing | n | p50 | p90 | p99 | p99.9 | max | mean |", "|---|---:|---:|---:|---:|---:|---:|---:|",
              f"| TTFM, compiled schemas (ms) | {t['n']} | {_fmt(t.get('p50'))} | {_fmt(t.get('p90'))} | "
              f"{_fmt(t.get('p99'))} | – | {_fmt(t.get('max'))} | {_fmt(t.get('mean'))} |",
              f"| TBM, all tokens (µs) | {b['n']:,} | {_fmt(b.get('p50'))} | {_fmt(b.get('p90'))} | "
              f"{_fmt(b.get('p99'))} | {_fmt(b.get('p999'))} | {_fmt(b.get('max'))} | {_fmt(b.get('mean'))} |",
              f"| TBM, tokens of valid instances (µs) | {bv['n']:,} | {_fmt(bv.get('p50'))} | "
              f"{_fmt(bv.get('p90'))} | {_fmt(bv.get('p99'))} | {_fmt(bv.get('p999'))} | {_fmt(bv.get('max'))} | "
              f"{_fmt(bv.get('mean'))} |", ""]
    cols = ["passing", "compile error", "validation error", "invalidation error", "engine inconsistency",
            "timeout", "crash"]
    lines += ["| split | schemas | " + " | ".join(cols) + " |", "|---|---:|" + "---:|" * len(cols)]
    for split, c in s["per_split"].items():
        lines.append(f"| {split} | {c['schemas']} | " + " | ".join(str(c[o]) for o in cols) + " |")
    lines += ["", f"Top refusal reasons (compile errors by class and keyword; {s['outcomes']['compile error']} "
              "schemas)" + (":" if s["top_refusals"] else ": none."), ""]
    if s["top_refusals"]:
        lines += ["| class | keyword | schemas | example (index: message) |", "|---|---|---:|---|"]
    for d in s["top_refusals"][:top]:
        msg = str(d["example"]).replace("|", "\\|").replace("\n", " ")[:160]
        lines.append(f"| {d['class']} | {d['keyword'] or '–'} | {d['schemas']} | {d['example_index']}: {msg} |")
    if len(s["top_refusals"]) > top:
        rest = sum(d["schemas"] for d in s["top_refusals"][top:])
        lines.append(f"| … {len(s['top_refusals']) - top} more | | {rest} | |")
    if s["crashes"]:
        lines += ["", "Crashes:", "", "| class | schemas | example (index: message) |", "|---|---:|---|"]
        for d in s["crashes"]:
            msg = str(d["example"]).replace("|", "\\|").replace("\n", " ")[:160]
            lines.append(f"| {d['class']} | {d['schemas']} | {d['example_index']}: {msg} |")
    for key, title in (("invalidation_errors", "Invalidation errors (invalid instance accepted)"),
                       ("engine_inconsistencies", "Engine inconsistencies"), ("timeouts", "Timeouts")):
        if s[key]:
            items = ", ".join(f"{d['index']} ({d['id']}" + (f", {d['phase']}" if d.get("phase") else "") + ")"
                              for d in s[key][:40])
            more = f" … and {len(s[key]) - 40} more" if len(s[key]) > 40 else ""
            lines += ["", f"{title}: {items}{more}."]
    return "\n".join(lines) + "\n"


def plots(records: Sequence[dict], summary: dict, out: Path) -> list[Path]:
    """Stacked outcome bars per split, TTFM CDF and TBM CDF (log axes)."""
    plt = pyplot()
    written = []
    colors = {"passing": "#2ca02c", "compile error": "#bbbbbb", "validation error": "#ff7f0e",
              "invalidation error": "#d62728", "engine inconsistency": "#9467bd", "timeout": "#1f77b4",
              "crash": "#000000"}
    splits = list(summary["per_split"])
    fig, ax = plt.subplots(figsize=(8, 0.32 * len(splits) + 1.6))
    left = np.zeros(len(splits))
    for o in OUTCOMES:
        frac = np.array([summary["per_split"][s][o] / summary["per_split"][s]["schemas"] for s in splits])
        ax.barh(range(len(splits)), frac, left=left, color=colors[o], label=o)
        left += frac
    ax.set_yticks(range(len(splits)), [f"{s} ({summary['per_split'][s]['schemas']})" for s in splits])
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel("fraction of schemas")
    ax.set_title(f"MaskBench JSON Schema outcomes per split ({summary['schemas']} schemas)")
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.06), ncol=4, fontsize=8, frameon=False)
    fig.tight_layout()
    written.append(save_figure(fig, out / f"{STEM}_outcomes.png"))

    def cdf(ax, values, label):
        a = np.sort(np.maximum(np.asarray(values, dtype=np.float64), 0.05))
        if a.size:
            ax.plot(a, np.arange(1, a.size + 1) / a.size, label=f"{label} (n={a.size:,})")

    def cdf_figure(name: str, series: dict[str, list[float]], xlabel: str, ylabel: str, title: str) -> None:
        fig, ax = plt.subplots(figsize=(7, 4))
        for label, values in series.items():
            cdf(ax, values, label)
        ax.set_xscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
        fig.tight_layout()
        written.append(save_figure(fig, out / f"{STEM}_{name}.png"))

    cdf_figure("ttfm", {
        "compiled schemas": [r["ttfm_s"] * 1e3 for r in records if r.get("ttfm_s") is not None],
        "passing schemas": [r["ttfm_s"] * 1e3 for r in records if r["outcome"] == "passing"],
    }, "TTFM: schema → grammar → compile → first mask (ms, log)", "fraction of schemas", "Time to first mask")
    cdf_figure("tbm", {
        "all tokens": [t for r in records for ts in r.get("tbm_us", []) for t in ts],
        "tokens of valid instances": [t for r in records
                                      for i, ts in zip(r.get("instances", []), r.get("tbm_us", []), strict=True)
                                      if i["valid"] for t in ts],
    }, "TBM: mask() + advance(token) (µs, log)", "fraction of tokens", "Time between masks, single thread")
    return written


def write_reports(records: Sequence[dict], summary: dict, out: Path, *, with_plots: bool = True) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    md = out / f"{STEM}.md"
    md.write_text(markdown(summary), encoding="utf-8")
    js = out / f"{STEM}.json"
    js.write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    written = [md, js]
    if with_plots:
        try:
            written += plots(records, summary, out)
        except ImportError:
            print("(matplotlib not installed: no plots)", file=sys.stderr)
    return written


# =============================================================================== selection and API

def select(records: Sequence[dict], *, every: int | None = None, per_split: int | None = None,
           limit: int | None = None, indices: Sequence[int] | None = None) -> list[dict]:
    """The schemas to run: ``every`` k-th (by file index), or ``per_split`` schemas per
    split spread evenly over that split's records, then the first ``limit``."""
    chosen = list(records)
    if indices is not None:
        wanted = set(indices)
        chosen = [r for r in chosen if r["index"] in wanted]
    if every:
        chosen = [r for r in chosen if r["index"] % every == 0]
    if per_split:
        by: dict[str | None, list[dict]] = defaultdict(list)
        for r in chosen:
            by[r.get("split")].append(r)
        keep: set[int] = set()
        for rs in by.values():
            m = len(rs)
            picks = range(m) if per_split >= m else sorted({int((j + 0.5) * m / per_split) for j in range(per_split)})
            keep.update(rs[p]["index"] for p in picks)
        chosen = [r for r in chosen if r["index"] in keep]
    if limit is not None:
        chosen = chosen[:limit]
    return chosen


def _vocab_file(vocab_path: str | os.PathLike[str], vocab, tmpdir: str) -> str:
    p = Path(vocab_path)
    if p.is_file() and p.suffix == ".npz":
        return str(p)
    f = Path(tmpdir) / "vocab.npz"
    vocab.save(f)
    return str(f)


def _meta(args_like: dict, vocab, vocab_path) -> dict[str, Any]:
    return {"date": time.strftime("%Y-%m-%d"), "vocab": str(vocab_path), "vocab_size": len(vocab),
            "vocab_hash": vocab.content_hash()[:16], **args_like,
            "machine": f"{platform.machine()} {os.cpu_count()} CPUs, Python {platform.python_version()}",
            "loadavg_at_start": _loadavg(), "git": _git_state()}


def _loadavg() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def run_sample(schemas: Sequence[dict], vocab_path: str | os.PathLike[str], *, workers: int = 1,
               timeout: float = 60.0, memory_gb: float = 4.0, out_dir: str | os.PathLike[str] | None = None,
               cache_dir: str | None = None, warmup: bool = True, recycle_after: int = 100,
               progress: bool = False, reports: bool = False) -> dict[str, Any]:
    """Run the benchmark on ``schemas`` (MaskBench records: ``schema``, ``tests``,
    optional ``split``/``id``/``index``) and return the summary dict; its extra key
    ``records`` holds the per-schema records (as written to the results file).

    ``vocab_path``: a Hugging Face tokenizer directory or a saved `TokenVocabulary`
    (``.npz``, greedy encoder).  ``out_dir``: where the results file (and with
    ``reports`` the Markdown/JSON/plots) go; a temporary directory if None.
    """
    tasks = []
    for k, r in enumerate(schemas):
        tasks.append({"index": r.get("index", k), "id": r.get("id", str(k)), "split": r.get("split", "sample"),
                      "schema": r["schema"], "tests": r["tests"]})
    vocab = load_vocabulary(vocab_path)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(out_dir) if out_dir is not None else Path(tmp)
        out.mkdir(parents=True, exist_ok=True)
        path = out / f"{STEM}.jsonl"
        path.unlink(missing_ok=True)
        run_benchmark(tasks, vocab, _vocab_file(vocab_path, vocab, tmp), path, workers=workers, timeout=timeout,
                      memory_gb=memory_gb, cache_dir=cache_dir, warmup=warmup, recycle_after=recycle_after,
                      progress=progress)
        records = list(read_results(path).values())
        meta = _meta({"data": "<run_sample>", "selection": f"{len(tasks)} given schemas", "workers": workers,
                      "timeout_s": timeout, "memory_gb": memory_gb, "cache_dir": str(cache_dir),
                      "warmup": warmup}, vocab, vocab_path)
        summary = summarize_records(records, meta)
        if reports:
            write_reports(records, summary, out)
    summary["records"] = sorted(records, key=lambda r: r["index"])
    return summary


# =============================================================================== CLI

def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(DEFAULT_DATA), help="MaskBench .jsonl(.gz) (default: %(default)s)")
    ap.add_argument("--vocab", default=str(DEFAULT_VOCAB),
                    help="HF tokenizer directory or saved TokenVocabulary .npz (default: %(default)s)")
    ap.add_argument("--limit", type=int, default=None, help="at most N schemas (after --every/--per-split)")
    sel = ap.add_mutually_exclusive_group()
    sel.add_argument("--every", type=int, default=None, metavar="K", help="every K-th schema of the file")
    sel.add_argument("--per-split", type=int, default=None, metavar="N",
                     help="N schemas per split, spread evenly over the split")
    ap.add_argument("--indices", default=None, help="comma-separated file indices (0-based) to run")
    ap.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")
    ap.add_argument("--timeout", type=float, default=60.0, help="wall seconds per schema (default 60)")
    ap.add_argument("--memory-gb", type=float, default=4.0, help="address-space limit per worker, GiB (default 4; 0: none)")
    ap.add_argument("--cache-dir", default="none",
                    help="token-table disk cache: 'none' (default), 'default' (compile_grammar's) or a path")
    ap.add_argument("--no-warmup", action="store_true", help="no warm-up compile in fresh workers")
    ap.add_argument("--recycle-after", type=int, default=100, help="replace a worker after N schemas (0: never)")
    ap.add_argument("--out", default=str(RESULTS_DIR), help="results directory (default: %(default)s)")
    ap.add_argument("--fresh", action="store_true", help="discard earlier results in --out and start over")
    ap.add_argument("--rerun", default="", metavar="OUTCOMES",
                    help="also run again the selected schemas whose recorded outcome is one of these "
                         "(comma-separated, e.g. 'timeout,crash'); the new record replaces the old")
    ap.add_argument("--summarize-only", action="store_true", help="only summarize the results file")
    ap.add_argument("--no-plots", action="store_true")
    args = ap.parse_args(argv)
    pin_numeric_threads()             # workers inherit it: one thread each

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results_path = out / f"{STEM}.jsonl"
    meta_path = out / f"{STEM}.meta.json"
    cache_dir = None if args.cache_dir == "none" else args.cache_dir

    all_records = [{"index": k, "id": r.get("id"), "split": r.get("split"), "schema": r["schema"],
                    "tests": r["tests"]} for k, r in enumerate(read_maskbench(args.data))]
    indices = [int(x) for x in args.indices.split(",")] if args.indices else None
    chosen = select(all_records, every=args.every, per_split=args.per_split, limit=args.limit, indices=indices)
    selection = ("all" if not (args.every or args.per_split or args.limit or indices) else
                 ", ".join(x for x in (f"every {args.every}th" if args.every else "",
                                       f"{args.per_split} per split" if args.per_split else "",
                                       f"indices {args.indices}" if indices else "",
                                       f"first {args.limit}" if args.limit else "") if x))
    selection += f" ({len(chosen)} of {len(all_records)} schemas)"
    del all_records

    if args.fresh and not args.summarize_only:
        results_path.unlink(missing_ok=True)
        meta_path.unlink(missing_ok=True)
    config = {"protocol": PROTOCOL, "data": os.path.abspath(args.data), "vocab": os.path.abspath(args.vocab),
              "timeout_s": args.timeout, "memory_gb": args.memory_gb, "cache_dir": args.cache_dir,
              "warmup": not args.no_warmup}
    done = read_results(results_path)

    if args.summarize_only:
        vocab_size = vocab_hash = None
        if meta_path.exists():
            old = json.loads(meta_path.read_text())
            vocab_size, vocab_hash = old.get("vocab_size"), old.get("vocab_hash")
            config.update({k: old[k] for k in ("vocab", "timeout_s", "memory_gb", "cache_dir", "warmup", "workers")
                           if k in old})
        meta = {"date": time.strftime("%Y-%m-%d"), **config, "vocab_size": vocab_size, "vocab_hash": vocab_hash,
                "selection": selection,
                "machine": f"{platform.machine()} {os.cpu_count()} CPUs, Python {platform.python_version()}",
                "git": json.loads(meta_path.read_text()).get("git", {}) if meta_path.exists() else {}}
        if meta_path.exists():
            old = json.loads(meta_path.read_text())
            meta.update({k: old[k] for k in ("loadavg_at_start", "loadavg_at_end", "date") if k in old})
    else:
        vocab = load_vocabulary(args.vocab)
        if meta_path.exists() and done:
            old = json.loads(meta_path.read_text())
            for k in ("protocol", "data", "timeout_s", "memory_gb", "cache_dir", "warmup"):
                if old.get(k) != config[k]:
                    sys.exit(f"{results_path} was made with {k}={old.get(k)!r}, not {config[k]!r}: use --fresh "
                             "or another --out")
            if old.get("vocab_hash") != vocab.content_hash()[:16]:
                sys.exit(f"{results_path} was made with another vocabulary: use --fresh or another --out")
        meta = _meta({**config, "selection": selection, "workers": args.workers}, vocab, args.vocab)
        rerun = {o.strip() for o in args.rerun.split(",") if o.strip()}
        if rerun - set(OUTCOMES):
            sys.exit(f"--rerun: unknown outcome(s) {sorted(rerun - set(OUTCOMES))}; outcomes: {', '.join(OUTCOMES)}")
        todo = [r for r in chosen if r["index"] not in done or done[r["index"]]["outcome"] in rerun]
        if todo or not meta_path.exists():
            meta_path.write_text(json.dumps(meta, indent=2) + "\n")
        else:  # nothing to run: the conditions are those of the run that made the records
            old = json.loads(meta_path.read_text())
            meta.update({k: old[k] for k in ("date", "git", "loadavg_at_start", "loadavg_at_end") if k in old})
        print(f"{len(chosen)} schemas selected, {len(chosen) - len(todo)} already in {results_path}, "
              f"{len(todo)} to run; vocabulary {args.vocab} ({len(vocab):,} ids)", file=sys.stderr)
        if todo:
            with tempfile.TemporaryDirectory() as tmp:
                run_benchmark(todo, vocab, _vocab_file(args.vocab, vocab, tmp), results_path,
                              workers=args.workers, timeout=args.timeout, memory_gb=args.memory_gb,
                              cache_dir=cache_dir, warmup=not args.no_warmup, recycle_after=args.recycle_after)
        meta["loadavg_at_end"] = _loadavg()
        meta_path.write_text(json.dumps(meta, indent=2) + "\n")
        done = read_results(results_path)

    wanted = {r["index"] for r in chosen}
    records = [r for i, r in done.items() if i in wanted]
    missing = len(wanted) - len(records)
    if missing:
        meta["selection"] += f"; {missing} not run yet"
    summary = summarize_records(records, meta)
    written = write_reports(records, summary, out, with_plots=not args.no_plots)
    print()
    print(markdown(summary))
    print("written: " + ", ".join(str(p) for p in written), file=sys.stderr)


if __name__ == "__main__":
    main()
