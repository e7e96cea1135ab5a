"""The sampler interface: what every sampler takes and returns.

A sampler runs a `LogitsSource` (next-token logits of a prefix, extended token by
token; e.g. `constrained.models.ModelSession`) under a `Constraint` (a grammar
matcher or user code) and returns `Sample`s.  Per-step samplers, beams,
mirostat and the grammar-aligned samplers all implement `Sampler.run`.
"""

from __future__ import annotations

from typing import Any, Protocol

from constrained.constraint import Constraint, LogitsSource, Sample

__all__ = ["LogitsSource", "Sample", "Sampler", "multinomial", "uniform"]


def multinomial(probs: Any, generator: Any = None) -> int:
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


def uniform(shape: Any = 1, generator: Any = None, dtype: Any = None) -> Any:
    """Uniform draws in [0, 1) of ``shape`` from ``generator``, made on its device (the
    CPU's global generator without one) and returned on the CPU (a torch tensor), so a
    CUDA generator works too."""
    import torch

    device = generator.device if generator is not None else "cpu"
    return torch.rand(shape, generator=generator, device=device, dtype=dtype or torch.float32).cpu()


class Sampler(Protocol):
    """``run(source, constraint, eos_ids, max_tokens=..., generator=...) -> list[Sample]``."""

    def run(self, source: LogitsSource, constraint: Constraint, eos_ids: tuple[int, ...], *,
            max_tokens: int, generator: Any = None) -> list[Sample]: ...
