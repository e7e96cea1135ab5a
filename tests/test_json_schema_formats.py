"""JSON Schema ``format`` regexes: they compile, are sound, and accept common values.

Soundness is checked on samples drawn two ways -- hypothesis' ``from_regex`` and
random walks over the compiled byte DFA (which reach the length bounds that
``from_regex`` rarely does) -- against an independent reference checker written
here for every format, and against ``jsonschema``'s draft 2020-12 format checker
where it has one for the format in this environment (some of its checkers need
optional packages: fqdn, rfc3987, uri-template, isoduration, jsonpointer, ...).
"""

from __future__ import annotations

import calendar
import ipaddress
import json
import random
import re
import shutil
import subprocess
import uuid
import zlib
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from constrained.automata.byte_dfa import DEAD, START, compile_regex
from constrained.errors import UnsupportedGrammarError
from constrained.json_schema import formats
from constrained.json_schema.formats import FORMAT_REGEXES, format_regex

try:
    import jsonschema

    CHECKER = jsonschema.Draft202012Validator.FORMAT_CHECKER
    CHECKED = frozenset(CHECKER.checkers)
except ImportError:  # pragma: no cover
    CHECKER = None
    CHECKED = frozenset()

ALL_FORMATS = sorted(FORMAT_REGEXES)
DRAFT_2020_12_FORMATS = {
    "date-time", "date", "time", "duration", "email", "idn-email", "hostname", "idn-hostname",
    "ipv4", "ipv6", "uri", "uri-reference", "iri", "iri-reference", "uuid", "uri-template",
    "json-pointer", "relative-json-pointer", "regex",
}

# ---------------------------------------------------------------- reference checkers
# Written independently of the regexes (plain parsing, stdlib where possible).


def _is_date(s: str) -> bool:
    m = re.fullmatch(r"([0-9]{4})-([0-9]{2})-([0-9]{2})", s)
    if not m:
        return False
    y, mo, d = map(int, m.groups())
    return y >= 1 and 1 <= mo <= 12 and 1 <= d <= calendar.monthrange(y, mo)[1]


def _is_time(s: str) -> bool:
    m = re.fullmatch(r"([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]+)?([Zz]|[+-]([0-9]{2}):([0-9]{2}))", s)
    if not m:
        return False
    hh, mm, ss = int(m[1]), int(m[2]), int(m[3])
    if not (hh <= 23 and mm <= 59 and ss <= 59):       # leap seconds are refused by design
        return False
    return m[6] is None or (int(m[6]) <= 23 and int(m[7]) <= 59)


def _is_date_time(s: str) -> bool:
    return len(s) > 11 and s[10] in "Tt" and _is_date(s[:10]) and _is_time(s[11:])


def _is_duration(s: str) -> bool:
    """RFC 3339 appendix A, by hand."""
    if not s.startswith("P") or len(s) < 3:
        return False
    body = s[1:]
    date_part, _, time_part = body.partition("T")
    if "T" in body and not time_part:
        return False
    units = re.findall(r"([0-9]+)([A-Z])", date_part)
    if "".join(n + u for n, u in units) != date_part:
        return False
    t_units = re.findall(r"([0-9]+)([A-Z])", time_part)
    if "".join(n + u for n, u in t_units) != time_part:
        return False
    d = "".join(u for _, u in units)
    t = "".join(u for _, u in t_units)
    if d == "W":
        return t == ""
    if d not in ("", "D", "M", "MD", "Y", "YM", "YMD"):
        return False
    if t not in ("", "H", "HM", "HMS", "M", "MS", "S"):
        return False
    return bool(d or t)


_LABEL = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?")


def _is_hostname(s: str) -> bool:
    if not s or len(s) > 253:
        return False
    labels = s.split(".")
    if not all(_LABEL.fullmatch(label) for label in labels):
        return False
    if any(label[2:4] == "--" for label in labels):        # RFC 5891: reserved for A-labels
        return False
    if not labels[-1][0].isalpha():                        # RFC 1123 2.1: TLD is alphabetic
        return False
    try:                                                   # and valid IDNA (idn-hostname)
        import idna
    except ImportError:  # pragma: no cover
        return True
    try:
        idna.encode(s)
    except (idna.IDNAError, UnicodeError):
        return False
    return True


