"""The constrained decoding loop: forward, mask, choose, advance, until EOS.

`decode_loop` drives one sequence: the source's next-token logits (KV cache
inside the source) go through the sequence's step (`constrained.decoding.step.SequenceStep`:
the constraint's mask, padding logits never allowed, EOS only where the constraint
accepts, the budget), a chooser picks a token, the constraint advances, the source
extends.  The returned `constrained.constraint.Sample` carries the model's
unconstrained log-probability of the tokens and why decoding stopped.

`decode_batch` does the same for several sequences with independent constraints
(a `constrained.models.BatchSession`: one forward pass per step for all rows;
finished rows wait, the others go on).  Every row is a `SequenceStep`, so a row of a
batch decodes exactly as it would alone.

Example:
    >>> from constrained import Grammar, compile_grammar
    >>> from constrained.models import LanguageModel
    >>> lm = LanguageModel.tiny(seed=0)
    >>> greedy = lambda masked, generator: int(masked.argmax())
    >>> m = compile_grammar(Grammar.from_regex("(yes|no)!"), lm.vocab, cache_dir=None).matcher()
    >>> out = decode_loop(lm.session(list(b"Answer: ")), m, lm.eos_ids, greedy, max_tokens=8)
    >>> bytes(out.tokens) in (b"yes!", b"no!"), out.stop
    (True, 'eos')
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from constrained.constraint import Constraint, LogitsSource, Sample
from constrained.decoding.step import SequenceStep

__all__ = ["decode_batch", "decode_loop"]

Chooser = Callable[[Any, Any], Any]


def decode_loop(source: LogitsSource, constraint: Constraint, eos_ids: tuple[int, ...], choose: Chooser, *,
                max_tokens: int, generator: Any = None, jump_forward: bool = False,
                finish_within_budget: bool = False) -> Sample:
    """Decode one sequence (see the module docstring); ``choose(masked_logits, generator)``.

    ``jump_forward``: tokens the constraint forces (``constraint.forced_tokens()``, a
    grammar matcher's canonical tokenization of the bytes every continuation starts
    with) are appended without sampling, in the same forward pass as the sampled
    token before them, so a forced run costs no forward pass of its own; and where
    the constraint allows nothing but EOS the loop stops without a forward pass
    (the last token is then not fed to ``source``).  Forced tokens count towards
    ``max_tokens`` and in ``Sample.forced`` (a forced EOS too), and add nothing to
    ``Sample.logprob`` (which covers the sampled tokens).

    ``finish_within_budget``: a sampled token after which the output could no longer
    be completed in the tokens left (the shortest completion, `Matcher.completion_tokens`,
    value checks included, checked at every step) is replaced by the current shortest
    completion and EOS, so a grammar matcher's output ends complete instead of
    running out of budget (the end is then the shortest, not the model's choice;
    ``Sample.info["finished_by_completion"]`` counts the tokens appended so).
    It cannot help where the shortest completion is already longer than the budget
    at the start (give such constraints a larger ``max_tokens``)."""
    seq = SequenceStep(constraint, eos_ids, max_tokens, jump_forward=jump_forward,
                       finish_within_budget=finish_within_budget)
    while seq.result is None:
        tokens = seq.feed()
        if tokens:
            source.extend(tokens)
        seq.choose(source.logits(), choose, generator)
    return seq.result


def decode_batch(source: Any, constraints: Sequence[Constraint], eos_ids: tuple[int, ...],
                 choose: Chooser | Sequence[Chooser], *, max_tokens: int, generator: Any = None,
                 jump_forward: bool = False, finish_within_budget: bool = False) -> list[Sample]:
    """Decode ``len(constraints)`` sequences at once, row ``i`` of ``source`` (a
    `constrained.models.BatchSession`: ``logits()`` is ``[rows, width]``,
    ``extend(rows)`` takes a token list per row) under ``constraints[i]``.  Each row
    decodes exactly as `decode_loop` would decode it alone (same rules, same
    ``jump_forward`` and ``finish_within_budget``); a row that stopped is fed nothing.  ``choose`` is one chooser
    for all rows or one per row (stateful rules).  One `Sample` per row.

    Example:
        >>> from constrained import Grammar, compile_grammar
        >>> from constrained.models import LanguageModel
        >>> lm = LanguageModel.tiny(seed=0)
        >>> greedy = lambda masked, generator: int(masked.argmax())
        >>> yes_no = compile_grammar(Grammar.from_regex("(yes|no)!"), lm.vocab, cache_dir=None)
        >>> digits = compile_grammar(Grammar.from_regex("[0-9]{3}"), lm.vocab, cache_dir=None)
        >>> batch = lm.batch_session([list(b"Answer: "), list(b"Number: ")])
        >>> a, b = decode_batch(batch, [yes_no.matcher(), digits.matcher()], lm.eos_ids, greedy,
        ...                     max_tokens=8)
        >>> bytes(a.tokens) in (b"yes!", b"no!"), len(b.tokens)
        (True, 3)
    """
    if len(constraints) != len(source.logits()):
        raise ValueError(f"{len(constraints)} constraints for a batch of {len(source.logits())} rows")
    chooses = list(choose) if not callable(choose) else [choose] * len(constraints)
    if len(chooses) != len(constraints):
        raise ValueError(f"{len(chooses)} choosers for {len(constraints)} constraints")
    seqs = [SequenceStep(c, eos_ids, max_tokens, jump_forward=jump_forward, finish_within_budget=finish_within_budget)
            for c in constraints]
    while any(s.result is None for s in seqs):
        rows = [s.feed() for s in seqs]
        if any(rows):
            source.extend(rows)
        logits = source.logits()
        for i, s in enumerate(seqs):
            s.choose(logits[i], chooses[i], generator)
    return [s.result for s in seqs]  # type: ignore[misc]  # every row has stopped: no result is None
