"""Witnesses: short strings and numbers a schema's keywords accept, for finishing outputs.

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
lower/upper-case ``oneOf`` are told apart).  `number_witnesses` does the same for
numbers: the admitted number nearest zero of the numeric keywords (``multipleOf``,
bounds, ``integer``) of one, two or three sub-schemas at once (`NumberConstraints`,
exact).  They are *candidates*: `constrained.engine.completion.checked_completion`
writes them where the grammar reads string content (numbers also where a value
starts) and keeps only what the grammar and every check accept.

Example:
    >>> shortest_matches(r"[0-9a-f]{2}-[a-z]+")[:2]
    ['aa-a', '00-a']
    >>> [w for w in string_witnesses({"type": "string", "format": "email"}) if "@" in w]
    ['a@a', '0@a', 'A@A']
"""

from __future__ import annotations

import itertools
import json
import math
import re
from decimal import Decimal
from fractions import Fraction
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
    from constrained.errors import CompileTimeoutError, ConstrainedError
    from constrained.json_schema.ecma_regex import pattern_search_regex

    try:
        return shortest_matches(pattern_search_regex(pattern))
    except CompileTimeoutError:
        raise
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


# ---------------------------------------------------------------------- numbers

MAX_NUMBER_WITNESSES = 16     # number candidates kept per schema
MAX_NUMBER_NODES = 16         # sub-schemas with numeric keywords considered (in document order)
MAX_NUMBER_COMBOS = 256       # conjunctions of them tried (singles, then pairs, then triples)
MAX_NUMBER_TRIES = 32         # multiples tried per conjunction against its sub-schemas' other keywords
MAX_NUMBER_CHECKS = 2048      # jsonschema validations of candidates per document, at most
MAX_GRID_DIGITS = 12          # bounds without multipleOf: a step of 1, 0.1, ... down to 1e-12
_NUMERIC_KEYWORDS = ("multipleOf", "divisibleBy", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")


class NumberConstraints:
    """What a conjunction of numeric keywords asks of a number: every ``multiples``
    divides it, it lies within ``lower`` / ``upper`` (``(bound, exclusive)`` or None),
    and it is an integer where ``integer``.  Exact (`fractions.Fraction`; a JSON number
    such as ``0.1`` is read as the decimal it spells, not as its binary float).

    Example:
        >>> c = NumberConstraints.of({"type": "integer", "multipleOf": 4, "allOf": [{"minimum": 100}]})
        >>> c.merge(NumberConstraints.of({"multipleOf": 11})).smallest()
        Fraction(132, 1)
    """

    __slots__ = ("multiples", "lower", "upper", "integer")

    def __init__(self, multiples=(), lower=None, upper=None, integer: bool = False) -> None:
        self.multiples: tuple = tuple(Fraction(m) for m in multiples)
        self.lower: tuple | None = None if lower is None else (Fraction(lower[0]), bool(lower[1]))
        self.upper: tuple | None = None if upper is None else (Fraction(upper[0]), bool(upper[1]))
        self.integer = bool(integer)

    def __repr__(self) -> str:
        return (f"NumberConstraints(multiples={[str(m) for m in self.multiples]}, lower={self.lower}, "
                f"upper={self.upper}, integer={self.integer})")

    @classmethod
    def of(cls, node: Any, _depth: int = 0) -> NumberConstraints | None:
        """The numeric keywords of the schema ``node`` and of its ``allOf`` branches (drafts 3
        to 2020-12: ``divisibleBy``, a boolean ``exclusiveMinimum`` beside ``minimum``);
        None where it has none, or one that is not a number (a malformed schema: a
        non-positive ``multipleOf``)."""
        if not isinstance(node, dict):
            return None
        out, found = cls(integer=_integer_only(node.get("type"))), False
        for key in ("multipleOf", "divisibleBy"):
            if key in node:
                m = _exact(node[key])
                if m is None or m <= 0:
                    return None
                out.multiples += (m,)
                found = True
        for key, excl_key, side in (("minimum", "exclusiveMinimum", "lower"), ("maximum", "exclusiveMaximum", "upper")):
            excl = node.get(excl_key)
            if key in node:
                b = _exact(node[key])
                if b is None:
                    return None
                out = out._bound(side, b, excl is True)
                found = True
            if excl is not None and not isinstance(excl, bool):
                b = _exact(excl)
                if b is None:
                    return None
                out = out._bound(side, b, True)
                found = True
        if isinstance(node.get("allOf"), list) and _depth < 8:
            for sub in node["allOf"]:
                c = cls.of(sub, _depth + 1)
                if c is not None:
                    out, found = out.merge(c), True
        return out if found else None

    def _bound(self, side: str, value, exclusive: bool) -> NumberConstraints:
        new = (value, exclusive)
        if side == "lower":
            keep = self.lower is None or value > self.lower[0] or (value == self.lower[0] and exclusive)
            return NumberConstraints(self.multiples, new if keep else self.lower, self.upper, self.integer)
        keep = self.upper is None or value < self.upper[0] or (value == self.upper[0] and exclusive)
        return NumberConstraints(self.multiples, self.lower, new if keep else self.upper, self.integer)

    def merge(self, other: NumberConstraints) -> NumberConstraints:
        """The conjunction of both."""
        out = NumberConstraints(self.multiples + other.multiples, self.lower, self.upper,
                                self.integer or other.integer)
        if other.lower is not None:
            out = out._bound("lower", *other.lower)
        if other.upper is not None:
            out = out._bound("upper", *other.upper)
        return out

    def admits(self, x) -> bool:
        """Whether the exact number ``x`` meets every constraint."""
        x = Fraction(x)
        if self.integer and x.denominator != 1:
            return False
        if any((x / m).denominator != 1 for m in self.multiples):
            return False
        if self.lower is not None and (x < self.lower[0] or (self.lower[1] and x == self.lower[0])):
            return False
        if self.upper is not None and (x > self.upper[0] or (self.upper[1] and x == self.upper[0])):
            return False
        return True

    def step(self):
        """The least common multiple of the ``multiples`` (and 1 for an integer): every
        admitted number is a multiple of it.  None where nothing is asked."""

        out = None
        for m in self.multiples + ((Fraction(1),) if self.integer else ()):
            if out is None:
                out = m
            else:                   # lcm(a/b, c/d) = lcm(a, c) / gcd(b, d), both in lowest terms
                num = out.numerator * m.numerator // math.gcd(out.numerator, m.numerator)
                out = Fraction(num, math.gcd(out.denominator, m.denominator))
        return out

    def candidates(self, limit: int = MAX_NUMBER_TRIES):
        """Admitted numbers nearest zero first (at equal distance the positive one), at most
        ``limit``: the multiples of `step` within the bounds; without a step, those of the
        coarsest power of ten (1, 0.1, ... 1e-12) that has one within them."""
        step = self.step()
        grids = [step] if step is not None else [Fraction(1, 10 ** k) for k in range(MAX_GRID_DIGITS + 1)]
        for s in grids:
            found = list(itertools.islice(self._multiples(s), limit))
            if found:
                return found
        return []

    def smallest(self):
        """The admitted number nearest zero (see `candidates`), None where there is none."""
        found = self.candidates(1)
        return found[0] if found else None

    def _multiples(self, s):
        """Multiples of ``s`` admitted, nearest zero first."""
        lo = None if self.lower is None else self.lower[0]
        hi = None if self.upper is None else self.upper[0]
        if lo is not None and hi is not None and lo > hi:
            return
        if (lo is None or lo < 0 or (lo == 0 and not self.lower[1])) and \
                (hi is None or hi > 0 or (hi == 0 and not self.upper[1])):
            order = _outward(0)                    # 0, 1, -1, 2, -2, ... (times s)
        elif lo is not None and lo >= 0:
            order = itertools.count(math.ceil(lo / s))
        else:
            order = itertools.count(math.floor(hi / s), -1)
        misses = 0
        for n in order:
            x = n * s
            if self.admits(x):
                misses = 0
                yield x
            else:
                misses += 1
                if misses > 2:                     # past a bound (the first steps may sit on an exclusive one)
                    return


def _outward(start: int):
    yield start
    for k in itertools.count(1):
        yield start + k
        yield start - k


def _integer_only(t: Any) -> bool:
    """Whether a ``type`` admits integers but no other numbers."""
    return t == "integer" or (isinstance(t, list) and "integer" in t and "number" not in t)


def _exact(v: Any):
    """A JSON number as the exact decimal it spells (None: not a finite number)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    if isinstance(v, int):
        return Fraction(v)
    if v != v or v in (float("inf"), float("-inf")):
        return None
    return Fraction(Decimal(repr(v)))


def number_text(x) -> str | None:
    """The shortest JSON text of the exact number ``x`` without an exponent (``132``,
    ``-0.25``); None where it has no finite decimal expansion or is longer than
    `MAX_WITNESS_CHARS`."""
    x = Fraction(x)
    d, k = x.denominator, 0
    while d % 10 == 0:
        d //= 10
        k += 1
    while d % 2 == 0 or d % 5 == 0:
        d //= 2 if d % 2 == 0 else 5
        k += 1
    if d != 1:
        return None
    if k == 0:
        text = str(x.numerator)
    else:
        digits = str(abs(x.numerator) * 10 ** k // x.denominator).rjust(k + 1, "0")
        text = ("-" if x < 0 else "") + digits[:-k] + "." + digits[-k:]
    return text if len(text) <= MAX_WITNESS_CHARS else None


def number_witnesses(schema: Any) -> list[str]:
    """JSON number texts that meet the numeric keywords of one sub-schema of ``schema``, or
    of two or three at once (an element under an ``items`` of one ``oneOf`` branch and the
    ``contains`` of another: a multiple of 4 and of 11, at least 100, is ``132``): per
    conjunction the admitted number nearest zero (`NumberConstraints`) that the
    sub-schemas' other keywords (``not``, ``enum``...) also accept, per `jsonschema` of
    the document's draft.  Candidates for the completion search, which writes them where
    a value starts; at most `MAX_NUMBER_WITNESSES`, shortest first.

    Example:
        >>> number_witnesses({"oneOf": [{"items": {"multipleOf": 4}},
        ...                             {"contains": {"multipleOf": 11, "minimum": 100}}]})
        ['0', '110', '132']
    """
    return list(_number_witnesses(json.dumps(schema, sort_keys=True, default=str)))


@lru_cache(maxsize=64)
def _number_witnesses(document: str) -> tuple[str, ...]:
    doc = json.loads(document)
    nodes = []
    for node in _subschemas(doc):
        if any(k in node and isinstance(node[k], (int, float)) and not isinstance(node[k], bool)
               for k in _NUMERIC_KEYWORDS):
            c = NumberConstraints.of(node)
            if c is not None:
                nodes.append((node, c))
                if len(nodes) >= MAX_NUMBER_NODES:
                    break
    if not nodes:
        return ()
    valid = _node_validator(doc)
    combos = itertools.islice(itertools.chain.from_iterable(
        itertools.combinations(range(len(nodes)), r) for r in (1, 2, 3)), MAX_NUMBER_COMBOS)
    out: list[str] = []
    checks = 0
    for combo in combos:
        c = nodes[combo[0]][1]
        for j in combo[1:]:
            c = c.merge(nodes[j][1])
        for x in c.candidates():
            text = number_text(x)
            if text is None:
                continue
            checks += len(combo)
            if all(valid(nodes[j][0], json.loads(text)) for j in combo):
                if text not in out:
                    out.append(text)
                break
            if checks > MAX_NUMBER_CHECKS:
                break
        if checks > MAX_NUMBER_CHECKS:
            break
    return tuple(sorted(out, key=len)[:MAX_NUMBER_WITNESSES])


def _node_validator(document: Any):
    """``valid(node, value)``: whether the sub-schema ``node`` of ``document`` accepts
    ``value`` (its ``$ref`` resolved in the document); True where `jsonschema` cannot say
    (the candidate is checked by the search anyway)."""
    try:
        from constrained.json_schema.dialect import dialect_of

        root = dialect_of(document).validator_class(document)
    except Exception:  # noqa: BLE001 - a document jsonschema cannot load: candidates unfiltered
        return lambda node, value: True

    def valid(node, value) -> bool:
        try:
            return bool(root.evolve(schema=node).is_valid(value))
        except Exception:  # noqa: BLE001 - an unresolvable $ref, ...: let the search decide
            return True

    return valid
