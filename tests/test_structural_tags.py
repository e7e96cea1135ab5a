"""Structural tags, ``%json`` inside lark, and lark's common terminals (issue 24).

* semantics: strings the composed grammars must accept and refuse, and agreement with an
  independent Python reading of the structural-tag semantics (first trigger starts a tag,
  the tag's JSON value validated with ``jsonschema``) on random and generated strings;
* exactness: the grammar's masks against the textbook reference recognizer
  (`constrained.testing.reference`) on random states of composed grammars, and the checked
  masks against the definition (grammar-viable and no completed section value invalid);
* ``constrained.testing`` (assert_sound / assert_complete / assert_mask_exact) on them;
* errors: malformed specs name the path; look-around is refused saying so.
"""

from __future__ import annotations

import json
import random
import re
import time
from dataclasses import replace

import jsonschema
import numpy as np
import pytest

from constrained import Grammar, TokenVocabulary, compile_grammar, unpack_mask
from constrained.deadline import compile_deadline
from constrained.errors import (
    CompileTimeoutError,
    GrammarSyntaxError,
    RegexError,
    StructuralTagError,
    UnsupportedGrammarError,
)
from constrained.grammar.derivations import GrammarSampler, RandomChooser
from constrained.testing import assert_complete, assert_mask_exact, assert_sound
from constrained.testing.reference import Reference

CONTAINS3 = {"type": "array", "items": {"type": "integer"}, "contains": {"const": 3}}
TRIPLE = {"type": "integer", "multipleOf": 3}
NOT_NO = {"type": "string", "not": {"enum": ["no", "x"]}}
POINT = {"type": "object", "properties": {"x": {"type": "integer"}, "tags": {"type": "array", "uniqueItems": True}},
         "required": ["x"], "additionalProperties": False}
LEGACY = {"type": "structural_tag", "triggers": ["<f="],
          "structures": [{"begin": "<f=a>", "schema": CONTAINS3, "end": "</f>"},
                         {"begin": "<f=b>", "schema": TRIPLE, "end": "</f>"},
                         {"begin": "<f=p>", "schema": POINT, "end": "</f>"},
                         {"begin": "<f=s>", "schema": NOT_NO, "end": "</f>"}]}
SCHEMAS = {"<f=a>": CONTAINS3, "<f=b>": TRIPLE, "<f=p>": POINT, "<f=s>": NOT_NO}
OPTIONS = {"whitespace": "compact"}

EXTRA_TOKENS = [b"<f=", b"<f=a>", b"<f=b>", b"<f=p>", b"</f>", b"</", b"f>", b"]</f>", b"3]", b"[3", b"12",
                b"<f", b"=a", b"x<", b"hi ", b"{\"x\":", b"\"x\"", b"},", b"1,", b"</think>", b"<think>",
                b"<tool_call>", b"</tool_call>", b"\n{\"", b"\": ", b"\"}", b"\\\"", b"ab", b"9<",
                b"<f=s>", b'"no"', b'"x"<', b'"no"</f>', b'o"', b'"n', b"3</f><f=b>6<"]


@pytest.fixture(scope="module")
def vocab() -> TokenVocabulary:
    """Every byte, some multi-byte tokens that straddle tags, EOS (id 0)."""
    toks = [b""] + [bytes([b]) for b in range(256)] + EXTRA_TOKENS
    return TokenVocabulary.from_token_bytes(toks, eos_ids=[0])


@pytest.fixture(scope="module")
def legacy(vocab):
    return compile_grammar(Grammar.from_structural_tag(LEGACY, **OPTIONS), vocab, cache_dir=None)


# ---------------------------------------------------------------------- an independent reading
def _value_end(text: str, start: int) -> tuple[object, int] | None:
    """The JSON value at ``start`` (no leading whitespace, as the grammar) and its end."""
    if start >= len(text) or text[start] in " \t\r\n":
        return None
    try:
        return json.JSONDecoder().raw_decode(text, start)
    except json.JSONDecodeError:
        return None


