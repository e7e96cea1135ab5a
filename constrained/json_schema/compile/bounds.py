"""The tightest of several bounds a conjunction sets: counts (``minLength``/``maxLength``,
``minItems``/``maxItems``) and numbers (``minimum``, ``exclusiveMaximum``, ...); and the
decimal bound that keeps a parsed float inside a number bound.

Example:
    >>> tightest_bound([(1, False), (2, False), (2, True)], lower=True)
    (2, True)
    >>> float_safe_bound(0.1, False, upward=True)
    Decimal('0.1')
"""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction
from typing import Any

from constrained.errors import InvalidSchemaError
from constrained.json_schema.conjunction import Conjunction, Part


def count_bounds(conj: Conjunction, low_keyword: str, high_keyword: str) -> tuple[int, int | None, dict[str, Part]]:
    """The tightest ``low_keyword``/``high_keyword`` counts (minLength/maxLength,
    minItems/maxItems) over a conjunction, and the parts that set them."""
    low, high, parts = 0, None, {}
    for part in conj:
        for keyword in (low_keyword, high_keyword):
            value = part.get(keyword)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or value != int(value):
                raise InvalidSchemaError(f"{keyword} must be a non-negative integer, not {value!r}",
                                         keyword=keyword, pointer=part.pointer)
            if keyword == low_keyword and int(value) > low:
                low, parts[keyword] = int(value), part
            if keyword == high_keyword and (high is None or int(value) < high):
                high, parts[keyword] = int(value), part
    return low, high, parts


def tightest_bound(bounds: list[tuple[Any, bool]], *, lower: bool) -> tuple[Any, bool]:
    """The tightest of several ``(value, exclusive)`` bounds (``lower``: the largest)."""
    best: tuple[Any, bool] = (None, False)
    for value, exclusive in bounds:
        if best[0] is None:
            best = (value, exclusive)
            continue
        candidate, current = Fraction(value), Fraction(best[0])
        if (candidate > current if lower else candidate < current) or (candidate == current and exclusive):
            best = (value, exclusive)
    return best


def float_safe_bound(bound: Any, exclusive: bool, *, upward: bool) -> Decimal | None:
    """An inclusive bound on the exact decimal value of the text that keeps the
    *parsed float* within ``bound`` (validators compare ``float(text)``).

    The nearest float on the inside of the bound (the bound itself when it is a
    float and inclusive): text whose exact value is inside it parses, by monotone
    rounding, to a float inside it too.  Loses only spellings that round onto the
    bound's neighbourhood; never admits one a validator rejects.  Raises ValueError
    (``empty: ...``) where no double is inside.
    """
    if bound is None:
        return None
    try:
        nearest = float(bound)
    except OverflowError:         # an integer bound beyond every double (10**400)
        if (bound > 0) == upward:
            raise ValueError(f"empty: no double is on the inside of a {len(str(abs(bound)))}-digit bound") from None
        return None               # every double is inside it
    if not math.isfinite(nearest):
        raise ValueError(f"bound {bound!r} is not a finite double")
    towards = math.inf if upward else -math.inf
    inside = (Fraction(nearest) >= Fraction(bound)) if upward else (Fraction(nearest) <= Fraction(bound))
    if not inside or (exclusive and Fraction(nearest) == Fraction(bound)):
        nearest = math.nextafter(nearest, towards)
    # the shortest decimal that parses to the float: text on its side of it parses to it
    # or beyond (monotone rounding), and "0.01" itself stays valid for minimum 0.01
    return Decimal(repr(nearest))
