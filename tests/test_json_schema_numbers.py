"""Numeric bounds -> regexes: brute force against Python ints and exact Decimals."""

from __future__ import annotations

import random
import re
from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import given, settings, strategies as st

from constrained.automata.byte_dfa import compile_regex
from constrained.json_schema.numbers import decimal_range_regex, integer_bounds, integer_range_regex

WINDOW = range(-1300, 1301)
BOUNDS = [None, 0, 1, -1, 5, -7, 9, -9, 10, -10, 42, -57, 99, -99, 100, -100, 123, 999, -999, 1000, -1000,
          1001, 1099, -1100, 1234]
INTEGER_PAIRS = [(lo, hi) for lo in BOUNDS for hi in BOUNDS if lo is None or hi is None or lo <= hi]
NON_CANONICAL = ["", "00", "01", "-0", "-00", "-01", "+1", "+0", "1.0", "0.0", "1e2", "--1", " 1", "1 ", "٣"]
JSON_NUMBER = r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?"


def in_interval(value, lo, hi, lo_exclusive=False, hi_exclusive=False) -> bool:
    above = lo is None or (value > lo if lo_exclusive else value >= lo)
    below = hi is None or (value < hi if hi_exclusive else value <= hi)
    return above and below


def assert_well_formed(regex: str) -> None:
    """Only (?:...) groups, no anchors, look-arounds or named groups; re and our DFA accept it."""
    assert all(regex[i + 1:i + 3] == "?:" for i, c in enumerate(regex) if c == "(" and regex[i - 1:i] != "\\")
    assert "^" not in regex.replace("[^", "") and "$" not in regex
    re.compile(regex)


# ------------------------------------------------------------------ integer ranges

@pytest.mark.parametrize(("lo", "hi"), INTEGER_PAIRS)
def test_integer_range_matches_exactly_the_window(lo: int | None, hi: int | None) -> None:
    regex = integer_range_regex(lo, hi)
    assert_well_formed(regex)
    pattern = re.compile(regex)
    wrong = [v for v in WINDOW if bool(pattern.fullmatch(str(v))) != in_interval(v, lo, hi)]
    assert not wrong, (lo, hi, regex, wrong[:5])


@settings(max_examples=150, deadline=None, derandomize=True)
@given(lo=st.none() | st.integers(-1500, 1500), hi=st.none() | st.integers(-1500, 1500))
def test_integer_range_random_small_bounds(lo: int | None, hi: int | None) -> None:
    if lo is not None and hi is not None and lo > hi:
        lo, hi = hi, lo
    pattern = re.compile(integer_range_regex(lo, hi))
    assert all(bool(pattern.fullmatch(str(v))) == in_interval(v, lo, hi) for v in WINDOW)


# hypothesis favours small integers in a wide range: spell the digits instead
def digit_strings(most: int) -> st.SearchStrategy[str]:
    """Digit strings whose length is uniform in 0..most (plain st.text favours short ones)."""
    return st.integers(0, most).flatmap(lambda n: st.text("0123456789", min_size=n, max_size=n))


DIGITS = digit_strings(45)
BIG = st.builds(lambda sign, lead, rest: sign * int(lead + rest), st.sampled_from([1, -1]),
                st.sampled_from("0123456789"), DIGITS)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(lo=st.none() | BIG, hi=st.none() | BIG, others=st.lists(BIG, max_size=20),
       deltas=st.lists(st.builds(lambda m, p: m * 10**p, st.integers(-9, 9), st.integers(0, 46)), max_size=12))
def test_integer_range_large_values(lo, hi, others, deltas) -> None:
    if lo is not None and hi is not None and lo > hi:
        lo, hi = hi, lo
    pattern = re.compile(integer_range_regex(lo, hi))
    edges = [b + d for b in (lo, hi) if b is not None for d in [*deltas, -1, 0, 1]]
    for v in [*others, *edges, *spelling_edits(lo), *spelling_edits(hi), 0, -1, 1]:
        assert bool(pattern.fullmatch(str(v))) == in_interval(v, lo, hi), (lo, hi, v)


def spelling_edits(bound: int | None) -> list[int]:
    """The bound with one digit inserted ("0" or "9") or deleted at every position."""
    if bound is None:
        return []
    sign, digits = ("-", str(-bound)) if bound < 0 else ("", str(bound))
    edited = [digits[:i] + d + digits[i:] for i in range(1, len(digits) + 1) for d in "09"]
    edited += [digits[:i] + digits[i + 1:] for i in range(1, len(digits))]
    return [int(sign + e) for e in edited if e]


@pytest.mark.parametrize(("lo", "hi"), [(None, None), (-5, 5), (0, 100), (None, 0), (0, None), (-1, 1), (-100, 0)])
def test_integer_range_rejects_non_canonical_spellings(lo, hi) -> None:
    pattern = re.compile(integer_range_regex(lo, hi))
    assert not [s for s in NON_CANONICAL if pattern.fullmatch(s)]