def oracle(text: str, *, prefix: bool = False) -> bool:
    """The structural tag ``LEGACY`` read directly: free text until the first ``<f=``, a
    begin, a JSON value valid for its schema, ``</f>``; again.  With ``prefix``: whether no
    part seen so far is already wrong *for the checks* (a completed value that fails its
    schema); the grammar's own refusals are left to the grammar."""
    pos = 0
    while True:
        at = text.find("<f=", pos)
        if at < 0:
            return True
        begin = text[at:at + 5]
        if begin not in SCHEMAS:
            return prefix and len(text) - at < 5
        if prefix and text[at + 5:at + 6] not in ("[", "{", '"'):
            run = re.match(r"[-+.eE0-9]*", text[at + 5:]).group()
            if at + 5 + len(run) == len(text):
                return True                 # a number may still grow
        got = _value_end(text, at + 5)
        if got is None:
            return prefix
        value, end = got
        if not jsonschema.Draft202012Validator(SCHEMAS[begin]).is_valid(value):
            return False
        if not text.startswith("</f>", end):
            return prefix and "</f>".startswith(text[end:end + 4])
        pos = end + 4


ACCEPT = [
    "", "hello", "a <f", "a <f:", "<f=a>[3]</f>", "x<f=a>[1,3]</f>y", "<f=b>9</f>", "<f=b>-12</f> and <f=b>0</f>",
    '<f=p>{"x":1}</f>', '<f=p>{"x":1,"tags":[1,"1"]}</f>', "<<f=a>[3]</f>", "f=a><f=a>[3,3]</f>",
    "<f=a>[3]</f><f=b>3</f>", "t</f>ext", '<f=s>"nox"</f>', '<f=s>""</f>',
]
REFUSE = [
    "<f=", "a <f=", "<f=c>[3]</f>", "<f=a>[1]</f>", "<f=a>[]</f>", "<f=b>10</f>", "<f=b>9 </f>", "<f=a> [3]</f>",
    '<f=p>{"x":1,"tags":[1,1]}</f>', '<f=p>{"y":1}</f>', "<f=a>[3]", "<f=a>[3]</f><f=", "x<f=a>[3]</f",
    '<f=p>{"x":"1"}</f>', "<f=a>[3]</g>", '<f=s>"no"</f>', '<f=s>"x"</f>', '<f=s>"\\u0078"</f>',
]


@pytest.mark.parametrize("text", ACCEPT)
def test_legacy_tag_accepts(legacy, text) -> None:
    assert oracle(text), text
    assert legacy.accepts_bytes(text.encode()), text


@pytest.mark.parametrize("text", REFUSE)
def test_legacy_tag_refuses(legacy, text) -> None:
    assert not oracle(text), text
    assert not legacy.accepts_bytes(text.encode()), text


def _random_text(rng: random.Random) -> str:
    parts = []
    for _ in range(rng.randint(0, 4)):
        kind = rng.random()
        if kind < 0.4:
            parts.append("".join(rng.choice(["a", " ", "<", "f", "=", ">", "/", "x"]) for _ in range(rng.randint(0, 6))))
        else:
            begin = rng.choice(list(SCHEMAS) + ["<f=c>"])
            value = rng.choice(["[3]", "[1,2]", "[3,3]", "9", "10", "-3", '{"x":1}', '{"x":1,"tags":[2,2]}',
                                '{"x":2,"tags":[]}', "[", "3 ", "", '"no"', '"ok"', '"x'])
            parts.append(begin + value + rng.choice(["</f>", "</f>", "</", ""]))
    return "".join(parts)


def test_legacy_tag_agrees_with_the_reading_on_random_texts(legacy) -> None:
    rng = random.Random(24)
    seen = {True: 0, False: 0}
    for _ in range(600):
        text = _random_text(rng)
        want = oracle(text)
        seen[want] += 1
        assert legacy.accepts_bytes(text.encode()) == want, text
    assert min(seen.values()) > 50


def test_generated_strings_are_accepted_iff_their_values_validate(legacy) -> None:
    sampler = GrammarSampler(replace(legacy.grammar, checks=None))
    chooser = RandomChooser(random.Random(3))
    n = 0
    for _ in range(200):
        text = sampler.generate(chooser, max_depth=10)
        if text is None:
            continue
        n += 1
        data = text.encode() if isinstance(text, str) else text
        assert legacy.accepts_bytes(data) == oracle(data.decode()), data
    assert n > 100


