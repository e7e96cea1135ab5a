"""Regexes for the JSON Schema (draft 2020-12) ``format`` keyword.

`FORMAT_REGEXES` maps each supported format name to a Python regex over the
*decoded* string content (characters, not JSON escapes), matched in full
(``re.fullmatch``) and restricted to the regular features that
`constrained.automata.byte_dfa.compile_regex` accepts.

Soundness policy: a format regex may refuse valid strings, but it never accepts
an invalid one.  "Valid" means valid for the RFC the draft 2020-12 specification
names for the format *and* accepted by ``jsonschema``'s draft 2020-12 format
checker (``Draft202012Validator.FORMAT_CHECKER``, with its optional checker
packages installed), so a generated value passes both a strict reader of the RFC
and the most common Python validator.  Where the two disagree the regex accepts
the intersection (e.g. ``relative-json-pointer`` prefixes such as ``100``, valid
by the draft but refused by ``jsonschema``, are refused here too).

Deliberate incompleteness (each keeps the language regular, the automaton small
or the value unambiguously valid):

* ``date``/``date-time``: year ``0000`` is refused (Python's `datetime.date`
  cannot represent it); 29 February only in Gregorian leap years.
* ``time``/``date-time``: no leap second (seconds ``00``-``59``); its validity
  depends on the published leap-second table.
* ``hostname``/``idn-hostname``: ASCII LDH labels of 1-63 characters; a label may
  not have ``--`` in its 3rd and 4th positions (reserved for IDNA A-labels such as
  ``xn--...``, whose validity needs Punycode decoding); the last label must
  start with a letter (RFC 1123 section 2.1: "the highest-level component label
  will be alphabetic", which also keeps ``1.2.3.4`` out); no trailing dot.  The
  253-character limit is enforced through tiers of (label count, label length),
  each totalling at most 253 -- up to 3 labels of up to 63 characters, 4 of up
  to 62, 8 of up to 30, 16 of up to 14 -- because exact length counting makes
  the DFA too large (names of more than 16 labels are refused).
* ``email``/``idn-email``: RFC 5321 ``Mailbox`` with a ``Dot-string`` or
  ``Quoted-string`` local part of at most 64 characters (a dot-string in tiers:
  1 atom of up to 64 characters, 2 of up to 31, 3 of 20, 4 of 15, 8 of 7, ...;
  a quoted string of up to 62 plain characters or 31 characters/pairs), and a
  domain that is a ``hostname`` of at most 189 characters (tiers 3x62, 6x30,
  12x14; so the address fits the 254-character limit of a forward path), or an
  IPv4/IPv6 address literal.  No internationalized
  (RFC 6531) local parts.
* ``ipv6``: every RFC 4291 text form (``::`` compression, embedded IPv4, either
  case) but no zone identifiers (``%eth0``), which ``jsonschema`` refuses.
* ``uri``/``uri-reference``: the full RFC 3986 grammar (``IP-literal`` hosts
  included), except that ``IPvFuture`` takes a lowercase ``v`` only (``rfc3987``,
  behind ``jsonschema``, refuses ``V``).  ``iri``/``iri-reference`` extend it
  with RFC 3987 ``ucschar`` and ``iprivate``.
* ``uri-template``: RFC 6570 levels 1-4 with the operators ``+ # . / ; ? &``
  (not the reserved ``= , ! @ |``), varnames without percent-encodings, prefix
  lengths 1-999.
* ``relative-json-pointer``: no index manipulation (``+1``/``-1``), and the
  leading integer is ``0`` or has no ``0`` digit before its last one
  (``jsonschema`` refuses e.g. ``100/a``).
* ``regex``: a regular subset of ECMA-262 patterns that Python's ``re`` also
  compiles: literals, ``.``, simple escapes, bracket classes without arbitrary
  ranges (only ``a-z``, ``A-Z``, ``0-9``), quantifiers ``* + ? {n} {n,}``
  (optionally lazy), ``^``/``$``, ``|`` and groups ``(...)``/``(?:...)`` nested
  at most two deep.

Example:
    >>> import re
    >>> bool(re.fullmatch(format_regex("ipv4"), "192.168.0.1"))
    True
    >>> bool(re.fullmatch(format_regex("date"), "2023-02-29"))
    False
"""

from __future__ import annotations

from constrained.errors import UnsupportedGrammarError

__all__ = ["FORMAT_NECESSARY", "FORMAT_REGEXES", "format_regex"]


def _alt(*parts: str) -> str:
    return "(?:" + "|".join(parts) + ")"


