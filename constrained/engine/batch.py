"""Batched masks for servers: every live sequence's mask into one array, one call per step.

`fill_masks(matchers, out, rows=None)` writes the packed mask of each matcher
(the layout of `Matcher.mask()`: bit ``t % 32`` of int32 word ``t // 32``, see
`constrained.masks`) into a row of ``out``, an int32 ``[batch, words]`` numpy array
or CPU torch tensor (written through its numpy view, no copy).  ``out`` may be
wider than the vocabulary (a padded logits width, ``words >= ceil(V / 32)``): the
bits past the vocabulary are always 0, so padding ids are never allowed.

Rows:

* ``rows[i]`` is the row of ``matchers[i]`` (default: row ``i``); rows no matcher
  names are left as they are (a server's free slots);
* a *terminated* matcher (it accepted EOS) allows only its EOS ids, so a finished
  sequence that is still in the batch can only repeat EOS;
* a `CheckedMatcher` (JSON Schema value checks) gets its checked mask, as `mask()`.

There is no batched ``advance``: ``for m, t in zip(matchers, tokens): m.advance(t)``
is as fast as a helper would be (all of the cost is inside ``advance``).

Example:
    >>> import numpy as np
    >>> from constrained import Grammar, TokenVocabulary, compile_grammar, fill_masks
    >>> from constrained.masks import unpack_mask
    >>> vocab = TokenVocabulary.from_token_bytes([b"a", b"b", b"ab", b""], eos_ids=[3])
    >>> cg = compile_grammar(Grammar.from_regex("(ab)+"), vocab, cache_dir=None)
    >>> m1, m2, m3 = cg.matcher(), cg.matcher(), cg.matcher()
    >>> m2.advance(2), m3.advance_many([2, 3])
    (True, 2)
    >>> out = np.full((4, 2), -1, dtype=np.int32)      # 4 slots, padded to 64 token ids
    >>> _ = fill_masks([m1, m2, m3], out, rows=[0, 1, 3])
    >>> [np.flatnonzero(unpack_mask(out[r], 4)).tolist() for r in (0, 1, 3)]
    [[0, 2], [0, 2, 3], [3]]
    >>> out[2].tolist(), int(unpack_mask(out[0], 64)[4:].sum())   # slot 2 untouched; no padding bits
    ([-1, -1], 0)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from constrained.errors import MatcherError
from constrained.masks import set_token_bits

if TYPE_CHECKING:
    from constrained.engine.matcher import Matcher

__all__ = ["MaskBufferError", "fill_masks"]

_Out = TypeVar("_Out")


class MaskBufferError(MatcherError, ValueError):
    """The ``out`` array of `fill_masks` (or its ``rows``) cannot hold the masks: wrong
    type, dtype, number of dimensions, width or row index (the message says which)."""


def _as_array(out: Any) -> np.ndarray:
    """``out`` as a writable 2-D int32 numpy array sharing its memory."""
    if isinstance(out, np.ndarray):
        arr = out
    elif type(out).__module__.split(".")[0] == "torch":
        device = getattr(getattr(out, "device", None), "type", None)
        if device != "cpu":
            raise MaskBufferError(f"out must be a CPU tensor, not one on {device!r}: fill a CPU (pinned) "
                                  f"tensor and copy it to the device with non_blocking=True")
        if str(out.dtype) != "torch.int32":
            raise MaskBufferError(f"out must have dtype torch.int32, not {out.dtype}")
        arr = out.detach().numpy()
    else:
        raise MaskBufferError(f"out must be a numpy array or a CPU torch tensor, not {type(out).__name__}")
    if arr.dtype != np.int32:
        raise MaskBufferError(f"out must have dtype int32, not {arr.dtype}")
    if arr.ndim != 2:
        raise MaskBufferError(f"out must be 2-D [batch, words], not {arr.ndim}-D {tuple(arr.shape)}")
    if not arr.flags.writeable:
        raise MaskBufferError("out is read-only")
    return arr


def _eos_only(words: int, eos_ids: Sequence[int]) -> np.ndarray:
    row = np.zeros(words, dtype=np.int32)
    set_token_bits(row, eos_ids)
    return row


def fill_masks(matchers: Sequence[Matcher], out: _Out, rows: Sequence[int] | None = None) -> _Out:
    """Write each matcher's packed mask into its row of ``out`` and return ``out``.

    ``out``: int32 ``[batch, words]`` numpy array or CPU torch tensor, ``words`` at
    least every matcher's ``compiled.mask_words``; bits past a matcher's vocabulary
    are set to 0.  ``rows``: the row of each matcher (default ``0 .. n-1``; distinct;
    other rows are left untouched).  A terminated matcher's row allows its EOS ids
    only.  Raises `MaskBufferError` (a `MatcherError` and a ``ValueError``) for an
    ``out`` of the wrong type, dtype, shape or device, or bad ``rows``; nothing is
    written then.  See the module docstring for an example.
    """
    arr = _as_array(out)
    n = len(matchers)
    nrows, width = arr.shape
    if rows is None:
        if n > nrows:
            raise MaskBufferError(f"out has {nrows} rows for {n} matchers")
        row_list = list(range(n))
    else:
        row_list = [int(r) for r in rows]
        if len(row_list) != n:
            raise MaskBufferError(f"{len(row_list)} rows given for {n} matchers")
        if row_list and (min(row_list) < 0 or max(row_list) >= nrows):
            raise MaskBufferError(f"row index out of range for out with {nrows} rows: "
                                  f"{next(r for r in row_list if not 0 <= r < nrows)}")
        if len(set(row_list)) != n:
            raise MaskBufferError("rows must be distinct (two matchers cannot share a row)")
    widths: dict[int, int] = {}
    for m in matchers:
        cg = m.compiled
        w = widths.get(id(cg))
        if w is None:
            w = widths[id(cg)] = cg.mask_words
            if w > width:
                raise MaskBufferError(f"out has {width} words per row; the vocabulary of a matcher needs {w} "
                                      f"({cg.vocab_size} tokens)")
    eos_rows: dict[int, np.ndarray] = {}
    for m, r in zip(matchers, row_list):
        row = arr[r]
        if m.is_terminated():
            cg = m.compiled
            w = widths[id(cg)]
            mask = eos_rows.get(id(cg))
            if mask is None:
                mask = eos_rows[id(cg)] = _eos_only(w, cg.eos_ids)
            row[:w] = mask
            row[w:] = 0
        else:
            m.fill_mask(row)            # straight into the row where it can; the rest zeroed
    return out
