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
    Part,
    flatten,
    item_items,
    property_items,
    root_part,
    tuple_length,
)
from constrained.json_schema.resolver import Located, SchemaIndex
from constrained.json_schema.validation import SchemaValidators, _unique_pairs

OBJ, ARR = 0, 1
OUT, STR, ESC = 0, 1, 2                # tracker modes: outside strings, inside, after a backslash
KEY, COLON, VALUE = 0, 1, 2            # object phases
MAX_CLOSES = 8                         # close counts profiled exactly; more are simulated

_WS = frozenset(b" \t\n\r")
_WS_BYTES = b" \t\n\r"


# ---------------------------------------------------------------------- cursors
class CheckCursor:
    """The sub-schemas that must hold at one place of the instance, and their checks."""

    __slots__ = ("plan", "conj", "validate", "member_plans", "whole_objects", "item_plans", "whole_arrays",
                 "_props", "_items", "_names", "_tuple", "_kinds")

    def __init__(self, plan: "JsonValueChecks", conj: Conjunction, validate: tuple[Located, ...]) -> None:
        self.plan = plan
        self.conj = conj
        self.validate = validate          # the parts whose sub-trees hold checked keywords
        # parts checked member by member (element by element) for object (array) values, each
        # member's text validated once and memoised, and parts validated on the whole value
        split = not plan.dynamic
        members = [(loc, plan.validators.member_plan(loc) if split else None) for loc in validate]
        self.member_plans = tuple(p for _, p in members if p is not None)
        self.whole_objects = tuple(loc for loc, p in members if p is None)
        items = [(loc, plan.validators.item_plan(loc) if split else None) for loc in validate]
        self.item_plans = tuple(p for _, p in items if p is not None)
        self.whole_arrays = tuple(loc for loc, p in items if p is None)
        self._props: dict[str | None, CheckCursor | None] = {}
        self._items: dict[int, CheckCursor | None] = {}
        # keys that are not declared (and match no pattern) all get the same cursor
        patterns = any(p.get("patternProperties") for p in conj)
        self._names = None if patterns else {k for p in conj if isinstance(p.get("properties"), dict)
                                             for k in p.get("properties")}
        self._tuple = tuple_length(conj)
        self._kinds: dict[int, CheckCursor | None] = {}

    def of_kind(self, kind: int) -> "CheckCursor | None":
        """This place's cursor once its value is known to be an object (``OBJ``) or array (``ARR``):
        an ``anyOf`` / ``oneOf`` with exactly one branch admitting that kind is that branch
        there, so the branch is tracked (and its checks made precise) instead of the
        whole disjunction being validated."""
        if kind not in self._kinds:
            self._kinds[kind] = self.plan.specialize(self, "object" if kind == OBJ else "array")
        return self._kinds[kind]

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

    def __init__(self, index: SchemaIndex, validators: SchemaValidators, checked: list[Located], *,
                 legacy: bool = False) -> None:
        self.index = index
        self.legacy = legacy
        self.validators = validators
        self.checked = checked
        self._targets = {id(loc.schema) for loc in checked}
        # $dynamicRef / $recursiveRef resolve through the dynamic scope of the whole evaluation:
        # validated apart (member by member, a branch or a part alone), they would lose it
        self.dynamic = any(isinstance(loc.schema, dict) and _DYNAMIC.intersection(loc.schema)
                           for loc in index.all_located())
        self._reaching = _reaching(index, self._targets)
        self._derived: dict[tuple, Located | None] = {}
        self._verdicts: dict[tuple[int, bytes], bool] = {}
        self._candidates: dict[tuple, np.ndarray] = {}
        self.root = self.cursor([root_part(index)])
        digest = hashlib.sha256(json.dumps(index.document, sort_keys=True, default=str).encode())
        digest.update(json.dumps(sorted(loc.pointer for loc in checked)).encode())
        self._hash = digest.hexdigest()

    def content_hash(self) -> str:
        return self._hash

    def cursor(self, items) -> CheckCursor | None:
        """The cursor of a place where ``items`` apply (None: nothing below is checked)."""
        conj = flatten(items, self.index, legacy=self.legacy) if items else ()
        if not conj:
            return None
        validate = tuple(loc for loc in map(self._validated, conj) if loc is not None)
        if not validate:
            return None
        return CheckCursor(self, conj, validate)

    def _validated(self, part: Part) -> Located | None:
        """What a value check validates of ``part``: its schema without the keywords expanded
        into other parts of the conjunction (``$ref``, ``allOf``, a selected ``oneOf``
        branch: validated there, not twice), or None if nothing left reaches a checked keyword."""
        schema = part.schema
        if self.dynamic or not any(k in schema for k in part.done) or _UNEVALUATED.intersection(schema):
            return part.loc if id(schema) in self._reaching else None     # (unevaluated*: siblings matter)
        key = (id(schema), part.loc.base, part.done)
        if key not in self._derived:
            rest = {k: v for k, v in schema.items() if k not in part.done}
            reaches = id(schema) in self._targets or \
                any(id(kid) in self._reaching for kid in _children(rest, self.index, part.loc.base, part.pointer))
            self._derived[key] = Located(rest, part.loc.base, part.pointer, part.loc.resource,
                                         part.loc.resource_pointer) if reaches else None
        return self._derived[key]

    def specialize(self, cursor: CheckCursor, kind: str) -> CheckCursor | None:
        """``cursor`` for values of JSON type ``kind`` (see `CheckCursor.of_kind`)."""
        if self.dynamic:
            return cursor
        items: list = []
        changed = False
        for p in cursor.conj:
            for kw in ("oneOf", "anyOf"):
                branches = p.get(kw)
                if not isinstance(branches, list):
                    continue
                admitting = [j for j, b in enumerate(branches)
                             if self._admits((b, p.loc.base, f"{p.pointer}/{kw}/{j}"), kind)]
                if len(admitting) == 1:
                    j = admitting[0]
                    p = p.without(kw)
                    items.append((branches[j], p.loc.base, f"{p.pointer}/{kw}/{j}"))
                    changed = True
            items.append(p)
        return self.cursor(items) if changed else cursor

    def _admits(self, item: tuple, kind: str) -> bool:
        """False only if no value of JSON type ``kind`` can satisfy the schema ``item``."""
        from constrained.errors import ConstrainedError

        try:
            conj = flatten([item], self.index, legacy=self.legacy)
        except ConstrainedError:
            return True
        if conj is None:
            return False
        for p in conj:
            t = p.get("type")
            names = [t] if isinstance(t, str) else t
            if isinstance(names, list) and all(isinstance(x, str) for x in names) and kind not in names:
                return False
            values = [p.get("const")] if p.has("const") else p.get("enum")
            if isinstance(values, list) and not any(isinstance(v, dict if kind == "object" else list)
                                                     for v in values):
                return False
        return True

    # ------------------------------------------------------------------ validation
    def value_ok(self, cursor: CheckCursor, text: bytes | bytearray, parts: tuple[Located, ...] | None = None) -> bool:
        """Whether the JSON ``text`` passes ``parts`` (default: every part ``cursor`` validates)."""
        parts = cursor.validate if parts is None else parts
        key = (id(cursor), len(parts), bytes(text))
        verdict = self._verdicts.get(key)
        if verdict is None:
            try:
                value = json.loads(text, object_pairs_hook=_unique_pairs)
            except (ValueError, RecursionError):
                verdict = False
            else:
                verdict = all(self.validators.is_valid(loc, value) for loc in parts)
            if len(self._verdicts) > 65536:
                self._verdicts.clear()
            self._verdicts[key] = verdict
        return verdict

    def container_ok(self, cursor: CheckCursor, kind: int, text: bytes | bytearray, data: bytes, start: int,
                     end: int, members: tuple) -> bool:
        """Whether the object (``kind`` OBJ) or array at ``start:end`` of ``text + data`` passes
        the cursor's parts.

        ``members`` are its ``(key or index, value start, value end)``.  Parts with a
        member-by-member (element-by-element) plan check the key set (length) and each
        member's value text, memoised per text, so the tokens a mask simulates re-validate
        only the member they change; the other parts validate the whole value."""
        plans, whole = (cursor.member_plans, cursor.whole_objects) if kind == OBJ else \
            (cursor.item_plans, cursor.whole_arrays)
        value = _slice(text, data, start, end)
        if not plans or (not members and kind == OBJ):
            return self.value_ok(cursor, value)
        key = (id(cursor), -1, value)
        verdict = self._verdicts.get(key)
        if verdict is None:
            verdict = self._members_ok(kind, plans, text, data, members) and \
                (not whole or self.value_ok(cursor, value, whole))
            if len(self._verdicts) > 65536:
                self._verdicts.clear()
            self._verdicts[key] = verdict
        return verdict

    def _members_ok(self, kind: int, plans: tuple, text: bytes | bytearray, data: bytes,
                    members: tuple) -> bool:
        raws = [_slice(text, data, a, b).strip(_WS_BYTES) for _, a, b in members]
        if kind == OBJ:
            keys = frozenset(k for k, _, _ in members)
            if len(keys) != len(members):
                return False                                  # a repeated key
            for plan in plans:
                if not plan.keys_ok(keys) or \
                        not all(plan.member_text_ok(k, raw) for (k, _, _), raw in zip(members, raws)):
                    return False
        else:
            for plan in plans:
                if not plan.length_ok(len(raws)) or not all(plan.item_text_ok(i, raw) for i, raw in enumerate(raws)):
                    return False
        return True

    # ------------------------------------------------------------------ tracking
    def start(self) -> tuple:
        """The tracker state before any byte: (frames, mode, string start, string is a key)."""
        return ((), OUT, -1, False)

    def step(self, state: tuple, text: bytes, data: bytes) -> tuple | None:
        """The state after ``data`` follows ``text``; None if ``data`` completes an invalid value.

        A frame is ``(kind, start, cursor, phase, slot, value start, members)``: ``slot`` is
        the current key of an object (the index in an array), ``value start`` where the current
        member's value (element) begins, ``members`` the completed ``(key or index, value start,
        value end)`` of a checked object (array)."""
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
                    kind, fstart, cur, _, _, _, members = frames[-1]
                    frames = frames[:-1] + ((kind, fstart, cur, COLON, key, -1, members),)
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
                if cur is not None:
                    cur = cur.of_kind(OBJ if c == 0x7B else ARR)
                frames = frames + (((OBJ, base + i, cur, KEY, None, -1, ()) if c == 0x7B
                                    else (ARR, base + i, cur, VALUE, 0, base + i + 1, ())),)
            elif c == 0x7D or c == 0x5D:                                    # } ]
                if frames:
                    kind, fstart, cur, phase, slot, vstart, members = frames[-1]
                    frames = frames[:-1]
                    if cur is not None:
                        if (phase == VALUE if kind == OBJ else
                                members or _slice(text, data, vstart, base + i).strip(_WS_BYTES)):
                            members += ((slot, vstart, base + i),)         # the last member (element)
                        if not self.container_ok(cur, kind, text, data, fstart, base + i + 1, members):
                            return None
            elif c == 0x3A:                                                 # :
                if frames and frames[-1][0] == OBJ:
                    kind, fstart, cur, _, key, _, members = frames[-1]
                    frames = frames[:-1] + ((kind, fstart, cur, VALUE, key, base + i + 1, members),)
            elif c == 0x2C:                                                 # ,
                if frames:
                    kind, fstart, cur, phase, slot, vstart, members = frames[-1]
                    if cur is not None and phase == VALUE:
                        members += ((slot, vstart, base + i),)
                    frame = (kind, fstart, cur, KEY, None, -1, members) if kind == OBJ else \
                        (kind, fstart, cur, VALUE, slot + 1, base + i + 1, members)
                    frames = frames[:-1] + (frame,)
            i += 1
        return (frames, mode, sstart, is_key)

    def _child(self, frames: tuple) -> CheckCursor | None:
        if not frames:
            return self.root
        kind, _, cur, _, slot, _, _ = frames[-1]
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


