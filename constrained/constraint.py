"""The constraint interface and the sample type: what decoders and samplers share.

This module is the one place both sides of the project import for their common
types, so neither imports the other for them:

* `constrained.decoding`, `constrained.speculative` and `constrained.models`
  (the decoders) import it;
* `samplers` imports it (``samplers.Constraint``, ``samplers.Sample`` and
  ``samplers.LogitsSource`` are these classes, re-exported).

It imports nothing of either package (numpy only).  The layering it allows, which
``tests/test_lint.py`` checks on the import graph: the constrained core
(engine, grammars, masks, decoding, models) never imports `samplers`; `samplers`
imports only that core; the front doors (`constrained.app`, `constrained.cli`,
`constrained.speculative`, `constrained.bench`) may use both.

Protocols (all runtime-checkable, so code asks ``isinstance(c, SupportsCompletion)``
instead of probing attribute names):

* `Constraint`: mask / allows / advance / fork / rollback / is_accepting, what
  every sampler consumes (a grammar `constrained.Matcher`, a
  `samplers.PredicateConstraint`, `Unconstrained`, user code);
* `SupportsForcedTokens`: ``forced_tokens()``, the tokens every continuation
  starts with (jump-forward: `decode_loop(jump_forward=True)`, the
  speculative `ForcedDrafter`);
* `SupportsCompletion`: ``shortest_completion()`` and ``completion_tokens()``
  (`decode_loop(finish_within_budget=True)`, the serving budget guard);
* `LogitsSource`: next-token logits of a growing prefix (a model session).

Example:
    >>> from constrained import Grammar, TokenVocabulary, compile_grammar
    >>> vocab = TokenVocabulary.from_token_bytes([b"a", b"b", b""], eos_ids=[2])
    >>> m = compile_grammar(Grammar.from_regex("ab"), vocab, cache_dir=None).matcher()
    >>> isinstance(m, Constraint), isinstance(m, SupportsForcedTokens), isinstance(m, SupportsCompletion)
    (True, True, True)
    >>> u = Unconstrained(3)
    >>> isinstance(u, Constraint), isinstance(u, SupportsForcedTokens)
    (True, False)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Constraint(Protocol):
    """What a sampler needs from a constraint (a grammar `Matcher` or user code).

    * ``mask()``: packed int32 bitmask of the allowed next tokens (bit ``t % 32``
      of word ``t // 32``); EOS bits set iff the output so far is complete;
    * ``allows(t)``: exact check of one token (cheap: rejection samplers call it
      instead of computing a mask);
    * ``advance(t)``: read a token; False (and no change) if it is not allowed;
    * ``fork()``: an independent copy (beams and particles);
    * ``rollback(n)``: undo the last ``n`` tokens (speculative verification);
    * ``is_accepting()``: whether EOS is allowed now.
    """

    def mask(self) -> np.ndarray: ...

    def allows(self, token: int) -> bool: ...

    def advance(self, token: int) -> bool: ...

    def fork(self) -> Constraint: ...

    def rollback(self, n: int = 1) -> None: ...

    def is_accepting(self) -> bool: ...


@runtime_checkable
class SupportsForcedTokens(Protocol):
    """A constraint that knows the tokens it forces next (jump-forward).

    ``forced_tokens()``: the canonical tokenization of the bytes every allowed
    continuation starts with (possibly empty); reading them in turn is allowed
    unless a value check refuses one (the caller advances and stops at a refusal).
    """

    def forced_tokens(self) -> list[int]: ...


@runtime_checkable
class SupportsCompletion(Protocol):
    """A constraint that can name a way to finish (budget-aware decoding).

    * ``shortest_completion()``: the fewest bytes after which the output is complete
      (None: none found within the search limits);
    * ``completion_tokens(data=None)``: tokens spelling ``data`` (by default the
      shortest completion) that the constraint accepts in turn (None: no such
      tokenization).
    """

    def shortest_completion(self) -> bytes | None: ...

    def completion_tokens(self, data: bytes | None = None) -> list[int] | None: ...


@runtime_checkable
class LogitsSource(Protocol):
    """Next-token logits for a growing prefix."""

    def logits(self) -> Any:
        """Float logits (torch, 1-D, the model's full width) for the current prefix."""

    def extend(self, tokens: list[int]) -> None:
        """Append tokens to the prefix."""

    def fork(self) -> LogitsSource:
        """An independent copy."""


@dataclass
class Sample:
    """One output: its tokens (EOS excluded), the model's log-probability of them
    (unconstrained, temperature 1), and why it stopped: ``"eos"`` (the constraint
    accepted and EOS was chosen), ``"max_tokens"`` or ``"dead_end"`` (nothing allowed)."""

    tokens: list[int]
    logprob: float = 0.0
    stop: str = "eos"
    forced: int = 0                  # tokens appended by jump-forward, not sampled
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def finished(self) -> bool:
        return self.stop == "eos"


class Unconstrained:
    """The constraint that allows everything (baselines): every token, EOS at any point.

    Example:
        >>> c = Unconstrained(40)
        >>> int(c.mask()[0]), c.allows(39), c.is_accepting()
        (-1, True, True)
    """

    def __init__(self, vocab_size: int) -> None:
        self._mask = np.full((vocab_size + 31) // 32, -1, dtype=np.int32)
        if vocab_size % 32:
            self._mask[-1] = np.int32((1 << (vocab_size % 32)) - 1)

    def mask(self) -> np.ndarray:
        return self._mask

    def allows(self, token: int) -> bool:
        return 0 <= token < 32 * len(self._mask) and bool((int(self._mask[token >> 5]) >> (token & 31)) & 1)

    def advance(self, token: int) -> bool:
        return self.allows(token)

    def fork(self) -> Unconstrained:
        return self

    def rollback(self, n: int = 1) -> None:
        pass

    def is_accepting(self) -> bool:
        return True
