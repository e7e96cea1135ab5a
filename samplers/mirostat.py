"""Mirostat v1 and v2 (Basu et al., ICLR 2021): sampling at a target surprise τ.

Both keep a running threshold ``mu`` (initially 2τ) and, after each token, move it
by ``eta * (observed surprise - τ)``; surprise is ``-log2 p`` of the chosen token
under the *masked* distribution (the constraint first, then mirostat's truncation).

* v2: keep the allowed tokens whose surprise is at most ``mu`` (at least the most
  likely one), sample from them renormalised.
* v1: estimate the Zipf exponent ``s`` of the allowed distribution from its top
  ``m`` probabilities, set ``k = ((ε · 2^mu) / (1 - N^-ε))^(1/s)`` with
  ``ε = s - 1`` and ``N`` the number of allowed tokens, and sample from the top k.

A rule is stateful: `AncestralSampler` resets it at the start of every run; the
surprises of the last run are in ``surprises``.

Example:
    >>> import torch
    >>> rule = MirostatV2(tau=1.0, eta=0.5)
    >>> rule.reset(); g = torch.Generator().manual_seed(0)
    >>> logits = torch.log(torch.tensor([0.5, 0.25, 0.125, 0.125]))
    >>> [rule.choose(logits, g) for _ in range(3)] and len(rule.surprises)
    3
"""

from __future__ import annotations

import math

from samplers.ancestral import TokenRule


class _Mirostat(TokenRule):
    def __init__(self, tau: float, eta: float = 0.1) -> None:
        if tau <= 0:
            raise ValueError(f"mirostat's target surprise tau must be positive, not {tau}")
        self.tau = tau
        self.eta = eta
        self.reset()

    def reset(self) -> None:
        self.mu = 2 * self.tau
        self.surprises: list[float] = []

    def _truncate(self, probs, order, finite: int) -> int:
        """How many of the ``finite`` allowed tokens, most likely first (``order``), to keep."""
        raise NotImplementedError

    def probabilities(self, masked):
        """The allowed tokens mirostat keeps at the current ``mu``, renormalised."""
        import torch

        probs = torch.softmax(masked.double(), dim=-1)
        order = torch.argsort(probs, descending=True)
        finite = int(torch.isfinite(masked).sum().item())
        k = max(1, min(finite, self._truncate(probs, order, finite)))
        keep = order[:k]
        out = torch.zeros_like(masked)
        out[keep] = (probs[keep] / probs[keep].sum()).to(out.dtype)
        return out

    def observe(self, token: int, masked) -> None:
        """Move ``mu`` by the surprise of ``token`` under the masked distribution."""
        import torch

        p = float(torch.softmax(masked.double(), dim=-1)[token])
        surprise = -math.log2(max(p, 1e-300))
        self.surprises.append(surprise)
        self.mu -= self.eta * (surprise - self.tau)


class MirostatV2(_Mirostat):
    """Mirostat 2.0: truncate at surprise ``mu`` (see the module docstring)."""

    def _truncate(self, probs, order, finite: int) -> int:
        import torch

        surprise = -torch.log2(probs[order[:finite]].clamp_min(1e-300))
        return int((surprise <= self.mu).sum().item())


class MirostatV1(_Mirostat):
    """Mirostat 1.0: a Zipf estimate gives the top-k size (see the module docstring)."""

    def __init__(self, tau: float, eta: float = 0.1, m: int = 100) -> None:
        self.m = m
        super().__init__(tau, eta)

    def _truncate(self, probs, order, finite: int) -> int:
        import torch

        top = probs[order[:min(self.m, finite)]]
        if top.numel() < 2:
            return 1
        i = torch.arange(1, top.numel(), dtype=torch.float64, device=top.device)
        t = torch.log((i + 1) / i)
        b = torch.log(top[:-1].clamp_min(1e-300) / top[1:].clamp_min(1e-300))
        s_hat = float((t * b).sum() / (t * t).sum())
        eps = s_hat - 1
        if abs(eps) < 1e-6 or s_hat <= 0:
            return finite
        n = max(finite, 2)
        k = ((eps * 2 ** self.mu) / (1 - n ** (-eps))) ** (1 / s_hat)
        return int(round(k)) if math.isfinite(k) else finite