def _slice(text: bytes, data: bytes, start: int, end: int) -> bytes:
    """Bytes ``start:end`` of ``text + data`` without joining them all."""
    base = len(text)
    if start >= base:
        return data[start - base:end - base]
    if end <= base:
        return bytes(text[start:end])
    return bytes(text[start:]) + data[:end - base]


_UNEVALUATED = frozenset({"unevaluatedProperties", "unevaluatedItems"})
_DYNAMIC = frozenset({"$dynamicRef", "$recursiveRef"})
_NOT_APPLIED = frozenset({"enum", "const", "default", "examples", "$defs", "definitions"})


def _children(node: dict, index: SchemaIndex, base: str, pointer: str) -> list[Any]:
    """The schema objects ``node`` may apply to an instance or part of it (any keyword
    but annotations and definition containers, and its ``$ref`` target)."""
    from constrained.errors import ConstrainedError

    kids: list[Any] = []
    for key, value in node.items():
        if key in _NOT_APPLIED:
            continue
        if isinstance(value, dict):
            kids.append(value)
            kids.extend(v for v in value.values() if isinstance(v, dict))
        elif isinstance(value, list):
            kids.extend(v for v in value if isinstance(v, dict))
    if isinstance(node.get("$ref"), str):
        try:
            target = index.resolve(node["$ref"], base, pointer)[0]
            if isinstance(target, dict):
                kids.append(target)
        except ConstrainedError:
            pass
    return kids


def _reaching(index: SchemaIndex, targets: set[int]) -> set[int]:
    """Ids of the schema objects from which a checked one is reachable (through any keyword or $ref)."""
    parents: dict[int, set[int]] = {}
    for loc in index.all_located():
        node = loc.schema
        for kid in _children(node, index, loc.base, loc.pointer):
            parents.setdefault(id(kid), set()).add(id(node))
    seen = set(targets)
    todo = list(targets)
    while todo:
        for p in parents.get(todo.pop(), ()):
            if p not in seen:
                seen.add(p)
                todo.append(p)
    return seen
