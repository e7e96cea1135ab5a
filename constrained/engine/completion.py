"""The shortest way to finish: the fewest bytes after a state that end in the language.

`shortest_completion` runs a breadth-first search over bytes from a recognizer
state (states are interned, so e.g. every character inside a string leads to the
same state and the search stays small) and returns the shortest byte string after
which the output is complete, or None if none is found within the limits.
`completion_tokens` turns it into tokens the matcher accepts (the canonical
encoding when it is text, else a greedy longest match over the token bytes).  The decoding loop uses
them to finish inside a token budget (`constrained.decoding`).

Example:
    >>> from constrained import Grammar, TokenVocabulary, compile_grammar
    >>> vocab = TokenVocabulary.from_token_bytes([bytes([b]) for b in range(32, 127)] + [b""], eos_ids=[95])
    >>> m = compile_grammar(Grammar.from_regex(r'\\{"a": \\[[0-9]+(, [0-9]+)*\\]\\}'), vocab, cache_dir=None).matcher()
    >>> m.advance_many(vocab.encode('{"a": [1')) and m.shortest_completion()
    b']}'
"""

from __future__ import annotations

import numpy as np

from constrained.engine.recognizer import DEAD_STATE

MAX_COMPLETION_BYTES = 4096
MAX_VISITED_STATES = 2000
_MEMO_ATTR = "_shortest_completions"


def shortest_completion(rec, sid: int, *, max_bytes: int = MAX_COMPLETION_BYTES,
                        max_states: int = MAX_VISITED_STATES) -> bytes | None:
    """The shortest bytes after which ``sid`` is accepting (None: none within the limits);
    memoised per recognizer state."""
    memo = getattr(rec, _MEMO_ATTR, None)
    if memo is None:
        memo = {}
        try:
            setattr(rec, _MEMO_ATTR, memo)
        except AttributeError:          # pragma: no cover - a recognizer with __slots__
            pass
    key = (sid, max_bytes, max_states)
    if key not in memo:
        memo[key] = _search(rec, sid, max_bytes, max_states)
    return memo[key]


def _search(rec, sid: int, max_bytes: int, max_states: int) -> bytes | None:
    if rec.accepting(sid):
        return b""
    parent: dict[int, tuple[int, int] | None] = {sid: None}
    frontier = [sid]
    for _ in range(max_bytes):
        nxt = []
        for s in frontier:
            for b in np.flatnonzero(rec.next_bytes(s)):
                t = rec.byte_step(s, int(b))
                if t == DEAD_STATE or t in parent:
                    continue
                parent[t] = (s, int(b))
                if rec.accepting(t):
                    out = bytearray()
                    while parent[t] is not None:
                        t, byte = parent[t]
                        out.append(byte)
                    return bytes(reversed(out))
                if len(parent) > max_states:
                    return None
                nxt.append(t)
        if not nxt:
            return None
        frontier = nxt
    return None


def completion_tokens(matcher, data: bytes) -> list[int] | None:
    """Tokens spelling ``data`` that ``matcher`` accepts in turn (it is not moved)."""
    from constrained.errors import VocabularyError

    vocab = matcher.compiled.vocab
    candidates = []
    try:
        candidates.append(vocab.encode(data.decode("utf-8")))
    except UnicodeDecodeError:
        pass
    try:
        candidates.append(vocab.encode_bytes(data))
    except VocabularyError:
        pass
    for tokens in candidates:
        if b"".join(vocab.token_bytes[t] for t in tokens) != data:
            continue
        probe = matcher.fork()
        if probe.advance_many(tokens) == len(tokens):
            return tokens
    return None