# ---------------------------------------------------------------------- exactness
COMPOSED = {
    "legacy": lambda: Grammar.from_structural_tag(LEGACY, **OPTIONS),
    "format_tree": lambda: Grammar.from_structural_tag({"type": "structural_tag", "format": {
        "type": "sequence", "elements": [
            {"type": "or", "elements": [
                {"type": "tag", "begin": "<think>", "content": {"type": "any_text"}, "end": "</think>"},
                {"type": "const_string", "value": ""}]},
            {"type": "regex", "pattern": "[ \\n]*"},
            {"type": "triggered_tags", "triggers": ["<f="], "at_least_one": False, "excludes": ["xx"],
             "tags": [{"begin": "<f=a>", "content": {"type": "json_schema", "json_schema": CONTAINS3}, "end": "</f>"},
                      {"begin": "<f=t>", "content": {"type": "any_text"}, "end": "</f>"}]}]}}, **OPTIONS),
    "separated": lambda: Grammar.from_structural_tag({"type": "structural_tag", "format": {
        "type": "tags_with_separator", "separator": ",", "at_least_one": True,
        "tags": [{"begin": "<f=p>", "content": {"type": "json_schema", "json_schema": POINT}, "end": "</f>"},
                 {"begin": "<f=g>", "content": {"type": "grammar", "grammar": 'root ::= "ab" | "a" root'},
                  "end": "</f>"}]}}, **OPTIONS),
    "lark_json": lambda: Grammar.from_lark(r'''
start: "say " (ESCAPED_STRING | call) (";" start)?
call: "<f=a>" args "</f>"
args: %json {"type": "array", "items": {"type": "integer"}, "contains": {"const": 3}}
%import common.ESCAPED_STRING
''', whitespace="compact"),
    "tools_hermes": lambda: Grammar.from_tools([
        {"name": "a", "parameters": CONTAINS3}, {"name": "p", "parameters": POINT}], reasoning=True,
        whitespace="compact"),
}


@pytest.mark.parametrize("name", sorted(COMPOSED))
def test_grammar_masks_equal_the_reference_recognizer(vocab, name) -> None:
    """Uniform masked walks (`assert_mask_exact`), then walks that prefer multi-byte tokens
    (tags, brackets) so that they get inside tags: every state's full mask, EOS included,
    equals the textbook recognizer's."""
    g = COMPOSED[name]()
    plain = compile_grammar(replace(g, checks=None), vocab, cache_dir=None)
    compared = assert_mask_exact(plain, walks=20, max_tokens=30, seed=5)
    ref = Reference(plain.grammar)
    rng = random.Random(name)
    seen: set[int] = set()
    for _ in range(30):
        m, chart, text = plain.matcher(), ref.initial, b""
        for _ in range(40):
            got = set(np.flatnonzero(unpack_mask(m.mask(), len(vocab))).tolist())
            if m.state_id not in seen:
                seen.add(m.state_id)
                assert got == ref.mask_from(chart, vocab.token_bytes, [0]), text
                compared += 1
            allowed = sorted(got - {0})
            if not allowed:
                break
            multi = [t for t in allowed if len(vocab.token_bytes[t]) > 1 or vocab.token_bytes[t] in b"]}<>3"]
            t = rng.choice(multi if multi and rng.random() < 0.7 else allowed)
            assert m.advance(t)
            text += vocab.token_bytes[t]
            chart = chart.feed(vocab.token_bytes[t])
    assert compared >= 60


def _checked_walk_states(compiled, rng: random.Random, walks: int, max_tokens: int):
    """(matcher, text) at every state of random masked walks of a checked grammar."""
    for _ in range(walks):
        m = compiled.matcher()
        text = b""
        for _ in range(max_tokens):
            yield m, text
            allowed = [t for t in np.flatnonzero(unpack_mask(m.mask(), len(compiled.vocab))).tolist() if t != 0]
            if not allowed:
                break
            # lean towards closing brackets, digits and tags so values complete often
            good = [t for t in allowed if compiled.vocab.token_bytes[t][:1] in (b"]", b"}", b"<", b"3", b"9", b'"')]
            t = rng.choice(good if good and rng.random() < 0.5 else allowed)
            assert m.advance(t)
            text += compiled.vocab.token_bytes[t]


