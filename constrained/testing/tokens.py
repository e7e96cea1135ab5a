"""Token-level helpers that do not depend on the engine: every way to spell a text
with a vocabulary, random segmentations, sub-vocabularies for fast exhaustive tests.

Example:
    >>> ids = ids_by_bytes([b"a", b"b", b"ab"])
    >>> import random
    >>> random_split(b"ab", ids, random.Random(0)) in ([0, 1], [2])
    True
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence


def segmentable(data: bytes, token_ids_by_bytes: dict[bytes, list[int]], max_len: int = 32) -> list[bool]:
    """``ok[i]``: ``data[i:]`` can be spelled with vocabulary tokens (DP from the end)."""
    n = len(data)
    ok = [False] * (n + 1)
    ok[n] = True
    for i in range(n - 1, -1, -1):
        ok[i] = any(ok[i + k] and data[i:i + k] in token_ids_by_bytes for k in range(1, min(max_len, n - i) + 1))
    return ok


def split_choices(data: bytes, i: int, ok: list[bool], token_ids_by_bytes: dict[bytes, list[int]],
                  max_len: int = 32) -> list[int]:
    """Lengths ``k`` of the tokens that may come at ``i`` in a segmentation (longest first)."""
    return [k for k in range(min(max_len, len(data) - i), 0, -1)
            if ok[i + k] and data[i:i + k] in token_ids_by_bytes]


def random_split(data: bytes, token_ids_by_bytes: dict[bytes, list[int]], rng: random.Random,
                 max_len: int = 32) -> list[int] | None:
    """A random segmentation of ``data`` into vocabulary tokens (None if impossible):
    uniformly among the tokens that match at each position and keep the rest spellable."""
    ok = segmentable(data, token_ids_by_bytes, max_len)
    if not ok[0]:
        return None
    out: list[int] = []
    i = 0
    while i < len(data):
        k = rng.choice(split_choices(data, i, ok, token_ids_by_bytes, max_len)[::-1])   # shortest first, as ever
        out.append(rng.choice(token_ids_by_bytes[data[i:i + k]]))
        i += k
    return out


def canonical_ids(text: str, vocab) -> list[int] | None:
    """``vocab.encode(text)`` when the vocabulary has a working encoder whose tokens spell
    ``text`` exactly; None otherwise."""
    if not hasattr(vocab, "encode"):
        return None
    try:
        ids = list(vocab.encode(text))
    except Exception:  # noqa: BLE001 - a vocabulary without a usable encoder
        return None
    return ids if b"".join(vocab.token_bytes[t] for t in ids) == text.encode("utf-8") else None


def ids_by_bytes(token_bytes: Sequence[bytes]) -> dict[bytes, list[int]]:
    """Map token bytes -> every id spelling them (tokens with no bytes left out)."""
    out: dict[bytes, list[int]] = {}
    for i, b in enumerate(token_bytes):
        if b:
            out.setdefault(b, []).append(i)
    return out


def is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def sub_vocabulary_bytes(full_token_bytes: Sequence[bytes], samples: Iterable[bytes], rng: random.Random,
                         size: int = 2000, punctuation: bytes = b'{}[](),:;"\'\\=+-*/.<>|!?@#$%^&~`') -> list[bytes]:
    """~``size`` distinct token byte strings drawn from a real vocabulary.

    Always: every single-byte token, every token that occurs inside one of the
    ``samples`` (strings of the grammar), some partial-UTF-8 tokens and some
    tokens with punctuation; then random tokens up to ``size``.  Shuffled.
    """
    distinct = sorted({b for b in full_token_bytes if b})
    present = set(distinct)
    chosen: set[bytes] = {b for b in distinct if len(b) == 1}
    for s in samples:
        for i in range(len(s)):
            for k in range(2, min(16, len(s) - i) + 1):
                if s[i:i + k] in present:
                    chosen.add(s[i:i + k])
    partial = [b for b in distinct if len(b) > 1 and not is_utf8(b)]
    chosen.update(rng.sample(partial, min(len(partial), size // 20)))
    punct = set(punctuation)
    with_punct = [b for b in distinct if len(b) > 1 and any(c in punct for c in b)]
    chosen.update(rng.sample(with_punct, min(len(with_punct), size // 6)))
    rest = [b for b in distinct if b not in chosen]
    need = max(0, size - len(chosen))
    chosen.update(rng.sample(rest, min(len(rest), need)))
    out = sorted(chosen)
    rng.shuffle(out)
    return out
