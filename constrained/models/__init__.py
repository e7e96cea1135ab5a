"""Language models for constrained decoding: loading (any Hugging Face causal LM or the
embedded default, SmolLM2-135M-Instruct), vocabularies with every stop token, chat
prompts, and sessions with a KV cache.  See `LanguageModel`."""

from constrained.models.batch import BatchSession
from constrained.models.hf_processor import ConstrainedLogitsProcessor
from constrained.models.language_model import LanguageModel, ModelSession
from constrained.models.loading import DEFAULT_MODEL, default_model_dir, load_hf, pick_device, pick_dtype

__all__ = ["DEFAULT_MODEL", "BatchSession", "ConstrainedLogitsProcessor", "LanguageModel", "ModelSession", "default_model_dir", "load_hf", "pick_device",
           "pick_dtype"]