def test_checked_masks_are_the_definition_on_random_states(vocab, legacy) -> None:
    """Checked mask == grammar mask minus the tokens after which a completed tag value fails
    its schema (the reading above), EOS iff accepted; grammar masks against the reference."""
    plain = compile_grammar(replace(legacy.grammar, checks=None), vocab, cache_dir=None)
    ref = Reference(plain.grammar)
    rng = random.Random(11)
    states = vetoed = 0
    for m, text in _checked_walk_states(legacy, rng, walks=25, max_tokens=30):
        grammar_mask = set(ref.mask(text, vocab.token_bytes, [0]))
        want = set()
        for t in grammar_mask:
            if t == 0:
                if oracle(text.decode()):
                    want.add(t)
            elif oracle((text + vocab.token_bytes[t]).decode("utf-8", "ignore"), prefix=True) or \
                    not _utf8(text + vocab.token_bytes[t]):
                want.add(t)
        got = set(np.flatnonzero(unpack_mask(m.mask(), len(vocab))).tolist())
        assert got == want, (text, sorted(got - want)[:8], sorted(want - got)[:8])
        states += 1
        vetoed += len(grammar_mask - want)
    assert states > 300 and vetoed > 20


def _utf8(data: bytes) -> bool:
    try:
        data.decode()
        return True
    except UnicodeDecodeError:
        return False


def test_the_testing_toolkit_works_on_composed_grammars(vocab, legacy) -> None:
    assert assert_sound(legacy, lambda s: oracle(s), walks=150, max_tokens=40, eos_p=0.2) > 50
    assert assert_complete(legacy, [s for s in ACCEPT if s]) > 0
    lark = compile_grammar(COMPOSED["lark_json"](), vocab, cache_dir=None)
    assert assert_complete(lark, ['say "x\\"y"', "say <f=a>[1,3]</f>;say \"\""]) > 0


# ---------------------------------------------------------------------- the format tree
def _accepts(spec, text: str) -> bool:
    g = Grammar.from_structural_tag(spec, **OPTIONS)
    vocab = TokenVocabulary.from_token_bytes([bytes([b]) for b in range(256)] + [b""], eos_ids=[256])
    return compile_grammar(g, vocab, cache_dir=None).accepts_bytes(text.encode())


def _fmt(fmt) -> dict:
    return {"type": "structural_tag", "format": fmt}


TAG_A = {"begin": "<f=a>", "content": {"type": "json_schema", "json_schema": CONTAINS3}, "end": "</f>"}


@pytest.mark.parametrize("fmt, text, ok", [
    ({"type": "tag", "begin": "<t>", "content": {"type": "any_text"}, "end": "</t>"}, "<t>a</t", False),
    ({"type": "tag", "begin": "<t>", "content": {"type": "any_text"}, "end": "</t>"}, "<t>a<t></t>", True),
    ({"type": "tag", "begin": "<t>", "content": {"type": "any_text"}, "end": "</t>"}, "<t>a</t></t>", False),
    ({"type": "tag", "begin": "<t>", "content": {"type": "any_text", "excludes": ["no"]}, "end": "</t>"},
     "<t>a no</t>", False),
    ({"type": "triggered_tags", "triggers": ["<f="], "tags": [TAG_A], "at_least_one": True}, "x<f=a>[3]</f>", False),
    ({"type": "triggered_tags", "triggers": ["<f="], "tags": [TAG_A], "at_least_one": True}, "<f=a>[3]</f>x", True),
    ({"type": "triggered_tags", "triggers": ["<f="], "tags": [TAG_A], "at_least_one": True}, "", False),
    ({"type": "triggered_tags", "triggers": ["<f="], "tags": [TAG_A], "stop_after_first": True},
     "x<f=a>[3]</f>", True),
    ({"type": "triggered_tags", "triggers": ["<f="], "tags": [TAG_A], "stop_after_first": True},
     "x<f=a>[3]</f>y", False),
    ({"type": "triggered_tags", "triggers": ["<f="], "tags": [TAG_A], "excludes": ["zz"]}, "azz", False),
    ({"type": "tags_with_separator", "tags": [TAG_A], "separator": ", "}, "", True),
    ({"type": "tags_with_separator", "tags": [TAG_A], "separator": ", "}, "<f=a>[3]</f>, <f=a>[3,1]</f>", True),
    ({"type": "tags_with_separator", "tags": [TAG_A], "separator": ", "}, "<f=a>[3]</f>,<f=a>[3]</f>", False),
    ({"type": "tags_with_separator", "tags": [TAG_A], "separator": ", "}, "<f=a>[3]</f>, <f=a>[1]</f>", False),
    ({"type": "sequence", "elements": [{"type": "const_string", "value": "A:"}, {"type": "regex", "pattern": "[0-9]+"}]},
     "A:42", True),
    ({"type": "or", "elements": [{"type": "const_string", "value": "yes"}, {"type": "json_schema",
                                                                           "json_schema": TRIPLE}]}, "12", True),
    ({"type": "or", "elements": [{"type": "const_string", "value": "yes"}, {"type": "json_schema",
                                                                           "json_schema": TRIPLE}]}, "13", False),
    ({"type": "grammar", "grammar": 'start: "x"+'}, "xxx", True),
])
def test_format_tree(fmt, text, ok) -> None:
    assert _accepts(_fmt(fmt), text) is ok


