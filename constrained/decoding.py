"""The constrained decoding loop: forward, mask, choose, advance, until EOS.

`decode_loop` drives one sequence: the source's next-token logits (KV cache
inside the source) are masked with the constraint's packed mask (padding logits
never allowed), a chooser picks a token, the constraint advances, the source
extends.  EOS is chosen only where the constraint accepts (its bits are in the
mask only then).  The returned `constrained.constraint.Sample` carries the model's
unconstrained log-probability of the tokens and why decoding stopped.

`decode_batch` does the same for several sequences with independent constraints
(a `constrained.models.BatchSession`: one forward pass per step for all rows;
finished rows wait, the others go on).  Both share one per-sequence state machine,
so a row of a batch decodes exactly as it would alone.

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

from collections.abc import Callable, Sequence

import numpy as np

from constrained.constraint import Sample, SupportsCompletion, SupportsForcedTokens
from constrained.masks import apply_token_mask


class _Sequence:
    """One sequence's decoding state: chosen tokens, tokens not yet fed to the model,
    and the `Sample` once it stopped."""

    def __init__(self, constraint, eos: list[int], max_tokens: int, jump_forward: bool,
                 finish_within_budget: bool = False) -> None:
        self.constraint = constraint
        self.eos = eos
        self.max_tokens = max_tokens
        self.finish = finish_within_budget and isinstance(constraint, SupportsCompletion)
        self.forced_of = constraint.forced_tokens if jump_forward and isinstance(constraint, SupportsForcedTokens) \
            else None
        self.tokens: list[int] = []
        self.pending: list[int] = []
        self.logprob = 0.0
        self.forced = 0
        self.completed = 0                      # tokens `finish_within_budget` appended
        self.result: Sample | None = None
        self.mask = None
        if self.forced_of is not None:
            forced = self._finish_instead_of([]) if self.finish else None
            if self.result is None:
                self._take_forced(forced)

    def _stop(self, why: str) -> None:
        info = {"finished_by_completion": self.completed} if self.completed else {}
        self.result = Sample(self.tokens, self.logprob, why, self.forced, info)

    def _take_forced(self, forced: list[int] | None = None) -> None:
        """Advance through the tokens the constraint forces (``forced``: already computed
        by the budget probe); a value check may veto one."""
        # (only called with jump-forward on, so forced_of is set)
        for t in (self.forced_of() if forced is None else forced)[: self.max_tokens - len(self.tokens)]:  # type: ignore[misc]
            if not self.constraint.advance(t):
                self._stop("dead_end")
                return
            self.tokens.append(t)
            self.pending.append(t)
            self.forced += 1

    def feed(self) -> list[int]:
        """Before the forward pass: compute the mask; the tokens the model must be fed
        (none once stopped, e.g. when only EOS may follow under jump-forward)."""
        if self.result is not None:
            return []
        self.mask = self.constraint.mask()
        if self.forced_of is not None and _only_eos(self.mask, self.eos):
            if not np.any(self.mask):
                self._stop("dead_end")
            else:                                   # EOS is forced: no forward pass
                self.constraint.advance(next(t for t in self.eos if _bit(self.mask, t)))
                self.forced += 1
                self._stop("eos")
            return []
        pending, self.pending = self.pending, []
        return pending

    def choose(self, logits, choose: Callable, generator) -> None:
        """After the forward pass: pick a token from the masked ``logits`` and advance."""
        import torch

        if self.result is not None:
            return
        masked = apply_token_mask(logits.clone(), self.mask)
        if not torch.isfinite(masked).any():
            self._stop("dead_end")
            return
        if len(self.tokens) >= self.max_tokens:      # budget spent: stop here if the constraint may
            masked = restrict_to(masked, self.eos)
            if not torch.isfinite(masked).any():
                self._stop("max_tokens")
                return
        t = int(choose(masked, generator))
        self.logprob += float(torch.log_softmax(logits, dim=-1)[t])
        if t in self.eos:
            self.constraint.advance(t)
            self._stop("eos")
            return
        forced = None
        if self.finish:
            forced = self._finish_instead_of([t])
            if forced is None:
                return
        if not self.constraint.advance(t):       # pragma: no cover - the mask said it was allowed
            raise RuntimeError(f"the constraint refused token {t} that its mask allowed")
        self.tokens.append(t)
        self.pending.append(t)
        if self.forced_of is not None and len(self.tokens) < self.max_tokens:
            self._take_forced(forced)

    def _finish_instead_of(self, sampled: list[int]) -> list[int] | None:
        """If after ``sampled`` (the token just chosen, or nothing before the first step)
        and the tokens jump-forward would append after it the output could no longer be
        completed in the tokens left (or at all: a value a check refuses), append the
        current shortest completion now instead and stop (None).  Else the forced
        tokens that follow (the probe computed them; empty without jump-forward).
        Checked at every step: a single token can open a value whose shortest
        completion is long.

        The probe follows the loop exactly (the token, then its forced tokens, which
        count towards the budget and may be tokenized less tightly than the
        completion), so the invariant "the output has a completion that fits in the
        tokens left" carries from step to step once it holds at the start."""
        left = self.max_tokens - len(self.tokens)
        probe = self.constraint.fork()
        for t in sampled:
            probe.advance(t)
        room = left - len(sampled)
        forced: list[int] = []
        if self.forced_of is not None and room > 0:
            for f in probe.forced_tokens()[:room]:
                if not probe.advance(f):              # a value check vetoed it: the loop stops there too
                    break
                forced.append(f)
        if _completes_within(probe, room - len(forced)):
            return forced
        now = self.constraint.completion_tokens()
        if now is None or len(now) > left:
            return forced                         # no guarantee possible: decode on
        for c in now:
            self.constraint.advance(c)
            self.tokens.append(c)
            self.pending.append(c)
            self.forced += 1
            self.completed += 1
        if self.constraint.is_accepting():
            self.constraint.advance(next(e for e in self.eos if self.constraint.allows(e)))
            self.forced += 1
            self._stop("eos")
        else:                                     # pragma: no cover - a value check refused the end
            self._stop("dead_end")
        return None


