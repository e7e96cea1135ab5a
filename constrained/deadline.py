"""Compile deadlines: every compile ends within its time limit, compiled or with a typed error.

A server compiles whatever schema a request brings; one schema must not stall it.
`compile_deadline(seconds)` opens a deadline for the work done inside it (nested
deadlines keep the earlier one); long-running compile loops call `check_deadline`,
which raises `CompileTimeoutError` naming what was being compiled once the time is up.
Nothing partially built is cached: the compiler's work of that call is dropped,
automata caches only keep finished automata, and a lazily built terminal stays unbuilt.

`DEFAULT_COMPILE_TIMEOUT` is the limit of `Grammar.from_*`, `compile_grammar` and of
building a terminal's automaton on first use, unless a caller passes ``timeout=``
(``None``: no limit).

Example:
    >>> import time
    >>> with compile_deadline(0.0):
    ...     time.sleep(0.001)
    ...     check_deadline(pointer="/properties/a")
    Traceback (most recent call last):
    ...
    constrained.errors.CompileTimeoutError: compiling took longer than 0.0 s (limit compile_timeout=0.0, at #/properties/a)
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from constrained.errors import CompileTimeoutError

__all__ = ["DEFAULT_COMPILE_TIMEOUT", "check_deadline", "compile_deadline"]

DEFAULT_COMPILE_TIMEOUT = 30.0        # seconds; a server can pass less

# (monotonic time at which the deadline passes, the configured seconds)
_active: ContextVar[tuple[float, float] | None] = ContextVar("constrained_compile_deadline", default=None)


@contextmanager
def compile_deadline(timeout: float | None) -> Iterator[None]:
    """Work inside must end within ``timeout`` seconds (None: no limit of its own)."""
    if timeout is not None and not timeout >= 0:
        raise ValueError(f"timeout must be None or a number of seconds >= 0, not {timeout!r}")
    outer = _active.get()
    if timeout is None:
        yield
        return
    mine = (time.monotonic() + timeout, timeout)
    token = _active.set(mine if outer is None or mine[0] < outer[0] else outer)
    try:
        yield
    finally:
        _active.reset(token)


def check_deadline(*, keyword: str | None = None, pointer: str | None = None, terminal: str | None = None) -> None:
    """Raise `CompileTimeoutError` if the innermost deadline has passed."""
    active = _active.get()
    if active is not None and time.monotonic() > active[0]:
        raise CompileTimeoutError(f"compiling took longer than {active[1]} s", limit="compile_timeout",
                                  value=active[1], keyword=keyword, pointer=pointer, terminal=terminal)