_ATEXT = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!#$%&'*+-/=?^_`{|}~")


def _is_email(s: str) -> bool:
    """RFC 5321 Mailbox, with the 64-octet local-part and 254-octet path limits."""
    local, sep, domain = s.rpartition("@")
    if not sep or len(local) > 64 or len(s) > 254:
        return False
    if local.startswith('"'):
        if len(local) < 2 or not local.endswith('"'):
            return False
        body, i = local[1:-1], 0
        while i < len(body):
            c = body[i]
            if c == "\\":
                if i + 1 >= len(body) or not " " <= body[i + 1] <= "~":
                    return False
                i += 2
                continue
            if not (" " <= c <= "~") or c in '"\\':
                return False
            i += 1
    else:
        atoms = local.split(".")
        if not all(atoms) or not all(set(a) <= _ATEXT for a in atoms):
            return False
    if domain.startswith("["):
        if not domain.endswith("]"):
            return False
        literal = domain[1:-1]
        try:
            if literal.startswith("IPv6:"):
                ipaddress.IPv6Address(literal[5:])
            else:
                ipaddress.IPv4Address(literal)
        except ValueError:
            return False
        return True
    return _is_hostname(domain)


def _is_ipv4(s: str) -> bool:
    try:
        ipaddress.IPv4Address(s)
    except ValueError:
        return False
    return True


def _is_ipv6(s: str) -> bool:
    try:
        return not ipaddress.IPv6Address(s).scope_id
    except ValueError:
        return False


_URI_SPLIT = re.compile(r"(?:([^:/?#]+):)?(?://([^/?#]*))?([^?#]*)(?:\?([^#]*))?(?:#(.*))?", re.DOTALL)
_UNRESERVED = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~")
_SUB_DELIMS = set("!$&'()*+,;=")


def _ucschar(c: str) -> bool:
    o = ord(c)
    return (0xA0 <= o <= 0xD7FF or 0xF900 <= o <= 0xFDCF or 0xFDF0 <= o <= 0xFFEF
            or (0x10000 <= o <= 0xEFFFD and (o & 0xFFFF) <= 0xFFFD and not 0xE0000 <= o < 0xE1000))


def _iprivate(c: str) -> bool:
    o = ord(c)
    return 0xE000 <= o <= 0xF8FF or 0xF0000 <= o <= 0xFFFFD or 0x100000 <= o <= 0x10FFFD


def _pct_or(s: str, allowed) -> bool:
    """Every character of ``s`` is part of a %XX escape or ``allowed``."""
    i = 0
    while i < len(s):
        if s[i] == "%":
            if not re.fullmatch(r"%[0-9A-Fa-f]{2}", s[i:i + 3]):
                return False
            i += 3
            continue
        if not allowed(s[i]):
            return False
        i += 1
    return True


def _chars_ok(s: str, extra: str, iri: bool, private: bool = False) -> bool:
    return _pct_or(s, lambda c: c in _UNRESERVED or c in _SUB_DELIMS or c in extra
                   or (iri and _ucschar(c)) or (private and _iprivate(c)))


def _template_literal(c: str) -> bool:
    o = ord(c)
    return (o in (0x21, 0x24, 0x23, 0x26, 0x3D, 0x5D, 0x5F, 0x7E) or 0x28 <= o <= 0x3B
            or 0x3F <= o <= 0x5B or 0x61 <= o <= 0x7A or _ucschar(c) or _iprivate(c))


def _is_uri_ref(s: str, *, absolute: bool, iri: bool) -> bool:
    """RFC 3986 / RFC 3987, by component (appendix B split, then each part's rules)."""
    m = _URI_SPLIT.fullmatch(s)
    if not m:
        return False
    scheme, authority, path, query, fragment = m.groups()
    if scheme is not None and not re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*", scheme):
        return False
    if absolute and scheme is None:
        return False
    if authority is not None:
        userinfo, at, hostport = authority.rpartition("@")
        if at and not _chars_ok(userinfo, ":", iri):
            return False
        if hostport.startswith("["):
            host, close, port = hostport[1:].partition("]")
            if not close:
                return False
            if host[:1] in ("v", "V"):
                if not re.fullmatch(r"[vV][0-9A-Fa-f]+\.[A-Za-z0-9\-._~!$&'()*+,;=:]+", host):
                    return False
            elif not _is_ipv6(host):
                return False
            if port and not re.fullmatch(r":[0-9]*", port):
                return False
        else:
            host, colon, port = hostport.partition(":")
            if colon and not re.fullmatch(r"[0-9]*", port):
                return False
            if not _chars_ok(host, "", iri):
                return False
    else:
        if path.startswith("//"):
            return False
        if scheme is None and ":" in path.split("/")[0]:
            return False
    if any(not _chars_ok(seg, ":@", iri) for seg in path.split("/")):
        return False
    if query is not None and not _chars_ok(query, ":@/?", iri, private=iri):
        return False
    return fragment is None or _chars_ok(fragment, ":@/?", iri)


