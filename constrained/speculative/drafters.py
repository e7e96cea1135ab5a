"""Drafters: cheap guesses of the next tokens, for the speculative verifier to check.

Every drafter proposes up to ``k`` tokens after ``context`` (prompt + output so far)
that the constraint allows (it gets a forked constraint positioned after the
context).  A `Draft` carries, per token, the distribution the drafter sampled it
from, or None for a deterministic guess (a point mass); the verifier's acceptance
rule uses it, so every drafter leaves the output distribution exact.

* `ForcedDrafter`: the tokens the constraint forces (free, always right under
  greedy decoding unless the model prefers another tokenization);
* `PromptLookupDrafter`: the tokens that followed the latest earlier occurrence of
  the context's last n-gram (values copied from the input);
* `SuffixDrafter`: a frequency index of continuations over the prompt and earlier
  outputs (SuffixDecoding style: structured outputs repeat themselves);
* `ModelDrafter`: a small model with the same tokenizer, itself constrained;
  `LayerSkipDrafter`: the target's own first layers as that model (self-speculation);
* `ChainDrafter`: drafters in turn, each continuing where the previous one stopped.

Example:
    >>> from constrained import Grammar, TokenVocabulary, compile_grammar
    >>> vocab = TokenVocabulary.from_token_bytes([bytes([b]) for b in range(97, 123)] + [b""], eos_ids=[26])
    >>> m = compile_grammar(Grammar.from_regex("[a-z]+"), vocab, cache_dir=None).matcher()
    >>> PromptLookupDrafter().draft([ord(c) - 97 for c in "thecatsatonthec"], m.fork(), 3).tokens
    [0, 19, 18]
"""

from __future__ import annotations

import copy
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from constrained.constraint import SupportsForcedTokens


@dataclass
class Draft:
    """Drafted tokens and, per token, the distribution it was sampled from (a torch
    vector over the logits width) or None for a deterministic guess."""

    tokens: list[int] = field(default_factory=list)
    q: list = field(default_factory=list)

    def extend(self, other: Draft) -> None:
        self.tokens += other.tokens
        self.q += other.q if other.q else [None] * len(other.tokens)


class Drafter(Protocol):
    def draft(self, context: Sequence[int], constraint, k: int, generator=None) -> Draft:
        """Up to ``k`` tokens after ``context``; ``constraint`` is a fork the drafter may advance."""

    def observe(self, tokens: Sequence[int]) -> None:
        """A finished output (drafters that learn across requests index it)."""


def _allowed_prefix(tokens: Sequence[int], constraint) -> list[int]:
    """The longest prefix of ``tokens`` the constraint accepts (it is advanced along it)."""
    out = []
    for t in tokens:
        if not constraint.advance(int(t)):
            break
        out.append(int(t))
    return out


class ForcedDrafter:
    """The tokens the constraint forces next (`Matcher.forced_tokens`); free drafts."""

    def draft(self, context, constraint, k: int, generator=None) -> Draft:
        if not isinstance(constraint, SupportsForcedTokens) or k <= 0:
            return Draft()
        return Draft(_allowed_prefix(constraint.forced_tokens()[:k], constraint))

    def observe(self, tokens) -> None:
        pass


class PromptLookupDrafter:
    """Prompt lookup decoding: find the latest earlier occurrence of the context's last
    ``n`` tokens (``max_ngram`` down to ``min_ngram``) and propose what followed it."""

    def __init__(self, max_ngram: int = 4, min_ngram: int = 1) -> None:
        if not 1 <= min_ngram <= max_ngram:
            raise ValueError(f"need 1 <= min_ngram <= max_ngram, got {min_ngram}, {max_ngram}")
        self.max_ngram, self.min_ngram = max_ngram, min_ngram

    def draft(self, context, constraint, k: int, generator=None) -> Draft:
        ctx = list(context)
        n_ctx = len(ctx)
        for n in range(min(self.max_ngram, n_ctx - 1), self.min_ngram - 1, -1):
            tail = ctx[n_ctx - n:]
            for start in range(n_ctx - n - 1, -1, -1):          # latest occurrence first
                if ctx[start:start + n] == tail:
                    follow = ctx[start + n:start + n + k]
                    if follow:
                        return Draft(_allowed_prefix(follow, constraint))
        return Draft()

    def observe(self, tokens) -> None:
        pass


