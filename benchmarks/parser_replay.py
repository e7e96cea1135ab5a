"""The Earley parser alone, on the calls MaskBench's first instances make of it.

Fresh schemas spend much of their slowest tokens building parser nodes
(``slow_tokens.py``), and the engine around the parser makes those tokens too noisy to
compare two parser versions on.  This benchmark takes the parser out:

1. ``record``: every K-th dev schema compiled afresh (members in declared order, as
   the side-by-side benchmark does), its first valid instance read token by token
   (``mask()`` + ``advance()``), and every call the engine makes of the schema's
   parser (``scan``, ``union``, ``abstract``; compile included) written to a file,
   with the parser's tables;
2. ``replay``: a new parser per schema makes the same calls in the same order; the
   calls of the instance are timed (best of ``--repeat`` rounds, a round being every
   schema once), and a digest of every node (kernel, items by symbol, terminals,
   flags) and every call's answer shows that two versions build the same parsers.

Record once, replay with each checkout (another one: ``PYTHONPATH=path/to/it``)::

    python benchmarks/parser_replay.py record --every 9 --calls /tmp/calls.pkl   # ~1 minute
    python benchmarks/parser_replay.py replay --calls /tmp/calls.pkl             # ~10 s
"""

from __future__ import annotations

import _common  # noqa: F401  (first: pins numeric libraries to one thread)

import argparse  # noqa: E402
import gc  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import pickle  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from _common import (  # noqa: E402
    add_dataset_arguments, load_vocabulary, read_maskbench, time_tokens, warm_up_ours)
from tqdm import tqdm  # noqa: E402

RECORDED = ("scan", "union", "abstract")     # the parser's methods the engine calls


class _Recorder:
    """Wraps `RECORDED` on `EarleyParser` while installed: each outermost call is
    appended to ``calls`` under the parser's id (a call that raises too: replayed, it
    raises again)."""

    def __init__(self) -> None:
        from constrained.engine.earley import EarleyParser

        self.cls = EarleyParser
        self.saved = {name: getattr(EarleyParser, name) for name in RECORDED}
        self.calls: list[tuple[int, str, tuple]] = []
        self.depth = 0

    def __enter__(self) -> _Recorder:
        for name, method in self.saved.items():
            setattr(self.cls, name, self._wrap(name, method))
        return self

    def __exit__(self, *exc: object) -> None:
        for name, method in self.saved.items():
            setattr(self.cls, name, method)

    def _wrap(self, name: str, method):
        def recorded(parser, *args):
            self.depth += 1
            try:
                return method(parser, *args)
            finally:
                self.depth -= 1
                if self.depth == 0:
                    self.calls.append((id(parser), name, args))
        return recorded


def record(records: list[dict], vocab) -> list[dict[str, Any]]:
    """Per schema with a valid instance that compiles: the parser's tables, the calls made
    while compiling it and asking its first mask (``before``), and those the first instance
    made (``calls``), with the node counts after each."""
    import serving_batch as sb

    engine = sb.OurEngine(vocab)
    warm_up_ours(engine, vocab)
    eos = int(min(vocab.eos_ids))
    out = []
    with _Recorder() as rec:
        for r in tqdm(records, desc="record", mininterval=5):
            valid = [t["data"] for t in r.get("tests", []) if t.get("valid")]
            if not valid:
                continue
            rec.calls.clear()
            try:
                m = engine.compile(r["schema"])
                m.mask()
            except Exception:  # noqa: BLE001 - a schema we refuse has no parser calls to replay
                continue
            parser = m.compiled.recognizer.parser
            start, nodes_before = len(rec.calls), parser.num_nodes

            def step(t: int, m=m) -> bool:
                m.mask()
                return m.advance(t)

            try:                            # (the side-by-side loop; its timings are not needed)
                time_tokens(step, [int(x) for x in vocab.encode(json.dumps(valid[0]))] + [eos])
            except Exception:  # noqa: BLE001 - the calls made until then are replayed
                pass
            mine = [(name, args) for pid, name, args in rec.calls if pid == id(parser)]
            before = sum(1 for pid, _, _ in rec.calls[:start] if pid == id(parser))
            out.append({"tables": parser.tables, "before": mine[:before], "calls": mine[before:],
                        "nodes_before": nodes_before, "nodes_after": parser.num_nodes})
    return out