def _is_uri_template(s: str) -> bool:
    """RFC 6570 section 2, by hand (reserved operators refused)."""
    for i, part in enumerate(re.split(r"(\{[^{}]*\})", s)):
        if i % 2:
            body = part[1:-1]
            if body[:1] in set("+#./;?&"):
                body = body[1:]
            for varspec in body.split(","):
                m = re.fullmatch(r"([A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)*)(:[1-9][0-9]{0,3}|\*)?", varspec)
                if not m:
                    return False
        elif "{" in part or "}" in part:
            return False
        elif not _pct_or(part, _template_literal):
            return False
    return True


def _is_json_pointer(s: str) -> bool:
    if s and not s.startswith("/"):
        return False
    return not re.search(r"~(?![01])", s)


def _is_relative_json_pointer(s: str) -> bool:
    m = re.fullmatch(r"(0|[1-9][0-9]*)(.*)", s, re.DOTALL)
    return bool(m) and (m[2] == "#" or _is_json_pointer(m[2]))


def _is_regex(s: str) -> bool:
    try:
        re.compile(s)
    except re.error:
        return False
    return True


def _is_uuid(s: str) -> bool:
    try:
        uuid.UUID(s)
    except ValueError:
        return False
    return len(s) == 36 and all(s[i] == "-" for i in (8, 13, 18, 23))


REFERENCE: dict[str, Callable[[str], bool]] = {
    "date": _is_date,
    "time": _is_time,
    "date-time": _is_date_time,
    "duration": _is_duration,
    "email": _is_email,
    "idn-email": _is_email,
    "hostname": _is_hostname,
    "idn-hostname": _is_hostname,
    "ipv4": _is_ipv4,
    "ipv6": _is_ipv6,
    "uri": lambda s: _is_uri_ref(s, absolute=True, iri=False),
    "uri-reference": lambda s: _is_uri_ref(s, absolute=False, iri=False),
    "iri": lambda s: _is_uri_ref(s, absolute=True, iri=True),
    "iri-reference": lambda s: _is_uri_ref(s, absolute=False, iri=True),
    "uri-template": _is_uri_template,
    "json-pointer": _is_json_pointer,
    "relative-json-pointer": _is_relative_json_pointer,
    "regex": _is_regex,
    "uuid": _is_uuid,
}


def assert_valid(fmt: str, value: str) -> None:
    assert REFERENCE[fmt](value), f"{fmt}: reference checker refuses {value!r}"
    if fmt in CHECKED:
        assert CHECKER.conforms(value, fmt), f"{fmt}: jsonschema refuses {value!r}"


# ---------------------------------------------------------------- (1) compilation


def test_every_draft_2020_12_format_is_covered() -> None:
    assert set(FORMAT_REGEXES) == DRAFT_2020_12_FORMATS


@pytest.mark.parametrize("fmt", ALL_FORMATS)
def test_compiles_to_a_small_dfa(fmt: str) -> None:
    dfa = compile_regex(format_regex(fmt))
    assert 1 < dfa.num_states <= 3000
    assert not re.search(r"\\d", format_regex(fmt).replace("\\\\", "")), "\\d is Unicode-wide"


def test_unknown_format_raises_a_typed_error() -> None:
    with pytest.raises(UnsupportedGrammarError, match="'color'"):
        format_regex("color")


# ---------------------------------------------------------------- (2) soundness

