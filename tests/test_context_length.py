"""Prompts that fit the model's context: `extract` drops prompt detail (the schema's
JSON, then nested members, then the list) until the prompt and ``max_tokens`` fit in
``LanguageModel.context_length``, and raises `ContextLengthError` before generating
where even the bare instruction does not fit; `generate` and tool calls raise it too.
The tiny test model has a 1,024-position context and a byte vocabulary, so a prompt's
length is its system text, a newline and the text, in bytes."""

from __future__ import annotations

import time
from types import SimpleNamespace

import jsonschema
import pytest

import constrained
from constrained.app import FIELD_LIST_INSTRUCTIONS, _extraction_prompt, _extraction_system, field_list
from constrained.errors import ContextLengthError, GenerationError
from constrained.models import LanguageModel


@pytest.fixture(scope="module")
def lm() -> LanguageModel:
    return LanguageModel.tiny(seed=0)


def _schema(members: int, description: int, nested: int = 0) -> dict:
    inner = {f"inner{j}": {"type": "string", "description": "d" * description} for j in range(nested)}
    props: dict = {f"field{i}": {"type": "string", "description": "x" * description} for i in range(members)}
    if nested:
        props["box"] = {"type": "object", "properties": inner}
    return {"type": "object", "properties": props, "required": ["field0"]}


def _system(lm, schema, text: str, max_tokens: int) -> str:
    return bytes(_extraction_prompt(lm, schema, text, None, max_tokens)).decode()[:-len("\n" + text)]


def test_the_tiny_model_says_its_context_and_a_config_without_one_says_none(lm) -> None:
    assert lm.context_length == 1024
    bare = LanguageModel.__new__(LanguageModel)
    bare.model = SimpleNamespace(config=SimpleNamespace())
    assert bare.context_length is None


def test_a_prompt_that_fits_is_the_default_one(lm) -> None:
    schema = {**_schema(3, 10), "minProperties": 1}            # keeps the JSON
    assert _system(lm, schema, "TEXT", 64) == _extraction_system(schema, None)


def test_the_schema_json_goes_first_then_nested_members_then_the_list(lm) -> None:
    schema = {**_schema(4, 40, nested=6), "minProperties": 1}
    full = _extraction_system(schema, None)
    nested = FIELD_LIST_INSTRUCTIONS + "\n" + field_list(schema)
    root = FIELD_LIST_INSTRUCTIONS + "\n" + field_list(schema, levels=1)
    assert len(full) > len(nested) > len(root) > len(FIELD_LIST_INSTRUCTIONS)
    for system in (full, nested, root, FIELD_LIST_INSTRUCTIONS):     # the most detailed that fits
        budget = 1024 - len(system) - len("\nTEXT")
        assert _system(lm, schema, "TEXT", budget) == system
        if system != FIELD_LIST_INSTRUCTIONS:
            assert _system(lm, schema, "TEXT", budget + 1) != system
    with pytest.raises(ContextLengthError, match="max_tokens=929 .* context of 1024 tokens"):
        _extraction_prompt(lm, schema, "TEXT", None, 1024 - len(FIELD_LIST_INSTRUCTIONS) - len("\nTEXT") + 1)


def test_given_instructions_are_never_cut(lm) -> None:
    with pytest.raises(ContextLengthError, match=r"takes 1005 tokens; with max_tokens=20"):
        _extraction_prompt(lm, _schema(1, 1), "TEXT", "I" * 1000, 20)
    assert len(_extraction_prompt(lm, _schema(1, 1), "TEXT", "I" * 1000, 19)) == 1005


def test_extract_with_a_schema_longer_than_the_context_returns_a_valid_value(lm) -> None:
    schema = _schema(6, 300)                                   # its JSON alone is ~2 KB
    value = constrained.extract(schema, "field0 is abc.", model=lm, max_tokens=48)
    jsonschema.validate(value, schema)


def test_a_text_longer_than_the_context_is_a_typed_error_before_generation(lm) -> None:
    t0 = time.perf_counter()
    with pytest.raises(ContextLengthError, match="shorten the text or lower max_tokens"):
        constrained.extract(_schema(2, 5), "word " * 300, model=lm, max_tokens=32)
    assert time.perf_counter() - t0 < 30
    with pytest.raises(ContextLengthError):
        constrained.generate("x" * 1000, regex="[ab]{3}", model=lm, max_tokens=32)
    assert len(constrained.generate("x" * 900, regex="[ab]{3}", model=lm, max_tokens=32)) == 3
    with pytest.raises(ContextLengthError):
        constrained.generate("x" * 2000, tools=[{"name": "f", "parameters": {"type": "object"}}], model=lm,
                             max_tokens=16, tool_choice="required")
    assert issubclass(ContextLengthError, GenerationError)


def test_extract_many_gives_the_text_that_does_not_fit_its_error_and_the_others_values(lm) -> None:
    schema = _schema(2, 5)
    out = constrained.extract_many(schema, ["field0 is a.", "word " * 300, "field1 is b."], model=lm,
                                   max_tokens=32, grounded=True)
    assert isinstance(out[1], ContextLengthError)
    for value in (out[0], out[2]):
        jsonschema.validate(value, schema)


def test_a_string_no_file_can_be_named_is_text_not_an_os_error(tmp_path) -> None:
    """The command line's ``--text``/``--texts`` and `generate`'s ``grammar=`` take a file
    name or the thing itself: a long text (past the system's name limit) or one with a
    NUL byte is not a file, and a schema given so is a typed error."""
    from constrained.app import is_file, load_schema
    from constrained.cli import _read_text
    from constrained.errors import InvalidSchemaError

    long_text = "word " * 3000
    assert not is_file(long_text) and not is_file("a\x00b") and is_file(__file__)
    assert _read_text(long_text) == long_text
    (tmp_path / "t.txt").write_text("from a file")
    assert _read_text(str(tmp_path / "t.txt")) == "from a file"
    for bad in (long_text, "a\x00b"):
        with pytest.raises(InvalidSchemaError, match="does not exist"):
            load_schema(bad)
    grammar = 'start: "ab" | "cd"  // a comment that ends like a file name: ' + "x" * 5000 + ".lark"
    assert constrained.generate("x", grammar=grammar, model=LanguageModel.tiny(), max_tokens=8) in ("ab", "cd")
