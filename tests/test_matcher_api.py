"""The public Matcher API contract, bad grammars, mask layout and application."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from constrained import (
    Grammar, GrammarSyntaxError, TokenVocabulary, UnsupportedGrammarError, apply_token_mask, compile_grammar,
    pack_mask, unpack_mask,
)
from constrained.errors import EmptyLanguageError, GrammarError, MatcherError, MatcherTerminatedError

TOY = [b"{", b"}", b'"', b"a", b'":', b" ", b"1", b"2", b",", b"[", b"]", b'"a"', b"true", b"}]", b"", b"\xc3", b"\xa9"]
EOS = 14
JSON_LARK = open(__file__.rsplit("/tests/", 1)[0] + "/grammars/json.lark").read()


@pytest.fixture(scope="module")
def toy_json():
    vocab = TokenVocabulary.from_token_bytes(TOY, eos_ids=[EOS])
    return compile_grammar(Grammar.from_lark(JSON_LARK), vocab, cache_dir=None)


def bits(m, v):
    return unpack_mask(m.mask(), v)


def test_mask_layout_eos_and_allows_agree(toy_json) -> None:
    m = toy_json.matcher()
    mk = m.mask()
    assert mk.dtype == np.int32 and mk.shape == ((len(TOY) + 31) // 32,)
    assert not mk.flags.writeable
    for seq in ([], [0], [0, 2, 3], [0, 2, 3, 4, 6], [0, 2, 3, 4, 6, 1]):
        m = toy_json.matcher()
        assert m.advance_many(seq) == len(seq)
        b = bits(m, len(TOY))
        assert [m.allows(t) for t in range(len(TOY))] == b.tolist()
        assert b[EOS] == m.is_accepting()
        assert unpack_mask(m.mask(), 32)[len(TOY):].sum() == 0  # padding bits are zero


def test_advance_refused_leaves_state_unchanged(toy_json) -> None:
    m = toy_json.matcher()
    m.advance(0)
    before = (m.state_id, m.tokens, bits(m, len(TOY)).tolist())
    assert not m.advance(1 + 5)  # "1" is not allowed after "{"
    assert not m.advance(999_999)  # unknown id
    assert (m.state_id, m.tokens, bits(m, len(TOY)).tolist()) == before


def test_fork_rollback_terminate(toy_json) -> None:
    m = toy_json.matcher()
    assert m.advance_many([0, 2, 3, 4, 6, 1]) == 6
    f = m.fork()
    assert f.advance(EOS) and f.is_terminated() and not m.is_terminated()
    with pytest.raises(MatcherTerminatedError):
        f.mask()
    assert not f.advance(0) and not f.allows(0)
    f.rollback(1)
    assert not f.is_terminated() and f.is_accepting()
    r = toy_json.matcher()
    expected = []
    for t in [0, 2, 3, 4, 6, 1]:
        expected.append(bits(r, len(TOY)).tolist())
        r.advance(t)
    g = m.fork()
    g.rollback(6)
    got = []
    for t in [0, 2, 3, 4, 6, 1]:
        got.append(bits(g, len(TOY)).tolist())
        g.advance(t)
    assert got == expected
    with pytest.raises(MatcherError):
        g.rollback(7)


def test_special_tokens_never_allowed(llama3_vocab) -> None:
    cg = compile_grammar(Grammar.from_regex(r"(?s:.)+"), llama3_vocab)
    m = cg.matcher()
    b = unpack_mask(m.mask(), len(llama3_vocab))
    specials = sorted(llama3_vocab.special_ids)
    assert not b[specials].any()
    assert b[llama3_vocab.lengths > 0].sum() > 100_000  # almost everything else (UTF-8 validity prunes some)
    m.advance(llama3_vocab.encode("hi")[0])
    b = unpack_mask(m.mask(), len(llama3_vocab))
    assert b[list(llama3_vocab.eos_ids)].all() and not b[[s for s in specials if s not in llama3_vocab.eos_ids]].any()


def test_disk_cache_round_trip(tmp_path, llama3_vocab) -> None:
    from constrained.automata.byte_dfa import compile_regex
    from constrained.engine.token_tables import TokenTables

    g = Grammar.from_lark(JSON_LARK)
    cg1 = compile_grammar(g, llama3_vocab, cache_dir=tmp_path, precompute=True)
    files = list(tmp_path.rglob("*.npz"))
    assert files
    TokenTables._registry.clear()
    compile_regex.cache_clear()
    cg2 = compile_grammar(g, llama3_vocab, cache_dir=tmp_path)
    ids = llama3_vocab.encode('{"key": [1, 2.5, "x"], "b": null}')
    m1, m2 = cg1.matcher(), cg2.matcher()
    for t in ids:
        assert np.array_equal(m1.mask(), m2.mask())
        assert m1.advance(t) and m2.advance(t)
    assert m1.is_accepting() and m2.is_accepting()


def test_threads_share_a_compiled_grammar(llama3_vocab) -> None:
    cg = compile_grammar(Grammar.from_lark(JSON_LARK), llama3_vocab)
    texts = ['{"a": [1, 2, {"b": "c"}]}', '[true, false, null, -0.5e3]', '{"x": {"y": {"z": []}}}'] * 4
    results: dict[int, list] = {}

    def work(i: int) -> None:
        m = cg.matcher()
        out = []
        for t in llama3_vocab.encode(texts[i]):
            out.append(m.mask().tobytes())
            out.append(m.advance(t))
        results[i] = out

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(texts))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for i in range(len(texts)):
        assert results[i] == results[i % 3]
        assert all(x for x in results[i] if isinstance(x, bool))


def test_forced_tokens_are_canonical(llama3_vocab) -> None:
    g = Grammar.from_lark('start: "{\\"temperature\\": " NUMBER ", \\"unit\\": \\"celsius\\"}"\nNUMBER: /[0-9]+/')
    cg = compile_grammar(g, llama3_vocab)
    m = cg.matcher()
    forced = m.forced_tokens()
    text = b"".join(llama3_vocab.token_bytes[t] for t in forced)
    assert m.forced_bytes() == b'{"temperature": '
    assert text and m.forced_bytes().startswith(text)
    assert forced == llama3_vocab.encode(text.decode())
    assert m.advance_many(forced) == len(forced)
    m.advance_many(llama3_vocab.encode("21"))
    rest = m.forced_tokens()  # a digit could still follow: nothing forced
    assert rest == []
    assert m.advance(llama3_vocab.encode(",")[0])
    tail = m.forced_tokens()
    assert tail and b"".join(llama3_vocab.token_bytes[t] for t in tail) == b' "unit": "celsius"}'


def _devices() -> list:
    try:
        import torch
    except ImportError:
        return ["cpu"]
    cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
    return ["cpu", pytest.param("cuda", marks=cuda)]


@pytest.mark.parametrize("device", _devices())
def test_apply_token_mask_covers_padding_ids(device) -> None:
    torch = pytest.importorskip("torch")
    allowed = np.zeros(70, bool)
    allowed[[0, 33, 69]] = True
    mask = pack_mask(allowed)
    logits = torch.zeros(2, 96, device=device)  # model wider than the vocabulary
    apply_token_mask(logits, np.stack([mask, mask]))
    finite = torch.isfinite(logits)
    assert finite[:, [0, 33, 69]].all() and finite.sum() == 6


@pytest.mark.parametrize("device", _devices())
def test_apply_token_mask_matches_unpacked_mask(device) -> None:
    """Random masks (numpy or torch, batched), bf16 logits: exactly the allowed ids stay finite."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    allowed = rng.random((3, 1000)) < 0.3
    packed = pack_mask(allowed)
    for mask in (packed, torch.as_tensor(packed).to(device)):
        logits = torch.randn(3, 1024, device=device, dtype=torch.bfloat16)
        before = logits.clone()
        apply_token_mask(logits, mask)
        expect = np.zeros((3, 1024), bool)
        expect[:, :1000] = allowed
        finite = torch.isfinite(logits).cpu().numpy()
        assert (finite == expect).all()
        assert torch.equal(logits[torch.isfinite(logits)], before[torch.as_tensor(expect, device=device)])


