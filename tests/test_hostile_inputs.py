"""Large and hostile inputs: they compile, or end quickly with a typed error.

Each case here is bounded by a generous wall limit (it fails a hung compile, it does
not time anything)."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

import pytest

from constrained import CompileLimitError, Grammar, TokenVocabulary, compile_grammar
from constrained.errors import CompileTimeoutError
from constrained.json_schema.compiler import compile_json_schema

BYTES = TokenVocabulary.from_token_bytes([bytes([b]) for b in range(1, 128)] + [b""], eos_ids=[127])


def _words(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    words = {"".join(rng.choices("abcdefghijklmnopqrstuvwxyz_ é\"", k=rng.randint(1, 8))) for _ in range(n)}
    return sorted(words)


def test_an_enum_of_twenty_thousand_strings_compiles_and_is_exact_on_canonical_spellings() -> None:
    words = _words(20_000)
    schema = {"type": "object", "properties": {"city": {"type": "string", "enum": words}}, "required": ["city"]}
    compilation = compile_json_schema(schema)
    assert any(n.keyword == "enum" and "canonical" in n.note for n in compilation.notes)
    cg = compile_grammar(compilation.grammar, BYTES, cache_dir=None)
    for w in words[:300] + words[-300:]:
        assert cg.accepts_bytes(b'{"city": ' + json.dumps(w, ensure_ascii=False).encode() + b"}")
    assert not cg.accepts_bytes(b'{"city": "' + b"q" * 9 + b'"}')
    m = cg.matcher()
    assert m.mask().any()


def test_small_enums_keep_every_json_spelling() -> None:
    cg = compile_grammar(Grammar.from_json_schema({"enum": ["a/b", "c"]}), BYTES, cache_dir=None)
    assert cg.accepts_bytes(b'"a\\/b"') and cg.accepts_bytes(b'"\\u0063"')


def test_large_enum_with_other_keywords_still_filters_values() -> None:
    words = _words(500, seed=1)
    schema = {"type": "string", "maxLength": 3, "enum": words + [7]}
    cg = compile_grammar(Grammar.from_json_schema(schema), BYTES, cache_dir=None)
    for w in words[:100]:
        assert cg.accepts_bytes(json.dumps(w, ensure_ascii=False).encode()) == (len(w) <= 3)
    assert not cg.accepts_bytes(b"7")


def _nested(depth: int) -> dict:
    schema: dict = {"type": "integer"}
    for _ in range(depth):
        schema = {"type": "array", "items": schema}
    return schema


@pytest.mark.parametrize("depth", [300, 5000])
def test_deep_schemas_are_refused_with_a_typed_error_naming_where(depth: int) -> None:
    with pytest.raises(CompileLimitError) as caught:
        Grammar.from_json_schema(_nested(depth))
    assert caught.value.pointer.startswith("/items/items") and caught.value.limit in ("max_nesting",
                                                                                      "max_document_depth")


def test_deep_consts_are_refused_with_a_typed_error() -> None:
    value: list = [0]
    for _ in range(3000):
        value = [value]
    with pytest.raises(CompileLimitError):
        Grammar.from_json_schema({"const": value})


def test_schemas_nested_within_the_documented_depth_compile() -> None:
    cg = compile_grammar(Grammar.from_json_schema(_nested(100)), BYTES, cache_dir=None)
    assert cg.accepts_bytes(b"[" * 100 + b"1" + b"]" * 100)


def test_deep_values_of_a_recursive_schema_are_handled_iteratively() -> None:
    schema = {"$defs": {"t": {"anyOf": [{"type": "array", "items": {"$ref": "#/$defs/t"}}, {"type": "integer"}]}},
              "$ref": "#/$defs/t"}
    m = compile_grammar(Grammar.from_json_schema(schema), BYTES, cache_dir=None).matcher()
    bracket = BYTES.token_bytes.index(b"[")
    for _ in range(2000):
        assert m.advance(bracket)
    assert m.mask().any()
    assert m.shortest_completion() is not None


# ---------------------------------------------------------------------- time limits
def test_a_compile_past_its_time_limit_ends_with_a_typed_error_naming_where() -> None:
    schema = {"allOf": [{"anyOf": [{"type": "object", "properties": {f"p{i}{j}": {"type": "integer"}},
                                    "required": [f"p{i}{j}"]} for j in range(6)]} for i in range(6)]}
    started = time.monotonic()
    with pytest.raises(CompileTimeoutError) as caught:     # (its sub-schemas alone take ~0.3 s on a 2-core machine)
        Grammar.from_json_schema(schema, timeout=0.05)
    assert time.monotonic() - started < 10
    assert caught.value.pointer.startswith("/allOf/") and caught.value.limit == "compile_timeout"


def test_the_phases_after_a_schemas_sub_schemas_are_bounded_too(monkeypatch: pytest.MonkeyPatch) -> None:
    # the sub-schemas compile unchecked here (their automata are built by the first compile
    # and reused), so the deadline, long passed, must be seen by what follows them:
    # finding the productive rules and fusing whitespace into punctuation
    import constrained.json_schema.compiler as schema_compiler

    schema = {"type": "object", "properties": {f"p{i}": {"type": "array", "items": {"type": "integer"}}
                                               for i in range(40)}}
    grammar = Grammar.from_json_schema(schema, timeout=None)
    with monkeypatch.context() as patched:
        patched.setattr(schema_compiler, "check_deadline", lambda **where: None)
        with pytest.raises(CompileTimeoutError, match="fusing whitespace|productive rules") as caught:
            Grammar.from_json_schema(schema, timeout=0.0)
    assert caught.value.limit == "compile_timeout"
    assert Grammar.from_json_schema(schema, timeout=None) == grammar      # nothing left behind


def test_timed_out_terminal_builds_leave_nothing_behind() -> None:
    grammar = Grammar.from_json_schema({"type": "string", "pattern": "^[a-f]{3,9}x$"})
    with pytest.raises(CompileTimeoutError):      # the first mask is part of the compile
        compile_grammar(grammar, BYTES, cache_dir=None, timeout=0.0)
    cg = compile_grammar(grammar, BYTES, cache_dir=None, timeout=0.0, first_mask=False)   # lazy: nothing built yet
    with pytest.raises(CompileTimeoutError):
        cg.matcher().mask()
    assert cg.recognizer.dfas.built() == 0
    again = compile_grammar(grammar, BYTES, cache_dir=None)
    assert again.accepts_bytes(b'"abcx"') and not again.accepts_bytes(b'"abx"')


def _fresh_schema(seed: int) -> dict:
    """An object schema whose keys, patterns, enums and bounds no other compile of the
    process has seen (so its automata are built, not found in a cache)."""
    rng = random.Random(seed)

    def word() -> str:
        return "".join(rng.choices("abcdefghijklmnopqrstuvwxyz_", k=rng.randint(3, 12)))

    kinds = [
        lambda: {"type": "integer", "minimum": rng.randint(-5, 5), "maximum": rng.randint(50, 5000)},
        lambda: {"type": "string", "pattern": f"^[{word()[:3]}]{{1,{rng.randint(2, 9)}}}{word()[:2]}$"},
        lambda: {"type": "string", "maxLength": rng.randint(25, 60)},
        lambda: {"type": "object", "additionalProperties": False,
                 "properties": {word(): {"type": "boolean"}, word(): {"type": "string", "minLength": 2}}},
        lambda: {"type": "array", "items": {"enum": [word(), word(), rng.randint(0, 99)]}, "uniqueItems": True},
        lambda: {"type": "object", "patternProperties": {f"^{word()[:4]}": {"type": "number"}}},
    ]
    props = {f"{word()}{seed}": rng.choice(kinds)() for _ in range(rng.randint(3, 10))}
    return {"type": "object", "properties": props, "required": list(props)[:2]}


def _compile_digest(schema: dict) -> str:
    """What a compile of ``schema`` gives (its grammar, checked keywords and first mask over
    bytes), or the error's type."""
    import hashlib

    try:
        compilation = compile_json_schema(schema, timeout=None)
        first = compile_grammar(compilation.grammar, BYTES, cache_dir=None, timeout=None).matcher().mask()
    except Exception as e:  # noqa: BLE001 - the outcome is what is compared
        return type(e).__name__
    g = compilation.grammar
    return hashlib.sha256(repr((g.terminals, g.rules, g.start, compilation.checked)).encode()
                          + first.tobytes()).hexdigest()


