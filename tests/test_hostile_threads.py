"""Sharing compiled grammars between threads the way a server does (issue 23, item 5).

`tests/test_hostile_inputs.py` walks one matcher per thread.  Here each thread runs what
a serving step loop runs (`docs/serving.md`): a batch of matchers over *different*
grammars (JSON Schemas with and without value checks, a lark and a GBNF grammar), one
`fill_masks` call per step, then every matcher advances by a seeded random allowed
token, sometimes through a fork, sometimes rolling back.  Eight threads share freshly
compiled grammars, so every lazy memo (terminal automata, token tables, parser nodes,
masks) is filled concurrently; what each thread sees must equal a sequential run on
grammars compiled separately.  `GrammarCache` is hit by many threads with the same and
with different specs, failing ones included.
"""

from __future__ import annotations

import hashlib
import random
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from constrained import Grammar, TokenVocabulary, compile_grammar
from constrained.engine.batch import fill_masks
from constrained.errors import ConstrainedError
from constrained.integrations.grammar_cache import GrammarCache
from constrained.integrations.spec import ConstraintSpec

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
        return spec.key, hashlib.sha1(b"".join(m.tobytes() for m in _masks_along(cg, i))).hexdigest()

    with ThreadPoolExecutor(max_workers=8) as pool:
        got = list(pool.map(request, range(64)))
    for (key, outcome), i in zip(got, range(64)):
        if requests[i] in bad:
            assert outcome in ("UnsatisfiableSchemaError", "GrammarSyntaxError"), outcome
        else:
            want = hashlib.sha1(b"".join(m.tobytes() for m in _masks_along(reference[key], i))).hexdigest()
            assert outcome == want
    stats = cache.stats()
    assert stats["size"] == len(specs) + len(bad) and stats["hits"] + stats["misses"] == 64


def _masks_along(compiled, seed: int, steps: int = 12) -> list[np.ndarray]:
    rng = random.Random(seed)
    m = compiled.matcher()
    masks = []
    for _ in range(steps):
        mask = m.mask()
        masks.append(mask.copy())
        allowed = _allowed(mask)
        if not allowed:
            break
        assert m.advance(rng.choice(allowed))
    return masks
