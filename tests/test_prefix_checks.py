"""Prefix checks of value-checked schemas (issue "No dead ends"): the mask refuses the
token that dooms a value, not only the one that closes it, for the keywords decidable on
a prefix (`constrained.json_schema.value_checks`; the keyword table is
docs/json-schema-keywords.md); the completion search finds completions value by value
or says which check it could not satisfy (`CompletionSearchError`).

Exactness here is against slow references: `allows` equals the mask bit for every
token, and for the exact-on-prefix keywords a state the mask lets a walk reach always
has a completion (the definition of "no dead end") that `jsonschema` accepts.
"""

from __future__ import annotations

import json
import random

import jsonschema
import pytest
from hypothesis import given, settings, strategies as st

from constrained import TokenVocabulary, compile_grammar
from constrained.engine.checked import CheckedMatcher
from constrained.engine.completion import CompletionSearchError, checked_completion
from constrained.json_schema.compiler import compile_json_schema
from constrained.masks import unpack_mask

ASCII = TokenVocabulary.from_token_bytes([bytes([b]) for b in range(32, 127)] + [b""], eos_ids=[95])
# multi-byte tokens: one token may finish a key and start the next member, or overrun a string
_MULTI = [b'","', b'":', b'", "', b"],", b"]}", b'"]', b'"}', b"aaaaaaaaaa", b"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
          b'"abcdefghijklmnopqrstuvwxyz0123', b'{"', b'["a","a"', b"1,", b",1", b'"a",',
          b'"ab"', b'":"ab"', b'"ab"}']
CHUNKY = TokenVocabulary.from_token_bytes([bytes([b]) for b in range(32, 127)] + _MULTI + [b""],
                                          eos_ids=[95 + len(_MULTI)])

LONG = 30          # above the counted string length (MAX_COUNTED_LENGTH = 24): a value check

# keyword -> a schema where it is a value check that is decided on prefixes
PREFIX_EXACT = {
    "maxLength": {"type": "object", "properties": {"t": {"type": "string", "maxLength": LONG}},
                  "required": ["t"], "additionalProperties": False},
    "maxLength (array of strings)": {"type": "array", "items": {"type": "string", "maxLength": LONG}},
    "minLength": {"type": "object", "properties": {"t": {"type": "string", "minLength": LONG}},
                  "required": ["t"], "additionalProperties": False},
    "minLength (array of strings)": {"type": "array", "items": {"type": "string", "minLength": LONG}},
    "maxLength, optional": {"type": "object", "properties": {"t": {"anyOf": [
        {"type": "null"}, {"type": "string", "maxLength": LONG}]}}, "required": ["t"], "additionalProperties": False},
    "minLength, optional": {"type": "object", "properties": {"t": {"oneOf": [
        {"type": "string", "minLength": LONG}, {"type": "null"}]}}, "required": ["t"], "additionalProperties": False},
    "uniqueItems in an optional array": {"type": "object", "properties": {"t": {"anyOf": [
        {"type": "null"}, {"type": "array", "items": {"type": "string", "maxLength": 2}, "uniqueItems": True,
                           "maxItems": 3}]}}, "required": ["t"], "additionalProperties": False},
    "minLength and maxLength": {"type": "object", "properties": {"t": {"type": "string", "minLength": LONG,
                                                                       "maxLength": LONG + 2}},
                                "required": ["t"], "additionalProperties": False},
    "maxProperties": {"type": "object", "maxProperties": 2, "additionalProperties": {"type": "integer"}},
    "maxItems": {"type": "array", "maxItems": 3, "uniqueItems": True, "items": {"type": "string"}},
    "allOf additionalProperties false": {
        "type": "object", "allOf": [{"patternProperties": {"^x": {}}, "additionalProperties": False},
                                    {"patternProperties": {"y$": {}}, "additionalProperties": False}]},
    "propertyNames": {"type": "object", "propertyNames": {"enum": ["ab", "cd", "abc"]},
                      "additionalProperties": {"type": "integer"}},
    "uniqueItems strings": {"type": "array", "items": {"type": "string", "maxLength": 2}, "uniqueItems": True},
}