@pytest.mark.parametrize("text,line,column", [
    ('start: "a" (', 1, 13), ("start: a\na: \"x\"\n  | b\n", None, None), ('start: "a"\nstart: "b"', None, None),
])
def test_malformed_lark_grammars(text, line, column) -> None:
    with pytest.raises(GrammarSyntaxError) as info:
        Grammar.from_lark(text)
    if line is not None:
        assert (info.value.line, info.value.column) == (line, column)
    else:
        assert info.value.line is not None  # located by the name it complains about


def test_unsupported_and_empty_grammars() -> None:
    vocab = TokenVocabulary.from_token_bytes([b"a", b""], eos_ids=[1])
    with pytest.raises(UnsupportedGrammarError):
        Grammar.from_lark("start: B\n%declare B")
    with pytest.raises(EmptyLanguageError):
        compile_grammar(Grammar.from_lark('start: "a" start'), vocab, cache_dir=None)
    with pytest.raises(GrammarError):
        compile_grammar(Grammar.from_lark("start: A\nA: /a|/"), vocab, cache_dir=None)
    with pytest.raises(GrammarError):
        compile_grammar("start: 'a'", vocab)  # type: ignore[arg-type]


def test_ambiguous_and_scannerless_grammars() -> None:
    vocab = TokenVocabulary.from_token_bytes([b"a", b"aa", b"ab", b"b", b""], eos_ids=[4])
    # greedy lexing of A=/a+/ would eat the "a" that B needs; every split is kept
    cg = compile_grammar(Grammar.from_lark("start: A B\nA: /a+/\nB: /ab/"), vocab, cache_dir=None)
    assert cg.accepts_bytes(b"aab") and cg.accepts_bytes(b"aaab") and not cg.accepts_bytes(b"ab")
    m = cg.matcher()
    assert m.advance(1) and m.advance(3) and m.is_accepting()  # "aa" + "b"
    amb = compile_grammar(Grammar.from_lark('start: x+\nx: "a" | "aa" | "a" "a"'), vocab, cache_dir=None)
    assert amb.accepts_bytes(b"aaaaa") and not amb.accepts_bytes(b"aab")


