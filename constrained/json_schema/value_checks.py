"""Value-level checks: keywords the grammar only over-approximates, validated when a value completes.

The compiler makes the grammar a *superset* for keywords a context-free grammar
cannot express (``uniqueItems``, overlapping ``oneOf``, ``not``, ``multipleOf``,
...) and lists the sub-schemas holding them.  `JsonValueChecks` then follows the
JSON text as it is produced (a byte-level structure tracker: open arrays and
objects, current key or index, string state) and knows, for every open array or
object, the sub-schemas that *must* hold for it: a **check cursor** reached from
the root through ``properties`` / ``patternProperties`` / ``additionalProperties``
/ ``prefixItems`` / ``items`` (with ``allOf`` and ``$ref`` flattened; below an
``anyOf`` or ``oneOf``, into the one branch that admits the value's kind where only
one does, `CheckCursor.of_kind`; otherwise the applicable branch is not known, so
tracking stops and the nearest enclosing checked value covers it).  When an array or object whose
cursor reaches a checked keyword completes, the value is validated with
`jsonschema` against those sub-schemas (`SchemaValidators`), and the token that
completes an invalid value is refused; unless each of its checks is a ``maxLength`` or
``minLength`` the tracker counts on a string, reached through keywords the cursors follow
(`CheckCursor.tracked_only`): then nothing is left to validate.  A top-level scalar
is validated at the end.  Scalars inside containers are checked with their innermost
enclosing array or object.

**Prefix checks**: what is decidable before a value completes is checked as the text
grows, so the mask refuses the token that dooms a value, not only the one that
closes it: a value string's characters against its ``maxLength`` (counted as they
begin) and, at its closing quote, its ``minLength`` (one the grammar does not count:
`CheckCursor.min_length`), the comma that would start a member past ``maxProperties``
or an element past ``maxItems``, a key at its closing quote (repeated, ``false`` under a sub-schema
that applies to it, refused by ``propertyNames``), a scalar array element under
``uniqueItems`` as it completes (a string's closing quote, the comma after it).

Soundness: every rejection is of a value that violates a sub-schema applying to
it (or of an object with a repeated key: at its closing quote in a tracked object,
and anywhere in a value validated at its close), so no valid instance is lost; the
root is always validated when anything is checked (or every check is a counted
string length), so no invalid instance is accepted.  The mask stays exact token by
token for the grammar; with checks it is sound, exact on prefixes for ``maxLength``,
``minLength``, ``maxItems`` and ``maxProperties``, and may allow a token after which
only invalid completions remain for the keywords checked at completion (``minProperties``,
``contains``, ``not``, ...; docs/json-schema-keywords.md has the table).

Masks: only tokens that can close the innermost checked value (counted with
per-vocabulary numpy profiles of bracket depth, string state aware), that open a
value and continue it inside themselves, or that meet a live prefix check (a
comma, a string's end, more bytes than a string's remaining characters, an earlier
key's spelling: looked up in per-vocabulary indexes of the tokens' quoted segments
and leads, no scan of the tokens) are candidates; their union of profiles is
memoised per tracker shape, the candidates per grammar state.  Candidates that
differ only in blanks outside strings share one simulated verdict (`refused`), and an
object closing without a required key is refused from the keys read, unparsed; the
rest of the grammar's mask is kept as is.

For the completion search (`constrained.engine.completion`): `JsonValueChecks.failure`
says which value a text fails on (so only that value is rewritten), ``deficit``
counts the members ``minProperties`` / ``minItems`` still need, and
``blank_is_insignificant`` marks whitespace between tokens.

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
import re
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

import numpy as np

from constrained.json_schema.conjunction import (
    Conjunction,
    _child,
    flatten,
    item_items,
    property_items,
    root_part,
    tuple_length,
)
from constrained.json_schema.resolver import Located, SchemaIndex
from constrained.json_schema.validation import SchemaValidators
from constrained.masks import token_bits

OBJ, ARR = 0, 1
OUT, STR, ESC = 0, 1, 2                # tracker modes: outside strings, inside, after a backslash
KEY, COLON, VALUE = 0, 1, 2            # object phases
MAX_CLOSES = 8                         # close counts profiled exactly; more are simulated
# maxItems up to this is counted by the grammar (JsonSchemaOptions.max_repetition's default)
_COUNTED_ITEMS = 256
MAX_PADDED = 1 << 16          # `JsonValueChecks.pad` writes no completion longer than this (bytes)

_WS = frozenset(b" \t\n\r")
_HAS_BLANK = re.compile(rb"[ \t\n\r]")


# ---------------------------------------------------------------------- cursors
class CheckCursor:
    """The sub-schemas that must hold at one place of the instance, and their checks."""

    __slots__ = ("_bounds", "_doomed", "_items", "_kinds", "_names", "_props", "_required", "_tuple", "conj",
                 "plan", "tracked_only", "validate")

    def __init__(self, plan: JsonValueChecks, conj: Conjunction, validate: tuple[Located, ...],
                 tracked_only: bool = False) -> None:
        self.plan = plan
        self.conj = conj
        self.validate = validate          # the parts whose sub-trees hold checked keywords
        # every check those parts hold is a string length the tracker counts (`_counted_lengths`):
        # validating this value when it closes decides nothing the tracker has not
        self.tracked_only = tracked_only
        self._props: dict[str | None, CheckCursor | None] = {}
        self._items: dict[int, CheckCursor | None] = {}
        # keys that are not declared (and match no pattern) all get the same cursor
        patterns = any(p.get("patternProperties") for p in conj)
        self._names = None if patterns else {k for p in conj if isinstance(p.get("properties"), dict)
                                             for k in p.get("properties")}
        self._tuple = tuple_length(conj)
        self._bounds: dict[str, int | None] = {}
        self._doomed: dict[str, bool] = {}
        self._required: frozenset[str] | None = None
        self._kinds: dict[str, CheckCursor] = {}

    def of_kind(self, kind: str) -> CheckCursor:
        """This cursor for a value known to be of ``kind`` (``"string"``, ``"object"`` or
        ``"array"``, from its first byte): with the branch of each ``anyOf`` / ``oneOf``
        that is the only one admitting that kind (`_admits`) added to the conjunction, so
        its keywords are tracked too.  ``{"anyOf": [{"type": "null"}, member]}`` (pydantic's
        ``Optional``, ``extract(complete=True)``'s wrapper) is then tracked as ``member``:
        its prefix checks apply, its strings are counted.  Sound: the branch must hold
        where no other can.  Itself where nothing narrows (memoised per kind)."""
        hit = self._kinds.get(kind)
        if hit is None:
            hit = self
            for _ in range(MAX_NARROWING):
                added = hit._only_branches(kind)
                if not added:
                    break
                narrowed = self.plan.cursor(list(hit.conj) + added)
                if narrowed is None:                  # pragma: no cover - the parts still reach checks
                    break
                hit = narrowed
            self._kinds[kind] = hit
        return hit

    def _only_branches(self, kind: str) -> list:
        """The branches, not yet in the conjunction, that are the only ones of their ``anyOf``
        / ``oneOf`` to admit values of ``kind``."""
        have, out = {id(p.schema) for p in self.conj}, []
        for fits in _branches_admitting(self.plan, self.conj, kind):
            if len(fits) == 1 and not any(id(q.schema) in have for q in fits[0][1]):
                out.append(fits[0][0])
        return out

    def prop(self, key: str) -> CheckCursor | None:
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

    def bound(self, keyword: str) -> int | None:
        """The tightest integer ``maxLength`` / ``maxItems`` / ``maxProperties`` (the least)
        or ``minItems`` / ``minProperties`` (the greatest) of the conjunction (None: no such
        bound); ``uniqueItems`` as 1 when any part asks for it."""
        hit = self._bounds.get(keyword, False)
        if hit is False:
            values = [p.get(keyword) for p in self.conj if p.has(keyword)]
            if keyword == "uniqueItems":
                hit = 1 if any(v is True for v in values) else None
            else:
                nums = [int(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)
                        and v >= 0 and float(v).is_integer()]
                hit = (max(nums) if keyword.startswith("min") else min(nums)) if nums else None
            self._bounds[keyword] = hit
        return hit

    def min_length(self) -> int:
        """The fewest characters a string here must have that the grammar does not count,
        which the tracker counts instead (-1: no such bound): the greatest checked
        ``minLength`` of the conjunction (above `constrained.json_schema.compile.strings.
        MAX_COUNTED_LENGTH`, or dropped from an automaton too large), and of each ``anyOf``
        / ``oneOf`` part the least over its branches that admit strings (`_string_floor`):
        ``{"anyOf": [{"type": "null"}, {"type": "string", "minLength": 30}]}``, as
        ``extract(complete=True)`` wraps members, needs 30."""
        if not self.plan.checked_min_lengths:
            return -1
        hit = self._bounds.get("minLength!", _UNSET)
        if hit is _UNSET:
            floors = [_string_floor(self.plan, self.conj)] + [
                min((_string_floor(self.plan, conj) for _, conj in fits), default=0)
                for fits in _branches_admitting(self.plan, self.conj, "string")]
            best = max(floors)
            hit = self._bounds["minLength!"] = best if best > 0 else -1
        return hit

    def holds_short_strings(self) -> bool:
        """Whether a string right below this container (a member or an element) may have a
        checked ``minLength`` (`min_length`): then a token that holds a whole string there
        may be refused (`JsonValueChecks.candidates`).  True where members match patterns."""
        hit = self._bounds.get("short strings!", _UNSET)
        if hit is _UNSET:
            hit = bool(self.plan.checked_min_lengths)
            if hit and self._names is not None:
                below = [self.prop(k) for k in self._names] + [self.prop("\x00undeclared")]
                below += [self.item(i) for i in range(self._tuple + 1)]
                hit = any(c is not None and c.of_kind("string").min_length() >= 0 for c in below)
            self._bounds["short strings!"] = hit
        return hit

    def required(self) -> frozenset[str]:
        """The keys an object here must have: every part's ``required`` list (all parts
        hold at once; none under draft 03, whose ``required`` is a property's flag, nor
        beside a ``$ref`` that replaces its siblings).  An object closing without one of
        them is refused from the keys read, without validating it."""
        hit = self._required
        if hit is None:
            dialect = self.plan.dialect
            names: set[str] = set()
            if dialect.evaluates("required") and not dialect.required_in_property:
                for p in self.conj:
                    need = p.get("required")
                    if isinstance(need, list) and not (dialect.refs_replace_siblings and p.has("$ref")):
                        names.update(k for k in need if isinstance(k, str))
            hit = self._required = frozenset(names)
        return hit

    def key_doomed(self, key: str) -> bool:
        """Whether member ``key`` can never be valid here: a sub-schema that applies to its
        value is ``false`` (``additionalProperties: false`` in an ``allOf`` branch, a
        ``patternProperties`` pattern mapped to ``false``), or ``propertyNames`` refuses it.
        Only where `keys_restricted` (a lone ``additionalProperties: false`` is the
        grammar's to enforce; where the grammar admits more keys, e.g. beside more than 64
        properties, the object's close refuses them)."""
        hit = self._doomed.get(key)
        if hit is None and not self.keys_restricted():
            return False                  # left to the object's close (the mask's candidates agree)
        if hit is None:
            hit = False
            try:
                items = property_items(self.conj, key, self.plan.index, _undecided)
            except _Undecided:
                items = None
            if items and flatten(items, self.plan.index, self.plan.dialect) is None:
                hit = True
            if not hit:
                names = [_child(p, self.plan.index, "propertyNames") for p in self.conj if p.has("propertyNames")]
                if names:
                    conj = flatten(names, self.plan.index, self.plan.dialect)
                    hit = conj is None or not all(self.plan.validators.is_valid(q.loc, key) for q in conj)
            if len(self._doomed) > 4096:
                self._doomed.clear()
            self._doomed[key] = hit
        return hit

    def keys_restricted(self) -> bool:
        """Whether some key the grammar admits may be doomed here (`key_doomed` can be true
        where the grammar did not already exclude the key): ``propertyNames`` beyond a
        string's pattern/length/format, ``false`` under ``patternProperties``, or
        ``additionalProperties: false`` in more than one part (``allOf`` branches)."""
        hit = self._bounds.get("keys", _UNSET)
        if hit is _UNSET:                 # (a cached False is a verdict, not a miss)
            closed = sum(1 for p in self.conj if p.get("additionalProperties") is False)
            hit = closed > 1 or any(
                (p.has("propertyNames") and not (isinstance(p.get("propertyNames"), dict) and set(
                    p.get("propertyNames")) <= {"pattern", "minLength", "maxLength", "format", "type"}))
                or (isinstance(p.get("patternProperties"), dict)
                    and any(v is False for v in p.get("patternProperties").values()))
                for p in self.conj)
            self._bounds["keys"] = hit
        return hit

    def item(self, i: int) -> CheckCursor | None:
        i = min(i, self._tuple)                       # every position past the tuple is alike
        if i not in self._items:
            self._items[i] = self.plan.cursor(item_items(self.conj, i, self.plan.index))
        return self._items[i]


_UNSET: Any = object()
MAX_NARROWING = 4     # nested anyOf/oneOf levels `CheckCursor.of_kind` follows


def _branches_admitting(plan: JsonValueChecks, conj, kind: str) -> list[list[tuple]]:
    """For each ``anyOf`` / ``oneOf`` of ``conj``: its branches that may hold for a value of
    ``kind`` (`_admits`), as ``(located item, flattened conjunction)``."""
    out = []
    for p in conj:
        for kw in ("anyOf", "oneOf"):
            branches = p.get(kw)
            if not (isinstance(branches, list) and branches and plan.dialect.evaluates(kw)):
                continue
            fits = []
            for i in range(len(branches)):
                item = _child(p, plan.index, kw, i)
                flat = flatten([item], plan.index, plan.dialect)
                if flat is not None and _admits(flat, kind):
                    fits.append((item, flat))
            out.append(fits)
    return out


def _string_floor(plan: JsonValueChecks, conj) -> int:
    """The greatest checked ``minLength`` among the parts of ``conj`` (0: none)."""
    nums = [int(v) for p in conj if id(p.schema) in plan.checked_min_lengths for v in (p.get("minLength"),)
            if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 and float(v).is_integer()]
    return max(nums, default=0)


_KIND_TYPES = {"string": str, "object": dict, "array": list}


def _admits(conj, kind: str) -> bool:
    """Whether a value of ``kind`` (``"string"``, ``"object"``, ``"array"``) may satisfy
    ``conj`` as far as its ``type``, ``enum`` and ``const`` say (True where they say
    nothing clear, e.g. draft 03's schemas inside ``type``)."""
    names, cls = {kind, "any"}, _KIND_TYPES[kind]
    for p in conj:
        t = p.get("type")
        if isinstance(t, str) and t not in names:
            return False
        if isinstance(t, list) and all(isinstance(x, str) for x in t) and not names & set(t):
            return False
        if p.has("const") and not isinstance(p.get("const"), cls):
            return False
        e = p.get("enum")
        if p.has("enum") and isinstance(e, list) and not any(isinstance(x, cls) for x in e):
            return False
    return True


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
        self.commas: list[list[np.ndarray]] = []     # [mode][r]: tokens with >= r such commas
        self.comma_keys: list[np.ndarray] = []
        self.ends_string: list[np.ndarray] = []
        self.whole_strings: list[np.ndarray] = []   # [mode]: tokens that open a string and end it
        self.opens: list[np.ndarray] = []
        self._longer: dict[int, np.ndarray] = {}
        self._unions: dict[tuple, np.ndarray] = {}
        self._plain: np.ndarray | None = None
        self._begun: np.ndarray | None = None
        self._closing: np.ndarray | None = None
        self._run: tuple[np.ndarray, np.ndarray] | None = None
        self._by_length = order                       # token ids, longest first (`longer_ids`)
        self._sorted_lengths = lengths[order]
        self._longer_ids: dict[int, np.ndarray | None] = {}
        self._vocab = vocab
        self.lengths = lengths
        for start in (OUT, STR, ESC):
            mode = np.full(n, start, dtype=np.int8)
            depth = np.zeros(n, dtype=np.int32)
            low = np.zeros(n, dtype=np.int32)
            inner = np.zeros(n, dtype=bool)
            ncomma = np.zeros(n, dtype=np.int32)      # commas at the starting level or below (outside strings)
            after_comma = np.zeros(n, dtype=bool)
            ckey = np.zeros(n, dtype=bool)            # such a comma, then a whole string (a key) after it
            opened = np.zeros(n, dtype=bool)
            trig = np.zeros(n, dtype=bool)            # opens a container, then a comma or a string's end
            ostr = np.zeros(n, dtype=bool)            # opens a string
            qend = np.zeros(n, dtype=bool)            # a quote that ends a string there
            whole = np.zeros(n, dtype=bool)           # a string opened and ended inside the token
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
                comma_here = out & (c == 0x2C) & (d <= 0)
                ckey[:k] |= after_comma[:k] & s & quote & (d <= 0)
                after_comma[:k] |= comma_here
                ncomma[:k] += comma_here
                qend[:k] |= s & quote & (d <= 0)
                whole[:k] |= ostr[:k] & s & quote
                trig[:k] |= opened[:k] & ((out & (c == 0x2C)) | (s & quote))
                opened[:k] |= opening
                ostr[:k] |= out & quote
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
            trig |= ostr & (lengths[order] > 24)     # ... or opens a string past a counted maxLength
            flat = np.empty(n, dtype=np.int32)
            flat[order] = ncomma
            self.commas.append([pack_mask(flat >= r) for r in range(MAX_CLOSES + 1)])
            for acc, out_list in ((ckey, self.comma_keys), (qend, self.ends_string), (trig, self.opens),
                                  (whole, self.whole_strings)):
                flat = np.empty(n, dtype=bool)
                flat[order] = acc
                out_list.append(pack_mask(flat))
        self._key_index(vocab)

    def _key_index(self, vocab) -> None:
        """Where a token may spell a key: ``escapes`` (packed: tokens holding a backslash),
        ``segments`` (a quoted run ``"..."`` between two consecutive quotes of a token ->
        the ids of the tokens holding it) and ``leads`` (a token's bytes up to and
        including its first quote -> ids).  An earlier key's spelling without a backslash
        is a token substring exactly where it is one of the token's segments, and the rest
        of a key begun before the token (closing quote included) starts the token exactly
        where it is the token's lead: `JsonValueChecks` looks repeats up here instead of
        scanning the tokens (built once per vocabulary, over the tokens holding a quote)."""
        from constrained.masks import pack_mask

        mat = vocab.byte_matrix
        self.escapes = pack_mask((mat == 0x5C).any(axis=1)) if mat.size else pack_mask(np.zeros(0, dtype=bool))
        segments: dict[bytes, list[int]] = {}
        leads: dict[bytes, list[int]] = {}
        rows = np.flatnonzero((mat == 0x22).any(axis=1)) if mat.size else np.zeros(0, dtype=np.int64)
        tb = vocab.token_bytes
        for t in rows.tolist():
            b = tb[t]
            q = b.find(b'"')
            leads.setdefault(b[:q + 1], []).append(t)
            nxt = b.find(b'"', q + 1)
            while nxt != -1:
                segments.setdefault(b[q:nxt + 1], []).append(t)
                q, nxt = nxt, b.find(b'"', nxt + 1)
        self.segments = {k: np.array(v, dtype=np.int64) for k, v in segments.items()}
        self.leads = {k: np.array(v, dtype=np.int64) for k, v in leads.items()}

    def union(self, mode: int, r: int, opens: bool, commas: int, ends: bool, keys: bool,
              room: int, strings: bool = False) -> np.ndarray:
        """The tokens (packed) a tracker state's checks may refuse, read from string mode
        ``mode``: closing ``r`` containers (or opening and closing one inside the token),
        opening one and continuing it (``opens``), ``commas`` commas at the level, a
        string's end (``ends``), a comma and a whole key (``keys``), more than ``room``
        bytes (``room`` >= 0), a whole string (``strings``: opened and ended in the token).
        Memoised: it does not depend on the grammar's state."""
        key = (mode, r, opens, commas, ends, keys, room, strings)
        hit = self._unions.get(key)
        if hit is None:
            sel = self.internal[mode] | self.closes[mode][r] if r else self.internal[mode].copy()
            if opens:
                sel |= self.opens[mode]
            if commas:
                sel |= self.commas[mode][commas]
            if ends:
                sel |= self.ends_string[mode]
            if keys:
                sel |= self.comma_keys[mode]
            if strings:
                sel |= self.whole_strings[mode]
            if room >= 0:
                sel |= self.longer(room)
            if len(self._unions) > 1024:
                self._unions.clear()
            hit = self._unions[key] = sel
        return hit

    def plain_code_points(self) -> np.ndarray:
        """Int32 per token id: the characters the token begins inside a JSON string when it
        is plain string content (no quote, backslash or control character, and it does not
        begin inside a UTF-8 sequence): its bytes but UTF-8 continuation bytes, a trailing
        incomplete character counting as the one it begins (as `_code_points` counts); -1
        for every other token.  Read by `JsonValueChecks.refused` (built on first use)."""
        hit = self._plain
        if hit is None:
            mat, lengths = self._vocab.byte_matrix, self.lengths
            real = np.arange(mat.shape[1])[None, :] < lengths[:, None]
            special = ((mat == 0x22) | (mat == 0x5C) | (mat < 0x20)) & real
            follow = (mat >= 0x80) & (mat < 0xC0) & real
            hit = (real & ~follow).sum(axis=1).astype(np.int32)
            hit[special.any(axis=1) | (follow[:, 0] if mat.shape[1] else False) | (lengths == 0)] = -1
            hit.setflags(write=False)
            self._plain = hit
        return hit

    def begun_characters(self) -> np.ndarray:
        """Int32 per token id: the characters the token surely begins when read inside a
        JSON string, before anything that may end the string: its leading run of printable
        ASCII content (no quote or backslash), plus one where a backslash follows the run
        (an escape is a character, counted as soon as it begins).  A quote after the run
        ends the string with the run's characters.  Read by `JsonValueChecks.refused`
        (built on first use)."""
        hit = self._begun
        if hit is None:
            run, after = self._content_run()
            hit = (run + ((run < self.lengths) & (after == 0x5C))).astype(np.int32)
            hit.setflags(write=False)
            self._begun = hit
        return hit

    def closing_run(self) -> np.ndarray:
        """Int32 per token id: where the token, read inside a JSON string, ends the string
        right after its leading run of printable ASCII content (no quote or backslash), the
        run's characters; -1 for every other token.  Read by `JsonValueChecks.refused`
        (a string ended short of its checked ``minLength``; built on first use)."""
        hit = self._closing
        if hit is None:
            run, after = self._content_run()
            closes = (run < self.lengths) & (after == 0x22)
            hit = np.where(closes, run, -1).astype(np.int32)
            hit.setflags(write=False)
            self._closing = hit
        return hit

    def _content_run(self) -> tuple[np.ndarray, np.ndarray]:
        """Per token id: the length of its leading run of printable ASCII string content (no
        quote or backslash), and the byte after the run (meaningful where the run is
        shorter than the token)."""
        hit = self._run
        if hit is None:
            mat, lengths = self._vocab.byte_matrix, self.lengths
            n, width = len(lengths), mat.shape[1]
            if width == 0:
                hit = (np.zeros(n, np.int64), np.zeros(n, mat.dtype))
            else:
                real = np.arange(width)[None, :] < lengths[:, None]
                content = (mat >= 0x20) & (mat <= 0x7E) & (mat != 0x22) & (mat != 0x5C) & real
                stops = ~content
                run = np.where(stops.any(axis=1), np.argmax(stops, axis=1), width)
                hit = (run, mat[np.arange(n), np.minimum(run, width - 1)])
            self._run = hit
        return hit

    def longer_ids(self, room: int, limit: int = 2048) -> np.ndarray | None:
        """Ids (ascending) of the tokens of more than ``room`` bytes (memoised); None when there are
        more than ``limit`` of them (then the packed `longer` costs less).  Far from a
        ``maxLength`` only the vocabulary's longest tokens can run past it: a handful of
        ids, where the packed set would make the candidates depend on the exact room."""
        hit = self._longer_ids.get(room, _NONE)
        if hit is _NONE:
            count = int(np.count_nonzero(self._sorted_lengths[:limit + 1] > room))
            hit = None if count > limit else np.sort(self._by_length[:count]).astype(np.int64)
            if len(self._longer_ids) > 512:
                self._longer_ids.clear()
            self._longer_ids[room] = hit
        return hit

    def longer(self, room: int) -> np.ndarray:
        """Tokens of more than ``room`` bytes (packed)."""
        from constrained.masks import pack_mask

        hit = self._longer.get(room)
        if hit is None:
            if len(self._longer) > 512:
                self._longer.clear()
            hit = self._longer[room] = pack_mask(self.lengths > room)
        return hit


@lru_cache(maxsize=8)
def _profiles(vocab) -> _Profiles:
    return _Profiles(vocab)


def vocabulary_profiles(vocab) -> _Profiles:
    """The per-vocabulary token classes the checks read (built once per vocabulary;
    `constrained.warm_up` builds them at start)."""
    return _profiles(vocab)


# ---------------------------------------------------------------------- the checks
class JsonValueChecks:
    """Value-level checks of one compiled schema (carried by its `Grammar` as ``checks``).

    The engine's `CheckedMatcher` drives it through `start`, `step`, `accepts_end`
    and `candidates`; a tracker state is an immutable tuple, so forks share it.
    """

    def __init__(self, index: SchemaIndex, validators: SchemaValidators, checked: list[Located],
                 keywords: list[str]) -> None:
        self.index = index
        self.dialect = validators.dialect
        self.validators = validators
        self.checked = checked            # (``keywords[i]``: the keyword checked at ``checked[i]``)
        edges = _schema_edges(index)
        targets = {id(loc.schema) for loc in checked}
        # the schema objects whose minLength the grammar leaves to the checks (`CheckCursor.min_length`)
        self.checked_min_lengths = {id(loc.schema) for loc, kw in zip(checked, keywords, strict=True)
                                    if kw == "minLength"}
        self._reaching = _ancestors(edges, targets)     # the schema objects from which a check is reachable
        self._beyond_tracker = _beyond_tracker(edges, self._reaching, targets - _counted_lengths(checked, keywords))
        self._verdicts: dict[tuple[int, bytes], bool] = {}
        self._candidates: dict[tuple, np.ndarray] = {}
        # (grammar state, mode, ...) -> (the tokens that may end a key there, those with an escape)
        self._repeat_bases: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}
        self._explained: dict[tuple, tuple] = {}
        self.root = self.cursor([root_part(index)])
        digest = hashlib.sha256(json.dumps(index.document, sort_keys=True, default=str).encode())
        digest.update(json.dumps(sorted(loc.pointer for loc in checked)).encode())
        self._hash = digest.hexdigest()

    def content_hash(self) -> str:
        return self._hash

    def witnesses(self) -> tuple[bytes, ...]:
        """Short string contents the schema is likely to accept (its formats' and patterns'
        shortest matches, enum/const/examples strings), JSON-escaped: what the completion
        search writes inside strings that only a check decides; then numbers that meet the
        numeric keywords of one, two or three sub-schemas at once (``multipleOf`` of each
        and the bounds: `constrained.json_schema.witnesses.number_witnesses`), which the
        search also writes where a value starts."""
        from constrained.json_schema.witnesses import number_witnesses, string_witnesses

        doc = self.index.document
        out = [json.dumps(w, ensure_ascii=False)[1:-1].encode("utf-8") for w in string_witnesses(doc)]
        return tuple(dict.fromkeys(out + [w.encode() for w in number_witnesses(doc)]))

    def cursor(self, items) -> CheckCursor | None:
        """The cursor of a place where ``items`` apply (None: nothing below is checked)."""
        conj = flatten(items, self.index, self.dialect) if items else ()
        if not conj:
            return None
        validate = tuple(p.loc for p in conj if id(p.schema) in self._reaching)
        if not validate:
            return None
        # (a patternProperties pattern may leave a member's cursor undecided, and its
        # strings uncounted: then this value's close validates them)
        tracked_only = (not any(id(p.schema) in self._beyond_tracker for p in conj)
                        and not any("patternProperties" in p.schema for p in conj))
        return CheckCursor(self, conj, validate, tracked_only)

    # ------------------------------------------------------------------ validation
    def value_ok(self, cursor: CheckCursor, text: bytes | bytearray) -> bool:
        if cursor.tracked_only:            # nothing the tracker has not counted: no parse, no validator
            return True
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
        """The tracker state before any byte: (frames, mode, string start, string is a key,
        the string's maxLength or -1, the string's checked minLength or -1).  A frame is
        (kind, start offset, cursor, phase, key or index, the keys read so far (objects
        with a cursor)); a value's cursor is narrowed to its kind (`CheckCursor.of_kind`)."""
        return ((), OUT, -1, False, -1, -1)

    def step(self, state: tuple, text: bytes, data: bytes) -> tuple | None:
        """The state after ``data`` follows ``text``; None if ``data`` completes an invalid
        value, or dooms one on a prefix (see the module docstring: a string past its
        ``maxLength`` or ended short of its checked ``minLength``, an element past
        ``maxItems``, a member past ``maxProperties``, a key no sub-schema admits, a
        repeated scalar under ``uniqueItems``)."""
        frames, mode, sstart, is_key, limit, low = state
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
                if limit >= 0 and _too_long(text, data, sstart, base + i - 1, limit):
                    return None
                if low >= 0 and _too_short(text, data, sstart, base + i - 1, low):
                    return None                              # a string ended short of its minLength
                if is_key and frames:
                    raw = _slice(text, data, sstart, base + i)
                    key = raw[1:-1].decode("utf-8", "surrogatepass") if b"\\" not in raw else json.loads(raw)
                    kind, fstart, cur, _, _, keys = frames[-1]
                    if cur is not None:
                        if key in keys or cur.key_doomed(key):
                            return None                      # a repeated key, or one no schema admits
                        keys = keys + (key,)
                    frames = frames[:-1] + ((kind, fstart, cur, COLON, key, keys),)
                elif frames and frames[-1][0] == ARR and frames[-1][2] is not None \
                        and frames[-1][2].bound("uniqueItems") and _repeats(text, data, frames[-1][1], base + i):
                    return None
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
                sstart, mode, limit, low = base + i, STR, -1, -1
                if not is_key:
                    cur = self._child(frames)
                    if cur is not None:
                        cur = cur.of_kind("string")
                        m = cur.bound("maxLength")
                        limit = -1 if m is None else m
                        low = cur.min_length()
            elif c == 0x7B or c == 0x5B:                                    # { [
                cur = self._child(frames)
                if cur is not None:
                    cur = cur.of_kind("object" if c == 0x7B else "array")
                frames = frames + (((OBJ, base + i, cur, KEY, None, ()) if c == 0x7B
                                    else (ARR, base + i, cur, VALUE, 0, ())),)
            elif c == 0x7D or c == 0x5D:                                    # } ]
                if frames:
                    kind, fstart, cur, _, _, keys = frames[-1]
                    frames = frames[:-1]
                    if cur is not None:
                        if kind == OBJ and c == 0x7D and not cur.required().issubset(keys):
                            return None                      # a required key is missing
                        if not self.value_ok(cur, _slice(text, data, fstart, base + i + 1)):
                            return None
            elif c == 0x3A:                                                 # :
                if frames and frames[-1][0] == OBJ:
                    kind, fstart, cur, _, key, keys = frames[-1]
                    frames = frames[:-1] + ((kind, fstart, cur, VALUE, key, keys),)
            elif c == 0x2C and frames:                                      # ,
                kind, fstart, cur, _, slot, keys = frames[-1]
                if kind == ARR and cur is not None:
                    m = cur.bound("maxItems")
                    if m is not None and m > _COUNTED_ITEMS and slot + 2 > m:
                        return None                          # an element past maxItems
                    if cur.bound("uniqueItems") and _repeats(text, data, fstart, base + i):
                        return None                          # a scalar element repeated
                elif kind == OBJ and cur is not None and _past(cur.bound("maxProperties"), len(keys) + 1):
                    return None                              # a member past maxProperties
                frames = frames[:-1] + (((kind, fstart, cur, KEY, None, keys) if kind == OBJ
                                         else (kind, fstart, cur, VALUE, slot + 1, keys)),)
            i += 1
        if mode != OUT and limit >= 0 and base + n - sstart - 1 > limit \
                and _too_long(text, data, sstart, base + n, limit):
            return None
        return (frames, mode, sstart, is_key, limit, low)

    def chars_left(self, state: tuple, text: bytes) -> int | None:
        """Characters the string being read may still take before its ``maxLength``
        (None: not in a string with a checked maxLength)."""
        _, mode, sstart, _, limit, _ = state
        if mode == OUT or limit < 0:
            return None
        return limit - _code_points(bytes(text[sstart + 1:]))

    def _child(self, frames: tuple) -> CheckCursor | None:
        if not frames:
            return self.root
        kind, _, cur, _, slot, _ = frames[-1]
        if cur is None:
            return None
        if kind == ARR:
            return cur.item(slot)
        return cur.prop(slot) if isinstance(slot, str) else None

    def deficit(self, state: tuple) -> int:
        """A lower bound on the bytes the open containers still need for their
        ``minProperties`` / ``minItems`` (5 per missing member: ``,"":0``, 2 per missing
        element: ``,0``), which the grammar's completion does not count: the completion
        search adds it to its heuristic, so writing members is progress, not a detour."""
        total = 0
        for f in state[0]:
            cur = f[2]
            if cur is None:
                continue
            if f[0] == OBJ:
                lo = cur.bound("minProperties")
                if lo is not None and lo > len(f[5]):
                    total += 5 * (lo - len(f[5]))
            else:
                lo = cur.bound("minItems")
                if lo is not None and lo > f[4] + 1:
                    total += 2 * (lo - f[4] - 1)
        return total

    def blank_is_insignificant(self, state: tuple) -> bool:
        """Whether a blank read in ``state`` is whitespace between tokens (outside strings),
        which no check can tell from its absence: the completion search skips such blanks
        unless the grammar needs them."""
        return state[1] == OUT

    def failure(self, state: tuple, text: bytes, data: bytes) -> CheckFailure | None:
        """Where ``data`` (read after ``text`` in ``state``, e.g. the grammar's completion)
        first fails a check, or None if it passes every check to the end.

        The failing value is located as precisely as `jsonschema` says: the container
        whose closing byte a check refuses (or the top-level scalar refused at the
        end), then the member or element its first error points at
        (``error.absolute_path`` relative to that container).  ``offset`` is where that
        value starts in ``text + data``; the completion search rewrites from there."""
        text, data = bytes(text), bytes(data)
        whole = text + data
        end = self.step(state, text, data)
        if end is not None:
            if self.accepts_end(end, whole) or self.root is None:
                return None
            start = len(whole) - len(whole.lstrip())
            return self._explain(self.root, whole, start, len(whole))
        cs, pos, base = state, 0, len(text)
        for j in range(len(data)):
            if data[j] not in (0x7D, 0x5D, 0x2C, 0x22) and j + 1 < len(data):
                continue
            after = self.step(cs, whole[:base + pos], data[pos:j + 1])
            if after is not None:
                cs, pos = after, j + 1
                continue
            for k in range(pos, j + 1):                    # the byte that fails
                after = self.step(cs, whole[:base + k], data[k:k + 1])
                if after is None:
                    return self._refusal(cs, whole, base + k)
                cs = after
            return None                                    # pragma: no cover - a chunk fails, its bytes pass
        return None                                        # pragma: no cover - step refused, no byte does

    def pad(self, state: tuple, text: bytes, data: bytes, failure: CheckFailure,
            content: Callable[[int], Sequence[bytes]] | None = None) -> bytes | None:
        """``data`` (a completion of ``text``, read in ``state``) with the value ``failure``
        refuses for being too short grown to pass.

        A string short of its ``minLength`` (the tracker's or its container's check): the
        first unit ``content(offset)`` gives that passes (units of content that take the
        grammar back to its state before the string's closing quote at ``offset`` of ``text
        + data``; a blank where not given), repeated before that quote, as few times as pass
        (`_lengthened`).

        An array short of its ``minItems``: its last element, as written,
        repeated after it (1, 2, 4, ... copies, up to 4096 and `MAX_PADDED` bytes), the fewest copies
        after which no check refuses that array any longer; None where the array has no
        element to repeat, closes inside ``text``, or no count passes (a repeat refused:
        ``uniqueItems``, ``maxContains``...).  The completion search (`_repair`) uses it
        where writing hundreds of elements byte by byte is past its budget.

        Example:
            >>> from constrained import Grammar
            >>> checks = Grammar.from_json_schema({"type": "array", "items": {"type": "integer"},
            ...                                    "minItems": 300}).checks
            >>> state = checks.step(checks.start(), b"", b"[1")
            >>> f = checks.failure(state, b"[1", b"]")
            >>> out = checks.pad(state, b"[1", b"]", f)
            >>> out.count(b","), out[-3:]
            (299, b',1]')
        """
        if failure.keyword == "minLength":
            return self._lengthened(state, text, data, failure, content)
        if failure.keyword != "minItems":
            return None
        text, data = bytes(text), bytes(data)
        whole = text + data
        close = failure.value_end - 1
        if close < len(text) or close >= len(whole) or whole[close] != 0x5D:
            return None
        i, last = failure.value_start + 1, None                 # the spans of the array's elements
        while True:
            i = _skip_blanks(whole, i)
            if i >= close:
                break
            end = _skip_value(whole, i)
            if end <= i:
                return None
            last = (i, end)
            i = _skip_blanks(whole, end)
            if i < close and whole[i] == 0x2C:
                i += 1
        if last is None:
            return None
        elem = b"," + whole[last[0]:last[1]]
        k = close - len(text)

        def short(n: int) -> bool | None:
            """Whether ``n`` copies leave the array short (None: a check refuses it otherwise)."""
            f = self.failure(state, text, data[:k] + elem * n + data[k:])
            if f is None or f.offset > failure.value_end + n * len(elem):
                return False                     # the array passes (something after it may not)
            if f.keyword == "minItems" and f.value_start == failure.value_start:
                return True
            return None

        n = 1
        while (verdict := short(n)) is True:
            n *= 2
            if n > 4096 or len(data) + n * len(elem) > MAX_PADDED:
                return None
        if verdict is None:
            return None
        lo, hi = n // 2 + 1, n                 # the fewest copies: short at n // 2, not at n
        while lo < hi:
            mid = (lo + hi) // 2
            verdict = short(mid)
            if verdict is None:
                return None
            if verdict:
                lo = mid + 1
            else:
                hi = mid
        return data[:k] + elem * hi + data[k:]

    def _lengthened(self, state: tuple, text: bytes, data: bytes, failure: CheckFailure,
                    content: Callable[[int], Sequence[bytes]] | None) -> bytes | None:
        """``data`` with the string starting at ``failure.offset`` (short of a ``minLength``)
        grown by copies of one content byte before its closing quote, the fewest that pass
        (up to `MAX_PADDED` bytes); None where its quote is in ``text``, or no content byte
        and count pass."""
        text, data = bytes(text), bytes(data)
        whole = text + data
        start = failure.offset
        if not 0 <= start < len(whole) or whole[start] != 0x22:
            return None
        close = _skip_value(whole, start) - 1
        if close < len(text) or close >= len(whole) or whole[close] != 0x22:
            return None
        k = close - len(text)
        for filler in (content(close) if content is not None else (b" ",)):

            def short(n: int, filler: bytes = filler) -> bool | None:
                """Whether ``n`` copies leave the string short (None: refused otherwise)."""
                f = self.failure(state, text, data[:k] + filler * n + data[k:])
                if f is None or f.offset != start:
                    return False             # the string passes (another value may not)
                return True if f.keyword == "minLength" else None

            n = 1
            while (verdict := short(n)) is True and len(data) + 2 * n * len(filler) <= MAX_PADDED:
                n *= 2
            if verdict is True:
                continue
            # the fewest copies that are not short (short at n // 2, not at n: then refused
            # otherwise past the bound, e.g. a maxLength, or passing at it)
            lo, hi = n // 2 + 1, n
            while lo < hi:
                mid = (lo + hi) // 2
                if short(mid) is True:
                    lo = mid + 1
                else:
                    hi = mid
            if short(hi) is False:
                return data[:k] + filler * hi + data[k:]
        return None

    def _refusal(self, cs: tuple, whole: bytes, at: int) -> CheckFailure:
        """The failure of byte ``whole[at]`` read in state ``cs``: a container's close (its
        validation's first error) or a prefix check (a string past maxLength, a doomed key,
        a repeated element, a member or element past the maximum, a string ended short of
        its checked minLength: then ``value_start:value_end`` is that string)."""
        frames, mode, sstart, is_key, limit, low = cs
        byte = whole[at]
        top = frames[-1] if frames else None
        if mode == OUT and byte in (0x7D, 0x5D) and top is not None:
            return self._explain(top[2], whole, top[1], at + 1)
        if mode == STR and byte == 0x22 and not is_key and low >= 0 and _code_points(whole[sstart + 1:at]) < low:
            own = self._child(frames)
            own = own.of_kind("string") if own is not None else None
            where = next((p.pointer for p in own.conj if id(p.schema) in self.checked_min_lengths
                          and p.get("minLength") == low), "") if own is not None else ""
            return CheckFailure(keyword="minLength", pointer=f"{where}/minLength", offset=sstart,
                                value_start=sstart, value_end=at + 1)
        cur = top[2] if top is not None else self.root
        where = cur.validate[0].pointer if cur is not None and cur.validate else ""
        if mode != OUT and limit >= 0 and not (byte == 0x22 and mode == STR and is_key):
            keyword, start = "maxLength", sstart
        elif mode == STR and byte == 0x22 and is_key:
            try:
                key = json.loads(whole[sstart:at + 1])
            except ValueError:                             # pragma: no cover
                key = None
            if top is not None and key in top[5]:
                keyword = "duplicate key"
            else:
                keyword = "propertyNames" if cur is not None and any(p.has("propertyNames") for p in cur.conj) \
                    else "additionalProperties"
            start = sstart
        elif mode == STR and byte == 0x22:
            keyword, start = "uniqueItems", sstart
        elif top is not None and top[0] == ARR:
            keyword = "maxItems" if cur is not None and cur.bound("maxItems") is not None \
                and top[4] + 2 > cur.bound("maxItems") else "uniqueItems"
            start = top[1]
        else:
            keyword, start = "maxProperties", top[1] if top is not None else at
        return CheckFailure(keyword=keyword, pointer=f"{where}/{keyword}", offset=start,
                            value_start=top[1] if top is not None else start, value_end=at + 1)

    def _explain(self, cursor: CheckCursor, whole: bytes, start: int, end: int) -> CheckFailure:
        """The failure of the value ``whole[start:end]`` at ``cursor``: its first
        `jsonschema` error's keyword, schema pointer and the start of the sub-value it names."""
        key = (id(cursor), whole[start:end])
        hit = self._explained.get(key)
        if hit is None:
            hit = (None, "", ())
            try:
                value = json.loads(whole[start:end], object_pairs_hook=_unique_keys)
            except (ValueError, RecursionError):
                hit = ("duplicate key", "", ())
            else:
                for loc in cursor.validate:
                    try:
                        err = next(iter(self.validators.validator(loc).iter_errors(value)), None)
                    except Exception:  # noqa: BLE001 - a validator that cannot say why
                        err = None
                    if err is not None:
                        pointer = loc.pointer + "".join("/" + str(p) for p in err.relative_schema_path)
                        hit = (_short_of(err) or str(err.validator), pointer, tuple(err.absolute_path))
                        break
            if len(self._explained) > 4096:
                self._explained.clear()
            self._explained[key] = hit
        keyword, pointer, path = hit
        return CheckFailure(keyword=keyword, pointer=pointer, offset=start + _locate(whole[start:end], path),
                            value_start=start, value_end=end)

    def accepts_end(self, state: tuple, text: bytes) -> bool:
        """Whether the complete text passes the checks (a top-level scalar is validated here)."""
        frames = state[0]
        if frames or self.root is None:
            return not frames
        head = text.lstrip()[:1]
        if head in (b"{", b"["):
            return True                                # validated when it closed
        return self.value_ok(self.root, text)

    def candidates(self, state: tuple, mask: np.ndarray, vocab, key=None, text=None) -> np.ndarray:
        """Ids of the tokens allowed by ``mask`` whose bytes may complete a checked value or
        meet a prefix check (a comma under maxItems/maxProperties/uniqueItems, the end of a
        key whose names are restricted or of a string element under uniqueItems, characters
        past a string's maxLength, the end of a string still short of its checked minLength, a
        container opened and continued inside the token).

        ``key`` identifies ``mask`` (the grammar state id): results are memoised per
        (key, string mode, closes needed, prefix checks live); ``text`` (the bytes so far)
        tells how many characters a string with a maxLength may still take.  An id may
        appear twice (the callers only read them)."""
        frames, mode = state[0], state[1]
        deepest = max((k for k, f in enumerate(frames) if f[2] is not None), default=-1)
        internal = deepest >= 0 or (not frames and self.root is not None)
        if not internal:
            return _NONE
        r = min(len(frames) - deepest, MAX_CLOSES) if deepest >= 0 else 0
        # a value opened inside the token and continued there gets a cursor only below one
        opens = (frames[-1][2] is not None) if frames else self.root is not None
        need = MAX_CLOSES + 1                 # tokens with at least this many commas (at or below the level)
        ends = keys = dup_ends = dup_keys = False
        spellings: set[bytes] = set()                 # keys a token may repeat (dup_ends / dup_keys)
        starts: set[bytes] = set()                    # ... or the rest of one begun before the token
        top = frames[-1] if frames else None
        for f in frames[deepest:] if deepest >= 0 else ():
            cur = f[2]
            if cur is None:
                continue
            if f[0] == ARR:
                m = cur.bound("maxItems")
                if m is not None and m > _COUNTED_ITEMS:   # smaller bounds: the grammar counts them
                    need = min(need, max(1, m - f[4]))
                if cur.bound("uniqueItems"):
                    ends = True
                    need = min(need, 1 if f[4] >= 1 else 2)
                continue
            m = cur.bound("maxProperties")
            if m is not None:
                need = min(need, max(1, m - len(f[5])))
            restricted = cur.keys_restricted()
            if restricted or f[5]:                    # a key the token ends may be refused
                if mode != OUT and state[3] and f is top:
                    if restricted:
                        ends = True
                    else:                             # tokens that end this key as an earlier one
                        rest = _repeat_rests(state, f, text)
                        if rest is None:
                            ends = True
                        elif rest:
                            dup_ends = True
                            starts.update(rest)
                    continue
                if not restricted:                    # only a repeat: tokens spelling an earlier key
                    spellings.update(map(_spelling, f[5]))
                if f is top and mode == OUT and f[3] == KEY:
                    ends, dup_ends = ends or restricted, dup_ends or not restricted
                else:                                 # inner values or this one end, then ',"key"'
                    keys, dup_keys = keys or restricted, dup_keys or not restricted
        if mode != OUT and not state[3] and state[5] >= 0 and (
                text is None or _code_points(bytes(text[state[2] + 1:])) < state[5]):
            ends = True                           # the string may end short of its checked minLength
        # a string opened and ended inside the token may be short of a checked minLength
        holder = top[2] if top is not None else self.root
        strings = opens and holder is not None and bool(self.checked_min_lengths) and (
            holder.holds_short_strings() if top is not None else holder.of_kind("string").min_length() >= 0)
        commas = need if need <= MAX_CLOSES else 0
        room = -1
        if mode != OUT and state[4] >= 0:
            left = self.chars_left(state, text) if text is not None else 0
            room = max(0, left)
        prof = _profiles(vocab)
        # the few tokens longer than the room are added apart, so the memoised rest does
        # not change with every character of a string read towards its maxLength
        longer = prof.longer_ids(room) if room >= 0 else None
        packed_room = -1 if longer is not None else room
        memo_key = None if key is None else (key, mode, r, commas, ends, keys, packed_room, strings,
                                             vocab.content_hash())
        out = self._candidates.get(memo_key) if memo_key is not None else None
        if out is None:
            sel = prof.union(mode, r, opens, commas, ends, keys, packed_room, strings)
            out = _ids(sel & mask[: sel.size])
            if memo_key is not None:
                if len(self._candidates) > 65536:
                    self._candidates.clear()
                self._candidates[memo_key] = out
        if longer is not None and longer.size:
            longer = longer[token_bits(mask, longer)]
            if longer.size:             # (ids may repeat: the callers only read them)
                out = np.concatenate([out, longer])
        if dup_ends or dup_keys:
            out = self._repeat_candidates(out, mask, vocab, key, mode, dup_ends, dup_keys, spellings, starts)
        return out

    def refused(self, state: tuple, text, ids: np.ndarray, vocab) -> np.ndarray:
        """The tokens of ``ids`` (candidates, `candidates`) after which `step` returns None,
        as an int64 array (ascending where decided by counts, then the simulated ones).

        Tokens that differ only in blanks outside strings (``"}``, ``"},\n``, ``" }``
        read outside a string...) get one verdict, simulated once: a blank there moves
        offsets but changes no key, string, element or parsed value a check reads.

        Example:
            >>> from constrained import Grammar, TokenVocabulary
            >>> checks = Grammar.from_json_schema({"type": "array", "items": {"type": "integer"},
            ...                                    "uniqueItems": True}).checks
            >>> vocab = TokenVocabulary.from_token_bytes([b"1,", b" 1,", b"1 ,", b"2,"])
            >>> state = checks.step(checks.start(), b"", b"[1,")
            >>> checks.refused(state, b"[1,", np.arange(4), vocab).tolist()
            [0, 1, 2]
        """
        mode = state[1]
        tb = vocab.token_bytes
        verdicts: dict[bytes, bool] = {}
        counted = None
        out = []
        sstart, limit = state[2], state[4]
        if mode == STR and limit >= 0 and text is not None and sstart < len(text) and ids.size > 8:
            # inside a string with a checked maxLength, a plain token can only make it too
            # long: refused exactly where the characters so far and its own pass the bound
            # (`step` reads it so: no quote or backslash to act on).  Any token is refused
            # where the characters it surely begins pass the bound (the string, ended or
            # not, is then too long: `step` counts them at its quote or its end); the rest
            # are stepped.  Near the bound nearly every token is refused: counted, not
            # stepped or listed one by one
            so_far = _complete_code_points(bytes(text[sstart + 1:]))
            if so_far is not None:
                prof = _profiles(vocab)
                own = prof.plain_code_points()[ids]
                plain = own >= 0
                over = (plain & (so_far + own > limit)) | (so_far + prof.begun_characters()[ids] > limit)
                counted = ids[over].astype(np.int64)
                ids = ids[~(plain | over)]
        low = state[5]
        if mode == STR and low >= 0 and text is not None and sstart < len(text) and ids.size > 8:
            # a token that ends the string after a run of plain characters ends it with the
            # characters so far and the run's: short of the checked minLength, it is refused
            # (counted, not stepped; the others are stepped)
            so_far = _complete_code_points(bytes(text[sstart + 1:]))
            if so_far is not None and so_far < low:
                run = _profiles(vocab).closing_run()[ids]
                short = (run >= 0) & (so_far + run < low)
                counted = ids[short].astype(np.int64) if counted is None \
                    else np.concatenate([counted, ids[short].astype(np.int64)])
                ids = ids[~short]
        # a class that ends a value with its first byte (a string's closing quote, a
        # container's close, a comma after an element) and reads on: the value is checked
        # once per such byte, and each class's rest from the state after it (reading a
        # byte sequence is reading its parts in turn)
        leads = _STRING_END if mode == STR else _VALUE_ENDS if mode == OUT else ()
        after_lead: dict[bytes, tuple | None] = {}
        for t in ids.tolist():
            data = tb[t]
            cls = _verdict_class(mode, data)
            ok = verdicts.get(cls)
            if ok is None:
                lead = cls[:1]
                if len(cls) > 1 and lead in leads:
                    after = after_lead.get(lead, _UNSET)
                    if after is _UNSET:
                        nxt = self.step(state, text, lead)
                        after = after_lead[lead] = None if nxt is None else (nxt, bytes(text) + lead)
                    ok = after is not None and self.step(after[0], after[1], cls[1:]) is not None
                else:
                    ok = self.step(state, text, data) is not None
                verdicts[cls] = ok
            if not ok:
                out.append(t)
        stepped = np.array(out, dtype=np.int64)
        return stepped if counted is None else np.concatenate([counted, stepped])

    def _repeat_candidates(self, out, mask, vocab, key, mode, dup_ends, dup_keys, spellings,
                           starts) -> np.ndarray:
        """``out`` plus the tokens that may end a key repeating an earlier one: of those that
        end a string (``dup_ends``) or write a whole string after a comma (``dup_keys``),
        the ones holding an escape, an earlier key's spelling (a key that begins in the
        token is there whole: an unescaped key has one spelling) or, inside a key begun
        before the token, beginning with the rest of an earlier key (``starts``)."""
        memo_key = None if key is None else ("repeat", key, mode, dup_ends, dup_keys, frozenset(spellings),
                                             frozenset(starts), vocab.content_hash())
        hit = self._candidates.get(memo_key) if memo_key is not None else None
        if hit is None:
            prof = _profiles(vocab)
            base_key = None if key is None else ("repeat-base", key, mode, dup_ends, dup_keys, vocab.content_hash())
            base = self._repeat_bases.get(base_key) if base_key is not None else None
            if base is None:
                sel = np.zeros_like(prof.ends_string[mode])
                if dup_ends:
                    sel |= prof.ends_string[mode]
                if dup_keys:
                    sel |= prof.comma_keys[mode]
                sel &= mask[: sel.size]
                base = (sel, _ids(sel & prof.escapes))
                if base_key is not None:
                    if len(self._repeat_bases) > 4096:
                        self._repeat_bases.clear()
                    self._repeat_bases[base_key] = base
            sel, escaped = base
            found = [prof.segments[sp] for sp in spellings if sp in prof.segments]
            found += [prof.leads[r] for r in starts if r in prof.leads]
            if found:
                ids = np.concatenate(found)
                ids = ids[token_bits(sel, ids)]
                hit = np.union1d(escaped, ids) if ids.size else escaped
            else:
                hit = escaped
            if memo_key is not None:
                self._candidates[memo_key] = hit
        if not hit.size:
            return out
        return np.union1d(out, hit) if out.size else hit