_CACHE: dict = {}


def _compiled(name: str, vocab=ASCII):
    key = (name, vocab.content_hash())
    if key not in _CACHE:
        _CACHE[key] = compile_grammar(compile_json_schema(PREFIX_EXACT[name]).grammar, vocab, cache_dir=None)
    return _CACHE[key]


def _walk_states(cg, vocab, seed: int, steps: int = 60):
    """A random masked walk: yields the matcher before each step (it is not forked)."""
    rng = random.Random(seed)
    m = cg.matcher()
    size = len(vocab.token_bytes)
    for _ in range(steps):
        yield m
        allowed = [int(t) for t in unpack_mask(m.mask(), size).nonzero()[0] if t not in vocab.eos_ids]
        if not allowed:
            return
        assert m.advance(rng.choice(allowed))


# exact on prefixes: every state the mask lets a walk reach can still be finished.  The
# others are checked at the end of a key or element: a key prefix no admitted key extends
# ('{"a' under "keys start with x"), a repeat that cannot grow (["ab","ab under maxLength
# 2) are still reachable (docs/json-schema-keywords.md lists them so)
EXACT = ("maxItems", "maxLength", "maxLength (array of strings)", "maxProperties", "minLength",
         "minLength (array of strings)", "minLength and maxLength", "maxLength, optional", "minLength, optional")


@pytest.mark.parametrize("name", sorted(PREFIX_EXACT))
@pytest.mark.parametrize("vocab", [ASCII, CHUNKY], ids=["ascii", "chunky"])
def test_mask_equals_allows_and_prefix_exact_walks_never_dead_end(name: str, vocab) -> None:
    """Every token's mask bit equals `allows` (the slow reference: one token at a time);
    for the keywords exact on prefixes, every state a masked walk reaches has a completion
    that the schema's validator accepts (no dead ends)."""
    cg = _compiled(name, vocab)
    validator = jsonschema.Draft202012Validator(PREFIX_EXACT[name])
    size = len(vocab.token_bytes)
    for seed in range(6):
        for m in _walk_states(cg, vocab, seed):
            assert isinstance(m, CheckedMatcher), name
            bits = unpack_mask(m.mask(), size)
            allowed = [t for t in range(size) if m.allows(t)]
            assert allowed == [int(t) for t in bits.nonzero()[0]], (name, m.text)
            if name in EXACT:
                done = m.shortest_completion(strict=True)
                assert done is not None, (name, m.text)
                assert validator.is_valid(json.loads(m.text + done)), (name, m.text + done)


def _matcher_after(name: str, text: bytes):
    m = _compiled(name).matcher()
    assert m.advance_many(ASCII.encode(text.decode())) == len(text), text
    return m


def _allows_byte(m, b: bytes) -> bool:
    return m.allows(ASCII.token_bytes.index(b))


def test_max_length_refuses_the_character_past_the_bound_inside_the_string() -> None:
    m = _matcher_after("maxLength", b'{"t":"' + b"x" * (LONG - 1))
    assert _allows_byte(m, b"y")                              # the 30th character
    m.advance(ASCII.token_bytes.index(b"y"))
    assert not _allows_byte(m, b"z") and not _allows_byte(m, b"\\")   # a 31st, or an escape
    assert _allows_byte(m, b'"')
    # escapes and multi-byte characters count as one character each
    m = _matcher_after("maxLength", b'{"t":"' + b"\\u00e9" * (LONG - 1) + b"\\n")
    assert not _allows_byte(m, b"a") and _allows_byte(m, b'"')