def test_a_spec_given_as_json_text_and_two_triggers() -> None:
    spec = {"type": "structural_tag", "triggers": ["<a>", "<b"],
            "structures": [{"begin": "<a>", "schema": {"type": "integer"}, "end": "</a>"},
                           {"begin": "<b=1>", "schema": {"type": "string"}, "end": "</b>"}]}
    assert _accepts(json.dumps(spec), 'x<a>1</a> y<b=1>"s"</b>')
    assert not _accepts(json.dumps(spec), "x<b=2>1</b>")
    assert not _accepts(json.dumps(spec), "x<b")      # a trigger must start a tag


@pytest.mark.parametrize("spec, path", [
    ({"type": "structural_tag"}, "$"),
    ({"type": "structural_tag", "triggers": ["<x"], "structures": [{"begin": "<f>", "schema": {}, "end": ""}]},
     "$.tags[0].begin"),
    ({"type": "structural_tag", "format": {"type": "nope"}}, "$.format.type"),
    ({"type": "structural_tag", "format": {"type": "sequence", "elements": []}}, "$.format.elements"),
    ({"type": "structural_tag", "format": {"type": "tag", "begin": 1, "content": {}, "end": ""}}, "$.format.begin"),
    ({"type": "structural_tag", "format": {"type": "regex", "pattern": "("}}, "$.format.pattern"),
])
def test_malformed_specs_name_the_path(spec, path) -> None:
    with pytest.raises(StructuralTagError) as e:
        Grammar.from_structural_tag(spec)
    assert e.value.path == path


def test_vllm_spellings_without_a_type() -> None:
    """vLLM's ``structural_tag`` sampling parameter is the JSON of ``{"structures", "triggers"}``
    (no ``type``); a bare ``{"format": ...}`` is read too."""
    legacy = json.dumps({"structures": [{"begin": "<a>", "schema": {"type": "integer"}, "end": "</a>"}],
                         "triggers": ["<a>"]})
    assert _accepts(legacy, "x<a>1</a>") and not _accepts(legacy, "x<a>y</a>")
    assert _accepts({"format": {"type": "const_string", "value": "ok"}}, "ok")


def test_not_json_is_a_typed_error() -> None:
    with pytest.raises(StructuralTagError, match="not JSON"):
        Grammar.from_structural_tag("{nope")


# ---------------------------------------------------------------------- lark
def test_lark_json_sections_keep_their_checks() -> None:
    g = Grammar.from_lark('start: "n=" num ("," num)*\nnum: %json {"type": "integer", "multipleOf": 3}\n'
                          '%import common.WS\n%ignore WS')
    vocab = TokenVocabulary.from_token_bytes([bytes([b]) for b in range(256)] + [b""], eos_ids=[256])
    cg = compile_grammar(g, vocab, cache_dir=None)
    assert cg.accepts_bytes(b"n=3, 6,9")
    assert not cg.accepts_bytes(b"n=3, 7,9")
    assert not cg.accepts_bytes(b"n=3,4")
    m = cg.matcher()
    assert m.advance_many(list(b"n=1")) == 3
    assert not m.allows(ord(","))               # 1 is complete here and not a multiple of 3
    assert m.allows(ord("2"))


def test_lark_json_markers_inside_strings_and_comments_are_text() -> None:
    g = Grammar.from_lark('start: "%json {}" X  // %json {"type": "integer"}\nX: /%json/')
    assert g.checks is None and "%json" not in {t.name for t in g.terminals}
    vocab = TokenVocabulary.from_token_bytes([bytes([b]) for b in range(256)] + [b""], eos_ids=[256])
    assert compile_grammar(g, vocab, cache_dir=None).accepts_bytes(b"%json {}%json")


