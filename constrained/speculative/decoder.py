"""The speculative decoder: drafts checked by the target under the constraint, exactly.

Each iteration: a drafter proposes up to ``k`` tokens the constraint allows; one
target forward pass scores the token sampled last iteration plus the draft (KV
cache kept); then, position by position, the target's per-step distribution ``p``
is computed from the target's logits *masked by the constraint at that position*
(the constraint is advanced along the accepted tokens) and by the sampler's rule
(temperature, top-k/p, min-p, mirostat, or a grammar-aligned target such as a fixed
ASAp trie).  A drafted token ``x`` drawn from ``q`` is accepted with probability
``min(1, p(x)/q(x))`` (a deterministic draft: ``p(x)``; greedy: iff ``x`` is the
argmax); the first rejection is replaced by a draw from the residual
``max(p − q, 0)`` renormalised; if all are accepted a bonus token is drawn from the
next position's ``p``.  The KV cache is cropped to the accepted prefix.  Every
emitted token is therefore distributed exactly as the non-speculative sampler with
the same per-step distribution would emit it (Leviathan et al. 2023, Chen et al.
2023), and greedy output is token-for-token the same — given the same logits.  A
forward pass over k+1 tokens is not bit-identical to k+1 one-token passes (other
kernels, other rounding), most visibly in float16 on a GPU: a near-tie can then be
broken the other way (seen on an H100 in float16: a digit whose top-two logits were
0.04 apart in float32), so a GPU half-precision run may differ from non-speculative
decoding there, as two non-speculative runs with different batch shapes may.

The draft length adapts: the decoder keeps a running estimate ``r`` of the chance
a drafted token is accepted and drafts ``k`` tokens with ``r^k`` above
``accept_floor`` (at most ``max_draft``).

Example:
    >>> from constrained import Grammar, compile_grammar
    >>> from constrained.models import LanguageModel
    >>> from constrained.speculative import ForcedDrafter
    >>> lm = LanguageModel.tiny(seed=0)
    >>> m = compile_grammar(Grammar.from_regex('\\\\{"id": [0-9]{2}\\\\}'), lm.vocab, cache_dir=None).matcher()
    >>> out = speculative_decode(lm.session(list(b"JSON: ")), m, lm.eos_ids, drafter=ForcedDrafter(), max_tokens=16)
    >>> bytes(out.tokens)[:7], out.info["forwards"] < len(out.tokens)
    (b'{"id": ', True)
"""

from __future__ import annotations

import math
from typing import Protocol

from constrained.constraint import Sample
from constrained.decoding.step import SequenceStep
from samplers.base import multinomial, uniform


class StepTarget(Protocol):
    """A sampler's per-step distribution as a function of the output so far."""

    def probabilities(self, masked, prefix):
        """The distribution (a torch vector, zeros where not allowed) after ``prefix``."""

    def observe(self, token: int, masked, prefix) -> None:
        """``token`` was emitted after ``prefix`` (stateful targets update)."""


class RuleTarget:
    """A `samplers.ancestral.TokenRule` (greedy, temperature, top-k/p, min-p, mirostat)
    as a `StepTarget`."""

    def __init__(self, rule) -> None:
        self.rule = rule

    def probabilities(self, masked, prefix):
        return self.rule.probabilities(masked)

    def observe(self, token: int, masked, prefix) -> None:
        self.rule.observe(token, masked)


class ASApTarget:
    """ASAp's distribution with a fixed trie: ``p(t)·ĉ(prefix + t)`` renormalised (ĉ = 1
    for children the trie has not learned), so a learned trie can run speculatively."""

    def __init__(self, trie) -> None:
        self.trie = trie

    def probabilities(self, masked, prefix):
        import torch

        probs = torch.softmax(masked.double(), dim=-1)
        node = self.trie.node(prefix)
        if node is not None:
            for i, c in node.chat.items():
                probs[int(node.tokens[i])] *= c
            total = probs.sum()
            probs = probs / total if total > 0 else probs
        return probs.to(masked.dtype)

    def observe(self, token: int, masked, prefix) -> None:
        pass


def _target(target):
    from samplers import Greedy
    from samplers.ancestral import TokenRule

    if target is None:
        return RuleTarget(Greedy())
    if isinstance(target, TokenRule):
        return RuleTarget(target)
    return target


