"""`BatchSession`: next-token logits for several sequences, one forward pass per step.

Rows have their own prompts (of any lengths) and grow by any number of tokens per
step, including none: each step's block is padded on the right, the padding is
masked out of attention, and every row's positions count only its real tokens, so
each row's logits are what its own `ModelSession` would give.  ``select(indices)``
reorders or duplicates rows (SMC resampling, beams) without recomputing anything.

Example:
    >>> from constrained.models import LanguageModel
    >>> lm = LanguageModel.tiny(seed=0)
    >>> batch = lm.batch_session([[104, 105], [121, 111, 33]])
    >>> batch.extend([[32], []])           # row 0 grows by one token, row 1 waits
    >>> tuple(batch.logits().shape) == (2, lm.logits_width)
    True
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from constrained.errors import ModelError
from constrained.models.language_model import cache_kwargs, new_cache, returned_cache

if TYPE_CHECKING:   # pragma: no cover
    from constrained.models.language_model import LanguageModel

PAD_ID = 0      # any id: padded positions are masked out of attention and never read


class BatchSession:
    """Next-token logits for ``len(prompts)`` sequences with one KV cache (see the module docstring)."""

    def __init__(self, lm: LanguageModel, prompts: list[list[int]], *, _state=None) -> None:
        import torch

        self.tokens: list[list[int]]
        if _state is not None:
            self.lm = lm
            self.tokens, self._cache, self._attention, self._logits = _state
            return
        if not prompts:
            raise ModelError("a batch needs at least one prompt")
        for i, p in enumerate(prompts):
            if not p:
                raise ModelError(f"prompt {i} of the batch is empty: give at least one token")
        self.lm = lm
        self.tokens = [[] for _ in prompts]
        self._cache = None
        self._attention = torch.zeros((len(prompts), 0), dtype=torch.long, device=lm.device)
        self._logits = torch.zeros((len(prompts), lm.logits_width), dtype=torch.float32, device=lm.device)
        self.extend(prompts)

    @classmethod
    def from_session(cls, session, n: int) -> BatchSession:
        """``n`` rows, each a copy of ``session`` (a `ModelSession`): its KV cache is
        repeated, nothing is recomputed (SMC particles start like this)."""
        import copy

        import torch

        if n < 1:
            raise ModelError(f"a batch needs at least one row, not {n}")
        cache = copy.deepcopy(session._cache)
        cache.batch_repeat_interleave(n)
        attention = torch.ones((n, len(session.tokens)), dtype=torch.long, device=session.lm.device)
        logits = session.logits().reshape(1, -1).repeat(n, 1)
        return cls(session.lm, [], _state=([list(session.tokens) for _ in range(n)], cache, attention, logits))

    def __len__(self) -> int:
        return len(self.tokens)

    def logits(self):
        """Float logits ``[rows, logits_width]`` for each row's current prefix."""
        return self._logits

    def extend(self, rows: list[list[int]]) -> None:
        """Append ``rows[i]`` (possibly empty) to row ``i``; one forward pass for all."""
        import torch

        if len(rows) != len(self.tokens):
            raise ModelError(f"extend got {len(rows)} rows for a batch of {len(self.tokens)}")
        width = max(len(r) for r in rows)
        if width == 0:
            return
        device = self.lm.device
        ids = torch.full((len(rows), width), PAD_ID, dtype=torch.long, device=device)
        real = torch.zeros((len(rows), width), dtype=torch.long, device=device)
        for i, r in enumerate(rows):
            if r:
                ids[i, :len(r)] = torch.tensor(r, dtype=torch.long, device=device)
                real[i, :len(r)] = 1
        attention = torch.cat([self._attention, real], dim=1)
        positions = (attention.cumsum(dim=1) - 1).clamp(min=0)[:, -width:]
        if self._cache is None:
            self._cache = new_cache(self.lm.model)
        with torch.no_grad():
            out = self.lm.model(input_ids=ids, attention_mask=attention, position_ids=positions, use_cache=True,
                                **cache_kwargs(self.lm.model, self._cache))
        self._cache = returned_cache(self.lm.model, out)
        self._attention = attention
        grown = [i for i, r in enumerate(rows) if r]
        last = torch.tensor([len(rows[i]) - 1 for i in grown], device=device)
        index = torch.tensor(grown, device=device)
        self._logits[index] = out.logits[index, last].float()
        for i in grown:
            self.tokens[i].extend(int(t) for t in rows[i])

    def select(self, indices: list[int]) -> None:
        """Keep rows ``indices`` in that order (repeats duplicate a row)."""
        import torch

        if not indices or any(not 0 <= i < len(self.tokens) for i in indices):
            raise ModelError(f"select needs row indices in [0, {len(self.tokens)}), got {list(indices)[:8]}")
        index = torch.tensor(list(indices), dtype=torch.long, device=self.lm.device)
        if self._cache is not None:
            self._cache.reorder_cache(index)
        self._attention = self._attention[index]
        self._logits = self._logits[index]
        self.tokens = [list(self.tokens[i]) for i in indices]