def test_min_length_refuses_the_closing_quote_of_a_string_short_of_it() -> None:
    """A ``minLength`` above the automaton's bound is counted by the tracker: the quote
    that would end the string one character short is refused, the one after the bound is
    allowed; escapes and multi-byte characters count once; a token holding a whole short
    string is refused too (CHUNKY's ``"ab"``)."""
    m = _matcher_after("minLength", b'{"t":"' + b"x" * (LONG - 1))
    assert not _allows_byte(m, b'"') and _allows_byte(m, b"y")
    m.advance(ASCII.token_bytes.index(b"y"))
    assert _allows_byte(m, b'"')
    m = _matcher_after("minLength", b'{"t":"' + b"\\u00e9" * (LONG - 1))
    assert not _allows_byte(m, b'"')
    assert m.advance_many(ASCII.encode("\\n")) == 2 and _allows_byte(m, b'"')
    chunky = compile_grammar(compile_json_schema(PREFIX_EXACT["minLength"]).grammar, CHUNKY, cache_dir=None)
    for prefix, whole in (('{"t":', b'"ab"}'), ('{"t', b'":"ab"')):
        m, tokens = chunky.matcher(), CHUNKY.encode(prefix)
        assert m.advance_many(tokens) == len(tokens)
        assert not m.allows(CHUNKY.token_bytes.index(whole)), whole


@pytest.mark.parametrize("wrapper", ["anyOf", "oneOf"])
def test_min_length_is_counted_through_branches_that_admit_strings(wrapper: str) -> None:
    """A string under ``anyOf`` / ``oneOf`` must meet some branch that admits strings: the
    least checked ``minLength`` among those is counted (the null and integer branches say
    nothing of strings), as in ``extract(complete=True)``'s ``{"anyOf": [{"type": "null"},
    member]}``; the other kinds of value stay free."""
    schema = {"type": "object", "properties": {"a": {wrapper: [
        {"type": "null"}, {"type": "integer"}, {"type": "string", "minLength": LONG},
        {"type": "string", "minLength": LONG + 5, "pattern": "^x"}]}}, "required": ["a"]}
    cg = compile_grammar(compile_json_schema(schema).grammar, ASCII, cache_dir=None)
    m = cg.matcher()
    assert m.advance_many(ASCII.encode('{"a":"' + "y" * (LONG - 1))) == 6 + LONG - 1
    assert not _allows_byte(m, b'"')
    assert m.advance_many(ASCII.encode("y")) == 1 and _allows_byte(m, b'"')
    for value in ("null", "12"):
        m = cg.matcher()
        assert m.advance_many(ASCII.encode('{"a":' + value + "}")) == 6 + len(value)


@pytest.mark.parametrize("schema, filler", [
    ({"type": "string", "minLength": 40}, " "),
    ({"type": "object", "properties": {"id": {"type": "string", "pattern": "^[a-f0-9]+$", "minLength": 32},
                                       "n": {"type": "integer"}}, "required": ["id", "n"]}, "0"),
    ({"type": "array", "items": {"type": "string", "minLength": 26}, "minItems": 2}, None),
    ({"type": "object", "properties": {"a": {"type": "string", "minLength": 30},
                                       "b": {"type": "string", "minLength": 50}}, "required": ["a", "b"]}, None),
    ({"type": "object", "properties": {"a": {"anyOf": [{"type": "null"}, {"type": "string", "minLength": 30}]}},
      "required": ["a"]}, " "),
    ({"type": "object", "properties": {"a": {"anyOf": [{"type": "string", "minLength": 30}, {"type": "integer"}]}},
      "required": ["a"]}, None),
])
def test_a_string_short_of_its_min_length_is_finished_by_repeating_a_content_byte(schema: dict, filler) -> None:
    """The completion search writes no run of content bytes, so a string needing dozens of
    characters more is grown by copies of one byte its grammar state keeps to (a blank, or
    a hex digit under a hex pattern), the fewest that pass: from the start, from inside the
    string and for each of several strings.  Below an ``anyOf`` (no tracker) the close
    refuses the short string and the same padding finishes it."""
    cg = compile_grammar(compile_json_schema(schema).grammar, ASCII, cache_dir=None)
    validator = jsonschema.Draft202012Validator(schema)
    for prefix in ("", *(p for p in ('{"id":"ab', '["x', '{"a":"x"', '{"a":"') if cg.matcher().advance_many(
            ASCII.encode(p)) == len(p))):
        m = cg.matcher()
        assert m.advance_many(ASCII.encode(prefix)) == len(prefix)
        done = m.shortest_completion(strict=True)
        assert done is not None, prefix
        text = m.text + done
        assert validator.is_valid(json.loads(text)), text
        if filler is not None:
            assert filler * 20 in done.decode(), done


