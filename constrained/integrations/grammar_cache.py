"""`GrammarCache`: compiled grammars of one vocabulary, shared by every request of a server.

A serving engine sees the same schema again and again (one tool set, one response
format per application).  The cache keys a `CompiledGrammar` by `ConstraintSpec.key`
(kind, source and options), keeps the most recently used ``size`` of them, and also
remembers failures, so a schema that timed out or was refused fails the next request
at once instead of stalling the engine again.  Thread-safe: vLLM compiles grammars
on a thread pool.  Requests that miss on a spec while it is being compiled wait for
that compile (one in-flight event per key) instead of compiling it again, each at
most its own ``timeout``.  With ``warm_up=True`` a background thread builds what every
request over the vocabulary shares (`constrained.warm_up`: the trie and compiled
walk, the value checks' token classes, the format automata) as the server starts;
requests compiled meanwhile are correct, only not yet faster (the caches are
thread-safe).

Example:
    >>> from constrained import TokenVocabulary
    >>> from constrained.integrations.spec import ConstraintSpec
    >>> vocab = TokenVocabulary.from_token_bytes([b"a", b"b", b""], eos_ids=[2])
    >>> cache = GrammarCache(vocab, cache_dir=None)
    >>> spec = ConstraintSpec.from_request({"regex": "a+b"})
    >>> cache.get(spec) is cache.get(spec), cache.stats()
    (True, {'hits': 1, 'misses': 1, 'failures': 0, 'size': 1})
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

from constrained.errors import CompileTimeoutError
from constrained.integrations.spec import ConstraintSpec

__all__ = ["DEFAULT_CACHE_SIZE", "GrammarCache"]

#: Compiled grammars kept per vocabulary (least recently used dropped first).
DEFAULT_CACHE_SIZE = 256

_DEFAULT: Any = object()


class GrammarCache:
    """`get(spec)` -> the spec's `CompiledGrammar` for ``vocab``, compiled once."""

    def __init__(self, vocab, *, size: int = DEFAULT_CACHE_SIZE, cache_dir: str | Path | None = _DEFAULT,
                 warm_up: bool = False) -> None:
        self.vocab = vocab
        self.size = size
        self._cache_dir = cache_dir
        self._entries: OrderedDict[str, Any] = OrderedDict()   # key -> CompiledGrammar or the exception
        self._in_flight: dict[str, threading.Event] = {}        # key -> set once its compile is over
        self._lock = threading.Lock()
        self._hits = self._misses = self._failures = 0
        self.warmed: threading.Event = threading.Event()     # set once the warm-up is over (or not asked)
        if warm_up:
            threading.Thread(target=self._warm_up, name="constrained-warm-up", daemon=True).start()
        else:
            self.warmed.set()

    def _warm_up(self) -> None:
        from constrained.warmup import warm_up

        try:
            if self._cache_dir is _DEFAULT:
                warm_up(self.vocab)
            else:
                warm_up(self.vocab, cache_dir=self._cache_dir)
        finally:
            self.warmed.set()

    def get(self, spec: ConstraintSpec):
        """The compiled grammar, or the spec's compile error raised again (a typed
        `ConstrainedError`: bad schema, compile limit or timeout).

        A spec being compiled by another thread is waited for, not compiled again (a hit
        once it is there); a wait longer than ``spec.timeout`` raises
        `CompileTimeoutError`.  Should that compile end without an entry (an exception
        that is no `ConstrainedError`, or the entry already dropped), a waiter compiles
        it itself."""
        key = spec.key
        while True:
            with self._lock:
                hit = self._entries.get(key)
                if hit is not None:
                    self._entries.move_to_end(key)
                    self._hits += 1
                    break
                waiting_for = self._in_flight.get(key)
                pending = waiting_for or threading.Event()
                mine = waiting_for is None
                if mine:
                    self._in_flight[key] = pending
            if mine:
                hit = self._compile_entry(key, spec, pending)
                break
            if not pending.wait(spec.timeout):
                raise CompileTimeoutError(f"waiting for the same spec's compile in another thread took longer "
                                          f"than {spec.timeout} s", limit="compile_timeout",
                                          value=spec.timeout or 0.0)
        if isinstance(hit, BaseException):
            raise hit
        return hit

    def _compile_entry(self, key: str, spec: ConstraintSpec, pending: threading.Event):
        """Compile ``spec`` as the one thread in flight for ``key``, store the outcome, and
        wake the threads waiting for it (also when the compile raised)."""
        try:
            hit = self._compile(spec)
            with self._lock:
                self._misses += 1
                self._entries[key] = hit
                self._entries.move_to_end(key)
                while len(self._entries) > self.size:
                    self._entries.popitem(last=False)
            return hit
        finally:
            with self._lock:
                del self._in_flight[key]
            pending.set()

    def _compile(self, spec: ConstraintSpec):
        from constrained.engine.compiled import compile_grammar
        from constrained.errors import ConstrainedError

        kwargs: dict[str, Any] = {} if self._cache_dir is _DEFAULT else {"cache_dir": self._cache_dir}
        try:
            return compile_grammar(spec.grammar(), self.vocab, timeout=spec.timeout, **kwargs)
        except ConstrainedError as e:
            with self._lock:
                self._failures += 1
            return e

    def stats(self) -> dict[str, int]:
        """Hits, misses, failures (compiles that raised) and entries held."""
        with self._lock:
            return {"hits": self._hits, "misses": self._misses, "failures": self._failures,
                    "size": len(self._entries)}
