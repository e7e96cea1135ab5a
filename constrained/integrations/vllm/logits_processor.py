"""The logits-processor route into vLLM: `ConstrainedLogitsProcessor`.

vLLM's supported plug-in point.  Installing this package registers the processor in
the entry-point group ``vllm.logits_processors``, so every vLLM engine in the same
environment loads it; a request opts in with

    SamplingParams(extra_args={"constrained": {"json_schema": schema}}, max_tokens=96)

(over the OpenAI-compatible server: ``"vllm_xargs": {"constrained": ...}`` in the
request body; the value may be JSON text there).  The dict is a
`constrained.integrations.spec.ConstraintSpec`: one of ``json_schema``, ``lark``,
``gbnf``, ``regex``, ``choice``, ``structural_tag``, plus JSON Schema options.
Requests without it are untouched.

Per step, for the whole batch: each constrained request's matcher catches up with the
tokens vLLM sampled, every mask is written into one int32 buffer (`fill_masks`) and
applied to the logits rows at once.  `BudgetGuard` keeps every constrained output
completable within the request's ``max_tokens``: near the budget it forces the
shortest completion, and it checks the likeliest allowed candidates (the argmax
under greedy decoding, the top `CANDIDATES` when sampling) so no sampled token opens
more than the tokens left can close.  An output cut by ``max_tokens`` is therefore
complete and valid whenever any completion fit at the start.

Errors: `validate_params` compiles the spec's grammar in the front end, so a bad
spec fails its own request with HTTP 400 (a ``ValueError``) and nothing else.  A
failure that only shows in the worker (a vocabulary-level compile limit) ends that
request at once (its output is empty) and is logged; the engine goes on.

vLLM does not run custom logits processors together with speculative decoding: use
the structured-output backend route (`constrained.integrations.vllm.backend`) there.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from constrained.decoding.budget import BudgetGuard
from constrained.decoding.step import EndIds
from constrained.engine.batch import fill_masks
from constrained.errors import ConstrainedError
from constrained.integrations.grammar_cache import GrammarCache
from constrained.integrations.spec import ConstraintSpec, cached_grammar
from constrained.integrations.vllm._compat import LogitsProcessorBase, vocabulary_for
from constrained.masks import apply_token_mask, mask_words, set_token_bits
from constrained.vocabulary import TokenVocabulary

__all__ = ["CANDIDATES", "EXTRA_ARGS_KEY", "ConstrainedLogitsProcessor", "spec_of"]

logger = logging.getLogger("constrained.vllm")

#: The key of ``SamplingParams.extra_args`` (and ``vllm_xargs``) that holds the constraint.
EXTRA_ARGS_KEY = "constrained"
#: Allowed candidates, most likely first, that the budget guard checks per sampled step.
CANDIDATES = 8
_GREEDY_EPS = 1e-5



def spec_of(params: Any) -> ConstraintSpec | None:
    """The `ConstraintSpec` of a request's ``SamplingParams`` (None: not constrained).
    Raises `ConstraintSpecError` (a ``ValueError``) for a malformed one."""
    extra = getattr(params, "extra_args", None) or {}
    raw = extra.get(EXTRA_ARGS_KEY)
    if raw is None:
        return None
    if isinstance(raw, str):
        import json

        from constrained.integrations.spec import ConstraintSpecError

        try:
            raw = json.loads(raw)
        except json.JSONDecodeError as e:
            raise ConstraintSpecError(f"extra_args[{EXTRA_ARGS_KEY!r}] is not JSON: {e}") from None
    return ConstraintSpec.from_request(raw)


_NO_ENDS = EndIds(())


class _Tracked:
    """One constrained request in the persistent batch."""

    __slots__ = ("matcher", "guard", "output", "greedy", "ends", "end_ids", "failed")

    def __init__(self, matcher, guard: BudgetGuard, output: list[int], greedy: bool,
                 ends: EndIds = _NO_ENDS) -> None:
        self.matcher = matcher
        self.guard = guard
        self.output = output          # vLLM's live list of this request's output ids
        self.greedy = greedy
        self.ends = ends              # the ids that end this request in vLLM, and the EOS ids that would not
        self.end_ids = ends.end
        self.failed = matcher is None

    def sync(self) -> None:
        """Read the tokens vLLM appended since the last step (a shorter list: rolled back)."""
        if self.failed:
            return
        m, out = self.matcher, self.output
        n = len(m.tokens)
        if len(out) < n:
            m.rollback(n - len(out))
            n = len(out)
        for t in out[n:]:
            if t < 0:                 # an async-scheduling placeholder: filled in later
                break
            if t in self.end_ids and m.is_accepting():
                break                 # the request ends here (a stop id the grammar need not know)
            if not m.advance(int(t)):
                logger.error("constrained: the output left the constraint at token %d; ending the request", t)
                self.failed = True
                break


def _next_forced(t: _Tracked) -> int | None:
    t.sync()
    return None if t.failed else t.guard.forced(t.matcher)


def _guarded(t: _Tracked, work) -> Any:
    """``work(t)``; an unexpected error marks the request failed (it can only end now)
    instead of taking the engine down with it."""
    if t.failed:
        return None
    try:
        return work(t)
    except Exception:
        logger.exception("constrained: internal error on a request; it ends now")
        t.failed = True
        return None


class ConstrainedLogitsProcessor(LogitsProcessorBase):  # type: ignore[misc,valid-type]
    """Masks the logits of requests whose ``extra_args`` carry a ``constrained`` spec.

    Example (with vLLM installed; ``model`` a model directory):

        from vllm import LLM, SamplingParams
        llm = LLM(model=model)   # the processor is loaded from its entry point
        params = SamplingParams(max_tokens=64, temperature=0,
                                extra_args={"constrained": {"json_schema": {"type": "object"}}})
        print(llm.generate(["A JSON object:"], params)[0].outputs[0].text)
    """

    def __init__(self, vllm_config: Any, device: Any, is_pin_memory: bool, *, tokenizer: Any = None) -> None:
        self._vllm_config = vllm_config
        self._device = device
        self._tokenizer = tokenizer
        self._cache: GrammarCache | None = None
        self._tracked: dict[int, _Tracked] = {}
        self._buffer = np.zeros((0, 0), dtype=np.int32)

    # ------------------------------------------------------------------ vLLM's interface
    @classmethod
    def validate_params(cls, params: Any) -> None:
        """Refuse a malformed or uncompilable spec with a ``ValueError`` (HTTP 400)."""
        spec = spec_of(params)
        if spec is None:
            return
        try:
            cached_grammar(spec)
        except ConstrainedError as e:
            raise ValueError(f"constrained: {e}") from e

    def is_argmax_invariant(self) -> bool:
        """Constraints change the argmax: vLLM must run this processor under greedy decoding too."""
        return False

    def update_state(self, batch_update: Any) -> None:
        """Follow the persistent batch: requests removed, added (with their live output
        lists) and moved, in that order."""
        if not batch_update:
            return
        for index in batch_update.removed:
            self._tracked.pop(index, None)
        for index, params, _prompt, output in batch_update.added:
            tracked = self._track(params, output)
            if tracked is None:
                self._tracked.pop(index, None)
            else:
                self._tracked[index] = tracked
        for a, b, direction in batch_update.moved:
            ta, tb = self._tracked.pop(a, None), self._tracked.pop(b, None)
            if ta is not None:
                self._tracked[b] = ta
            if tb is not None and getattr(direction, "name", str(direction)).endswith("SWAP"):
                self._tracked[a] = tb

    def apply(self, logits: Any) -> Any:
        """Mask every constrained row of ``logits`` ([batch, logits width]) in place."""
        if not self._tracked:
            return logits
        import torch

        rows = sorted(i for i in self._tracked if i < logits.shape[0])
        if not rows:
            return logits
        words = mask_words(logits.shape[-1])
        if self._buffer.shape[0] < len(rows) or self._buffer.shape[1] != words:
            self._buffer = np.zeros((max(len(rows), 2 * self._buffer.shape[0]), words), dtype=np.int32)
        buf = self._buffer[: len(rows)]
        live, live_rows, forced = [], [], {}
        for j, i in enumerate(rows):
            t = self._tracked[i]
            f = _guarded(t, _next_forced)
            if t.failed or t.matcher.is_terminated():
                forced[j] = t.end_ids
            elif f is not None:
                forced[j] = (f,)
            else:
                live.append(t)
                live_rows.append(j)
        try:
            fill_masks([t.matcher for t in live], buf, rows=live_rows)
        except Exception:                       # find the row at fault; the others go on
            for t, j in zip(live, live_rows):
                _guarded(t, lambda t, j=j: t.matcher.fill_mask(buf[j]))
                if t.failed:
                    forced[j] = t.end_ids
        for t, j in zip(live, live_rows):
            if j not in forced:
                t.ends.apply(buf[j], t.matcher.is_accepting())
        for j, ids in forced.items():
            buf[j] = 0
            set_token_bits(buf[j], ids)
        contiguous = rows[-1] - rows[0] + 1 == len(rows)
        if contiguous:                    # the usual case: a view, no copy in and out
            sub = apply_token_mask(logits[rows[0]:rows[-1] + 1], buf)
        else:
            index = torch.as_tensor(rows, device=logits.device)
            sub = apply_token_mask(logits.index_select(0, index), buf)
        for t, j in zip(live, live_rows):
            if j not in forced:
                _guarded(t, lambda t, j=j: self._keep_room(t, sub[j]))
        stuck = (~torch.isfinite(sub).any(dim=-1)).nonzero().flatten().tolist()
        for j in stuck:                   # nothing allowed (a state with no completion): end the request
            t = self._tracked[rows[j]]
            logger.warning("constrained: a request reached a state with no allowed token; ending it")
            t.failed = True
            if t.end_ids:
                sub[j, list(t.end_ids)] = 0.0
        if not contiguous:
            logits.index_copy_(0, index, sub)
        return logits

    # ------------------------------------------------------------------ internals
    def _vocabulary(self):
        if self._cache is None:
            tokenizer = self._tokenizer
            if isinstance(tokenizer, TokenVocabulary):
                self._cache = GrammarCache(tokenizer)
                return self._cache
            if tokenizer is None:
                from vllm.tokenizers import cached_tokenizer_from_config

                tokenizer = cached_tokenizer_from_config(self._vllm_config.model_config)
            vocab_size = self._vllm_config.model_config.get_vocab_size() if self._vllm_config is not None else None
            self._cache = GrammarCache(vocabulary_for(tokenizer, vocab_size), warm_up=True)
        return self._cache

    def _track(self, params: Any, output: list[int]) -> _Tracked | None:
        try:
            spec = spec_of(params)
        except ConstrainedError as e:          # validate_params refused it already in the front end
            spec, error = None, e
        else:
            if spec is None:
                return None
            error = None
        greedy = float(getattr(params, "temperature", 1.0) or 0.0) < _GREEDY_EPS
        cache = None
        try:
            cache = self._vocabulary()
            if error is not None:
                raise error
            matcher = cache.get(spec).matcher()
        except ConstrainedError as e:
            logger.error("constrained: cannot compile the request's constraint, ending it: %s", e)
            matcher = None
        eos = cache.vocab.eos_ids if cache is not None else ()
        return _Tracked(matcher, BudgetGuard(getattr(params, "max_tokens", None)), output, greedy,
                        EndIds.of(eos, getattr(params, "all_stop_token_ids", None)))

    @staticmethod
    def _keep_room(tracked: _Tracked, row: Any) -> None:
        """Mask the likeliest allowed tokens of ``row`` that would leave no completion
        within the budget: the argmax until one keeps room (greedy), or the top
        `CANDIDATES` (sampling).  If none of those keeps room, the shortest completion's
        first token is the only one left."""
        import torch

        guard, m = tracked.guard, tracked.matcher
        if guard.max_tokens is None:
            return
        tries = CANDIDATES
        if tracked.greedy:
            while tries:
                t = int(torch.argmax(row))
                if row[t] == float("-inf") or t in tracked.end_ids or guard.keeps_room(m, t):
                    return
                row[t] = float("-inf")
                tries -= 1
        else:
            k = min(CANDIDATES, row.shape[-1])
            values, ids = torch.topk(row, k)
            kept = 0
            for v, t in zip(values.tolist(), ids.tolist()):
                if v == float("-inf"):
                    break
                if t in tracked.end_ids or guard.keeps_room(m, t):
                    kept += 1
                else:
                    row[t] = float("-inf")
            if kept or values[0] == float("-inf"):
                return
        completion = m.completion_tokens()
        if completion:
            keep = row[completion[0]].clone()
            row.fill_(float("-inf"))
            row[completion[0]] = keep if keep != float("-inf") else 0.0
