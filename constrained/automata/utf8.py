"""Code point ranges -> UTF-8 byte-range sequences.

A character class such as ``[a-é]`` is a set of code point ranges; an automaton
over bytes needs, for each range, the sequences of byte ranges whose
concatenations are exactly the UTF-8 encodings of its code points.  Surrogates
(U+D800-U+DFFF) have no UTF-8 encoding and are dropped.

Example:
    >>> list(utf8_sequences(0x61, 0x63))
    [((97, 99),)]
    >>> list(utf8_sequences(0xE9, 0xE9))
    [((195, 195), (169, 169))]
"""

from __future__ import annotations

from collections.abc import Iterator

MAX_CODE_POINT = 0x10FFFF
_LENGTH_LIMITS = (0x7F, 0x7FF, 0xFFFF, MAX_CODE_POINT)


def _encode(cp: int) -> bytes:
    return chr(cp).encode("utf-8", "surrogatepass")


def _split_surrogates(lo: int, hi: int) -> Iterator[tuple[int, int]]:
    if hi < 0xD800 or lo > 0xDFFF:
        yield lo, hi
        return
    if lo < 0xD800:
        yield lo, 0xD7FF
    if hi > 0xDFFF:
        yield 0xE000, hi


def _sequences_same_length(lo: int, hi: int, n: int) -> Iterator[tuple[tuple[int, int], ...]]:
    """Byte-range sequences for ``[lo, hi]`` where all code points encode to n bytes."""
    if n == 1:
        yield ((lo, hi),)
        return
    for i in range(1, n):
        m = (1 << (6 * i)) - 1
        if (lo & ~m) != (hi & ~m):
            if (lo & m) != 0:
                yield from _sequences_same_length(lo, lo | m, n)
                yield from _sequences_same_length((lo | m) + 1, hi, n)
                return
            if (hi & m) != m:
                yield from _sequences_same_length(lo, (hi & ~m) - 1, n)
                yield from _sequences_same_length(hi & ~m, hi, n)
                return
    a, b = _encode(lo), _encode(hi)
    yield tuple((a[k], b[k]) for k in range(n))


def utf8_sequences(lo: int, hi: int) -> Iterator[tuple[tuple[int, int], ...]]:
    """Yield byte-range sequences covering the UTF-8 encodings of ``[lo, hi]``."""
    for a, b in _split_surrogates(lo, min(hi, MAX_CODE_POINT)):
        start = a
        for n, limit in enumerate(_LENGTH_LIMITS, start=1):
            if start > b:
                break
            if start > limit:
                continue
            end = min(b, limit)
            yield from _sequences_same_length(start, end, n)
            start = end + 1
