"""The vLLM adapters without vLLM: vLLM's call sequences replayed against our matchers.

The logits processor is driven as vLLM's persistent batch drives it (``update_state``
with added / removed / moved requests and live output lists, then ``apply`` on the
batch's logits, then a token appended per row); the structured-output grammar as vLLM's
manager drives it (``fill_bitmask`` -> ``accept_tokens`` per draft position, then
``rollback``; ``validate_tokens`` without side effects; EOS and stop ids; padded
vocabularies).  End to end with vLLM itself: tests/test_vllm_end_to_end.py.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from enum import Enum, auto
from types import SimpleNamespace

import jsonschema
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from constrained import Grammar, TokenVocabulary, compile_grammar
from constrained.errors import ConstrainedError, InvalidSchemaError
from constrained.integrations.budget import BudgetGuard
from constrained.integrations.grammar_cache import GrammarCache
from constrained.integrations.spec import ConstraintSpec, ConstraintSpecError, cached_grammar
from constrained.integrations.vllm.backend import ConstrainedBackend, ConstrainedGrammar, spec_for_request_type
from constrained.integrations.vllm.logits_processor import ConstrainedLogitsProcessor
from constrained.masks import mask_words, unpack_mask

# A vocabulary with single characters and a few multi-byte pieces; 2 padding ids after it.
PIECES = [bytes([b]) for b in range(32, 127)] + [b'{"', b'":', b'",', b'"}', b"true", b"false", b"null", b"\n",
                                                  b"abc", b"ab", b"  ", b""]
EOS = len(PIECES) - 1
STOP = 40                                      # "H": a user stop id (a real token here)
VOCAB = TokenVocabulary.from_token_bytes(PIECES, eos_ids=[EOS])
WIDTH = len(PIECES) + 2                        # the model's logits are wider than the tokenizer

SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0},
                                           "tags": {"type": "array", "items": {"enum": ["a", "b"]},
                                                    "uniqueItems": True}},
          "required": ["name", "age"], "additionalProperties": False}


class Direction(Enum):
    UNIDIRECTIONAL = auto()
    SWAP = auto()


@dataclass
class Update:
    """vLLM's BatchUpdate, field for field."""

    batch_size: int
    removed: list = field(default_factory=list)
    added: list = field(default_factory=list)
    moved: list = field(default_factory=list)


def params(spec=None, max_tokens=64, temperature=0.0):
    return SimpleNamespace(extra_args=None if spec is None else {"constrained": spec}, max_tokens=max_tokens,
                           temperature=temperature)


def processor():
    return ConstrainedLogitsProcessor(None, torch.device("cpu"), False, tokenizer=VOCAB)


def text(ids):
    return b"".join(VOCAB.token_bytes[t] for t in ids if t != EOS).decode()


def step(proc, outputs, rng, temperature=0.0, prefer=None):
    """One engine step: random logits (``prefer`` gets a bonus), the processor, then a
    token sampled per live row and appended to its output list."""
    logits = torch.randn(len(outputs), WIDTH, generator=rng)
    if prefer is not None:
        logits[:, prefer] += 6.0
    before = logits.clone()
    out = proc.apply(logits)
    assert out is logits
    chosen = []
    for i, o in enumerate(outputs):
        if o is None:
            chosen.append(None)
            continue
        if temperature == 0:
            t = int(torch.argmax(logits[i]))
        else:
            t = int(torch.multinomial(torch.softmax(logits[i] / temperature, -1), 1, generator=rng))
        o.append(t)
        chosen.append(t)
    return before, chosen


def run_to_end(proc, outputs, budgets, rng, temperature=0.0, prefer=None):
    live = list(outputs)
    for _ in range(max(budgets) + 1):
        for i, o in enumerate(live):
            if o is not None and (len(o) >= budgets[i] or (o and o[-1] == EOS)):
                live[i] = None
        if all(o is None for o in live):
            return
        step(proc, live, rng, temperature, prefer)


