"""Finishing inside the budget (`decode_loop(finish_within_budget=True)`) against a model
that never wants to stop: whenever the schema's shortest instance fits in ``max_tokens``
the output is a valid value ended by EOS inside the budget.

The looping model prefers, at every step, whatever continues: letters (a string goes
on: ``"grace.john.john..."``), then ``{`` / ``[`` (nesting), digits; closing bytes and
EOS least.  Schemas cover the ways a completion can be hard to find: string content
that only a value check decides (an ``email`` format too large for the grammar, a
non-regular ``pattern``, overlapping ``oneOf`` patterns, ``not``, a long
``minLength``), checks on structure (``minProperties``, ``uniqueItems``), recursion."""

from __future__ import annotations

import json
import re

import jsonschema
import pytest
import torch

from constrained import TokenVocabulary, compile_grammar
from constrained.app import extraction_grammar
from constrained.decoding import decode_batch, decode_loop
from constrained.engine.matcher import Matcher
from constrained.json_schema.formats import EMAIL, FORMAT_NECESSARY
from constrained.models import TableModel
from samplers import Greedy

# bytes plus a few multi-byte tokens (so completions, forced text and samples tokenize differently)
_MULTI = [b'{"', b'":"', b'","', b'"}', b'":', b'",', b'john', b'.john', b'@', b'ab', b'[[', b']]', b'}}', b'":[']
VOCAB = TokenVocabulary.from_token_bytes([bytes([b]) for b in range(256)] + _MULTI + [b""],
                                         eos_ids=[256 + len(_MULTI)])
EOS = VOCAB.eos_ids[0]


def _looping_logits(vocab: TokenVocabulary) -> torch.Tensor:
    def score(data: bytes) -> float:
        if not data:
            return -20.0                                  # EOS: never wanted
        c = data[0]
        if chr(c).isalpha() and c < 0x80:
            return 10.0 + len(data)                       # strings go on (longest token first)
        if c in b"{[":
            return 8.0 + len(data)                        # nesting
        if chr(c).isdigit():
            return 6.0
        if c in b'"}],:':
            return -10.0                                  # closing: least
        return 0.0 if c < 0x80 else -5.0

    return torch.tensor([score(b) for b in vocab.token_bytes], dtype=torch.float32)


class LoopingSource:
    """A logits source (session and batch interface) that never wants to stop (see the module docstring)."""

    def __init__(self, vocab: TokenVocabulary, rows: int | None = None) -> None:
        self._logits = _looping_logits(vocab)
        self.rows = rows

    def logits(self):
        return self._logits if self.rows is None else self._logits.repeat(self.rows, 1)

    def extend(self, tokens) -> None:
        pass


CONTACT = json.load(open(__import__("pathlib").Path(__file__).parent.parent / "examples" / "contact.schema.json"))
UUID = {"oneOf": [{"pattern": "^[0-9a-f]{8}-([0-9a-f]{4}-){3}[0-9a-f]{12}$"},
                  {"pattern": "^[0-9A-F]{8}-([0-9A-F]{4}-){3}[0-9A-F]{12}$"}], "type": "string"}
SCHEMAS = {
    "email format left to a check": CONTACT,
    "overlapping oneOf patterns": {"type": "object", "properties": {"owner": {"type": "string"}, "id": UUID},
                                   "required": ["owner", "id"]},
    "non-regular pattern": {"type": "object", "properties": {"code": {"type": "string", "pattern": "^(?!x)[a-z]+\\d$"}},
                            "required": ["code"]},
    "not": {"type": "object", "properties": {"tag": {"type": "string", "not": {"enum": ["", "a", "b"]}}},
            "required": ["tag"]},
    "long minLength": {"type": "object", "properties": {"s": {"type": "string", "minLength": 30}}, "required": ["s"]},
    "recursion": {"type": "object", "properties": {"name": {"type": "string"},
                                                   "kids": {"type": "array", "items": {"$ref": "#"}}},
                  "required": ["name", "kids"]},
    "minProperties and uniqueItems": {"type": "object", "minProperties": 2,
                                      "additionalProperties": {"type": "array", "items": {"enum": [1, 2, 3]},
                                                               "uniqueItems": True, "minItems": 2}},
    "date-time array": {"type": "array", "items": {"type": "string", "format": "date-time"}, "minItems": 2},
}
BUDGETS = [8, 12, 16, 24, 40, 64]


