"""Helpers shared by the MaskBench scripts (``maskbench_grammars.py``,
``maskbench_json_schema.py``): single-thread setup, default paths, vocabulary
loading, the MaskBench data reader and percentile summaries.

Import it before numpy: it pins the numeric libraries to one thread.
"""

from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "RAYON_NUM_THREADS",
           "TOKENIZERS_PARALLELISM"):
    os.environ.setdefault(_v, "false" if _v == "TOKENIZERS_PARALLELISM" else "1")

import gzip  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
from collections.abc import Iterator, Sequence  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # works from a checkout without `pip install -e .`
    try:
        import constrained  # noqa: F401
    except ImportError:
        sys.path.insert(0, str(REPO))

from constrained import TokenVocabulary  # noqa: E402

DEFAULT_VOCAB = REPO.parent / "shared/data/tokenizers/llama3"
DEFAULT_DATA = REPO.parent / "shared/data/maskbench/dev.jsonl.gz"
RESULTS_DIR = REPO / "benchmarks/results"


def load_vocabulary(path: str | os.PathLike[str]) -> TokenVocabulary:
    """The vocabulary at ``path``, with its canonical encoder.

    A directory is a Hugging Face tokenizer (``TokenVocabulary.from_hf``; its
    ``encode`` is the tokenizer's own, no special tokens added); a ``.npz`` file is
    a `TokenVocabulary.save` file of a vocabulary built by ``from_token_bytes``
    (greedy longest-match encoder).
    """
    p = Path(path)
    if p.is_dir():
        from transformers import AutoTokenizer

        return TokenVocabulary.from_hf(AutoTokenizer.from_pretrained(str(p)))
    return TokenVocabulary.load(p)


def read_maskbench(path: str | os.PathLike[str]) -> Iterator[dict]:
    """The records of a MaskBench ``.jsonl`` / ``.jsonl.gz`` file, in file order.

    Each record: ``id``, ``split`` (the source collection, e.g. ``Github_easy``),
    ``schema``, ``tests`` (``[{"description", "valid", "data", ...}]``), ``meta``.
    """
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


def summarize(times: Sequence[float] | np.ndarray) -> dict[str, float]:
    """Count, mean, p50/p90/p99/p99.9 and max of durations given in seconds, in µs."""
    a = np.asarray(times, dtype=np.float64) * 1e6
    if a.size == 0:
        return {"tokens": 0}
    return {"tokens": int(a.size), "mean_us": float(a.mean()), "p50_us": float(np.percentile(a, 50)),
            "p90_us": float(np.percentile(a, 90)), "p99_us": float(np.percentile(a, 99)),
            "p999_us": float(np.percentile(a, 99.9)), "max_us": float(a.max())}
