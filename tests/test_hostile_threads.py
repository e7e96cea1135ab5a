"""Sharing compiled grammars between threads the way a server does (issue 23, item 5).

`tests/test_hostile_inputs.py` walks one matcher per thread.  Here each thread runs what
a serving step loop runs (`docs/serving.md`): a batch of matchers over *different*
grammars (JSON Schemas with and without value checks, a lark and a GBNF grammar), one
`fill_masks` call per step, then every matcher advances by a seeded random allowed
token, sometimes through a fork, sometimes rolling back.  Eight threads share freshly
compiled grammars, so every lazy memo (terminal automata, token tables, parser nodes,
masks) is filled concurrently; what each thread sees must equal a sequential run on
grammars compiled separately.  `GrammarCache` is hit by many threads with the same and
with different specs, failing ones included; concurrent misses of one spec compile it
once (the others wait for it, at most their request's timeout).
"""

from __future__ import annotations

import hashlib
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from constrained import Grammar, TokenVocabulary, compile_grammar
from constrained.engine.batch import fill_masks
from constrained.errors import CompileTimeoutError, ConstrainedError
from constrained.integrations.grammar_cache import GrammarCache
from constrained.integrations.spec import ConstraintSpec
from constrained.testing.walks import masks_along

BYTES = TokenVocabulary.from_token_bytes([bytes([b]) for b in range(1, 128)] + [b""], eos_ids=[127])
GRAMMARS = Path(__file__).resolve().parent.parent / "grammars"

_SCHEMAS = [
    {"type": "object", "properties": {"tags": {"type": "array", "items": {"enum": ["a", "b", "c"]},
                                               "uniqueItems": True}, "n": {"type": "integer", "minimum": 3}},
     "required": ["n"]},
    {"anyOf": [{"type": "string", "pattern": "^[a-z]+@[a-z]+$"}, {"type": "array", "items": {"type": "number"}}]},
    {"type": "object", "properties": {f"k{i}": {"enum": list(range(i, i + 5))} for i in range(40)}},
]
_GBNF = 'root ::= "[" item ("," " "? item)* "]"\nitem ::= [0-9]+ | "\\"" [a-z]{1,6} "\\"" | root'


def _grammars() -> list[Grammar]:
    return ([Grammar.from_json_schema(s) for s in _SCHEMAS]
            + [Grammar.from_lark((GRAMMARS / "json.lark").read_text(encoding="utf-8")), Grammar.from_gbnf(_GBNF)])


def _allowed(row: np.ndarray) -> list[int]:
    bits = np.unpackbits(row.view(np.uint8), bitorder="little")[:len(BYTES)]
    return [t for t in np.flatnonzero(bits).tolist() if t not in BYTES.eos_ids]


def _serve(compiled: list, seed: int, steps: int = 25) -> list[str]:
    """One serving loop over a batch of three matchers of seeded grammars: per step one
    `fill_masks`, then each matcher advances (through a fork now and then, rolling back
    now and then).  Returns a digest of every batch of mask rows and of every fork's mask."""
    rng = random.Random(seed)
    matchers = [compiled[i].matcher() for i in rng.sample(range(len(compiled)), 3)]
    out = np.zeros((len(matchers), max(cg.mask_words for cg in compiled)), np.int32)
    seen = []
    for _ in range(steps):
        fill_masks(matchers, out)
        seen.append(hashlib.sha1(out.tobytes()).hexdigest()[:16])
        for m, row in zip(matchers, out):
            allowed = _allowed(row)
            if not allowed:
                continue
            token = rng.choice(allowed)
            if rng.random() < 0.2:
                branch = m.fork()
                assert branch.advance(token)
                seen.append(hashlib.sha1(branch.mask().tobytes()).hexdigest()[:16])
            assert m.advance(token)
            if rng.random() < 0.15 and len(m.tokens) > 1:
                m.rollback(1)
    return seen


def test_threads_serving_batches_on_shared_grammars_see_what_one_thread_sees() -> None:
    grammars = _grammars()
    jobs = list(range(40))
    sequential = [compile_grammar(g, BYTES, cache_dir=None) for g in grammars]
    expected = [_serve(sequential, seed) for seed in jobs]
    shared = [compile_grammar(g, BYTES, cache_dir=None) for g in grammars]    # fresh: memos filled concurrently
    start = threading.Barrier(8)

    def run(seed: int) -> list[str]:
        if seed < 8:
            start.wait(timeout=60)          # the first eight start together: the most contention
        return _serve(shared, seed)

    with ThreadPoolExecutor(max_workers=8) as pool:
        got = list(pool.map(run, jobs))
    assert got == expected