def _ids(sel: np.ndarray) -> np.ndarray:
    """The ids of the bits set in the packed bitset ``sel``."""
    words = np.flatnonzero(sel)
    if words.size == 0:
        return _NONE
    bits = np.unpackbits(sel[words].view(np.uint8), bitorder="little").reshape(-1, 32)
    row, col = np.nonzero(bits)
    return (words[row] * 32 + col).astype(np.int64)


_NONE = np.zeros(0, dtype=np.int64)
_STRING_END = (b'"',)                 # a first byte that ends a value, by string mode (`refused`)
_VALUE_ENDS = (b"}", b"]", b",")


class CheckFailure:
    """Why a text fails the checks (`JsonValueChecks.failure`): the first `jsonschema` error's
    ``keyword`` and schema ``pointer``, the value it refuses (``value_start:value_end`` in the
    text: the container whose check failed) and ``offset``, where the member or element the
    error names starts (``value_start`` when it names the container itself)."""

    __slots__ = ("keyword", "offset", "pointer", "value_end", "value_start")

    def __init__(self, *, keyword, pointer: str, offset: int, value_start: int, value_end: int) -> None:
        self.keyword, self.pointer, self.offset = keyword, pointer, offset
        self.value_start, self.value_end = value_start, value_end

    def __repr__(self) -> str:
        return (f"CheckFailure({self.keyword!r} at {self.pointer!r}, value {self.value_start}:{self.value_end}, "
                f"offset {self.offset})")