# ---------------------------------------------------------------------------- specs and cache
def test_spec_parsing_and_errors():
    a = ConstraintSpec.from_request({"json_schema": SCHEMA, "whitespace": "compact"})
    b = ConstraintSpec.from_request({"whitespace": "compact", "json_schema": json.dumps(SCHEMA)})
    assert a.key == b.key and a != ConstraintSpec.from_request({"json_schema": SCHEMA})
    for bad, words in [({}, "names none"), ({"regex": 1}, "regex must be a string"),
                       ({"json_schema": "{"}, "not valid JSON"), ({"json_schema": [1]}, "object or a boolean"),
                       ({"json_schema": True, "colour": 1}, "unknown option"),
                       ({"lark": "start: A", "whitespace": "compact"}, "json_schema and structural_tag"),
                       ({"choice": []}, "non-empty list"), ({"regex": "a", "timeout": -1}, "timeout"),
                       ({"gbnf": "  "}, "empty")]:
        with pytest.raises(ConstraintSpecError, match=words):
            ConstraintSpec.from_request(bad)
    assert issubclass(ConstraintSpecError, ValueError)


def test_choice_is_verbatim():
    cg = compile_grammar(ConstraintSpec.from_request({"choice": ["a.b", "c|d (e)", "x*"]}).grammar(), VOCAB,
                         cache_dir=None)
    for s, ok in [("a.b", True), ("c|d (e)", True), ("x*", True), ("axb", False), ("c", False), ("xx", False)]:
        m = cg.matcher()
        assert (m.advance_many(VOCAB.encode(s)) == len(VOCAB.encode(s)) and m.is_accepting()) == ok, s


def test_grammar_cache_shares_and_remembers_failures():
    cache = GrammarCache(VOCAB, size=2, cache_dir=None)
    s1, s2, s3 = (ConstraintSpec.from_request({"regex": r}) for r in ("a+", "b+", "c+"))
    assert cache.get(s1) is cache.get(s1)
    cache.get(s2), cache.get(s3)                      # s1 dropped (least recently used)
    assert cache.stats()["size"] == 2 and cache.stats()["misses"] == 3
    bad = ConstraintSpec.from_request({"json_schema": {"type": "object", "properties": {"a": {"$ref": "#/nope"}}}})
    for _ in range(2):
        with pytest.raises(ConstrainedError):
            cache.get(bad)
    assert cache.stats()["failures"] == 1             # compiled once, the error kept
    assert cached_grammar(s1) is cached_grammar(s1)


def test_grammar_cache_warms_up_in_the_background_and_compiles_meanwhile(monkeypatch):
    import threading

    from constrained import warmup

    started, release, calls = threading.Event(), threading.Event(), []

    def slow_warm_up(vocab, **kwargs):
        calls.append(vocab)
        started.set()
        release.wait(10)                              # still warming up while requests compile
        return {}

    monkeypatch.setattr(warmup, "warm_up", slow_warm_up)
    cache = GrammarCache(VOCAB, cache_dir=None, warm_up=True)
    assert started.wait(10) and not cache.warmed.is_set()
    m = cache.get(ConstraintSpec.from_request({"regex": "a+b"})).matcher()
    assert m.advance_many(VOCAB.encode("aab")) == len(VOCAB.encode("aab")) and m.is_accepting()
    release.set()
    assert cache.warmed.wait(10) and calls == [VOCAB]
    assert GrammarCache(VOCAB, cache_dir=None).warmed.is_set()       # no warm-up asked: nothing to wait for


def test_request_types_map_to_specs():
    kinds = {name: spec_for_request_type(SimpleNamespace(name=name), text).kind for name, text in [
        ("JSON", '{"type": "integer"}'), ("JSON_OBJECT", ""), ("REGEX", "a+"), ("CHOICE", '["a", "b"]'),
        ("GRAMMAR", 'root ::= "a"'), ("GRAMMAR", 'start: "a"')]}
    assert kinds == {"JSON": "json_schema", "JSON_OBJECT": "json_schema", "REGEX": "regex", "CHOICE": "choice",
                     "GRAMMAR": "lark"}
    assert spec_for_request_type(SimpleNamespace(name="GRAMMAR"), 'root ::= "a"').kind == "gbnf"
    with pytest.raises(ConstraintSpecError):
        spec_for_request_type(SimpleNamespace(name="SPEECH"), "")


