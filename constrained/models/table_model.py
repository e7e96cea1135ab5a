"""`TableModel`: a language model given by a fixed table of next-token logits.

Each prefix's logits are drawn once from a seeded generator keyed by the prefix, so
the model is a fixed, fully known distribution over token sequences: exact targets
(e.g. the grammar-conditioned distribution of `samplers.exact`) can be enumerated
and samplers checked against them.  It has the same session interface as a real
model: `TableSession` (``logits()``, ``extend``, ``extend_scored``, ``truncate``,
``fork``, ``replicate``) and
`TableBatch` (rows, ``extend(rows)``, ``select``), so every sampler runs on it.

Example:
    >>> from constrained import TokenVocabulary
    >>> vocab = TokenVocabulary.from_token_bytes([b"a", b"b", b"ab", b""], eos_ids=[3])
    >>> lm = TableModel(vocab, seed=0)
    >>> s = lm.session([])
    >>> s.extend([0]); tuple(s.logits().shape)
    (4,)
    >>> bool((lm.session([0]).logits() == s.logits()).all())      # same prefix, same logits
    True
"""

from __future__ import annotations

import hashlib

import numpy as np

from constrained.vocabulary import TokenVocabulary


class TableModel:
    """Fixed next-token logits per prefix (see the module docstring).

    ``scale`` is the standard deviation of the logits (larger: peakier
    distributions); ``overrides`` maps a prefix (tuple of ids) to its logits."""

    def __init__(self, vocab: TokenVocabulary, *, seed: int = 0, scale: float = 2.0,
                 overrides: dict[tuple[int, ...], list[float]] | None = None) -> None:
        self.vocab = vocab
        self.seed = seed
        self.scale = scale
        self.logits_width = len(vocab)
        self.overrides = {tuple(k): np.asarray(v, dtype=np.float64) for k, v in (overrides or {}).items()}
        self._cache: dict[tuple[int, ...], np.ndarray] = {}

    @property
    def eos_ids(self) -> tuple[int, ...]:
        return tuple(int(i) for i in self.vocab.eos_ids)

    def logits_for(self, prefix) -> np.ndarray:
        """The logits (float64, read-only) after ``prefix``."""
        key = tuple(int(t) for t in prefix)
        hit = self._cache.get(key)
        if hit is None:
            if key in self.overrides:
                hit = self.overrides[key].copy()
            else:
                digest = hashlib.blake2b(repr((self.seed, key)).encode(), digest_size=8).digest()
                rng = np.random.default_rng(int.from_bytes(digest, "little"))
                hit = rng.normal(0.0, self.scale, self.logits_width)
            hit.setflags(write=False)
            self._cache[key] = hit
        return hit

    def logprob(self, tokens, prompt=()) -> float:
        """log P(tokens | prompt) under the table (natural log)."""
        prefix = list(prompt)
        total = 0.0
        for t in tokens:
            logits = self.logits_for(prefix)
            total += float(logits[t] - np.logaddexp.reduce(logits))
            prefix.append(int(t))
        return total

    def session(self, prompt_ids) -> TableSession:
        return TableSession(self, list(prompt_ids))

    def batch_session(self, prompts) -> TableBatch:
        return TableBatch(self, [list(p) for p in prompts])


class TableSession:
    """One sequence over a `TableModel`: the `samplers.base.LogitsSource` interface."""

    def __init__(self, lm: TableModel, tokens: list[int]) -> None:
        self.lm = lm
        self.tokens = tokens

    def logits(self):
        import torch

        return torch.from_numpy(np.array(self.lm.logits_for(self.tokens), dtype=np.float32))

    def extend(self, tokens) -> None:
        self.tokens.extend(int(t) for t in tokens)

    def extend_scored(self, tokens):
        """Append ``tokens``; row ``i`` of the result is the logits after ``tokens[:i + 1]``."""
        import torch

        rows = []
        for t in tokens:
            self.tokens.append(int(t))
            rows.append(np.array(self.lm.logits_for(self.tokens), dtype=np.float32))
        return torch.from_numpy(np.stack(rows))

    def truncate(self, length: int) -> None:
        del self.tokens[length:]

    def fork(self) -> TableSession:
        return TableSession(self.lm, list(self.tokens))

    def replicate(self, n: int) -> TableBatch:
        """``n`` rows, each this sequence (particles)."""
        return TableBatch(self.lm, [list(self.tokens) for _ in range(n)])


class TableBatch:
    """Several sequences over a `TableModel`: the `constrained.models.BatchSession` interface."""

    def __init__(self, lm: TableModel, rows: list[list[int]]) -> None:
        self.lm = lm
        self.tokens = rows

    def __len__(self) -> int:
        return len(self.tokens)

    def logits(self):
        import torch

        return torch.from_numpy(np.stack([self.lm.logits_for(r) for r in self.tokens]).astype(np.float32))

    def extend(self, rows) -> None:
        for row, new in zip(self.tokens, rows):
            row.extend(int(t) for t in new)

    def select(self, indices) -> None:
        self.tokens = [list(self.tokens[i]) for i in indices]
