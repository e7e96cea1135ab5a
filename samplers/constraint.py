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