def test_prefix_checks_apply_in_the_one_branch_a_value_of_its_kind_can_take() -> None:
    """``{"anyOf": [{"type": "null"}, member]}`` (pydantic's ``Optional``, and every member
    ``extract(complete=True)`` asks for): a string, array or object can only be ``member``,
    so its prefix checks apply as they do without the wrapper (`CheckCursor.of_kind`)."""
    m = _matcher_after("maxLength, optional", b'{"t":"' + b"x" * LONG)
    assert not _allows_byte(m, b"y") and _allows_byte(m, b'"')
    m = _matcher_after("uniqueItems in an optional array", b'{"t":["a","b","a')
    assert not _allows_byte(m, b'"') and _allows_byte(m, b"b")
    m = _matcher_after("uniqueItems in an optional array", b'{"t":["a","b","c"')
    assert not _allows_byte(m, b",") and _allows_byte(m, b"]")
    m = _matcher_after("maxLength, optional", b'{"t":')
    assert _allows_byte(m, b"n")                             # null stays free


def test_max_properties_refuses_the_comma_of_a_member_too_many() -> None:
    m = _matcher_after("maxProperties", b'{"a":1,"b":2')
    assert not _allows_byte(m, b",") and _allows_byte(m, b"}")
    m = _matcher_after("maxProperties", b'{"a":1')
    assert _allows_byte(m, b",")


def test_max_items_and_unique_strings_are_refused_where_the_element_completes() -> None:
    m = _matcher_after("maxItems", b'["a","b","c"')
    assert not _allows_byte(m, b",") and _allows_byte(m, b"]")      # (the grammar counts 3)
    # past max_repetition (256) the grammar does not count: the value check does
    schema = {"type": "array", "maxItems": 300}
    sc = compile_json_schema(schema, whitespace="compact")
    assert ("", "maxItems") in sc.checked
    m = compile_grammar(sc.grammar, ASCII, cache_dir=None).matcher()
    text = "[" + "0," * 299 + "0"
    assert m.advance_many(ASCII.encode(text)) == len(text)
    assert not _allows_byte(m, b",") and _allows_byte(m, b"]")
    m.rollback(2)                                                    # 299 elements: one more may come
    assert _allows_byte(m, b",")
    m = _matcher_after("uniqueItems strings", b'["a","b","a')
    assert not _allows_byte(m, b'"') and _allows_byte(m, b"b")        # "a" again: refused at its quote


def test_keys_no_sub_schema_admits_are_refused_at_their_closing_quote() -> None:
    m = _matcher_after("allOf additionalProperties false", b'{"xa')
    assert not _allows_byte(m, b'"')                          # "xa" does not end with y: the second branch
    assert _allows_byte(m, b"y")
    m = _matcher_after("allOf additionalProperties false", b'{"xay')
    assert _allows_byte(m, b'"')
    m = _matcher_after("propertyNames", b'{"ab')
    assert _allows_byte(m, b'"') and _allows_byte(m, b"c")
    m = _matcher_after("propertyNames", b'{"a')
    assert not _allows_byte(m, b'"')


small_strings = st.text(alphabet="abé\n\"\\", max_size=40)


@settings(max_examples=120, deadline=None)
@given(value=st.one_of(
    st.fixed_dictionaries({"t": small_strings}),
    st.dictionaries(st.sampled_from(["a", "b", "c", "ab", "cd", "abc"]), st.integers(-3, 3), max_size=4),
    st.lists(small_strings, max_size=5)))
