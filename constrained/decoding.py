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
    with) are appended without sampling, in one forward pass; they count towards
    ``max_tokens`` and in ``Sample.forced``, and add nothing to ``Sample.logprob``
    (which covers the sampled tokens)."""
    import torch

    eos = set(int(t) for t in eos_ids)
    tokens: list[int] = []
    logprob = 0.0
    forced_count = 0
    forced_of = getattr(constraint, "forced_tokens", None) if jump_forward else None
    while len(tokens) <= max_tokens:
        if forced_of is not None and len(tokens) < max_tokens:
            forced = forced_of()[: max_tokens - len(tokens)]
            if forced:
                taken = []
                for t in forced:
                    if not constraint.advance(t):   # value checks may veto what the grammar forces
                        break
                    taken.append(t)
                if taken:
                    source.extend(taken)
                    tokens.extend(taken)
                    forced_count += len(taken)
                if len(taken) < len(forced):
                    return Sample(tokens, logprob, "dead_end", forced_count)
                continue
        logits = source.logits()
        masked = apply_token_mask(logits.clone(), constraint.mask())
        if not torch.isfinite(masked).any():
            return Sample(tokens, logprob, "dead_end", forced_count)
        if len(tokens) == max_tokens:         # budget spent: stop here if the constraint may
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
        source.extend([t])
    return Sample(tokens, logprob, "max_tokens", forced_count)   # pragma: no cover - the loop returns