def _short_of(err) -> str | None:
    """``"minLength"`` where ``err`` (an ``anyOf`` / ``oneOf`` no branch of which holds) has
    a branch refusing the value itself only for its ``minLength``: the value is too short
    for that branch (``{"anyOf": [{"type": "null"}, {"minLength": 30}]}``, as
    ``extract(complete=True)`` wraps members), so growing it may pass (`JsonValueChecks.pad`)."""
    if err.validator not in ("anyOf", "oneOf") or not err.context:
        return None
    return "minLength" if any(e.validator == "minLength" and not e.relative_path for e in err.context) else None


def _skip_blanks(buf: bytes, i: int) -> int:
    while i < len(buf) and buf[i] in _WS:
        i += 1
    return i


def _skip_value(buf: bytes, i: int) -> int:
    """The end of the JSON value starting at ``buf[i]`` (blanks skipped first)."""
    i = _skip_blanks(buf, i)
    depth, n = 0, len(buf)
    while i < n:
        c = buf[i]
        if c == 0x22:
            i += 1
            while i < n and buf[i] != 0x22:
                i += 2 if buf[i] == 0x5C else 1
            i += 1
            if depth == 0:
                return i
            continue
        if c in (0x7B, 0x5B):
            depth += 1
        elif c in (0x7D, 0x5D):
            depth -= 1
            if depth <= 0:
                return i + 1 if depth == 0 else i
        elif depth == 0 and (c == 0x2C or c in _WS):
            return i
        i += 1
    return i