def test_mask_memory_budget_drops_memos_not_answers(llama3_vocab) -> None:
    """With a tiny budget the mask memos are dropped again and again; masks, forks and
    acceptance must not change."""
    from constrained import Grammar

    g = Grammar.from_file(Path(__file__).resolve().parents[1] / "grammars" / "json.lark")
    text = '{"a": [1, 2.5, {"b": "xyz"}], "c": null, "d": [true, false]}'
    ids = llama3_vocab.encode(text)
    roomy = compile_grammar(g, llama3_vocab, cache_dir=None)
    tight = compile_grammar(g, llama3_vocab, cache_dir=None, max_mask_memory=64 << 10)
    a, b = roomy.matcher(), tight.matcher()
    for t in ids:
        assert np.array_equal(a.mask(), b.mask())
        assert a.advance(t) and b.advance(t)
    assert a.is_accepting() and b.is_accepting()
    assert tight.stats()["mask_memo_resets"] > 0 and roomy.stats()["mask_memo_resets"] == 0
    assert tight.stats()["mask_memory_bytes"] <= 64 << 10


def test_the_first_mask_is_computed_by_the_compile(toy_json) -> None:
    """`compile_grammar` leaves the start state's mask memoised (``first_mask=False``: not);
    both give the same first mask, and the same masks after it."""
    vocab = toy_json.vocab
    g = Grammar.from_json_schema({"type": "object", "properties": {"a": {"type": "integer"}}})
    ready = compile_grammar(g, vocab, cache_dir=None)
    lazy = compile_grammar(g, vocab, cache_dir=None, first_mask=False)
    assert ready.recognizer.initial in ready.recognizer._mask_memo
    assert lazy.recognizer.initial not in lazy.recognizer._mask_memo
    a, b = ready.matcher(), lazy.matcher()
    for token in [0, 2, 3, 4, 6, 1]:      # {"a":1}
        assert np.array_equal(a.mask(), b.mask())
        assert a.advance(token) and b.advance(token)
    assert a.advance(EOS) and b.advance(EOS)


_INSIDE_SCHEMA = {"type": "object", "properties": {
    "name": {"type": "string"}, "code": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]+$"},
    "n": {"type": "number"}, "tags": {"type": "array", "items": {"type": "string", "maxLength": 6}}}}


_OVERLAPPING = r"""
start: item ("," item)*
item: INT | FLOAT | HEX | WORD | KEY
INT: /[0-9]+/
FLOAT: /[0-9]+\.[0-9]+/
HEX: /0x[0-9a-f]+/
WORD: /[a-z]+/
KEY: /ke[a-z]*=[0-9]+/
"""


