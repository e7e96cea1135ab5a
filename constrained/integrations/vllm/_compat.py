"""What the vLLM adapters need from vLLM, and the versions they were tested with.

The adapters import vLLM lazily so the package (and its replay tests) work without
vLLM installed: without it the base classes below are plain ``object``.  The
logits-processor route uses vLLM's public plug-in interface; the backend route
(`constrained.integrations.vllm.plugin`) patches internals, and only for
`TESTED_VERSIONS`.
"""

from __future__ import annotations

import threading
from typing import Any

__all__ = ["TESTED_VERSIONS", "LogitsProcessorBase", "StructuredOutputBackendBase",
           "StructuredOutputGrammarBase", "vllm_version", "vocabulary_for"]

#: vLLM releases (major.minor) whose internals the backend route was tested against.
TESTED_VERSIONS: tuple[str, ...] = ("0.32",)

try:  # pragma: no cover - depends on the environment
    from vllm.v1.sample.logits_processor import LogitsProcessor as LogitsProcessorBase
except ImportError:
    LogitsProcessorBase = object  # type: ignore[assignment,misc]

try:  # pragma: no cover - depends on the environment
    from vllm.v1.structured_output.backend_types import (
        StructuredOutputBackend as StructuredOutputBackendBase,
        StructuredOutputGrammar as StructuredOutputGrammarBase,
    )
except ImportError:
    StructuredOutputBackendBase = object  # type: ignore[assignment,misc]
    StructuredOutputGrammarBase = object  # type: ignore[assignment,misc]


def vllm_version() -> str | None:
    """The installed vLLM's version string, or None without vLLM."""
    try:
        import vllm
    except ImportError:
        return None
    return str(getattr(vllm, "__version__", "unknown"))


_VOCABS: dict[tuple[int, int], tuple[Any, Any]] = {}
_VOCABS_LOCK = threading.Lock()


def vocabulary_for(tokenizer: Any, vocab_size: int | None = None):
    """The `TokenVocabulary` of a (vLLM-wrapped) Hugging Face tokenizer, built once per
    tokenizer object.  ``vocab_size`` (the model's logits width) must be at least the
    tokenizer's: ids past the tokenizer are never allowed (the masks' padding bits are 0)."""
    from constrained.errors import VocabularyError
    from constrained.vocabulary import TokenVocabulary

    key = (id(tokenizer), vocab_size or 0)
    with _VOCABS_LOCK:
        held = _VOCABS.get(key)
    vocab = held[1] if held is not None and held[0] is tokenizer else None
    if vocab is None:
        vocab = TokenVocabulary.from_hf(tokenizer)
        if vocab_size is not None and len(vocab) > vocab_size:
            raise VocabularyError(f"the tokenizer has {len(vocab)} ids but the model's logits only {vocab_size}")
        with _VOCABS_LOCK:
            _VOCABS[key] = (tokenizer, vocab)      # the tokenizer held: its id stays its own
    return vocab
