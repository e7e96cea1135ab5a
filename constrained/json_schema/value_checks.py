"""Value-level checks: keywords the grammar only over-approximates, validated when a value completes.

The compiler makes the grammar a *superset* for keywords a context-free grammar
cannot express (``uniqueItems``, overlapping ``oneOf``, ``not``, ``multipleOf``,
...) and lists the sub-schemas holding them.  `JsonValueChecks` then follows the
JSON text as it is produced (a byte-level structure tracker: open arrays and
objects, current key or index, string state) and knows, for every open array or
object, the sub-schemas that *must* hold for it: a **check cursor** reached from
the root through ``properties`` / ``patternProperties`` / ``additionalProperties``
/ ``prefixItems`` / ``items`` (with ``allOf`` and ``$ref`` flattened; below an
``anyOf`` or ``oneOf`` the applicable branch is not known, so tracking stops and
the nearest enclosing checked value covers it).  When an array or object whose
cursor reaches a checked keyword completes, the value is validated with
`jsonschema` against those sub-schemas (`SchemaValidators`), and the token that
completes an invalid value is refused.  A top-level scalar is validated at the
end.  Scalars inside containers are checked with their innermost enclosing
array or object.

Soundness: every rejection is of a value that violates a sub-schema applying to
it, so no valid instance is lost; the root is always validated when anything is
checked, so no invalid instance is accepted.  The mask stays exact token by
token for the grammar; with checks it is sound but may allow a token after which
only invalid completions remain (e.g. a duplicate array element is only refused
when the array closes).

Masks: only tokens that can close the innermost checked value (counted with
per-vocabulary numpy profiles of bracket depth, string state aware) or that
open and close a value inside themselves are simulated; the rest of the
grammar's mask is kept as is.

Example:
    >>> from constrained import Grammar, TokenVocabulary, compile_grammar
    >>> vocab = TokenVocabulary.from_token_bytes([bytes([b]) for b in range(32, 127)] + [b""], eos_ids=[95])
    >>> g = Grammar.from_json_schema({"type": "array", "items": {"type": "integer"}, "uniqueItems": True})
    >>> cg = compile_grammar(g, vocab, cache_dir=None)
    >>> cg.accepts_bytes(b"[1, 2]"), cg.accepts_bytes(b"[1, 1]")
    (True, False)
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from typing import Any

import numpy as np

from constrained.json_schema.conjunction import (
    Conjunction,
    flatten,
    item_items,
    property_items,
    root_part,
    tuple_length,
)
from constrained.json_schema.resolver import Located, SchemaIndex
from constrained.json_schema.validation import SchemaValidators

OBJ, ARR = 0, 1
OUT, STR, ESC = 0, 1, 2                # tracker modes: outside strings, inside, after a backslash
KEY, COLON, VALUE = 0, 1, 2            # object phases
MAX_CLOSES = 8                         # close counts profiled exactly; more are simulated

_WS = frozenset(b" \t\n\r")


# ---------------------------------------------------------------------- cursors
class CheckCursor:
    """The sub-schemas that must hold at one place of the instance, and their checks."""

    __slots__ = ("plan", "conj", "validate", "_props", "_items", "_names", "_tuple")

    def __init__(self, plan: "JsonValueChecks", conj: Conjunction, validate: tuple[Located, ...]) -> None:
        self.plan = plan
        self.conj = conj
        self.validate = validate          # the parts whose sub-trees hold checked keywords
        self._props: dict[str | None, CheckCursor | None] = {}
        self._items: dict[int, CheckCursor | None] = {}
        # keys that are not declared (and match no pattern) all get the same cursor
        patterns = any(p.get("patternProperties") for p in conj)
        self._names = None if patterns else {k for p in conj if isinstance(p.get("properties"), dict)
                                             for k in p.get("properties")}
        self._tuple = tuple_length(conj)

    def prop(self, key: str) -> "CheckCursor | None":
        if self._names is not None and key not in self._names:
            if None not in self._props:
                self._props[None] = self.plan.cursor(property_items(self.conj, key, self.plan.index))
            return self._props[None]
        if key not in self._props:
            try:
                items = property_items(self.conj, key, self.plan.index, _undecided)
            except _Undecided:      # which sub-schemas apply is not known: an ancestor checks it
                self._props[key] = None
            else:
                self._props[key] = self.plan.cursor(items)
        return self._props[key]

    def item(self, i: int) -> "CheckCursor | None":
        i = min(i, self._tuple)                       # every position past the tuple is alike
        if i not in self._items:
            self._items[i] = self.plan.cursor(item_items(self.conj, i, self.plan.index))
        return self._items[i]


class _Undecided(Exception):
    pass


def _undecided(part, pattern) -> None:
    raise _Undecided(pattern)


# ---------------------------------------------------------------------- vocabulary profiles
class _Profiles:
    """Per-vocabulary bitsets: tokens closing >= r open containers from each string mode,
    and tokens that open and close a container inside themselves."""

    def __init__(self, vocab) -> None:
        from constrained.masks import pack_mask

        lengths = vocab.lengths
        order = np.argsort(-lengths, kind="stable")          # longest first: column j touches a prefix
        mat = vocab.byte_matrix[order]
        counts = np.searchsorted(-lengths[order], -np.arange(mat.shape[1]), side="right")
        n = len(lengths)
        self.closes: list[list[np.ndarray]] = []
        self.internal: list[np.ndarray] = []
        for start in (OUT, STR, ESC):
            mode = np.full(n, start, dtype=np.int8)
            depth = np.zeros(n, dtype=np.int32)
            low = np.zeros(n, dtype=np.int32)
            inner = np.zeros(n, dtype=bool)
            for j in range(mat.shape[1]):
                k = int(counts[j])                          # tokens longer than j
                if k == 0:
                    break
                c, m, d = mat[:k, j], mode[:k], depth[:k]
                out, s, e = m == OUT, m == STR, m == ESC
                opening = out & ((c == 0x7B) | (c == 0x5B))
                closing = out & ((c == 0x7D) | (c == 0x5D))
                inner[:k] |= closing & (d > low[:k])
                d += opening
                d -= closing
                np.minimum(low[:k], d, out=low[:k])
                quote, slash = c == 0x22, c == 0x5C
                m[out & quote] = STR
                m[s & quote] = OUT
                m[s & slash] = ESC
                m[e] = STR
            closes = np.empty(n, dtype=np.int32)
            closes[order] = -low
            inside = np.empty(n, dtype=bool)
            inside[order] = inner
            self.closes.append([pack_mask(closes >= r) for r in range(MAX_CLOSES + 1)])
            self.internal.append(pack_mask(inside))


@lru_cache(maxsize=8)
def _profiles(vocab) -> _Profiles:
    return _Profiles(vocab)


# ---------------------------------------------------------------------- the checks
class JsonValueChecks:
    """Value-level checks of one compiled schema (carried by its `Grammar` as ``checks``).

    The engine's `CheckedMatcher` drives it through `start`, `step`, `accepts_end`
    and `candidates`; a tracker state is an immutable tuple, so forks share it.
    """

    def __init__(self, index: SchemaIndex, validators: SchemaValidators, checked: list[Located]) -> None:
        self.index = index
        self.dialect = validators.dialect
        self.validators = validators
        self.checked = checked
        self._reaching = _reaching(index, {id(loc.schema) for loc in checked})
        self._verdicts: dict[tuple[int, bytes], bool] = {}
        self._candidates: dict[tuple, np.ndarray] = {}
        self.root = self.cursor([root_part(index)])
        digest = hashlib.sha256(json.dumps(index.document, sort_keys=True, default=str).encode())
        digest.update(json.dumps(sorted(loc.pointer for loc in checked)).encode())
        self._hash = digest.hexdigest()

    def content_hash(self) -> str:
        return self._hash

    def witnesses(self) -> tuple[bytes, ...]:
        """Short string contents the schema is likely to accept (its formats' and patterns'
        shortest matches, enum/const/examples strings), JSON-escaped: what the completion
        search writes inside strings that only a check decides."""
        from constrained.json_schema.witnesses import string_witnesses

        return tuple(json.dumps(w, ensure_ascii=False)[1:-1].encode("utf-8")
                     for w in string_witnesses(self.index.document))

    def cursor(self, items) -> CheckCursor | None:
        """The cursor of a place where ``items`` apply (None: nothing below is checked)."""
        conj = flatten(items, self.index, self.dialect) if items else ()
        if not conj:
            return None
        validate = tuple(p.loc for p in conj if id(p.schema) in self._reaching)
        if not validate:
            return None
        return CheckCursor(self, conj, validate)

    # ------------------------------------------------------------------ validation
    def value_ok(self, cursor: CheckCursor, text: bytes | bytearray) -> bool:
        key = (id(cursor), bytes(text))
        verdict = self._verdicts.get(key)
        if verdict is None:
            try:
                value = json.loads(text, object_pairs_hook=_unique_keys)
            except (ValueError, RecursionError):
                verdict = False
            else:
                verdict = all(self.validators.is_valid(loc, value) for loc in cursor.validate)
            if len(self._verdicts) > 65536:
                self._verdicts.clear()
            self._verdicts[key] = verdict
        return verdict

    # ------------------------------------------------------------------ tracking
    def start(self) -> tuple:
        """The tracker state before any byte: (frames, mode, string start, string is a key)."""
        return ((), OUT, -1, False)

    def step(self, state: tuple, text: bytes, data: bytes) -> tuple | None:
        """The state after ``data`` follows ``text``; None if ``data`` completes an invalid value."""
        frames, mode, sstart, is_key = state
        base = len(text)
        i, n = 0, len(data)
        while i < n:
            if mode == STR:
                q = data.find(b'"', i)
                bs = data.find(b"\\", i)
                if bs != -1 and (q == -1 or bs < q):
                    i, mode = bs + 1, ESC
                    continue
                if q == -1:
                    break
                i, mode = q + 1, OUT
                if is_key and frames:
                    key = json.loads(_slice(text, data, sstart, base + i))
                    kind, fstart, cur, _, _ = frames[-1]
                    frames = frames[:-1] + ((kind, fstart, cur, COLON, key),)
                continue
            if mode == ESC:
                i, mode = i + 1, STR
                continue
            c = data[i]
            if c in _WS:
                i += 1
                continue
            if c == 0x22:                                                   # "
                is_key = bool(frames) and frames[-1][0] == OBJ and frames[-1][3] == KEY
                sstart, mode = base + i, STR
            elif c == 0x7B or c == 0x5B:                                    # { [
                cur = self._child(frames)
                frames = frames + (((OBJ, base + i, cur, KEY, None) if c == 0x7B
                                    else (ARR, base + i, cur, VALUE, 0)),)
            elif c == 0x7D or c == 0x5D:                                    # } ]
                if frames:
                    kind, fstart, cur, _, _ = frames[-1]
                    frames = frames[:-1]
                    if cur is not None and not self.value_ok(cur, _slice(text, data, fstart, base + i + 1)):
                        return None
            elif c == 0x3A:                                                 # :
                if frames and frames[-1][0] == OBJ:
                    kind, fstart, cur, _, key = frames[-1]
                    frames = frames[:-1] + ((kind, fstart, cur, VALUE, key),)
            elif c == 0x2C:                                                 # ,
                if frames:
                    kind, fstart, cur, phase, slot = frames[-1]
                    frames = frames[:-1] + (((kind, fstart, cur, KEY, None) if kind == OBJ
                                             else (kind, fstart, cur, VALUE, slot + 1)),)
            i += 1
        return (frames, mode, sstart, is_key)

    def _child(self, frames: tuple) -> CheckCursor | None:
        if not frames:
            return self.root
        kind, _, cur, _, slot = frames[-1]
        if cur is None:
            return None
        if kind == ARR:
            return cur.item(slot)
        return cur.prop(slot) if isinstance(slot, str) else None

    def accepts_end(self, state: tuple, text: bytes) -> bool:
        """Whether the complete text passes the checks (a top-level scalar is validated here)."""
        frames = state[0]
        if frames or self.root is None:
            return not frames
        head = text.lstrip()[:1]
        if head in (b"{", b"["):
            return True                                # validated when it closed
        return self.value_ok(self.root, text)

    def candidates(self, state: tuple, mask: np.ndarray, vocab, key=None) -> np.ndarray:
        """Ids of the tokens allowed by ``mask`` whose bytes may complete a checked value.

        ``key`` identifies ``mask`` (the grammar state id): results are memoised per
        (key, string mode, closes needed)."""
        frames, mode = state[0], state[1]
        deepest = max((k for k, f in enumerate(frames) if f[2] is not None), default=-1)
        internal = deepest >= 0 or (not frames and self.root is not None)
        if not internal:
            return _NONE
        r = min(len(frames) - deepest, MAX_CLOSES) if deepest >= 0 else 0
        memo_key = None if key is None else (key, mode, r, vocab.content_hash())
        if memo_key is not None:
            hit = self._candidates.get(memo_key)
            if hit is not None:
                return hit
        prof = _profiles(vocab)
        sel = prof.internal[mode] | prof.closes[mode][r] if r else prof.internal[mode].copy()
        sel &= mask[: sel.size]
        words = np.flatnonzero(sel)
        if words.size == 0:
            out = _NONE
        else:
            bits = np.unpackbits(sel[words].view(np.uint8), bitorder="little").reshape(-1, 32)
            row, col = np.nonzero(bits)
            out = words[row] * 32 + col
        if memo_key is not None:
            if len(self._candidates) > 65536:
                self._candidates.clear()
            self._candidates[memo_key] = out
        return out


_NONE = np.zeros(0, dtype=np.int64)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict:
    """``json.loads`` object hook: an object with a repeated key is not a value we accept."""
    out = dict(pairs)
    if len(out) != len(pairs):
        raise ValueError("duplicate key")
    return out


def _slice(text: bytes, data: bytes, start: int, end: int) -> bytes:
    """Bytes ``start:end`` of ``text + data`` (``end`` inside ``data``) without joining them all."""
    base = len(text)
    if start >= base:
        return data[start - base:end - base]
    return text[start:] + data[:end - base]


def _reaching(index: SchemaIndex, targets: set[int]) -> set[int]:
    """Ids of the schema objects from which a checked one is reachable (through any keyword or $ref)."""
    from constrained.errors import ConstrainedError

    parents: dict[int, set[int]] = {}
    for loc in index.all_located():
        node = loc.schema
        kids: list[Any] = []
        for key, value in node.items():
            if key in ("enum", "const", "default", "examples"):
                continue
            if isinstance(value, dict):
                kids.append(value)
                kids.extend(v for v in value.values() if isinstance(v, dict))
            elif isinstance(value, list):
                kids.extend(v for v in value if isinstance(v, dict))
        if isinstance(node.get("$ref"), str):
            try:
                target = index.resolve(node["$ref"], loc.base, loc.pointer)[0]
                if isinstance(target, dict):
                    kids.append(target)
            except ConstrainedError:
                pass
        for kid in kids:
            parents.setdefault(id(kid), set()).add(id(node))
    seen = set(targets)
    todo = list(targets)
    while todo:
        for p in parents.get(todo.pop(), ()):
            if p not in seen:
                seen.add(p)
                todo.append(p)
    return seen
