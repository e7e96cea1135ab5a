"""`BudgetGuard`: a constrained output that is complete when its token budget runs out.

A serving engine stops a request after ``max_tokens`` whatever the constraint says,
so a small model looping inside a string returns truncated, invalid JSON.  The guard
keeps one invariant from step to step: *the output so far has a completion that fits
in the tokens left*.  Two means, both per request and per step:

* `forced`: when the shortest completion (`Matcher.completion_tokens`) needs all the
  tokens left (all but ``margin``), the guard plans it and forces its tokens one by
  one (the mask allows that token only); the output then ends at the budget, complete;
* `keeps_room`: a token the mask allows may still open more than the budget can
  close (a ``,`` that starts a member whose key and value are long); a caller that
  sees the logits checks its likeliest candidates with it and masks the ones that
  would break the invariant (`constrained.integrations.vllm` does, for the argmax
  under greedy decoding and for the top candidates under sampling).  A caller that
  cannot (vLLM's structured-output backend sees no logits) sets a ``margin`` instead:
  the plan starts while that many spare tokens remain, or as many as the largest jump
  of the completion's length one token has caused in this output so far (a schema's
  repeated structure, an array of objects with required members, teaches it the
  first time), so only a token that opens more than that at once can still break the
  invariant.

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

__all__ = ["BudgetGuard"]

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
        probe = matcher.fork()
        if not probe.advance(token):
            return False
        tokens = matcher.tokens
        completion = self._completion(probe, tokens + (token,))
        if completion is None:
            # no completion found after the token: it leads nowhere, unless none is found
            # from here either (the search gave up): then nothing can be promised either way
            return self._completion(matcher, tokens) is None
        return len(completion) <= left - 1
