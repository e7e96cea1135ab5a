"""Witness strings: short strings a schema's string keywords accept, for finishing outputs.

A value check (`constrained.json_schema.value_checks`) may enforce what the grammar
only over-approximates: a ``format`` or ``pattern`` whose automaton was too large
(``email``: any JSON string in the grammar), a non-regular ``pattern``, a long
``minLength``, a ``oneOf`` whose branches overlap.  The grammar's shortest
completion then writes ``""`` and the check refuses it, and a byte search cannot
guess an address character by character (the check only speaks when the enclosing
value closes).  `string_witnesses` collects, from every ``format`` / ``pattern`` /
``minLength`` / string ``const`` / ``enum`` / ``examples`` / ``default`` of the schema,
short strings such keywords accept (and, for keys that must match several
``patternProperties`` patterns at once, two patterns' shortest matches joined): the
shortest matches of the format regexes
(`constrained.json_schema.formats`) and of the patterns, written with a few
character preferences (lowercase, uppercase, digits: the two branches of a
lower/upper-case ``oneOf`` are told apart).  They are *candidates*:
`constrained.engine.completion.checked_completion` writes them where the grammar
reads string content and keeps only what the grammar and every check accept.

Example:
    >>> shortest_matches(r"[0-9a-f]{2}-[a-z]+")[:2]
    ['aa-a', '00-a']
    >>> [w for w in string_witnesses({"type": "string", "format": "email"}) if "@" in w]
    ['a@a', '0@a', 'A@A']
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any

MAX_WITNESSES = 48          # candidates kept per schema (shortest first)
MAX_WITNESS_CHARS = 256     # longer candidates (a long minLength) are not kept
_LOWER = "abcdefghijklmnopqrstuvwxyz"
_UPPER = _LOWER.upper()
_DIGITS = "0123456789"
_PUNCT = "-_.:/ +@!#$%&'*=?^`{|}~()[],;<>\"\\"
# character preferences: each gives one witness per regex (duplicates dropped)
_PREFERENCES = (_LOWER + _DIGITS + _UPPER + _PUNCT, _DIGITS + _LOWER + _UPPER + _PUNCT,
                _UPPER + _DIGITS + _LOWER + _PUNCT)
_ALL_ASCII = "".join(chr(c) for c in range(0x20, 0x7F))


def shortest_matches(pattern: str, *, flags: int = 0) -> list[str]:
    """Shortest strings matching the Python regex ``pattern`` in full, one per character
    preference (lowercase first, digits first, uppercase first), duplicates dropped.
    Anchors and look-arounds are ignored (a candidate may then not match: callers
    check); back-references make a branch unusable.  ``[]`` if nothing was found."""
    try:
        parsed = _parse(pattern, flags)
    except (re.error, RecursionError, OverflowError, ValueError):
        return []
    out: list[str] = []
    for prefer in _PREFERENCES:
        try:
            w = _shortest(parsed, prefer)
        except RecursionError:         # pragma: no cover - absurdly nested patterns
            w = None
        if w is not None and w not in out:
            out.append(w)
    return out


@lru_cache(maxsize=1024)
def _parse(pattern: str, flags: int):
    import re._parser as sre_parse  # the parser `re` itself uses (as regex_parser does)

    return sre_parse.parse(pattern, flags)


def _shortest(items, prefer: str) -> str | None:
    """The shortest string of a parsed (sub)pattern under character preference ``prefer``."""
    from re._constants import (
        ANY,
        ASSERT,
        ASSERT_NOT,
        AT,
        ATOMIC_GROUP,
        BRANCH,
        GROUPREF,
        GROUPREF_EXISTS,
        IN,
        LITERAL,
        MAX_REPEAT,
        MIN_REPEAT,
        NOT_LITERAL,
        POSSESSIVE_REPEAT,
        SUBPATTERN,
    )

    out: list[str] = []
    for op, av in items:
        if op is LITERAL:
            out.append(chr(av))
        elif op is NOT_LITERAL:
            c = next((c for c in prefer + _ALL_ASCII if ord(c) != av), None)
            if c is None:              # pragma: no cover
                return None
            out.append(c)
        elif op is ANY:
            out.append(prefer[0])
        elif op is IN:
            c = _class_char(av, prefer)
            if c is None:
                return None
            out.append(c)
        elif op is BRANCH:
            best = None
            for alt in av[1]:
                w = _shortest(alt, prefer)
                if w is not None and (best is None or len(w) < len(best)):
                    best = w
            if best is None:
                return None
            out.append(best)
        elif op is SUBPATTERN:
            w = _shortest(av[-1], prefer)
            if w is None:
                return None
            out.append(w)
        elif op is ATOMIC_GROUP:
            w = _shortest(av, prefer)
            if w is None:
                return None
            out.append(w)
        elif op in (MAX_REPEAT, MIN_REPEAT, POSSESSIVE_REPEAT):
            lo, _, sub = av
            if lo:
                w = _shortest(sub, prefer)
                if w is None:
                    return None
                out.append(w * lo)
        elif op in (AT, ASSERT, ASSERT_NOT):
            continue                   # anchors, look-arounds: ignored (candidates are checked)
        elif op in (GROUPREF, GROUPREF_EXISTS):
            return None
        else:                          # pragma: no cover - an op this walk does not know
            return None
    return "".join(out)


def _class_char(items, prefer: str) -> str | None:
    """The first character of ``prefer`` (then printable ASCII, then the class's own
    first member) that the character class ``items`` contains."""
    from re._constants import CATEGORY, LITERAL, NEGATE, RANGE

    negate = bool(items) and items[0][0] is NEGATE
    body = items[1:] if negate else items

    def member(c: str) -> bool:
        o = ord(c)
        for op, av in body:
            if op is LITERAL and o == av:
                return True
            if op is RANGE and av[0] <= o <= av[1]:
                return True
            if op is CATEGORY and _in_category(str(av), c):
                return True
        return False

    for c in prefer + _ALL_ASCII:
        if member(c) != negate:
            return c
    if not negate:
        for op, av in body:
            if op is LITERAL:
                return chr(av)
            if op is RANGE:
                return chr(av[0])
    return None


def _in_category(name: str, c: str) -> bool:
    name = name.upper()
    if "NOT_" in name:
        return not _in_category(name.replace("NOT_", ""), c)
    if "DIGIT" in name:
        return c.isdigit()
    if "SPACE" in name:
        return c.isspace()
    if "WORD" in name:
        return c.isalnum() or c == "_"
    if "LINEBREAK" in name:
        return c in "\n\r"
    return False


def string_witnesses(schema: Any) -> list[str]:
    """Candidate strings for the string keywords anywhere in ``schema`` (a JSON Schema
    document: every sub-schema is visited, ``$defs`` included), shortest first, at
    most `MAX_WITNESSES`; always includes ``"a"``, ``"A"`` and ``"0"``."""
    return list(_witnesses(json.dumps(schema, sort_keys=True, default=str)))


@lru_cache(maxsize=64)
def _witnesses(document: str) -> tuple[str, ...]:
    from constrained.json_schema.formats import FORMAT_REGEXES

    found: list[str] = []
    min_lengths: set[int] = set()
    key_patterns: list[str] = []
    for node in _subschemas(json.loads(document)):
        pats = node.get("patternProperties")
        if isinstance(pats, dict):
            key_patterns += [k for k in pats if isinstance(k, str) and k not in key_patterns]
        f = node.get("format")
        if isinstance(f, str) and f in FORMAT_REGEXES:
            found += shortest_matches(FORMAT_REGEXES[f])
        p = node.get("pattern")
        if isinstance(p, str):
            found += _pattern_witnesses(p)
        n = node.get("minLength")
        if isinstance(n, int) and not isinstance(n, bool) and 0 < n <= MAX_WITNESS_CHARS:
            min_lengths.add(n)
        for key in ("const", "default"):
            if isinstance(node.get(key), str):
                found.append(node[key])
        for key in ("enum", "examples"):
            if isinstance(node.get(key), list):
                found += [v for v in node[key] if isinstance(v, str)]
    # keys that must match several patterns at once (patternProperties of allOf branches
    # with additionalProperties false): each pattern's shortest match joined to another's,
    # and the same grown by a character or three (other patterns may forbid short keys)
    if 2 <= len(key_patterns) <= 8:
        firsts = [w[0] for w in map(_pattern_witnesses, key_patterns) if w]
        for a in firsts:
            for b in firsts:
                if a != b and b not in a:
                    joined = a + b
                    found += [joined + joined[0] * k for k in range(4)]
    # a witness padded to a minLength the schema also asks for
    found += [w + "a" * (n - len(w)) for w in list(found) for n in min_lengths if len(w) < n]
    found += ["a" * n for n in min_lengths]
    out: list[str] = []
    for w in sorted(found + ["a", "A", "0"], key=len):
        if w and len(w) <= MAX_WITNESS_CHARS and w not in out:
            out.append(w)
    return tuple(out[:MAX_WITNESSES])


def _pattern_witnesses(pattern: str) -> list[str]:
    from constrained.errors import ConstrainedError
    from constrained.json_schema.ecma_regex import pattern_search_regex

    try:
        return shortest_matches(pattern_search_regex(pattern))
    except ConstrainedError:             # not regular (look-arounds, ...): read it as a Python regex
        return shortest_matches(pattern)


def _subschemas(node: Any):
    """Every dict inside ``node`` (schemas and everything else: cheap and complete)."""
    stack = [node]
    while stack:
        x = stack.pop()
        if isinstance(x, dict):
            yield x
            stack.extend(x.values())
        elif isinstance(x, list):
            stack.extend(x)
