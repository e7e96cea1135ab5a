"""The budget rule: an output that is complete when its ``max_tokens`` run out.

One invariant, kept from step to step: *the output so far has a completion that fits
in the tokens left*.  `completes_within` is the test (the constraint's shortest
completion, `SupportsCompletion.completion_tokens`, in at most that many tokens) and
`look_ahead` the probe (a fork after the candidate tokens, and the forced tokens
jump-forward would append after them).  Two policies keep the invariant, for two
kinds of caller:

* `FinishPlan`, for a decoder that chooses the token itself
  (`constrained.decoding.step.SequenceStep`, ``finish_within_budget``): after each
  chosen token it probes; a token after which no completion fits is replaced by the
  current shortest completion and EOS (checked at every step: one token can open a
  value whose completion is long);
* `BudgetGuard`, for a serving engine that samples from the mask it is given (the
  vLLM adapters): near the budget it plans the shortest completion and forces its
  tokens one by one (`BudgetGuard.forced`); a caller that sees the logits checks its
  likeliest candidates with `BudgetGuard.keeps_room`; one that cannot sets a
  ``margin`` instead (see the class).

`BudgetGuard` in detail.  A serving engine stops a request after ``max_tokens``
whatever the constraint says, so a small model looping inside a string would return
truncated, invalid JSON.  Two means, both per request and per step:

* `BudgetGuard.forced`: when the shortest completion needs all the tokens left (all
  but ``margin``), the guard plans it and forces its tokens one by one (the mask
  allows that token only); the output then ends at the budget, complete;
* `BudgetGuard.keeps_room`: a token the mask allows may still open more than the
  budget can close (a ``,`` that starts a member whose key and value are long); a
  caller that sees the logits checks its likeliest candidates with it and masks the
  ones that would break the invariant (`constrained.integrations.vllm` does, for the
  argmax under greedy decoding and for the top candidates under sampling).  A caller
  that cannot (vLLM's structured-output backend sees no logits) sets a ``margin``
  instead: the plan starts while that many spare tokens remain, or as many as the
  largest jump of the completion's length one token has caused in this output so far
  (a schema's repeated structure, an array of objects with required members, teaches
  it the first time), so only a token that opens more than that at once can still
  break the invariant.

EOS is never forced: at the budget a complete output ends by the budget itself.

Cost: a completion through value checks is a search (a good fraction of a second on
hard schemas), so far from the budget — more than twice the last known completion
plus `FAR_SLACK` tokens left — the guard does not search, except every `REFRESH`
tokens.  The invariant is then kept unless one token lengthens the completion by more
than that headroom at once.  Where the search finds no completion at all (it gives up
at its limit), the guard cannot help, and it tries again only `REFRESH` tokens later.

Example:
    >>> from constrained import Grammar, TokenVocabulary, compile_grammar
    >>> vocab = TokenVocabulary.from_token_bytes([b"[", b"]", b"1", b",", b""], eos_ids=[4])
    >>> m = compile_grammar(Grammar.from_lark('start: "[" "1" ("," "1")* "]"'), vocab, cache_dir=None).matcher()
    >>> guard = BudgetGuard(max_tokens=4)
    >>> m.advance(0), guard.forced(m), guard.keeps_room(m, 2)
    (True, None, True)
    >>> m.advance(2), guard.forced(m), guard.keeps_room(m, 3)    # 2 left: "," would need 3 more
    (True, None, False)
    >>> m.advance(3), guard.forced(m)                           # a caller without logits: forced to finish
    (True, 2)
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["BudgetGuard", "FinishPlan", "LookAhead", "Verdict", "completes_within", "fits", "look_ahead"]


def fits(completion: Sequence[int] | None, room: int) -> bool:
    """Whether a ``completion`` (None: none known) fits in ``room`` tokens.

    Example:
        >>> fits([1, 2], 2), fits([1, 2], 1), fits(None, 9), fits([], -1)
        (True, False, False, False)
    """
    return completion is not None and 0 <= room and len(completion) <= room


def completes_within(constraint: Any, room: int) -> bool:
    """Whether ``constraint``'s shortest completion, in the tokens `completion_tokens`
    would append, fits in ``room`` tokens (an accepting output: whenever ``room >= 0``).

    Example:
        >>> from constrained import Grammar, TokenVocabulary, compile_grammar
        >>> vocab = TokenVocabulary.from_token_bytes([b"a", b"b", b""], eos_ids=[2])
        >>> m = compile_grammar(Grammar.from_regex("abab"), vocab, cache_dir=None).matcher()
        >>> completes_within(m, 3), completes_within(m, 4)
        (False, True)
    """
    if room < 0:
        return False
    data = constraint.shortest_completion()
    if data is None:
        return False
    if not data:
        return True
    return fits(constraint.completion_tokens(data), room)      # the completion is not searched again


@dataclass
class LookAhead:
    """A fork of a constraint after some tokens (``constraint``), and the ``forced``
    tokens jump-forward appended after them (read by the fork too)."""

    constraint: Any
    forced: list[int] = field(default_factory=list)


def look_ahead(constraint: Any, tokens: Sequence[int], *, room: int = 0,
               follow_forced: bool = False) -> LookAhead | None:
    """``constraint`` forked and advanced along ``tokens`` (None if it refuses one); with
    ``follow_forced``, also along the tokens it then forces (``forced_tokens()``), at
    most ``room`` of them, up to one a value check vetoes (the decoder stops there too).
    The constraint itself does not move.

    Example:
        >>> from constrained import Grammar, TokenVocabulary, compile_grammar
        >>> vocab = TokenVocabulary.from_token_bytes([b"a", b"b", b""], eos_ids=[2])
        >>> m = compile_grammar(Grammar.from_regex("abab"), vocab, cache_dir=None).matcher()
        >>> look_ahead(m, [0], room=2, follow_forced=True).forced, look_ahead(m, [1]), m.tokens
        ([1, 0], None, ())
    """
    probe = constraint.fork()
    for t in tokens:
        if not probe.advance(t):
            return None
    out = LookAhead(probe)
    if follow_forced and room > 0:
        for f in probe.forced_tokens()[:room]:
            if not probe.advance(f):
                break
            out.forced.append(f)
    return out


@dataclass
class Verdict:
    """`FinishPlan.check`'s answer: the ``forced`` tokens that follow the chosen ones
    (computed by the probe; empty without jump-forward), or ``finish``: the completion
    to append instead of them, then EOS (None: decode on)."""

    forced: list[int]
    finish: list[int] | None = None


class FinishPlan:
    """The budget rule of a decoder that chooses its tokens (``finish_within_budget``):
    after a chosen token (and the tokens jump-forward appends after it, which count
    towards the budget and may be tokenized less tightly than the completion), the
    output must still have a completion that fits in the tokens left; where it would
    not, the current shortest completion is appended instead and the output ends.

    The probe follows the decoder exactly, so the invariant carries from step to step
    once it holds at the start.  It cannot help where the shortest completion is
    already longer than the budget at the start.

    Example:
        >>> from constrained import Grammar, TokenVocabulary, compile_grammar
        >>> vocab = TokenVocabulary.from_token_bytes([b"a", b"b", b"", b"c"], eos_ids=[2])
        >>> m = compile_grammar(Grammar.from_regex("a(c*)b"), vocab, cache_dir=None).matcher()
        >>> m.advance(0), FinishPlan(m, max_tokens=3).check(1, [3])        # "c" leaves room for "b"
        (True, Verdict(forced=[], finish=None))
        >>> FinishPlan(m, max_tokens=2).check(1, [3])                       # it would not: finish with "b"
        Verdict(forced=[], finish=[1])
    """

    def __init__(self, constraint: Any, max_tokens: int, *, follow_forced: bool = False) -> None:
        self.constraint = constraint
        self.max_tokens = max_tokens
        self.follow_forced = follow_forced

    def check(self, count: int, chosen: Sequence[int]) -> Verdict:
        """The verdict for ``chosen`` (the token just chosen, or nothing before the first
        step) after ``count`` tokens of output."""
        left = self.max_tokens - count
        room = left - len(chosen)
        ahead = look_ahead(self.constraint, chosen, room=room, follow_forced=self.follow_forced)
        if ahead is None:                         # pragma: no cover - the mask allowed the token
            return Verdict([])
        if completes_within(ahead.constraint, room - len(ahead.forced)):
            return Verdict(ahead.forced)
        now = self.constraint.completion_tokens()
        if not fits(now, left):
            return Verdict(ahead.forced)          # no guarantee possible: decode on
        return Verdict(ahead.forced, list(now))   # type: ignore[arg-type]  # fits() saw it is not None

_MEMO = 32      # completions remembered per request (speculative decoding revisits its states)
#: Far from the budget (more than twice the last known completion plus `FAR_SLACK` tokens
#: left, growing by `FAR_STEP` per token since), completions are not searched, except every
#: `REFRESH` tokens: through value checks a search can take a good fraction of a second.
FAR_SLACK = 16
FAR_STEP = 4
REFRESH = 16


class BudgetGuard:
    """Per-request budget state: ``max_tokens`` (None: no budget), the finishing plan
    (the whole output it leads to, so a rolled-back or diverged output never follows a
    stale plan) and the completions of recently seen outputs."""

    __slots__ = ("max_tokens", "margin", "max_jump", "_target", "_memo", "_last", "_known", "_gave_up")

    def __init__(self, max_tokens: int | None, *, margin: int = 0) -> None:
        self.max_tokens = max_tokens
        self.margin = margin
        self.max_jump = 0          # the most one token has lengthened the completion (margin > 0 only)
        self._last: tuple[int, int] | None = None
        self._known: tuple[int, int] | None = None      # (tokens, completion length) last found
        self._gave_up: int | None = None                # tokens when the search last found nothing
        self._target: tuple[int, ...] | None = None
        self._memo: OrderedDict[tuple[int, ...], tuple[int, ...] | None] = OrderedDict()

    def left(self, matcher) -> int | None:
        """Tokens the request may still generate (None: unbounded)."""
        if self.max_tokens is None:
            return None
        return self.max_tokens - len(matcher.tokens)

    def _completion(self, matcher, tokens: tuple[int, ...]) -> tuple[int, ...] | None:
        if tokens in self._memo:
            self._memo.move_to_end(tokens)
            return self._memo[tokens]
        found = matcher.completion_tokens()
        completion = None if found is None else tuple(found)
        if completion is not None:
            self._known = (len(tokens), len(completion))
        self._memo[tokens] = completion
        while len(self._memo) > _MEMO:
            self._memo.popitem(last=False)
        return completion

    def _far(self, count: int, left: int) -> bool:
        """Whether the budget is so far that no search is needed now (see `FAR_SLACK`), or
        the search found nothing from this output fewer than `REFRESH` tokens ago (a search
        that finds nothing runs to its limit: the slowest kind)."""
        if self._gave_up is not None and 0 <= count - self._gave_up < REFRESH:
            return True
        known = self._known
        if known is None or count - known[0] >= REFRESH or count < known[0]:
            return False
        return left - 1 > 2 * known[1] + FAR_SLACK + FAR_STEP * (count - known[0])

    def forced(self, matcher) -> int | None:
        """The token the output must continue with to finish within the budget, or None
        (no need yet, no budget, or no completion known)."""
        left = self.left(matcher)
        if left is None or left <= 0 or matcher.is_terminated():
            return None
        tokens = matcher.tokens
        target = self._target
        if target is not None:
            if len(tokens) < len(target) and target[:len(tokens)] == tokens:
                return target[len(tokens)]
            self._target = None                    # the output left the plan (rolled back, or diverged)
        if matcher.is_accepting() or self._far(len(tokens), left):
            return None
        completion = self._completion(matcher, tokens)
        if completion is None:
            self._gave_up = len(tokens)
        if completion is not None and self.margin:
            if self._last is not None and self._last[0] == len(tokens) - 1:
                self.max_jump = max(self.max_jump, len(completion) - self._last[1] + 1)
            self._last = (len(tokens), len(completion))
        margin = max(self.margin, self.max_jump) if self.margin else 0
        if not completion or len(completion) + margin < left:
            return None
        self._target = tokens + completion
        return completion[0]

    def keeps_room(self, matcher, token: int) -> bool:
        """Whether the output still has a completion within the budget after ``token``
        (EOS: whether the output is complete now).  True where no completion is known
        from the output so far either: the guard cannot help there, and refusing every
        token would only end the output sooner."""
        left = self.left(matcher)
        if token in matcher.compiled.eos_set:
            return matcher.is_accepting()
        if left is None or self._far(len(matcher.tokens), left):
            return True
        ahead = look_ahead(matcher, [token])
        if ahead is None:
            return False
        tokens = matcher.tokens
        completion = self._completion(ahead.constraint, tokens + (token,))
        if completion is None:
            # no completion found after the token: it leads nowhere, unless none is found
            # from here either (the search gave up): then nothing can be promised either way
            return self._completion(matcher, tokens) is None
        return fits(completion, left - 1)