def _completes_within(matcher, room: int) -> bool:
    """Whether ``matcher``'s shortest completion, in the tokens `completion_tokens` would
    append, fits in ``room`` tokens."""
    if room < 0:
        return False
    data = matcher.shortest_completion()
    if data is None:
        return False
    if not data:
        return True
    tokens = matcher.completion_tokens(data)      # not searched again
    return tokens is not None and len(tokens) <= room


def decode_loop(source, constraint, eos_ids: tuple[int, ...], choose: Callable, *, max_tokens: int,
                generator=None, jump_forward: bool = False, finish_within_budget: bool = False) -> Sample:
    """Decode one sequence (see the module docstring); ``choose(masked_logits, generator)``.

    ``jump_forward``: tokens the constraint forces (``constraint.forced_tokens()``, a
    grammar matcher's canonical tokenization of the bytes every continuation starts
    with) are appended without sampling, in the same forward pass as the sampled
    token before them, so a forced run costs no forward pass of its own; and where
    the constraint allows nothing but EOS the loop stops without a forward pass
    (the last token is then not fed to ``source``).  Forced tokens count towards
    ``max_tokens`` and in ``Sample.forced`` (a forced EOS too), and add nothing to
    ``Sample.logprob`` (which covers the sampled tokens).

    ``finish_within_budget``: a sampled token after which the output could no longer
    be completed in the tokens left (the shortest completion, `Matcher.completion_tokens`,
    value checks included, checked at every step) is replaced by the current shortest
    completion and EOS, so a grammar matcher's output ends complete instead of
    running out of budget (the end is then the shortest, not the model's choice;
    ``Sample.info["finished_by_completion"]`` counts the tokens appended so).
    It cannot help where the shortest completion is already longer than the budget
    at the start (give such constraints a larger ``max_tokens``)."""
    seq = _Sequence(constraint, sorted(set(int(t) for t in eos_ids)), max_tokens, jump_forward,
                    finish_within_budget)
    while seq.result is None:
        tokens = seq.feed()
        if tokens:
            source.extend(tokens)
        seq.choose(source.logits(), choose, generator)
    return seq.result