def _locate(buf: bytes, path: tuple) -> int:
    """The offset in ``buf`` (one JSON value) where the sub-value at ``path`` (keys and
    indices, as `jsonschema` reports them) starts; as deep as the path can be followed."""
    at = _skip_blanks(buf, 0)
    for step in path:
        if at >= len(buf) or buf[at] not in (0x7B, 0x5B):
            break
        obj = buf[at] == 0x7B
        i, index, found = at + 1, 0, None
        while True:
            i = _skip_blanks(buf, i)
            if i >= len(buf) or buf[i] in (0x7D, 0x5D):
                break
            key = None
            if obj:
                kend = _skip_value(buf, i)
                try:
                    key = json.loads(buf[i:kend])
                except ValueError:
                    break
                i = _skip_blanks(buf, kend)
                i = _skip_blanks(buf, i + 1)             # the colon
            if (key == step) if obj else (index == step):
                found = i
                break
            i = _skip_blanks(buf, _skip_value(buf, i))
            if i < len(buf) and buf[i] == 0x2C:
                i += 1
            index += 1
        if found is None:
            break
        at = found
    return at


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict:
    """``json.loads`` object hook: an object with a repeated key is not a value we accept."""
    out = dict(pairs)
    if len(out) != len(pairs):
        raise ValueError("duplicate key")
    return out


