"""Tests of `constrained.vocabulary.TokenVocabulary` (offline)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import unicodedata
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from constrained.errors import VocabularyError
from constrained.vocabulary import (
    END_MARKERS,
    TokenVocabulary,
    bytes_to_unicode,
    hf_encoder,
    unicode_to_bytes,
)

REPO = Path(__file__).resolve().parents[1]
REAL = ["llama3", "qwen3", "smollm2"]

# No example database: keeps the working tree clean and runs reproducible.
PROPS = settings(max_examples=100, deadline=None, database=None,
                 suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)
json_texts = st.builds(
    lambda v, indent, ascii_: json.dumps(v, indent=indent, ensure_ascii=ascii_),
    json_values, st.sampled_from([None, 2, "\t"]), st.booleans(),
)
texts = st.one_of(
    st.text(max_size=60),                                                  # any code point
    st.text(st.characters(codec="utf-8", categories=["Cc", "Zs", "So", "Lo", "Nd", "P"]),
            max_size=60),                                                  # controls, emoji, CJK
    st.text(st.sampled_from(" \t\n\r{}[]\":,0123456789abcé日本🤖\x00"), max_size=60),
    json_texts,
)
EXAMPLES = [
    "", " ", "  \n\n\t ", "Hello, world!", '{"a": [1, 2.5e-3, true, null]}',
    "日本語のテキスト", "🤖🎉👍🏽 emoji", "\x00\x01\x1f\x7f", "e\u0301", "Ω≈ç√∫", "   x",
    "def f(x):\n    return x ** 2\n", "1234567890123", "\ufeffBOM", "a\r\nb",
]


def _join(vocab: TokenVocabulary, ids: list[int]) -> bytes:
    return b"".join(vocab.token_bytes[i] for i in ids)


@pytest.fixture(scope="session", params=REAL)
def real(request: pytest.FixtureRequest) -> tuple[str, Any, TokenVocabulary]:
    """(name, HF tokenizer, vocabulary) for each real tokenizer."""
    name = request.param
    tok = request.getfixturevalue(f"{name}_tokenizer")
    return name, tok, request.getfixturevalue(f"{name}_vocab")


def _single_bytes(vocab: TokenVocabulary) -> frozenset[int]:
    return frozenset(b[0] for b in vocab.token_bytes if len(b) == 1)


def _expected(name: str, vocab: TokenVocabulary, text: str) -> bytes:
    """What the tokenizer's tokens spell for ``text``.

    Qwen normalizes to NFC.  Byte-level BPE without an unknown token drops bytes that
    have no single-byte token: SmolLM2 lacks a few (e.g. 0xF1, 0x04), Llama 3 and
    Qwen have all 256.
    """
    data = unicodedata.normalize("NFC", text).encode() if name == "qwen3" else text.encode()
    covered = _single_bytes(vocab)
    return data if len(covered) == 256 else bytes(b for b in data if b in covered)


# ---------------------------------------------------------------------- byte table

def test_bytes_to_unicode_table() -> None:
    table = bytes_to_unicode()
    assert sorted(table) == list(range(256))
    assert len(set(table.values())) == 256
    assert table[ord("A")] == "A" and table[ord(" ")] == "Ġ" and table[ord("\n")] == "Ċ"
    assert table[0] == "Ā" and table[0xAD] == "Ń" and table[0x7F] == "ġ"
    inv = unicode_to_bytes()
    assert all(inv[c] == b for b, c in table.items())


# ---------------------------------------------------------------------- real tokenizers

def test_from_hf_matches_cached_fixture(real: tuple[str, Any, TokenVocabulary]) -> None:
    name, tok, vocab = real
    built = TokenVocabulary.from_hf(tok)
    assert built == vocab
    assert built.content_hash() == vocab.content_hash()
    assert built.kind == "byte_level"
    assert len(built) == len(tok)


def test_llama3_build_is_fast(llama3_tokenizer: Any) -> None:
    # CPU time, not wall time: other processes may share the machine
    t0 = time.process_time()
    vocab = TokenVocabulary.from_hf(llama3_tokenizer)
    vocab.content_hash()
    assert time.process_time() - t0 < 2.0
    assert len(vocab) == 128_256


@PROPS
@given(text=texts)
@example(text="a<|im_end|>b<|eot_id|>")
def test_round_trip_hf_encoding(real: tuple[str, Any, TokenVocabulary], text: str) -> None:
    name, tok, vocab = real
    want = _expected(name, vocab, text)
    assert _join(vocab, vocab.encode(text)) == want
    # the tokenizer itself turns special-token text ("<|eot_id|>") into special ids
    if not any(content in text for content in vocab.special_tokens):
        assert _join(vocab, tok.encode(text, add_special_tokens=False)) == want


@pytest.mark.parametrize("text", EXAMPLES)
def test_round_trip_examples(real: tuple[str, Any, TokenVocabulary], text: str) -> None:
    name, tok, vocab = real
    ids = tok.encode(text, add_special_tokens=False)
    assert _join(vocab, ids) == _expected(name, vocab, text)
    assert vocab.encode(text) == ids


def test_special_token_text_is_plain_text(real: tuple[str, Any, TokenVocabulary]) -> None:
    """`encode` never produces special ids: special-token text is split as text."""
    name, tok, vocab = real
    for content, i in vocab.special_tokens.items():
        ids = vocab.encode(f"a{content}b")
        assert not set(ids) & vocab.special_ids, (content, ids)
        assert _join(vocab, ids) == f"a{content}b".encode()
    assert vocab.special_tokens  # every real tokenizer has some


def test_specials_have_no_bytes(real: tuple[str, Any, TokenVocabulary]) -> None:
    name, tok, vocab = real
    expected = {i for i, t in tok.added_tokens_decoder.items() if t.special} | set(tok.all_special_ids)
    assert expected <= vocab.special_ids
    assert vocab.special_ids == {i for i, b in enumerate(vocab.token_bytes) if not b}
    assert set(vocab.eos_ids) <= vocab.special_ids
    assert all(vocab.token_bytes[i] == b"" for i in vocab.special_ids)
    assert list(vocab.eos_ids) == sorted(set(vocab.eos_ids))
    covered = _single_bytes(vocab)
    if name == "smollm2":  # its BPE never saw a few bytes: they are unrepresentable
        assert covered >= set(range(0x20, 0x7F)) | {0x09, 0x0A, 0x0D}
        assert len(covered) == 235
    else:
        assert covered == set(range(256))


def test_eos_sets(llama3_vocab: TokenVocabulary, qwen3_vocab: TokenVocabulary,
                  smollm2_vocab: TokenVocabulary, smollm2_tokenizer: Any) -> None:
    assert {128001, 128009} <= set(llama3_vocab.eos_ids)
    assert {151643, 151645} <= set(qwen3_vocab.eos_ids)
    ids = smollm2_tokenizer.convert_tokens_to_ids(["<|im_end|>", "<|endoftext|>"])
    assert set(ids) <= set(smollm2_vocab.eos_ids)
    assert smollm2_vocab.special_tokens["<|im_end|>"] == ids[0]
    for v in (llama3_vocab, qwen3_vocab, smollm2_vocab):
        assert all(v.special_tokens.get(m) in v.eos_ids for m in END_MARKERS if m in v.special_tokens)


def test_eos_override(llama3_tokenizer: Any) -> None:
    v = TokenVocabulary.from_hf(llama3_tokenizer, eos_ids=[128009, 128009])
    assert v.eos_ids == (128009,)
    with pytest.raises(VocabularyError):
        TokenVocabulary.from_hf(llama3_tokenizer, eos_ids=[10**6])


def test_known_tokens(llama3_tokenizer: Any, llama3_vocab: TokenVocabulary,
                      qwen3_tokenizer: Any, qwen3_vocab: TokenVocabulary) -> None:
    for tok, vocab in ((llama3_tokenizer, llama3_vocab), (qwen3_tokenizer, qwen3_vocab)):
        ids = tok.convert_tokens_to_ids(["Ġhello", "Ċ", "ĉ", "Ā", "!"])
        assert [vocab.token_bytes[i] for i in ids] == [b" hello", b"\n", b"\t", b"\x00", b"!"]
    # partial UTF-8 tokens exist (the four bytes of an emoji are split)
    assert any(b and b[-1] >= 0xC0 for b in llama3_vocab.token_bytes)
    assert llama3_vocab.token_bytes[128000] == b"" and llama3_vocab.token_bytes[128009] == b""


def test_content_hash_distinct_and_stable(llama3_vocab: TokenVocabulary,
                                          qwen3_vocab: TokenVocabulary,
                                          smollm2_vocab: TokenVocabulary) -> None:
    hashes = {v.content_hash() for v in (llama3_vocab, qwen3_vocab, smollm2_vocab)}
    assert len(hashes) == 3
    assert all(len(h) == 64 and int(h, 16) >= 0 for h in hashes)
    # another process, another hash seed, same digest
    code = ("import sys; from constrained.vocabulary import TokenVocabulary as T; "
            "print(T.load(sys.argv[1]).content_hash())")
    for vocab in (llama3_vocab, qwen3_vocab):
        path = _tmp_save(vocab)
        out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True,
                             text=True, check=True, cwd=REPO,
                             env={**os.environ, "PYTHONHASHSEED": "12345"})
        assert out.stdout.strip() == vocab.content_hash()


def _tmp_save(vocab: TokenVocabulary) -> Path:
    import tempfile
    path = Path(tempfile.mkdtemp(prefix="vocab-")) / "v.npz"
    vocab.save(path)
    return path


def test_content_hash_sensitivity() -> None:
    base = TokenVocabulary.from_token_bytes([b"", b"ab", b"c"], eos_ids=[0])
    variants = [
        TokenVocabulary.from_token_bytes([b"", b"a", b"bc"], eos_ids=[0]),   # same concatenation
        TokenVocabulary.from_token_bytes([b"", b"ab", b"c"]),                # no eos
        TokenVocabulary.from_token_bytes([b"", b"ab", b"c"], special_ids=[0]),
        TokenVocabulary.from_token_bytes([b"", b"ab", b"c", b""], eos_ids=[0]),
        TokenVocabulary.from_token_bytes([b"", b"ab", b"d"], eos_ids=[0]),
    ]
    hashes = [v.content_hash() for v in variants]
    # special_ids=[0] without eos equals "no eos" (b"" ids are special anyway)
    assert hashes[1] == hashes[2]
    assert len({base.content_hash(), *hashes}) == 5
    assert base.content_hash() == TokenVocabulary.from_token_bytes(
        [b"", b"ab", b"c"], eos_ids=[0]).content_hash()


def test_save_load_round_trip(tmp_path: Path, real: tuple[str, Any, TokenVocabulary]) -> None:
    name, tok, vocab = real
    path = tmp_path / f"{name}.npz"
    vocab.save(path)
    t0 = time.process_time()
    loaded = TokenVocabulary.load(path)
    assert time.process_time() - t0 < 1.0
    assert loaded == vocab and loaded.content_hash() == vocab.content_hash()
    assert loaded.kind == vocab.kind and dict(loaded.special_tokens) == dict(vocab.special_tokens)
    assert np.array_equal(loaded.byte_matrix, vocab.byte_matrix)
    with pytest.raises(VocabularyError, match="encode="):
        loaded.encode("hello")
    with_enc = TokenVocabulary.load(path, encode=hf_encoder(tok))
    assert with_enc.encode("hello world") == tok.encode("hello world", add_special_tokens=False)


def test_load_rejects_bad_files(tmp_path: Path) -> None:
    with pytest.raises(VocabularyError):
        TokenVocabulary.load(tmp_path / "missing.npz")
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(VocabularyError):
        TokenVocabulary.load(tmp_path / "junk.npz")
    np.savez(tmp_path / "other.npz", x=np.zeros(3))
    with pytest.raises(VocabularyError):
        TokenVocabulary.load(tmp_path / "other.npz")
    v = TokenVocabulary.from_token_bytes([b"a", b"b"])
    v.save(tmp_path / "v.npz")
    with np.load(tmp_path / "v.npz") as z:
        arrays = dict(z)
    arrays["flat"] = np.frombuffer(b"ax", dtype=np.uint8)
    np.savez(tmp_path / "tampered.npz", **arrays)
    with pytest.raises(VocabularyError, match="hash"):
        TokenVocabulary.load(tmp_path / "tampered.npz")


def test_byte_matrix_consistent(real: tuple[str, Any, TokenVocabulary]) -> None:
    _, _, vocab = real
    mat, lengths = vocab.byte_matrix, vocab.lengths
    assert mat.dtype == np.uint8 and lengths.dtype == np.int32
    assert mat.shape == (len(vocab), int(lengths.max())) and lengths.shape == (len(vocab),)
    assert lengths.tolist() == [len(b) for b in vocab.token_bytes]
    inside = np.arange(mat.shape[1])[None, :] < lengths[:, None]
    assert mat[inside].tobytes() == b"".join(vocab.token_bytes)
    assert not mat[~inside].any()
    assert vocab.byte_matrix is mat and vocab.lengths is lengths   # cached
    with pytest.raises(ValueError):
        mat[0, 0] = 1
    with pytest.raises(ValueError):
        lengths[0] = 1


# ---------------------------------------------------------------------- from_token_bytes

def test_from_token_bytes_basics() -> None:
    v = TokenVocabulary.from_token_bytes([b"<s>", b"a", b"b", b"ab", b"", b"</s>"],
                                         eos_ids=[5, 5], special_ids=[0])
    assert len(v) == 6
    assert v.token_bytes == (b"", b"a", b"b", b"ab", b"", b"")
    assert v.eos_ids == (5,) and v.special_ids == {0, 4, 5}
    assert v.encode("abba") == [3, 2, 1] and v.encode("") == []
    assert v.byte_matrix.tolist() == [[0, 0], [97, 0], [98, 0], [97, 98], [0, 0], [0, 0]]
    with pytest.raises(VocabularyError, match="0x63"):
        v.encode("abc")
    with pytest.raises(AttributeError):
        v.token_bytes = ()  # type: ignore[misc]
    assert "6 ids" in repr(v)


def test_from_token_bytes_greedy_is_longest_match_and_round_trips() -> None:
    tb = [bytes([b]) for b in range(256)] + ["é".encode(), b"ab", b"abc", b"  ", "日本".encode()]
    v = TokenVocabulary.from_token_bytes(tb)
    assert v.encode("abcab") == [258, 257]
    assert v.encode("aé  ") == [97, 256, 259]
    assert v.encode("日本") == [260]


@settings(max_examples=100, deadline=None, database=None)
@given(text=texts)
def test_greedy_round_trip(text: str) -> None:
    tb = [bytes([b]) for b in range(256)] + [b"ab", b'{"', b'": ', "日本".encode(), b"  "]
    v = TokenVocabulary.from_token_bytes(tb)
    assert _join(v, v.encode(text)) == text.encode()


def test_from_token_bytes_custom_encode_and_validation() -> None:
    v = TokenVocabulary.from_token_bytes([b"x", b"y"], encode=lambda s: [0] * len(s))
    assert v.encode("xyz") == [0, 0, 0]
    with pytest.raises(VocabularyError):
        TokenVocabulary.from_token_bytes([b"x"], eos_ids=[1])
    with pytest.raises(VocabularyError):
        TokenVocabulary.from_token_bytes([b"x"], special_ids=[-1])
    with pytest.raises(VocabularyError):
        TokenVocabulary.from_token_bytes(["x"])  # type: ignore[list-item]
    empty = TokenVocabulary.from_token_bytes([])
    assert len(empty) == 0 and empty.byte_matrix.shape == (0, 0) and empty.encode("") == []


def test_greedy_vocab_save_load_keeps_greedy_encode(tmp_path: Path) -> None:
    v = TokenVocabulary.from_token_bytes([b"", b"a", b"aa"], eos_ids=[0])
    v.save(tmp_path / "v.npz")
    w = TokenVocabulary.load(tmp_path / "v.npz")
    assert w == v and w.encode("aaa") == [2, 1]


# ---------------------------------------------------------------------- offline tokenizers

def _spm_tokenizer(variant: str) -> Any:
    """A tiny SentencePiece-style tokenizer with <0x00>..<0xFF> byte fallback.

    ``legacy``: Llama-2 style (normalizer Prepend("▁") + Replace(" ", "▁"));
    ``metaspace``: BPE + Metaspace(prepend_scheme="never");
    ``unigram``: Unigram + Metaspace(prepend_scheme="first").
    """
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    for c in "▁abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,!?{}[]:\"'-":
        vocab.setdefault(c, len(vocab))
    merges = []
    for word in ["▁the", "▁hello", "▁world", "ing", "▁a", '▁{"', '":']:
        cur = word[0]
        for ch in word[1:]:
            if cur + ch not in vocab:
                merges.append((cur, ch))
                vocab[cur + ch] = len(vocab)
            cur += ch
    if variant == "unigram":
        pieces = [(p, -1.0 / len(p) - i / 1000) for p, i in vocab.items()]
        tk = Tokenizer(models.Unigram(pieces, unk_id=0, byte_fallback=True))
    else:
        tk = Tokenizer(models.BPE(vocab, merges, unk_token="<unk>", byte_fallback=True,
                                  fuse_unk=True))
    decoder = [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()]
    if variant == "legacy":
        tk.normalizer = normalizers.Sequence([normalizers.Prepend("▁"),
                                              normalizers.Replace(" ", "▁")])
        tk.decoder = decoders.Sequence([*decoder, decoders.Strip(" ", 1, 0)])
    else:
        scheme = "first" if variant == "unigram" else "never"
        tk.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme=scheme)
        tk.decoder = decoders.Sequence(decoder)
    tk.add_special_tokens([AddedToken(t, special=True) for t in ("<unk>", "<s>", "</s>")])
    tk.add_tokens([AddedToken("<custom>", special=False, normalized=False)])
    return PreTrainedTokenizerFast(tokenizer_object=tk, unk_token="<unk>", bos_token="<s>",
                                   eos_token="</s>")


SPM_VARIANTS = ["legacy", "metaspace", "unigram"]


@pytest.fixture(scope="module", params=SPM_VARIANTS)
def spm(request: pytest.FixtureRequest) -> tuple[str, Any, TokenVocabulary]:
    tok = _spm_tokenizer(request.param)
    return request.param, tok, TokenVocabulary.from_hf(tok)


def test_sentencepiece_pieces(spm: tuple[str, Any, TokenVocabulary]) -> None:
    _, tok, v = spm
    assert v.kind == "sentencepiece"
    vocab = tok.get_vocab()
    assert v.token_bytes[vocab["▁"]] == b" "
    assert v.token_bytes[vocab["▁hello"]] == b" hello"
    assert v.token_bytes[vocab["ing"]] == b"ing"
    assert all(v.token_bytes[vocab[f"<0x{b:02X}>"]] == bytes([b]) for b in range(256))
    assert v.token_bytes[vocab["<custom>"]] == b"<custom>"
    assert v.special_ids == {0, 1, 2} and v.eos_ids == (2,)
    assert len(v) == len(tok)


def _spm_expected(variant: str, text: str) -> bytes:
    """SentencePiece prepends "▁" to the first word unless configured not to.

    A literal "▁" in the text is indistinguishable from a space (a property of
    SentencePiece itself).
    """
    text = text.replace("▁", " ")
    if variant == "metaspace" or not text or (variant == "unigram" and text.startswith(" ")):
        return text.encode()
    return b" " + text.encode()


@settings(max_examples=60, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=texts)
@example(text="the hello world é 日本 🤖\n\t\x00 {\"a\": 1}!")
def test_sentencepiece_round_trip(spm: tuple[str, Any, TokenVocabulary], text: str) -> None:
    variant, tok, v = spm
    # added-token text splits the input into separately normalized segments
    assume(not any(t in text for t in ("<s>", "</s>", "<unk>", "<custom>")))
    ids = tok.encode(text, add_special_tokens=False)
    assert _join(v, ids) == _spm_expected(variant, text)
    assert v.encode(text) == tok.encode(text, add_special_tokens=False, split_special_tokens=True)


def test_sentencepiece_non_special_added_token(spm: tuple[str, Any, TokenVocabulary]) -> None:
    variant, tok, v = spm
    ids = v.encode("x<custom>y")
    assert tok.get_vocab()["<custom>"] in ids
    # Llama-2 "legacy" normalization prepends "▁" to every segment around an added token
    want = {"legacy": b" x<custom> y", "metaspace": b"x<custom>y", "unigram": b" x<custom>y"}
    assert _join(v, ids) == want[variant]


def test_sentencepiece_byte_fallback_used(spm: tuple[str, Any, TokenVocabulary]) -> None:
    variant, tok, v = spm
    ids = v.encode("é🤖")
    pieces = tok.convert_ids_to_tokens(ids)
    assert "<0xC3>" in pieces and "<0xF0>" in pieces
    assert _join(v, ids) == _spm_expected(variant, "é🤖")


def _bare_tokenizer(model: Any, **parts: Any) -> Any:
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    tk = Tokenizer(model)
    for name, value in parts.items():
        setattr(tk, name, value)
    return PreTrainedTokenizerFast(tokenizer_object=tk)


def test_wordpiece_is_unsupported() -> None:
    from tokenizers import decoders, models, normalizers, pre_tokenizers

    wp = models.WordPiece({"[UNK]": 0, "[CLS]": 1, "hello": 2, "##s": 3}, unk_token="[UNK]")
    tok = _bare_tokenizer(wp, normalizer=normalizers.BertNormalizer(),
                          pre_tokenizer=pre_tokenizers.BertPreTokenizer(),
                          decoder=decoders.WordPiece())
    with pytest.raises(VocabularyError, match="WordPiece"):
        TokenVocabulary.from_hf(tok)


def test_subword_prefix_bpe_is_unsupported() -> None:
    from tokenizers import models

    bpe = models.BPE({"a": 0, "##b": 1}, [], continuing_subword_prefix="##")
    with pytest.raises(VocabularyError, match="continuing_subword_prefix"):
        TokenVocabulary.from_hf(_bare_tokenizer(bpe))


def test_detection_falls_back_to_token_alphabet() -> None:
    from tokenizers import models

    byte_level = models.BPE({"a": 0, "Ġ": 1, "Ġa": 2, "Ċ": 3}, [("Ġ", "a")])
    v = TokenVocabulary.from_hf(_bare_tokenizer(byte_level))
    assert v.kind == "byte_level" and v.token_bytes == (b"a", b" ", b" a", b"\n")

    plain = models.BPE({"a": 0, "b": 1, "ab": 2}, [("a", "b")])
    with pytest.raises(VocabularyError, match="model=BPE"):
        TokenVocabulary.from_hf(_bare_tokenizer(plain))