def _compiled(schema):
    return compile_grammar(extraction_grammar(schema), VOCAB, cache_dir=None)


def _valid(schema, tokens) -> bool:
    value = json.loads(b"".join(VOCAB.token_bytes[t] for t in tokens))
    cls = jsonschema.Draft202012Validator
    return cls(schema, format_checker=cls.FORMAT_CHECKER).is_valid(value)


def _shortest_fits(compiled, budget: int) -> bool:
    need = compiled.matcher().completion_tokens()
    return need is not None and len(need) <= budget


@pytest.mark.parametrize("jump_forward", [True, False])
@pytest.mark.parametrize("name", list(SCHEMAS))
def test_a_looping_model_ends_valid_whenever_the_shortest_instance_fits(name, jump_forward) -> None:
    schema = SCHEMAS[name]
    compiled = _compiled(schema)
    rescued = 0
    for budget in BUDGETS:
        out = decode_loop(LoopingSource(VOCAB), compiled.matcher(), (EOS,), Greedy().choose, max_tokens=budget,
                          jump_forward=jump_forward, finish_within_budget=True)
        if out.stop != "eos":                   # allowed only where the shortest instance does not fit
            assert not _shortest_fits(compiled, budget), (name, budget, out)
            continue
        assert len(out.tokens) <= budget, (name, budget, out)
        assert _valid(schema, out.tokens), (name, budget, bytes(b"".join(VOCAB.token_bytes[t] for t in out.tokens)))
        rescued += bool(out.info.get("finished_by_completion"))
    assert rescued, f"{name}: the looping model never needed rescuing: the test tests nothing"


def _terse_logits(vocab: TokenVocabulary) -> torch.Tensor:
    """A model that ends every string at once: a closing quote first, then the bytes that
    close values, letters least."""
    def score(data: bytes) -> float:
        if not data:
            return -20.0
        c = data[0]
        return {0x22: 10.0, 0x7D: 8.0, 0x5D: 8.0, 0x2C: 6.0, 0x3A: 6.0}.get(c, 0.0 if c < 0x80 else -5.0)

    return torch.tensor([score(b) for b in vocab.token_bytes], dtype=torch.float32)


class TerseSource(LoopingSource):
    def __init__(self, vocab: TokenVocabulary) -> None:
        super().__init__(vocab)
        self._logits = _terse_logits(vocab)


LONG_STRINGS = {
    "long minLength": {"type": "object", "properties": {"s": {"type": "string", "minLength": 30},
                                                        "n": {"type": "integer"}}, "required": ["s", "n"]},
    "long minLength, hex pattern": {"type": "object", "properties": {
        "id": {"type": "string", "pattern": "^[0-9a-f]+$", "minLength": 32}}, "required": ["id"]},
    "long minLength, optional": {"type": "object", "properties": {"note": {"type": "string", "minLength": 40},
                                                                  "tag": {"type": "string"}}},
}


@pytest.mark.parametrize("complete", [False, True])
@pytest.mark.parametrize("name", list(LONG_STRINGS))
def test_a_model_that_ends_strings_at_once_still_meets_a_long_min_length(name, complete) -> None:
    """A ``minLength`` past the automaton's bound: the closing quote of a string short of it
    is refused as it is written (so greedy decoding writes on), and where the budget runs
    out the completion grows the string to its bound (the search writes no run of content
    bytes).  With room to spare the output is the model's own (the quote refused, it writes
    on), not its first short string replaced by the shortest completion of everything
    after it.  Also under ``complete=True``, whose ``anyOf`` with ``null`` wraps each member."""
    from constrained.app import decoding_schema

    schema = LONG_STRINGS[name]
    compiled = compile_grammar(extraction_grammar(decoding_schema(schema, complete)[0]), VOCAB, cache_dir=None)
    assert _shortest_fits(compiled, 64), name
    for budget in BUDGETS:
        out = decode_loop(TerseSource(VOCAB), compiled.matcher(), (EOS,), Greedy().choose, max_tokens=budget,
                          jump_forward=True, finish_within_budget=True)
        if out.stop != "eos":
            assert not _shortest_fits(compiled, budget), (name, budget, out)
            continue
        text = b"".join(VOCAB.token_bytes[t] for t in out.tokens)
        assert len(out.tokens) <= budget and _valid(decoding_schema(schema, complete)[0], out.tokens), (budget, text)
        if budget == BUDGETS[-1]:               # room to spare: the model's own tokens, no rescue
            assert not out.info.get("finished_by_completion"), text


