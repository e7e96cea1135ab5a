"""The constrained decoding loop: forward, mask, choose, advance, until EOS.

`decode_loop` drives one sequence: the source's next-token logits (KV cache
inside the source) are masked with the constraint's packed mask (padding logits
never allowed), a chooser picks a token, the constraint advances, the source
extends.  EOS is chosen only where the constraint accepts (its bits are in the
mask only then).  The returned `samplers.base.Sample` carries the model's
unconstrained log-probability of the tokens and why decoding stopped.

Example:
    >>> from constrained import Grammar, compile_grammar
    >>> from constrained.models import LanguageModel
    >>> from samplers.ancestral import Greedy
    >>> lm = LanguageModel.tiny(seed=0)
    >>> m = compile_grammar(Grammar.from_regex("(yes|no)!"), lm.vocab, cache_dir=None).matcher()
    >>> out = decode_loop(lm.session(list(b"Answer: ")), m, lm.eos_ids, Greedy().choose, max_tokens=8)
    >>> bytes(out.tokens) in (b"yes!", b"no!"), out.stop
    (True, 'eos')
"""

from __future__ import annotations

from collections.abc import Callable

from constrained.masks import apply_token_mask
from samplers.base import Sample


def decode_loop(source, constraint, eos_ids: tuple[int, ...], choose: Callable, *, max_tokens: int,
                generator=None, jump_forward: bool = False) -> Sample:
    """Decode one sequence (see the module docstring); ``choose(masked_logits, generator)``.

    ``jump_forward``: tokens the constraint forces (``constraint.forced_tokens()``, a
    grammar matcher's canonical tokenization of the bytes every continuation starts
    with) are appended without sampling, in the same forward pass as the sampled
    token before them, so a forced run costs no forward pass of its own; and where
    the constraint allows nothing but EOS the loop stops without a forward pass
    (the last token is then not fed to ``source``).  Forced tokens count towards
    ``max_tokens`` and in ``Sample.forced`` (a forced EOS too), and add nothing to
    ``Sample.logprob`` (which covers the sampled tokens)."""
    import numpy as np
    import torch

    eos = sorted(set(int(t) for t in eos_ids))
    tokens: list[int] = []
    pending: list[int] = []            # chosen, not yet fed to the source
    logprob = 0.0
    forced_count = 0
    forced_of = getattr(constraint, "forced_tokens", None) if jump_forward else None

    def take_forced() -> bool:
        """Advance through the forced tokens; False when a value check vetoed one."""
        nonlocal forced_count
        forced = forced_of()[: max_tokens - len(tokens)]
        for t in forced:
            if not constraint.advance(t):   # value checks may veto what the grammar forces
                return False
            tokens.append(t)
            pending.append(t)
            forced_count += 1
        return True

    if forced_of is not None and not take_forced():
        return Sample(tokens, logprob, "dead_end", forced_count)
    while True:
        mask = constraint.mask()
        if forced_of is not None and _only_eos(mask, eos):
            if not np.any(mask):
                return Sample(tokens, logprob, "dead_end", forced_count)
            constraint.advance(next(t for t in eos if _bit(mask, t)))   # EOS is forced: no forward
            return Sample(tokens, logprob, "eos", forced_count + 1)
        if pending:
            source.extend(pending)
            pending = []
        logits = source.logits()
        masked = apply_token_mask(logits.clone(), mask)
        if not torch.isfinite(masked).any():
            return Sample(tokens, logprob, "dead_end", forced_count)
        if len(tokens) >= max_tokens:         # budget spent: stop here if the constraint may
            eos_allowed = [t for t in eos if t < masked.shape[-1] and torch.isfinite(masked[t])]
            if not eos_allowed:
                return Sample(tokens, logprob, "max_tokens", forced_count)
            keep = torch.full_like(masked, float("-inf"))
            keep[eos_allowed] = masked[eos_allowed]
            masked = keep
        t = int(choose(masked, generator))
        logprob += float(torch.log_softmax(logits, dim=-1)[t])
        if t in eos:
            constraint.advance(t)
            return Sample(tokens, logprob, "eos", forced_count)
        if not constraint.advance(t):       # pragma: no cover - the mask said it was allowed
            raise RuntimeError(f"the constraint refused token {t} that its mask allowed")
        tokens.append(t)
        pending.append(t)
        if forced_of is not None and len(tokens) < max_tokens and not take_forced():
            return Sample(tokens, logprob, "dead_end", forced_count)


def _bit(mask, t: int) -> bool:
    return t >> 5 < len(mask) and bool((int(mask[t >> 5]) >> (t & 31)) & 1)


def _only_eos(mask, eos: list[int]) -> bool:
    """True when the packed ``mask`` allows no token but EOS ids (or nothing at all)."""
    import numpy as np

    rest = np.array(mask, dtype=np.uint32, copy=True)
    for t in eos:
        if t >> 5 < len(rest):
            rest[t >> 5] &= ~np.uint32(1 << (t & 31))
    return not rest.any()
