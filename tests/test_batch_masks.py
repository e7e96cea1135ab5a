"""`fill_masks`: batched masks equal per-row `mask()` (grammars, JSON Schemas, value checks,
finished rows, padded widths, torch out), typed errors; the serving and slow-token benchmarks' smoke runs."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import numpy as np
import pytest

from constrained import Grammar, TokenVocabulary, compile_grammar, fill_masks
from constrained.engine.batch import MaskBufferError
from constrained.engine.checked import CheckedMatcher
from constrained.errors import MatcherError
from constrained.masks import mask_words, unpack_mask

REPO = Path(__file__).resolve().parents[1]
JSON_LARK = (REPO / "grammars" / "json.lark").read_text()

TOY = [b"{", b"}", b'"', b"a", b'":', b" ", b"1", b"2", b",", b"[", b"]", b'"a"', b"true", b"}]", b"", b"\xc3", b"\xa9"]
TOY_EOS = 14
CHUNKY = [bytes([b]) for b in range(32, 127)] + [b"]]", b"],", b"]}", b"}]", b"[]", b"{}", b'"}', b"1]", b", ", b"[1",
                                                  b'"a"', b'": ', b""]
CHUNKY_EOS = len(CHUNKY) - 1
BYTES = [bytes([b]) for b in range(1, 256)] + [b""]   # 256 tokens: 8 words, the widest here


@pytest.fixture(scope="module")
def compiled():
    """Grammars of different kinds and vocabulary widths (1, 4 and 8 mask words)."""
    toy = TokenVocabulary.from_token_bytes(TOY, eos_ids=[TOY_EOS])
    chunky = TokenVocabulary.from_token_bytes(CHUNKY, eos_ids=[CHUNKY_EOS])
    byte_vocab = TokenVocabulary.from_token_bytes(BYTES, eos_ids=[255])
    schemas = [
        {"type": "object", "properties": {"a": {"type": "integer", "minimum": 0}, "b": {"type": "string", "maxLength": 3},
                                          "c": {"type": "array", "items": {"enum": [1, "a", True]}}},
         "required": ["a"]},
        {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 3}, "uniqueItems": True},  # checked
        {"oneOf": [{"type": "integer", "multipleOf": 2}, {"type": "integer", "multipleOf": 3}]},           # checked
    ]
    out = {"toy-json": compile_grammar(Grammar.from_lark(JSON_LARK), toy, cache_dir=None),
           "regex-bytes": compile_grammar(Grammar.from_regex(r"[a-c]{1,5}(x|yz)?[0-9]*"), byte_vocab, cache_dir=None),
           "json-bytes": compile_grammar(Grammar.from_lark(JSON_LARK), byte_vocab, cache_dir=None)}
    for i, s in enumerate(schemas):
        out[f"schema{i}"] = compile_grammar(Grammar.from_json_schema(s), chunky, cache_dir=None)
    return out


def _random_matcher(cg, rng: random.Random, max_steps: int = 12):
    """A matcher after a random masked walk (sometimes finished with EOS)."""
    m = cg.matcher()
    eos = set(cg.eos_ids)
    for _ in range(rng.randrange(max_steps + 1)):
        allowed = [int(t) for t in np.flatnonzero(unpack_mask(m.mask(), cg.vocab_size))]
        choices = [t for t in allowed if t not in eos]
        if m.is_accepting() and (not choices or rng.random() < 0.1):
            assert m.advance(next(iter(eos)))
            break
        if not choices:
            break
        assert m.advance(rng.choice(choices))
    return m


def _expected_row(m, width: int) -> np.ndarray:
    row = np.zeros(width, np.int32)
    if m.is_terminated():
        bits = np.zeros(width * 32, bool)
        bits[list(m.compiled.eos_ids)] = True
        return np.packbits(bits, bitorder="little").view(np.int32)
    mk = m.mask()
    row[: mk.size] = mk
    return row


@pytest.mark.parametrize("seed", range(6))
def test_batch_fill_equals_per_row_masks(compiled, seed: int) -> None:
    rng = random.Random(seed)
    names = sorted(compiled)
    matchers = [_random_matcher(compiled[rng.choice(names)], rng) for _ in range(24)]
    assert any(isinstance(m, CheckedMatcher) for m in matchers)
    widest = max(m.compiled.mask_words for m in matchers)
    for width in (widest, widest + 3):              # exact, and padded like a model's logits
        out = np.full((len(matchers), width), -1, np.int32)
        assert fill_masks(matchers, out) is out
        for i, m in enumerate(matchers):
            assert out[i].tolist() == _expected_row(m, width).tolist(), (i, m.compiled.grammar.source, m.tokens)
            v = m.compiled.vocab_size
            assert not unpack_mask(out[i], width * 32)[v:].any()   # no bit past the vocabulary


def test_rows_map_matchers_to_slots_and_leave_the_rest(compiled) -> None:
    rng = random.Random(7)
    cgs = [compiled["toy-json"], compiled["schema1"], compiled["regex-bytes"]]
    matchers = [_random_matcher(cg, rng) for cg in cgs]
    out = np.full((6, 9), 12345, np.int32)
    fill_masks(matchers, out, rows=[5, 0, 3])
    for r, m in zip([5, 0, 3], matchers):
        assert out[r].tolist() == _expected_row(m, 9).tolist()
    assert (out[[1, 2, 4]] == 12345).all()
    fill_masks([], out)           # nothing to do
    fill_masks(matchers[:1], out[2:4])   # a view of a bigger buffer is written in place
    assert out[2].tolist() == _expected_row(matchers[0], 9).tolist()


def test_finished_matcher_allows_only_eos(compiled) -> None:
    cg = compiled["toy-json"]
    m = cg.matcher()
    assert m.advance_many([12, TOY_EOS]) == 2 and m.is_terminated()     # "true", EOS
    out = np.full((1, 2), -1, np.int32)
    fill_masks([m], out)
    assert np.flatnonzero(unpack_mask(out[0], 64)).tolist() == [TOY_EOS]
    multi = TokenVocabulary.from_token_bytes([b"a", b"", b"b", b""] + [b"c"] * 28 + [b"", b"d"], eos_ids=[1, 3, 32])
    mm = compile_grammar(Grammar.from_regex("a"), multi, cache_dir=None).matcher()
    assert mm.advance_many([0, 32]) == 2
    out = np.zeros((1, 2), np.int32)
    fill_masks([mm], out)
    assert np.flatnonzero(unpack_mask(out[0], 64)).tolist() == [1, 3, 32]


def test_checked_matcher_rows_carry_the_value_checks(compiled) -> None:
    cg = compiled["schema1"]                       # integers 0..3, uniqueItems
    ids = {bytes(b): i for i, b in enumerate(CHUNKY)}
    m = cg.matcher()
    assert isinstance(m, CheckedMatcher)
    assert m.advance_many([ids[b"["], ids[b"1"], ids[b","], ids[b"1"]]) == 4    # "[1,1"
    out = np.zeros((2, cg.mask_words + 1), np.int32)
    fill_masks([cg.matcher(), m], out)
    assert out[1].tolist() == _expected_row(m, cg.mask_words + 1).tolist()
    allowed = unpack_mask(out[1], cg.vocab_size)
    assert not allowed[ids[b"]"]] and not allowed[ids[b"1]"]]   # the duplicate can't close
    assert allowed[ids[b","]] == m.allows(ids[b","])           # (a prefix check may refuse it already)
    assert not m.allows(ids[b"]"])


def test_torch_tensor_out(compiled) -> None:
    torch = pytest.importorskip("torch")
    rng = random.Random(3)
    matchers = [_random_matcher(compiled[n], rng) for n in ("schema0", "schema1", "json-bytes", "toy-json")]
    width = 10
    t = torch.full((5, width), -1, dtype=torch.int32)
    assert fill_masks(matchers, t, rows=[4, 3, 2, 1]) is t
    ref = np.full((5, width), -1, np.int32)
    fill_masks(matchers, ref, rows=[4, 3, 2, 1])
    assert t.numpy().tolist() == ref.tolist()
    with pytest.raises(MaskBufferError, match="torch.int32"):
        fill_masks(matchers, torch.zeros((4, width), dtype=torch.int64))
    with pytest.raises(MaskBufferError, match="CPU"):
        fill_masks(matchers, torch.zeros((4, width), dtype=torch.int32, device="meta"))


def test_wrong_out_or_rows_is_a_typed_error_and_writes_nothing(compiled) -> None:
    m1, m2 = compiled["toy-json"].matcher(), compiled["regex-bytes"].matcher()
    words = compiled["regex-bytes"].mask_words
    good = np.full((2, words), 7, np.int32)
    cases = [
        (np.zeros((2, words), np.int64), None, "dtype"),
        (np.zeros((2, words), np.uint32), None, "dtype"),
        (np.zeros(words, np.int32), None, "2-D"),
        (np.zeros((2, words - 1), np.int32), None, "words per row"),
        (np.zeros((1, words), np.int32), None, "rows for 2 matchers"),
        ([[0] * words] * 2, None, "numpy array or a CPU torch tensor"),
        (good, [0], "rows given"),
        (good, [0, 2], "out of range"),
        (good, [-1, 0], "out of range"),
        (good, [1, 1], "distinct"),
    ]
    for out, rows, message in cases:
        with pytest.raises(MaskBufferError, match=message):
            fill_masks([m1, m2], out, rows=rows)
    assert (good == 7).all()
    ro = np.zeros((2, words), np.int32)
    ro.setflags(write=False)
    with pytest.raises(MatcherError, match="read-only"):
        fill_masks([m1, m2], ro)
    assert issubclass(MaskBufferError, ValueError)
    assert mask_words(compiled["toy-json"].vocab_size) == compiled["toy-json"].mask_words


# ----------------------------------------------------------------------------- the serving benchmark

SMOKE_RECORDS = [
    {"id": "s1", "split": "smoke", "schema": {"type": "object", "properties": {"name": {"type": "string"},
                                                                             "age": {"type": "integer"}},
                                              "required": ["name"]},
     "tests": [{"valid": False, "data": {"age": 3}}, {"valid": True, "data": {"name": "Ada", "age": 36}}]},
    {"id": "s2", "split": "smoke", "schema": {"type": "array", "items": {"type": "number"}, "maxItems": 3},
     "tests": [{"valid": True, "data": [1.5, 2]}]},
]


def _serving_batch():
    bench = str(REPO / "benchmarks")
    if bench not in sys.path:
        sys.path.insert(0, bench)
    import serving_batch

    return serving_batch


@pytest.fixture(scope="module")
def llama3():
    from conftest import TOKENIZERS_DIR, load_vocab

    if not (TOKENIZERS_DIR / "llama3" / "tokenizer.json").is_file():
        pytest.skip("shared llama3 tokenizer not found")
    return TOKENIZERS_DIR / "llama3", load_vocab("llama3")


@pytest.mark.parametrize("with_llguidance", [True, False])
def test_serving_benchmark_smoke(llama3, tmp_path, monkeypatch, with_llguidance: bool) -> None:
    sb = _serving_batch()
    if with_llguidance and not sb.llguidance_available():
        pytest.skip("llguidance is not installed (optional: the benchmark runs ours only)")
    if not with_llguidance:
        monkeypatch.setattr(sb, "llguidance_available", lambda: False)
    path, vocab = llama3
    res = sb.run([2], batches=1, seed=1, vocab_path=path, vocab=vocab, records=SMOKE_RECORDS, warmup=False,
                 isolate=with_llguidance, second_pass=True)      # one run in forked processes, one in this one
    engines = ["ours", "llguidance"] if with_llguidance else ["ours"]
    assert res["meta"]["engines"] == engines
    assert res["screening"]["used"] == 2 and not res["screening"]["skipped"]
    for eng in engines:
        s = res["summary"]["2"][eng]
        assert s["requests"] == 2 and s["tokens"] > 10 and s["steps"] >= s["tokens"] // 2
        assert s["mask_refused_committed_token"] == s["commit_refused"] == s["compile_failed"] == 0
        assert s["step_us"]["p50_us"] > 0 and s["compile_all_s"] > 0
        # the second pass steps the same tokens (checked: every token allowed and accepted)
        assert s["second_step_us"]["tokens"] == s["steps"]
    assert bool(res["ratios"]) == with_llguidance
    if not with_llguidance:
        assert "not installed" in res["meta"]["notes"][0]
    paths = sb.write_reports(res, tmp_path, with_plot=with_llguidance)
    assert [p.name for p in paths] == ["serving_batch.json", "serving_batch.md"] + (
        ["serving_batch.png"] if with_llguidance else [])
    md = (tmp_path / "serving_batch.md").read_text()
    assert "| 2 | 2 /" in md and ("×" in md) == with_llguidance and "Schemas seen before" in md


def test_slow_tokens_benchmark_attributes_the_slow_tokens(llama3, tmp_path) -> None:
    """`benchmarks/slow_tokens.py` on two small schemas, every token counted slow: the timers
    reach the engine's parts (fresh schemas build parser nodes), the shares add up to at
    most the whole, and the reports are written."""
    _serving_batch()                            # (puts benchmarks/ on the path)
    import slow_tokens

    data = tmp_path / "records.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in SMOKE_RECORDS))
    path, _ = llama3
    res = slow_tokens.main(["--every", "1", "--no-llguidance", "--threshold-us", "0", "--data", str(data),
                            "--vocab", str(path), "--out", str(tmp_path / "out")])
    assert res["meta"]["schemas"] == 2
    assert res["tokens"] > 10 and res["slow_tokens"] == res["tokens"]
    assert res["slow_in_first_instance"] == res["tokens"]         # one valid instance each
    shares = res["slow_time_shares"]
    assert shares["Earley sets of new parser nodes"] > 0
    assert 0 < sum(shares.values()) <= 1.0
    assert res["llguidance_us"] is None
    md = (tmp_path / "out" / "slow_tokens.md").read_text()
    assert "| Earley sets of new parser nodes |" in md and (tmp_path / "out" / "slow_tokens.json").is_file()


def test_parser_replay_benchmark_rebuilds_the_recorded_parsers(llama3, tmp_path) -> None:
    """`benchmarks/parser_replay.py` on two small schemas: the recorded parser calls
    rebuild parsers with the recorded node counts (checked by every replay round); the
    digest is the same for two replays and for the parser without its one-item fast
    paths (the general closure: the same nodes), and differs for a parser whose nodes
    expect other terminals."""
    _serving_batch()                            # (puts benchmarks/ on the path)
    import pickle

    import parser_replay

    from constrained.engine.earley import EarleyParser

    data = tmp_path / "records.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in SMOKE_RECORDS))
    path, _ = llama3
    calls = tmp_path / "calls.pkl"
    common = ["--calls", str(calls), "--data", str(data), "--vocab", str(path)]
    rec = parser_replay.main(["record", "--every", "1", *common])
    assert rec["schemas"] == 2 and rec["calls"] > 10 and rec["nodes"] > 5
    first = parser_replay.main(["replay", "--repeat", "2", *common])
    assert first["nodes"] == rec["nodes"] and first["seconds"] > 0
    assert parser_replay.main(["replay", "--repeat", "1", *common])["digest"] == first["digest"]
    recorded = pickle.loads(calls.read_bytes())
    close = EarleyParser._close

    def general_only(self, node_id, kernel_items):
        single, completion = EarleyParser._close_single, EarleyParser._completion_single
        EarleyParser._close_single = EarleyParser._completion_single = lambda *a: None
        try:
            return close(self, node_id, kernel_items)
        finally:
            EarleyParser._close_single, EarleyParser._completion_single = single, completion

    def one_terminal_less(self, node_id, kernel_items):
        fields = close(self, node_id, kernel_items)
        return (*fields[:2], fields[2][1:], *fields[3:])

    for version, same in ((general_only, True), (one_terminal_less, False)):
        EarleyParser._close = version
        try:
            assert (parser_replay.digest(recorded) == first["digest"]) == same, version.__name__
        finally:
            EarleyParser._close = close
