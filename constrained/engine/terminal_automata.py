"""Terminal automata built when a state first reads them.

A JSON Schema compiles to hundreds of terminals (every key, pattern, bounded number,
the values of every ``anyOf`` branch); one response reads a fraction of them.  A
`TerminalAutomata` maps a terminal's index to its `ByteDFA` (None for terminals no
rule uses) and builds each one on first lookup, under a lock, so compiled grammars
stay shareable between threads; `Field` views (``transitions``, ``accepting``) are
plain dict lookups after the first one.

Example:
    >>> from constrained.automata.byte_dfa import compile_regex
    >>> dfas = TerminalAutomata(2, lambda i: compile_regex("[0-9]+") if i == 0 else None)
    >>> dfas.built(), dfas[0].matches(b"12"), dfas[1], dfas.built()
    (0, True, None, 2)
    >>> bool(Field(dfas, "accepting")[0][1])
    False
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from constrained.automata.byte_dfa import ByteDFA

__all__ = ["Field", "TerminalAutomata"]


class TerminalAutomata(dict):
    """Terminal index -> `ByteDFA` or None, each built by ``build(index)`` when first read."""

    def __init__(self, count: int, build: Callable[[int], ByteDFA | None]) -> None:
        super().__init__()
        self.count = count
        self._build = build
        self._lock = threading.Lock()

    def __missing__(self, index: int) -> ByteDFA | None:
        if not 0 <= index < self.count:
            raise KeyError(index)
        with self._lock:
            if index not in self:                 # another thread may have built it meanwhile
                dict.__setitem__(self, index, self._build(index))
            return dict.__getitem__(self, index)

    def add_built(self, index: int, dfa: ByteDFA | None) -> None:
        """Give terminal ``index`` the automaton ``dfa``, built elsewhere (several at
        once: `constrained.automata.byte_dfa.chain_dfas`), unless it has one already."""
        with self._lock:
            if index not in self:
                dict.__setitem__(self, index, dfa)

    def built(self) -> int:
        """How many terminals have been looked up so far."""
        return len(self)

    def build_all(self) -> None:
        """Build every terminal now (errors of bad terminals surface here)."""
        for index in range(self.count):
            self[index]


class Field(dict):
    """One attribute of every terminal's automaton (``transitions``, ``accepting``), by index."""

    def __init__(self, automata: TerminalAutomata, attribute: str) -> None:
        super().__init__()
        self._automata = automata
        self._attribute = attribute

    def __missing__(self, index: int) -> Any:
        dfa = self._automata[index]
        value = None if dfa is None else getattr(dfa, self._attribute)
        dict.__setitem__(self, index, value)
        return value