def test_integer_range_regex_is_compact() -> None:
    assert integer_range_regex(None, None) == "(?:0|[1-9][0-9]*|-[1-9][0-9]*)"
    assert integer_range_regex(1, None) == "[1-9][0-9]*"
    assert integer_range_regex(0, 9) == "[0-9]"
    assert integer_range_regex(7, 7) == "7"
    assert integer_range_regex(-3, -3) == "-3"
    assert integer_range_regex(0, 10**22) == "(?:[0-9]|[1-9][0-9]{1,21}|1" + "0" * 22 + ")"
    assert len(integer_range_regex(-2**63, 2**63 - 1)) < 700


def test_empty_integer_range_raises() -> None:
    with pytest.raises(ValueError, match=r"empty integer range \[3, 2\]"):
        integer_range_regex(3, 2)


# ------------------------------------------------------------------ bounds folding

@pytest.mark.parametrize(("keywords", "expected"), [
    ((None, None, None, None), (None, None)),
    ((2.5, None, None, None), (3, None)),
    ((None, None, 2.0, None), (3, None)),
    ((None, None, 2.5, None), (3, None)),
    ((None, -0.5, None, None), (None, -1)),
    ((None, None, None, -0.5), (None, -1)),
    ((None, None, None, 3), (None, 2)),
    ((-2.5, None, -2.5, None), (-2, None)),
    ((1, None, 5, None), (6, None)),
    ((7, None, 5, None), (7, None)),
    ((None, 10, None, 10.5), (None, 10)),
    ((None, 10.9, None, 10.5), (None, 10)),
    ((1e20, None, None, None), (10**20, None)),
    ((None, None, None, 1e20), (None, 10**20 - 1)),
    ((Decimal("0.1"), Decimal("1e3"), None, None), (1, 1000)),
    ((3, 2, None, None), (3, 2)),  # empty: left to integer_range_regex
])
def test_integer_bounds(keywords, expected) -> None:
    assert integer_bounds(*keywords) == expected


def test_integer_bounds_huge_float_is_exact() -> None:
    lo, hi = integer_bounds(1e300, None, None, 1.7976931348623157e308)
    assert lo == int(Fraction(1e300)) and len(str(lo)) == 301
    assert hi == int(Fraction(1.7976931348623157e308)) - 1
    assert integer_bounds(None, None, -1e300, None) == (-int(Fraction(1e300)) + 1, None)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(x=st.floats(allow_nan=False, allow_infinity=False, min_value=-1e30, max_value=1e30))
def test_integer_bounds_are_tight_for_floats(x: float) -> None:
    exact = Fraction(x)
    lo, hi = integer_bounds(x, x, None, None)
    assert lo - 1 < exact <= lo and hi <= exact < hi + 1
    lo, hi = integer_bounds(None, None, x, x)
    assert lo - 1 <= exact < lo and hi < exact <= hi + 1


@pytest.mark.parametrize("bad", [float("inf"), float("nan"), Decimal("NaN")])
def test_integer_bounds_reject_non_finite(bad) -> None:
    with pytest.raises(ValueError):
        integer_bounds(bad, None, None, None)


def test_integer_bounds_reject_non_numbers() -> None:
    with pytest.raises(TypeError):
        integer_bounds(True, None, None, None)
    with pytest.raises(TypeError):
        integer_bounds(None, "3", None, None)


# ------------------------------------------------------------------ decimal ranges

@st.composite
def decimal_strings(draw, max_int_digits: int = 4, max_frac_digits: int = 4) -> str:
    """JSON numbers without exponent: sign, up to 4 integer digits, up to 4 fraction digits (by default)."""
    sign = draw(st.sampled_from(["", "", "-"]))
    long_integer = st.builds(lambda lead, rest: lead + rest, st.sampled_from("123456789"),
                             digit_strings(max_int_digits - 1))
    integer = draw(st.sampled_from(["0", "1", "9", "10"]) | long_integer)
    fraction = draw(digit_strings(max_frac_digits) | st.sampled_from(["", "0", "5", "50", "9"]))
    return sign + integer + ("." + fraction if fraction else "")


FIXED_CANDIDATES = sorted({
    "0", "-0", "0.0", "-0.0", "0.00", "1", "-1", "1.0", "1.5", "1.50", "1.4999999999", "1.5000000001", "-1.5",
    "0.5", "-0.5", "9.99", "10", "99.9999", "100", "100.000", "-100.0001", "1234.5678", "-9999.9999", "0.0001",
    "-0.0001", "12", "12.0", "11.9999", "12.00001", "2.25", "2.2499", "3.14", "3.141", "3.15", "3.1500001",
})