def _bytewise(rec, sid: int, data: bytes) -> int:
    """The state after ``data`` by `byte_step`, one byte at a time (what `feed` did for
    every input before its shortcut)."""
    for b in data:
        sid = rec.byte_step(sid, b)
        if sid == 0:
            break
    return sid


@pytest.mark.parametrize("source", ["schema", "lark", "overlapping"])
def test_a_token_read_inside_a_lexeme_equals_reading_its_bytes(llama3_vocab, source) -> None:
    """`feed`'s shortcut for a state that is one configuration inside a lexeme
    (`Recognizer._inside_lexeme`) gives the state stepping the token's bytes one by one
    (`byte_step`) gives, for every allowed token and random others along random walks (strings, a
    pattern, numbers, escapes, tokens that close a string and go on, lexemes that share
    their first bytes)."""
    import random

    g = (Grammar.from_json_schema(_INSIDE_SCHEMA) if source == "schema" else
         Grammar.from_lark(JSON_LARK) if source == "lark" else Grammar.from_lark(_OVERLAPPING))
    rec = compile_grammar(g, llama3_vocab, cache_dir=None).recognizer
    tb, rng = llama3_vocab.token_bytes, random.Random(5)
    texts = (['12,3.5,0xff,abc,0x1,7.25,key=3,kettle,09'] if source == "overlapping" else
             ['{"name": "Ada L\\u00f6velace \\"AL\\"", "code": "AB-1234", "n": -12.5e3, "tags": ["a b", "xyz"]}',
              '{"name": "\u00e9t\u00e9, 2024", "n": 0, "tags": ["\\n", "123456"]}'])
    taken = 0
    for text in texts:
        sid = rec.initial
        for token in llama3_vocab.encode(text):
            allowed = np.flatnonzero(np.unpackbits(rec.mask(sid).view(np.uint8), bitorder="little")[:len(tb)])
            for t in list(allowed[:400]) + rng.sample(range(len(tb)), 200):
                if not tb[t]:
                    continue
                fast = rec._inside_lexeme(sid, tb[t])
                if fast is not None:
                    taken += 1
                    assert fast == _bytewise(rec, sid, tb[t]), (sid, tb[t])
            sid = rec.token_step(sid, token)
            assert sid != 0, text
        assert rec.accepting(sid)
    assert taken > 500


def test_shortest_completion_is_shortest_and_completes() -> None:
    """Against brute force over a small alphabet: the completion finishes the text and
    nothing shorter does."""
    import itertools

    from constrained import Grammar, TokenVocabulary, compile_grammar

    alphabet = b'ab[],{}":0 '
    vocab = TokenVocabulary.from_token_bytes([bytes([c]) for c in alphabet] + [b""], eos_ids=[len(alphabet)])
    grammar = Grammar.from_lark('start: value\nvalue: "[" [value ("," value)*] "]" | "{" [pair ("," pair)*] "}"'
                                ' | STR | "0"\npair: STR ":" value\nSTR: /"[ab]{2,3}"/\n')
    compiled = compile_grammar(grammar, vocab, cache_dir=None)
    for prefix in [b"", b"[", b'[{"a', b'{"ab":[0,{"b', b'[[[{"aa":', b"[0,"]:
        m = compiled.matcher()
        assert m.advance_many(vocab.encode(prefix.decode())) == len(prefix)
        c = m.shortest_completion()
        assert c is not None and compiled.accepts_bytes(prefix + c), (prefix, c)
        for n in range(len(c)):
            assert not any(compiled.accepts_bytes(prefix + bytes(t)) for t in itertools.product(alphabet, repeat=n)), \
                (prefix, c, n)
        tokens = m.completion_tokens()
        assert tokens is not None and b"".join(vocab.token_bytes[t] for t in tokens) == c


SCHEMAS_FOR_COMPLETION = [
    {"type": "object", "properties": {"a": {"type": "array", "items": {"$ref": "#"}, "maxItems": 3},
                                      "bb": {"type": "string", "minLength": 3}}, "required": ["a", "bb"],
     "additionalProperties": False},
    {"type": "array", "prefixItems": [{"type": "number"}, {"enum": ["xy", [1, 2]]}], "minItems": 2},
    {"anyOf": [{"type": "object", "properties": {"k": {"type": "integer", "minimum": 10}}, "required": ["k"]},
               {"type": "string", "pattern": "^q{4}$"}]},
]


