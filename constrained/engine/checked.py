"""`CheckedMatcher`: a grammar matcher plus value-level checks on the text.

Some constraints are a context-free grammar *and* predicates on completed
values (the JSON Schema compiler's `JsonValueChecks`: ``uniqueItems``,
overlapping ``oneOf``, ``not``, ...).  The grammar gives the mask; the checks
follow the bytes produced and veto the tokens that would complete a value
failing its predicate.  Any object with this protocol (typed as
`constrained.grammar.checks.ValueChecks` and its optional capabilities) can be a
grammar's ``checks``:

* ``start() -> state`` (immutable, shared by forks);
* ``step(state, text, data) -> state | None``: ``data`` follows ``text`` (bytes or
  the matcher's own bytearray, read but never kept); None if it completes a value
  that fails its check, or makes one that can no longer pass (a prefix check);
* ``accepts_end(state, text) -> bool``: whether the complete ``text`` passes;
* ``candidates(state, mask, vocab, key[, text]) -> token ids``: the tokens of ``mask``
  whose bytes may complete a checked value or meet a prefix check (the only ones
  `mask` simulates; ``key`` is the grammar state id that identifies ``mask``, for
  memoising; ``text``, if the method takes it, the bytes so far);
* ``content_hash() -> str``.

Each optional capability is a `typing.Protocol` in `constrained.grammar.checks`
(`SupportsRefusal`, `SupportsWitnesses`, `SupportsFailure`, `SupportsPadding`,
`SupportsDeficit`, `SupportsBlankInsignificance`), and the engine asks for it with
``isinstance``:

* optionally ``refused(state, text, ids, vocab) -> token ids`` (a list or an int
  array): the tokens of ``ids`` (candidates) that ``step`` refuses after ``text``,
  where the checks know cheaper ways than one ``step`` per token (`JsonValueChecks`
  simulates one token per class of tokens that differ only in blanks outside strings,
  and counts the characters plain content adds to a string under its maxLength);
* optionally ``witnesses() -> tuple[bytes, ...]``: text the checks are likely to
  accept where the grammar reads free content (JSON-escaped string contents); the
  search for a completion that passes the checks writes them whole
  (`constrained.engine.completion.checked_completion`).  `JsonValueChecks` gets
  them from its schema document (`constrained.json_schema.witnesses`);
* optionally ``failure(state, text, data)``: where ``data`` first fails a check (an
  object with ``keyword``, ``pointer``, ``offset``, ``value_start``), so the search
  rewrites that value only; ``blank_is_insignificant(state)``: whether a blank there
  is whitespace between tokens, which the search then skips; ``pad(state, text, data,
  failure)``: ``data`` with the array a ``minItems`` failure names grown by copies of
  its last element (hundreds of elements: past a byte-wise search's budget).

Example:
    >>> from constrained import Grammar, TokenVocabulary, compile_grammar
    >>> vocab = TokenVocabulary.from_token_bytes([b"[", b"]", b'"a"', b'"b"', b",", b""], eos_ids=[5])
    >>> g = Grammar.from_json_schema({"type": "array", "items": {"type": "string"}, "uniqueItems": True},
    ...                              whitespace="compact")
    >>> m = compile_grammar(g, vocab, cache_dir=None).matcher()
    >>> m.advance_many([0, 2, 4])         # '["a",'
    3
    >>> m.allows(2), m.allows(3)          # a second "a" is refused as it completes, "b" is not
    (False, True)
"""

from __future__ import annotations

import numpy as np

from constrained.engine.matcher import Matcher
from constrained.grammar.checks import SupportsRefusal, SupportsWitnesses
from constrained.masks import set_token_bits


