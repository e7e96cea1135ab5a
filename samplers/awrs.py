"""Adaptive weighted rejection sampling (AWRS; Lipkin et al. 2025, arXiv 2504.05410).

At each step the target is the model's distribution restricted to what the
constraint allows, ``π(t) ∝ p(t|x)·φ(xt)`` (``φ`` = ``constraint.allows``; EOS only
where the constraint accepts).  AWRS never computes a mask: it draws tokens from
``p`` without replacement (Gumbel keys, lazily ordered) and checks only the drawn
token; a rejected token is removed and the rest renormalised, so the first accepted
token is an exact draw from ``π``.  It also returns an unbiased estimate of the
local normaliser ``Z = Σ_t p(t|x)·φ(xt)``::

    Ẑ = p(t*) + B·(1 − R − p(t*))

with ``R`` the rejected mass and ``B = φ(next token in the order)`` — one extra
check — (``E[Ẑ] = Z``; ``Ẑ = Z`` when every remaining token is valid or invalid).
The cost adapts to the constraint: 2 checks when the model's choice is valid, one
more per rejected draw.  `AWRSSampler` decodes a sequence with it and reports the
sequence's importance weight ``Π Ẑ`` (`samplers.smc.SMC` uses the same step).

Example:
    >>> import torch
    >>> from constrained import Grammar, TokenVocabulary, compile_grammar
    >>> vocab = TokenVocabulary.from_token_bytes([b"a", b"b", b"c", b""], eos_ids=[3])
    >>> m = compile_grammar(Grammar.from_regex("b+"), vocab, cache_dir=None).matcher()
    >>> step = awrs_step(torch.tensor([2.0, 0.0, 1.0, 0.0]), m, (3,), torch.Generator().manual_seed(0))
    >>> step.token, round(step.log_weight, 4) == round(float(torch.log_softmax(torch.tensor([2.0, 0, 1, 0]), 0)[1]), 4)
    (1, True)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from samplers.base import Sample, multinomial, uniform

_FIRST_CHUNK = 16


@dataclass
class AWRSStep:
    """One AWRS draw: the token (None when no token is allowed), ``log Ẑ`` (−inf then),
    and how many constraint checks it took."""

    token: int | None
    log_weight: float
    checks: int


def _order(keys):
    """Token ids by decreasing key, lazily (top-k chunks that double), skipping −inf keys."""
    import torch

    n = keys.numel()
    k = min(_FIRST_CHUNK, n)
    done = 0
    while done < n:
        values, ids = torch.topk(keys, k)
        for v, i in zip(values[done:].tolist(), ids[done:].tolist()):
            if v == -math.inf:
                return
            yield i
        done = k
        k = min(2 * k, n)


def awrs_step(logits, constraint, eos_ids, generator=None, temperature: float = 1.0) -> AWRSStep:
    """One exact draw from the constrained next-token distribution and its weight (see
    the module docstring).  ``logits``: 1-D, the model's full width; ``temperature``
    scales them first."""
    import torch

    # on the CPU: the draws below read single entries, each a device sync on a GPU
    logp = torch.log_softmax(logits.double() / max(temperature, 1e-6), dim=-1).cpu()
    u = uniform(logp.shape, generator, torch.float64).clamp_(1e-300, 1.0)
    keys = logp - torch.log(-torch.log(u))             # Gumbel keys: their order is sampling w/o replacement
    eos = set(int(t) for t in eos_ids)
    accepting: list[bool] = []
    checks = 0

    def valid(t: int) -> bool:
        nonlocal checks
        checks += 1
        if t in eos:
            if not accepting:
                accepting.append(bool(constraint.is_accepting()))
            return accepting[0]
        return bool(constraint.allows(t))

    rejected = 0.0
    order = _order(keys)
    for t in order:
        p = math.exp(float(logp[t]))
        if valid(t):
            nxt = next(order, None)
            b = 1.0 if nxt is None else float(valid(nxt))
            z = p + b * max(0.0, 1.0 - rejected - p)
            return AWRSStep(t, math.log(z), checks)
        rejected += p
    return AWRSStep(None, -math.inf, checks)


def eos_draw(logp, eos: list[int], generator=None) -> tuple[int, float]:
    """At the token budget only EOS may come: one EOS id drawn by its probability under
    ``logp`` (log-probabilities), and the log of their total mass (the step's weight)."""
    import torch

    t = eos[multinomial(torch.softmax(logp[eos], 0), generator)]
    return t, float(torch.logsumexp(logp[eos], 0))


class AWRSSampler:
    """Decode one sequence with `awrs_step` at every step: each token is an exact draw
    from the masked distribution (the same as `samplers.AncestralSampler` with
    ``Temperature(temperature)``) without computing masks; ``Sample.info`` has
    ``log_weight`` (``Σ log Ẑ``: an unbiased estimate of the probability that the
    model's own sampling stays inside the constraint along this path) and ``checks``
    (constraint checks made).  At ``max_tokens`` only EOS may come (weight: its
    probability), else the sample stops with ``"max_tokens"`` and weight −inf."""

    def __init__(self, temperature: float = 1.0) -> None:
        self.temperature = temperature

    def run(self, source, constraint, eos_ids: tuple[int, ...], *, max_tokens: int,
            generator=None) -> list[Sample]:
        import torch

        eos = [int(t) for t in eos_ids]
        tokens: list[int] = []
        logprob = log_weight = 0.0
        checks = 0
        while True:
            logits = source.logits()
            full = torch.log_softmax(logits.double(), dim=-1)
            if len(tokens) >= max_tokens:
                info = {"log_weight": -math.inf, "checks": checks + 1}
                if not constraint.is_accepting():
                    return [Sample(tokens, logprob, "max_tokens", info=info)]
                tempered = torch.log_softmax(logits.double() / max(self.temperature, 1e-6), dim=-1)
                t, log_mass = eos_draw(tempered, eos, generator)
                info["log_weight"] = log_weight + log_mass
                constraint.advance(t)
                return [Sample(tokens, logprob + float(full[t]), "eos", info=info)]
            step = awrs_step(logits, constraint, eos, generator, self.temperature)
            checks += step.checks
            if step.token is None:
                return [Sample(tokens, logprob, "dead_end", info={"log_weight": -math.inf, "checks": checks})]
            log_weight += step.log_weight
            logprob += float(full[step.token])
            if not constraint.advance(step.token):       # pragma: no cover - allows() said yes
                raise RuntimeError(f"the constraint refused token {step.token} that allows() accepted")
            if step.token in eos:
                return [Sample(tokens, logprob, "eos", info={"log_weight": log_weight, "checks": checks})]
            tokens.append(step.token)
            source.extend([step.token])

