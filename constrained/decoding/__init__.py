"""Decoding under a constraint: the per-sequence step and the loops built on it.

Every decoder in the project takes its per-sequence rules from here, so they are
written once:

* `constrained.decoding.step` — `SequenceStep`, one sequence's step: the next
  token's mask (EOS only where the constraint accepts), EOS forced where nothing
  else is allowed, the budget (EOS only at ``max_tokens``; the finish within it),
  forced tokens (jump-forward), log-probabilities, stop reasons; `step_mask` and
  `EndIds` for callers that only write mask rows;
* `constrained.decoding.budget` — the budget rule (`completes_within`,
  `look_ahead`), its two policies: `FinishPlan` (a decoder that chooses its tokens
  replaces one that leaves no completion in the budget) and `BudgetGuard` (a
  serving engine forces the shortest completion near the budget);
* `constrained.decoding.loop` — `decode_loop` (one sequence) and `decode_batch`
  (rows with independent constraints, one forward pass per step).

Users: the plain loop and batches (`samplers.AncestralSampler`), the speculative
verifier (`constrained.speculative.decoder`), the Hugging Face logits processor
(`constrained.models.hf_processor`) and the vLLM adapters
(`constrained.integrations.vllm`).

Example:
    >>> from constrained import Grammar, compile_grammar
    >>> from constrained.models import LanguageModel
    >>> lm = LanguageModel.tiny(seed=0)
    >>> m = compile_grammar(Grammar.from_regex("[0-9]{2,8}"), lm.vocab, cache_dir=None).matcher()
    >>> out = decode_loop(lm.session(list(b"Number: ")), m, lm.eos_ids, lambda x, g: int(x.argmax()),
    ...                   max_tokens=3, finish_within_budget=True)
    >>> bytes(out.tokens).isdigit(), 2 <= len(out.tokens) <= 3, out.stop
    (True, True, 'eos')
"""

from constrained.decoding.budget import BudgetGuard, FinishPlan, completes_within, look_ahead
from constrained.decoding.loop import decode_batch, decode_loop
from constrained.decoding.step import EndIds, SequenceStep, mask_bit, only_eos, restrict_to, step_mask, token_logprob

__all__ = ["BudgetGuard", "EndIds", "FinishPlan", "SequenceStep", "completes_within", "decode_batch",
           "decode_loop", "look_ahead", "mask_bit", "only_eos", "restrict_to", "step_mask", "token_logprob"]