def test_lark_json_errors_are_located() -> None:
    with pytest.raises(GrammarSyntaxError) as e:
        Grammar.from_lark('start: "a"\n  | %json [1, 2]')
    assert (e.value.line, e.value.column) == (2, 5)
    with pytest.raises(GrammarSyntaxError, match="JSON Schema"):
        Grammar.from_lark('start: %json {"a": ')


def test_escaped_string_is_lark_s_own_language() -> None:
    from lark import Lark
    from lark.exceptions import LarkError

    text = 'start: ESCAPED_STRING ("," ESCAPED_STRING)*\n%import common.ESCAPED_STRING'
    lark = Lark(text, parser="earley", lexer="dynamic_complete")
    vocab = TokenVocabulary.from_token_bytes([bytes([b]) for b in range(256)] + [b""], eos_ids=[256])
    cg = compile_grammar(Grammar.from_lark(text), vocab, cache_dir=None)
    rng = random.Random(8)
    agree = {True: 0, False: 0}
    for _ in range(400):
        s = '"' + "".join(rng.choice(['a', '"', '\\', ',', '\n', 'é']) for _ in range(rng.randint(0, 7))) + '"'
        try:
            lark.parse(s)
            want = True
        except LarkError:
            want = False
        assert cg.accepts_bytes(s.encode()) == want, s
        agree[want] += 1
    assert min(agree.values()) > 40


def test_other_look_around_is_refused_saying_so() -> None:
    with pytest.raises(RegexError, match=r"look-behind assertions such as \(\?<=\.\.\.\) are not supported") as e:
        Grammar.from_lark("start: A\nA: /a(?<=a)b/")
    assert e.value.terminal == "A" and e.value.position == 1
    with pytest.raises(RegexError, match="look-ahead"):
        Grammar.from_regex("a(?!b)")
    assert not re.search("not regular", str(e.value))


def test_alternative_schemas_are_one_value_with_their_anyof_checks() -> None:
    """``%json{A} | %json{B}`` (and an ``or`` of schemas) reads one value: a value valid for
    either branch is accepted although the other branch's checks refuse it."""
    a = {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}
    b = {"type": "array", "items": {"type": "integer"}, "contains": {"const": 3}}
    vocab = TokenVocabulary.from_token_bytes([bytes([c]) for c in range(256)] + [b""], eos_ids=[256])
    lark = Grammar.from_lark(f"start: v \";\"\nv: %json {json.dumps(a)}\n | %json {json.dumps(b)}")
    tree = Grammar.from_structural_tag(_fmt({"type": "or", "elements": [
        {"type": "json_schema", "json_schema": a}, {"type": "json_schema", "json_schema": b}]}))
    for g, end in ((lark, b";"), (tree, b"")):
        cg = compile_grammar(g, vocab, cache_dir=None)
        assert cg.accepts_bytes(b"[1,2]" + end) and cg.accepts_bytes(b"[3,3]" + end)
        assert not cg.accepts_bytes(b"[1,1]" + end)


def test_deep_and_unreadable_specs_are_typed_errors() -> None:
    fmt: dict = {"type": "const_string", "value": "x"}
    for _ in range(3000):
        fmt = {"type": "sequence", "elements": [fmt]}
    with pytest.raises(StructuralTagError, match="nested more than"):
        Grammar.from_structural_tag({"type": "structural_tag", "format": fmt})
    with pytest.raises(StructuralTagError, match="nests too deep"):
        Grammar.from_structural_tag("[" * 100_000)


