"""Reading a Hugging Face tokenizer's vocabulary: which spelling it uses, each id's bytes.

`TokenVocabulary.from_hf` is the front door; this module holds what it reads off the
tokenizer (`read_hf_tokenizer`), so that `constrained.vocabulary` is only the
vocabulary itself.  Two spellings are supported, detected from the backend
tokenizer's decoder / pre-tokenizer / normalizer (or, if those say nothing, from the
token strings themselves):

* **byte-level BPE**: token strings are bytes written through GPT-2's
  `bytes_to_unicode` alphabet;
* **SentencePiece-style**: ``▁`` (U+2581) for a space, ``<0xNN>`` byte-fallback pieces.

Anything else (WordPiece, unknown alphabets) raises `VocabularyError` naming what was
found.  Nothing here imports ``transformers``: the tokenizer is passed in.

Example:
    >>> bytes_to_unicode()[ord(" ")], unicode_to_bytes()["Ġ"]
    ('Ġ', 32)
    >>> _sentencepiece_bytes(["▁Hi", "<0x0A>", None])
    [b' Hi', b'\\n', b'']
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

from constrained.errors import VocabularyError

__all__ = [
    "END_MARKERS",
    "HFVocabulary",
    "bytes_to_unicode",
    "hf_encoder",
    "read_hf_tokenizer",
    "unicode_to_bytes",
]

#: Contents of special tokens that end a text or a turn; `TokenVocabulary.from_hf`
#: adds every special token with one of these contents to the EOS set.
END_MARKERS: frozenset[str] = frozenset({
    "<|eot_id|>", "<|eom_id|>", "<|end_of_text|>", "<|endoftext|>", "<|im_end|>",
    "</s>", "<|end|>", "<end_of_turn>", "<|return|>",
})

_SPM_SPACE = "\u2581"
_BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable character table used by byte-level BPE.

    Printable Latin-1 bytes map to themselves; the 68 others (controls, space,
    ``0x7F``-``0xA0``, ``0xAD``) map to ``chr(256 + k)`` in byte order.

    Example:
        >>> t = bytes_to_unicode()
        >>> t[ord("a")], t[ord(" ")], t[ord("\\n")]
        ('a', 'Ġ', 'Ċ')
    """
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
            *range(ord("®"), ord("ÿ") + 1)]
    table = {b: chr(b) for b in keep}
    extra = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + extra)
            extra += 1
    return dict(sorted(table.items()))


def unicode_to_bytes() -> dict[str, int]:
    """The inverse of `bytes_to_unicode`: alphabet character -> byte value.

    Example:
        >>> unicode_to_bytes()["Ġ"]
        32
    """
    return {c: b for b, c in bytes_to_unicode().items()}


_BYTE_ALPHABET: frozenset[str] = frozenset(bytes_to_unicode().values())
# Characters that only a byte-level vocabulary uses (the remapped ones, >= U+0100).
_REMAPPED: frozenset[str] = frozenset(c for c in _BYTE_ALPHABET if ord(c) >= 256)
# str.translate table: alphabet char -> the Latin-1 char of its byte, so that
# ``token.translate(_TO_LATIN1).encode("latin-1")`` is the token's bytes.
_TO_LATIN1: dict[int, int] = {ord(c): b for c, b in unicode_to_bytes().items()}


def hf_encoder(tokenizer: Any) -> Callable[[str], list[int]]:
    """Canonical encoder of a Hugging Face tokenizer, as `TokenVocabulary` uses it.

    Adds no special tokens (no BOS) and treats special-token text such as
    ``"<|im_end|>"`` as ordinary text (``split_special_tokens=True``): grammar
    text never produces a special token.

    Example:
        >>> enc = hf_encoder(tokenizer)                      # doctest: +SKIP
        >>> vocab = TokenVocabulary.load("v.npz", encode=enc)  # doctest: +SKIP
    """
    def encode(text: str) -> list[int]:
        try:
            ids = tokenizer.encode(text, add_special_tokens=False, split_special_tokens=True)
        except TypeError:  # very old tokenizers without the keyword
            ids = tokenizer.encode(text, add_special_tokens=False)
        return list(ids)

    return encode