# Hypothesis' ``from_regex`` is slow on huge Unicode classes and pathological on
# deeply nested repetitions, so it draws from a projection of each regex: the
# RFC 3987 ucschar / iprivate ranges become a few representative characters,
# negated classes draw from a small alphabet (no surrogates), and the ``regex``
# format is drawn at group depth 0.  The DFA random walks below cover the full
# regexes.
_ALPHABET = ("".join(map(chr, range(0x20, 0x7F))) + "\x00\t\n\x7f\xa0\xe9\u4f8b\ue000\ufdd0\ufffd"
             "\U0001f600\U000e0001\U0010fffd")
# formats sharing one regex are sampled once and checked under each name
_GROUPS: dict[str, list[str]] = {}
for _fmt in ALL_FORMATS:
    _GROUPS.setdefault(FORMAT_REGEXES[_fmt], []).append(_fmt)
SAMPLED = [fmts for fmts in _GROUPS.values()]


def _projection(fmt: str) -> str:
    if fmt == "regex":
        return formats._rx_alternation(0)
    return (format_regex(fmt).replace(formats._UCSCHAR, "\u00e9\u4f8b\U0001f600")
            .replace(formats._IPRIVATE, "\ue000\U0010fffd"))


def _check_hypothesis_samples(fmts: list[str], examples: int) -> None:
    regex = _projection(fmts[0])
    kwargs = {"alphabet": _ALPHABET} if "[^" in regex else {}
    drawn: list[str] = []

    @settings(max_examples=examples, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(st.lists(st.from_regex(regex, fullmatch=True, **kwargs), min_size=10, max_size=10))
    def check(values: list[str]) -> None:
        for value in values:
            assert re.fullmatch(format_regex(fmts[0]), value), value
            for fmt in fmts:
                assert_valid(fmt, value)
        drawn.extend(values)

    check()
    assert len(drawn) >= 10 * examples


@pytest.mark.parametrize("fmts", SAMPLED, ids=lambda fmts: "+".join(fmts))
def test_hypothesis_samples_are_valid(fmts: list[str]) -> None:
    """100 samples per regex here (plus 300 DFA walks below); -m slow draws 200."""
    _check_hypothesis_samples(fmts, 10)


@pytest.mark.slow
@pytest.mark.parametrize("fmts", SAMPLED, ids=lambda fmts: "+".join(fmts))
def test_hypothesis_samples_are_valid_thorough(fmts: list[str]) -> None:
    _check_hypothesis_samples(fmts, 20)


def _random_walks(regex: str, n: int, seed: int, max_bytes: int = 400) -> list[str]:
    """Random members of the language, from walks over the byte DFA: each walk
    stops at an accepting state with a per-walk probability (some walks run long),
    and past ``max_bytes`` heads for the nearest accepting state."""
    dfa = compile_regex(regex)
    table, accepting = dfa.transitions, dfa.accepting
    dist = np.where(accepting, 0, 10**9)
    dist[DEAD] = 10**9
    while True:                                   # bytes to the nearest acceptance
        new = np.minimum(dist, dist[table].min(axis=1) + 1)
        new[DEAD] = 10**9
        if (new == dist).all():
            break
        dist = new
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        stop = rng.choice((0.002, 0.01, 0.05, 0.2))
        state, data = START, bytearray()
        while True:
            if accepting[state] and (rng.random() < stop or dist[state] == 0 and len(data) >= max_bytes):
                break
            live = np.flatnonzero(table[state])
            if not len(live):                     # an accepting state with no way on
                break
            if len(data) >= max_bytes:
                live = live[dist[table[state, live]] < dist[state]]
            b = int(rng.choice(live))
            data.append(b)
            state = int(table[state, b])
        out.append(data.decode("utf-8"))
    return out


@pytest.mark.parametrize("fmt", ALL_FORMATS)
def test_dfa_random_walks_are_valid(fmt: str) -> None:
    regex = format_regex(fmt)
    for value in _random_walks(regex, 300, seed=zlib.crc32(fmt.encode())):
        assert re.fullmatch(regex, value), value
        assert_valid(fmt, value)


def test_hostname_walks_reach_the_length_bounds() -> None:
    walks = _random_walks(format_regex("hostname"), 300, seed=1)
    assert max(len(w) for w in walks) > 150
    assert max(max(map(len, w.split("."))) for w in walks) > 40


@pytest.mark.skipif(shutil.which("node") is None, reason="node not installed")
def test_regex_samples_are_ecma_262_unicode_patterns() -> None:
    samples = _random_walks(format_regex("regex"), 300, seed=7, max_bytes=80)
    script = ("const xs = JSON.parse(require('fs').readFileSync(0, 'utf8')); const bad = [];"
              "for (const x of xs) { try { new RegExp(x, 'u'); } catch (e) { bad.push(x); } }"
              "process.stdout.write(JSON.stringify(bad));")
    proc = subprocess.run(["node", "-e", script], input=json.dumps(samples), capture_output=True,
                          text=True, timeout=60, check=True)
    assert json.loads(proc.stdout) == []


# ---------------------------------------------------------------- (3) completeness

VALID: dict[str, list[str]] = {
    "date": ["2024-02-29", "2000-02-29", "2023-02-28", "1999-12-31", "0001-01-01", "2023-04-30",
             "9999-12-31"],
    "time": ["12:30:05Z", "23:59:59.999+05:30", "00:00:00-08:00", "08:15:00z", "10:00:00.5+00:00"],
    "date-time": ["2024-02-29T12:30:05Z", "1985-04-12T23:20:50.52Z", "1996-12-19T16:39:57-08:00",
                  "2023-01-01t00:00:00z"],
    "duration": ["P3Y6M4DT12H30M5S", "P1D", "PT1H", "P4W", "PT36H", "P1M", "PT0S", "P1Y2M",
                 "PT5M30S", "P23DT23H"],
    "email": ["user.name+tag@example.co.uk", "joe@example.com", "a@b.io", "x_y-z@mail.example.org",
              '"john doe"@example.com', "user@[192.168.1.1]", "user@[IPv6:2001:db8::1]",
              "o'brien@example.ie", "first.m.last@sub.domain.example.com"],
    "hostname": ["example.com", "www.example.co.uk", "localhost", "a-b.example", "xn-ab.example",
                 "h0stn4me", "a" * 63 + ".com", "1and1.com", "123.example.org",
                 ".".join(["a" * 30] * 8)],
    "ipv4": ["0.0.0.0", "127.0.0.1", "192.168.1.255", "255.255.255.255", "10.0.0.10"],
    "ipv6": ["::1", "::", "2001:db8::ff00:42:8329", "2001:0db8:0000:0000:0000:ff00:0042:8329",
             "fe80::1", "::ffff:192.0.2.128", "1:2:3:4:5:6:7:8", "1::2:3:4:5:6:7", "1:2:3:4:5:6::",
             "::1.2.3.4", "ABCD:EF01::", "1:2:3:4:5:6:1.2.3.4"],
    "uri": ["https://example.com/a?b=c#d", "http://user:pw@example.com:8080/p/a/t/h?q=1&r=2",
            "mailto:joe@example.com", "urn:isbn:0451450523", "file:///etc/hosts",
            "http://[2001:db8::1]:80/", "http://192.168.0.1/", "tag:example.com,2024:x",
            "https://example.com/%E2%82%AC", "ftp://ftp.is.co.za/rfc/rfc1808.txt", "a:"],
    "uri-reference": ["https://example.com/a?b=c#d", "/relative/path", "../up", "?q=1", "#frag",
                      "", "//example.com/x", "a/b/c", "./this:that"],
    "iri": ["https://example.com/a?b=c#d", "http://例え.テスト/パス", "https://ex.com/ü?ä=ö#ß"],
    "iri-reference": ["/ö/ü", "https://例え.jp/", "#frägment", ""],
    "uuid": ["123e4567-e89b-12d3-a456-426614174000", "00000000-0000-0000-0000-000000000000",
             "F81D4FAE-7DEC-11D0-A765-00A0C91E6BF6"],
    "uri-template": ["http://example.com/{id}", "/users/{user_id}/posts{?page,per_page}",
                     "{+path}/here", "{#frag}", "X{.list*}", "{/path:6}", "{;x,y}", "?fixed=yes{&x}",
                     "http://example.com/dictionary/{term:1}/{term}", "plaintext"],
    "json-pointer": ["", "/", "/foo", "/foo/0", "/a~1b", "/m~0n", "/ ", "/c%d", "/é/ü"],
    "relative-json-pointer": ["0", "1", "0#", "1/foo", "2/0/a~1b", "10#", "0/"],
    "regex": ["", "abc", "^a+b*$", "[a-z0-9_]+", "(foo|bar)?baz", r"\d{3}-\d{4}", r"\.txt$",
              "(?:ab)+?", "a|b|", "[^abc]", r"\w+\s*", "((a)b)c", r"x{2,}"],
}
VALID["idn-email"] = VALID["email"]
VALID["idn-hostname"] = VALID["hostname"]


@pytest.mark.parametrize("fmt", ALL_FORMATS)
def test_common_valid_values_match(fmt: str) -> None:
    regex = format_regex(fmt)
    dfa = compile_regex(regex)
    missed = [v for v in VALID[fmt] if not (re.fullmatch(regex, v) and dfa.matches(v.encode()))]
    assert missed == []
    for value in VALID[fmt]:
        assert_valid(fmt, value)


# ---------------------------------------------------------------- (4) rejection

INVALID: dict[str, list[str]] = {
    "date": ["2023-02-29", "1900-02-29", "2100-02-29", "0000-01-01", "2023-04-31", "2023-13-01",
             "2023-00-10", "2023-1-01", "20230101", "2023-01-01T00:00:00Z", "٢٠٢٣-01-01"],
    "time": ["24:00:00Z", "12:60:00Z", "12:00:60Z", "12:00:00", "12:00:00+24:00", "12:00Z",
             "12:00:00.Z", "1:00:00Z"],  # (12:00:60Z: leap seconds are refused by design)
    "date-time": ["2023-02-29T00:00:00Z", "2023-01-01 00:00:00Z", "2023-01-01T00:00:00",
                  "2023-01-01"],
    "duration": ["P", "PT", "P1Y1D", "PT1H1S", "P1W1D", "1D", "P1.5D", "P1DT", "PT1D", "P-1D"],
    "email": ["plain", "@example.com", "user@", "a..b@example.com", ".a@example.com",
              "a.@example.com", "user@-example.com", "user@example..com", "user@1.2.3.4",
              "a" * 65 + "@example.com", "us er@example.com", "user@[300.1.1.1]"],
    "hostname": ["-example.com", "example-.com", "exa_mple.com", "example..com", ".example.com",
                 "example.com.", "a" * 64 + ".com", "1.2.3.4", "ab--cd.com", "xn--abc.com", "",
                 "exam ple.com", ".".join(["a" * 63] * 4)],
    "ipv4": ["256.1.1.1", "01.1.1.1", "1.1.1", "1.1.1.1.1", "1.1.1.01", "a.b.c.d", " 1.1.1.1"],
    "ipv6": ["1:2:3:4:5:6:7:8:9", "1::2::3", ":1:2", "12345::", "fe80::1%eth0", "::1.2.3",
             "1:2:3:4:5:6:7:1.2.3.4", "g::1", ":::"],
    "uri": ["no-scheme", "/relative", "1http://x", "http://exa mple.com", "http://x/%zz",
            "http://[::1", "http://x:80a/", ""],
    "uri-reference": ["http://exa mple.com", "%", "a b", "http://[1::2::3]/", "this:that:%"],
    "iri": ["/relative", "http://ex ample.com", "http://x/\ufffe"],
    "iri-reference": ["a b", "%g0"],
    "uuid": ["123e4567e89b12d3a456426614174000", "123e4567-e89b-12d3-a456-42661417400",
             "{123e4567-e89b-12d3-a456-426614174000}", "123e4567-e89b-12d3-a456-42661417400g"],
    "uri-template": ["{", "}", "{}", "{a b}", "{=x}", "{x:0}", "{x:10000}", "a{b{c}}", "%zz", "a b"],
    "json-pointer": ["foo", "/a~2", "/a~", "#/a"],
    "relative-json-pointer": ["", "-1", "01", "/a", "1a", "0##", "+1/a"],
    "regex": ["(", ")", "[", "a**", "*", "a{", "(?<=x)y", "[z-a]", "\\"],
}
INVALID["idn-email"] = INVALID["email"]
INVALID["idn-hostname"] = INVALID["hostname"]


@pytest.mark.parametrize("fmt", ALL_FORMATS)
def test_invalid_values_do_not_match(fmt: str) -> None:
    regex = format_regex(fmt)
    dfa = compile_regex(regex)
    wrong = [v for v in INVALID[fmt] if re.fullmatch(regex, v) or dfa.matches(v.encode())]
    assert wrong == []
