"""`TokenVocabulary`: the map from token id to the exact bytes the token stands for.

Everything downstream (lexer automata, token tables, masks) works on bytes, so the
vocabulary is the one place that knows how a tokenizer spells text:

* **Byte-level BPE** (GPT-2, Llama 3, Qwen, SmolLM2): token strings are bytes
  written through GPT-2's ``bytes_to_unicode`` alphabet; the inverse table gives
  the bytes back.  A token may be an incomplete UTF-8 sequence.  Not every
  vocabulary has all 256 single bytes (SmolLM2 lacks 21, e.g. ``0xF1``, ``0x04``):
  text containing a missing byte cannot be spelled with its tokens.
* **SentencePiece-style** (Llama 2, Mistral, T5-like): ``▁`` (U+2581) stands for a
  space, ``<0xNN>`` byte-fallback pieces for the single byte ``NN``, and every other
  piece for its UTF-8 encoding.  The bytes are the piece's bytes: SentencePiece
  often prepends a space to the first word of a text (``"Hi"`` -> ``"▁Hi"``), so
  ``b"".join(bytes of encode(s))`` may be ``b" " + s.encode()``.  Dropping that
  space is the decoder's business, not the vocabulary's.  (A literal ``▁`` in a
  text comes back as a space: SentencePiece cannot tell them apart.)
* **Special / control tokens** (every added token marked special, every id in
  ``all_special_ids``) and ids no token uses get ``b""``; they are in
  ``special_ids``.  Invariant: ``i in special_ids`` iff ``token_bytes[i] == b""``.

Reading a Hugging Face tokenizer (which of the two spellings, each piece's bytes, the
EOS set) is `constrained.hf_vocabulary`; `TokenVocabulary.from_hf` calls it.

Example:
    >>> vocab = TokenVocabulary.from_token_bytes([b"", b"a", b"b", b"ab"], eos_ids=[0])
    >>> len(vocab), vocab.eos_ids, sorted(vocab.special_ids)
    (4, (0,), [0])
    >>> vocab.encode("abba")          # greedy longest match (no tokenizer given)
    [3, 2, 1]
    >>> vocab.lengths.tolist()
    [0, 1, 1, 2]
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import cached_property
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from constrained.errors import VocabularyError

# Reading a Hugging Face tokenizer is its own module; its public names stay importable
# from here.
from constrained.hf_vocabulary import (
    END_MARKERS,
    bytes_to_unicode,
    hf_encoder,
    read_hf_tokenizer,
    unicode_to_bytes,
)

__all__ = [
    "END_MARKERS",
    "TokenVocabulary",
    "bytes_to_unicode",
    "hf_encoder",
    "unicode_to_bytes",
]

_FORMAT = "constrained.TokenVocabulary/1"


class TokenVocabulary:
    """Token id -> exact bytes, with the EOS and special-token sets.

    Immutable.  Build it with `from_hf`, `from_token_bytes` or `load`.

    Attributes:
        token_bytes: bytes of each id; ``b""`` for special/control tokens and ids
            no token uses.
        eos_ids: every end-of-sequence id, sorted, deduplicated (a subset of
            ``special_ids``).
        special_ids: ids that grammar text never produces; exactly the ids whose
            bytes are ``b""``.
        special_tokens: read-only mapping special token content -> id (for
            grammars that name a special token); empty when unknown.

    Example:
        >>> v = TokenVocabulary.from_token_bytes([b"<eos>", b"x", b"y"], eos_ids=[0])
        >>> v.token_bytes, v.eos_ids
        ((b'', b'x', b'y'), (0,))
        >>> v.byte_matrix.shape, v.lengths.tolist()
        ((3, 1), [0, 1, 1])
    """

    _READ_ONLY = frozenset({"token_bytes", "eos_ids", "special_ids", "special_tokens", "kind"})

    token_bytes: tuple[bytes, ...]
    eos_ids: tuple[int, ...]
    special_ids: frozenset[int]
    special_tokens: Mapping[str, int]
    kind: str

    def __init__(self, token_bytes: Sequence[bytes], *, eos_ids: Iterable[int] = (),
                 special_ids: Iterable[int] = (), special_tokens: Mapping[str, int] | None = None,
                 encode: Callable[[str], list[int]] | None = None, encoder_kind: str = "greedy",
                 kind: str = "bytes") -> None:
        """Low-level constructor; prefer `from_hf`, `from_token_bytes` or `load`."""
        tb = list(token_bytes)
        n = len(tb)
        for i, b in enumerate(tb):
            if not isinstance(b, (bytes, bytearray, memoryview)):
                raise VocabularyError(f"token {i}: expected bytes, got {type(b).__name__}")
        eos = sorted({self._check_id(i, n, "eos") for i in eos_ids})
        special = {self._check_id(i, n, "special") for i in special_ids}
        special.update(eos)
        for i in special:
            tb[i] = b""
        tb = [bytes(b) for b in tb]
        special.update(i for i, b in enumerate(tb) if not b)
        self.token_bytes = tuple(tb)
        self.eos_ids = tuple(eos)
        self.special_ids = frozenset(special)
        self.special_tokens = MappingProxyType(
            {str(k): self._check_id(v, n, "special token") for k, v in (special_tokens or {}).items()})
        self.kind = kind
        self._encode = encode
        self._encoder_kind = encoder_kind if encode is None else "external"

    @staticmethod
    def _check_id(i: Any, n: int, what: str) -> int:
        try:
            j = int(i)
        except (TypeError, ValueError):
            raise VocabularyError(f"{what} id {i!r} is not an integer") from None
        if j != i or not 0 <= j < n:
            raise VocabularyError(f"{what} id {i!r} is outside the vocabulary (0..{n - 1})")
        return j

    # ------------------------------------------------------------------ builders

    @classmethod
    def from_token_bytes(cls, token_bytes: Sequence[bytes], *, eos_ids: Iterable[int] = (),
                         special_ids: Iterable[int] = (),
                         encode: Callable[[str], list[int]] | None = None) -> TokenVocabulary:
        """A vocabulary from explicit per-id bytes.

        EOS ids are special; special ids get ``b""`` whatever bytes were given, and
        ids given ``b""`` become special.  Without ``encode``, `encode` is a greedy
        longest match over the token bytes (not a tokenizer's canonical BPE).

        Example:
            >>> v = TokenVocabulary.from_token_bytes([b"a", b"aa", b"</s>"], eos_ids=[2])
            >>> v.encode("aaa"), v.token_bytes[2]
            ([1, 0], b'')
        """
        return cls(token_bytes, eos_ids=eos_ids, special_ids=special_ids, encode=encode)

    @classmethod
    def from_hf(cls, tokenizer: Any, *, eos_ids: Iterable[int] | None = None) -> TokenVocabulary:
        """Build from a Hugging Face tokenizer (fast or slow).

        Detects byte-level BPE or SentencePiece-style pieces from the backend
        tokenizer's decoder / pre-tokenizer / normalizer; if those say nothing,
        from the token strings themselves.  Raises `VocabularyError` for anything
        else (WordPiece, unknown alphabets), naming what it found.

        EOS set: ``tokenizer.eos_token_id`` (an int or a list) plus every special
        token whose content is in `END_MARKERS`; ``eos_ids=`` replaces all of it.
        ``len(vocab)`` is the tokenizer's id count including added tokens; padding
        a model's logits beyond that is the caller's business.

        Example:
            >>> from transformers import AutoTokenizer          # doctest: +SKIP
            >>> tok = AutoTokenizer.from_pretrained("/work/shared/data/tokenizers/llama3")  # doctest: +SKIP
            >>> v = TokenVocabulary.from_hf(tok)                # doctest: +SKIP
            >>> v.token_bytes[tok.convert_tokens_to_ids("Ġhello")], 128009 in v.eos_ids  # doctest: +SKIP
            (b' hello', True)
        """
        parts = read_hf_tokenizer(tokenizer, eos_ids=eos_ids)
        return cls(parts.token_bytes, eos_ids=parts.eos_ids, special_ids=parts.special_ids,
                   special_tokens=parts.special_tokens, encode=parts.encode, kind=parts.kind)

    # ------------------------------------------------------------------ basics

    def __len__(self) -> int:
        """Number of ids (max id + 1)."""
        return len(self.token_bytes)

    def __repr__(self) -> str:
        return (f"TokenVocabulary({len(self)} ids, kind={self.kind}, eos={list(self.eos_ids)}, "
                f"{len(self.special_ids)} special, hash={self.content_hash()[:12]})")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TokenVocabulary):
            return NotImplemented
        return (self.token_bytes == other.token_bytes and self.eos_ids == other.eos_ids
                and self.special_ids == other.special_ids)

    def __hash__(self) -> int:
        return hash(self.content_hash())

    def __setattr__(self, name: str, value: Any) -> None:
        if name in TokenVocabulary._READ_ONLY and name in self.__dict__:
            raise AttributeError(f"TokenVocabulary.{name} is read-only")
        object.__setattr__(self, name, value)

    # ------------------------------------------------------------------ encoding

    def encode(self, text: str) -> list[int]:
        """Canonical tokenization of ``text`` with no special tokens added.

        From a HF tokenizer: its own encoding (``add_special_tokens=False``; special
        token text is split as ordinary text).  Its normalizer applies (Qwen: NFC),
        and SentencePiece may prepend a space.  Built by `from_token_bytes` without
        ``encode``: greedy longest match over the token bytes of non-special ids
        (lowest id among equal bytes); raises `VocabularyError` if a byte has no
        token.  Loaded from a file saved from a tokenizer: pass ``encode=`` to `load`.

        Example:
            >>> TokenVocabulary.from_token_bytes([b"a", b"b", b"ab"]).encode("aab")
            [0, 2]
        """
        if self._encode is not None:
            return list(self._encode(text))
        if self._encoder_kind != "greedy":
            raise VocabularyError(
                "this vocabulary was saved from a tokenizer; its canonical encoding needs "
                "the tokenizer: TokenVocabulary.load(path, encode=hf_encoder(tokenizer))")
        return self._greedy_encode(text.encode("utf-8"))

    @cached_property
    def _greedy_table(self) -> tuple[dict[bytes, int], int]:
        table: dict[bytes, int] = {}
        for i, b in enumerate(self.token_bytes):
            if b:
                table.setdefault(b, i)
        return table, max((len(b) for b in table), default=0)

    def encode_bytes(self, data: bytes) -> list[int]:
        """Tokens spelling ``data`` exactly by greedy longest match over the token bytes
        (any bytes, not only text; `VocabularyError` if a byte has no token).

        Example:
            >>> TokenVocabulary.from_token_bytes([b"a", bytes([195]), b"ab"]).encode_bytes(b"ab" + bytes([195]))
            [2, 1]
        """
        return self._greedy_encode(data)

    def _greedy_encode(self, data: bytes) -> list[int]:
        table, maxlen = self._greedy_table
        out: list[int] = []
        pos, n = 0, len(data)
        while pos < n:
            for k in range(min(maxlen, n - pos), 0, -1):
                i = table.get(data[pos:pos + k])
                if i is not None:
                    out.append(i)
                    pos += k
                    break
            else:
                raise VocabularyError(f"no token covers byte 0x{data[pos]:02X} at offset {pos}")
        return out

    # ------------------------------------------------------------------ arrays

    @cached_property
    def lengths(self) -> np.ndarray:
        """int32 ``[V]``: byte length of each token (0 for special ids); read-only."""
        arr = np.fromiter((len(b) for b in self.token_bytes), dtype=np.int32, count=len(self))
        arr.flags.writeable = False
        return arr

    @cached_property
    def _flat(self) -> np.ndarray:
        return np.frombuffer(b"".join(self.token_bytes), dtype=np.uint8)

    @cached_property
    def byte_matrix(self) -> np.ndarray:
        """uint8 ``[V, maxlen]``: token bytes, zero padded (use `lengths`); read-only.

        Example:
            >>> v = TokenVocabulary.from_token_bytes([b"ab", b"c"])
            >>> v.byte_matrix.tolist()
            [[97, 98], [99, 0]]
        """
        lengths = self.lengths
        width = int(lengths.max()) if len(lengths) else 0
        mat = np.zeros((len(self), width), dtype=np.uint8)
        flat = self._flat
        if flat.size:
            rows = np.repeat(np.arange(len(self)), lengths)
            starts = np.cumsum(lengths) - lengths
            cols = np.arange(flat.size) - np.repeat(starts, lengths)
            mat[rows, cols] = flat
        mat.flags.writeable = False
        return mat

    # ------------------------------------------------------------------ identity

    def content_hash(self) -> str:
        """SHA-256 hex digest of the token bytes (length-prefixed), EOS and special ids.

        Stable across processes and platforms; use it to key on-disk caches.

        Example:
            >>> TokenVocabulary.from_token_bytes([b"a"]).content_hash()[:16]
            'c330303192f2c588'
        """
        cached = self.__dict__.get("_content_hash")
        if cached is None:
            h = hashlib.sha256()
            h.update(_FORMAT.encode() + b"\0")
            h.update(np.int64(len(self)).astype("<i8").tobytes())
            h.update(self.lengths.astype("<u4").tobytes())   # the length prefixes
            h.update(self._flat.tobytes())
            h.update(np.int64(len(self.eos_ids)).astype("<i8").tobytes())
            h.update(np.asarray(self.eos_ids, dtype="<i8").tobytes())
            h.update(np.asarray(sorted(self.special_ids), dtype="<i8").tobytes())
            cached = h.hexdigest()
            self.__dict__["_content_hash"] = cached
        return cached

    # ------------------------------------------------------------------ persistence

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the vocabulary to ``path`` (an uncompressed ``.npz``), atomically.

        Example:
            >>> import tempfile, os
            >>> v = TokenVocabulary.from_token_bytes([b"", b"a"], eos_ids=[0])
            >>> p = os.path.join(tempfile.mkdtemp(), "v.npz")
            >>> v.save(p); TokenVocabulary.load(p) == v
            True
        """
        path = Path(path)
        meta = {"format": _FORMAT, "kind": self.kind, "encoder": self._encoder_kind,
                "hash": self.content_hash(), "special_tokens": dict(self.special_tokens)}
        tmp = path.with_name(f"{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
        try:
            with open(tmp, "xb") as f:
                np.savez(f, flat=self._flat, lengths=self.lengths,
                         eos=np.asarray(self.eos_ids, dtype=np.int64),
                         special=np.asarray(sorted(self.special_ids), dtype=np.int64),
                         meta=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8))
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise

    @classmethod
    def load(cls, path: str | os.PathLike[str], *,
             encode: Callable[[str], list[int]] | None = None) -> TokenVocabulary:
        """Read a vocabulary written by `save`; no tokenizer needed.

        ``encode`` gives the canonical encoder back (e.g. ``hf_encoder(tokenizer)``);
        without it, `encode` works only for vocabularies that used the greedy one.
        Raises `VocabularyError` on a missing, corrupt or foreign file.

        Example:
            >>> v = TokenVocabulary.load("llama3.npz", encode=hf_encoder(tok))  # doctest: +SKIP
        """
        try:
            with np.load(path, allow_pickle=False) as z:
                meta = json.loads(z["meta"].tobytes().decode())
                flat = z["flat"].tobytes()
                lengths = z["lengths"].astype(np.int64)
                eos = z["eos"].tolist()
                special = z["special"].tolist()
        except (OSError, KeyError, ValueError) as e:
            raise VocabularyError(f"cannot read vocabulary file {os.fspath(path)!r}: {e}") from e
        if meta.get("format") != _FORMAT:
            raise VocabularyError(f"{os.fspath(path)!r} is not a {_FORMAT} file")
        if lengths.sum() != len(flat) or (lengths < 0).any():
            raise VocabularyError(f"{os.fspath(path)!r}: token lengths do not match the data")
        ends = np.cumsum(lengths).tolist()
        starts = [0, *ends[:-1]]
        tb = [flat[s:e] for s, e in zip(starts, ends, strict=True)]
        vocab = cls(tb, eos_ids=eos, special_ids=special, special_tokens=meta.get("special_tokens"),
                    encode=encode, encoder_kind=meta.get("encoder", "greedy"),
                    kind=meta.get("kind", "bytes"))
        if vocab.content_hash() != meta.get("hash"):
            raise VocabularyError(f"{os.fspath(path)!r}: content hash mismatch (corrupt file?)")
        return vocab