def _code_points(content: bytes) -> int:
    """Characters begun in the JSON string content ``content`` (no quotes): a trailing
    incomplete escape or UTF-8 sequence counts as the character it will be."""
    if b"\\" not in content:
        whole = content.decode("utf-8", "ignore")
        return len(whole) + (len(whole.encode("utf-8")) < len(content))
    for k in range(13):            # an incomplete escape (at most "\\uXXXX\\uXXX") or character at the end
        try:
            done = json.loads(b'"' + content[:len(content) - k] + b'"')
        except ValueError:
            continue
        # the pending escape may be the low half of a surrogate pair begun by the last one
        return len(done) + (k > 0 and not (done and "\ud800" <= done[-1] <= "\udbff"))
    return 0  # pragma: no cover


_COMPLETE_COUNTS: dict[bytes, int | None] = {}   # string content -> `_complete_code_points`
MAX_COMPLETE_COUNTS = 4096


def _complete_code_points(content: bytes) -> int | None:
    """The characters of the JSON string content ``content`` when it ends on a character
    boundary: then the characters of ``content`` followed by more content are these plus
    the rest's own (`_code_points` of it).  None where its last character may go on (an
    incomplete escape or UTF-8 sequence, a high surrogate a low one may pair with) or it is
    not string content.  Memoised: every candidate token of a mask reads the same one.

    >>> _complete_code_points(b"ab\\\\u00e9"), _complete_code_points(b"ab\\\\u00"), _complete_code_points(b"\\\\ud83d")
    (3, None, None)
    """
    hit = _COMPLETE_COUNTS.get(content, _UNSET)
    if hit is _UNSET:
        try:
            done = json.loads(b'"' + content + b'"')
        except (ValueError, RecursionError):
            done = None
        hit = None if done is None or (done and "\ud800" <= done[-1] <= "\udbff") else len(done)
        if len(_COMPLETE_COUNTS) >= MAX_COMPLETE_COUNTS:
            _COMPLETE_COUNTS.clear()
        _COMPLETE_COUNTS[content] = hit
    return hit


