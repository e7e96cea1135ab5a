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