# ---------------------------------------------------------------------------- logits processor
def test_validate_params_refuses_bad_specs_with_value_errors():
    ConstrainedLogitsProcessor.validate_params(params())                       # not constrained: fine
    ConstrainedLogitsProcessor.validate_params(params({"json_schema": SCHEMA}))
    for spec in [{"json_schema": {"type": 12}}, {"regex": "a", "lark": "b"}, {"lark": "start: UNDEFINED"},
                 {"regex": "(a"}]:
        with pytest.raises(ValueError, match="constrain"):
            ConstrainedLogitsProcessor.validate_params(params(spec))
    assert not ConstrainedLogitsProcessor.is_argmax_invariant(processor())


def test_unconstrained_rows_untouched_and_constrained_rows_masked():
    proc = processor()
    outs = [[], [], []]
    proc.update_state(Update(3, added=[(0, params({"json_schema": SCHEMA}), [], outs[0]),
                                       (1, params(), [], outs[1]),
                                       (2, params({"regex": "[0-9]+"}), [], outs[2])]))
    rng = torch.Generator().manual_seed(0)
    before, _ = step(proc, outs, rng)
    logits = torch.randn(3, WIDTH, generator=rng)
    copy = logits.clone()
    proc.apply(logits)
    assert torch.equal(logits[1], copy[1])
    allowed2 = set(torch.isfinite(logits[2]).nonzero().flatten().tolist())
    assert allowed2 <= {VOCAB.encode(str(d))[0] for d in range(10)} | {EOS}
    assert torch.isinf(logits[:, len(PIECES):]).all() or True     # padding ids of constrained rows:
    assert torch.isinf(logits[0, len(PIECES):]).all() and torch.isinf(logits[2, len(PIECES):]).all()


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_outputs_are_valid_and_finish_inside_max_tokens(temperature):
    """Many requests, a model that loves to loop inside strings ("abc" boosted): every
    output, cut by its budget or ended by EOS, is complete and valid."""
    proc = processor()
    rng = torch.Generator().manual_seed(1)
    shortest = len(compile_grammar(Grammar.from_json_schema(SCHEMA), VOCAB, cache_dir=None).matcher().completion_tokens())
    budgets = [shortest, shortest + 1, shortest + 2, shortest + 5, 30, 40, 64, 100]
    outs = [[] for _ in budgets]
    proc.update_state(Update(len(outs), added=[(i, params({"json_schema": SCHEMA}, b, temperature), [], o)
                                               for i, (o, b) in enumerate(zip(outs, budgets))]))
    run_to_end(proc, outs, budgets, rng, temperature, prefer=VOCAB.encode("abc")[0])
    for o, b in zip(outs, budgets):
        assert len(o) <= b
        jsonschema.validate(json.loads(text(o)), SCHEMA)


def test_structural_tag_requests_call_tools_with_valid_arguments():
    """A structural tag through the processor: free text, then after the trigger a tagged
    value of the tool's schema, then free text again; the model is pushed to call."""
    tag = {"type": "structural_tag", "triggers": ["<f>"],
           "structures": [{"begin": "<f>", "schema": {"type": "object", "properties": {"n": {"type": "integer"}},
                                                      "required": ["n"]}, "end": "</f>"}]}
    proc = processor()
    out: list[int] = []
    proc.update_state(Update(1, added=[(0, params({"structural_tag": tag, "whitespace": "compact"}, 40), [], out)]))
    script = list(VOCAB.encode("ok <f>"))
    rng = torch.Generator().manual_seed(4)
    for _ in range(40):
        logits = torch.randn(1, WIDTH, generator=rng)
        if script:
            logits[0, script[0]] += 50.0
        proc.apply(logits)
        t = int(torch.argmax(logits[0]))
        if script and t == script[0]:
            script.pop(0)
        out.append(t)
        if t == EOS:
            break
    body = text(out)
    assert body.startswith("ok <f>") and "</f>" in body
    json.loads(body[len("ok <f>"):body.index("</f>")])["n"]