def _replay(parser, calls: list[tuple[str, tuple]]) -> list[object]:
    """Make ``calls`` on ``parser`` in order: their answers ("needs context" where one raised
    `NeedsContext`)."""
    from constrained.engine.earley import NeedsContext

    methods = {name: getattr(parser, name) for name in RECORDED}
    out: list[object] = []
    for name, args in calls:
        try:
            out.append(methods[name](*args))
        except NeedsContext:
            out.append("needs context")
    return out


def replay_once(recorded: list[dict[str, Any]]) -> tuple[float, int]:
    """One round: (seconds in the instances' calls, nodes they built), checking that
    every parser reaches the recorded node counts."""
    from constrained.engine.earley import EarleyParser

    total, nodes = 0.0, 0
    for r in recorded:
        parser = EarleyParser(r["tables"])
        _replay(parser, r["before"])
        t0 = time.perf_counter()
        _replay(parser, r["calls"])
        total += time.perf_counter() - t0
        if parser.num_nodes != r["nodes_after"]:
            raise AssertionError(f"a replayed parser has {parser.num_nodes} nodes, the recorded one "
                                 f"{r['nodes_after']}: not the same parser")
        nodes += parser.num_nodes - r["nodes_before"]
    return total, nodes


def digest(recorded: list[dict[str, Any]]) -> str:
    """SHA-256 of every call's answer and every node (kernel, items by symbol, terminals,
    flags, depth) of the replayed parsers: equal for parser versions that build the same
    nodes in the same order (items within a symbol compared as sets)."""
    from constrained.engine.earley import EarleyParser

    h = hashlib.sha256()
    for r in recorded:
        parser = EarleyParser(r["tables"])
        h.update(repr(_replay(parser, r["before"] + r["calls"])).encode())
        for n in range(parser.num_nodes):
            v = parser.node(n)
            h.update(repr((v.kernel, sorted((k, sorted(items)) for k, items in v.pending.items()), v.terminals,
                           v.accepting, v.abstract, v.depth)).encode())
    return h.hexdigest()


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=("record", "replay"))
    ap.add_argument("--calls", type=Path, required=True, help="the recorded calls (written by record)")
    ap.add_argument("--every", type=int, default=9, help="record every K-th dev schema")
    ap.add_argument("--repeat", type=int, default=5, help="replay rounds (the best one is reported)")
    add_dataset_arguments(ap)
    a = ap.parse_args(argv)
    if a.mode == "record":
        vocab = load_vocabulary(a.vocab)
        recorded = record(list(read_maskbench(a.data))[::a.every], vocab)
        a.calls.write_bytes(pickle.dumps(recorded))
        res = {"schemas": len(recorded), "calls": sum(len(r["calls"]) for r in recorded),
               "nodes": sum(r["nodes_after"] - r["nodes_before"] for r in recorded)}
        print(f"recorded {res['calls']:,} parser calls of {res['schemas']} schemas' first instances "
              f"({res['nodes']:,} nodes) in {a.calls}")
        return res
    recorded = pickle.loads(a.calls.read_bytes())
    gc.collect()
    gc.freeze()                 # the recording stays out of the rounds' collections
    try:
        rounds = [replay_once(recorded) for _ in range(a.repeat)]
    finally:
        gc.unfreeze()
    best, nodes = min(rounds)
    res = {"seconds": best, "nodes": nodes, "us_per_node": 1e6 * best / max(1, nodes), "digest": digest(recorded)}
    print(f"replay: best of {a.repeat} {best:.3f} s for {nodes:,} new nodes ({res['us_per_node']:.1f} µs a node, "
          f"calls answered from memos included); digest {res['digest'][:16]}")
    return res


if __name__ == "__main__":
    main()