class SuffixDrafter:
    """Continuation counts of every n-gram (n ≤ ``max_depth``) in the prompt and in
    earlier outputs (`observe`); drafts by following the most frequent continuation
    of the longest matching suffix while it is at least ``min_share`` of that
    suffix's continuations."""

    def __init__(self, max_depth: int = 8, min_share: float = 0.5) -> None:
        self.max_depth, self.min_share = max_depth, min_share
        self.index: dict[tuple[int, ...], Counter] = defaultdict(Counter)   # outputs seen so far
        self._prompt: tuple[int, ...] | None = None
        self._prompt_index: dict[tuple[int, ...], Counter] = {}

    def _add(self, index, tokens: Sequence[int]) -> None:
        toks = list(tokens)
        for i in range(1, len(toks)):
            for n in range(1, min(self.max_depth, i) + 1):
                index[tuple(toks[i - n:i])][toks[i]] += 1

    def observe(self, tokens) -> None:
        self._add(self.index, tokens)

    def _continuations(self, key) -> Counter:
        out = Counter(self.index.get(key, ()))
        out.update(self._prompt_index.get(key, ()))
        return out

    def draft(self, context, constraint, k: int, generator=None) -> Draft:
        ctx = list(context)
        tokens: list[int] = []
        while len(tokens) < k:
            best = None
            for n in range(min(self.max_depth, len(ctx)), 0, -1):
                counts = self._continuations(tuple(ctx[len(ctx) - n:]))
                if counts:
                    t, c = counts.most_common(1)[0]
                    if c >= self.min_share * sum(counts.values()):
                        best = t
                    break
            if best is None or not constraint.advance(best):
                break
            tokens.append(best)
            ctx.append(best)
        return Draft(tokens)

    def index_prompt(self, prompt: Sequence[int]) -> None:
        """Index a request's prompt (the decoder calls this once per request)."""
        key = tuple(prompt)
        if key != self._prompt:
            self._prompt = key
            self._prompt_index = defaultdict(Counter)
            self._add(self._prompt_index, prompt)


class ModelDrafter:
    """A draft model with the target's tokenizer (a `constrained.models.LanguageModel`),
    constrained like the target: each drafted token is drawn from the draft model's
    masked distribution under ``rule`` (greedy by default: deterministic drafts) and
    drafting stops early when the draft model's probability of its token falls below
    ``min_confidence`` (the chance it is accepted is low)."""

    def __init__(self, lm, rule=None, *, min_confidence: float = 0.0) -> None:
        from samplers import Greedy

        self.lm = lm
        self.rule = rule or Greedy()
        self.min_confidence = min_confidence
        self._session = None

    def _sync(self, context: list[int]):
        s = self._session
        if s is None or not s.tokens or s.tokens[0] != context[0]:
            self._session = s = self.lm.session(context)
            return s
        common = 0
        for a, b in zip(s.tokens, context):
            if a != b:
                break
            common += 1
        if common == len(s.tokens) and common == len(context):
            return s
        if common < len(s.tokens):
            if common == 0:
                self._session = s = self.lm.session(context)
                return s
            keep = common if common < len(context) else common - 1    # re-feed one token for logits
            if keep < 1:
                self._session = s = self.lm.session(context)
                return s
            s.truncate(keep)
        s.extend(context[len(s.tokens):])
        return s

    def draft(self, context, constraint, k: int, generator=None) -> Draft:
        import torch

        from constrained.masks import apply_token_mask
        from samplers import Greedy
        from samplers.base import multinomial

        if k <= 0 or not context:
            return Draft()
        session = self._sync(list(context))
        out = Draft()
        for _ in range(k):
            masked = apply_token_mask(session.logits().clone(), constraint.mask())
            if not torch.isfinite(masked).any():
                break
            probs = self.rule.probabilities(masked)
            if isinstance(self.rule, Greedy):
                t = int(masked.argmax())
                q = None
                confidence = float(torch.softmax(masked.double(), 0)[t])
            else:
                t = multinomial(probs, generator)
                q = probs
                confidence = float(probs[t])
            if (out.tokens and confidence < self.min_confidence) or t in self.lm.eos_ids:
                break
            if not constraint.advance(t):    # pragma: no cover - the mask allowed it
                break
            out.tokens.append(t)
            out.q.append(q)
            session.extend([t])
        return out

    def observe(self, tokens) -> None:
        pass


