"""Numeric bounds of JSON Schema -> regexes over JSON number spellings.

Three public helpers, used when ``minimum``/``maximum``/``exclusiveMinimum``/
``exclusiveMaximum`` constrain an ``integer`` or ``number``:

* `integer_bounds` folds the four keywords (draft 2020-12 numeric semantics) into
  an inclusive integer interval ``[lo, hi]`` (``None`` = unbounded), exactly,
  also for floats such as ``2.5`` or ``1e300``;
* `integer_range_regex` spells that interval as a regex over canonical JSON
  integers (``0 | -?[1-9][0-9]*``: no leading zeros, no ``-0``, no ``+``);
* `decimal_range_regex` spells a real interval (open or closed ends) as a regex
  over JSON numbers **without exponent**, ``-?(0|[1-9][0-9]*)(\\.[0-9]+)?``,
  compared as exact decimals.  Leaving out exponent notation when bounds are
  present is a sound restriction (every produced spelling satisfies the bounds;
  spellings like ``1e2`` are simply not generated).

Construction: integers are split by digit count;
within one digit count a range is a common prefix followed by "at least the
lower bound's digits" / "a digit strictly between" / "at most the upper bound's
digits".  Fractions are compared digit-wise as padded digit strings.  Both use
one "chain" builder: follow the bound's digits (the tight path) and at each
position branch off with a strictly greater (or smaller) digit followed by free
digits.  Chains are nested, so regexes stay linear in the number of digits; for
bounds longer than `MAX_CHAIN_LEVELS` digits (exact values of floats have up to
~1100 digits) positions are grouped into flat blocks of about sqrt(digits)
positions, so the nesting depth stays bounded (regex parsers recurse once per
group) at the price of O(digits^1.5) size: about 40 characters per digit for
the 301-digit ``1e300``, which our DFA compiler turns into ~600 states.

All regexes use only ``(?:...)`` groups, character classes ``[a-b]``, and
``?``/``*``/``{m,n}`` quantifiers; no anchors or look-arounds.  Every returned
regex is safe to concatenate (a top-level alternation is wrapped in a group).

Example:
    >>> import re
    >>> r = integer_range_regex(*integer_bounds(-0.5, None, None, 20))
    >>> r
    '(?:[0-9]|1[0-9])'
    >>> [v for v in ("0", "19", "20", "-0", "01") if re.fullmatch(r, v)]
    ['0', '19']
"""

from __future__ import annotations

import math
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction

__all__ = ["MAX_CHAIN_LEVELS", "decimal_range_regex", "integer_bounds", "integer_range_regex"]

Bound = int | float | Decimal
"""A numeric schema bound as a JSON parser may deliver it."""

MAX_CHAIN_LEVELS = 24
"""Most nested groups one digit chain may use (longer chains use flat blocks)."""

ANY_FRACTION = r"(?:\.[0-9]+)?"
"""An optional fractional part with any digits."""


# ------------------------------------------------------------------ regex pieces

def _group_closes_at_end(regex: str) -> bool:
    """Whether ``regex`` is one ``(...)`` group spanning the whole text."""
    depth = 0
    escaped = False
    for pos, char in enumerate(regex):
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0 and pos != len(regex) - 1:
                return False
    return depth == 0


def _is_atom(regex: str) -> bool:
    """Whether a quantifier can follow ``regex`` directly (one char, class or group)."""
    if len(regex) == 1:
        return True
    if regex.startswith("[") and regex.endswith("]") and regex.count("[") == 1:
        return True
    return regex.startswith("(") and regex.endswith(")") and _group_closes_at_end(regex)


def _optional(regex: str) -> str:
    """``regex`` or nothing."""
    if regex == "":
        return ""
    return regex + "?" if _is_atom(regex) else f"(?:{regex})?"


def _unwrap_alternation(regex: str) -> str:
    """The inside of a ``(?:a|b)`` group spanning ``regex`` (to splice into an alternation)."""
    if regex.startswith("(?:") and regex.endswith(")") and _group_closes_at_end(regex):
        return regex[3:-1]
    return regex


def _alt(parts: list[str | None]) -> str | None:
    """Alternation of ``parts`` (``None`` = empty language, ``""`` = empty string).

    Returns ``None`` when every part is ``None``; a top-level alternation is
    wrapped in a group, so the result can be concatenated.
    """
    present = list(dict.fromkeys(p for p in parts if p is not None))
    if not present:
        return None
    nullable = "" in present
    present = [p for p in present if p != ""]
    if not present:
        return ""
    if len(present) == 1:
        body = present[0]
    else:
        body = "(?:" + "|".join(map(_unwrap_alternation, present)) + ")"
    return _optional(body) if nullable else body


