"""A format checked when its value completes keeps a necessary condition in the grammar.

``email`` is too large an automaton, alone or beside other string keywords, so it is
a value check; the check runs when the object or array around the string closes.
Before, the grammar let any string close there, so a model could write
``"billingEmail":"example.net"`` and be left with no valid completion (found by the
extraction benchmark: grounded and complete extraction ended in ``GenerationError
(dead_end)``). The grammar now keeps `FORMAT_NECESSARY` (something, an ``@``, a
domain): the string cannot close without it.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from constrained import Grammar, TokenVocabulary, compile_grammar
from constrained.app import decoding_schema, extraction_grammar
from constrained.json_schema.formats import EMAIL, FORMAT_NECESSARY

VOCAB = TokenVocabulary.from_token_bytes([bytes([b]) for b in range(256)] + [b""], eos_ids=[256])
EMAIL_SCHEMA = {"type": "string", "format": "email"}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.from_regex(EMAIL, fullmatch=True))
def test_every_email_meets_the_necessary_condition(value: str) -> None:
    assert re.fullmatch(FORMAT_NECESSARY["email"], value)


def _refused_at(grammar: Grammar, text: bytes) -> int | None:
    """The offset of the first byte of ``text`` the mask refuses (None: all allowed)."""
    m = compile_grammar(grammar, VOCAB, cache_dir=None).matcher()
    for i, b in enumerate(text):
        mask = m.mask()
        if not (int(mask[b // 32]) >> (b % 32)) & 1:
            return i
        assert m.advance(b)
    return None


CONTEXTS = {
    "alone": (EMAIL_SCHEMA, b'"', b'"'),
    "with lengths": ({**EMAIL_SCHEMA, "minLength": 3, "maxLength": 1024}, b'"', b'"'),
    "a member": ({"type": "object", "properties": {"e": EMAIL_SCHEMA}, "required": ["e"]}, b'{"e":"', b'"}'),
    "an optional member": ({"type": "object", "properties": {"e": EMAIL_SCHEMA, "n": {"type": "integer"}}},
                           b'{"e":"', b'"}'),
    "an element": ({"type": "array", "items": {**EMAIL_SCHEMA, "maxLength": 100}}, b'["', b'"]'),
}


@pytest.mark.parametrize("context", CONTEXTS)
@pytest.mark.parametrize("bad", [b"example.net", b"a@", b"a@b c", b"@b.c"])
def test_a_string_that_cannot_be_an_email_cannot_close(context: str, bad: bytes) -> None:
    schema, head, tail = CONTEXTS[context]
    grammar = Grammar.from_json_schema(schema, whitespace="compact")
    at = _refused_at(grammar, head + bad + tail)
    assert at is not None and at <= len(head) + len(bad)
    assert _refused_at(grammar, head + b"ada@example.org" + tail) is None


@pytest.mark.parametrize("complete", [False, True])
@pytest.mark.parametrize("grounded", [False, True])
def test_extraction_cannot_close_an_email_member_without_one(complete: bool, grounded: bool) -> None:
    """The benchmark's case: a span of the text that is no email, under `extract`'s
    grammar with and without ``complete`` (which wraps the member in an ``anyOf`` with
    null) and grounding."""
    schema = {"type": "object", "properties": {
        "billingEmail": {"type": "string", "format": "email", "maxLength": 1024},
        "domains": {"type": "array", "items": {"type": "string", "minLength": 3}}}}
    text = "Billing email: example@example.com. Domains: example.net and example.io."
    decoded, _ = decoding_schema(schema, complete)
    grammar = extraction_grammar(decoded, text, grounded=grounded)
    assert _refused_at(grammar, b'{"billingEmail":"example.net"') is not None
    assert _refused_at(grammar, b'{"billingEmail":"example@example.com"') is None


# a pattern too large for the automaton (a character class of ~1,700 ranges, counted to 200)
BIG_CLASS_PATTERN = "^[A-Za-z" + "".join(f"\\u{c:04x}" for c in range(0x100, 0x3000, 7)) + "]{1,200}$"


@pytest.mark.parametrize("length", [{"minLength": 2}, {"minLength": 2, "maxLength": 20}])
def test_lengths_stay_in_the_grammar_beside_a_pattern_too_large_for_it(length: dict) -> None:
    """The lengths are dropped first; when the pattern must go as well, they come back, so
    a string too short cannot close and leave only a value the checks refuse later."""
    from constrained.json_schema.compiler import compile_json_schema

    schema = {"type": "object", "properties": {"n": {"type": "string", "pattern": BIG_CLASS_PATTERN, **length}},
              "required": ["n"]}
    notes = {(n.pointer, n.keyword) for n in compile_json_schema(schema).notes}
    assert ("/properties/n", "pattern") in notes            # the pattern is a value check
    assert not {k for p, k in notes if k in ("minLength", "maxLength")}
    grammar = Grammar.from_json_schema(schema, whitespace="compact")
    head = b'{"n":"'
    assert _refused_at(grammar, head + b'a"}') == len(head) + 1
    assert _refused_at(grammar, head + b'ab"}') is None
    if "maxLength" in length:
        assert _refused_at(grammar, head + b"a" * 21) == len(head) + 20
