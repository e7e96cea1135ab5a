"""Packed token masks: layout helpers and application to logits (torch, CPU or CUDA).

Layout (the one XGrammar, vLLM and SGLang use): ``int32[..., ceil(V/32)]``; token
``t`` is bit ``t % 32`` (least significant first) of word ``t // 32``; 1 = allowed.

Example:
    >>> import numpy as np
    >>> m = pack_mask(np.array([True, False, True]))
    >>> m.dtype, int(m[0]), unpack_mask(m, 3).tolist()
    (dtype('int32'), 5, [True, False, True])
"""

from __future__ import annotations

import functools

import numpy as np


def mask_words(vocab_size: int) -> int:
    """Number of int32 words for ``vocab_size`` tokens."""
    return (vocab_size + 31) // 32


def pack_mask(allowed: np.ndarray) -> np.ndarray:
    """Bool array over token ids (last axis) -> packed int32 mask."""
    allowed = np.asarray(allowed, dtype=bool)
    v = allowed.shape[-1]
    pad = mask_words(v) * 32 - v
    if pad:
        allowed = np.concatenate([allowed, np.zeros(allowed.shape[:-1] + (pad,), bool)], axis=-1)
    return np.packbits(allowed, axis=-1, bitorder="little").view(np.int32)


def pack_token_ids(ids: np.ndarray, vocab_size: int) -> np.ndarray:
    """Token ids -> packed int32 mask with exactly those bits set (cheaper than
    `pack_mask` of a bool array when there are few ids).

    Example:
        >>> pack_token_ids(np.array([0, 2, 33]), 40).tolist()
        [5, 2]
    """
    ids = np.asarray(ids, dtype=np.int64)
    if ids.size > 64:
        allowed = np.zeros(vocab_size, bool)
        allowed[ids] = True
        return pack_mask(allowed)
    packed = np.zeros(mask_words(vocab_size) * 4, np.uint8)
    or_token_bits(packed, ids)
    return packed.view(np.int32)


def or_token_bits(packed: np.ndarray, ids: np.ndarray) -> None:
    """Set the bits of token ``ids`` (any order, repeats allowed) in ``packed``, a uint8
    packed mask, in place: a compiled loop (numba, loaded on first use), where
    ``np.bitwise_or.at`` costs microseconds of call overhead for a handful of ids.

    Example:
        >>> row = np.zeros(8, np.uint8); or_token_bits(row, np.array([0, 9, 9, 63])); row.tolist()
        [1, 2, 0, 0, 0, 0, 0, 128]
    """
    ids = np.asarray(ids)
    if ids.size:
        _compiled_or_bits()(packed, ids)


@functools.cache
def _compiled_or_bits():
    """`_or_bits` compiled, with the specialisations the engine calls loaded now: token
    ids as int32 or int64, writable or read-only.  numba loads each from its on-disk
    cache on the first call with those types, ~70 ms apiece; left to that first call,
    it lands in the middle of some later mask (`constrained.warm_up` calls this)."""
    import numba

    compiled = numba.njit(cache=True, nogil=True)(_or_bits)
    packed = np.zeros(1, np.uint8)
    for dtype in (np.int32, np.int64):
        for writable in (True, False):
            ids = np.zeros(1, dtype)
            ids.setflags(write=writable)
            compiled(packed, ids)
    return compiled


def _or_bits(packed, ids):  # pragma: no cover  (compiled; tested through or_token_bits)
    for k in range(ids.size):
        t = ids[k]
        packed[t >> 3] |= np.uint8(1 << (t & 7))


def set_token_bits(row: np.ndarray, ids, allowed: bool = True) -> None:
    """Set (``allowed``) or clear the bits of token ``ids`` in a packed int32 ``row``, in place.

    Example:
        >>> row = np.zeros(2, np.int32); set_token_bits(row, [0, 33]); row.tolist()
        [1, 2]
        >>> set_token_bits(row, [33], False); row.tolist()
        [1, 0]
    """
    words = row.view(np.uint32)
    if not isinstance(ids, np.ndarray):
        ids = list(ids)
        if len(ids) <= 8:                    # a few (end-of-sequence ids): one word each
            for t in ids:
                bit = np.uint32(1 << (int(t) & 31))
                if allowed:
                    words[int(t) >> 5] |= bit
                else:
                    words[int(t) >> 5] &= ~bit
            return
    ids = np.asarray(ids, dtype=np.int64).reshape(-1)
    if ids.size == 0:
        return
    if ids.min() < 0 or ids.max() >= words.size * 32:
        raise IndexError(f"token ids {int(ids.min())}..{int(ids.max())} outside a mask of {words.size * 32} bits")
    bits = np.zeros(words.size * 4, np.uint8)
    or_token_bits(bits, ids)                     # one compiled pass, not one numpy call per id
    if allowed:
        words |= bits.view(np.uint32)
    else:
        words &= ~bits.view(np.uint32)


def unpack_mask(mask: np.ndarray, vocab_size: int) -> np.ndarray:
    """Packed int32 mask -> bool array of ``vocab_size`` entries (last axis)."""
    m = np.ascontiguousarray(mask, dtype=np.int32)
    bits = np.unpackbits(m.view(np.uint8), axis=-1, bitorder="little").astype(bool)
    return bits[..., :vocab_size]


def token_bits(mask: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Bool per id of ``ids`` (int64 token ids): whether the 1-D packed ``mask`` has its bit
    set; reads only the words of those ids (no unpacking of the whole mask).

    Example:
        >>> token_bits(pack_token_ids(np.array([3, 40]), 64), np.array([3, 4, 40])).tolist()
        [True, False, True]
    """
    return ((mask[ids >> 5] >> (ids & 31)) & 1).astype(bool)


def allowed_token_ids(mask: np.ndarray, vocab_size: int | None = None) -> np.ndarray:
    """Sorted ids of the allowed tokens of a 1-D packed mask."""
    v = vocab_size if vocab_size is not None else mask.size * 32
    return np.flatnonzero(unpack_mask(mask, v))


def apply_token_mask(logits, mask, *, fill: float = float("-inf")):
    """Set disallowed logits to ``fill`` in place and return ``logits``.

    ``logits``: torch tensor ``[..., V_logits]`` on any device.  ``mask``: packed
    int32 (numpy or torch) ``[..., W]`` broadcastable to the logits' batch shape.
    Ids the mask does not cover (a model's logits are often wider than the
    tokenizer, ``V_logits > 32 * W``) are always disallowed.

    Example:
        >>> import torch
        >>> logits = torch.zeros(1, 40)
        >>> apply_token_mask(logits, pack_mask(np.arange(35) % 2 == 0)[None])[0, :4].tolist()
        [0.0, -inf, 0.0, -inf]
        >>> bool(torch.isinf(logits[0, 35:]).all())
        True
    """
    import torch

    m = mask if isinstance(mask, torch.Tensor) else torch.from_numpy(np.array(mask))  # a copy: masks are read-only
    m = m.to(device=logits.device, dtype=torch.int32, non_blocking=True)
    v = logits.shape[-1]
    shifts = torch.arange(32, device=logits.device, dtype=torch.int32)
    bits = ((m.unsqueeze(-1) >> shifts) & 1).flatten(-2)
    covered = min(v, bits.shape[-1])
    disallowed = bits[..., :covered] == 0
    logits[..., :covered].masked_fill_(disallowed, fill)
    if covered < v:
        logits[..., covered:] = fill
    return logits
