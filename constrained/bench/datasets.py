"""Benchmark data: dataset loaders, vocabularies, default locations, thread pinning.

* `read_maskbench(path)`: MaskBench records (``.jsonl`` / ``.jsonl.gz``: ``id``,
  ``split``, ``schema``, ``tests``);
* `read_jsonschemabench(path)`: JSONSchemaBench records (``{"json_schema",
  "unique_id"}``, the schema as a JSON string or object; a ``.json`` list, or JSON
  lines);
* `read_schemas(path)`: either, detected from the first record, as
  ``{"id", "split", "schema", "tests"}`` dicts; `DatasetError` (typed, says what
  and where) for a missing or malformed file.

Example:
    >>> import json, tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "Github_easy.jsonl"
    >>> _ = p.write_text(json.dumps({"json_schema": '{"type": "integer"}', "unique_id": "a1"}) + "\\n")
    >>> [(r["id"], r["split"], r["schema"]) for r in read_schemas(p)]
    [('a1', 'Github_easy', {'type': 'integer'})]
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from constrained.bench.results import distribution
from constrained.errors import ConstrainedError

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared" / "data"
DEFAULT_MASKBENCH = SHARED / "maskbench" / "dev.jsonl.gz"
DEFAULT_VOCAB = SHARED / "tokenizers" / "llama3"
DEFAULT_SUITE = SHARED / "json-schema-test-suite"
DEFAULT_RESULTS = REPO / "benchmarks" / "results" if (REPO / "benchmarks").is_dir() else Path("bench_results")


class DatasetError(ConstrainedError, ValueError):
    """A benchmark data file is missing or malformed (names the file and the line)."""


def pin_numeric_threads() -> None:
    """One thread per numeric library in this process and the processes it starts
    (set before spawning benchmark workers, so they do not oversubscribe the CPUs)."""
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "RAYON_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def load_vocabulary(path: str | os.PathLike[str]):
    """The vocabulary at ``path``: a Hugging Face tokenizer directory (its own encoder,
    no special tokens) or a `TokenVocabulary.save` ``.npz`` file."""
    from constrained import TokenVocabulary

    p = Path(path)
    if p.is_dir():
        from transformers import AutoTokenizer

        return TokenVocabulary.from_hf(AutoTokenizer.from_pretrained(str(p)))
    return TokenVocabulary.load(p)


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    if not path.is_file():
        raise DatasetError(f"{path}: no such data file")
    opener = gzip.open if str(path).endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if line.strip():
                    yield n, line
    except (OSError, UnicodeDecodeError) as e:
        raise DatasetError(f"{path}: cannot read: {e}") from None


def _parse(path: Path, n: int, line: str) -> dict:
    try:
        rec = json.loads(line)
    except json.JSONDecodeError as e:
        raise DatasetError(f"{path}:{n}: not JSON: {e.msg}") from None
    if not isinstance(rec, dict):
        raise DatasetError(f"{path}:{n}: a record must be a JSON object, not {type(rec).__name__}")
    return rec


def read_maskbench(path: str | os.PathLike[str]) -> Iterator[dict]:
    """MaskBench records, in file order (``id``, ``split``, ``schema``, ``tests``)."""
    p = Path(path)
    for n, line in _lines(p):
        rec = _parse(p, n, line)
        if "schema" not in rec:
            raise DatasetError(f"{p}:{n}: a MaskBench record needs a 'schema'")
        yield rec


def _jsonschemabench_record(p: Path, where: str, rec: dict, index: int) -> dict:
    schema = rec.get("json_schema")
    if schema is None:
        raise DatasetError(f"{where}: a JSONSchemaBench record needs 'json_schema'")
    if isinstance(schema, str):
        try:
            schema = json.loads(schema)
        except json.JSONDecodeError as e:
            raise DatasetError(f"{where}: 'json_schema' is not JSON: {e.msg}") from None
    split = rec.get("split") or p.name.split(".")[0]
    return {"id": str(rec.get("unique_id", index)), "split": split, "schema": schema, "tests": rec.get("tests", [])}


def read_jsonschemabench(path: str | os.PathLike[str]) -> Iterator[dict]:
    """JSONSchemaBench records as ``{"id", "split", "schema", "tests"}`` (the split is the
    record's ``split`` or the file name's stem, as the dataset has one file per split)."""
    p = Path(path)
    if str(p).endswith(".json"):
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise DatasetError(f"{p}: no such data file") from None
        except json.JSONDecodeError as e:
            raise DatasetError(f"{p}: not JSON: {e.msg}") from None
        if not isinstance(data, list):
            raise DatasetError(f"{p}: a .json dataset must be a list of records")
        for i, rec in enumerate(data):
            if not isinstance(rec, dict):
                raise DatasetError(f"{p}[{i}]: a record must be a JSON object")
            yield _jsonschemabench_record(p, f"{p}[{i}]", rec, i)
        return
    for i, (n, line) in enumerate(_lines(p)):
        yield _jsonschemabench_record(p, f"{p}:{n}", _parse(p, n, line), i)


def read_schemas(path: str | os.PathLike[str]) -> list[dict]:
    """All records of a MaskBench or JSONSchemaBench file (detected from the first one)."""
    p = Path(path)
    if str(p).endswith(".json"):
        return list(read_jsonschemabench(p))
    first = next(_lines(p), None)
    if first is None:
        raise DatasetError(f"{p}: the file has no records")
    rec = _parse(p, *first)
    if "schema" in rec:
        return [{"id": r.get("id", i), "split": r.get("split", "all"), "schema": r["schema"],
                 "tests": r.get("tests", [])} for i, r in enumerate(read_maskbench(p))]
    if "json_schema" in rec:
        return list(read_jsonschemabench(p))
    raise DatasetError(f"{p}:{first[0]}: neither a MaskBench record ('schema') nor a JSONSchemaBench one "
                       f"('json_schema')")


def summarize(times: Sequence[float] | np.ndarray) -> dict[str, float]:
    """Count, mean, p50/p90/p99/p99.9 and max of durations given in seconds, in µs."""
    d = distribution(np.asarray(times, dtype=np.float64) * 1e6, (50, 90, 99, 99.9))
    if d["n"] == 0:
        return {"tokens": 0}
    return {"tokens": d["n"], "mean_us": d["mean"], "p50_us": d["p50"], "p90_us": d["p90"], "p99_us": d["p99"],
            "p999_us": d["p999"], "max_us": d["max"]}
