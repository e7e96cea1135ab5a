"""The sampler interface: what every sampler takes and returns.

A sampler runs a `LogitsSource` (next-token logits of a prefix, extended token by
token; e.g. `constrained.models.ModelSession`) under a `Constraint` (a grammar
matcher or user code) and returns `Sample`s.  Per-step samplers, beams,
mirostat and the grammar-aligned samplers all implement `Sampler.run`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from samplers.constraint import Constraint


@runtime_checkable
class LogitsSource(Protocol):
    """Next-token logits for a growing prefix."""

    def logits(self):
        """Float logits (torch, 1-D, the model's full width) for the current prefix."""

    def extend(self, tokens: list[int]) -> None:
        """Append tokens to the prefix."""

    def fork(self) -> "LogitsSource":
        """An independent copy."""


@dataclass
class Sample:
    """One output: its tokens (EOS excluded), the model's log-probability of them
    (unconstrained, temperature 1), and why it stopped: ``"eos"`` (the constraint
    accepted and EOS was chosen), ``"max_tokens"`` or ``"dead_end"`` (nothing allowed)."""

    tokens: list[int]
    logprob: float = 0.0
    stop: str = "eos"
    forced: int = 0                  # tokens appended by jump-forward, not sampled
    info: dict = field(default_factory=dict)

    @property
    def finished(self) -> bool:
        return self.stop == "eos"


def multinomial(probs, generator=None) -> int:
    """One index drawn with probability proportional to ``probs`` (a 1-D torch tensor on
    any device).  The draw is made on ``generator``'s device: a seeded CPU generator
    (``torch.Generator().manual_seed(s)``, what `constrained.generate` makes for
    ``seed=``) works when the model's logits live on a GPU, and gives the same draws
    there as on the CPU for the same probabilities.  Without a generator the draw is
    made where ``probs`` are (torch's global generator of that device).

    Example:
        >>> import torch
        >>> multinomial(torch.tensor([0.0, 1.0, 0.0]), torch.Generator().manual_seed(0))
        1
    """
    import torch

    if generator is not None and probs.device != generator.device:
        probs = probs.to(generator.device)
    return int(torch.multinomial(probs, 1, generator=generator))


def uniform(shape=1, generator=None, dtype=None):
    """Uniform draws in [0, 1) of ``shape`` from ``generator``, made on its device (the
    CPU's global generator without one) and returned on the CPU (a torch tensor), so a
    CUDA generator works too."""
    import torch

    device = generator.device if generator is not None else "cpu"
    return torch.rand(shape, generator=generator, device=device, dtype=dtype or torch.float32).cpu()


class Sampler(Protocol):
    """``run(source, constraint, eos_ids, max_tokens=..., generator=...) -> list[Sample]``."""

    def run(self, source: LogitsSource, constraint: Constraint, eos_ids: tuple[int, ...], *,
            max_tokens: int, generator=None) -> list[Sample]: ...