# ---------------------------------------------------------------- RFC 5234 core
DIGIT = "[0-9]"          # never ``\d``: it is Unicode-wide in Python
HEXDIG = "[0-9A-Fa-f]"
ALPHA = "[A-Za-z]"

# ------------------------------------------------------- RFC 3339 date and time
# date-fullyear = 4DIGIT, minus "0000" (not representable by datetime.date)
_YEAR = _alt(f"{DIGIT}{{3}}[1-9]", f"{DIGIT}{{2}}[1-9]0", f"{DIGIT}[1-9]00", "[1-9]000")
# Gregorian leap years: divisible by 4, and by 400 when divisible by 100
_LEAP_YEAR = _alt(f"{DIGIT}{{2}}(?:0[48]|[2468][048]|[13579][26])",
                  "(?:0[48]|[2468][048]|[13579][26])00")
# date-month "-" date-mday, with exact days per month (29 Feb handled apart)
_MONTH_DAY = _alt("(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])",   # 31-day months
                  "(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)",          # 30-day months
                  "02-(?:0[1-9]|1[0-9]|2[0-8])")                     # February 1-28
FULL_DATE = _alt(f"{_YEAR}-{_MONTH_DAY}", f"{_LEAP_YEAR}-02-29")

_TIME_HOUR = "(?:[01][0-9]|2[0-3])"
_TIME_MINUTE = "[0-5][0-9]"
_TIME_SECOND = "[0-5][0-9]"                         # no leap second "60"
_TIME_SECFRAC = rf"(?:\.{DIGIT}+)?"
_TIME_NUMOFFSET = f"[+-]{_TIME_HOUR}:{_TIME_MINUTE}"
_TIME_OFFSET = _alt("[Zz]", _TIME_NUMOFFSET)        # RFC 3339 5.6 NOTE: "z" allowed
_PARTIAL_TIME = f"{_TIME_HOUR}:{_TIME_MINUTE}:{_TIME_SECOND}{_TIME_SECFRAC}"
FULL_TIME = f"{_PARTIAL_TIME}{_TIME_OFFSET}"
DATE_TIME = f"{FULL_DATE}[Tt]{FULL_TIME}"

# RFC 3339 appendix A (ISO 8601 durations)
_DUR_SECOND = f"{DIGIT}+S"
_DUR_MINUTE = f"{DIGIT}+M(?:{_DUR_SECOND})?"
_DUR_HOUR = f"{DIGIT}+H(?:{_DUR_MINUTE})?"
_DUR_TIME = "T" + _alt(_DUR_HOUR, _DUR_MINUTE, _DUR_SECOND)
_DUR_DAY = f"{DIGIT}+D"
_DUR_WEEK = f"{DIGIT}+W"
_DUR_MONTH = f"{DIGIT}+M(?:{_DUR_DAY})?"
_DUR_YEAR = f"{DIGIT}+Y(?:{_DUR_MONTH})?"
_DUR_DATE = _alt(_DUR_DAY, _DUR_MONTH, _DUR_YEAR) + f"(?:{_DUR_TIME})?"
DURATION = "P" + _alt(_DUR_DATE, _DUR_TIME, _DUR_WEEK)

# ------------------------------------------------------------ IP addresses
# RFC 3986 dec-octet (no leading zeros, which Python's ipaddress refuses too)
_DEC_OCTET = _alt("25[0-5]", f"2[0-4]{DIGIT}", f"1{DIGIT}{{2}}", f"[1-9]{DIGIT}", DIGIT)
IPV4 = rf"{_DEC_OCTET}(?:\.{_DEC_OCTET}){{3}}"

# RFC 3986 IPv6address (the RFC 4291 section 2.2 text forms)
_H16 = f"{HEXDIG}{{1,4}}"
_LS32 = _alt(f"{_H16}:{_H16}", IPV4)


def _h16s(n: int) -> str:
    """``n( h16 ":" )``."""
    return f"(?:{_H16}:){{{n}}}" if n else ""


def _h16_head(n: int) -> str:
    """``[ *n( h16 ":" ) h16 ]`` (n = -1: nothing)."""
    if n < 0:
        return ""
    return f"(?:(?:{_H16}:){{0,{n}}}{_H16})?" if n else f"(?:{_H16})?"


IPV6 = _alt(
    f"{_h16s(6)}{_LS32}",
    f"::{_h16s(5)}{_LS32}",
    f"{_h16_head(0)}::{_h16s(4)}{_LS32}",
    f"{_h16_head(1)}::{_h16s(3)}{_LS32}",
    f"{_h16_head(2)}::{_h16s(2)}{_LS32}",
    f"{_h16_head(3)}::{_H16}:{_LS32}",
    f"{_h16_head(4)}::{_LS32}",
    f"{_h16_head(5)}::{_H16}",
    f"{_h16_head(6)}::",
)

