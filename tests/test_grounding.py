"""Grounded values (`constrained.json_schema.grounding`, `constrained.automata.substrings`).

* The substring automaton against its definition: a byte string is accepted iff it is
  the canonical JSON spelling (``json.dumps(s, ensure_ascii=False)``) of a span of the
  text — a non-empty substring that neither starts nor ends with whitespace — (quoted
  mode), or the UTF-8 of one (raw mode).
* Grounded schemas against an independent oracle (``json.loads`` + ``jsonschema`` +
  "every string value occurs in the text"), through the reference recognizer.
* Masks exact: at random states of masked walks the engine's mask equals the
  reference recognizer's (`constrained.testing.reference.Reference`).
* The policy where nothing fits: fallback with a note, or `GroundingError`.
* `extract(..., grounded=True)` end to end with a tiny random model.
"""

from __future__ import annotations

import json
import random
import re

import jsonschema
import numpy as np
import pytest

from constrained import TokenVocabulary, compile_grammar, unpack_mask
from constrained.automata.byte_dfa import compile_regex
from constrained.automata.substrings import sentence_ends, substrings_regex, suffix_automaton
from constrained.errors import ConstrainedError, RegexError
from constrained.json_schema.compiler import compile_json_schema
from constrained.json_schema.grounding import Grounding, GroundingError
from constrained.testing.reference import Reference

TEXTS = [
    "Contact Grace Hopper, rear admiral, at grace@navy.mil; phone 555-0100.",
    'She said "hi" \\ then left.\nTabs\there; é, 日本, 😀 and \x01 control',
    "abababbabaab",
    "",
]


def _all_substrings(text: str) -> set[str]:
    return {text[i:j] for i in range(len(text) + 1) for j in range(i, len(text) + 1)}


def _substrings(text: str) -> set[str]:
    """The spans of ``text``: non-empty substrings without whitespace at either end."""
    return {s for s in _all_substrings(text) if s and not s[0].isspace() and not s[-1].isspace()}


def _in_a_sentence(text: str, s: str) -> bool:
    """Whether ``s`` occurs in ``text`` covering none of its sentence ends."""
    ends = sentence_ends(text)
    return any(text.startswith(s, i) and not any(i <= e < i + len(s) for e in ends) for i in range(len(text)))


def _candidates(text: str, rng: random.Random, n: int) -> list[str]:
    alphabet = sorted(set(text) | {"x", "Z", '"'})
    out = []
    for _ in range(n):
        if text and rng.random() < 0.6:
            i = rng.randrange(len(text) + 1)
            s = text[i:rng.randrange(i, len(text) + 1)]
            if s and rng.random() < 0.3:              # a near miss
                k = rng.randrange(len(s))
                s = s[:k] + rng.choice(alphabet) + s[k + 1:]
        else:
            s = "".join(rng.choice(alphabet) for _ in range(rng.randrange(5)))
        out.append(s)
    return out


@pytest.mark.parametrize("text", TEXTS)
def test_substring_automaton_is_its_definition(text):
    subs, spans = _all_substrings(text), _substrings(text)
    quoted = compile_regex(substrings_regex(text))
    sentences = compile_regex(substrings_regex(text, sentences=True))
    raw = compile_regex(substrings_regex(text, quoted=False))
    rng = random.Random(text)
    for s in _candidates(text, rng, 3000):
        canonical = json.dumps(s, ensure_ascii=False).encode("utf-8", "surrogatepass")
        assert quoted.matches(canonical) == (s in spans), s
        assert sentences.matches(canonical) == (s in spans and _in_a_sentence(text, s)), s
        if json.dumps(s).encode() != canonical:          # another spelling of the same string: refused
            assert not quoted.matches(json.dumps(s).encode())
        assert raw.matches(s.encode("utf-8", "surrogatepass")) == (s in subs), s
    assert quoted.num_states <= 2 * 4 * (len(text) + 2) + 4


def test_suffix_automaton_is_linear():
    text = "the quick brown fox jumps over the lazy dog " * 40
    assert len(suffix_automaton(text)) <= 2 * len(text)
    assert compile_regex(substrings_regex(text)).num_states < 2 * len(text)


def test_marker_is_refused_by_python_re_and_checked():
    with pytest.raises(re.error):
        re.compile(substrings_regex("abc"))
    with pytest.raises(RegexError):
        compile_regex("(*substrings:json:%%%)")