def decode_batch(source, constraints: Sequence, eos_ids: tuple[int, ...],
                 choose: Callable | Sequence[Callable], *, max_tokens: int, generator=None,
                 jump_forward: bool = False, finish_within_budget: bool = False) -> list[Sample]:
    """Decode ``len(constraints)`` sequences at once, row ``i`` of ``source`` (a
    `constrained.models.BatchSession`: ``logits()`` is ``[rows, width]``,
    ``extend(rows)`` takes a token list per row) under ``constraints[i]``.  Each row
    decodes exactly as `decode_loop` would decode it alone (same rules, same
    ``jump_forward`` and ``finish_within_budget``); a row that stopped is fed nothing.  ``choose`` is one chooser
    for all rows or one per row (stateful rules).  One `Sample` per row.

    Example:
        >>> from constrained import Grammar, compile_grammar
        >>> from constrained.models import LanguageModel
        >>> from samplers.ancestral import Greedy
        >>> lm = LanguageModel.tiny(seed=0)
        >>> yes_no = compile_grammar(Grammar.from_regex("(yes|no)!"), lm.vocab, cache_dir=None)
        >>> digits = compile_grammar(Grammar.from_regex("[0-9]{3}"), lm.vocab, cache_dir=None)
        >>> batch = lm.batch_session([list(b"Answer: "), list(b"Number: ")])
        >>> a, b = decode_batch(batch, [yes_no.matcher(), digits.matcher()], lm.eos_ids, Greedy().choose,
        ...                     max_tokens=8)
        >>> bytes(a.tokens) in (b"yes!", b"no!"), len(b.tokens)
        (True, 3)
    """
    eos = sorted(set(int(t) for t in eos_ids))
    if len(constraints) != len(source.logits()):
        raise ValueError(f"{len(constraints)} constraints for a batch of {len(source.logits())} rows")
    chooses = list(choose) if not callable(choose) else [choose] * len(constraints)
    if len(chooses) != len(constraints):
        raise ValueError(f"{len(chooses)} choosers for {len(constraints)} constraints")
    seqs = [_Sequence(c, eos, max_tokens, jump_forward, finish_within_budget) for c in constraints]
    while any(s.result is None for s in seqs):
        rows = [s.feed() for s in seqs]
        if any(rows):
            source.extend(rows)
        logits = source.logits()
        for i, s in enumerate(seqs):
            s.choose(logits[i], chooses[i], generator)
    return [s.result for s in seqs]  # type: ignore[misc]  # every row has stopped: no result is None


def restrict_to(masked, ids):
    """A copy of ``masked`` logits where every id but ``ids`` is -inf (at the budget: EOS only)."""
    import torch

    keep = torch.full_like(masked, float("-inf"))
    ids = [t for t in ids if t < masked.shape[-1]]
    keep[ids] = masked[ids]
    return keep


def _bit(mask, t: int) -> bool:
    return t >> 5 < len(mask) and bool((int(mask[t >> 5]) >> (t & 31)) & 1)


def _only_eos(mask, eos: list[int]) -> bool:
    """True when the packed ``mask`` allows no token but EOS ids (or nothing at all)."""
    rest = np.array(mask, dtype=np.uint32, copy=True)
    for t in eos:
        if t >> 5 < len(rest):
            rest[t >> 5] &= ~np.uint32(1 << (t & 31))
    return not rest.any()
