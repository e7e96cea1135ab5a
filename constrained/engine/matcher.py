"""`Matcher`: one sequence's position in a compiled grammar.

A matcher is a list of interned state ids (one per token read, plus the start),
so `fork` copies a list of ints and `rollback` pops; all heavy lifting
(transitions, masks) is memoised in the shared `Recognizer`.

Definitions used throughout (docs/engine.md, "The language"): the mask is
*exact*: token ``t`` is allowed iff the bytes so far followed by ``bytes(t)``
are a prefix of some string in the language; EOS tokens are allowed iff the
bytes so far are in the language.
"""

from __future__ import annotations

import numpy as np

from constrained.engine.recognizer import DEAD_STATE
from constrained.errors import MatcherError, MatcherTerminatedError


class Matcher:
    """Per-sequence state over a `CompiledGrammar`: mask, allows, advance, fork, rollback.

    Example:
        >>> from constrained import Grammar, TokenVocabulary, compile_grammar
        >>> vocab = TokenVocabulary.from_token_bytes([b"a", b"b", b"ab", b""], eos_ids=[3])
        >>> m = compile_grammar(Grammar.from_regex("(ab)+"), vocab, cache_dir=None).matcher()
        >>> m.advance(0), m.advance(0), m.advance(1), m.is_accepting()
        (True, False, True, True)
        >>> f = m.fork(); f.rollback(2); f.is_accepting(), m.is_accepting()
        (False, True)
    """

    __slots__ = ("_compiled", "_rec", "_eos", "_history", "_tokens", "_terminated")

    def __init__(self, compiled, *, _history: list[int] | None = None, _tokens: list[int] | None = None,
                 _terminated: bool = False) -> None:
        self._compiled = compiled
        self._rec = compiled.recognizer
        self._eos = compiled.eos_set
        self._history = _history if _history is not None else [self._rec.initial]
        self._tokens = _tokens if _tokens is not None else []
        self._terminated = _terminated

    # ------------------------------------------------------------------ reading
    @property
    def compiled(self):
        return self._compiled

    @property
    def tokens(self) -> tuple[int, ...]:
        """Tokens accepted so far (EOS included if accepted)."""
        return tuple(self._tokens)

    @property
    def state_id(self) -> int:
        """The interned state id (equal ids have equal futures)."""
        return self._history[-1]

    def is_terminated(self) -> bool:
        """True once an EOS token was accepted."""
        return self._terminated

    def is_accepting(self) -> bool:
        """Whether the output so far is complete (EOS may come now)."""
        return not self._terminated and self._rec.accepting(self._history[-1])

    def mask(self) -> np.ndarray:
        """Packed allowed-token bitmask: int32[ceil(V/32)], bit ``t % 32`` of word
        ``t // 32`` set iff token ``t`` is allowed.  Read-only and shared: copy it
        (or use `fill_mask`) before writing."""
        if self._terminated:
            raise MatcherTerminatedError("the matcher accepted EOS; no further tokens are allowed")
        return self._rec.mask(self._history[-1])

    def fill_mask(self, out: np.ndarray) -> None:
        """Write the mask into ``out`` (int32, at least `mask_words` long; the rest is zeroed)."""
        words = self._rec.nbytes // 4
        if type(self).mask is Matcher.mask and isinstance(out, np.ndarray) and out.dtype == np.int32 \
                and out.ndim == 1 and out.size >= words:
            self._mask_into(out[:words])
        else:
            m = self.mask()
            out[: m.size] = m
        out[words:] = 0

    def _mask_into(self, row: np.ndarray) -> None:
        """`mask` written into ``row`` (writable int32, exactly the mask's words), without a
        dense mask of its own where the recognizer keeps it compactly (`fill_masks`)."""
        if self._terminated:
            raise MatcherTerminatedError("the matcher accepted EOS; no further tokens are allowed")
        self._rec.mask_into(self._history[-1], row)

    def allows(self, token: int) -> bool:
        """Exact check of one token without computing a mask."""
        if self._terminated:
            return False
        sid = self._history[-1]
        if token in self._eos:
            return self._rec.accepting(sid)
        return self._rec.token_step(sid, token) != DEAD_STATE

    # ------------------------------------------------------------------ moving
    def advance(self, token: int) -> bool:
        """Read ``token``: True and the state moves, or False and nothing changes."""
        if self._terminated:
            return False
        sid = self._history[-1]
        if token in self._eos:
            if not self._rec.accepting(sid):
                return False
            self._terminated = True
            nxt = sid
        else:
            nxt = self._rec.token_step(sid, token)
            if nxt == DEAD_STATE:
                return False
        self._history.append(nxt)
        self._tokens.append(token)
        return True

    def advance_many(self, tokens) -> int:
        """Advance along ``tokens`` until one is refused; returns how many were read."""
        n = 0
        for t in tokens:
            if not self.advance(int(t)):
                break
            n += 1
        return n

    def allows_bytes(self, data: bytes) -> bool:
        """Whether ``data`` can follow the output so far (bytes, not tokens: nothing moves)."""
        return not self._terminated and self._rec.feed(self._history[-1], data) != DEAD_STATE

    def fork(self) -> Matcher:
        """An independent copy (O(number of tokens) ints)."""
        return Matcher(self._compiled, _history=list(self._history), _tokens=list(self._tokens),
                       _terminated=self._terminated)

    def rollback(self, n: int = 1) -> None:
        """Undo the last ``n`` accepted tokens (EOS included)."""
        if n < 0 or n > len(self._tokens):
            raise MatcherError(f"cannot roll back {n} tokens: only {len(self._tokens)} were accepted")
        if n:
            del self._history[-n:]
            del self._tokens[-n:]
            self._terminated = False

    def reset(self) -> None:
        """Back to the start of the language."""
        self.rollback(len(self._tokens))

    # ------------------------------------------------------------------ jump-forward
    def forced_bytes(self, limit: int = 4096) -> bytes:
        """Bytes every continuation must start with (empty if EOS is allowed or there is a choice)."""
        from constrained.engine.forced import forced_bytes

        if self._terminated:
            return b""
        return forced_bytes(self._rec, self._history[-1], limit)

    def shortest_completion(self) -> bytes | None:
        """The fewest bytes after which the output is complete (None: not found within
        the search limits; see `constrained.engine.completion`)."""
        from constrained.engine.completion import shortest_completion

        if self._terminated:
            return None
        return shortest_completion(self._rec, self._history[-1])

    def completion_tokens(self, data: bytes | None = None) -> list[int] | None:
        """Tokens spelling ``data`` (by default `shortest_completion`) that this matcher
        accepts in turn."""
        from constrained.engine.completion import completion_tokens

        data = self.shortest_completion() if data is None else data
        return None if data is None else completion_tokens(self, data)

    def forced_tokens(self) -> list[int]:
        """Tokens the constraint forces next, tokenized canonically (see `constrained.engine.forced`)."""
        from constrained.engine.forced import forced_tokens

        if self._terminated:
            return []
        return forced_tokens(self)