@pytest.mark.parametrize("source", ["json.lark", 0, 1, 2])
def test_shortest_completion_equals_the_byte_search(source) -> None:
    """The grammar-level completion (Earley items and shortest yields) has exactly the
    length of a breadth-first search over bytes, at every prefix of sampled texts, and
    finishes them."""
    import random

    from constrained import Grammar, TokenVocabulary, compile_grammar
    from constrained.engine.completion import bfs_completion, shortest_completion
    from constrained.grammar.derivations import RandomChooser
    from constrained.testing.walks import follow_mask

    vocab = TokenVocabulary.from_token_bytes([bytes([b]) for b in range(32, 127)] + [b""], eos_ids=[95])
    grammar = (Grammar.from_lark(JSON_LARK) if source == "json.lark"
               else Grammar.from_json_schema(SCHEMAS_FOR_COMPLETION[source], whitespace="compact"))
    compiled = compile_grammar(grammar, vocab, cache_dir=None)
    rec = compiled.recognizer
    rng = random.Random(0)
    checked = 0
    for seed in range(12):
        data = follow_mask(compiled, RandomChooser(random.Random(seed)), max_tokens=40, eos_p=0.05).text
        for cut in sorted({rng.randrange(len(data) + 1) for _ in range(6)}):
            sid = rec.feed(rec.initial, data[:cut])
            got, want = shortest_completion(rec, sid), bfs_completion(rec, sid, max_states=20_000)
            assert got is not None and rec.accepting(rec.feed(sid, got)), (data[:cut], got)
            if want is not None:              # else past the byte search's reach
                assert len(got) == len(want), (data[:cut], got, want)
                checked += 1
    assert checked >= 30


def test_shortest_completion_of_deep_nesting_is_fast() -> None:
    """Finishing 300 open arrays and objects (where a byte search gives up) in bounded time."""
    import time

    from constrained import Grammar, TokenVocabulary, compile_grammar
    from constrained.engine.completion import bfs_completion

    vocab = TokenVocabulary.from_token_bytes([bytes([b]) for b in range(32, 127)] + [b""], eos_ids=[95])
    schema = {"type": "object", "properties": {"req": {"type": "string"}, "d": {"$ref": "#"}},
              "required": ["req", "d"]}
    compiled = compile_grammar(Grammar.from_json_schema({"anyOf": [schema, {"type": "array", "items": {"$ref": "#"}}]},
                                                        whitespace="compact"), vocab, cache_dir=None)
    prefix = '[{"req":"x","d":' * 150
    m = compiled.matcher()
    assert m.advance_many(vocab.encode(prefix)) == len(prefix)
    t0 = time.perf_counter()
    c = m.shortest_completion()
    assert time.perf_counter() - t0 < 5.0
    assert c == b"[]" + b"}]" * 150
    assert compiled.accepts_bytes(prefix.encode() + c)
    assert bfs_completion(compiled.recognizer, m.state_id, max_states=2000) is None


def test_a_compiled_grammar_lets_its_rule_objects_go_and_gives_an_equal_grammar_back() -> None:
    """A compiled grammar holds its rules and terminals as plain tuples (objects the cyclic
    collector stops tracking), so once the caller lets go of the grammar its `Rule` and
    `TerminalDef` objects are freed; `grammar` then rebuilds an equal grammar, and
    terminals built lazily after that still compile (their builder holds the terminals,
    not the grammar)."""
    import gc
    import weakref

    from constrained.grammar.ir import Rule, TerminalDef

    def make() -> Grammar:
        return Grammar(terminals=(TerminalDef("A", "a"), TerminalDef("B", "[0-9]+")),
                       rules=(Rule("start", ("A", "n")), Rule("n", ("B",)), Rule("n", ())), start="start")

    vocab = TokenVocabulary.from_token_bytes([b"a", b"1", b"a12", b"2", b""], eos_ids=[4])
    g = make()
    cg = compile_grammar(g, vocab, cache_dir=None, lazy_terminals=True)
    assert cg.grammar is g                       # the same object while the caller holds it
    gone = [weakref.ref(g), weakref.ref(g.rules[0]), weakref.ref(g.terminals[1])]
    del g
    gc.collect()
    assert [ref() for ref in gone] == [None, None, None]
    assert cg.grammar == make() and cg.grammar.rules[1] == Rule("n", ("B",))
    m = cg.matcher()                             # terminal automata built now, after the grammar went
    assert m.advance_many([2, 3]) == 2 and m.is_accepting()