def test_batch_moves_swaps_and_removals_keep_each_request_on_its_own_matcher():
    proc = processor()
    rng = torch.Generator().manual_seed(2)
    outs = [[], [], []]
    specs = [{"regex": "x+y"}, {"json_schema": SCHEMA}, {"regex": "[0-9]{3}"}]
    proc.update_state(Update(3, added=[(i, params(s, 40), [], o) for i, (s, o) in enumerate(zip(specs, outs))]))
    step(proc, outs, rng)
    proc.update_state(Update(3, moved=[(0, 2, Direction.SWAP)]))           # rows 0 and 2 swap
    outs[0], outs[2] = outs[2], outs[0]
    step(proc, outs, rng)
    proc.update_state(Update(2, removed=[1], moved=[(2, 1, Direction.UNIDIRECTIONAL)]))
    outs = [outs[0], outs[2]]
    run_to_end(proc, outs, [40, 40], rng)
    texts = sorted(text(o) for o in outs)
    assert texts[0].isdigit() and len(texts[0]) == 3 and texts[1].startswith("x") and texts[1].endswith("y")


def test_request_stop_ids_replace_the_vocabulary_eos():
    """vLLM ends a request on its own stop ids (``all_stop_token_ids``): those are allowed
    once the output is complete; a vocabulary EOS that would not end it is never allowed."""
    proc = processor()
    out: list[int] = []
    p = params({"regex": "[0-9]+"}, 8)
    p.all_stop_token_ids = {STOP}
    proc.update_state(Update(1, added=[(0, p, [], out)]))
    logits = torch.zeros(1, WIDTH)
    proc.apply(logits)
    assert not torch.isfinite(logits[0, [STOP, EOS]]).any()
    out += VOCAB.encode("4")
    logits = torch.zeros(1, WIDTH)
    logits[0, STOP] = 9.0
    proc.apply(logits)
    allowed = set(torch.isfinite(logits[0]).nonzero().flatten().tolist())
    assert STOP in allowed and EOS not in allowed and int(torch.argmax(logits[0])) == STOP


def test_a_rolled_back_output_list_is_followed():
    proc = processor()
    out: list[int] = []
    proc.update_state(Update(1, added=[(0, params({"regex": "ab|ac"}, 8), [], out)]))
    out += VOCAB.encode("a")
    proc.apply(torch.zeros(1, WIDTH))
    out[:] = []                                   # preempted and restarted: the list starts again
    logits = torch.zeros(1, WIDTH)
    proc.apply(logits)
    assert set(torch.isfinite(logits[0]).nonzero().flatten().tolist()) == {VOCAB.encode("a")[0],
                                                                          VOCAB.encode("ab")[0]}


def test_uncompilable_request_in_the_worker_ends_only_itself():
    proc = processor()
    outs = [[], []]
    bad = {"json_schema": {"type": "object", "properties": {"a": {"$ref": "#/nowhere"}}}}
    proc.update_state(Update(2, added=[(0, params(bad), [], outs[0]), (1, params({"regex": "[a-c]+"}, 6), [], outs[1])]))
    logits = torch.zeros(2, WIDTH)
    proc.apply(logits)
    assert torch.isfinite(logits[0]).nonzero().flatten().tolist() == [EOS]
    assert torch.isfinite(logits[1]).sum() == 3 + 2     # a b c ab abc


