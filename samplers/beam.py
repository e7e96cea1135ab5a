"""Constrained beam search and diverse beam search (Vijayakumar et al., AAAI 2018).

Every beam carries its own forked constraint and model session.  At each step a
beam's extensions are scored with the model's log-probabilities restricted to
what its constraint allows (EOS only where it accepts); EOS extensions become
finished hypotheses.  Hypotheses are ranked by ``logprob / length**length_penalty``
(0: raw log-probability).  Search stops when ``num_beams`` hypotheses are finished
and no live beam can still beat the worst of them, or at ``max_tokens``.

Diverse beam search splits the beams into ``groups``; groups extend one after the
other at each step, and a group's scores are lowered by ``diversity`` times the
number of earlier groups that chose the same token at this step (Hamming
diversity).  Each group keeps its own finished hypotheses (twice its beams, so that
outputs another group also found can be replaced); the result takes each group's
best distinct outputs, fills gaps with the best spares, and is sorted by score.

Example:
    >>> from constrained import Grammar, compile_grammar
    >>> from constrained.models import LanguageModel
    >>> lm = LanguageModel.tiny(seed=0)
    >>> g = compile_grammar(Grammar.from_regex("(red|green|blue) (cat|dog)"), lm.vocab, cache_dir=None)
    >>> outs = BeamSearch(num_beams=3).run(lm.session(list(b"Pet: ")), g.matcher(), lm.eos_ids, max_tokens=12)
    >>> len(outs), all(o.finished for o in outs), outs[0].logprob >= outs[-1].logprob
    (3, True, True)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from constrained.constraint import Constraint, LogitsSource
from samplers.base import Sample


@dataclass
class _Beam:
    tokens: list[int]
    logprob: float
    session: LogitsSource
    constraint: Constraint
    group: int = 0
    extra: dict = field(default_factory=dict)


class BeamSearch:
    """Constrained beam search; ``groups > 1`` makes it diverse beam search."""

    def __init__(self, num_beams: int = 4, *, length_penalty: float = 0.0, groups: int = 1,
                 diversity: float = 0.5) -> None:
        if num_beams < 1 or groups < 1 or num_beams % groups:
            raise ValueError(f"num_beams ({num_beams}) must be a positive multiple of groups ({groups})")
        self.num_beams = num_beams
        self.length_penalty = length_penalty
        self.groups = groups
        self.diversity = diversity

    def score(self, logprob: float, length: int) -> float:
        return logprob / (max(length, 1) ** self.length_penalty) if self.length_penalty else logprob

    def run(self, source, constraint, eos_ids: tuple[int, ...], *, max_tokens: int,
            generator=None) -> list[Sample]:
        import torch

        from constrained.masks import apply_token_mask

        eos = set(int(t) for t in eos_ids)
        per_group = self.num_beams // self.groups
        # finished hypotheses kept per group: spares replace outputs another group found too
        spare = 2 * per_group if self.groups > 1 else per_group
        beams = [_Beam([], 0.0, source.fork(), constraint.fork(), g) for g in range(self.groups)]
        finished: list[list[Sample]] = [[] for _ in range(self.groups)]
        for step in range(max_tokens + 1):
            chosen_now: dict[int, int] = {}             # token -> how many earlier groups took it
            next_beams: list[_Beam] = []
            for g in range(self.groups):
                group = [b for b in beams if b.group == g]
                if not group:
                    continue
                candidates = []
                for bi, b in enumerate(group):
                    logits = b.session.logits()
                    logp = torch.log_softmax(logits.double(), dim=-1)
                    masked = apply_token_mask(logp.clone(), b.constraint.mask())
                    if step == max_tokens:       # budget spent: only EOS may end the beam
                        keep = torch.full_like(masked, float("-inf"))
                        ids = [t for t in eos if t < masked.shape[-1]]
                        keep[ids] = masked[ids]
                        masked = keep
                    diverse = masked.clone()
                    for t, n in chosen_now.items():
                        diverse[t] -= self.diversity * n
                    k = min(2 * per_group, int(torch.isfinite(masked).sum().item()))
                    if k == 0:
                        continue
                    top = torch.topk(b.logprob + diverse, k)
                    for value, t in zip(top.values.tolist(), top.indices.tolist()):
                        candidates.append((value, bi, t, b.logprob + float(masked[t])))
                candidates.sort(key=lambda c: -c[0])
                live: list[_Beam] = []
                for _value, bi, t, total in candidates:
                    b = group[bi]
                    if t in eos:
                        if len(finished[g]) < spare or total > min(s.logprob for s in finished[g]):
                            finished[g].append(Sample(list(b.tokens), total, "eos", info={"group": g}))
                        continue
                    if len(live) == per_group:
                        continue
                    c = b.constraint.fork()
                    c.advance(t)
                    s = b.session.fork()
                    s.extend([t])
                    live.append(_Beam(b.tokens + [t], total, s, c, g))
                    chosen_now[t] = chosen_now.get(t, 0) + 1
                finished[g].sort(key=lambda s: -self.score(s.logprob, len(s.tokens)))
                del finished[g][spare:]
                # a live beam can only lose log-probability: drop it once it cannot enter the top
                if len(finished[g]) == spare and not self.length_penalty:
                    worst = finished[g][-1].logprob
                    live = [b for b in live if b.logprob > worst]
                next_beams.extend(live)
            beams = next_beams
            if not beams:
                break
        out: list[Sample] = []
        seen: set[tuple[int, ...]] = set()
        ranked = [sorted(group, key=lambda s: -self.score(s.logprob, len(s.tokens))) for group in finished]
        for outputs in ranked:                    # each group's best distinct outputs first ...
            taken = 0
            for output in outputs:
                if taken < per_group and tuple(output.tokens) not in seen:
                    seen.add(tuple(output.tokens))
                    out.append(output)
                    taken += 1
        for output in sorted((o for outputs in ranked for o in outputs),     # ... then spares fill the gaps
                             key=lambda o: -self.score(o.logprob, len(o.tokens))):
            if len(out) < self.num_beams and tuple(output.tokens) not in seen:
                seen.add(tuple(output.tokens))
                out.append(output)
        out.sort(key=lambda s: -self.score(s.logprob, len(s.tokens)))
        return out[: self.num_beams]