def _repeat_rests(state: tuple, frame: tuple, text) -> set[bytes] | None:
    """Inside a key of ``frame`` (an object): the bytes that would finish it as one of the
    object's earlier keys (their canonical spellings' rests, closing quote included);
    None where that cannot be told (an escape in the key so far, no text)."""
    if text is None:
        return None
    so_far = bytes(text[state[2] + 1:])
    if b"\\" in so_far:
        return None
    out = set()
    for k in frame[5]:
        body = _spelling(k)[1:]
        if body.startswith(so_far):
            out.add(body[len(so_far):])
    return out


@lru_cache(maxsize=1 << 16)
def _verdict_class(mode: int, data: bytes) -> bytes:
    """``data`` read from string mode ``mode`` without its blanks outside strings: tokens
    with one class get one verdict from `JsonValueChecks.step` in any state."""
    if not _HAS_BLANK.search(data):
        return data
    out = bytearray()
    for c in data:
        if mode == OUT:
            if c in _WS:
                continue
            if c == 0x22:
                mode = STR
        elif mode == STR:
            if c == 0x22:
                mode = OUT
            elif c == 0x5C:
                mode = ESC
        else:
            mode = STR
        out.append(c)
    return bytes(out)


@lru_cache(maxsize=4096)
def _spelling(key: str) -> bytes:
    """The canonical spelling of ``key`` as JSON text, quotes included (UTF-8)."""
    return json.dumps(key, ensure_ascii=False).encode("utf-8")