class HFVocabulary(NamedTuple):
    """What `read_hf_tokenizer` reads off a tokenizer: `TokenVocabulary`'s constructor arguments."""

    token_bytes: list[bytes]
    eos_ids: tuple[int, ...]
    special_ids: frozenset[int]
    special_tokens: Mapping[str, int]
    encode: Callable[[str], list[int]]
    kind: str


def read_hf_tokenizer(tokenizer: Any, *, eos_ids: Iterable[int] | None = None) -> HFVocabulary:
    """The bytes of every id of a Hugging Face tokenizer (fast or slow), its special and EOS ids.

    The rules (detection, EOS set, added tokens) are `TokenVocabulary.from_hf`'s, which
    builds the vocabulary from this.

    Example:
        >>> parts = read_hf_tokenizer(tok)                 # doctest: +SKIP
        >>> parts.kind                                     # doctest: +SKIP
        'byte_level'
    """
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        model_vocab: dict[str, int] = backend.get_vocab(with_added_tokens=False)
    else:
        model_vocab = dict(tokenizer.get_vocab())
    added: dict[int, Any] = dict(getattr(tokenizer, "added_tokens_decoder", {}) or {})

    special: set[int] = set()
    special_names: dict[str, int] = {}
    for i, tok in added.items():
        if getattr(tok, "special", False):
            special.add(int(i))
            special_names[str(tok)] = int(i)
    for i in getattr(tokenizer, "all_special_ids", ()) or ():
        if i is not None and int(i) >= 0:
            special.add(int(i))
    for name, i in zip(getattr(tokenizer, "all_special_tokens", ()) or (),
                       getattr(tokenizer, "all_special_ids", ()) or (), strict=False):
        if i is not None and int(i) >= 0:
            special_names.setdefault(str(name), int(i))

    ids = [*model_vocab.values(), *added.keys(), *special]
    n = max([len(tokenizer), *(int(i) + 1 for i in ids)])

    # token strings of the model vocabulary (added tokens are handled apart)
    pieces: list[str | None] = [None] * n
    for s, i in model_vocab.items():
        pieces[i] = s
    for i in added:
        pieces[int(i)] = None
    for i in special:
        pieces[i] = None

    kind = _detect_kind(tokenizer, backend, pieces)
    if kind == "byte_level":
        tb = _byte_level_bytes(pieces)
    else:
        tb = _sentencepiece_bytes(pieces)
    for i, tok in added.items():
        if int(i) not in special:
            tb[int(i)] = str(tok).encode("utf-8")

    if eos_ids is None:
        eos: set[int] = set()
        raw = getattr(tokenizer, "eos_token_id", None)
        if isinstance(raw, int):
            eos.add(raw)
        elif raw is not None:
            eos.update(int(i) for i in raw if i is not None)
        eos.update(i for name, i in special_names.items() if name in END_MARKERS and i in special)
        eos_ids = eos
    return HFVocabulary(tb, tuple(eos_ids), frozenset(special), special_names, hf_encoder(tokenizer), kind)



# ---------------------------------------------------------------------- detection

def _component_json(backend: Any, name: str, cache: dict[str, Any]) -> Any:
    """JSON of one backend component (``decoder``, ``pre_tokenizer``, ``normalizer``)."""
    comp = getattr(backend, name, None)
    if comp is None:
        return None
    try:
        return json.loads(comp.__getstate__())
    except Exception:  # noqa: BLE001 - fall back to the full serialization
        if "full" not in cache:
            cache["full"] = json.loads(backend.to_str())
        return cache["full"].get(name)


def _walk(node: Any) -> Iterable[dict[str, Any]]:
    """Every JSON object in a component tree (Sequence members included)."""
    if isinstance(node, dict):
        yield node
        for v in node.values():
            yield from _walk(v)
    elif isinstance(node, list):
        for v in node:
            yield from _walk(v)


