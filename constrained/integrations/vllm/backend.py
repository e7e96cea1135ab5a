"""The structured-output backend route into vLLM: `ConstrainedBackend`, `ConstrainedGrammar`.

vLLM's own structured outputs (``SamplingParams(structured_outputs=...)``, the OpenAI
server's ``response_format``, ``guided_*`` fields) run through one engine-wide backend.
With this package installed and ``structured_outputs_config={"backend": "constrained"}``
(``--structured-outputs-config.backend constrained`` on the command line) they run on
this project's engine, speculative decoding (n-gram, draft model, EAGLE) included: vLLM
fills a mask row per draft position and checks drafts with `validate_tokens`.

vLLM has no supported way to add a backend; `constrained.integrations.vllm.plugin`
wires this one in (see its docstring for what it patches and for which versions).

Request types map to `ConstraintSpec` kinds: JSON -> ``json_schema``, JSON_OBJECT ->
any JSON object, REGEX -> ``regex``, CHOICE -> ``choice``, GRAMMAR -> ``gbnf`` when the
text has ``::=`` rules, else ``lark``, STRUCTURAL_TAG -> ``structural_tag``.

Differences from the logits-processor route: the backend sees no logits, so its budget
guard cannot check the likeliest candidates; it forces the shortest completion once only
`BUDGET_MARGIN` spare tokens remain, or as many as the largest jump in completion length
one token caused earlier in the output.  A token that opens more than that at once just
before the budget (a first member whose value is a large required object) can still cut
the output there; the logits-processor route has no such gap.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import numpy as np

from constrained.decoding.budget import BudgetGuard
from constrained.decoding.step import EndIds, step_mask
from constrained.integrations.grammar_cache import GrammarCache
from constrained.integrations.spec import ConstraintSpec, ConstraintSpecError
from constrained.integrations.vllm._compat import (
    StructuredOutputBackendBase,
    StructuredOutputGrammarBase,
    vocabulary_for,
)
from constrained.masks import mask_words, set_token_bits

__all__ = ["BACKEND_NAME", "ConstrainedBackend", "ConstrainedGrammar", "spec_for_request_type"]

logger = logging.getLogger("constrained.vllm")

#: Spare tokens at which the backend starts forcing the shortest completion (it sees no
#: logits to check candidates with; see `BudgetGuard`).
BUDGET_MARGIN = 8

#: The name vLLM's ``structured_outputs_config.backend`` selects this backend by.
BACKEND_NAME = "constrained"


def spec_for_request_type(request_type: Any, grammar_spec: str) -> ConstraintSpec:
    """The `ConstraintSpec` of one of vLLM's ``StructuredOutputOptions`` and its spec text.

    Example:
        >>> spec_for_request_type("GRAMMAR", 'root ::= "a"').kind, spec_for_request_type("CHOICE", '["a"]').kind
        ('gbnf', 'choice')
    """
    name = getattr(request_type, "name", str(request_type))
    if name == "JSON":
        return ConstraintSpec.from_request({"json_schema": grammar_spec})
    if name == "JSON_OBJECT":
        return ConstraintSpec.from_request({"json_schema": {"type": "object"}})
    if name == "REGEX":
        return ConstraintSpec.from_request({"regex": grammar_spec})
    if name == "CHOICE":
        return ConstraintSpec.from_request({"choice": grammar_spec})
    if name == "GRAMMAR":
        kind = "gbnf" if "::=" in grammar_spec else "lark"
        return ConstraintSpec.from_request({kind: grammar_spec})
    if name == "STRUCTURAL_TAG":
        return ConstraintSpec.from_request({"structural_tag": grammar_spec})
    raise ConstraintSpecError(f"unknown structured output request type {name!r}")


class ConstrainedGrammar(StructuredOutputGrammarBase):  # type: ignore[misc,valid-type]
    """One request's state for vLLM's structured-output manager: a matcher, the
    request's extra stop ids and its budget guard (``max_tokens``, set by the plugin)."""

    def __init__(self, matcher, stop_token_ids: set[int] | None = None, max_tokens: int | None = None) -> None:
        self.matcher = matcher
        self.guard = BudgetGuard(max_tokens, margin=BUDGET_MARGIN)
        eos = matcher.compiled.eos_set
        # the ids that end this request in vLLM; the vocabulary's other EOS ids would not
        self._ends = EndIds.of(eos, stop_token_ids)
        self._end_ids = self._ends.end
        self._stop_ids = tuple(sorted(set(self._end_ids) - eos))
        self._stopped_at: int | None = None     # tokens read when a non-EOS stop id ended the output
        self.failed = False                     # an internal error: the request may only end (EOS)

    @property
    def max_tokens(self) -> int | None:
        return self.guard.max_tokens

    @max_tokens.setter
    def max_tokens(self, value: int | None) -> None:
        self.guard.max_tokens = value

    def _read(self, token: int) -> bool:
        if self.failed:
            return token in self._end_ids
        if self._stopped_at is not None:
            return False
        if token in self._stop_ids:
            if not self.matcher.is_accepting():
                return False
            self._stopped_at = len(self.matcher.tokens)
            return True
        return self.matcher.advance(token)

    def _count(self) -> int:
        return len(self.matcher.tokens) + (self._stopped_at is not None)

    def accept_tokens(self, request_id: str, tokens: list[int]) -> bool:
        """Read ``tokens`` in turn; False (and nothing read) if one is refused."""
        done = 0
        try:
            for t in tokens:
                if not self._read(int(t)):
                    self.rollback(done)
                    return False
                done += 1
        except Exception:                  # a bug must end this request, not the engine
            logger.exception("constrained: accept_tokens failed for request %s", request_id)
            self.failed = True
            return False
        return True

    def validate_tokens(self, tokens: list[int]) -> list[int]:
        """The longest prefix of ``tokens`` the constraint accepts; the state is unchanged."""
        done = 0
        for t in tokens:
            if not self._read(int(t)):
                break
            done += 1
        self.rollback(done)
        return list(tokens[:done])

    def rollback(self, num_tokens: int) -> None:
        """Undo the last ``num_tokens`` accepted tokens (a stop id counts as one)."""
        if num_tokens <= 0 or self.failed:
            return
        if self._stopped_at is not None:
            self._stopped_at = None
            num_tokens -= 1
        self.matcher.rollback(num_tokens)

    def fill_bitmask(self, bitmask: Any, batch_index: int) -> None:
        """Write this request's mask into row ``batch_index`` of vLLM's int32 bitmask."""
        row = _numpy(bitmask)[batch_index]
        if not (self.failed or self.is_terminated()):
            try:
                self._fill(row)
                return
            except Exception:              # a bug must end this request (EOS only), not the engine
                logger.exception("constrained: fill_bitmask failed; the request may only end now")
                self.failed = True
        row[:] = 0
        set_token_bits(row, self._end_ids)

    def _fill(self, row: np.ndarray) -> None:
        step_mask(self.matcher, forced=self.guard.forced(self.matcher), ends=self._ends, out=row)

    def is_terminated(self) -> bool:
        return self._stopped_at is not None or self.matcher.is_terminated()

    def reset(self) -> None:
        self._stopped_at = None
        self.failed = False
        self.matcher.reset()