def _past(bound: int | None, count: int) -> bool:
    return bound is not None and count > bound


def _too_long(text: bytes, data: bytes, sstart: int, end: int, limit: int) -> bool:
    """Whether the string from ``sstart`` (its opening quote) to ``end`` has more than ``limit``
    characters (bytes first: a string has at most as many characters as bytes)."""
    if end - sstart - 1 <= limit:
        return False
    return _code_points(_slice(text, data, sstart + 1, end)) > limit


def _too_short(text: bytes, data: bytes, sstart: int, end: int, low: int) -> bool:
    """Whether the string from ``sstart`` (its opening quote) to ``end`` (its closing quote)
    has fewer than ``low`` characters (bytes first: a string has at most as many
    characters as bytes)."""
    if end - sstart - 1 < low:
        return True
    return _code_points(_slice(text, data, sstart + 1, end)) < low


def _repeats(text: bytes, data: bytes, fstart: int, end: int) -> bool:
    """Whether the array from ``fstart`` to ``end`` (just after its latest element) ends with
    a scalar element equal to an earlier one (`jsonschema`'s equality)."""
    from constrained.json_schema.validation_plans import _equality_key

    try:
        items = json.loads(_slice(text, data, fstart, end) + b"]")
    except (ValueError, RecursionError):
        return False
    if len(items) < 2:
        return False
    last = _equality_key(items[-1])
    return last is not None and any(_equality_key(v) == last for v in items[:-1])


