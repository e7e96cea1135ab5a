"""`Constraint`: the one interface every sampler consumes."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

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

    def fork(self) -> "Constraint": ...

    def rollback(self, n: int = 1) -> None: ...

    def is_accepting(self) -> bool: ...


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

    def fork(self) -> "Unconstrained":
        return self

    def rollback(self, n: int = 1) -> None:
        pass

    def is_accepting(self) -> bool:
        return True