def neighbours(bound: Decimal) -> list[str]:
    """Spellings on and next to a bound: itself, trailing zeros, +- one unit in the 5th decimal."""
    step = Decimal("0.00001")
    values = [bound, bound + step, bound - step, bound + 1, bound - 1]
    spelled = [format(v, "f") for v in values]
    return spelled + [s + ("0" if "." in s else ".0") for s in spelled]


def check_decimal_interval(lo, hi, lo_exclusive: bool, hi_exclusive: bool, candidates) -> None:
    regex = decimal_range_regex(lo, hi, lo_exclusive, hi_exclusive)
    assert_well_formed(regex)
    pattern = re.compile(regex)
    low = None if lo is None else Decimal(lo)
    high = None if hi is None else Decimal(hi)
    for text in candidates:
        if not re.fullmatch(JSON_NUMBER, text):
            assert not pattern.fullmatch(text), (regex, text)
            continue
        expected = in_interval(Decimal(text), low, high, lo_exclusive, hi_exclusive)
        assert bool(pattern.fullmatch(text)) == expected, (lo, hi, lo_exclusive, hi_exclusive, text, regex)


def random_decimal_strings(count: int, seed: int = 0) -> list[str]:
    """A fixed pool like `decimal_strings` (drawing it with hypothesis per example is slow)."""
    rng = random.Random(seed)
    pool = []
    for _ in range(count):
        integer = str(rng.choice([0, 1, 9, 10, 99, 100, rng.randrange(10**rng.randint(1, 4))]))
        fraction = "".join(rng.choice("0123456789") for _ in range(rng.randint(0, 4)))
        pool.append(rng.choice(["", "", "-"]) + integer + ("." + fraction if fraction else ""))
    return pool


DECIMAL_POOL = random_decimal_strings(250)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(lo=st.none() | decimal_strings(), hi=st.none() | decimal_strings(), lo_exclusive=st.booleans(),
       hi_exclusive=st.booleans())
def test_decimal_range_against_decimal_comparison(lo, hi, lo_exclusive, hi_exclusive) -> None:
    low = None if lo is None else Decimal(lo)
    high = None if hi is None else Decimal(hi)
    if low is not None and high is not None and low > high:
        lo, hi, low, high = hi, lo, high, low
    if low is not None and high is not None and low == high and (lo_exclusive or hi_exclusive):
        with pytest.raises(ValueError, match="empty number range"):
            decimal_range_regex(low, high, lo_exclusive, hi_exclusive)
        return
    candidates = [*FIXED_CANDIDATES, *DECIMAL_POOL]
    candidates += [s for b in (low, high) if b is not None for s in neighbours(b)]
    check_decimal_interval(low, high, lo_exclusive, hi_exclusive, candidates)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(lo=decimal_strings(40, 50), hi=decimal_strings(40, 50), lo_exclusive=st.booleans(),
       hi_exclusive=st.booleans(), positions=st.lists(st.integers(-45, 45), max_size=8))
def test_decimal_range_long_bounds(lo, hi, lo_exclusive, hi_exclusive, positions) -> None:
    """Bounds with up to 90 digits exercise the block-grouped digit chains."""
    low, high = sorted([Decimal(lo), Decimal(hi)])
    if low == high and (lo_exclusive or hi_exclusive):
        return
    steps = [Decimal(10) ** p for p in positions]
    values = [b + s for b in (low, high) for s in [*steps, *(-s for s in steps), Decimal(0)]]
    candidates = [format(v, "f") for v in values] + [format(v, "f") + "000" for v in values if "." in format(v, "f")]
    check_decimal_interval(low, high, lo_exclusive, hi_exclusive, candidates)


@pytest.mark.parametrize(("lo", "hi"), [(Decimal("123456789012345678901234567890.5"), None),
                                         (None, Decimal("-98765432109876543210987654321")),
                                         (Decimal("1" * 35), Decimal("1" * 35 + ".000000000000000000000000000001"))])
def test_decimal_range_long_bounds_boundaries(lo, hi) -> None:
    bounds = [b for b in (lo, hi) if b is not None]
    candidates = [s for b in bounds for s in neighbours(b)] + [format(b + Decimal("1e-40"), "f") for b in bounds]
    for lo_exclusive in (False, True):
        for hi_exclusive in (False, True):
            check_decimal_interval(lo, hi, lo_exclusive, hi_exclusive, candidates + ["0", "-1", "1"])


def test_decimal_exclusive_bound_examples() -> None:
    pattern = re.compile(decimal_range_regex(None, 1.5, False, True))
    assert pattern.fullmatch("1.4999999999") and pattern.fullmatch("-3") and pattern.fullmatch("1")
    assert not pattern.fullmatch("1.5") and not pattern.fullmatch("1.50") and not pattern.fullmatch("1.500001")
    pattern = re.compile(decimal_range_regex(1.5, 1.5, False, False))
    assert [s for s in ("1.5", "1.50", "1.5000", "1.51", "1.4", "1", "2") if pattern.fullmatch(s)] == \
        ["1.5", "1.50", "1.5000"]