def test_compiles_that_ran_out_of_time_anywhere_leave_later_compiles_as_in_a_fresh_process() -> None:
    """Time limits from half a millisecond up land at arbitrary points of fresh schemas'
    compiles (the schema walk, string and key automata, token tables, the first mask);
    each ends in `CompileTimeoutError` or compiles, and afterwards every schema compiles
    exactly as it does in a process that never timed out."""
    import subprocess
    import sys

    schemas = [_fresh_schema(seed) for seed in range(60)]
    for i, schema in enumerate(schemas):
        limit = 0.0005 * 2 ** (i % 7)
        try:
            compile_grammar(Grammar.from_json_schema(schema, timeout=limit), BYTES, cache_dir=None, timeout=limit)
        except CompileTimeoutError:
            pass
    here = [_compile_digest(schema) for schema in schemas]
    script = ("import json, sys; sys.path.insert(0, sys.argv[1]); import test_hostile_inputs as t; "
              "print(json.dumps([t._compile_digest(s) for s in json.load(sys.stdin)]))")
    out = subprocess.run([sys.executable, "-c", script, str(Path(__file__).parent)], input=json.dumps(schemas),
                         capture_output=True, text=True, timeout=600, check=True)
    assert here == json.loads(out.stdout.strip().splitlines()[-1])