# ---------------------------------------------------------------- host names
_LET_DIG = "[A-Za-z0-9]"
_LDH = "[A-Za-z0-9-]"


def _label(max_len: int) -> str:
    """RFC 1123 label of 1..max_len chars: let-dig [*61(ldh) let-dig], and no "--"
    in positions 3-4 (RFC 5891 4.2.3.1: reserved for A-labels)."""
    if max_len < 5:
        return f"{_LET_DIG}(?:{_LDH}{{0,{max_len - 2}}}{_LET_DIG})?" if max_len > 1 else _LET_DIG
    return (f"{_LET_DIG}(?:{_LDH}{{0,2}}{_LET_DIG}"
            f"|{_LDH}(?:{_LET_DIG}{_LDH}|-{_LET_DIG}){_LDH}{{0,{max_len - 5}}}{_LET_DIG})?")


def _top_label(max_len: int) -> str:
    """The last (highest-level) label: one that starts with a letter (RFC 1123 2.1:
    "the highest-level component label will be alphabetic"; this also keeps a
    dotted-decimal string such as 1.2.3.4 from passing as a host name)."""
    return ALPHA + _label(max_len)[len(_LET_DIG):]


def _hostname(tiers: tuple[tuple[int, int], ...]) -> str:
    """Dot-separated labels; each (labels, label_len) tier keeps the total in bounds."""
    alts = []
    for count, size in tiers:
        head = rf"(?:{_label(size)}\.){{0,{count - 1}}}" if count > 1 else ""
        alts.append(head + _top_label(size))
    return _alt(*alts)


def _check_tiers(tiers: tuple[tuple[int, int], ...], limit: int) -> tuple[tuple[int, int], ...]:
    for count, size in tiers:
        if count * size + count - 1 > limit:
            raise ValueError(f"tier {count}x{size} exceeds {limit} characters")
    return tiers


# total length <= 253 (RFC 1035 2.3.4 / RFC 1123 2.1)
_HOSTNAME_TIERS = _check_tiers(((3, 63), (4, 62), (8, 30), (16, 14)), 253)
HOSTNAME = _hostname(_HOSTNAME_TIERS)

# ---------------------------------------------------------------- email (RFC 5321 4.1.2)
_ATEXT = r"[A-Za-z0-9!#$%&'*+\-/=?^_`{|}~]"
# Dot-string = Atom *("." Atom), at most 64 characters (RFC 5321 4.5.3.1.1):
# tiers of (atoms, atom length) with atoms * length + dots <= 64
_DOT_STRING_TIERS = ((1, 64), (2, 31), (3, 20), (4, 15), (8, 7), (16, 3), (32, 1))
_DOT_STRING = _alt(*(rf"(?:{_ATEXT}{{1,{size}}}\.){{0,{count - 1}}}{_ATEXT}{{1,{size}}}"
                     for count, size in _DOT_STRING_TIERS))
_QTEXT_SMTP = r"[ !#-\[\]-~]"                              # %d32-33 / %d35-91 / %d93-126
_QUOTED_PAIR_SMTP = r"\\[ -~]"                             # %d92 %d32-126
# Quoted-string = DQUOTE *QcontentSMTP DQUOTE, at most 64 characters in all
_QUOTED_STRING = _alt(rf'"{_QTEXT_SMTP}{{0,62}}"', rf'"(?:{_QTEXT_SMTP}|{_QUOTED_PAIR_SMTP}){{0,31}}"')
_LOCAL_PART = _alt(_DOT_STRING, _QUOTED_STRING)
# 64 (local) + 1 ("@") + 189 (domain) = 254: the forward-path limit minus "<>"
_EMAIL_DOMAIN_TIERS = _check_tiers(((3, 62), (6, 30), (12, 14)), 189)
_ADDRESS_LITERAL = _alt(rf"\[{IPV4}\]", rf"\[IPv6:{IPV6}\]")
EMAIL = f"{_LOCAL_PART}@" + _alt(_hostname(_EMAIL_DOMAIN_TIERS), _ADDRESS_LITERAL)