def test_decimal_range_never_produces_exponents_or_bad_spellings() -> None:
    pattern = re.compile(decimal_range_regex(-1000, 1000, False, False))
    bad = ["1e2", "1E2", "1.0e1", "+1", "01", "1.", ".5", "-", "", "00.5", "1.2.3", " 1"]
    assert not [s for s in bad if pattern.fullmatch(s)]


def test_decimal_float_bounds_are_exact() -> None:
    exact = format(Decimal(0.1), "f")  # 0.1000000000000000055511151231257827021181583404541015625
    above = exact[:-1] + "6"
    inclusive = re.compile(decimal_range_regex(None, 0.1, False, False))
    assert inclusive.fullmatch("0.1") and inclusive.fullmatch(exact) and inclusive.fullmatch(exact + "000")
    assert not inclusive.fullmatch(above)
    exclusive = re.compile(decimal_range_regex(0.1, None, True, False))
    assert not exclusive.fullmatch("0.1") and not exclusive.fullmatch(exact) and exclusive.fullmatch(above)


def test_decimal_range_sign_of_zero_and_unbounded() -> None:
    everything = re.compile(decimal_range_regex(None, None))
    for text in ("0", "-0", "-0.0", "12.340", "-99999999999999999999.5"):
        assert everything.fullmatch(text)
    assert not re.fullmatch(decimal_range_regex(0, None, True, False), "-0")
    assert not re.fullmatch(decimal_range_regex(0, None, True, False), "0.000")
    assert re.fullmatch(decimal_range_regex(0, None, False, False), "-0.00")


@pytest.mark.parametrize(("lo", "hi", "lo_exclusive", "hi_exclusive"), [
    (1, 0, False, False), (1, 1, True, False), (1, 1, False, True), (Decimal("0.5"), 0.25, False, False)])
def test_empty_decimal_range_raises(lo, hi, lo_exclusive, hi_exclusive) -> None:
    with pytest.raises(ValueError, match="empty number range"):
        decimal_range_regex(lo, hi, lo_exclusive, hi_exclusive)


def test_decimal_range_rejects_non_finite_bounds() -> None:
    with pytest.raises(ValueError):
        decimal_range_regex(float("-inf"), 1)


# ------------------------------------------------------------------ our own DFA compiler

DFA_CASES = [
    integer_range_regex(None, None), integer_range_regex(-1100, 1100), integer_range_regex(37, None),
    integer_range_regex(None, -42), integer_range_regex(-2**31, 2**31 - 1),
    decimal_range_regex(None, None), decimal_range_regex(-1.5, 2.25, False, True),
    decimal_range_regex(0, 1, True, True), decimal_range_regex(0.1, 0.2, False, False),
    decimal_range_regex(Decimal("-12.345"), Decimal("12.3456"), True, False),
]
DFA_PROBES = [*NON_CANONICAL, *FIXED_CANDIDATES, "-1100", "1101", "-1101", "37", "36", "-42", "-41",
              "2147483647", "2147483648", "-2147483648", "-2147483649", "0.2", "0.20000000000000002", "1.0000",
              "-12.345", "-12.3449", "12.3456", "12.34561", "1e5",
              "0.1000000000000000055511151231257827021181583404541015625", *DECIMAL_POOL]


@pytest.mark.parametrize("regex", DFA_CASES, ids=range(len(DFA_CASES)))
def test_byte_dfa_agrees_with_re(regex: str) -> None:
    dfa = compile_regex(regex)
    for text in DFA_PROBES:
        assert dfa.matches(text.encode()) == bool(re.fullmatch(regex, text)), (regex, text)


def test_byte_dfa_compiles_regexes_of_huge_float_bounds() -> None:
    lo, hi = integer_bounds(-1e300, 1e300, None, None)
    regex = integer_range_regex(lo, hi)
    dfa = compile_regex(regex)
    for v in (hi, hi + 1, lo, lo - 1, 0, 10**299, -(10**300)):
        assert dfa.matches(str(v).encode()) == (lo <= v <= hi), v
    assert len(regex) < 40 * len(str(hi))
    tiny = decimal_range_regex(0, 1e-300, True, False)
    exact = format(Decimal(1e-300), "f")
    assert re.fullmatch(tiny, exact) and not re.fullmatch(tiny, exact + "1")
    assert re.fullmatch(tiny, "0." + "0" * 299 + "1") and not re.fullmatch(tiny, "0." + "0" * 298 + "1")
    assert len(tiny) < 60 * len(exact)