class CheckedMatcher(Matcher):
    """A `Matcher` whose grammar carries value-level checks (same API; see the module docstring)."""

    __slots__ = ("_checks", "_cstates", "_lens", "_text", "_token_bytes")

    def __init__(self, compiled, *, _history=None, _tokens=None, _terminated: bool = False,
                 _cstates=None, _text: bytearray | None = None, _lens: list[int] | None = None) -> None:
        super().__init__(compiled, _history=_history, _tokens=_tokens, _terminated=_terminated)
        self._checks = compiled.checks
        self._token_bytes = compiled.vocab.token_bytes
        self._cstates = _cstates if _cstates is not None else [self._checks.start()]
        self._text = _text if _text is not None else bytearray()
        self._lens = _lens if _lens is not None else [0]

    @property
    def text(self) -> bytes:
        """The bytes produced so far."""
        return bytes(self._text)

    def is_accepting(self) -> bool:
        return super().is_accepting() and self._checks.accepts_end(self._cstates[-1], self._text)

    def mask(self) -> np.ndarray:
        m = super().mask()
        state = self._cstates[-1]
        out = None
        if _TAKES_TEXT.get(type(self._checks)) or _takes_text(self._checks):
            cands = self._checks.candidates(state, m, self._compiled.vocab, self.state_id, text=self._text)
        else:                                  # checks of the older protocol (no ``text``)
            cands = self._checks.candidates(state, m, self._compiled.vocab, self.state_id)
        if cands.size:
            if _refuses(self._checks):          # the checks simulate each class of tokens once
                drop = self._checks.refused(state, self._text, cands, self._compiled.vocab)
            else:
                text, tb = self._text, self._token_bytes
                drop = [t for t in cands.tolist() if self._checks.step(state, text, tb[t]) is None]
            if len(drop):
                out = m.copy()
                set_token_bits(out, drop, False)
        if super().is_accepting() and not self._checks.accepts_end(state, self._text):
            if out is None:
                out = m.copy()
            set_token_bits(out, self._eos, False)
        return m if out is None else out

    def allows(self, token: int) -> bool:
        if token in self._eos:
            return self.is_accepting()
        if not super().allows(token):
            return False
        return self._checks.step(self._cstates[-1], self._text, self._token_bytes[token]) is not None

    def advance(self, token: int) -> bool:
        if token in self._eos:
            if not self.is_accepting():
                return False
            super().advance(token)
            self._cstates.append(self._cstates[-1])
            self._lens.append(len(self._text))
            return True
        if not super().advance(token):
            return False
        data = self._token_bytes[token]
        nxt = self._checks.step(self._cstates[-1], self._text, data)
        if nxt is None:
            Matcher.rollback(self, 1)
            return False
        self._cstates.append(nxt)
        self._text += data
        self._lens.append(len(self._text))
        return True

    def allows_bytes(self, data: bytes) -> bool:
        return super().allows_bytes(data) and \
            self._checks.step(self._cstates[-1], self._text, data) is not None

    def fork(self) -> CheckedMatcher:
        return CheckedMatcher(self._compiled, _history=list(self._history), _tokens=list(self._tokens),
                              _terminated=self._terminated, _cstates=list(self._cstates),
                              _text=bytearray(self._text), _lens=list(self._lens))

    def rollback(self, n: int = 1) -> None:
        super().rollback(n)
        if n:
            del self._cstates[-n:]
            del self._lens[-n:]
            del self._text[self._lens[-1]:]

    def shortest_completion(self, *, strict: bool = False) -> bytes | None:
        """The fewest bytes after which the output is complete *and* passes every value
        check (see `constrained.engine.completion.checked_completion`); None if there is
        none.  The search through the checks is bounded: where it gives up without proving
        that none exists, ``strict=True`` raises `CompletionSearchError` naming the check
        it could not satisfy (keyword and schema pointer) instead of returning None."""
        from constrained.engine.completion import checked_completion

        if self._terminated:
            return None
        return checked_completion(self._rec, self._history[-1], self._checks, self._cstates[-1], bytes(self._text),
                                  witnesses=witnesses_of(self._checks), strict=strict)

    def forced_tokens(self) -> list[int]:
        """Forced tokens of the grammar, cut before the first one a check refuses."""
        tokens = super().forced_tokens()
        state, text = self._cstates[-1], bytes(self._text)
        for i, t in enumerate(tokens):
            data = self._token_bytes[t]
            state = self._checks.step(state, text, data)
            if state is None:
                return tokens[:i]
            text += data
        return tokens


_WITNESSES: dict[str, tuple[bytes, ...]] = {}


_TAKES_TEXT: dict[type, bool] = {}


def _takes_text(checks) -> bool:
    """Whether ``checks.candidates`` takes the ``text`` keyword (the bytes so far);
    remembered per class in ``_TAKES_TEXT``."""
    import inspect

    hit = _TAKES_TEXT.get(type(checks))
    if hit is not None:
        return hit
    fn = type(checks).candidates
    hit = getattr(fn, "_takes_text", None)
    if hit is None:
        try:
            hit = "text" in inspect.signature(fn).parameters
        except (TypeError, ValueError):   # pragma: no cover
            hit = False
        try:
            fn._takes_text = hit
        except AttributeError:            # pragma: no cover
            pass
    _TAKES_TEXT[type(checks)] = hit
    return hit


_REFUSES: dict[type, bool] = {}


def _refuses(checks) -> bool:
    """Whether ``checks`` are `SupportsRefusal` (memoised per class: a protocol check
    costs microseconds, and `CheckedMatcher.mask` asks at every step)."""
    hit = _REFUSES.get(type(checks))
    if hit is None:
        hit = _REFUSES[type(checks)] = isinstance(checks, SupportsRefusal)
    return hit


def witnesses_of(checks) -> tuple[bytes, ...]:
    """The checks' ``witnesses()`` (none if they have no such method), memoised per
    ``content_hash()``."""
    key = checks.content_hash()
    hit = _WITNESSES.get(key)
    if hit is None:
        hit = tuple(checks.witnesses()) if isinstance(checks, SupportsWitnesses) else ()
        if len(_WITNESSES) >= 256:
            _WITNESSES.clear()
        _WITNESSES[key] = hit
    return hit
