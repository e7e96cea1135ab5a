"""Number values: ``minimum`` / ``maximum`` / ``exclusiveMinimum`` / ``exclusiveMaximum``
as exact regexes (`constrained.json_schema.numbers`), ``multipleOf`` as a value check.

Integer spellings parse to ints and are compared exactly with the bounds; spellings
with a fraction parse to floats, so their range is the float-safe decimal range
(`bounds.float_safe_bound`).  Bounded numbers have no exponent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from constrained.errors import InvalidSchemaError
from constrained.json_schema.compile.bounds import float_safe_bound, tightest_bound
from constrained.json_schema.compile.rules import NUMBER_REGEX, Alternatives
from constrained.json_schema.conjunction import Conjunction, Part
from constrained.json_schema.numbers import decimal_range_regex, integer_bounds, integer_range_regex

if TYPE_CHECKING:                      # pragma: no cover
    from constrained.json_schema.compiler import SchemaCompiler


def number_alternatives(compiler: SchemaCompiler, conj: Conjunction, *, fractions: bool) -> Alternatives:
    """The alternatives of the numbers ``conj`` allows: integers, and numbers with a
    fraction too when ``fractions`` (each alternative is one terminal)."""
    lows: list[tuple[Any, bool]] = []
    highs: list[tuple[Any, bool]] = []
    for part in conj:
        low, exclusive_low = _bound(compiler, part, "minimum", "exclusiveMinimum")
        high, exclusive_high = _bound(compiler, part, "maximum", "exclusiveMaximum")
        for keyword, value in (("minimum", low), ("maximum", high), ("exclusiveMinimum", exclusive_low),
                               ("exclusiveMaximum", exclusive_high)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise InvalidSchemaError(f"{keyword} must be a number, not {value!r}", keyword=keyword,
                                         pointer=part.pointer)
        lows += [(v, exclusive) for v, exclusive in ((low, False), (exclusive_low, True)) if v is not None]
        highs += [(v, exclusive) for v, exclusive in ((high, False), (exclusive_high, True)) if v is not None]
        multiple = part.get("multipleOf")
        if multiple is not None:
            if isinstance(multiple, bool) or not isinstance(multiple, (int, float)) or multiple <= 0:
                raise InvalidSchemaError(f"multipleOf must be a positive number, not {multiple!r}",
                                         keyword="multipleOf", pointer=part.pointer)
            if not (multiple == 1 and not fractions):
                compiler.check(part, "multipleOf", "multipleOf is enforced by validation")
    low, low_exclusive = tightest_bound(lows, lower=True)
    high, high_exclusive = tightest_bound(highs, lower=False)
    pointer = conj[0].pointer
    builder = compiler.builder
    if fractions and low is None and high is None:
        return [(builder.term(NUMBER_REGEX, "NUMBER"),)]
    out: Alternatives = []
    try:
        # integer spellings parse to ints, which validators compare exactly with the bound
        integer_low, integer_high = integer_bounds(None if low_exclusive else low, None if high_exclusive else high,
                                                   low if low_exclusive else None, high if high_exclusive else None)
        regex = integer_range_regex(integer_low, integer_high)
        if not fractions and compiler.dialect.floats_are_integers and \
                all(v is None or abs(v) <= 2 ** 53 for v in (integer_low, integer_high)):
            regex = f"(?:{regex})(?:\\.0+)?"      # 1.0 is an integer too (from draft 6); its float is exact
        out.append((builder.term(regex, "INTEGER"),))
    except ValueError as e:
        if "empty" not in str(e):
            raise InvalidSchemaError(str(e), keyword="minimum", pointer=pointer) from e
    if not fractions:
        return out
    try:
        # spellings with a fraction parse to floats, compared after rounding
        decimal_low = float_safe_bound(low, low_exclusive, upward=True)
        decimal_high = float_safe_bound(high, high_exclusive, upward=False)
        out.append((builder.term(decimal_range_regex(decimal_low, decimal_high), "NUMBER_RANGE",
                                 also=(r"-?[0-9]+\.[0-9]+",)),))
    except ValueError as e:
        if "empty" not in str(e):
            raise InvalidSchemaError(str(e), keyword="minimum", pointer=pointer) from e
    return out


def _bound(compiler: SchemaCompiler, part: Part, inclusive: str, exclusive: str) -> tuple[Any, Any]:
    """``part``'s (inclusive, exclusive) bound on one side, as its draft reads them.

    Drafts 03/04: ``exclusiveMinimum`` is a flag of ``minimum`` (any truthy value
    makes it exclusive; alone it does nothing).  Later drafts: a bound of its own,
    compared as a number even when written ``true``/``false`` (1/0), as the validator does."""
    bound, other = part.get(inclusive), part.get(exclusive)
    if compiler.dialect.exclusive_bounds_are_flags:
        return (None, bound) if other else (bound, None)
    if isinstance(other, bool):
        compiler.note(part.pointer, exclusive, f"{exclusive}: {str(other).lower()} is the number "
                                               f"{int(other)} in {compiler.dialect.name}")
        other = int(other)
    return bound, other
