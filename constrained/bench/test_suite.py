"""JSON Schema Test Suite (draft 2020-12) compliance per keyword file.

Every test group's schema is compiled (formats as annotations, the suite's
remote documents known, as the suite assumes) for a byte-level vocabulary and
each instance's ``json.dumps`` text is checked with ``accepts_bytes`` (the same
check the token-by-token matcher makes).  A group *passes* when every instance
is decided right (a schema refused as unsatisfiable passes when all its
instances are invalid); *fails* when a valid instance is rejected; *refused*
when the compiler raises a typed error.  An accepted invalid instance is listed
and makes the script exit 1.

    constrained bench test-suite [--suite DIR] [--out benchmarks/results]
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path

from tqdm import tqdm

from constrained import TokenVocabulary, compile_grammar
from constrained.bench.datasets import DEFAULT_RESULTS, DEFAULT_SUITE  # noqa: E402
from constrained.bench.results import markdown_table
from constrained.errors import ConstrainedError, UnsatisfiableSchemaError
from constrained.json_schema.compiler import compile_json_schema


def suite_documents(suite: Path) -> dict[str, object]:
    remotes = suite / "remotes"
    return {f"http://localhost:1234/{p.relative_to(remotes).as_posix()}": json.loads(p.read_text())
            for p in sorted(remotes.rglob("*.json"))} if remotes.is_dir() else {}


def run(suite: Path) -> tuple[dict[str, collections.Counter], list[str], list[str]]:
    vocab = TokenVocabulary.from_token_bytes([bytes([b]) for b in range(1, 256)] + [b""], eos_ids=[255])
    documents = suite_documents(suite)
    per: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    accepted_invalid: list[str] = []
    details: list[str] = []
    files = sorted((suite / "tests" / "draft2020-12").glob("*.json"))
    for path in tqdm(files, desc="test suite", unit="file"):
        for group in json.loads(path.read_text()):
            name = f"{path.stem}: {group['description']}"
            try:
                cg = compile_grammar(compile_json_schema(group["schema"], formats="annotation",
                                                         documents=documents).grammar, vocab, cache_dir=None)
            except UnsatisfiableSchemaError as e:
                ok = not any(case["valid"] for case in group["tests"])
                per[path.stem]["pass" if ok else "refused"] += 1
                if not ok:
                    details.append(f"refused: {name}: {e}")
                continue
            except ConstrainedError as e:
                per[path.stem]["refused"] += 1
                details.append(f"refused: {name}: {type(e).__name__}: {e}")
                continue
            ok = True
            for case in group["tests"]:
                got = cg.accepts_bytes(json.dumps(case["data"]).encode())
                if got and not case["valid"]:
                    accepted_invalid.append(f"{name}: {case['description']}")
                if got != case["valid"]:
                    ok = False
                    if case["valid"]:
                        details.append(f"valid rejected: {name}: {case['description']}")
            per[path.stem]["pass" if ok else "fail"] += 1
    return per, accepted_invalid, details


def table(per: dict[str, collections.Counter]) -> str:
    total: collections.Counter = collections.Counter()
    rows: list[list[object]] = []
    for k, c in sorted(per.items()):
        total.update(c)
        rows.append([k, sum(c.values()), c["pass"], c["fail"], c["refused"]])
    n = sum(total.values())
    rows.append(["**all**", f"**{n}**", f"**{total['pass']}** ({100 * total['pass'] / max(n, 1):.1f}%)",
                 f"**{total['fail']}**", f"**{total['refused']}**"])
    return "\n".join(markdown_table(["keyword file", "groups", "pass", "fail (valid rejected)", "refused"], rows,
                                     "lrrrr"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", default=str(DEFAULT_SUITE))
    ap.add_argument("--out", default=str(DEFAULT_RESULTS))
    args = ap.parse_args(argv)
    suite = Path(args.suite)
    if not (suite / "tests" / "draft2020-12").is_dir():
        print(f"no draft2020-12 tests under {suite}", file=sys.stderr)
        return 2
    per, bad, details = run(suite)
    text = table(per) + f"\n\nInvalid instances accepted: {len(bad)}.\n\n" + "\n".join(f"- {d}" for d in details)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "json_schema_test_suite.md").write_text(text + "\n")
    print(text)
    for b in bad:
        print("ACCEPTED INVALID:", b, file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
