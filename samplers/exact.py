"""Exact output distributions by enumeration, for testing samplers against the truth.

For a model with a known table of logits (`constrained.models.TableModel`) and a
constraint with a finite language (within ``max_tokens``), every output token
sequence can be enumerated, so the distributions samplers aim at are exact:

* `target_distribution`: ``Q(w) = P(w)·1[w ∈ L] / P(L)`` — the model conditioned on
  the constraint (what ASAp converges to and SMC approximates);
* `masked_distribution`: what per-step masking samples, ``Π_i q(w_i | w_<i)`` with
  ``q`` the masked, renormalised next-token distribution (AWRS's too);
* `distribution_of(conditional)`: any sampler given by its next-token conditionals
  (e.g. an ASAp trie's current ones);
* `kl_divergence`, `total_variation`, `empirical` to compare them.

Outputs are token tuples without the EOS (all EOS ids are one outcome), as in
`samplers.base.Sample.tokens`.  At depth ``max_tokens`` only EOS may come, as in
every sampler of this package.

Example:
    >>> from constrained import Grammar, TokenVocabulary, compile_grammar
    >>> from constrained.models import TableModel
    >>> vocab = TokenVocabulary.from_token_bytes([b"a", b"b", b""], eos_ids=[2])
    >>> m = compile_grammar(Grammar.from_regex("a|ab|bb"), vocab, cache_dir=None).matcher()
    >>> lm = TableModel(vocab, seed=3)
    >>> q, g = target_distribution(lm, m, max_tokens=4), masked_distribution(lm, m, max_tokens=4)
    >>> sorted(q) == sorted(g) == [(0,), (0, 1), (1, 1)], round(sum(q.values()), 9)
    (True, 1.0)
    >>> kl_divergence(q, g) > 0             # masking is not the conditioned model
    True
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from constrained.masks import unpack_mask

Distribution = dict[tuple[int, ...], float]


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    return logits - np.logaddexp.reduce(logits)


def _allowed(constraint, eos: list[int], width: int, depth: int, max_tokens: int) -> tuple[list[int], bool]:
    """Allowed non-EOS tokens (none at the budget) and whether EOS is allowed."""
    accepting = bool(constraint.is_accepting())
    if depth >= max_tokens:
        return [], accepting
    bits = unpack_mask(constraint.mask(), width)
    return [int(t) for t in np.flatnonzero(bits) if int(t) not in eos], accepting


def distribution_of(conditional: Callable, constraint, eos_ids, *, max_tokens: int) -> Distribution:
    """The output distribution of a sampler whose next-token distribution after
    ``prefix`` is ``conditional(prefix, constraint) -> {token: probability}`` (EOS ids
    may appear; their probabilities add up to the output's)."""
    eos = [int(t) for t in eos_ids]
    out: Distribution = {}
    stack: list[tuple[tuple[int, ...], Any, float]] = [((), constraint.fork(), 0.0)]
    while stack:
        prefix, con, logq = stack.pop()
        for t, prob in conditional(prefix, con).items():
            if prob <= 0:
                continue
            if t in eos:
                out[prefix] = out.get(prefix, 0.0) + math.exp(logq + math.log(prob))
                continue
            child = con.fork()
            if not child.advance(t):
                raise ValueError(f"the conditional gave token {t} after {list(prefix)}, which the constraint refuses")
            stack.append((prefix + (t,), child, logq + math.log(prob)))
    return out


def _model_conditional(model, prompt, eos: list[int], max_tokens: int, temperature: float, masked: bool):
    def conditional(prefix, con) -> dict[int, float]:
        logp = _log_softmax(np.asarray(model.logits_for(list(prompt) + list(prefix)), dtype=np.float64)
                            / temperature)
        tokens, accepting = _allowed(con, eos, len(logp), len(prefix), max_tokens)
        allowed = tokens + (eos if accepting else [])
        if not allowed:
            return {}
        p = np.exp(logp[allowed])
        if masked:
            p = p / p.sum()
        return {t: float(x) for t, x in zip(allowed, p)}
    return conditional


def language(model, constraint, eos_ids=None, *, prompt=(), max_tokens: int, temperature: float = 1.0
             ) -> Distribution:
    """``P(w)`` (EOS included) of every output ``w`` the constraint allows, unnormalised."""
    eos = [int(t) for t in (eos_ids if eos_ids is not None else model.eos_ids)]
    return distribution_of(_model_conditional(model, prompt, eos, max_tokens, temperature, masked=False),
                           constraint, eos, max_tokens=max_tokens)


def target_distribution(model, constraint, eos_ids=None, *, prompt=(), max_tokens: int,
                        temperature: float = 1.0) -> Distribution:
    """``Q(w) = P(w)·1[w ∈ L] / P(L)`` (see the module docstring)."""
    weights = language(model, constraint, eos_ids, prompt=prompt, max_tokens=max_tokens, temperature=temperature)
    total = sum(weights.values())
    if total <= 0:
        raise ValueError("the constraint allows no output within max_tokens")
    return {w: x / total for w, x in weights.items()}


def masked_distribution(model, constraint, eos_ids=None, *, prompt=(), max_tokens: int,
                        temperature: float = 1.0) -> Distribution:
    """The distribution of per-step masked sampling (see the module docstring)."""
    eos = [int(t) for t in (eos_ids if eos_ids is not None else model.eos_ids)]
    return distribution_of(_model_conditional(model, prompt, eos, max_tokens, temperature, masked=True),
                           constraint, eos, max_tokens=max_tokens)


def kl_divergence(p: Distribution, q: Distribution) -> float:
    """``KL(p ‖ q) = Σ p log(p/q)`` in nats (inf where ``q`` misses mass of ``p``)."""
    total = 0.0
    for w, pw in p.items():
        if pw > 0:
            qw = q.get(w, 0.0)
            if qw <= 0:
                return math.inf
            total += pw * math.log(pw / qw)
    return total


def total_variation(p: Distribution, q: Distribution) -> float:
    """``½ Σ |p − q|``."""
    return 0.5 * sum(abs(p.get(w, 0.0) - q.get(w, 0.0)) for w in set(p) | set(q))


def empirical(outputs, support=None, *, pseudo_count: float = 0.0) -> Distribution:
    """Frequencies of ``outputs`` (token sequences or `Sample`s); with ``support`` and
    ``pseudo_count``, every outcome of the support gets that many extra counts (so a
    KL divergence against it stays finite)."""
    counts: dict[tuple[int, ...], float] = {}
    for o in outputs:
        key = tuple(getattr(o, "tokens", o))
        counts[key] = counts.get(key, 0.0) + 1.0
    for w in support or ():
        counts[w] = counts.get(w, 0.0) + pseudo_count
    total = sum(counts.values())
    return {w: c / total for w, c in counts.items()} if total > 0 else {}


def chi_square_pvalue(counts: dict, probabilities: dict, *, min_expected: float = 5.0) -> float:
    """p-value of Pearson's chi-square test that ``counts`` (outcome -> count) were drawn
    from ``probabilities`` (outcome -> probability).  Outcomes expected fewer than
    ``min_expected`` times are pooled into one cell; a count outside the support gives 0."""
    import torch

    n = sum(counts.values())
    if any(c > 0 and probabilities.get(k, 0.0) <= 0 for k, c in counts.items()):
        return 0.0
    cells: list[tuple[float, float]] = []
    pooled_obs = pooled_exp = 0.0
    for k, p in probabilities.items():
        expected, observed = n * p, counts.get(k, 0)
        if expected < min_expected:
            pooled_obs, pooled_exp = pooled_obs + observed, pooled_exp + expected
        else:
            cells.append((observed, expected))
    if pooled_exp > 0:
        cells.append((pooled_obs, pooled_exp))
    if len(cells) < 2:
        return 1.0
    stat = sum((o - e) ** 2 / e for o, e in cells)
    dof = len(cells) - 1
    return float(torch.special.gammaincc(torch.tensor(dof / 2.0, dtype=torch.float64),
                                         torch.tensor(stat / 2.0, dtype=torch.float64)))