def layer_skip_model(lm, layers: int):
    """A `LanguageModel` that runs only the first ``layers`` decoder layers of ``lm``'s
    model (then its final norm and output head): weights are shared, nothing is copied.
    Works for Llama-style models (``model.model.layers``)."""
    import torch

    from constrained.errors import ModelError
    from constrained.models import LanguageModel

    inner = getattr(lm.model, "model", None)
    blocks = getattr(inner, "layers", None)
    if blocks is None:
        raise ModelError(f"{type(lm.model).__name__} has no model.layers: layer skipping needs a Llama-style model")
    if not 1 <= layers < len(blocks):
        raise ModelError(f"layers must be in [1, {len(blocks)}), not {layers}")
    config = copy.deepcopy(lm.model.config)
    config.num_hidden_layers = layers
    if getattr(config, "layer_types", None):
        config.layer_types = config.layer_types[:layers]
    short_inner = copy.copy(inner)
    short_inner._modules = dict(inner._modules)
    short_inner.layers = torch.nn.ModuleList(list(blocks)[:layers])
    short_inner.config = config
    short = copy.copy(lm.model)
    short._modules = dict(lm.model._modules)
    short.model = short_inner
    short.config = config
    return LanguageModel(short, lm.tokenizer, vocab=lm.vocab)


class LayerSkipDrafter(ModelDrafter):
    """Self-speculation: the target's first ``layers`` layers draft for it."""

    def __init__(self, lm, layers: int, rule=None, *, min_confidence: float = 0.0) -> None:
        super().__init__(layer_skip_model(lm, layers), rule, min_confidence=min_confidence)


class ChainDrafter:
    """Drafters in turn: each continues the draft where the previous ones stopped."""

    def __init__(self, drafters: Sequence) -> None:
        if not drafters:
            raise ValueError("a ChainDrafter needs at least one drafter")
        self.drafters = list(drafters)

    def draft(self, context, constraint, k: int, generator=None) -> Draft:
        out = Draft()
        ctx = list(context)
        for d in self.drafters:
            if len(out.tokens) >= k:
                break
            part = d.draft(ctx, constraint, k - len(out.tokens), generator)
            out.extend(part)
            ctx += part.tokens
        return out

    def observe(self, tokens) -> None:
        for d in self.drafters:
            d.observe(tokens)

    def index_prompt(self, prompt) -> None:
        for d in self.drafters:
            if hasattr(d, "index_prompt"):
                d.index_prompt(prompt)


DRAFTER_NAMES = ("forced", "lookup", "suffix", "chain", "layer-skip[:N]", "model:PATH")


def drafter_from_spec(spec: str, lm) -> Drafter:
    """A drafter by name (the CLI's ``--speculative``): ``forced``, ``lookup``, ``suffix``,
    ``chain`` (forced, then prompt lookup, then the suffix index), ``layer-skip[:N]``
    (the target's first N layers, default a third of them, after forced tokens) or
    ``model:PATH`` (a local Hugging Face model with the same tokenizer).

    Example:
        >>> type(drafter_from_spec("chain", None)).__name__
        'ChainDrafter'
    """
    from constrained.errors import ModelError

    name, _, arg = spec.partition(":")
    if name == "forced":
        return ForcedDrafter()
    if name == "lookup":
        return PromptLookupDrafter()
    if name == "suffix":
        return SuffixDrafter()
    if name == "chain":
        return ChainDrafter([ForcedDrafter(), PromptLookupDrafter(), SuffixDrafter()])
    if name == "layer-skip":
        layers = int(arg) if arg else max(1, len(lm.model.model.layers) // 3)
        return ChainDrafter([ForcedDrafter(), LayerSkipDrafter(lm, layers, min_confidence=0.5)])
    if name == "model" and arg:
        from constrained.models import LanguageModel

        draft = LanguageModel.load(arg)
        if draft.vocab.content_hash() != lm.vocab.content_hash():
            raise ModelError(f"the draft model {arg} has another tokenizer than the target")
        return ChainDrafter([ForcedDrafter(), ModelDrafter(draft, min_confidence=0.5)])
    raise ValueError(f"unknown drafter {spec!r}: use one of {', '.join(DRAFTER_NAMES)}")