# ---------------------------------------------------------------- RFC 3986 URIs
_UNRESERVED = r"A-Za-z0-9\-._~"                 # class bodies, combined below
_SUB_DELIMS = r"!$&'()*+,;="
_PCT_ENCODED = f"%{HEXDIG}{HEXDIG}"
# RFC 3987 ucschar and iprivate
_UCSCHAR = (r"\u00A0-\uD7FF\uF900-\uFDCF\uFDF0-\uFFEF"
            r"\U00010000-\U0001FFFD\U00020000-\U0002FFFD\U00030000-\U0003FFFD"
            r"\U00040000-\U0004FFFD\U00050000-\U0005FFFD\U00060000-\U0006FFFD"
            r"\U00070000-\U0007FFFD\U00080000-\U0008FFFD\U00090000-\U0009FFFD"
            r"\U000A0000-\U000AFFFD\U000B0000-\U000BFFFD\U000C0000-\U000CFFFD"
            r"\U000D0000-\U000DFFFD\U000E1000-\U000EFFFD")
_IPRIVATE = r"\uE000-\uF8FF\U000F0000-\U000FFFFD\U00100000-\U0010FFFD"


def _uri_grammar(iri: bool) -> tuple[str, str]:
    """(absolute URI, URI-reference) per RFC 3986 section 3/4.1, or the RFC 3987
    IRI / IRI-reference rules when ``iri``."""
    unreserved = _UNRESERVED + (_UCSCHAR if iri else "")
    # pchar = unreserved / pct-encoded / sub-delims / ":" / "@"
    pchar = _alt(f"[{unreserved}{_SUB_DELIMS}:@]", _PCT_ENCODED)
    # segment-nz-nc = 1*( unreserved / pct-encoded / sub-delims / "@" )
    pchar_nc = _alt(f"[{unreserved}{_SUB_DELIMS}@]", _PCT_ENCODED)
    segment = f"{pchar}*"
    segment_nz = f"{pchar}+"
    segment_nz_nc = f"{pchar_nc}+"
    # query / fragment = *( pchar / "/" / "?" )  (iquery adds iprivate)
    query = _alt(f"[{unreserved}{_SUB_DELIMS}:@/?{_IPRIVATE if iri else ''}]", _PCT_ENCODED) + "*"
    fragment = _alt(f"[{unreserved}{_SUB_DELIMS}:@/?]", _PCT_ENCODED) + "*"
    scheme = rf"{ALPHA}[A-Za-z0-9+\-.]*"
    userinfo = _alt(f"[{unreserved}{_SUB_DELIMS}:]", _PCT_ENCODED) + "*"
    # IP-literal = "[" ( IPv6address / IPvFuture ) "]"
    ipvfuture = rf"v{HEXDIG}+\.[{_UNRESERVED}{_SUB_DELIMS}:]+"
    ip_literal = rf"\[{_alt(IPV6, ipvfuture)}\]"
    # reg-name = *( unreserved / pct-encoded / sub-delims ); it covers IPv4address
    reg_name = _alt(f"[{unreserved}{_SUB_DELIMS}]", _PCT_ENCODED) + "*"
    host = _alt(ip_literal, reg_name)
    port = f"{DIGIT}*"
    authority = f"(?:{userinfo}@)?{host}(?::{port})?"
    path_abempty = f"(?:/{segment})*"
    path_absolute = f"/(?:{segment_nz}(?:/{segment})*)?"
    path_rootless = f"{segment_nz}(?:/{segment})*"
    path_noscheme = f"{segment_nz_nc}(?:/{segment})*"
    hier_part = _alt(f"//{authority}{path_abempty}", path_absolute, path_rootless, "")
    tail = rf"(?:\?{query})?(?:#{fragment})?"
    uri = f"{scheme}:{hier_part}{tail}"
    relative_part = _alt(f"//{authority}{path_abempty}", path_absolute, path_noscheme, "")
    return uri, _alt(uri, relative_part + tail)


URI, URI_REFERENCE = _uri_grammar(iri=False)
IRI, IRI_REFERENCE = _uri_grammar(iri=True)

# ---------------------------------------------------------------- RFC 6570 URI templates
# literals = %x21 / %x23-24 / %x26 / %x28-3B / %x3D / %x3F-5B / %x5D / %x5F
#          / %x61-7A / %x7E / ucschar / iprivate / pct-encoded
_TEMPLATE_LITERAL = _alt(rf"[!#$&(-;=?-\[\]_a-z~{_UCSCHAR}{_IPRIVATE}]", _PCT_ENCODED)
_VARCHAR = "[A-Za-z0-9_]"                                   # minus pct-encoded
_VARNAME = rf"{_VARCHAR}(?:\.?{_VARCHAR})*"
_MODIFIER = "(?::[1-9][0-9]{0,2}|\\*)?"                     # prefix (1-999) / explode
_VARSPEC = f"{_VARNAME}{_MODIFIER}"
_EXPRESSION = rf"\{{[+#./;?&]?{_VARSPEC}(?:,{_VARSPEC})*\}}"
URI_TEMPLATE = _alt(_TEMPLATE_LITERAL, _EXPRESSION) + "*"

