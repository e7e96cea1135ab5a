"""Where the slowest tokens' time goes: our engine alone on MaskBench dev schemas.

The per-token loop of ``maskbench_json_schema.py --vs-llguidance`` for our engine:
every K-th dev schema, compiled afresh (members in declared order, as there), each
valid instance read token by token (``mask()`` + ``advance()``, EOS included), after
the same warm-up.  With llguidance installed, only schemas it compiles are used, and
it is timed on the same tokens right after ours (one instance each), so its per-token
p99 over the same tokens is the threshold a slow token passes; without it,
``--threshold-us``.

Two passes from the same warmed-up process state (the second one a forked copy, so
its caches start where the first one's did):

1. plain timings: our p50 / p90 / p99, the share of tokens above the threshold, how
   many of those are in a schema's first instance, and the token texts most often
   above it;
2. the same loop with timers around each part of the engine, attributing the time of
   the tokens that were slow in pass 1: Earley sets of new parser nodes, token tables
   of new DFA states, crossing scans, terminal automata built on first use, value
   checks and the garbage collector's pauses.  The rest is the crossing walk, mask
   unions and stepping, in Python.  The timers add their own cost: read the shares,
   not the totals.

    python benchmarks/slow_tokens.py --every 9          # ~1 minute

Writes ``<out>/slow_tokens.{json,md}``.
"""

from __future__ import annotations

import _common  # noqa: F401  (first: pins numeric libraries to one thread)

import argparse  # noqa: E402
import functools  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import multiprocessing as mp  # noqa: E402
import time  # noqa: E402
from collections import Counter, defaultdict  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
from _common import (  # noqa: E402
    add_dataset_arguments, load_vocabulary, read_maskbench, time_tokens, warm_up_ours)
from tqdm import tqdm  # noqa: E402

Key = tuple[int, int, int]      # (schema index in the sample, instance, token)


def _parts() -> list[tuple[str, Any, str]]:
    """The timed parts: (part, owner, attribute), owner a class or a module."""
    import constrained.automata.byte_dfa as byte_dfa
    import constrained.engine.token_tables as token_tables
    from constrained.engine.crossing import CrossingSet, CrossingSets
    from constrained.engine.earley import EarleyParser
    from constrained.json_schema.value_checks import JsonValueChecks

    return [("Earley sets of new parser nodes", EarleyParser, "_intern"),
            ("token tables of new DFA states", token_tables.TokenTables, "_scan_table"),
            ("token tables of new DFA states", token_tables, "derive_table"),
            ("token tables of new DFA states", token_tables, "residual_digest"),
            ("crossing scans", CrossingSet, "_scan"),
            ("crossing scans", CrossingSets, "intern_set"),
            ("terminal automata built on first use", byte_dfa, "_compile_terminal"),
            ("value checks", JsonValueChecks, "candidates"),
            ("value checks", JsonValueChecks, "refused")]