# ---------------------------------------------------------------------------- budget guard
@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(0, 30))
def test_budget_guard_keeps_a_completion_within_reach(seed, spare):
    """Whatever tokens a caller picks among those the guard keeps, the output is complete
    when the budget runs out (whenever the shortest completion fits from the start)."""
    cg = compile_grammar(Grammar.from_json_schema(SCHEMA, whitespace="compact"), VOCAB, cache_dir=None)
    budget = len(cg.matcher().completion_tokens()) + spare
    m, guard, rng = cg.matcher(), BudgetGuard(budget), random.Random(seed)
    while len(m.tokens) < budget and not m.is_terminated():
        forced = guard.forced(m)
        if forced is not None:
            assert m.advance(forced)
            continue
        allowed = [int(t) for t in np.flatnonzero(unpack_mask(m.mask(), len(VOCAB)))]
        rng.shuffle(allowed)
        t = next((t for t in allowed if guard.keeps_room(m, t)), None)
        assert t is not None
        assert m.advance(t)
    assert m.is_terminated() or m.is_accepting()


# ---------------------------------------------------------------------------- structured-output backend
@pytest.fixture(scope="module")
def backend():
    return ConstrainedBackend(None, tokenizer=VOCAB, vocab_size=WIDTH)


def rows_allowed(bitmask, row):
    return set(np.flatnonzero(unpack_mask(bitmask.numpy()[row], WIDTH)).tolist())


def test_backend_bitmask_shape_and_padding(backend):
    bitmask = backend.allocate_token_bitmask(4)
    assert bitmask.dtype == torch.int32 and tuple(bitmask.shape) == (4, mask_words(WIDTH))
    g = backend.compile_grammar(SimpleNamespace(name="JSON"), json.dumps(SCHEMA))
    g.fill_bitmask(bitmask, 2)
    assert rows_allowed(bitmask, 2) == {VOCAB.encode("{")[0], VOCAB.encode('{"')[0]}   # no leading whitespace
    assert (bitmask.numpy()[[0, 1, 3]] == -1).all()              # other rows untouched
    with pytest.raises(InvalidSchemaError):
        backend.compile_grammar(SimpleNamespace(name="JSON"), '{"type": 7}')


def test_backend_replays_speculative_call_sequence(backend):
    """vLLM's manager with 3 draft tokens: fill row, accept one draft, ..., fill the bonus
    row, roll back; the rows equal a fresh matcher's masks at each prefix."""
    g = backend.compile_grammar(SimpleNamespace(name="REGEX"), "(ab|ac)+d")
    ref = compile_grammar(Grammar.from_regex("(ab|ac)+d"), VOCAB, cache_dir=None)
    drafts = VOCAB.encode("a") + VOCAB.encode("b") + VOCAB.encode("a")
    bitmask = backend.allocate_token_bitmask(8)
    assert g.validate_tokens(drafts + VOCAB.encode("x")) == drafts
    assert g.matcher.tokens == ()                                 # validate left no trace
    for i, t in enumerate(drafts):
        g.fill_bitmask(bitmask, i)
        assert g.accept_tokens("r", [t])
    g.fill_bitmask(bitmask, len(drafts))
    g.rollback(len(drafts))
    assert g.matcher.tokens == ()
    for i in range(len(drafts) + 1):
        m = ref.matcher()
        m.advance_many(drafts[:i])
        assert rows_allowed(bitmask, i) == set(np.flatnonzero(unpack_mask(m.mask(), len(VOCAB))).tolist())
    assert not g.accept_tokens("r", VOCAB.encode("a") + VOCAB.encode("x"))
    assert g.matcher.tokens == ()                                 # a refused batch reads nothing
    assert g.accept_tokens("r", VOCAB.encode("ab") + VOCAB.encode("d")) and not g.is_terminated()
    g.fill_bitmask(bitmask, 0)
    assert rows_allowed(bitmask, 0) == {EOS}
    assert g.accept_tokens("r", [EOS]) and g.is_terminated()
    g.fill_bitmask(bitmask, 0)
    assert rows_allowed(bitmask, 0) == {EOS}
    g.reset()
    assert not g.is_terminated() and g.matcher.tokens == ()


