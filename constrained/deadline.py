"""Compile deadlines: every compile ends within its time limit, compiled or with a typed error.

A server compiles whatever schema a request brings; one schema must not stall it.
`compile_deadline(seconds)` opens a deadline for the work done inside it (nested
deadlines keep the earlier one); long-running compile loops call `check_deadline`,
which raises `CompileTimeoutError` naming what was being compiled once the time is up.
Nothing partially built is cached: the compiler's work of that call is dropped,
automata caches only keep finished automata, and a lazily built terminal stays unbuilt.

`DEFAULT_COMPILE_TIMEOUT` is the limit of `Grammar.from_*`, `compile_grammar` and of
building a terminal's automaton on first use, unless a caller passes ``timeout=``
(``None``: no limit).  Grammar front ends name the rule and line being compiled
(``rule=``, ``line=``: the error's ``rule`` and ``line``).

Third-party code that cannot call `check_deadline` (lark's grammar loader) runs inside
`interrupt_at_deadline`: when the deadline passes while it runs, an exception is raised
in that thread asynchronously (CPython's ``PyThreadState_SetAsyncExc``, delivered
between two bytecodes of pure-Python code) and becomes `CompileTimeoutError`.

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

import ctypes
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar, Token

from constrained.errors import CompileTimeoutError, InvalidTimeoutError

__all__ = ["DEFAULT_COMPILE_TIMEOUT", "check_deadline", "compile_deadline", "enter_deadline", "exit_deadline",
           "interrupt_at_deadline", "passed", "remaining", "timeout_error"]

DEFAULT_COMPILE_TIMEOUT = 30.0        # seconds; a server can pass less

# (monotonic time at which the deadline passes, the configured seconds)
_active: ContextVar[tuple[float, float] | None] = ContextVar("constrained_compile_deadline", default=None)


@contextmanager
def compile_deadline(timeout: float | None) -> Iterator[None]:
    """Work inside must end within ``timeout`` seconds (None: no limit of its own); any
    other ``timeout`` than None or a number >= 0 raises `InvalidTimeoutError`."""
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                or not timeout >= 0):
        raise InvalidTimeoutError(f"timeout must be None or a number of seconds >= 0, not {timeout!r}")
    token = enter_deadline(timeout)
    try:
        yield
    finally:
        exit_deadline(token)


def enter_deadline(timeout: float | None) -> Token | None:
    """`compile_deadline` without a context manager, for hot paths (about a tenth of its
    cost): open a deadline ``timeout`` seconds from now unless an earlier one is open
    (``timeout`` is not validated); pass the result to `exit_deadline` in a ``finally``."""
    if timeout is None:
        return None
    deadline = time.monotonic() + timeout
    outer = _active.get()
    if outer is not None and outer[0] <= deadline:
        return None
    return _active.set((deadline, timeout))


def exit_deadline(token: Token | None) -> None:
    """Close what `enter_deadline` opened."""
    if token is not None:
        _active.reset(token)


def remaining() -> float | None:
    """Seconds left before the innermost deadline (0 once passed); None without one."""
    active = _active.get()
    return None if active is None else max(0.0, active[0] - time.monotonic())


def passed() -> bool:
    """Whether a deadline is open and has passed (for loops that say what they were doing
    only when they raise: ``if passed(): raise timeout_error(what=...)``)."""
    active = _active.get()
    return active is not None and time.monotonic() > active[0]


def check_deadline(*, keyword: str | None = None, pointer: str | None = None, terminal: str | None = None,
                   rule: str | None = None, line: int | None = None, what: str | None = None) -> None:
    """Raise `CompileTimeoutError` if the innermost deadline has passed.

    ``keyword``/``pointer`` (a JSON Schema's), ``terminal``, or ``rule``/``line`` (a
    grammar's) say what was being compiled; ``what`` says more in the message."""
    if passed():
        raise timeout_error(keyword=keyword, pointer=pointer, terminal=terminal, rule=rule, line=line, what=what)


def timeout_error(*, keyword: str | None = None, pointer: str | None = None, terminal: str | None = None,
                  rule: str | None = None, line: int | None = None, what: str | None = None) -> CompileTimeoutError:
    """The `CompileTimeoutError` of the innermost deadline, naming where (a grammar's
    ``rule`` and ``line`` are the error's ``rule`` and ``line``); ``what`` says more in
    the message (e.g. ``"in lark's grammar loader"``)."""
    active = _active.get()
    seconds = 0.0 if active is None else active[1]
    message = f"compiling took longer than {seconds} s" + (f" ({what})" if what else "")
    return CompileTimeoutError(message, limit="compile_timeout", value=seconds, keyword=keyword,
                               pointer=pointer, terminal=terminal, rule=rule, line=line)


class _DeadlinePassed(BaseException):
    """Raised asynchronously in a thread running third-party code past its deadline (a
    BaseException, so the code's own ``except Exception`` handlers let it through)."""


_REFIRE_SECONDS = 0.05   # an interrupt not delivered (lost in a gc callback) is raised again after this

_set_async_exc = getattr(getattr(ctypes, "pythonapi", None), "PyThreadState_SetAsyncExc", None)


@contextmanager
def interrupt_at_deadline(**where) -> Iterator[None]:
    """Bound code that cannot call `check_deadline` (a third-party loader) by the innermost
    deadline: past it, the code is interrupted and `CompileTimeoutError` (naming
    ``where``, the arguments of `timeout_error`) is raised.  Without a deadline, or on a
    Python without ``PyThreadState_SetAsyncExc``, the code runs unbounded and the
    deadline is checked when it returns.

    A timer thread raises `_DeadlinePassed` in this thread when the time is up, and again
    every `_REFIRE_SECONDS` while the block runs (an exception delivered inside a gc
    callback, e.g. hypothesis's, is ignored by the interpreter and lost); leaving the
    block first disarms it, under a lock, and withdraws an exception raised but not yet
    delivered, so nothing reaches code after the block.

    >>> with compile_deadline(0.05), interrupt_at_deadline(what="in a loop"):
    ...     while True:
    ...         pass
    Traceback (most recent call last):
    ...
    constrained.errors.CompileTimeoutError: compiling took longer than 0.05 s (in a loop) (limit compile_timeout=0.05)
    """
    left = remaining()
    if left is None or _set_async_exc is None:
        yield
        check_deadline(**{k: v for k, v in where.items() if k != "what"})
        return
    thread = ctypes.c_ulong(threading.get_ident())
    lock = threading.Lock()
    state: dict = {"done": False, "fired": False, "timer": None}

    def arm(seconds: float) -> None:
        timer = threading.Timer(seconds, fire)
        timer.daemon = True
        state["timer"] = timer
        timer.start()

    def fire() -> None:
        with lock:
            if not state["done"]:
                state["fired"] = True
                _set_async_exc(thread, ctypes.py_object(_DeadlinePassed))
                # delivered inside a callback whose exceptions the interpreter ignores (a
                # gc callback, a __del__), the exception is lost: raise it again until the
                # block is left
                arm(_REFIRE_SECONDS)

    def disarm() -> None:
        while True:
            try:
                with lock:
                    state["done"] = True             # no more firing
                    if state["fired"]:
                        _set_async_exc(thread, None)     # raised but not delivered yet: withdraw it
                    state["timer"].cancel()
                return
            except _DeadlinePassed:                  # delivered while disarming: again, now disarmed
                continue

    try:
        with lock:
            arm(left)
        try:
            yield
        finally:
            disarm()
    except _DeadlinePassed:
        disarm()
        raise timeout_error(**where) from None
    if state["fired"]:
        raise timeout_error(**where)