def _is_greedy(target) -> bool:
    from samplers import Greedy

    return isinstance(target, RuleTarget) and isinstance(target.rule, Greedy)


_MASK_WORKER = None


def _mask_worker():
    global _MASK_WORKER
    if _MASK_WORKER is None:
        from concurrent.futures import ThreadPoolExecutor

        _MASK_WORKER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="constrained-masks")
    return _MASK_WORKER


def _masks_along(constraint, tokens: list[int], eos: list[int]) -> list:
    """The constraint's masks after each prefix of ``tokens`` (on a fork), up to an EOS
    or a token it refuses."""
    c = constraint.fork()
    out = [c.mask()]
    for t in tokens:
        if t in eos or not c.advance(t):
            break
        out.append(c.mask())
    return out


def _draft_length(successes: float, failures: float, max_draft: int, accept_floor: float, adaptive: bool) -> int:
    """Draft ``k`` tokens with ``r^k`` above ``accept_floor`` (``r``: the running acceptance estimate)."""
    if not adaptive:
        return max_draft
    r = successes / (successes + failures)
    return max_draft if r >= 0.999 else max(1, min(max_draft, int(math.log(accept_floor) / math.log(r))))


def speculative_decode(session, constraint, eos_ids: tuple[int, ...], *, drafter, target=None,
                       max_tokens: int, generator=None, max_draft: int = 8, accept_floor: float = 0.2,
                       adaptive: bool = True, overlap_masks: bool | None = None,
                       finish_within_budget: bool = False) -> Sample:
    """Decode one sequence speculatively (see the module docstring).  ``session``: a
    `constrained.models.ModelSession` (``extend_scored``, ``truncate``); ``target``: a
    token rule (default greedy) or a `StepTarget`.  Where the constraint allows only
    EOS, decoding stops without a forward pass (as with jump-forward); that EOS adds
    nothing to ``Sample.logprob`` (``info["forced_eos"]``).  ``Sample.info``:
    ``forwards`` (target forward passes), ``drafted``, ``accepted`` (drafted tokens
    accepted), ``tokens_per_forward``, ``overlap_masks`` (whether it was used).
    ``overlap_masks`` computes the masks along the draft in a worker thread while the
    target's forward pass runs (default: when the model is on a GPU, where the forward
    does not need the CPU).  Random draws are made on ``generator``'s device (a seeded
    CPU generator works with a model on a GPU).

    The per-position rules (mask, EOS only where accepting, EOS only at the budget,
    log-probabilities, stop reasons) are `constrained.decoding.step.SequenceStep`'s,
    the plain loop's own; so is ``finish_within_budget`` (see `decode_loop`): every
    emitted token, drafted or drawn, goes through its budget rule, so greedy output
    equals `decode_loop(..., finish_within_budget=True)`'s."""
    target = _target(target)
    greedy = _is_greedy(target)
    if overlap_masks is None:
        logits0 = session.logits()
        overlap_masks = logits0 is not None and logits0.device.type == "cuda"
    step = SequenceStep(constraint, eos_ids, max_tokens, finish_within_budget=finish_within_budget)
    prompt = list(session.tokens)
    if hasattr(drafter, "index_prompt"):
        drafter.index_prompt(prompt)
    last_logits = session.logits()
    forwards = drafted = accepted_total = 0
    successes, failures = 2.0, 1.0          # acceptance-rate prior: r ≈ 0.6
    while step.result is None:
        if step.end_if_only_eos(step.next_mask(), count_forced=False):   # no forward pass needed
            break
        k = min(_draft_length(successes, failures, max_draft, accept_floor, adaptive), step.left)
        draft = drafter.draft(prompt + step.tokens, constraint.fork(), k, generator) if k > 0 else None
        draft_tokens = draft.tokens[:k] if draft is not None else []
        draft_q = (draft.q if draft is not None and draft.q else [None] * len(draft_tokens))[:len(draft_tokens)]
        pending = step.drain_pending()
        feed = pending + draft_tokens
        ahead = _mask_worker().submit(_masks_along, constraint, draft_tokens, step.eos) if overlap_masks else None
        scored = session.extend_scored(feed) if feed else None
        masks = ahead.result() if ahead is not None else []
        if feed:
            forwards += 1
        fed_before = len(session.tokens) - len(feed)

        def logits_at(i: int):                      # called within this iteration only
            j = len(pending) - 1 + i                   # noqa: B023
            return last_logits if j < 0 else scored[j]  # noqa: B023

        accepted = 0
        for i in range(len(draft_tokens) + 1):
            logits = logits_at(i)
            masked = step.masked(logits, masks[i] if i < len(masks) else constraint.mask())
            if masked is None:
                break
            p = target.probabilities(masked, step.tokens)
            if i < len(draft_tokens):
                x, q = draft_tokens[i], draft_q[i]
                if _accepts(greedy, masked, p, x, q, generator):
                    target.observe(x, masked, step.tokens)
                    accepted += 1
                    if step.commit(x, logits, fed=True):
                        continue
                    break
                y = int(masked.argmax()) if greedy else _residual_draw(p, x, q, generator)
            else:
                y = int(masked.argmax()) if greedy else multinomial(p.double(), generator)
            target.observe(y, masked, step.tokens)
            step.commit(y, logits)               # fed with the next draft
            break
        drafted += len(draft_tokens)
        accepted_total += accepted
        if draft_tokens:
            successes = 0.8 * successes + accepted
            failures = 0.8 * failures + (accepted < len(draft_tokens))
        keep = fed_before + len(pending) + min(accepted, len(draft_tokens))
        if feed and keep < len(session.tokens):
            session.truncate(keep)
    out = step.result
    assert out is not None
    out.info.update({"forwards": forwards, "drafted": drafted, "accepted": accepted_total,
                     "forced_eos": step.forced_end, "overlap_masks": bool(overlap_masks),
                     "tokens_per_forward": (len(out.tokens) + (out.stop == "eos")) / max(1, forwards)})
    return out