def test_prefix_checks_lose_no_valid_instance_and_admit_no_invalid_one(value) -> None:
    """Soundness and completeness of the checks with prefix checks on: the compiled
    grammar accepts exactly the instances `jsonschema` accepts (canonical spelling)."""
    text = json.dumps(value).encode()
    for name, schema in PREFIX_EXACT.items():
        valid = jsonschema.Draft202012Validator(schema).is_valid(value)
        assert _compiled(name).accepts_bytes(text) == valid, (name, text)


def test_completion_through_required_formats_rewrites_only_the_refused_value() -> None:
    """An email left to validation after a uuid and two date-times: the whole-text search
    used to drown in equally short date-time spellings; the repair rewrites the email."""
    schema = {"$schema": "http://json-schema.org/draft-04/schema#", "type": "object",
              "properties": {"id": {"type": "string", "format": "uuid"},
                             "created": {"type": "string", "format": "date-time"},
                             "updated": {"type": "string", "format": "date-time"},
                             "email": {"type": "string", "format": "email", "minLength": 1}},
              "required": ["id", "created", "updated", "email"]}
    cg = compile_grammar(compile_json_schema(schema).grammar, ASCII, cache_dir=None)
    done = cg.matcher().shortest_completion(strict=True)
    assert done is not None
    value = json.loads(done)
    assert "@" in value["email"]
    from constrained.json_schema.validation import format_checker

    assert jsonschema.Draft4Validator(schema, format_checker=format_checker()).is_valid(value)


def test_a_search_that_gives_up_names_the_keyword_and_a_proven_dead_end_is_none() -> None:
    # keys that hold "a", "b" and "c", 4+ characters long, 4 of them: the witnesses join
    # two patterns' matches, not three, and byte by byte the budget runs out first
    hard = {"type": "object", "minProperties": 4,
            "allOf": [{"patternProperties": {"^.{1,3}$": False}, "additionalProperties": True},
                      {"patternProperties": {"a": True}, "additionalProperties": False},
                      {"patternProperties": {"b": True}, "additionalProperties": False},
                      {"patternProperties": {"c": True}, "additionalProperties": False}]}
    cg = compile_grammar(compile_json_schema(hard).grammar, ASCII, cache_dir=None)
    m = cg.matcher()
    with pytest.raises(CompletionSearchError) as err:
        m.shortest_completion(strict=True)
    assert err.value.keyword == "minProperties" and err.value.pointer == "/minProperties"
    assert m.shortest_completion() is None                     # not strict: None, as before
    # with two patterns, joined witnesses give such keys
    two = dict(hard, allOf=hard["allOf"][:3])
    m = compile_grammar(compile_json_schema(two).grammar, ASCII, cache_dir=None).matcher()
    done = json.loads(m.shortest_completion(strict=True))
    assert len(done) == 4 and all("a" in k and "b" in k and len(k) >= 4 for k in done)
    # ["a","b", with elements from {"a", "b"}: every element repeats one (in any of its
    # escape spellings); the exhaustive search runs out of texts, which proves it
    dup = {"type": "array", "items": {"enum": ["a", "b"]}, "uniqueItems": True}
    m = compile_grammar(compile_json_schema(dup, whitespace="compact").grammar, ASCII, cache_dir=None).matcher()
    assert m.advance_many(ASCII.encode('["a","b",')) == 9
    assert m.shortest_completion(strict=True) is None
    # [1,2, with numbers: 1.0, 1.00, ... are spellings without end, so nothing is proven
    dup = {"type": "array", "items": {"enum": [1, 2]}, "uniqueItems": True}
    m = compile_grammar(compile_json_schema(dup, whitespace="compact").grammar, ASCII, cache_dir=None).matcher()
    assert m.advance_many(ASCII.encode("[1,2,")) == 5
    with pytest.raises(CompletionSearchError) as err:
        m.shortest_completion(strict=True)
    assert err.value.keyword == "uniqueItems"