def test_full_vocabulary_masks_are_the_byte_level_definition(smollm2_vocab) -> None:
    """SmolLM2's whole vocabulary on a tool-call output: at each state the fast mask equals
    the tokens whose bytes the recognizer can read (the engine's definition of a mask), and
    the checked mask equals that minus the tokens the checks refuse."""
    tools = [{"name": "a", "parameters": CONTAINS3}, {"name": "p", "parameters": POINT}]
    cg = compile_grammar(Grammar.from_tools(tools, reasoning=True), smollm2_vocab, cache_dir=None)
    rec, tb = cg.recognizer, smollm2_vocab.token_bytes
    checks = cg.grammar.checks
    text = ('<think>ok</think>\nSure: <tool_call>\n{"name": "a", "arguments": [1, 3]}\n</tool_call>\n'
            '<tool_call>\n{"name": "p", "arguments": {"x": 2, "tags": ["u", "v"]}}\n</tool_call> done')
    ids = smollm2_vocab.encode(text)
    m = cg.matcher()
    rng = random.Random(1)
    probe = set(rng.sample(range(len(ids)), 6)) | {len(ids) - 1}
    eos = set(smollm2_vocab.eos_ids)
    for i, t in enumerate(ids):
        if i in probe:
            state, cstate = m.state_id, m._cstates[-1]
            got = set(np.flatnonzero(unpack_mask(m.mask(), len(smollm2_vocab))).tolist())
            want = {u for u in range(len(tb)) if tb[u] and rec.feed(state, tb[u]) != 0
                    and checks.step(cstate, m.text, tb[u]) is not None}
            if m.is_accepting():
                want |= eos
            assert got == want, (b"".join(tb[u] for u in ids[:i]), sorted(got ^ want)[:8])
        assert m.advance(t)
    assert m.is_accepting()


# ---------------------------------------------------------------------- random specs
_SMALL_SCHEMAS = [{"type": "integer"}, {"enum": ["a", "b"]}, {"type": "array", "items": {"type": "integer"},
                                                              "uniqueItems": True}]


def _reading(spec: dict, text: str) -> bool:
    """Any legacy structural tag read directly: at the first place a trigger ends, a tag with
    that trigger (every begin that fits is tried), its schema's JSON value, its end; again."""
    structures = spec["structures"]

    def rest(pos: int) -> bool:
        ends = [(text.find(t, pos) + len(t), t) for t in spec["triggers"] if text.find(t, pos) >= 0]
        if not ends:
            return True
        first = min(e for e, _ in ends)
        for e, trig in ends:
            if e != first:
                continue
            at = e - len(trig)
            for s in structures:
                if not (s["begin"].startswith(trig) and text.startswith(s["begin"], at)):
                    continue
                got = _value_end(text, at + len(s["begin"]))
                if got is None:
                    continue
                value, end = got
                if jsonschema.Draft202012Validator(s["schema"]).is_valid(value) and \
                        text.startswith(s["end"], end) and rest(end + len(s["end"])):
                    return True
        return False

    return rest(0)


def _random_spec(rng: random.Random) -> dict:
    alphabet = "<ab>"
    triggers = sorted({"".join(rng.choice(alphabet) for _ in range(rng.randint(1, 3))) for _ in range(2)})
    # no trigger may start another (each begin then starts with exactly one trigger)
    triggers = [t for t in triggers if not any(u != t and t.startswith(u) for u in triggers)]
    structures = []
    for _ in range(rng.randint(1, 3)):
        trig = rng.choice(triggers)
        structures.append({"begin": trig + "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 2))),
                           "schema": rng.choice(_SMALL_SCHEMAS),
                           "end": "".join(rng.choice(alphabet + "/") for _ in range(rng.randint(0, 3)))})
    return {"type": "structural_tag", "triggers": triggers, "structures": structures}


def _random_tagged_text(rng: random.Random, spec: dict) -> str:
    parts = []
    for _ in range(rng.randint(0, 4)):
        if rng.random() < 0.5:
            parts.append("".join(rng.choice("<ab>/ x") for _ in range(rng.randint(0, 5))))
        else:
            s = rng.choice(spec["structures"])
            parts.append(s["begin"] + rng.choice(["1", "-2", '"a"', '"c"', "[1,2]", "[2,2]", "[]", "x"]) +
                         (s["end"] if rng.random() < 0.85 else ""))
    return "".join(parts)


def test_random_specs_agree_with_the_reading() -> None:
    """Random triggers over a four-letter alphabet (overlapping, self-overlapping, suffixes of
    one another), begins, ends and schemas with checks: the compiled grammar accepts exactly
    what the direct reading of the semantics accepts."""
    rng = random.Random(2024)
    vocab = TokenVocabulary.from_token_bytes([bytes([c]) for c in range(256)] + [b""], eos_ids=[256])
    seen = {True: 0, False: 0}
    for _ in range(25):
        spec = _random_spec(rng)
        cg = compile_grammar(Grammar.from_structural_tag(spec, **OPTIONS), vocab, cache_dir=None)
        for _ in range(40):
            text = _random_tagged_text(rng, spec)
            want = _reading(spec, text)
            seen[want] += 1
            assert cg.accepts_bytes(text.encode()) == want, (spec, text)
    assert min(seen.values()) > 100