def _slice(text: bytes, data: bytes, start: int, end: int) -> bytes:
    """Bytes ``start:end`` of ``text + data`` (``end`` inside ``data``) without joining them all."""
    base = len(text)
    if start >= base:
        return data[start - base:end - base]
    return text[start:] + data[:end - base]


class _SchemaEdges:
    """The document's schema objects as a graph: ``parents`` (child id -> ids of the
    objects holding it under any keyword, or referring to it by ``$ref``: a superset of
    where it applies) and ``beyond`` (id -> its children under keywords the tracker does
    not follow: everything but ``properties``, ``additionalProperties``, ``items`` (one
    schema), ``allOf`` and ``$ref``, as `CheckCursor.prop`/`item` and `flatten` follow
    them; ``definitions``/``$defs`` are not edges of evaluation there).  ``dynamic``: the
    document uses ``$dynamicRef``/``$recursiveRef``, whose targets no edge shows."""

    __slots__ = ("beyond", "dynamic", "parents")

    def __init__(self) -> None:
        self.parents: dict[int, set[int]] = {}
        self.beyond: dict[int, list[int]] = {}
        self.dynamic = False


_NOT_APPLIED = frozenset({"enum", "const", "default", "examples"})   # values, never schemas
_STORES = frozenset({"definitions", "$defs"})                         # schemas applied only through $ref
_TRACKED = frozenset({"properties", "additionalProperties", "items", "allOf"})


def _schema_edges(index: SchemaIndex) -> _SchemaEdges:
    from constrained.errors import ConstrainedError

    edges = _SchemaEdges()
    for loc in index.all_located():
        node = loc.schema
        here = id(node)
        kids: list[Any] = []
        beyond: list[int] = []
        patterns = "patternProperties" in node          # the tracker may leave a member undecided
        for key, value in node.items():
            if key in _NOT_APPLIED:
                continue
            if key in ("$dynamicRef", "$recursiveRef"):
                edges.dynamic = True
            found: list[Any] = []
            if isinstance(value, dict):
                found.append(value)
                found.extend(v for v in value.values() if isinstance(v, dict))
            elif isinstance(value, list):
                found.extend(v for v in value if isinstance(v, dict))
            kids += found
            if key in _STORES:
                continue
            tracked = key in _TRACKED and not (patterns and key in ("properties", "additionalProperties")) \
                and not (key == "items" and not isinstance(value, dict))     # (a tuple's items: not followed)
            if not tracked:
                beyond.extend(id(v) for v in found)
        if isinstance(node.get("$ref"), str):
            try:
                target = index.resolve(node["$ref"], loc.base, loc.pointer)[0]
            except ConstrainedError:
                edges.dynamic = True             # (unresolved: nothing is known of what it applies)
            else:
                if isinstance(target, dict):
                    kids.append(target)
        for kid in kids:
            edges.parents.setdefault(id(kid), set()).add(here)
        if beyond:
            edges.beyond[here] = beyond
    return edges


def _ancestors(edges: _SchemaEdges, targets: set[int]) -> set[int]:
    """``targets`` and every schema object from which one of them is reachable (through
    any keyword or $ref)."""
    seen = set(targets)
    todo = list(targets)
    while todo:
        for p in edges.parents.get(todo.pop(), ()):
            if p not in seen:
                seen.add(p)
                todo.append(p)
    return seen


_COUNTED_KEYWORDS = ("maxLength", "minLength")


def _counted_lengths(checked: list[Located], keywords: list[str]) -> set[int]:
    """Ids of the checked schema objects whose every check is a ``maxLength`` or
    ``minLength`` (an integer) the tracker counts on a string (`JsonValueChecks.step`):
    nothing is left for their value's validation to decide."""
    out, other = set(), set()
    for loc, kw in zip(checked, keywords, strict=True):
        bound = loc.schema.get(kw) if isinstance(loc.schema, dict) and kw in _COUNTED_KEYWORDS else None
        if isinstance(bound, int) and not isinstance(bound, bool) and bound >= 0:
            out.add(id(loc.schema))
        else:
            other.add(id(loc.schema))
    return out - other


def _beyond_tracker(edges: _SchemaEdges, reaching: set[int], uncounted: set[int]) -> set[int]:
    """Ids of the schema objects whose validation may refuse what the tracker let through:
    an uncounted check is reachable from them, or a counted one through an edge the
    tracker does not follow (then a string it applies to is not counted).  Every other
    object reaching checks holds only lengths (``maxLength``, ``minLength``) of strings the
    tracker counts, through properties, items, allOf and $ref alone.  All of them if the document refers
    dynamically."""
    if edges.dynamic:
        return set(reaching)
    start = set(uncounted)
    for node, kids in edges.beyond.items():
        if any(k in reaching for k in kids):
            start.add(node)
    return _ancestors(edges, start)
