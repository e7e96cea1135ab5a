"""Jump-forward: bytes the constraint forces, and their canonical tokens.

`forced_bytes` follows the state while exactly one byte can come next and the
output cannot end, e.g. ``": "`` after a fixed JSON key.

`forced_tokens` turns those bytes into tokens the way the tokenizer itself would
tokenize the text, so forcing never puts the model on an unnatural token path:

1. **Look back** `LOOKBACK_TOKENS` (4) accepted tokens: the text ``P + F`` (their
   bytes, then the forced bytes) is tokenized with the vocabulary's canonical
   encoder.  Unless that tokenization has a token boundary exactly where ``P``
   ends, the canonical path would merge already-chosen tokens with forced text,
   so nothing is forced (the model samples the next token itself).
2. **Look ahead** one token length past the forced text: for every position
   ``j`` within the last ``max_token_bytes`` bytes of ``F``, if some vocabulary
   token starts with ``F[j:]``, extends past ``F`` and is allowed after ``F[:j]``,
   then the canonical tokenization of the final text may cut at ``j``; tokens are
   forced only up to the first such ``j``.
3. Forced bytes that end inside a UTF-8 character are cut back to a character
   boundary before tokenizing.

The returned tokens are each allowed in turn (checked), and ``decode(tokens)`` is
a prefix of `forced_bytes`.
"""

from __future__ import annotations

import bisect

import numpy as np

from constrained.engine.recognizer import DEAD_STATE, Recognizer
from constrained.masks import token_bits

LOOKBACK_TOKENS = 4
_MASK_THRESHOLD = 256


def forced_bytes(rec: Recognizer, sid: int, limit: int = 4096) -> bytes:
    """The longest byte string every continuation from ``sid`` starts with."""
    out = bytearray()
    while len(out) < limit and not rec.accepting(sid):
        nxt = np.flatnonzero(rec.next_bytes(sid))
        if nxt.size != 1:
            break
        b = int(nxt[0])
        out.append(b)
        sid = rec.byte_step(sid, b)
    return bytes(out)


def _utf8_prefix(data: bytes) -> bytes:
    """``data`` cut back to the last complete UTF-8 character."""
    for cut in range(len(data), max(len(data) - 4, -1), -1):
        try:
            data[:cut].decode("utf-8")
            return data[:cut]
        except UnicodeDecodeError:
            continue
    return b""


class _SortedTokens:
    """Token byte strings in sorted order, for prefix look-ups."""

    def __init__(self, token_bytes) -> None:
        pairs = sorted((b, i) for i, b in enumerate(token_bytes) if b)
        self.keys = [b for b, _ in pairs]
        self.ids = np.array([i for _, i in pairs], dtype=np.int64)
        self.max_len = max((len(b) for b in self.keys), default=0)

    def extending(self, prefix: bytes) -> np.ndarray:
        """Ids of tokens that start with ``prefix`` and are longer than it."""
        lo = bisect.bisect_right(self.keys, prefix)
        hi = lo
        keys = self.keys
        while hi < len(keys) and keys[hi].startswith(prefix):
            hi += 1
        return self.ids[lo:hi]


_SORTED_CACHE: dict[str, _SortedTokens] = {}


def _sorted_tokens(vocab) -> _SortedTokens:
    key = vocab.content_hash()
    hit = _SORTED_CACHE.get(key)
    if hit is None:
        hit = _SORTED_CACHE[key] = _SortedTokens(vocab.token_bytes)
    return hit


def _straddle_cut(rec: Recognizer, sid: int, forced: bytes, index: _SortedTokens) -> int:
    """The first offset ``j`` where an allowed token could start and run past ``forced``."""
    start = max(0, len(forced) - index.max_len)
    sj = rec.feed(sid, forced[:start])
    for j in range(start, len(forced)):
        cands = index.extending(forced[j:])
        if cands.size:
            if cands.size > _MASK_THRESHOLD:
                if token_bits(rec.mask(sj), cands).any():
                    return j
            elif any(rec.token_step(sj, int(t)) != DEAD_STATE for t in cands):
                return j
        sj = rec.byte_step(sj, forced[j])
    return len(forced)


def forced_tokens(matcher) -> list[int]:
    """Canonical tokens for the forced bytes at ``matcher`` (see the module docstring)."""
    rec: Recognizer = matcher.compiled.recognizer
    vocab = matcher.compiled.vocab
    sid = matcher.state_id
    forced = _utf8_prefix(forced_bytes(rec, sid))
    if not forced:
        return []
    index = _sorted_tokens(vocab)
    cut = _straddle_cut(rec, sid, forced, index)
    if cut == 0:
        return []
    eos = matcher.compiled.eos_set
    history = [t for t in matcher.tokens if t not in eos][-LOOKBACK_TOKENS:]
    tb = vocab.token_bytes
    while history:
        prev = b"".join(tb[t] for t in history)
        try:
            prev.decode("utf-8")
            break
        except UnicodeDecodeError:
            history = history[1:]  # drop tokens that start inside a character
    prev = b"".join(tb[t] for t in history)
    toks = vocab.encode((prev + forced).decode("utf-8"))
    pos = 0
    i = 0
    while i < len(toks) and pos < len(prev):
        pos += len(tb[toks[i]])
        i += 1
    if pos != len(prev):
        return []  # the canonical path would merge chosen tokens with the forced text
    out: list[int] = []
    end = 0
    for t in toks[i:]:
        piece = tb[t]
        if not piece or end + len(piece) > cut or piece != forced[end:end + len(piece)]:
            break
        end += len(piece)
        out.append(t)
    # every forced token must be allowed in turn
    s = sid
    for k, t in enumerate(out):
        s = rec.token_step(s, t)
        if s == DEAD_STATE:
            return out[:k]
    return out