class PartTimers:
    """Timers around the engine's parts (`_parts`; the outermost timed call counts, so a
    part called inside another is the outer one's) and the collector's pauses."""

    def __init__(self) -> None:
        self.spent: defaultdict[str, float] = defaultdict(float)   # part -> seconds
        self._inside: str | None = None
        self._gc_start = 0.0
        for part, owner, name in _parts():
            setattr(owner, name, self._timed(part, getattr(owner, name)))
        gc.callbacks.append(self._on_gc)

    def _timed(self, part: str, fn: Callable) -> Callable:
        def timed(*args, **kwargs):
            if self._inside is not None:
                return fn(*args, **kwargs)
            self._inside = part
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.spent[part] += time.perf_counter() - t0
                self._inside = None

        # (the signature stays the wrapped one's: the checked matcher reads it)
        functools.update_wrapper(timed, fn)
        for attr in ("cache_info", "cache_clear"):
            if hasattr(fn, attr):
                setattr(timed, attr, getattr(fn, attr))
        return timed

    def _on_gc(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._gc_start = time.perf_counter()
        else:
            self.spent["the collector's pauses"] += time.perf_counter() - self._gc_start


def _loop(engine, records: list[dict], vocab, eos: int, llg=None, timers: PartTimers | None = None,
          keep: frozenset[Key] | set[Key] = frozenset(), progress: bool = True) -> dict[str, Any]:
    """The per-token loop; with ``timers``, the parts' time of the tokens in ``keep``."""
    clock = time.perf_counter
    times: list[float] = []
    keys: list[Key] = []
    tokens: list[int] = []          # the token each time is of
    theirs: list[float] = []
    by_part: defaultdict[str, float] = defaultdict(float)
    bitmask = None
    if llg is not None:
        import llguidance.numpy as lln

        bitmask = lln.allocate_token_bitmask(1, llg.tokenizer.vocab_size)
    for si, rec in enumerate(tqdm(records, desc="slow tokens", unit="schema", disable=not progress)):
        try:
            compiled = engine.compile(rec["schema"]).compiled
        except Exception:  # noqa: BLE001 - a schema our engine refuses is left out
            continue
        for k, test in enumerate(t for t in rec.get("tests", []) if t.get("valid")):
            toks = [int(t) for t in vocab.encode(json.dumps(test["data"]))] + [eos]
            m = compiled.matcher()
            for j, tok in enumerate(toks):
                before = dict(timers.spent) if timers is not None and (si, k, j) in keep else None
                t0 = clock()
                m.mask()
                ok = m.advance(tok)
                times.append(clock() - t0)
                keys.append((si, k, j))
                tokens.append(tok)
                if before is not None:
                    for part, spent in timers.spent.items():
                        by_part[part] += spent - before.get(part, 0.0)
                if not ok:
                    break
            if llg is not None:
                def llguidance_step(t: int, m=llg.compile(rec["schema"])) -> bool:
                    lln.fill_next_token_bitmask(m, bitmask, 0)
                    return m.consume_token(t)

                theirs += time_tokens(llguidance_step, toks)
    return {"times": times, "keys": keys, "tokens": tokens, "theirs": theirs, "by_part": dict(by_part)}


def _attribute(engine, records, vocab, eos, keep: set[Key]) -> dict[str, Any]:
    """Pass 2 (in a forked copy of the warmed-up process): the loop with `PartTimers`."""
    timers = PartTimers()
    out = _loop(engine, records, vocab, eos, timers=timers, keep=keep, progress=False)
    return {"by_part": out["by_part"],
            "slow_total": float(sum(t for t, k in zip(out["times"], out["keys"]) if k in keep))}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    import serving_batch as sb

    ap = argparse.ArgumentParser(description="where the slowest tokens' time goes (our engine alone)")
    ap.add_argument("--every", type=int, default=9, help="every K-th dev schema (default 9)")
    ap.add_argument("--limit", type=int, default=None, help="at most this many schemas of the sample")
    ap.add_argument("--threshold-us", type=float, default=None,
                    help="a slow token's time (default: llguidance's p99 on the same tokens)")
    ap.add_argument("--no-llguidance", action="store_true", help="do not run llguidance even if installed")
    add_dataset_arguments(ap)
    a = ap.parse_args(argv)
    vocab = load_vocabulary(a.vocab)
    eos = int(min(vocab.eos_ids))
    records = list(read_maskbench(a.data))[::a.every][:a.limit]
    llg = None
    if not a.no_llguidance:
        try:
            llg = sb.LLGuidanceEngine(a.vocab, vocab.eos_ids)
        except ImportError:
            llg = None
    if llg is not None:                     # only the schemas both engines compile
        usable = []
        for rec in records:
            try:
                llg.compile(rec["schema"])
            except Exception:  # noqa: BLE001 - a schema llguidance refuses is left out
                continue
            usable.append(rec)
        records = usable
    if llg is None and a.threshold_us is None:
        ap.error("without llguidance, give --threshold-us")
    engine = sb.OurEngine(vocab)
    warm_up_ours(engine, vocab)             # as the side-by-side benchmark does
    gc.collect()
    gc.freeze()                             # as the side-by-side benchmark does (undone at the end)
    # pass 2 forks from here, before pass 1 touches any cache: both start alike
    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    go_r, go_w = ctx.Pipe(duplex=False)

    def second_pass() -> None:
        keep = go_r.recv()
        child.send(_attribute(engine, records, vocab, eos, keep))

    proc = ctx.Process(target=second_pass)
    proc.start()
    try:
        first = _loop(engine, records, vocab, eos, llg=llg)
        ours = np.array(first["times"]) * 1e6
        threshold = (a.threshold_us if a.threshold_us is not None
                     else float(np.percentile(first["theirs"], 99)) * 1e6)
        slow = ours > threshold
        keep = {k for k, s in zip(first["keys"], slow) if s}
        go_w.send(keep)
        parts = parent.recv()
        proc.join()
    finally:
        if proc.is_alive():                 # pass 1 failed: the second pass waits for nothing
            proc.terminate()
            proc.join()
        gc.unfreeze()
    texts = Counter(b"<EOS>" if tok == eos else vocab.token_bytes[tok]
                    for tok, is_slow in zip(first["tokens"], slow) if is_slow)
    total = parts["slow_total"]
    shares = {p: s / total for p, s in sorted(parts["by_part"].items(), key=lambda kv: -kv[1])} if total else {}
    res = {"meta": {"date": time.strftime("%Y-%m-%d %H:%M"), "every": a.every, "schemas": len(records),
                    "threshold_us": threshold, "threshold_from": "--threshold-us" if a.threshold_us is not None
                    else "llguidance p99, same tokens"},
           "ours_us": {str(q): float(np.percentile(ours, q)) for q in (50, 90, 99)},
           "llguidance_us": ({str(q): float(np.percentile(first["theirs"], q)) * 1e6 for q in (50, 90, 99)}
                             if first["theirs"] else None),
           "tokens": int(ours.size), "slow_tokens": int(slow.sum()),
           "slow_in_first_instance": int(sum(1 for k in keep if k[1] == 0)),
           "slow_token_texts": [[t.decode("utf-8", "replace"), n] for t, n in texts.most_common(15)],
           "slow_time_shares": shares}
    lines = [f"# Where the slowest tokens' time goes ({res['meta']['date']})", "",
             f"`python benchmarks/slow_tokens.py --every {a.every}`: {len(records)} schemas, "
             f"{res['tokens']:,} tokens; our per-token p50 / p90 / p99 "
             + " / ".join(f"{res['ours_us'][q]:.1f}" for q in ("50", "90", "99")) + " µs"
             + ("; llguidance's on the same tokens " + " / ".join(f"{res['llguidance_us'][q]:.1f}"
                                                                 for q in ("50", "90", "99")) + " µs"
                if res["llguidance_us"] else "") + ".", "",
             f"Slow tokens (over {threshold:.0f} µs, {res['meta']['threshold_from']}): {res['slow_tokens']:,} "
             f"({100 * res['slow_tokens'] / max(1, res['tokens']):.2f}%), {res['slow_in_first_instance']:,} of them "
             "in a schema's first instance.", "",
             "| part of the slow tokens' time (timed pass) | share |", "|---|---:|"]
    lines += [f"| {p} | {100 * s:.1f}% |" for p, s in shares.items()]
    lines += [f"| the rest (crossing walk, mask unions, stepping) | {100 * max(0.0, 1 - sum(shares.values())):.1f}% |",
              "", "Most frequent slow tokens: " + ", ".join(f"`{t!r}` {n}" for t, n in res["slow_token_texts"])]
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "slow_tokens.json").write_text(json.dumps(res, indent=1))
    (out / "slow_tokens.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return res


if __name__ == "__main__":
    main()