def _accepts(greedy: bool, masked, p, x: int, q, generator) -> bool:
    """Whether the drafted ``x`` (drawn from ``q``; None: a deterministic draft) is
    accepted: greedy, iff it is the argmax; else with probability ``min(1, p(x)/q(x))``."""
    if greedy:
        return x == int(masked.argmax())
    px = float(p[x])
    chance = px if q is None else min(1.0, px / max(float(q[x]), 1e-300))
    return float(uniform(1, generator)) < chance


def _residual_draw(p, x: int, q, generator) -> int:
    """A draw from the residual ``max(p − q, 0)`` renormalised (``q`` None: a point mass on ``x``)."""
    residual = p.clone().double()
    if q is None:
        residual[x] = 0.0
    else:
        residual = (residual - q.double()).clamp_min(0.0)
    if not residual.sum() > 0:       # pragma: no cover - p(x) < 1 leaves mass
        residual = p.clone().double()
    return multinomial(residual / residual.sum(), generator)


class SpeculativeSampler:
    """`speculative_decode` behind the `samplers.base.Sampler` interface, so
    `constrained.extract` / `generate` and the CLI can use it.  ``finish_within_budget``:
    outputs end complete inside ``max_tokens`` (see `speculative_decode`).

    Example:
        >>> from constrained.speculative import ChainDrafter, ForcedDrafter, PromptLookupDrafter
        >>> s = SpeculativeSampler(ChainDrafter([ForcedDrafter(), PromptLookupDrafter()]))
        >>> type(s.target).__name__
        'Greedy'
    """

    def __init__(self, drafter, target=None, *, max_draft: int = 8, accept_floor: float = 0.2,
                 finish_within_budget: bool = False) -> None:
        from samplers import Greedy

        self.drafter = drafter
        self.target = target or Greedy()
        self.max_draft = max_draft
        self.accept_floor = accept_floor
        self.finish_within_budget = finish_within_budget

    def run(self, source, constraint, eos_ids, *, max_tokens: int, generator=None) -> list[Sample]:
        if hasattr(self.target, "reset"):
            self.target.reset()
        out = speculative_decode(source, constraint, eos_ids, drafter=self.drafter, target=self.target,
                                 max_tokens=max_tokens, generator=generator, max_draft=self.max_draft,
                                 accept_floor=self.accept_floor, finish_within_budget=self.finish_within_budget)
        self.drafter.observe(out.tokens)
        return [out]