def _types(node: Any) -> list[str]:
    return [d["type"] for d in _walk(node) if isinstance(d.get("type"), str)]


def _pattern(d: dict[str, Any]) -> Any:
    p = d.get("pattern")
    return p.get("String", p.get("Regex")) if isinstance(p, dict) else p


def _detect_kind(tokenizer: Any, backend: Any, pieces: list[str | None]) -> str:
    """``"byte_level"`` or ``"sentencepiece"``; `VocabularyError` otherwise."""
    found: dict[str, str] = {}
    byte_level = spm = False
    if backend is not None:
        cache: dict[str, Any] = {}
        model = backend.model
        mtype = type(model).__name__
        found["model"] = mtype
        comps = {name: _component_json(backend, name, cache)
                 for name in ("normalizer", "pre_tokenizer", "decoder")}
        for name, j in comps.items():
            found[name] = "+".join(_types(j)) or "none"
        if mtype in ("WordPiece", "WordLevel"):
            raise VocabularyError(_unsupported(found))
        for attr in ("continuing_subword_prefix", "end_of_word_suffix"):
            if getattr(model, attr, None):
                found[attr] = repr(getattr(model, attr))
                raise VocabularyError(_unsupported(found))
        byte_level = any(t == "ByteLevel" for name in ("pre_tokenizer", "decoder")
                         for t in _types(comps[name]))
        for d in _walk([comps["decoder"], comps["pre_tokenizer"], comps["normalizer"]]):
            t = d.get("type")
            if t in ("Metaspace", "ByteFallback"):
                spm = True
            elif t == "Replace" and (_pattern(d), d.get("content")) in (
                    (_SPM_SPACE, " "), (" ", _SPM_SPACE)):
                spm = True
            elif t == "Prepend" and d.get("prepend") == _SPM_SPACE:
                spm = True
        if getattr(model, "byte_fallback", False):
            spm = True
    elif getattr(tokenizer, "sp_model", None) is not None:
        found["model"] = "sentencepiece (slow tokenizer)"
        spm = True
    if byte_level:
        return "byte_level"
    if spm:
        return "sentencepiece"
    # Nothing conclusive in the pipeline: look at the token strings themselves.
    chars = set("".join(p for p in pieces if p))
    if chars and chars <= _BYTE_ALPHABET and chars & _REMAPPED:
        return "byte_level"
    found["tokens"] = "neither byte-level alphabet nor SentencePiece pieces"
    raise VocabularyError(_unsupported(found))


def _unsupported(found: dict[str, str]) -> str:
    what = ", ".join(f"{k}={v}" for k, v in found.items()) or "no backend tokenizer"
    return f"unsupported tokenizer: neither byte-level BPE nor SentencePiece-style ({what})"


def _byte_level_bytes(pieces: list[str | None]) -> list[bytes]:
    """Byte-level token strings -> bytes; ``None`` (special/unused) -> ``b""``."""
    if not _BYTE_ALPHABET.issuperset("".join(p for p in pieces if p)):
        for i, p in enumerate(pieces):
            if p and not _BYTE_ALPHABET.issuperset(p):
                raise VocabularyError(
                    f"token {i} ({p!r}) has characters outside the byte-level BPE alphabet")
    # every char now maps to exactly one Latin-1 char, i.e. one byte
    return [p.translate(_TO_LATIN1).encode("latin-1") if p else b"" for p in pieces]


def _sentencepiece_bytes(pieces: list[str | None]) -> list[bytes]:
    """SentencePiece pieces -> bytes: ``▁`` -> space, ``<0xNN>`` -> byte NN."""
    out: list[bytes] = []
    for p in pieces:
        if not p:
            out.append(b"")
        elif len(p) == 6 and (m := _BYTE_PIECE.fullmatch(p)):
            out.append(bytes((int(m.group(1), 16),)))
        else:
            out.append(p.replace(_SPM_SPACE, " ").encode("utf-8"))
    return out
