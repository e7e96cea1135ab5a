"""A refused value written as a witness at once (`_substituted`, in the completion's
value-by-value repair), and a pattern too large for the automaton kept loosened in it.

MaskBench dev schema 3190 (an AWS X-Ray segment) requires a ``name`` whose ``pattern``
(``^[...]{1,200}$``, one class of 5,144 characters) is too large for the automaton, so it
is checked when the object closes, and a ``trace_id`` with ``minLength: 35``.  The grammar
let the name close empty (``"name":""``), a dead end; the repair, once the short
``trace_id`` was grown, rewrote the name by a local A* that spent its budget on detours as
cheap as a witness anywhere in the 90-byte completion, and the search gave up
(`CompletionSearchError` from a fresh matcher: every one of the dead-end probe's 20 walks
on that schema ended in a dead end).  Now the grammar keeps the pattern with its count
loosened (``[...]+``: `pattern_loosened_search_regex`), and where the loosened pattern's
shortest string is still refused (``{6,200}``), a witness written in the name's place
finds a completion.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from constrained import TokenVocabulary, compile_grammar
from constrained.engine import completion
from constrained.json_schema.compiler import compile_json_schema

FIXTURE = Path(__file__).parent / "data" / "completion_3190_members.json"
BYTES = TokenVocabulary.from_token_bytes([bytes([b]) for b in range(256)] + [b""], eos_ids=[256])


@pytest.fixture(scope="module")
def record() -> dict:
    return json.loads(FIXTURE.read_text())


def _compiled(schema: dict):
    compiled = compile_json_schema(schema)
    assert "pattern" in {n.keyword for n in compiled.notes}     # the name's pattern is a value check
    return compile_grammar(compiled.grammar, BYTES, cache_dir=None)


def test_a_fresh_matcher_of_schema_3190_gets_a_valid_completion(record) -> None:
    grammar = _compiled(record["schema"])
    out = grammar.matcher().shortest_completion(strict=True)
    value = json.loads(out)
    jsonschema.Draft4Validator(record["schema"]).validate(value)
    assert value["name"] and len(value["trace_id"]) >= 35


@pytest.mark.parametrize("prefix", [b'{"id":"0123456789abcdef","name":"', b'{"id":"0123456789abcdef","name":"x",',
                                    b'{"id":"0123456789abcdef","name":"x","start_time":1.5,"trace_id":"1-ab-'])
def test_prefixes_of_schema_3190_are_finished_validly(record, prefix: bytes) -> None:
    grammar = _compiled(record["schema"])
    m = grammar.matcher()
    for b in prefix:                             # BYTES: token b is byte b
        mask = m.mask()
        assert (int(mask[b // 32]) >> (b % 32)) & 1
        assert m.advance(b)
    out = m.shortest_completion(strict=True)
    jsonschema.Draft4Validator(record["schema"]).validate(json.loads(prefix + out))


def test_the_name_cannot_close_empty(record) -> None:
    m = _compiled(record["schema"]).matcher()
    for b in b'{"id":"0123456789abcdef","name":"':
        assert m.advance(b)
    mask = m.mask()
    allowed = [bool((int(mask[b // 32]) >> (b % 32)) & 1) for b in b'"aA']
    assert allowed == [False, True, True]


def _at_least_six(record) -> dict:
    schema = json.loads(json.dumps(record["schema"]))
    name = schema["properties"]["name"]
    assert name["pattern"].endswith("]{1,200}$")
    name["pattern"] = name["pattern"][: -len("{1,200}$")] + "{6,200}$"
    return schema


def test_a_witness_is_written_where_the_loosened_pattern_is_not_enough(record) -> None:
    schema = _at_least_six(record)       # the grammar keeps [...]{4,}: its shortest name is refused
    value = json.loads(_compiled(schema).matcher().shortest_completion(strict=True))
    jsonschema.Draft4Validator(schema).validate(value)
    assert len(value["name"]) >= 6


def test_without_the_substitution_the_search_gives_up(record, monkeypatch) -> None:
    """(So the test above is of `_substituted`.)"""
    monkeypatch.setattr(completion, "_substituted", lambda *args: None)
    with pytest.raises(completion.CompletionSearchError):
        _compiled(_at_least_six(record)).matcher().shortest_completion(strict=True)
