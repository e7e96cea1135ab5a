"""Shared setup of the benchmark scripts in this directory: numeric libraries pinned
to one thread (before numpy loads), this checkout's default data paths, and the
loaders of `constrained.bench.datasets`."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # works from a checkout without `pip install -e .`
    try:
        import constrained  # noqa: F401
    except ImportError:
        sys.path.insert(0, str(REPO))

from constrained.bench.datasets import pin_numeric_threads  # noqa: E402

pin_numeric_threads()

from constrained.bench.datasets import (  # noqa: E402,F401
    DEFAULT_MASKBENCH as DEFAULT_DATA,
    DEFAULT_RESULTS as RESULTS_DIR,
    DEFAULT_VOCAB,
    REPO as _REPO,
    load_vocabulary,
    read_maskbench,
    summarize,
)


def time_tokens(step, tokens) -> list[float]:
    """The time of ``step(token)`` (one engine's mask and advance) for each of ``tokens``,
    until ``step`` refuses one (its time included): the per-token loop the side-by-side
    benchmarks time both engines with."""
    import time

    clock = time.perf_counter
    out: list[float] = []
    for t in tokens:
        t0 = clock()
        ok = step(t)
        out.append(clock() - t0)
        if not ok:
            break
    return out


def add_dataset_arguments(ap) -> None:
    """``--data`` (MaskBench records), ``--vocab`` (tokenizer directory) and ``--out``
    (results directory), with this checkout's defaults."""
    ap.add_argument("--data", default=str(DEFAULT_DATA))
    ap.add_argument("--vocab", default=str(DEFAULT_VOCAB))
    ap.add_argument("--out", default=str(RESULTS_DIR))


def warm_up_ours(engine, vocab) -> None:
    """What the side-by-side benchmarks do before timing our engine, as MaskBench's
    workers and a server at start do: `constrained.warm_up`, then MaskBench's two warm-up
    schemas compiled and read through (``engine``: `serving_batch.OurEngine`)."""
    import json

    from constrained import warm_up
    from constrained.bench.maskbench import WARMUP

    warm_up(vocab, cache_dir=None)
    for schema, inst in WARMUP:
        m = engine.compile(schema)
        for t in vocab.encode(json.dumps(inst)):
            m.mask()
            m.advance(int(t))