# ---------------------------------------------------------------------- grammars
SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "code": {"type": "string", "pattern": "^[0-9]+$"},
        "short": {"type": "string", "maxLength": 3},
        "tag": {"enum": ["red", "green", "blue"]},
        "free": {"type": "string", "x-grounded": False},
        "n": {"type": "integer"},
    },
    "required": ["name"],
}


def _oracle(schema, text, default=True):
    """Whether a byte string is a valid instance whose grounded strings occur in ``text``."""
    validator = jsonschema.Draft202012Validator(schema)

    def ok(data: bytes) -> bool:
        try:
            value = json.loads(data)
        except (ValueError, UnicodeDecodeError):
            return False
        if not validator.is_valid(value):
            return False
        for key, v in value.items():
            grounded = schema["properties"][key].get("x-grounded", default and "enum" not in schema["properties"][key])
            if isinstance(v, str) and grounded and (not _in_a_sentence(text, v) or not v or v != v.strip()):
                return False
        return True
    return ok


def _instances(text: str, rng: random.Random, n: int) -> list[bytes]:
    out = []
    pieces = _candidates(text, rng, 4 * n)
    for _ in range(n):
        value = {"name": rng.choice(pieces)}
        if rng.random() < 0.5:
            value["code"] = rng.choice(pieces + ["555", "0100"])
        if rng.random() < 0.5:
            value["short"] = rng.choice(pieces)
        if rng.random() < 0.3:
            value["tag"] = rng.choice(["red", "green", "blue", "pink"])
        if rng.random() < 0.3:
            value["free"] = rng.choice(["invented", "Grace"])
        if rng.random() < 0.3:
            value["n"] = rng.choice([1, 42, -3])
        out.append(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass"))
    return out


@pytest.mark.parametrize("text", TEXTS[:2])
def test_grounded_schema_against_oracle(text):
    g = compile_json_schema(SCHEMA, grounding=Grounding(text), whitespace="compact",
                            fixed_strings="canonical").grammar
    ref = Reference(g)
    oracle = _oracle(SCHEMA, text)
    rng = random.Random(f"oracle:{text}")
    agree = accepted = 0
    for data in _instances(text, rng, 900):
        want = oracle(data)
        assert ref.accepts(data) == want, data
        agree += 1
        accepted += want
    assert accepted > 30 and agree - accepted > 30


def test_x_grounded_true_without_default():
    text = "the green car, code 0042"
    g = compile_json_schema({"type": "object", "properties": {"a": {"type": "string", "x-grounded": True},
                                                              "b": {"type": "string"},
                                                              "c": {"enum": ["red", "green"], "x-grounded": True}}},
                            grounding=Grounding(text, default=False), whitespace="compact").grammar
    ref = Reference(g)
    assert ref.accepts(b'{"a":"green car"}') and not ref.accepts(b'{"a":"blue car"}')
    assert ref.accepts(b'{"b":"anything"}')
    assert ref.accepts(b'{"c":"green"}') and not ref.accepts(b'{"c":"red"}')


def test_x_grounded_text_says_which_text_a_value_copies_from():
    """``x-grounded-text`` on a value replaces the input as its source, for spans, numbers
    and enum values alike; other values still copy from the input; a value that is not
    grounded ignores it; the fallback where nothing fits is the usual one."""
    text = "From: Ada Lovelace. Subject: notes on engine 7. Body: Grace sends 12 cards."
    schema = {"type": "object", "properties": {
        "subject": {"type": "string", "x-grounded-text": "notes on engine 7"},
        "sender": {"type": "string"},
        "count": {"type": "integer", "x-grounded": True, "x-grounded-text": "Grace sends 12 cards"},
        "kind": {"enum": ["notes", "Body"], "x-grounded": True, "x-grounded-text": "notes on engine 7"},
        "free": {"type": "string", "x-grounded": False, "x-grounded-text": "engine"}}}
    ref = Reference(compile_json_schema(schema, grounding=Grounding(text), whitespace="compact").grammar)
    assert ref.accepts(b'{"subject":"notes on engine"}') and not ref.accepts(b'{"subject":"Ada Lovelace"}')
    assert ref.accepts(b'{"sender":"Ada Lovelace"}') and not ref.accepts(b'{"sender":"Babbage"}')
    assert ref.accepts(b'{"count":12}') and not ref.accepts(b'{"count":7}')
    assert ref.accepts(b'{"kind":"notes"}') and not ref.accepts(b'{"kind":"Body"}')
    assert ref.accepts(b'{"free":"anything at all"}')
    dated = {"type": "string", "format": "date", "x-grounded-text": "no dates in this part"}
    c = compile_json_schema(dated, grounding=Grounding("a part on 2020-02-02 and no dates in this part"))
    assert any(n.keyword == "x-grounded" for n in c.notes)          # nothing fits there: falls back
    with pytest.raises(GroundingError):
        compile_json_schema({**dated, "x-grounded": True}, grounding=Grounding("on 2020-02-02"))
    with pytest.raises(ConstrainedError):
        compile_json_schema({"type": "string", "x-grounded-text": 7}, grounding=Grounding("7"))


def test_the_prompt_shows_the_schema_without_grounding_annotations():
    from constrained.app import _extraction_systems

    schema = {"type": "object", "properties": {"a": {"type": "array", "items": {
        "type": "string", "x-grounded": True, "x-grounded-text": "SECRET PART"}}}}
    prompts = _extraction_systems(schema, None) + _extraction_systems(schema, "Schema: {schema}")
    assert prompts and all("x-grounded" not in p and "SECRET PART" not in p for p in prompts)
    assert '"items": {"type": "string"}' in prompts[0]


def test_no_fitting_substring_falls_back_with_a_note_or_raises():
    schema = {"type": "object", "properties": {"d": {"type": "string", "format": "date"}}}
    c = compile_json_schema(schema, grounding=Grounding("no dates in here"), whitespace="compact")
    assert any(n.keyword == "x-grounded" and n.pointer == "/properties/d" for n in c.notes)
    assert Reference(c.grammar).accepts(b'{"d":"2024-01-31"}')          # ungrounded: any date
    c = compile_json_schema(schema, grounding=Grounding("born 1906-12-09"), whitespace="compact")
    ref = Reference(c.grammar)
    assert ref.accepts(b'{"d":"1906-12-09"}') and not ref.accepts(b'{"d":"2024-01-31"}')
    explicit = {"type": "object", "properties": {"d": {"type": "string", "format": "date", "x-grounded": True}}}
    with pytest.raises(GroundingError) as e:
        compile_json_schema(explicit, grounding=Grounding("no dates in here"))
    assert e.value.pointer == "/properties/d" and isinstance(e.value, ConstrainedError)


def test_spans_are_trimmed_and_never_empty():
    """The empty string and values padded with the text's whitespace are substrings but
    not spans: refused; a schema that allows nothing else falls back (noted)."""
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
    ref = Reference(compile_json_schema(schema, grounding=Grounding("Use Facebook. Then stop.", sentences=False),
                                        whitespace="compact").grammar)
    assert ref.accepts(b'{"a":"Facebook."}') and ref.accepts(b'{"a":"Facebook. Then"}')
    assert not ref.accepts(b'{"a":""}') and not ref.accepts(b'{"a":"Facebook. "}')
    assert not ref.accepts(b'{"a":" Then"}')
    empty_only = {"type": "object", "properties": {"a": {"type": "string", "maxLength": 0}}}
    c = compile_json_schema(empty_only, grounding=Grounding("some text"), whitespace="compact")
    assert any(n.keyword == "x-grounded" and n.pointer == "/properties/a" for n in c.notes)
    assert Reference(c.grammar).accepts(b'{"a":""}')


def test_spans_stay_inside_a_sentence_unless_a_value_says_otherwise():
    """By default a span neither crosses a sentence end nor takes the period that ends
    it ("Dr." and "e.g." do not end sentences); ``x-grounded-sentences: false`` on a
    value lets it cross."""
    text = "Ship it to St. Louis. Then ask Dr. Who, e.g. via mail. Zone us-east-1a. At 12:00:00Z. Done."
    schema = {"type": "object", "properties": {"a": {"type": "string"},
                                               "b": {"type": "string", "x-grounded-sentences": False}}}
    ref = Reference(compile_json_schema(schema, grounding=Grounding(text), whitespace="compact").grammar)
    for value, inside in [("St. Louis", True), ("Louis", True), ("Louis.", False), ("Louis. Then", False),
                          ("Dr. Who, e.g. via mail", True), ("mail.", False), ("Done", True), ("Done.", False),
                          ("us-east-1a", True), ("us-east-1a. At", False), ("12:00:00Z", True),
                          ("12:00:00Z. Done", False)]:
        data = json.dumps(value).encode()
        assert ref.accepts(b'{"a":' + data + b"}") == inside, value
        assert ref.accepts(b'{"b":' + data + b"}"), value


def test_checked_format_has_a_valid_substring_or_falls_back():
    """``format: email`` is a value check (its automaton is too large): grounding it in a
    text without any address would leave no valid value, so it falls back (noted)."""
    schema = {"type": "object", "properties": {"e": {"type": "string", "format": "email"}}, "required": ["e"]}
    c = compile_json_schema(schema, grounding=Grounding("write to ada@example.org"), whitespace="compact")
    assert not any(n.keyword == "x-grounded" for n in c.notes)
    assert not Reference(c.grammar).accepts(b'{"e":"bob@example.org"}')
    c = compile_json_schema(schema, grounding=Grounding("no address at all"), whitespace="compact")
    assert any(n.keyword == "x-grounded" for n in c.notes)
    assert Reference(c.grammar).accepts(b'{"e":"bob@example.org"}')


def test_bad_annotation_and_option_are_typed():
    with pytest.raises(ConstrainedError):
        compile_json_schema({"type": "string", "x-grounded": "yes"}, grounding=Grounding("a"))
    with pytest.raises(ConstrainedError):
        compile_json_schema({"type": "string"}, grounding="just a str")


# ---------------------------------------------------------------------- masks
def _vocab(text: str, rng: random.Random) -> TokenVocabulary:
    """All single bytes, pieces of the text and of its JSON spelling (inside and across
    quotes), JSON punctuation, random junk; EOS at 0 and a special without bytes."""
    spelled = json.dumps(text, ensure_ascii=False).encode()
    out = {bytes([b]) for b in range(256)}
    for _ in range(600):
        i = rng.randrange(len(spelled))
        out.add(spelled[i:i + rng.randint(2, 7)])
    for p in (b'{"', b'":"', b'","', b'"}', b'":', b',"', b'"name', b'name":"', b'":1', b"0}", b'"\\', b'\\"'):
        out.add(p)
    junk = [b"a", b"x", b'"', b"{", b"}", b",", b":", b"1", b" ", "é".encode(), b"\xe6"]
    while len(out) < 1200:
        out.add(b"".join(rng.choice(junk) for _ in range(rng.randint(2, 4))))
    tb = sorted(out)
    tb.insert(len(tb) // 2, b"")
    tb.insert(0, b"")
    return TokenVocabulary.from_token_bytes(tb, eos_ids=[0])


@pytest.mark.parametrize("text", TEXTS[:2])
def test_grounded_masks_equal_reference_masks(text):
    rng = random.Random(f"masks:{text}")
    g = compile_json_schema(SCHEMA, grounding=Grounding(text), whitespace="compact",
                            fixed_strings="canonical").grammar
    vocab = _vocab(text, rng)
    cg = compile_grammar(g, vocab, cache_dir=None)
    ref = Reference(g)
    tb, size = vocab.token_bytes, len(vocab)
    states = 0
    for _ in range(12):
        m = cg.matcher()
        prefix = b""
        for _ in range(40):
            engine = set(np.flatnonzero(unpack_mask(m.mask(), size)).tolist())
            want = ref.mask(prefix, tb, [0])
            assert engine == want, (prefix, sorted(engine ^ want)[:10])
            states += 1
            choices = [t for t in engine if t != 0]
            if not choices or (0 in engine and rng.random() < 0.1):
                break
            t = rng.choice(choices)
            assert m.advance(t)
            prefix += tb[t]
    assert states >= 100


# ---------------------------------------------------------------------- extract
def test_extract_grounded_copies_the_text():
    from constrained.app import extract, extract_many
    from constrained.models import LanguageModel

    lm = LanguageModel.tiny(seed=0)
    schema = {"type": "object", "properties": {"name": {"type": "string"}, "city": {"type": "string"}},
              "required": ["name", "city"]}
    texts = ["Ada lives in Paris.", "Grace was born in New York."]
    for text in texts:
        value = extract(schema, text, model=lm, grounded=True, max_tokens=48)
        assert value["name"] in text and value["city"] in text
    for text, value in zip(texts, extract_many(schema, texts, model=lm, grounded=True, max_tokens=48)):
        assert not isinstance(value, Exception) and value["name"] in text and value["city"] in text
    explicit = {"type": "object", "properties": {"d": {"type": "string", "format": "date", "x-grounded": True}}}
    out = extract_many(explicit, ["no date", "on 2020-02-02"], model=lm, max_tokens=32)
    assert isinstance(out[0], GroundingError) and out[1] in ({}, {"d": "2020-02-02"})
    with pytest.raises(GroundingError):
        extract(explicit, "no date", model=lm)


def test_numbers_grounded_only_when_asked():
    text = "port 587, retries 3.5"
    schema = {"type": "object", "properties": {"port": {"type": "integer", "x-grounded": True},
                                               "n": {"type": "number"}}}
    ref = Reference(compile_json_schema(schema, grounding=Grounding(text), whitespace="compact").grammar)
    assert ref.accepts(b'{"port":587}') and not ref.accepts(b'{"port":588}')
    assert not ref.accepts(b'{"port":58}') and not ref.accepts(b'{"port":5}')   # cut out of 587: not a number it writes
    assert ref.accepts(b'{"n":12}')
    bounded = {"type": "integer", "minimum": 1000, "x-grounded": True}
    with pytest.raises(GroundingError):
        compile_json_schema(bounded, grounding=Grounding(text))
    assert Reference(compile_json_schema({"type": "number", "x-grounded": True},
                                         grounding=Grounding(text)).grammar).accepts(b"3.5")


@pytest.mark.parametrize("text", ["Radius 10.0, port 8081 on 192.168.1.100 in us-east-1a; 2x6 at -3.5e2.",
                                  "A 1,000 m climb, -7 C, version 1.2.3 and 0.5."])
def test_numbers_grounded_by_default_are_numbers_the_text_writes(text):
    """``Grounding(numbers=True)``: an unannotated number is one of `number_spellings`
    of the text (the JSON numbers among the text's whole numbers), checked against an
    oracle over candidate spellings."""
    from constrained.json_schema.grounding import number_spellings

    schema = {"type": "object", "properties": {"x": {"type": "number"}, "k": {"type": "integer"},
                                               "free": {"type": "number", "x-grounded": False}}}
    ref = Reference(compile_json_schema(schema, grounding=Grounding(text, numbers=True),
                                        whitespace="compact").grammar)
    # the same schema ungrounded: which spellings its number and integer terminals take
    plain = Reference(compile_json_schema(schema, grounding=Grounding(text), whitespace="compact").grammar)
    spelled = set(number_spellings(text))
    candidates = {text[i:j] for i in range(len(text)) for j in range(i + 1, min(len(text), i + 8) + 1)}
    checked = 0
    for c in sorted(candidates):
        if c != c.strip():
            continue
        try:
            value = json.loads(c)
        except ValueError:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        checked += 1
        for key in (b"x", b"k"):
            data = b'{"' + key + b'":' + c.encode() + b"}"
            assert ref.accepts(data) == (c in spelled and plain.accepts(data)), data
        assert ref.accepts(b'{"free":' + c.encode() + b"}")
    assert checked > 8 and ref.accepts(b'{"x":0.5}' if "0.5" in text else b'{"x":10.0}')
    assert not ref.accepts(b'{"x":10}') and not ref.accepts(b'{"x":5}')
    assert plain.accepts(b'{"x":1}') and plain.accepts(b'{"x":424242}')           # numbers=False: free


def test_numbers_grounded_by_default_fall_back_with_a_note():
    schema = {"type": "object", "properties": {"x": {"type": "integer", "minimum": 100}}}
    c = compile_json_schema(schema, grounding=Grounding("only 7 and 12 here", numbers=True), whitespace="compact")
    assert any(n.keyword == "x-grounded" and n.pointer == "/properties/x" for n in c.notes)
    assert Reference(c.grammar).accepts(b'{"x":250}')
    c = compile_json_schema(schema, grounding=Grounding("no numbers", numbers=True), whitespace="compact")
    assert any(n.keyword == "x-grounded" for n in c.notes)
    assert Reference(c.grammar).accepts(b'{"x":250}')


def test_grounded_masks_full_vocabulary(smollm2_vocab):
    """With SmolLM2's whole vocabulary: at states of random masked walks the fast mask
    equals the byte-level definition (each token's bytes through the recognizer)."""
    from test_exactness import ByteLevelMask

    text = TEXTS[0]
    g = compile_json_schema(SCHEMA, grounding=Grounding(text), whitespace="compact",
                            fixed_strings="canonical").grammar
    cg = compile_grammar(g, smollm2_vocab, cache_dir=None)
    definition = ByteLevelMask(smollm2_vocab)
    rec, size, eos = cg.recognizer, len(smollm2_vocab), set(smollm2_vocab.eos_ids)
    rng = random.Random("full")
    states = 0
    for _ in range(4):
        m = cg.matcher()
        for _ in range(25):
            fast = unpack_mask(m.mask(), size)[:size].astype(bool)
            assert np.array_equal(fast, definition.allowed(rec, m.state_id))
            states += 1
            ids = [int(t) for t in np.flatnonzero(fast) if int(t) not in eos]
            if not ids or (fast[list(eos)].any() and rng.random() < 0.15):
                break
            assert m.advance(rng.choice(ids))
    assert states >= 30