def _digit_class(low: int, high: int) -> str | None:
    """One digit in ``low..high`` (``None`` when the range is empty)."""
    if low > high:
        return None
    if low == high:
        return str(low)
    return f"[{low}-{high}]"


def _free_digits(count: int) -> str:
    """Exactly ``count`` arbitrary digits."""
    if count == 0:
        return ""
    return "[0-9]" if count == 1 else f"[0-9]{{{count}}}"


def _free_digit_run(least: int, most: int | None) -> str:
    """Between ``least`` and ``most`` (``None`` = unbounded) arbitrary digits."""
    if most is None:
        return {0: "[0-9]*", 1: "[0-9]+"}.get(least, f"[0-9]{{{least},}}")
    if least == most:
        return _free_digits(least)
    return "[0-9]?" if (least, most) == (0, 1) else f"[0-9]{{{least},{most}}}"


def _concat(*parts: str | None) -> str | None:
    """Concatenation; ``None`` (empty language) absorbs."""
    if any(p is None for p in parts):
        return None
    return "".join(parts)  # type: ignore[arg-type]


# ------------------------------------------------------------------ digit chains

def _block_size(length: int) -> int:
    """Positions per block of a digit chain (1 unless the chain is long)."""
    if length <= MAX_CHAIN_LEVELS:
        return 1
    return max(-(-length // MAX_CHAIN_LEVELS), math.isqrt(length))


def _no_tail(stop: int) -> str:
    return ""


def _chain(digits: str, branch: Callable[[int, int], str | None], may_end: Callable[[int], bool],
           tail: str | None, block_tail: Callable[[int], str] = _no_tail) -> str | None:
    """Strings that follow ``digits`` up to some position ``t`` and then leave.

    At position ``t`` a string may stop (``may_end(t)``), branch off or go on
    with ``digits[t]``; after all of ``digits`` it continues with ``tail``
    (``None`` = not allowed).  Positions are grouped in blocks ``[start, stop)``
    (one position each unless the chain is long) so that at most about
    `MAX_CHAIN_LEVELS` groups nest: a branch at ``t`` is ``branch(t, stop)``
    followed by ``block_tail(stop)``, which all branches of the block share
    (fixed-length comparisons put their ``[0-9]{n}`` there, so the automaton
    does not repeat it once per position).

    >>> _chain("25", lambda t, stop: _concat(_digit_class(int("25"[t]) + 1, 9), "[0-9]*"),
    ...        lambda t: False, "[0-9]*")
    '(?:2(?:5[0-9]*|[6-9][0-9]*)|[3-9][0-9]*)'
    """
    size = _block_size(len(digits))
    rest = tail
    for start in reversed(range(0, len(digits), size)):
        stop = min(start + size, len(digits))
        branches = _alt([_concat(digits[start:t], branch(t, stop)) for t in range(start, stop)])
        alts: list[str | None] = [None if rest is None else digits[start:stop] + rest,
                                  _concat(branches, block_tail(stop))]
        alts += [digits[start:t] for t in range(start, stop) if may_end(t)]
        rest = _alt(alts)
    return rest


def _fixed_chain(digits: str, above: bool) -> str:
    """Digit strings of ``len(digits)`` digits that are ``>= digits`` (``<=`` unless ``above``)."""
    free_digit = "0" if above else "9"  # trailing digits of this kind leave the rest free
    core = digits.rstrip(free_digit)
    tail = _free_digits(len(digits) - len(core))
    if core:  # the last tight digit and its branch merge into one class
        last = int(core[-1])
        tail = (_digit_class(last, 9) if above else _digit_class(0, last)) + tail  # type: ignore[operator]
        core = core[:-1]

    def branch(t: int, stop: int) -> str | None:
        digit = int(core[t])
        cls = _digit_class(digit + 1, 9) if above else _digit_class(0, digit - 1)
        return _concat(cls, _free_digits(stop - t - 1))

    def block_tail(stop: int) -> str:
        return _free_digits(len(digits) - stop)

    result = _chain(core, branch, lambda t: False, tail, block_tail)
    assert result is not None
    return result


def _fixed_at_least(digits: str) -> str:
    """Digit strings of ``len(digits)`` digits that are ``>= digits``.

    >>> _fixed_at_least("250")
    '(?:2[5-9][0-9]|[3-9][0-9]{2})'
    """
    return _fixed_chain(digits, above=True)


def _fixed_at_most(digits: str) -> str:
    """Digit strings of ``len(digits)`` digits that are ``<= digits``.

    >>> _fixed_at_most("519")
    '(?:5[0-1][0-9]|[0-4][0-9]{2})'
    """
    return _fixed_chain(digits, above=False)


def _fixed_between(low: str, high: str) -> str:
    """Digit strings of the common length of ``low <= high`` lying between them.

    >>> _fixed_between("120", "349")
    '(?:1[2-9][0-9]|2[0-9]{2}|3[0-4][0-9])'
    """
    if low == high:
        return low
    i = next(t for t in range(len(low)) if low[t] != high[t])
    rest = len(low) - i - 1
    low_rest, high_rest = low[i + 1:], high[i + 1:]
    mid_low = int(low[i]) if low_rest.strip("0") == "" else int(low[i]) + 1
    mid_high = int(high[i]) if high_rest.strip("9") == "" else int(high[i]) - 1
    parts: list[str | None] = []
    if mid_low > int(low[i]):
        parts.append(low[i] + _fixed_at_least(low_rest))
    parts.append(_concat(_digit_class(mid_low, mid_high), _free_digits(rest)))
    if mid_high < int(high[i]):
        parts.append(high[i] + _fixed_at_most(high_rest))
    body = _alt(parts)
    assert body is not None
    return low[:i] + body


# ------------------------------------------------------------------ integers

def _natural_range(lo: int, hi: int | None) -> str:
    """Canonical spellings of the integers ``lo..hi`` (``0 <= lo``, ``hi`` may be ``None``).

    Same digit count: `_fixed_between`; otherwise the part with ``lo``'s digit
    count, every digit count strictly between (``[1-9][0-9]{m,n}``) and the
    part with ``hi``'s digit count; full parts (``lo = 10^k``,
    ``hi = 10^k - 1``) merge into the run of free digits.

    >>> _natural_range(7, 2500)
    '(?:[7-9]|[1-9][0-9]{1,2}|1[0-9]{3}|2(?:500|[0-4][0-9]{2}))'
    """
    low = str(lo)
    high = None if hi is None else str(hi)
    if high is not None and len(low) == len(high):
        return _fixed_between(low, high)
    if lo == 0 and hi is None:
        return _alt(["0", _natural_range(1, hi)])  # type: ignore[return-value]
    low_part: str | None = _fixed_at_least(low)
    run_from = len(low)  # free digits after the leading [1-9] of the next digit count
    if low == "1" + "0" * (len(low) - 1):
        low_part, run_from = None, run_from - 1
    high_part: str | None = None
    run_to: int | None = None
    if high is not None:
        run_to = len(high) - 2
        if high == "9" * len(high):
            run_to += 1
        else:
            high_part = _fixed_between("1" + "0" * (len(high) - 1), high)
    run_part = None if run_to is not None and run_from > run_to else "[1-9]" + _free_digit_run(run_from, run_to)
    return _alt([low_part, run_part, high_part])  # type: ignore[return-value]


def integer_range_regex(lo: int | None, hi: int | None) -> str:
    """Regex matching exactly the JSON spellings of the integers ``v`` with ``lo <= v <= hi``.

    ``None`` leaves a side unbounded.  Spellings are canonical: no leading
    zeros, no ``-0``, no ``+``.  The regex can be concatenated (a top-level
    alternation is grouped).  Raises ``ValueError`` when ``lo > hi``.

    >>> integer_range_regex(-12, 7)
    '(?:[0-7]|-(?:[1-9]|1[0-2]))'
    >>> integer_range_regex(100, None)
    '[1-9][0-9]{2,}'
    """
    if lo is not None and hi is not None and lo > hi:
        raise ValueError(f"empty integer range [{lo}, {hi}]")
    parts: list[str | None] = []
    if hi is None or hi >= 0:
        parts.append(_natural_range(0 if lo is None or lo < 0 else lo, hi))
    if lo is None or lo < 0:
        magnitude_lo = 1 if hi is None or hi >= 0 else -hi
        parts.append("-" + _natural_range(magnitude_lo, None if lo is None else -lo))
    result = _alt(parts)
    assert result is not None
    return result


def _exact(value: Bound, name: str) -> Fraction:
    """The exact rational value of a finite numeric bound."""
    if isinstance(value, bool) or not isinstance(value, (int, float, Decimal)):
        raise TypeError(f"{name} must be a number, got {value!r}")
    if isinstance(value, (float, Decimal)) and not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return Fraction(value)


def integer_bounds(minimum: Bound | None, maximum: Bound | None, exclusive_minimum: Bound | None,
                   exclusive_maximum: Bound | None) -> tuple[int | None, int | None]:
    """Fold JSON Schema numeric bounds into the inclusive integer interval ``(lo, hi)``.

    ``lo = max(ceil(minimum), floor(exclusiveMinimum) + 1)`` and symmetrically for
    ``hi``; absent keywords are ``None`` (and so is an unbounded side).  Floats are
    taken at their exact binary value, so ``1e300`` gives a 301-digit integer.
    The interval may be empty (``lo > hi``); `integer_range_regex` rejects it.

    >>> integer_bounds(2.5, None, None, 10.0)
    (3, 9)
    >>> integer_bounds(None, -0.5, -3, None)
    (-2, -1)
    """
    lows: list[int] = []
    highs: list[int] = []
    if minimum is not None:
        lows.append(math.ceil(_exact(minimum, "minimum")))
    if exclusive_minimum is not None:
        lows.append(math.floor(_exact(exclusive_minimum, "exclusiveMinimum")) + 1)
    if maximum is not None:
        highs.append(math.floor(_exact(maximum, "maximum")))
    if exclusive_maximum is not None:
        highs.append(math.ceil(_exact(exclusive_maximum, "exclusiveMaximum")) - 1)
    return (max(lows) if lows else None, min(highs) if highs else None)


# ------------------------------------------------------------------ decimals

def _to_decimal(value: Bound | None, name: str) -> Decimal | None:
    """``value`` as an exact `Decimal` (floats at their exact binary value)."""
    if value is None:
        return None
    _exact(value, name)  # type and finiteness checks
    return value if isinstance(value, Decimal) else Decimal(value)


def _split_magnitude(value: Decimal) -> tuple[int, str]:
    """``|value|`` as (integer part, fraction digits without trailing zeros), exactly."""
    text = format(value.copy_abs(), "f")
    whole, _, fraction = text.partition(".")
    return int(whole), fraction.rstrip("0")


def _fraction_tail_above(digits: str, strict: bool) -> str:
    """Digit strings ``E`` (maybe empty) with ``0.E > 0.digits`` (``>=`` unless strict).

    ``digits`` has no trailing zeros.
    """
    rest = "0*[1-9][0-9]*" if strict else "[0-9]*"  # after all of ``digits``
    if digits == "":
        return rest
    if not strict:  # the last tight digit and its branch merge into one class
        rest = _digit_class(int(digits[-1]), 9) + "[0-9]*"  # type: ignore[operator]
        digits = digits[:-1]

    def branch(t: int, stop: int) -> str | None:
        return _concat(_digit_class(int(digits[t]) + 1, 9), "[0-9]*")

    result = _chain(digits, branch, lambda t: False, rest)
    assert result is not None
    return result


def _fraction_tail_below(digits: str, strict: bool, *, nonempty: bool = False) -> str | None:
    """Digit strings ``E`` with ``0.E < 0.digits`` (``<=`` unless strict).

    ``digits`` has no trailing zeros; ``nonempty`` drops ``E = ""``.
    """
    if digits == "":
        if strict:
            return None
        return "0+" if nonempty else "0*"

    def branch(t: int, stop: int) -> str | None:
        return _concat(_digit_class(0, int(digits[t]) - 1), "[0-9]*")

    return _chain(digits, branch, lambda t: t > 0 or not nonempty, None if strict else "0*")


def _fraction_above(low: str, strict: bool) -> str:
    """Optional fractional parts (with the dot) above ``0.low``."""
    if low == "" and not strict:
        return ANY_FRACTION
    return r"\." + _fraction_tail_above(low, strict)


def _fraction_below(high: str, strict: bool) -> str | None:
    """Optional fractional parts (with the dot) below ``0.high``."""
    if high == "" and strict:
        return None
    tail = _fraction_tail_below(high, strict, nonempty=True)
    assert tail is not None
    return _optional(r"\." + tail)


def _fraction_between(low: str, low_strict: bool, high: str, high_strict: bool) -> str | None:
    """Optional fractional parts (with the dot) between ``0.low`` and ``0.high``."""
    width = max(len(low), len(high))
    padded_low, padded_high = low.ljust(width, "0"), high.ljust(width, "0")
    if padded_low > padded_high:
        return None
    if padded_low == padded_high:
        if low_strict or high_strict:
            return None
        return r"(?:\.0+)?" if low == "" else r"\." + low + "0*"
    i = next(t for t in range(width) if padded_low[t] != padded_high[t])
    low_digit, high_digit = int(padded_low[i]), int(padded_high[i])

    def can_stop(t: int) -> bool:
        """Whether the fraction may end before position ``t`` (lower bound used up)."""
        return not low_strict and t >= max(len(low), 1)

    split = _alt([
        "" if can_stop(i) else None,
        _concat(str(low_digit), _fraction_tail_above(padded_low[i + 1:].rstrip("0"), low_strict)),
        _concat(_digit_class(low_digit + 1, high_digit - 1), "[0-9]*"),
        _concat(str(high_digit), _fraction_tail_below(padded_high[i + 1:].rstrip("0"), high_strict)),
    ])
    body = _chain(padded_low[:i], lambda t, stop: None, can_stop, split)
    assert body is not None
    with_dot = r"\." + body
    return _optional(with_dot) if low == "" and not low_strict else with_dot


def _magnitude_regex(lo: Decimal, lo_strict: bool, hi: Decimal | None, hi_strict: bool) -> str | None:
    """Unsigned number spellings whose value ``m`` lies between ``0 <= lo`` and ``hi``."""
    lo_int, lo_frac = _split_magnitude(lo)
    hi_int, hi_frac = (None, "") if hi is None else _split_magnitude(hi)
    if lo_int == hi_int:
        return _concat(str(lo_int), _fraction_between(lo_frac, lo_strict, hi_frac, hi_strict))
    # integer parts with any fraction: strictly between, plus lo_int when its fraction is free
    free_from = lo_int if lo_frac == "" and not lo_strict else lo_int + 1
    free_to = None if hi_int is None else hi_int - 1
    parts: list[str | None] = []
    if free_from > lo_int:
        parts.append(str(lo_int) + _fraction_above(lo_frac, lo_strict))
    if free_to is None or free_from <= free_to:
        parts.append(_natural_range(free_from, free_to) + ANY_FRACTION)
    if hi_int is not None:
        parts.append(_concat(str(hi_int), _fraction_below(hi_frac, hi_strict)))
    return _alt(parts)


def _nonnegative_side(lo: Decimal | None, lo_strict: bool, hi: Decimal | None,
                      hi_strict: bool) -> str | None:
    """Unsigned spellings of the part of the interval at or above zero."""
    if hi is not None and (hi < 0 or (hi == 0 and hi_strict)):
        return None
    if lo is None or lo < 0:
        lo, lo_strict = Decimal(0), False
    return _magnitude_regex(lo, lo_strict, hi, hi_strict)


def decimal_range_regex(lo: Bound | None, hi: Bound | None, lo_exclusive: bool = False,
                        hi_exclusive: bool = False) -> str:
    """Regex matching JSON numbers without exponent whose exact value lies in the interval.

    Spellings are ``-?(0|[1-9][0-9]*)(\\.[0-9]+)?``: trailing fraction zeros
    (``1.50``) and ``-0``/``-0.0`` are allowed when their value is in range
    (unlike `integer_range_regex`, which has no ``-0``); exponent notation is
    never produced (a sound restriction for bounded numbers).  ``lo``/``hi``
    may be ``None`` (unbounded), ``int``, ``float`` (taken at its exact binary
    value, e.g. ``0.1`` is 0.1000000000000000055...) or `Decimal`; values are
    compared as exact decimals.  Raises ``ValueError`` for an empty interval.

    A validator that parses instances as binary floats can disagree at an
    exclusive float bound: ``0.10000000000000000001`` is exactly below
    ``Decimal(0.1)`` but parses to the float ``0.1`` itself.

    >>> import re
    >>> r = decimal_range_regex(0, 1.5, hi_exclusive=True)
    >>> [s for s in ("0", "-0.0", "1.4999", "1.5", "1.50", "-0.1", "01") if re.fullmatch(r, s)]
    ['0', '-0.0', '1.4999']
    """
    low, high = _to_decimal(lo, "lo"), _to_decimal(hi, "hi")
    if low is not None and high is not None and (low > high or (low == high and (lo_exclusive or hi_exclusive))):
        bracket = ("(" if lo_exclusive else "[", ")" if hi_exclusive else "]")
        raise ValueError(f"empty number range {bracket[0]}{lo}, {hi}{bracket[1]}")
    positive = _nonnegative_side(low, lo_exclusive, high, hi_exclusive)
    negated_low = None if high is None else high.copy_negate()
    negated_high = None if low is None else low.copy_negate()
    negative = _nonnegative_side(negated_low, hi_exclusive, negated_high, lo_exclusive)
    result = _alt([positive, _concat("-", negative)])
    assert result is not None, "a non-empty interval has a decimal spelling"
    return result
