"""`ValueChecks`: the protocol of value-level checks beside a grammar's rules.

A `Grammar` may carry ``checks`` (`Grammar.checks`): predicates on the text that
the rules alone do not express (the JSON Schema compiler's
`constrained.json_schema.value_checks.JsonValueChecks`: ``uniqueItems``,
overlapping ``oneOf``, ``not``, ...; `constrained.grammar.compose.SectionChecks`
for schemas embedded in a larger grammar).  The language is then the grammar's
strings that also pass the checks; `constrained.engine.checked.CheckedMatcher`
follows the bytes produced and vetoes the tokens that would make a value fail.

The required methods are `ValueChecks`; the optional ones, each its own
runtime-checkable protocol, help the completion search
(`constrained.engine.completion.checked_completion`) finish an output through the
checks.  States are opaque to the engine: immutable, hashable, shared by forks.

Example:
    >>> from constrained import Grammar
    >>> g = Grammar.from_json_schema({"type": "array", "uniqueItems": True})
    >>> isinstance(g.checks, ValueChecks), isinstance(g.checks, SupportsWitnesses)
    (True, True)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    import numpy as np

    from constrained.vocabulary import TokenVocabulary


@runtime_checkable
class ValueChecks(Protocol):
    """What `CheckedMatcher` needs from a grammar's ``checks``.

    * ``start() -> state``: the state before any byte;
    * ``step(state, text, data) -> state | None``: ``data`` follows ``text`` (bytes or
      the matcher's own bytearray, read but never kept); None if it completes a value
      that fails its check, or makes one that can no longer pass (a prefix check);
    * ``accepts_end(state, text) -> bool``: whether the complete ``text`` passes;
    * ``candidates(state, mask, vocab, key[, text]) -> token ids``: the tokens of
      ``mask`` whose bytes may complete a checked value or meet a prefix check (the
      only ones the mask simulates with `step`); ``key`` is the grammar state id that
      identifies ``mask``, for memoising; ``text``, the bytes so far (checks written
      before it existed may omit the parameter: `CheckedMatcher` then leaves it out);
    * ``content_hash() -> str``: identifies the checks in compiled-grammar cache keys.
    """

    def start(self) -> Any: ...

    def step(self, state: Any, text: bytes | bytearray, data: bytes) -> Any | None: ...

    def accepts_end(self, state: Any, text: bytes | bytearray) -> bool: ...

    def candidates(self, state: Any, mask: np.ndarray, vocab: TokenVocabulary, key: Any = None,
                   text: bytes | bytearray | None = None) -> np.ndarray: ...

    def content_hash(self) -> str: ...


@runtime_checkable
class SupportsWitnesses(Protocol):
    """``witnesses() -> tuple[bytes, ...]``: text the checks are likely to accept where
    the grammar reads free content (JSON-escaped string contents); the completion
    search writes them whole."""

    def witnesses(self) -> tuple[bytes, ...]: ...


@runtime_checkable
class SupportsFailure(Protocol):
    """``failure(state, text, data)``: where ``data`` first fails a check (an object with
    ``keyword``, ``pointer``, ``offset``, ``value_start``; None if it does not), so the
    completion search rewrites that value only."""

    def failure(self, state: Any, text: bytes | bytearray, data: bytes) -> Any | None: ...


@runtime_checkable
class SupportsDeficit(Protocol):
    """``deficit(state) -> int``: a lower bound on the bytes the open containers still
    need (``minProperties``, ``minItems``) that the grammar's completion does not count,
    a heuristic for the completion search."""

    def deficit(self, state: Any) -> int: ...


@runtime_checkable
class SupportsBlankInsignificance(Protocol):
    """``blank_is_insignificant(state) -> bool``: whether a blank at ``state`` is
    whitespace between tokens (outside every string), which the search then skips."""

    def blank_is_insignificant(self, state: Any) -> bool: ...


@runtime_checkable
class SupportsPadding(Protocol):
    """``pad(state, text, data, failure[, content]) -> bytes | None``: ``data`` (a
    completion of ``text``) with the value ``failure`` refuses for being too short grown
    until it passes (an array's ``minItems``, a string's ``minLength``, above what the
    grammar counts), or None; the completion search tries it where writing hundreds of
    elements or dozens of characters is past its budget.  ``content(offset)`` gives the
    units of string content the grammar takes back to its state at that offset of
    ``text + data`` (`constrained.engine.completion.content_bytes`), for a string to
    repeat."""

    def pad(self, state: Any, text: bytes, data: bytes, failure: Any,
            content: Callable[[int], Sequence[bytes]] | None = None) -> bytes | None: ...


@runtime_checkable
class SupportsRefusal(Protocol):
    """``refused(state, text, ids, vocab)``: the tokens of ``ids`` after which ``step``
    returns None (a list of ids or an int array: near a string's maxLength it is most of
    the vocabulary), computed as the checks see fit (e.g. one simulation per class of
    tokens that differ only in blanks); `CheckedMatcher` otherwise simulates every
    candidate with ``step``."""

    def refused(self, state: Any, text: bytes | bytearray, ids: np.ndarray,
                vocab: TokenVocabulary) -> Sequence[int] | np.ndarray: ...

