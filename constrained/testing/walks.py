"""Token walks that follow a compiled constraint's mask (shared by strategies and checks).

Example:
    >>> import random
    >>> from constrained import Grammar, TokenVocabulary, compile_grammar
    >>> from constrained.grammar.derivations import RandomChooser
    >>> vocab = TokenVocabulary.from_token_bytes([b"a", b"b", b""], eos_ids=[2])
    >>> compiled = compile_grammar(Grammar.from_regex("a+b"), vocab, cache_dir=None)
    >>> w = follow_mask(compiled, RandomChooser(random.Random(0)), max_tokens=10)
    >>> w.finished, w.text.endswith(b"b")
    (True, True)
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np

from constrained.masks import unpack_mask


class MaskInconsistency(AssertionError):
    """The mask allowed something the matcher then refused (an engine bug)."""


@dataclass(frozen=True)
class Walk:
    """A token path that followed the mask: ``tokens`` (EOS excluded), their bytes, and
    whether it ended by taking EOS (``finished``; else it stopped at ``max_tokens``)."""

    tokens: tuple[int, ...]
    text: bytes
    finished: bool


def follow_mask(compiled, chooser, *, max_tokens: int = 64, eos_p: float = 0.3) -> Walk:
    """One walk: at each step a token among the allowed ones (``chooser.choose``); where
    EOS is allowed it is taken unless ``chooser.more(1 - eos_p)`` (always at
    ``max_tokens``).  Raises `MaskInconsistency` if the matcher refuses what its
    mask allowed, or the mask allows EOS where the matcher is not accepting."""
    m = compiled.matcher()
    vocab = compiled.vocab
    eos = np.asarray(sorted(set(int(t) for t in vocab.eos_ids)), dtype=np.int64)
    tokens: list[int] = []
    text = bytearray()
    for step in range(max_tokens + 1):
        allowed = np.flatnonzero(unpack_mask(m.mask(), len(vocab)))
        is_eos = np.isin(allowed, eos)
        others = allowed[~is_eos]
        if is_eos.any() and (not others.size or step == max_tokens or not chooser.more(1 - eos_p)):
            if not m.is_accepting():
                raise MaskInconsistency(f"the mask allows EOS after {bytes(text)!r} (tokens {tokens}) but the "
                                        f"matcher is not accepting there (state {m.state_id})")
            return Walk(tuple(tokens), bytes(text), True)
        if not others.size or step == max_tokens:
            return Walk(tuple(tokens), bytes(text), False)
        t = int(chooser.choose(others))
        if not m.advance(t):
            raise MaskInconsistency(f"the mask allows token {t} ({vocab.token_bytes[t]!r}) after {bytes(text)!r} "
                                    f"but advance() refuses it (state {m.state_id})")
        tokens.append(t)
        text += vocab.token_bytes[t]
    raise AssertionError("unreachable")    # pragma: no cover - the loop returns


def masks_along(compiled, seed: int, steps: int) -> list[bytes]:
    """The masks (as bytes) a seeded random walk meets: at each step the mask, then a
    random allowed token other than EOS; the walk ends after ``steps`` masks, or where
    only EOS (or nothing) is allowed.  Two compiles of the same grammar give the same
    list: what thread and deadline tests compare.

    Example:
        >>> from constrained import Grammar, TokenVocabulary, compile_grammar
        >>> vocab = TokenVocabulary.from_token_bytes([b"a", b"b", b""], eos_ids=[2])
        >>> cg = compile_grammar(Grammar.from_regex("ab?"), vocab, cache_dir=None)
        >>> len(masks_along(cg, seed=0, steps=5))      # 'a', then 'b' or EOS, then EOS only
        3
    """
    rng = random.Random(seed)
    vocab = compiled.vocab
    eos = set(int(t) for t in vocab.eos_ids)
    m = compiled.matcher()
    out = []
    for _ in range(steps):
        mask = m.mask()
        out.append(mask.tobytes())
        allowed = [t for t in np.flatnonzero(unpack_mask(mask, len(vocab))).tolist() if t not in eos]
        if not allowed:
            break
        if not m.advance(rng.choice(allowed)):
            raise MaskInconsistency(f"the mask allowed a token that advance() refused (state {m.state_id})")
    return out

