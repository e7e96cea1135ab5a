"""One sequence's decoding step, written once for every decoder.

`SequenceStep` is the per-sequence state machine the decoders share: the plain loop
and batches (`constrained.decoding.loop`), the speculative verifier
(`constrained.speculative.decoder`).  It owns the rules of one step:

* the mask of the next token (the constraint's; EOS bits only where it accepts);
* where the mask allows nothing but EOS: EOS is forced (no forward pass), and
  where it allows nothing: the output is a dead end;
* the budget: once ``max_tokens`` tokens are out only EOS may follow, and with
  ``finish_within_budget`` a token after which no completion fits in the tokens
  left is replaced by the shortest completion (`constrained.decoding.budget`);
* forced tokens (jump-forward) appended after a sampled token, counting towards
  the budget;
* the accounting: tokens, tokens still to feed the model, the model's log-probability
  of the chosen tokens, forced counts, and the `Sample` with its stop reason
  (``"eos"``, ``"max_tokens"``, ``"dead_end"``).

Callers that only write masks (the Hugging Face logits processor, the vLLM
adapters) use `step_mask`: the next token's packed mask, a budget plan's forced
token alone, and `EndIds` (the ids that end a request, which may differ from the
vocabulary's EOS ids) set only where the constraint accepts.

Example:
    >>> import torch
    >>> from constrained import Grammar, TokenVocabulary, compile_grammar
    >>> vocab = TokenVocabulary.from_token_bytes([b"a", b"b", b""], eos_ids=[2])
    >>> m = compile_grammar(Grammar.from_regex("ab?"), vocab, cache_dir=None).matcher()
    >>> step = SequenceStep(m, (2,), max_tokens=1)
    >>> masked = step.masked(torch.zeros(3), step.next_mask())
    >>> masked.tolist()
    [0.0, -inf, -inf]
    >>> step.take(0, torch.zeros(3)), step.tokens
    (True, [0])
    >>> step.masked(torch.zeros(3), step.next_mask()).tolist()   # budget spent: EOS only
    [-inf, -inf, 0.0]
    >>> step.take(2, torch.zeros(3)), step.result.stop, step.result.tokens
    (False, 'eos', [0])
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from constrained.constraint import Constraint, Sample, SupportsCompletion, SupportsForcedTokens
from constrained.decoding.budget import FinishPlan
from constrained.masks import apply_token_mask, set_token_bits

__all__ = ["EndIds", "SequenceStep", "mask_bit", "only_eos", "restrict_to", "step_mask", "token_logprob"]


def mask_bit(mask: np.ndarray, token: int) -> bool:
    """Whether the packed ``mask`` allows ``token``.

    Example:
        >>> mask_bit(np.array([0b100], np.int32), 2), mask_bit(np.array([0b100], np.int32), 40)
        (True, False)
    """
    return token >> 5 < len(mask) and bool((int(mask[token >> 5]) >> (token & 31)) & 1)


def only_eos(mask: np.ndarray, eos: Iterable[int]) -> bool:
    """True when the packed ``mask`` allows no token but ``eos`` ids (or nothing at all).

    Example:
        >>> only_eos(np.array([0b100], np.int32), [2]), only_eos(np.array([0b110], np.int32), [2])
        (True, False)
    """
    rest = np.array(mask, dtype=np.int32, copy=True)
    set_token_bits(rest, [t for t in eos if t >> 5 < len(rest)], False)
    return not rest.any()


def restrict_to(masked: Any, ids: Iterable[int]) -> Any:
    """A copy of ``masked`` logits where every id but ``ids`` is -inf (at the budget: EOS only).

    Example:
        >>> import torch
        >>> restrict_to(torch.tensor([1.0, 2.0, 3.0]), [2, 9]).tolist()
        [-inf, -inf, 3.0]
    """
    import torch

    keep = torch.full_like(masked, float("-inf"))
    kept = [t for t in ids if t < masked.shape[-1]]
    keep[kept] = masked[kept]
    return keep


def token_logprob(logits: Any, token: int) -> float:
    """The model's log-probability of ``token`` under its unmasked ``logits`` (computed
    in float64, whatever the logits' precision).

    Example:
        >>> import torch
        >>> round(token_logprob(torch.zeros(4), 1), 4)
        -1.3863
    """
    import torch

    return float(torch.log_softmax(logits.double(), dim=-1)[token])


@dataclass(frozen=True)
class EndIds:
    """The ids that end an output (``end``: the vocabulary's EOS ids or a serving
    request's stop ids) and the vocabulary's EOS ids that do not end it (``not_end``).
    The constraint sets its EOS bits where it accepts; `apply` moves them to ``end``.

    Example:
        >>> ends, row = EndIds.of(eos_ids=[2], stop_ids=[5]), np.array([0b101], np.int32)
        >>> ends
        EndIds(end=(5,), not_end=(2,))
        >>> ends.apply(row, accepting=True); bin(int(row[0]))
        '0b100001'
    """

    end: tuple[int, ...]
    not_end: tuple[int, ...] = ()

    @classmethod
    def of(cls, eos_ids: Iterable[int], stop_ids: Iterable[int] | None = None) -> EndIds:
        """``stop_ids`` (None or empty: the EOS ids) end the output; the other EOS ids do not."""
        eos = {int(t) for t in eos_ids}
        stop = {int(t) for t in stop_ids} if stop_ids else eos
        return cls(tuple(sorted(stop)), tuple(sorted(eos - stop)))

    def apply(self, row: np.ndarray, accepting: bool) -> None:
        """Where the output is complete (``accepting``), allow exactly the ending ids of the
        EOS bits in the packed ``row`` (in place)."""
        if accepting:
            set_token_bits(row, self.not_end, False)
            set_token_bits(row, self.end)


def step_mask(constraint: Constraint, *, forced: int | None = None, ends: EndIds | None = None,
              out: np.ndarray | None = None) -> np.ndarray:
    """The packed mask of the next token: ``forced`` alone (a budget plan's token,
    `constrained.decoding.budget.BudgetGuard.forced`), else the constraint's mask with
    EOS bits only where it accepts, moved to ``ends`` when given.  Written into ``out``
    (a row as wide as the caller's logits; the words past the mask are zeroed) when
    given; else the constraint's own read-only mask when there is nothing to change,
    or a new array.

    Example:
        >>> from constrained import Grammar, TokenVocabulary, compile_grammar
        >>> vocab = TokenVocabulary.from_token_bytes([b"a", b"b", b""], eos_ids=[2])
        >>> m = compile_grammar(Grammar.from_regex("a+"), vocab, cache_dir=None).matcher()
        >>> m.advance(0), step_mask(m).tolist(), step_mask(m, forced=1).tolist()
        (True, [5], [2])
        >>> step_mask(m, ends=EndIds.of([2], [1]), out=np.zeros(2, np.int32)).tolist()
        [3, 0]
    """
    if forced is not None:
        row = np.zeros(len(constraint.mask()), np.int32) if out is None else out
        row[:] = 0
        set_token_bits(row, [forced])
        return row
    if out is None:
        if ends is None:
            return constraint.mask()
        row = np.array(constraint.mask(), dtype=np.int32, copy=True)
    else:
        row = out
        fill = getattr(constraint, "fill_mask", None)
        if fill is not None:
            fill(row)
        else:
            mask = constraint.mask()
            row[:] = 0
            row[: len(mask)] = mask
    if ends is not None:
        ends.apply(row, constraint.is_accepting())
    return row


class SequenceStep:
    """One sequence's decoding state and the rules of its steps (see the module docstring).

    ``eos_ids``: the ids that end the output; ``jump_forward``: append the tokens the
    constraint forces after each chosen token (`SupportsForcedTokens`), and stop
    without a forward pass where only EOS may follow; ``finish_within_budget``: keep
    the output completable inside ``max_tokens`` (`SupportsCompletion`).

    A step: `feed` (the tokens to give the model before its forward pass; computes the
    mask), then `choose` (the masked logits, a token chosen, the constraint advanced).
    The speculative verifier uses the parts: `next_mask`, `end_if_only_eos`,
    `masked`, `commit`.  ``result`` is the `Sample` once the sequence stopped.
    """

    def __init__(self, constraint: Constraint, eos_ids: Iterable[int], max_tokens: int, *,
                 jump_forward: bool = False, finish_within_budget: bool = False) -> None:
        self.constraint = constraint
        self.eos = sorted({int(t) for t in eos_ids})
        self.max_tokens = max_tokens
        self.forced_of: Callable[[], list[int]] | None = (
            constraint.forced_tokens if jump_forward and isinstance(constraint, SupportsForcedTokens) else None)
        self.finish = (FinishPlan(constraint, max_tokens, follow_forced=self.forced_of is not None)
                       if finish_within_budget and isinstance(constraint, SupportsCompletion) else None)
        self.tokens: list[int] = []
        self.pending: list[int] = []             # chosen tokens the model has not been fed yet
        self.logprob = 0.0
        self.forced = 0                          # tokens appended without sampling (a forced EOS too)
        self.completed = 0                       # tokens the budget's finish appended
        self.forced_end = False                  # EOS taken without a forward pass
        self.result: Sample | None = None
        self.mask: np.ndarray | None = None
        if self.forced_of is not None:
            forced = self._finish_or_forced([]) if self.finish is not None else None
            if self.result is None:
                self._take_forced(forced)

    # ------------------------------------------------------------------ stopping
    def stop(self, why: str) -> None:
        """Stop with reason ``why``; ``result`` becomes the `Sample`."""
        info = {"finished_by_completion": self.completed} if self.completed else {}
        self.result = Sample(self.tokens, self.logprob, why, self.forced, info)

    @property
    def left(self) -> int:
        """Tokens the budget still allows."""
        return self.max_tokens - len(self.tokens)

    # ------------------------------------------------------------------ the parts of a step
    def next_mask(self) -> np.ndarray:
        """The constraint's mask of the next token (EOS bits only where it accepts)."""
        self.mask = self.constraint.mask()
        return self.mask

    def end_if_only_eos(self, mask: np.ndarray, *, count_forced: bool = True) -> bool:
        """Where ``mask`` allows nothing but EOS, take it (forced: no forward pass, no
        log-probability) and stop; where it allows nothing, stop as a dead end.  True
        if the sequence stopped.  ``count_forced``: count the EOS in ``Sample.forced``."""
        if not only_eos(mask, self.eos):
            return False
        end = next((t for t in self.eos if mask_bit(mask, t)), None)
        if end is None:
            self.stop("dead_end")
            return True
        self.constraint.advance(end)
        self.forced += count_forced
        self.forced_end = True
        self.stop("eos")
        return True

    def masked(self, logits: Any, mask: np.ndarray) -> Any:
        """``logits`` (not modified) masked by ``mask`` and the budget (at ``max_tokens``:
        EOS only); None, and stopped (``"dead_end"``, ``"max_tokens"``), where nothing is left."""
        import torch

        masked = apply_token_mask(logits.clone(), mask)
        if not torch.isfinite(masked).any():
            self.stop("dead_end")
            return None
        if self.left <= 0:                         # budget spent: stop here if the constraint may
            masked = restrict_to(masked, self.eos)
            if not torch.isfinite(masked).any():
                self.stop("max_tokens")
                return None
        return masked

    def take(self, token: int, logits: Any, *, fed: bool = False) -> bool:
        """Account for the chosen ``token`` (its log-probability under ``logits``) and
        advance the constraint; EOS stops the sequence.  ``fed``: the model has read the
        token already (an accepted draft).  True while the sequence goes on."""
        self.logprob += token_logprob(logits, token)
        if token in self.eos:
            self.constraint.advance(token)
            self.stop("eos")
            return False
        if not self.constraint.advance(token):    # pragma: no cover - the mask said it was allowed
            raise RuntimeError(f"the constraint refused token {token} that its mask allowed")
        self.tokens.append(token)
        if not fed:
            self.pending.append(token)
        return True

    def drain_pending(self) -> list[int]:
        """The chosen tokens the model has not been fed yet (then none)."""
        pending, self.pending = self.pending, []
        return pending

    # ------------------------------------------------------------------ the loop's step
    def feed(self) -> list[int]:
        """Before the forward pass: compute the mask; the tokens the model must be fed
        (none once stopped, e.g. when only EOS may follow under jump-forward)."""
        if self.result is not None:
            return []
        mask = self.next_mask()
        if self.forced_of is not None and self.end_if_only_eos(mask):
            return []
        return self.drain_pending()

    def choose(self, logits: Any, choose: Callable[[Any, Any], Any], generator: Any = None) -> None:
        """After the forward pass: pick a token from the masked ``logits`` with
        ``choose(masked, generator)`` and advance (forced tokens and the budget's finish included)."""
        if self.result is not None:
            return
        assert self.mask is not None, "feed() computes the mask before choose()"
        masked = self.masked(logits, self.mask)
        if masked is None:
            return
        self.commit(int(choose(masked, generator)), logits)

    def commit(self, token: int, logits: Any, *, fed: bool = False) -> bool:
        """The chosen ``token`` with every rule after the choice: the budget's finish (with
        ``finish_within_budget``, a token after which no completion fits is replaced by
        the shortest completion and EOS), `take`, then the forced tokens of jump-forward.
        True while the sequence goes on (False: EOS, or the finish, ended it)."""
        if token in self.eos:
            return self.take(token, logits, fed=fed)
        forced = None
        if self.finish is not None:               # a token replaced by the finish adds no log-probability
            forced = self._finish_or_forced([token])
            if forced is None:
                return False
        self.take(token, logits, fed=fed)
        if self.forced_of is not None and self.left > 0:
            self._take_forced(forced)
        return self.result is None

    # ------------------------------------------------------------------ forced tokens and the finish
    def _take_forced(self, forced: list[int] | None = None) -> None:
        """Advance through the tokens the constraint forces (``forced``: already computed
        by the budget probe); a value check may veto one."""
        assert self.forced_of is not None
        for t in (self.forced_of() if forced is None else forced)[: self.left]:
            if not self.constraint.advance(t):
                self.stop("dead_end")
                return
            self.tokens.append(t)
            self.pending.append(t)
            self.forced += 1

    def _finish_or_forced(self, sampled: list[int]) -> list[int] | None:
        """The budget rule after ``sampled`` (`FinishPlan.check`): the forced tokens that
        follow (None: the shortest completion and EOS were appended instead; stopped)."""
        assert self.finish is not None
        verdict = self.finish.check(len(self.tokens), sampled)
        if verdict.finish is None:
            return verdict.forced
        for c in verdict.finish:
            self.constraint.advance(c)
            self.tokens.append(c)
            self.pending.append(c)
            self.forced += 1
            self.completed += 1
        if self.constraint.is_accepting():
            self.constraint.advance(next(e for e in self.eos if self.constraint.allows(e)))
            self.forced += 1
            self.stop("eos")
        else:                                     # pragma: no cover - a value check refused the end
            self.stop("dead_end")
        return None