# ---------------------------------------------------------------- RFC 6901 JSON pointers
# reference-token = *( unescaped / escaped ); escaped = "~" ( "0" / "1" )
_REFERENCE_TOKEN = "(?:[^/~]|~[01])*"
JSON_POINTER = f"(?:/{_REFERENCE_TOKEN})*"
# draft-bhutton-relative-json-pointer-00, without index manipulation; the integer
# is restricted to what jsonschema's checker accepts (no digit after a "0")
RELATIVE_JSON_POINTER = "(?:0|[1-9]+0?)" + _alt("#", JSON_POINTER)

# ---------------------------------------------------------------- ECMA-262 regexes
# A regular subset valid both as ECMA-262 (unicode mode) and Python re syntax.
_RX_LITERAL = r"[^\\()\[\]{}*+?|^$.]"                      # a plain character
_RX_ESCAPE = r"\\[dDwWsStnrfv\\^$.|?*+()\[\]{}/]"          # class / control / syntax escapes
# (no "&", "~", "|" either: doubled, Python warns of future set operations)
_RX_CLASS_ITEM = _alt(r"[^\\\[\]\-^&~|]", r"\\[dDwWsStnrfv\\\[\]\-^]", "a-z", "A-Z", "0-9")
_RX_CLASS = rf"\[\^?{_RX_CLASS_ITEM}+\]"
_RX_QUANTIFIER = r"(?:[*+?]|\{[0-9]{1,4},?\})\??"


def _rx_alternation(depth: int) -> str:
    atoms = [_RX_LITERAL, _RX_ESCAPE, _RX_CLASS, r"\."]
    if depth > 0:
        inner = _rx_alternation(depth - 1)
        atoms.append(rf"\((?:\?:)?{inner}\)")
    piece = _alt(_alt(*atoms) + f"(?:{_RX_QUANTIFIER})?", "[$^]")
    branch = f"{piece}*"
    return rf"{branch}(?:\|{branch})*"


REGEX = _rx_alternation(2)

# ---------------------------------------------------------------- the table
UUID = f"{HEXDIG}{{8}}-{HEXDIG}{{4}}-{HEXDIG}{{4}}-{HEXDIG}{{4}}-{HEXDIG}{{12}}"

FORMAT_REGEXES: dict[str, str] = {
    "date-time": DATE_TIME,
    "date": FULL_DATE,
    "time": FULL_TIME,
    "duration": DURATION,
    "email": EMAIL,
    "idn-email": EMAIL,              # every RFC 5321 mailbox is an RFC 6531 one
    "hostname": HOSTNAME,
    "idn-hostname": HOSTNAME,        # LDH labels without "--" at 3-4 are valid IDNA
    "ipv4": IPV4,
    "ipv6": IPV6,
    "uri": URI,
    "uri-reference": URI_REFERENCE,
    "iri": IRI,
    "iri-reference": IRI_REFERENCE,
    "uuid": UUID,
    "uri-template": URI_TEMPLATE,
    "json-pointer": JSON_POINTER,
    "relative-json-pointer": RELATIVE_JSON_POINTER,
    "regex": REGEX,
}


_EMAIL_NECESSARY = r"(?:[^@]|@)*[^@]@[A-Za-z0-9.:\[\]\-]+"
FORMAT_NECESSARY: dict[str, str] = {"email": _EMAIL_NECESSARY, "idn-email": _EMAIL_NECESSARY}
"""For a format whose regex is too large to compile (``email`` always is, with the
other string keywords or alone): a small regex every valid value matches, which the
grammar keeps where the format itself becomes a value check.  An email is something,
an ``@`` and a domain of hostname or address-literal characters.  Without it a string
could close as ``"example.net"`` and leave a dead end: the check refuses the value
only when the object or array around the string closes.  It is necessary, not
sufficient: strings that pass it and fail `EMAIL` (``"a b@c"``) are still refused only
there."""


def format_regex(name: str) -> str:
    """The regex for JSON Schema format ``name``; `UnsupportedGrammarError` if unknown."""
    try:
        return FORMAT_REGEXES[name]
    except KeyError:
        known = ", ".join(sorted(FORMAT_REGEXES))
        raise UnsupportedGrammarError(
            f"unsupported JSON Schema format {name!r} (supported: {known})") from None
