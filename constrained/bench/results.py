"""Benchmark results, one module for every benchmark: JSON-lines records (resume),
percentiles, markdown tables and plots.

* `read_records(path)`: the records of a JSON-lines results file.  A half-written
  last line (no final newline: the run was killed while writing it) is cut off the
  file, so a resumed run appends its next record on a line of its own; a line that
  is not JSON is skipped.  Every benchmark resumes through it.
* `percentiles(values, qs)`: ``{"p50": ..., "p99.9" as "p999": ...}``, None where
  there is no value; `distribution(values, qs)` adds ``n``, ``mean`` and ``max``.
* `markdown_table(columns, rows, align)`: the lines of a markdown table.
* `pyplot()` / `save_figure(fig, path)`: matplotlib without a display, figures
  written at the benchmarks' common resolution and closed.

Example:
    >>> import pathlib, tempfile
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "r.jsonl"
    >>> _ = p.write_text('{"index": 0}\\n{"index": 1}\\n{"ind')
    >>> read_records(p), p.read_text()
    ([{'index': 0}, {'index': 1}], '{"index": 0}\\n{"index": 1}\\n')
    >>> percentiles([3.0, 1.0, None, 2.0], (50, 99.9))
    {'p50': 2.0, 'p999': 2.998}
    >>> distribution([], (50,))
    {'n': 0}
    >>> print("\\n".join(markdown_table(["name", "n"], [["a", 1]], "lr")))
    | name | n |
    |---|---:|
    | a | 1 |
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

DPI = 120


def read_records(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The records of JSON-lines results file ``path`` in file order (none if it does
    not exist); a torn last line is cut off the file (see the module docstring)."""
    p = Path(path)
    if not p.exists():
        return []
    data = p.read_bytes()
    if data and not data.endswith(b"\n"):
        cut = data.rfind(b"\n") + 1
        with open(p, "r+b") as f:
            f.truncate(cut)
        data = data[:cut]
    out = []
    for line in data.decode("utf-8").splitlines():
        if line.strip():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return out


def _key(q: float) -> str:
    return f"p{q:g}".replace(".", "")


def _values(values: Iterable[float | None] | np.ndarray) -> np.ndarray:
    if isinstance(values, np.ndarray):
        return values.astype(np.float64, copy=False)
    return np.asarray([v for v in values if v is not None], dtype=np.float64)


def percentiles(values: Iterable[float | None] | np.ndarray, qs: Sequence[float] = (50, 90, 99)
                ) -> dict[str, float | None]:
    """``{"p<q>": percentile}`` of the values that are not None (``p99.9`` is keyed
    ``p999``); None where there is no value."""
    a = _values(values)
    return {_key(q): (float(np.percentile(a, q)) if a.size else None) for q in qs}


def distribution(values: Iterable[float | None] | np.ndarray, qs: Sequence[float]) -> dict[str, float]:
    """``n``, ``mean``, ``max`` and `percentiles` of the values; ``{"n": 0}`` for none."""
    a = _values(values)
    if a.size == 0:
        return {"n": 0}
    out: dict[str, float] = {"n": int(a.size), "mean": float(a.mean()), "max": float(a.max())}
    for q in qs:
        out[_key(q)] = float(np.percentile(a, q))
    return out


def markdown_table(columns: Sequence[str], rows: Iterable[Sequence[object]], align: str = "") -> list[str]:
    """The lines of a markdown table; ``align``: one letter per column, ``l`` (left,
    the default) or ``r`` (right)."""
    spec = align.ljust(len(columns), "l")
    lines = ["| " + " | ".join(columns) + " |", "|" + "".join("---:|" if a == "r" else "---|" for a in spec)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return lines


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the file-only Agg backend (ImportError without matplotlib)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Any, path: Path, *, dpi: int = DPI) -> Path:
    """Write ``fig`` to ``path`` and close it."""
    import matplotlib.pyplot as plt

    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path