def test_checked_searches_are_remembered_per_recognizer_and_checks_content() -> None:
    """The memo of checked searches lives on the recognizer's completion tables and is keyed
    by the checks' content hash: no stale answer when a freed checks object's id is reused."""
    from constrained.engine.completion import _tables

    cg = compile_grammar(compile_json_schema({"type": "object", "minProperties": 2}).grammar, ASCII,
                         cache_dir=None)
    m = cg.matcher()
    first = m.shortest_completion()
    assert first is not None and len(json.loads(first)) == 2
    memo = _tables(m._rec).checked_memo
    assert memo and all(k[0] == m._checks.content_hash() for k in memo)
    from constrained.engine.checked import witnesses_of

    again = checked_completion(m._rec, m._history[-1], m._checks, m._cstates[-1], b"",
                               witnesses=witnesses_of(m._checks))
    assert again == first and len(memo) == 1


def test_an_array_short_of_min_items_is_finished_by_repeating_its_last_element() -> None:
    """An array that needs 600 objects (dev schema 911): the grammar's completion holds
    255 (its counted bound) and minItems refuses it; every search step would read ~9 KB,
    so no byte-wise search starts from it, but the last element repeated (`pad`) passes:
    the completion has exactly 600 elements and validates."""
    from constrained.engine.completion import MAX_SEARCHED_COMPLETION, shortest_completion

    schema = {"type": "array", "minItems": 600,
              "items": {"type": "object", "properties": {"name": {"type": "string"}, "resource_uri": {"type": "string"}},
                        "required": ["name", "resource_uri"]}}
    m = compile_grammar(compile_json_schema(schema, whitespace="compact").grammar, ASCII,
                        cache_dir=None).matcher()
    assert len(shortest_completion(m._rec, m._history[-1])) > MAX_SEARCHED_COMPLETION
    assert m.advance_many(ASCII.encode('[{"name":"x","resource_uri":"y"},')) == 33
    done = m.shortest_completion(strict=True)
    value = json.loads(m.text + done)
    assert len(value) == 600 and jsonschema.Draft202012Validator(schema).is_valid(value)
    assert value[0] == {"name": "x", "resource_uri": "y"}          # the text written stays
    # nested: the array inside an object, more after it, a counted bound of its own
    nested = {"type": "object", "properties": {"xs": {"type": "array", "items": {"type": "integer"},
                                                      "minItems": 300, "maxItems": 400},
                                               "z": {"type": "string"}}, "required": ["xs", "z"]}
    m = compile_grammar(compile_json_schema(nested, whitespace="compact").grammar, ASCII, cache_dir=None).matcher()
    assert m.advance_many(ASCII.encode('{"xs":[7')) == 8
    value = json.loads(m.text + m.shortest_completion(strict=True))
    assert len(value["xs"]) == 300 and jsonschema.Draft202012Validator(nested).is_valid(value)


def test_a_repeat_that_a_check_refuses_is_not_padded() -> None:
    """Copies of the last element under uniqueItems fail: `pad` gives None and the search
    (here: short elements, byte by byte) finds distinct ones, or names the keyword."""
    schema = {"type": "array", "items": {"type": "integer"}, "minItems": 300, "uniqueItems": True}
    m = compile_grammar(compile_json_schema(schema, whitespace="compact").grammar, ASCII, cache_dir=None).matcher()
    assert m.advance_many(ASCII.encode("[5")) == 2
    checks, state = m._checks, m._cstates[-1]
    f = checks.failure(state, m.text, b"]")
    assert f.keyword == "minItems" and checks.pad(state, m.text, b"]", f) is None
    try:
        done = m.shortest_completion(strict=True)
    except CompletionSearchError as err:     # the grammar's completion repeats 0: uniqueItems refuses it
        assert err.keyword in ("minItems", "uniqueItems")
    else:
        assert done is None or jsonschema.Draft202012Validator(schema).is_valid(json.loads(m.text + done))