def test_without_finishing_the_looping_model_runs_out() -> None:
    """The sweep above is meaningful: left alone, the looping model never ends a value."""
    compiled = _compiled(CONTACT)
    out = decode_loop(LoopingSource(VOCAB), compiled.matcher(), (EOS,), Greedy().choose, max_tokens=40,
                      jump_forward=True)
    assert out.stop == "max_tokens"


def test_decode_batch_rows_finish_as_they_would_alone() -> None:
    compiled = [_compiled(s) for s in SCHEMAS.values()]
    alone = [decode_loop(LoopingSource(VOCAB), c.matcher(), (EOS,), Greedy().choose, max_tokens=24,
                         jump_forward=True, finish_within_budget=True) for c in compiled]
    together = decode_batch(LoopingSource(VOCAB, rows=len(compiled)), [c.matcher() for c in compiled], (EOS,),
                            Greedy().choose, max_tokens=24, jump_forward=True, finish_within_budget=True)
    assert [s.tokens for s in together] == [s.tokens for s in alone]


def test_a_table_model_that_loops_ends_valid() -> None:
    """The same with a `TableModel` whose table prefers letters everywhere (random otherwise)."""
    bias = _looping_logits(VOCAB).double().numpy()
    lm = TableModel(VOCAB, seed=3, scale=0.5)
    compiled = _compiled(CONTACT)

    class Biased:
        def __init__(self) -> None:
            self.session = lm.session([])

        def logits(self):
            return self.session.logits() + torch.from_numpy(bias).float()

        def extend(self, tokens) -> None:
            self.session.extend(tokens)

    for budget in (17, 30, 50):
        assert _shortest_fits(compiled, budget)
        out = decode_loop(Biased(), compiled.matcher(), (EOS,), Greedy().choose, max_tokens=budget,
                          jump_forward=True, finish_within_budget=True)
        assert out.stop == "eos" and len(out.tokens) <= budget and _valid(CONTACT, out.tokens), out


@pytest.mark.parametrize("prefix, ends", [
    ('{"name":"grace.john.john', b'"}'),           # email still to come: a witness address is written
    ('{"name":"grace","email":"grace.john', b'"}'),  # half an address: finished with a witness's suffix
])
def test_checked_completion_writes_string_content_a_check_needs(prefix, ends) -> None:
    """The email format is left to a value check (its automaton is too large), so the
    grammar's shortest completion writes only the format's necessary condition there
    (`FORMAT_NECESSARY`: ``" @-"``, no address); the checked completion writes an
    address the check accepts (it used to give up: None)."""
    compiled = _compiled(CONTACT)
    m = compiled.matcher()
    assert m.advance_many(VOCAB.encode(prefix)) == len(VOCAB.encode(prefix))
    grammar_only = Matcher.shortest_completion(m)
    address = (prefix.encode() + grammar_only).rsplit(b'"email":"', 1)[-1].split(b'"')[0]
    assert re.fullmatch(FORMAT_NECESSARY["email"], address.decode()) and not re.fullmatch(EMAIL, address.decode())
    done = m.shortest_completion()
    assert done is not None and done.endswith(ends)
    assert jsonschema.Draft202012Validator(CONTACT, format_checker=jsonschema.FormatChecker()).is_valid(
        json.loads(prefix.encode() + done))
