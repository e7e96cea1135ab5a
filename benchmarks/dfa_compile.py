"""Regex -> byte DFA construction time over the terminals of real JSON Schemas.

Takes ``--schemas`` schemas of MaskBench (``../shared/data/maskbench/dev.jsonl.gz``,
shuffled with ``--seed``), builds ``Grammar.from_json_schema(schema,
property_order="any")`` for each, and collects their distinct terminals
``(regex, also, excluding)``.  Then times compiling all of them from scratch
(``compile_terminal``'s and ``compile_regex``'s caches cleared before each round,
so regexes shared by several terminals are compiled once per round, as in one
process compiling a batch).

``--reference FILE`` loads another copy of ``byte_dfa.py`` (e.g. the previous
commit's: ``git show HEAD~1:constrained/automata/byte_dfa.py > /tmp/old.py``) and
alternates rounds between the two, checking that every digest is the same.
Times are CPU seconds of this process (``time.process_time``): steadier than wall
time on a shared machine.
``--profile`` prints a cProfile of one round of the current module.

    python benchmarks/dfa_compile.py --schemas 200 --rounds 3 [--reference /tmp/old.py] [--profile]
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from constrained.automata import byte_dfa  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "maskbench" / "dev.jsonl.gz"


def load_terminals(path: Path, count: int, seed: int) -> list[tuple[str, tuple[str, ...], tuple[str, ...]]]:
    from constrained import Grammar

    with gzip.open(path, "rt") as f:
        schemas = [json.loads(line)["schema"] for line in f]
    random.Random(seed).shuffle(schemas)
    terminals: dict[tuple, None] = {}
    used = 0
    for schema in schemas:
        if used >= count:
            break
        try:
            grammar = Grammar.from_json_schema(schema, property_order="any")
        except Exception:  # noqa: BLE001 - schemas we refuse are not part of this benchmark
            continue
        used += 1
        for t in grammar.terminals:
            terminals[(t.regex, tuple(t.also), tuple(t.excluding))] = None
    return list(terminals)


def load_module(path: str):
    spec = importlib.util.spec_from_file_location("byte_dfa_reference", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def one_round(module, terminals) -> tuple[float, list[str]]:
    module.compile_regex.cache_clear()
    module._compile_terminal.cache_clear()
    digests = []
    started = time.process_time()
    for regex, also, excluding in terminals:
        try:
            digests.append(module.compile_terminal(regex, also, excluding).digest)
        except Exception as e:  # noqa: BLE001 - limits: same outcome expected from both
            digests.append(type(e).__name__)
    return time.process_time() - started, digests


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--schemas", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--reference", help="another byte_dfa.py to compare against (alternating rounds)")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()

    terminals = load_terminals(args.data, args.schemas, args.seed)
    products = sum(1 for _, a, e in terminals if a or e)
    regexes = {r for t in terminals for r in (t[0], *t[1], *t[2])}
    print(f"{len(terminals)} distinct terminals ({products} with also/excluding), {len(regexes)} distinct regexes")
    modules = [("current", byte_dfa)]
    if args.reference:
        modules.insert(0, ("reference", load_module(args.reference)))
    times: dict[str, list[float]] = {name: [] for name, _ in modules}
    digests: dict[str, list[str]] = {}
    for _ in range(args.rounds):
        for name, module in modules:
            elapsed, digests[name] = one_round(module, terminals)
            times[name].append(elapsed)
    for name, values in times.items():
        print(f"{name:>9}: best {min(values):.3f} s, rounds " + " ".join(f"{v:.3f}" for v in values))
    if args.reference:
        same = digests["reference"] == digests["current"]
        print(f"speed-up (best/best): {min(times['reference']) / min(times['current']):.2f}x; "
              f"digests identical: {same}")
        if not same:
            bad = [t for t, a, b in zip(terminals, digests["reference"], digests["current"]) if a != b]
            print("differing:", bad[:5])
            sys.exit(1)
    if args.profile:
        import cProfile
        import pstats

        profile = cProfile.Profile()
        profile.enable()
        one_round(byte_dfa, terminals)
        profile.disable()
        pstats.Stats(profile).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
