"""Sequential Monte Carlo over constrained sequences (Loula et al., ICLR 2025, arXiv 2504.13139).

``N`` particles grow together, one batched model forward pass per step (the
source's ``replicate(N)``: a `constrained.models.BatchSession` for real models).
Each particle draws its next token from the constrained next-token distribution —
by `samplers.awrs.awrs_step` (``proposal="awrs"``: a few ``allows`` checks, an
unbiased weight ``Ẑ``) or from the exact mask (``proposal="mask"``: the weight is
the exact allowed mass ``Σ_{t∈M} p(t)``) — and multiplies its weight by that local
normaliser.  When the effective sample size ``1/ΣW²`` falls below
``ess_threshold·N`` the particles are resampled (``"multinomial"`` or
``"systematic"``; finished particles take part) and the weights reset to their
mean.  The target is the model's distribution conditioned on the constraint,
``Q(w) ∝ P(w)·1[w ∈ L]``: the weighted particles approximate it (bias O(1/N)), and
``exp(log_ml)`` is an unbiased estimate of ``P(L)``, the probability that the
model's own samples satisfy the constraint (within ``max_tokens``).

Example:
    >>> import torch
    >>> from constrained import Grammar, TokenVocabulary, compile_grammar
    >>> from constrained.models import TableModel
    >>> vocab = TokenVocabulary.from_token_bytes([b"a", b"b", b""], eos_ids=[2])
    >>> lm = TableModel(vocab, seed=1)
    >>> m = compile_grammar(Grammar.from_regex("ab|ba"), vocab, cache_dir=None).matcher()
    >>> out = SMC(n_particles=4).run(lm.session([]), m, lm.eos_ids, max_tokens=4,
    ...                              generator=torch.Generator().manual_seed(0))
    >>> sorted({bytes(vocab.token_bytes[t][0] for t in s.tokens) for s in out} - {b"ab", b"ba"})
    []
    >>> round(sum(s.info["weight"] for s in out), 6)
    1.0
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from constrained.masks import apply_token_mask
from samplers.awrs import awrs_step, eos_draw
from samplers.base import Sample, multinomial, uniform

RESAMPLING = ("multinomial", "systematic")
PROPOSALS = ("awrs", "mask")


def effective_sample_size(log_weights) -> float:
    """``1 / Σ W_i²`` of the normalised weights (0 when every weight is −inf)."""
    w = np.asarray(log_weights, dtype=np.float64)
    if np.all(w == -np.inf):
        return 0.0
    w = np.exp(w - w.max())
    w /= w.sum()
    return float(1.0 / np.sum(w * w))


def resample(weights, method: str, generator=None) -> list[int]:
    """Ancestor indices for ``len(weights)`` particles: ``"multinomial"`` (i.i.d. draws)
    or ``"systematic"`` (one uniform, evenly spaced: lower variance)."""
    import torch

    w = np.asarray(weights, dtype=np.float64)
    n = len(w)
    cdf = np.cumsum(w / w.sum())
    cdf[-1] = 1.0
    if method == "multinomial":
        u = uniform(n, generator, torch.float64).numpy()
    elif method == "systematic":
        u = (np.arange(n) + float(uniform(1, generator, torch.float64))) / n
    else:
        raise ValueError(f"resampling must be one of {RESAMPLING}, not {method!r}")
    return [int(i) for i in np.searchsorted(cdf, u, side="right").clip(0, n - 1)]


class _ForkedRows:
    """A batch of forks of a single-sequence source (for sources without ``replicate``)."""

    def __init__(self, source, n: int) -> None:
        self.rows = [source.fork() for _ in range(n)]

    def logits(self):
        import torch

        return torch.stack([r.logits() for r in self.rows])

    def extend(self, rows) -> None:
        for r, new in zip(self.rows, rows):
            if new:
                r.extend(new)

    def select(self, indices) -> None:
        self.rows = [self.rows[i].fork() for i in indices]


@dataclass
class SMC:
    """Particles for the globally constrained distribution (see the module docstring).
    ``run`` returns the ``n_particles`` final particles as `Sample`s whose ``info`` has
    ``log_weight``, ``weight`` (normalised), ``log_ml`` (the log marginal-likelihood
    estimate), ``ess`` (per step), ``resamples`` and ``checks`` (constraint checks with
    ``proposal="awrs"``); `posterior` turns them into a distribution over outputs."""

    n_particles: int = 8
    ess_threshold: float = 0.5
    resampling: str = "systematic"
    proposal: str = "awrs"
    temperature: float = 1.0

    def __post_init__(self) -> None:
        if self.n_particles < 1:
            raise ValueError(f"n_particles must be >= 1, not {self.n_particles}")
        if self.resampling not in RESAMPLING:
            raise ValueError(f"resampling must be one of {RESAMPLING}, not {self.resampling!r}")
        if self.proposal not in PROPOSALS:
            raise ValueError(f"proposal must be one of {PROPOSALS}, not {self.proposal!r}")
        if not 0.0 <= self.ess_threshold <= 1.0:
            raise ValueError(f"ess_threshold must be in [0, 1], not {self.ess_threshold}")

    def run(self, source, constraint, eos_ids: tuple[int, ...], *, max_tokens: int,
            generator=None) -> list[Sample]:
        import torch

        n = self.n_particles
        eos = [int(t) for t in eos_ids]
        rows = source.replicate(n) if hasattr(source, "replicate") else _ForkedRows(source, n)
        cons = [constraint.fork() for _ in range(n)]
        tokens: list[list[int]] = [[] for _ in range(n)]
        stops: list[str | None] = [None] * n
        logw = np.zeros(n)
        logprob = np.zeros(n)
        checks = resamples = 0
        ess_history: list[float] = []
        scale = 1.0 / max(self.temperature, 1e-6)
        while any(s is None for s in stops):
            logits = rows.logits()
            feed: list[list[int]] = [[] for _ in range(n)]
            for i in range(n):
                if stops[i] is not None:
                    continue
                full = torch.log_softmax(logits[i].double(), dim=-1)
                tempered = torch.log_softmax(logits[i].double() * scale, dim=-1)
                if len(tokens[i]) >= max_tokens:              # budget spent: EOS or nothing
                    if cons[i].is_accepting():
                        e, log_mass = eos_draw(tempered, eos, generator)
                        logw[i] += log_mass
                        logprob[i] += float(full[e])
                        cons[i].advance(e)
                        stops[i] = "eos"
                    else:
                        logw[i], stops[i] = -math.inf, "max_tokens"
                    continue
                if self.proposal == "awrs":
                    step = awrs_step(logits[i], cons[i], eos, generator, self.temperature)
                    checks += step.checks
                    t, log_z = step.token, step.log_weight
                else:
                    masked = apply_token_mask(tempered.clone(), cons[i].mask())
                    log_z = float(torch.logsumexp(masked, 0))
                    t = None if log_z == -math.inf else multinomial(torch.softmax(masked, 0), generator)
                if t is None:
                    logw[i], stops[i] = -math.inf, "dead_end"
                    continue
                logw[i] += log_z
                logprob[i] += float(full[t])
                if not cons[i].advance(t):      # pragma: no cover - the constraint allowed it
                    raise RuntimeError(f"the constraint refused token {t} that it allowed")
                if t in eos:
                    stops[i] = "eos"
                else:
                    tokens[i].append(t)
                    feed[i] = [t]
            if any(feed):
                rows.extend(feed)
            if np.all(logw == -np.inf):
                break
            ess = effective_sample_size(logw)
            ess_history.append(ess)
            if ess < self.ess_threshold * n and any(s is None for s in stops):
                weights = np.exp(logw - logw.max())
                ancestors = resample(weights, self.resampling, generator)
                mean = float(np.logaddexp.reduce(logw) - math.log(n))
                rows.select(ancestors)
                cons = [cons[a].fork() for a in ancestors]
                tokens = [list(tokens[a]) for a in ancestors]
                stops = [stops[a] for a in ancestors]
                logprob = logprob[ancestors]
                logw = np.full(n, mean)
                resamples += 1
        log_ml = float(np.logaddexp.reduce(logw) - math.log(n)) if np.any(logw > -np.inf) else -math.inf
        weights = np.exp(logw - logw.max()) if log_ml > -math.inf else np.zeros(n)
        weights = weights / weights.sum() if weights.sum() > 0 else weights
        return [Sample(tokens[i], float(logprob[i]), stops[i] or "dead_end",
                       info={"log_weight": float(logw[i]), "weight": float(weights[i]), "log_ml": log_ml,
                             "ess": ess_history, "resamples": resamples, "checks": checks})
                for i in range(n)]


def posterior(samples: list[Sample]) -> dict[tuple[int, ...], float]:
    """The weighted particles as a distribution over finished outputs (token tuples)."""
    out: dict[tuple[int, ...], float] = {}
    for s in samples:
        if s.finished and s.info.get("weight", 0.0) > 0:
            key = tuple(s.tokens)
            out[key] = out.get(key, 0.0) + s.info["weight"]
    total = sum(out.values())
    return {k: v / total for k, v in out.items()} if total > 0 else {}