def test_a_grammar_cache_hit_by_many_threads_gives_each_the_same_language() -> None:
    specs = [ConstraintSpec.from_request({"json_schema": s}) for s in _SCHEMAS]
    specs.append(ConstraintSpec.from_request({"gbnf": _GBNF}))
    bad = [ConstraintSpec.from_request({"json_schema": {"type": "integer", "minimum": 5, "maximum": 1}}),
           ConstraintSpec.from_request({"lark": "start: nope"})]
    cache = GrammarCache(BYTES, cache_dir=None)
    reference = {spec.key: compile_grammar(spec.grammar(), BYTES, cache_dir=None) for spec in specs}
    requests = [(specs + bad)[i % (len(specs) + len(bad))] for i in range(64)]

    def request(i: int) -> tuple[str, str]:
        spec = requests[i]
        try:
            cg = cache.get(spec)
        except ConstrainedError as e:
            return spec.key, type(e).__name__
        return spec.key, hashlib.sha1(b"".join(_masks_along(cg, i))).hexdigest()

    with ThreadPoolExecutor(max_workers=8) as pool:
        got = list(pool.map(request, range(64)))
    for (key, outcome), i in zip(got, range(64)):
        if requests[i] in bad:
            assert outcome in ("UnsatisfiableSchemaError", "GrammarSyntaxError"), outcome
        else:
            want = hashlib.sha1(b"".join(_masks_along(reference[key], i))).hexdigest()
            assert outcome == want
    stats = cache.stats()
    assert stats["size"] == len(specs) + len(bad) and stats["hits"] + stats["misses"] == 64


def _masks_along(compiled, seed: int, steps: int = 12) -> list[bytes]:
    return masks_along(compiled, seed, steps)


class _CountingCache(GrammarCache):
    """A `GrammarCache` whose compiles are counted and held until ``release`` is set."""

    def __init__(self, *args, fail_first: bool = False, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.compiles = 0
        self.started = threading.Event()
        self.release = threading.Event()
        self.fail_first = fail_first
        self.calls = 0

    def get(self, spec):
        with self._lock:
            self.calls += 1
        return super().get(spec)

    def wait_for_calls(self, n: int) -> None:
        """Until ``n`` threads are inside `get` (and a moment more, for them to reach the wait)."""
        deadline = time.monotonic() + 30
        while self.calls < n and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.1)

    def _compile(self, spec):
        with self._lock:
            self.compiles += 1
            first = self.compiles == 1
        self.started.set()
        assert self.release.wait(30)
        if first and self.fail_first:
            raise RuntimeError("a compile that is no typed error")
        return super()._compile(spec)


def test_concurrent_misses_of_one_spec_compile_it_once() -> None:
    cache = _CountingCache(BYTES, cache_dir=None)
    spec = ConstraintSpec.from_request({"json_schema": _SCHEMAS[0]})
    with ThreadPoolExecutor(max_workers=8) as pool:
        futures = [pool.submit(cache.get, spec) for _ in range(8)]
        assert cache.started.wait(30)
        cache.wait_for_calls(8)              # the old cache compiled here once per thread
        cache.release.set()
        got = [f.result(timeout=60) for f in futures]
    assert cache.compiles == 1
    assert all(cg is got[0] for cg in got)
    assert cache.stats() == {"hits": 7, "misses": 1, "failures": 0, "size": 1}
    assert not cache._in_flight


def test_a_wait_for_another_thread_s_compile_is_bounded_by_the_request_s_timeout() -> None:
    cache = _CountingCache(BYTES, cache_dir=None)
    slow = ConstraintSpec.from_request({"regex": "a+b"})
    impatient = ConstraintSpec.from_request({"regex": "a+b", "timeout": 0.05})
    assert slow.key == impatient.key
    with ThreadPoolExecutor(max_workers=1) as pool:
        first = pool.submit(cache.get, slow)
        assert cache.started.wait(30)
        try:
            cache.get(impatient)
        except CompileTimeoutError as e:
            assert "another thread" in str(e) and e.value == 0.05
        else:
            raise AssertionError("the wait was not bounded")
        finally:
            cache.release.set()
        cg = first.result(timeout=60)
    assert cache.get(impatient) is cg and cache.compiles == 1


def test_waiters_compile_themselves_when_the_first_compile_raises_untyped() -> None:
    cache = _CountingCache(BYTES, cache_dir=None, fail_first=True)
    spec = ConstraintSpec.from_request({"regex": "(ab)+"})
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = [pool.submit(cache.get, spec) for _ in range(4)]
        assert cache.started.wait(30)
        cache.wait_for_calls(4)
        cache.release.set()
        outcomes = []
        for f in futures:
            try:
                outcomes.append(f.result(timeout=60))
            except RuntimeError:
                outcomes.append("raised")
    assert outcomes.count("raised") == 1
    compiled = [o for o in outcomes if o != "raised"]
    assert len({id(o) for o in compiled}) == 1 and compiled[0].accepts_bytes(b"abab")
    assert cache.compiles == 2 and not cache._in_flight