def _numpy(bitmask: Any) -> np.ndarray:
    return bitmask if isinstance(bitmask, np.ndarray) else bitmask.numpy()


@dataclasses.dataclass
class ConstrainedBackend(StructuredOutputBackendBase):  # type: ignore[misc,valid-type]
    """Engine-level backend: compiles each request's spec (cached across requests) for
    the engine's tokenizer; masks are ``ceil(vocab_size / 32)`` int32 words wide."""

    vllm_config: Any
    tokenizer: Any
    vocab_size: int

    def __post_init__(self) -> None:
        from constrained.vocabulary import TokenVocabulary

        vocab = self.tokenizer if isinstance(self.tokenizer, TokenVocabulary) \
            else vocabulary_for(self.tokenizer, self.vocab_size)
        self.cache = GrammarCache(vocab, warm_up=True)     # built at engine start, in the background

    def compile_grammar(self, request_type: Any, grammar_spec: str,
                        stop_token_ids: set[int] | None = None) -> ConstrainedGrammar:
        """A `ConstrainedGrammar` for one request (typed errors for bad specs: vLLM fails
        that request only)."""
        spec = spec_for_request_type(request_type, grammar_spec)
        return ConstrainedGrammar(self.cache.get(spec).matcher(), stop_token_ids)

    def allocate_token_bitmask(self, max_num_seqs: int) -> Any:
        import torch

        return torch.full((max_num_seqs, mask_words(self.vocab_size)), -1, dtype=torch.int32)

    def destroy(self) -> None:
        """Nothing to release: compiled grammars are plain Python objects."""