def test_no_limit_when_asked() -> None:
    assert compile_grammar(Grammar.from_json_schema({"type": "integer"}, timeout=None), BYTES,
                           cache_dir=None, timeout=None).accepts_bytes(b"12")


# ---------------------------------------------------------------------- sharing between threads
_SHARED = [
    {"type": "object", "properties": {"tags": {"type": "array", "items": {"enum": ["a", "b", "c"]},
                                               "uniqueItems": True}, "n": {"type": "integer", "minimum": 3}},
     "required": ["n"]},
    {"anyOf": [{"type": "string", "pattern": "^[a-z]+@[a-z]+$"}, {"type": "array", "items": {"type": "number"}}]},
]


def _walks(compiled, seed: int, steps: int = 40) -> list[str]:
    """A seeded random walk through the masks with forks and rollbacks: the masks seen."""
    rng = random.Random(seed)
    m = compiled.matcher()
    seen = []
    for _ in range(steps):
        mask = m.mask()
        seen.append(mask.tobytes().hex()[:64] + str(int(mask.sum())))
        allowed = [t for t in range(len(BYTES)) if mask[t // 32] >> (t % 32) & 1 and t not in BYTES.eos_ids]
        if not allowed:
            break
        token = rng.choice(allowed)
        if rng.random() < 0.2:
            branch = m.fork()
            branch.advance(token)
            seen.append(str(int(branch.mask().sum())))
        assert m.advance(token)
        if rng.random() < 0.15 and len(m.tokens) > 1:
            m.rollback(1)
    return seen


def test_threads_sharing_compiled_grammars_see_what_one_thread_sees() -> None:
    from concurrent.futures import ThreadPoolExecutor

    grammars = [Grammar.from_json_schema(s) for s in _SHARED]
    sequential = [compile_grammar(g, BYTES, cache_dir=None) for g in grammars]
    jobs = [(g, seed) for g in range(len(grammars)) for seed in range(12)]
    expected = [_walks(sequential[g], seed) for g, seed in jobs]
    shared = [compile_grammar(g, BYTES, cache_dir=None) for g in grammars]   # fresh: memos filled concurrently
    with ThreadPoolExecutor(max_workers=8) as pool:
        got = list(pool.map(lambda job: _walks(shared[job[0]], job[1]), jobs))
    assert got == expected


def test_an_object_with_three_thousand_properties_compiles() -> None:
    schema = {"type": "object", "properties": {f"prop_{i}": {"type": "string"} for i in range(3000)},
              "required": ["prop_7"]}
    compilation = compile_json_schema(schema)
    assert any(n.keyword == "properties" and "canonical" in n.note for n in compilation.notes)
    cg = compile_grammar(compilation.grammar, BYTES, cache_dir=None)
    assert cg.accepts_bytes(b'{"prop_3": "a", "prop_7": "b", "other": 1}')
    assert not cg.accepts_bytes(b'{"prop_3": "a"}')                        # prop_7 is required
    assert not cg.accepts_bytes(b'{"prop_7": "b", "prop_3": 1}')            # a declared key is no extra key
    assert cg.matcher().mask().any()


def test_discriminated_unions_of_hundreds_of_kinds_compile() -> None:
    schema = {"oneOf": [{"type": "object", "properties": {"kind": {"const": f"k{i}"}, "v": {"type": "integer"}},
                         "required": ["kind"]} for i in range(300)]}
    cg = compile_grammar(Grammar.from_json_schema(schema), BYTES, cache_dir=None)
    assert cg.accepts_bytes(b'{"kind": "k299", "v": 3}') and not cg.accepts_bytes(b'{"kind": "k300"}')


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {f"k{i}q6": {"type": "integer"} for i in range(30)}},   # the extra keys' automaton
    {"type": "object", "properties": {"when": {"type": "string", "pattern": "^[0-9]{4}-(0[1-9]|1[0-2])-q7$"}},
     "required": ["when"]},
    {"type": "object", "patternProperties": {"^x-[a-z]{2,5}q8$": {"type": "integer"}}, "additionalProperties": False},
    {"type": "string", "pattern": "^[a-c]{2}q9", "maxLength": 12},
])
def test_a_deadline_passing_in_a_string_automaton_is_a_timeout_not_an_unsupported_schema(
        schema: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    # the first check to see the passed deadline is inside a string automaton's build (the
    # sub-schema walk's own checks are off), where an ``except`` once read the timeout as an
    # automaton too large, and remembered that for the rest of the process
    import constrained.json_schema.compiler as schema_compiler

    with monkeypatch.context() as patched:
        patched.setattr(schema_compiler, "check_deadline", lambda **where: None)
        with pytest.raises(CompileTimeoutError):
            Grammar.from_json_schema(schema, timeout=0.0)
    compiled = compile_json_schema(schema, timeout=None)      # later compiles are not misled
    assert not compiled.checked