def test_plan_is_dropped_when_a_rolled_back_draft_is_replaced():
    """Speculative decoding: a plan made after a draft token must not survive when the
    draft is rolled back and another token takes its place (seen in vLLM: the stale
    plan's tokens were forced and then refused)."""
    cg = compile_grammar(Grammar.from_json_schema(SCHEMA, whitespace="compact"), VOCAB, cache_dir=None)
    m = cg.matcher()
    m.advance_many(VOCAB.encode('{"name":"'))
    backslash, x = VOCAB.encode("\\")[0], VOCAB.encode("x")[0]
    m.advance(backslash)                                 # the draft: an escape, completed by \"" + ...
    guard = BudgetGuard(len(m.tokens) + len(m.completion_tokens()))
    assert guard.forced(m) is not None                   # a plan after the draft
    m.rollback(1)
    m.advance(x)                                         # the model's own token instead
    while len(m.tokens) < guard.max_tokens and not m.is_accepting():
        f = guard.forced(m)
        if f is None:                                    # free to choose: any token that keeps room
            f = next(t for t in range(len(PIECES)) if t != EOS and m.allows(t) and guard.keeps_room(m, t))
        assert m.advance(f), "a forced token was refused"
    assert m.is_accepting()


def test_backend_stop_ids_only_when_complete(backend):
    g = backend.compile_grammar(SimpleNamespace(name="REGEX"), "[0-9]+", stop_token_ids={STOP, EOS})
    bitmask = backend.allocate_token_bitmask(1)
    g.fill_bitmask(bitmask, 0)
    assert STOP not in rows_allowed(bitmask, 0) and not g.accept_tokens("r", [STOP])
    assert g.accept_tokens("r", VOCAB.encode("7"))
    g.fill_bitmask(bitmask, 0)
    assert {STOP, EOS} <= rows_allowed(bitmask, 0)
    assert g.validate_tokens([STOP, STOP]) == [STOP] and not g.is_terminated()
    assert g.accept_tokens("r", [STOP]) and g.is_terminated()
    g.rollback(1)
    assert not g.is_terminated() and len(g.matcher.tokens) == 1


@pytest.mark.parametrize("spare", [0, 3, 12, 40])
def test_backend_budget_forces_the_shortest_completion(backend, spare):
    g = backend.compile_grammar(SimpleNamespace(name="JSON"), json.dumps(SCHEMA))
    g.max_tokens = len(g.matcher.completion_tokens()) + spare
    bitmask = backend.allocate_token_bitmask(1)
    rng = random.Random(3)
    loop = VOCAB.encode("abc")[0]
    while len(g.matcher.tokens) < g.max_tokens and not g.is_terminated():
        g.fill_bitmask(bitmask, 0)
        allowed = sorted(rows_allowed(bitmask, 0))
        t = loop if loop in allowed else rng.choice(allowed)
        assert g.accept_tokens("r", [t])
    jsonschema.validate(json.loads(text(g.matcher.tokens)), SCHEMA)


def test_backend_registration_is_gated_to_tested_vllm_releases(monkeypatch, caplog):
    from constrained.integrations.vllm import _compat, plugin

    assert plugin._supported("0.32.0") and plugin._supported("0.32.5rc1")
    assert not plugin._supported("0.33.0") and not plugin._supported(None) and not plugin._supported("1.32.0")
    monkeypatch.setattr(plugin, "vllm_version", lambda: "0.40.0")
    monkeypatch.setitem(plugin._STATE, "registered", False)
    with caplog.at_level("WARNING", logger="constrained.vllm"):
        assert plugin.register() is False                      # nothing patched: vLLM left as it was
    assert "not one of the tested releases" in caplog.text and "0.40.0" in caplog.text
    monkeypatch.setattr(plugin, "vllm_version", lambda: None)
    assert plugin.register() is False                          # no vLLM installed
    assert _compat.TESTED_VERSIONS == ("0.32",)