def test_lark_regex_substrings_and_extensions_inside_terminals() -> None:
    vocab = TokenVocabulary.from_token_bytes([bytes([c]) for c in range(256)] + [b""], eos_ids=[256])
    g = Grammar.from_lark('start: "Q: " quote ";"\nquote: %regex {"substring_chars": "hello wörld"}')
    cg = compile_grammar(g, vocab, cache_dir=None)
    for text, ok in [("Q: lo wö;", True), ("Q: hello wörld;", True), ("Q: d;", True), ("Q: low;", False),
                     ("Q: ;", False), ("Q: wörlds;", False)]:
        assert cg.accepts_bytes(text.encode()) is ok, text
    with pytest.raises(UnsupportedGrammarError, match="substring_words"):
        Grammar.from_lark('start: %regex {"substring_words": "a b"}')
    with pytest.raises(UnsupportedGrammarError, match="inside the definition of terminal 'A'") as e:
        Grammar.from_lark('start: A\nA: "x" %json {"type": "integer"}')
    assert (e.value.line, e.value.column) == (2, 8)


def test_prefix_checks_of_a_section_use_the_whole_text() -> None:
    """A string longer than a checked maxLength (above what the grammar counts) is refused as
    its characters are written, inside a tag after free text (offsets into the whole output)."""
    spec = {"type": "structural_tag", "triggers": ["<f>"], "structures": [
        {"begin": "<f>", "end": "</f>", "schema": {"type": "object", "properties": {
            "s": {"type": "string", "maxLength": 30}}, "required": ["s"]}}]}
    vocab = TokenVocabulary.from_token_bytes([bytes([c]) for c in range(256)] + [b"aaaa", b""], eos_ids=[257])
    cg = compile_grammar(Grammar.from_structural_tag(spec, whitespace="compact"), vocab, cache_dir=None)
    prefix = b'some text <f>{"s":"' + b"a" * 28
    m = cg.matcher()
    assert m.advance_many(list(prefix)) == len(prefix)
    allowed = set(np.flatnonzero(unpack_mask(m.mask(), len(vocab))).tolist())
    assert ord("a") in allowed and 256 not in allowed        # 29 fits; 28 + "aaaa" does not
    assert m.advance(ord("a")) and m.advance(ord("a"))
    assert not m.allows(ord("a")) and m.allows(ord('"'))
    assert cg.accepts_bytes(prefix + b'aa"}</f>') and not cg.accepts_bytes(prefix + b'aaa"}</f>')


def test_failures_and_completions_through_sections(legacy) -> None:
    """The completion search's hints: a section's failure located in the whole text, and
    shortest completions that satisfy each section's checks."""
    checks = legacy.grammar.checks
    f = checks.failure(checks.start(), b"", b"x <f=b>10</f>")
    assert (f.keyword, f.value_start, f.value_end) == ("multipleOf", 7, 9)
    f = checks.failure(checks.start(), b"", b"x <f=a>[1,2]</f>")
    assert (f.keyword, f.value_start, f.value_end) == ("contains", 7, 12)
    assert checks.failure(checks.start(), b"", b"x <f=a>[3]</f>") is None
    for prefix in (b"x <f=a>[1,2", b"x <f=b>1", b'x <f=s>"n', b'<f=p>{"x":1,"tags":[1'):
        m = legacy.matcher()
        assert m.advance_many([b + 1 for b in prefix]) == len(prefix)
        done = m.shortest_completion()
        assert done is not None and oracle((prefix + done).decode()), (prefix, done)


def test_an_embedded_grammar_past_the_compile_deadline_is_a_timeout() -> None:
    """Out of time while loading a tag's grammar is a `CompileTimeoutError` (a server's
    compile limit), not a grammar that fails to load."""
    spec = {"type": "structural_tag", "format": {"type": "tag", "begin": "<g>", "end": "</g>",
                                                 "content": {"type": "grammar", "grammar": 'start: "x"+ "y"\n'}}}
    with pytest.raises(CompileTimeoutError), compile_deadline(0.0):
        time.sleep(0.001)
        Grammar.from_structural_tag(spec)
    assert Grammar.from_structural_tag(spec).rules
