"""`PredicateConstraint`: a constraint written as plain Python predicates over the text.

Some constraints no grammar expresses (an arithmetic expression that evaluates to
a given number, a sentence with no repeated word, ...).  Give two predicates over
the text generated so far:

* ``prefix_ok(text) -> bool``: can ``text`` still be extended into an acceptable
  output?  (It must be true of every prefix of an acceptable output; the sharper it
  is, the earlier bad tokens are refused.)
* ``complete_ok(text) -> bool``: may the output end here (EOS allowed)?

and it becomes a `samplers.constraint.Constraint`: ``allows(t)`` runs the predicate
on the text with token ``t`` appended (cached per text), so rejection samplers
(`samplers.awrs`, `samplers.smc` with ``proposal="awrs"``) only check the tokens
they draw.  ``mask()`` works too but checks every token of the vocabulary (one
predicate call each): fine for small vocabularies, slow for real ones.

Texts are decoded as UTF-8; a token that ends inside a character is checked on the
text up to the last complete character (bytes that can never become UTF-8 are refused).

Example:
    >>> from constrained import TokenVocabulary
    >>> vocab = TokenVocabulary.from_token_bytes([b"1", b"2", b"+", b""], eos_ids=[3])
    >>> c = PredicateConstraint(vocab, prefix_ok=lambda s: "++" not in s and not s.startswith("+"),
    ...                         complete_ok=lambda s: s[-1:].isdigit() and eval(s) == 3)
    >>> [c.allows(t) for t in range(4)]
    [True, True, False, False]
    >>> c.advance(0), c.advance(2), c.advance(1), c.is_accepting()
    (True, True, True, True)
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from constrained.masks import pack_mask


def _decoded(data: bytes) -> str | None:
    """``data`` as text, without a trailing incomplete character; None if not UTF-8."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        if e.reason == "unexpected end of data" and e.end == len(data):
            return data[:e.start].decode("utf-8")      # valid up to the first error
        return None


class PredicateConstraint:
    """A constraint from ``prefix_ok`` / ``complete_ok`` predicates (see the module docstring)."""

    def __init__(self, vocab, prefix_ok: Callable[[str], bool], complete_ok: Callable[[str], bool], *,
                 _state=None) -> None:
        self.vocab = vocab
        self.prefix_ok = prefix_ok
        self.complete_ok = complete_ok
        self._eos = frozenset(int(t) for t in vocab.eos_ids)
        self._texts: list[bytes]
        self.tokens: list[int]
        self._cache: dict[bytes, bool]
        if _state is not None:
            self._texts, self.tokens, self._cache, self._terminated = _state
        else:
            self._texts = [b""]
            self.tokens = []
            self._cache = {}
            self._terminated = False

    @property
    def text(self) -> str:
        return _decoded(self._texts[-1]) or ""

    def _viable(self, data: bytes) -> bool:
        hit = self._cache.get(data)
        if hit is None:
            text = _decoded(data)
            hit = self._cache[data] = text is not None and bool(self.prefix_ok(text))
        return hit

    def is_accepting(self) -> bool:
        if self._terminated:
            return False
        text = _decoded(self._texts[-1])
        return text is not None and text.encode() == self._texts[-1] and bool(self.complete_ok(text))

    def allows(self, token: int) -> bool:
        if self._terminated or not 0 <= token < len(self.vocab):
            return False
        if token in self._eos:
            return self.is_accepting()
        piece = self.vocab.token_bytes[token]
        return bool(piece) and self._viable(self._texts[-1] + piece)

    def mask(self) -> np.ndarray:
        """Every token checked (see the module docstring: slow for large vocabularies)."""
        return pack_mask(np.array([self.allows(t) for t in range(len(self.vocab))], dtype=bool))

    def advance(self, token: int) -> bool:
        if not self.allows(token):
            return False
        if token in self._eos:
            self._terminated = True
            self._texts.append(self._texts[-1])
        else:
            self._texts.append(self._texts[-1] + self.vocab.token_bytes[token])
        self.tokens.append(token)
        return True

    def fork(self) -> PredicateConstraint:
        return PredicateConstraint(self.vocab, self.prefix_ok, self.complete_ok,
                                   _state=(list(self._texts), list(self.tokens), self._cache, self._terminated))

    def rollback(self, n: int = 1) -> None:
        if n < 0 or n > len(self.tokens):
            raise ValueError(f"cannot roll back {n} tokens: only {len(self.tokens)} were accepted")
        if n:
            del self._texts[-n:]
            del self.tokens[-n:]
            self._terminated = False