def test_a_repeated_key_is_refused_at_its_closing_quote_by_mask_and_allows_alike() -> None:
    """Keys of a value-checked object with free keys: a token that ends a key equal to an
    earlier one is refused, whether the key began in it (',"a":', '"a"', an escape) or
    before it."""
    pieces = [b'{"', b"a", b"b", b'"', b":", b"1", b",", b"}", b',"a":', b',"b":', b'"a"', b'\\u0061"', b""]
    vocab = TokenVocabulary.from_token_bytes(pieces, eos_ids=[len(pieces) - 1])
    ids = {p: i for i, p in enumerate(pieces)}
    schema = {"type": "object", "minProperties": 1, "additionalProperties": {"type": "integer"}}
    m = compile_grammar(compile_json_schema(schema, whitespace="compact").grammar, vocab, cache_dir=None).matcher()

    def masked(*names):
        bits = unpack_mask(m.mask(), len(pieces))
        assert [bool(bits[ids[p]]) for p in names] == [m.allows(ids[p]) for p in names]
        return [bool(bits[ids[p]]) for p in names]

    assert m.advance_many([ids[p] for p in (b'{"', b"a", b'"', b":", b"1")]) == 5
    assert masked(b',"a":', b',"b":', b",") == [False, True, True]
    assert m.advance(ids[b","])
    assert masked(b'"a"', b'"') == [False, True]
    assert m.advance(ids[b'"'])
    assert masked(b'"', b"a", b"b", b'\\u0061"') == [True, True, True, False]   # '"' ends the empty key
    assert m.advance(ids[b"a"])
    assert masked(b'"', b"b") == [False, True]


def test_keys_the_grammar_admits_beyond_a_lone_additional_properties_false_agree() -> None:
    """MaskBench dev schema 3150 with property_order="any": its grammar admits a key the
    object's close refuses; mask and allows agree on the token that ends it (the mask
    allowed '":' there and advance refused it)."""
    from pathlib import Path

    data = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "maskbench" / "dev.jsonl.gz"
    if not data.is_file():
        pytest.skip("MaskBench dev data not found")
    from conftest import load_vocab

    from constrained import Grammar
    from constrained.bench.datasets import read_schemas

    record = read_schemas(data)[3150]
    vocab = load_vocab("llama3")
    cg = compile_grammar(Grammar.from_json_schema(record["schema"], property_order="any"), vocab, cache_dir=None)
    size = len(vocab.token_bytes)
    for test in record["tests"]:
        m = cg.matcher()
        for tok in vocab.encode(json.dumps(test["data"])):
            assert bool(unpack_mask(m.mask(), size)[tok]) == m.allows(tok), (m.text[-60:], vocab.token_bytes[tok])
            if not m.advance(tok):
                break


def test_padding_stops_at_its_byte_limit() -> None:
    """Copies of a long element are not written past `MAX_PADDED` bytes: `pad` gives
    None rather than validating megabytes, and the search names the keyword."""
    from constrained.json_schema.value_checks import MAX_PADDED

    schema = {"type": "array", "items": {"type": "string"}, "minItems": 4000}
    m = compile_grammar(compile_json_schema(schema, whitespace="compact").grammar, ASCII, cache_dir=None).matcher()
    elem = "x" * 40
    assert m.advance_many(ASCII.encode(f'["{elem}"')) == len(elem) + 3
    checks, state = m._checks, m._cstates[-1]
    f = checks.failure(state, m.text, b"]")
    assert 4000 * (len(elem) + 3) > MAX_PADDED and checks.pad(state, m.text, b"]", f) is None
    short = {"type": "array", "items": {"type": "string"}, "minItems": 1000}
    m = compile_grammar(compile_json_schema(short, whitespace="compact").grammar, ASCII, cache_dir=None).matcher()
    assert m.advance_many(ASCII.encode('["ab"')) == 5
    assert len(json.loads(m.text + m.shortest_completion(strict=True))) == 1000
