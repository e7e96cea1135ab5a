"""Token-by-token samplers: greedy, temperature, top-k, top-p, min-p.

Each step masks the logits with the constraint first (disallowed tokens, padding
logits included, get -inf), then applies the rule's truncation to what is left,
so truncation never keeps a token the constraint forbids and never empties the
choice while an allowed token exists.

Example:
    >>> import torch
    >>> masked = torch.tensor([1.0, 3.0, float("-inf"), 2.0])
    >>> Greedy().choose(masked, None), TopK(1).choose(masked, None)
    (1, 1)
    >>> sorted(MinP(0.3).support(masked).tolist())    # p >= 0.3 * p_max
    [1, 3]
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from samplers.base import Sample, multinomial
from samplers.constraint import Constraint


class TokenRule:
    """Chooses one token from masked logits (-inf = not allowed): ``probabilities(masked)``
    is the rule's per-step distribution, ``observe(token, masked)`` updates a stateful
    rule (mirostat) after each emitted token; ``choose`` samples one and observes it.
    A speculative verifier uses ``probabilities`` and ``observe`` directly."""

    temperature: float = 1.0

    def support(self, masked):
        """Token ids this rule may choose (a torch index tensor)."""
        import torch

        return torch.nonzero(torch.isfinite(masked)).flatten()

    def probabilities(self, masked):
        """The rule's distribution over the full width (zeros outside `support`)."""
        import torch

        keep = self.support(masked)
        out = torch.zeros_like(masked)
        scaled = masked[keep] / max(self.temperature, 1e-6)
        out[keep] = torch.softmax(scaled, dim=-1)
        return out

    def observe(self, token: int, masked) -> None:
        """Called with each token emitted under this rule (stateful rules update here)."""

    def choose(self, masked, generator) -> int:
        probs = self.probabilities(masked)
        token = multinomial(probs, generator)
        self.observe(token, masked)
        return token


class Greedy(TokenRule):
    """The most likely allowed token (ties: the lowest id)."""

    def support(self, masked):
        return masked.argmax().reshape(1)

    def choose(self, masked, generator) -> int:
        return int(masked.argmax().item())


@dataclass
class Temperature(TokenRule):
    """Sample from softmax(logits / temperature) over the allowed tokens."""

    temperature: float = 1.0


@dataclass
class TopK(TokenRule):
    """Sample among the ``k`` most likely allowed tokens."""

    k: int
    temperature: float = 1.0

    def support(self, masked):
        import torch

        finite = int(torch.isfinite(masked).sum().item())
        return torch.topk(masked, max(1, min(self.k, finite))).indices


@dataclass
class TopP(TokenRule):
    """Nucleus sampling: the smallest set of allowed tokens whose probability (after
    temperature) reaches ``p``."""

    p: float
    temperature: float = 1.0

    def support(self, masked):
        import torch

        probs = torch.softmax(masked / max(self.temperature, 1e-6), dim=-1)
        order = torch.argsort(probs, descending=True)
        cum = torch.cumsum(probs[order], dim=-1)
        n = int(torch.searchsorted(cum, torch.tensor(self.p, dtype=cum.dtype, device=cum.device)).item()) + 1
        finite = int(torch.isfinite(masked).sum().item())
        return order[:max(1, min(n, finite))]


@dataclass
class MinP(TokenRule):
    """Allowed tokens with probability at least ``p`` times the most likely one's."""

    p: float
    temperature: float = 1.0

    def support(self, masked):
        import torch

        scaled = masked / max(self.temperature, 1e-6)
        threshold = scaled.max() + math.log(max(self.p, 1e-12))
        return torch.nonzero(scaled >= threshold).flatten()


class AncestralSampler:
    """One sequence, one token at a time, with a `TokenRule` (greedy, top-k, ...);
    ``jump_forward`` appends the tokens the constraint forces without sampling them;
    ``finish_within_budget`` ends an output that would run out of ``max_tokens`` with
    the constraint's shortest completion (see `constrained.decoding.decode_loop`)."""

    def __init__(self, rule: TokenRule | None = None, *, jump_forward: bool = False,
                 finish_within_budget: bool = False) -> None:
        self.rule = rule or Greedy()
        self.jump_forward = jump_forward
        self.finish_within_budget = finish_within_budget

    def run(self, source, constraint: Constraint, eos_ids: tuple[int, ...], *, max_tokens: int,
            generator=None) -> list[Sample]:
        from constrained.decoding import decode_loop

        if hasattr(self.rule, "reset"):      # stateful rules (mirostat) start fresh every run
            self.rule.reset()
        return [decode_loop(source, constraint, eos_ids, self.rule.choose, max_tokens=max_tokens,
                            generator=generator, jump_forward=self.jump_forward,
                            finish_within_budget=self.finish_within_budget)]

    def run_batch(self, source, constraints, eos_ids: tuple[int, ...], *, max_tokens: int,
                  generator=None) -> list[Sample]:
        """One `Sample` per row of ``source`` (a `constrained.models.BatchSession`), row ``i``
        under ``constraints[i]``, all rows in one forward pass per step; stateful rules
        (mirostat) get a fresh copy per row."""
        import copy

        from constrained.decoding import decode_batch

        rules = [copy.deepcopy(self.rule) for _ in constraints] if hasattr(self.rule, "reset") else None
        for rule in rules or ():
            rule.reset()
        choose = [r.choose for r in rules] if rules is not None else self.rule.choose
        return decode_batch(source, constraints, eos_ids, choose, max_tokens=max_tokens, generator=generator,
                            jump_forward=self.jump_forward, finish_within_budget=self.finish_within_budget)
