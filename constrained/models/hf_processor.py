"""Constraints inside Hugging Face ``model.generate()``: one line for its users.

`ConstrainedLogitsProcessor` keeps one matcher per generated prefix, so it follows
greedy, sampling and beam search alike (beams are reordered between steps: each
row's matcher is found from its own previous prefix, forked and advanced).
Rows of a batch may carry different constraints.  Each row's mask is the decoding
layer's (`constrained.decoding.step.step_mask`: the constraint's mask, EOS only where
it accepts), as in `decode_loop`, so greedy ``generate()`` picks the tokens
`decode_loop` picks.

Example:
    >>> import torch
    >>> from transformers import LogitsProcessorList
    >>> from constrained import Grammar, compile_grammar
    >>> from constrained.models import LanguageModel
    >>> lm = LanguageModel.tiny(seed=0)
    >>> g = compile_grammar(Grammar.from_regex("[0-9]{3}"), lm.vocab, cache_dir=None)
    >>> prompt = torch.tensor([list(b"Code: ")])
    >>> proc = ConstrainedLogitsProcessor(g, prompt_length=prompt.shape[1])
    >>> out = lm.model.generate(prompt, logits_processor=LogitsProcessorList([proc]), max_new_tokens=5,
    ...                         do_sample=False, pad_token_id=256)
    >>> bytes(out[0, prompt.shape[1]:prompt.shape[1] + 3].tolist()).isdigit(), int(out[0, -1])
    (True, 256)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from constrained.decoding.step import step_mask
from constrained.masks import apply_token_mask


class ConstrainedLogitsProcessor:
    """A ``transformers`` logits processor masking every row with its constraint.

    ``constraints``: one compiled grammar (or any object with ``matcher()``) for all
    rows, or a sequence with one per row (beams of a row share its constraint).
    ``prompt_length``: the input length (generated tokens start there).
    """

    def __init__(self, constraints: Any | Sequence[Any], prompt_length: int, *, num_beams: int = 1) -> None:
        self.constraints = constraints
        self.prompt_length = prompt_length
        self.num_beams = num_beams
        self._matchers: dict[tuple[int, tuple[int, ...]], Any] = {}

    def _constraint(self, row: int) -> Any:
        if isinstance(self.constraints, (list, tuple)):
            return self.constraints[row // self.num_beams]
        return self.constraints

    def _matcher(self, row: int, generated: tuple[int, ...]) -> Any:
        key = (row // self.num_beams, generated)
        hit = self._matchers.get(key)
        if hit is not None:
            return hit
        if not generated:
            m = self._constraint(row).matcher()
        else:
            parent = self._matcher(row, generated[:-1])
            m = None if parent is None else parent.fork()     # None: the row left the constraint earlier
            if m is not None and not m.is_terminated() and not m.advance(generated[-1]):
                # only after EOS (padding) or a token the mask did not allow (another processor)
                m = None
        self._matchers[key] = m
        return m

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        """Mask each row of ``scores`` ([rows, logits width]) for its generated prefix (in place)."""
        rows = input_ids.shape[0]
        live: dict[tuple[int, tuple[int, ...]], Any] = {}
        for r in range(rows):
            generated = tuple(int(t) for t in input_ids[r, self.prompt_length:].tolist())
            m = self._matcher(r, generated)
            live[(r // self.num_beams, generated)] = m
            if m is None or m.is_terminated():
                continue                       # finished rows: generate() pads them itself
            apply_token_mask(scores[r], step_mask(m))
        # keep the matchers of this step's prefixes (and their parents' chain is not needed)
        self._matchers = live
        return scores
