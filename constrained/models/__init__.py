"""Language models for constrained decoding: loading (any Hugging Face causal LM or the
embedded default, SmolLM2-135M-Instruct), vocabularies with every stop token, chat
prompts, sessions with a KV cache, batches.  See `LanguageModel`.  `TableModel` is a
fixed table of logits per prefix: a fully known model for exact sampler tests."""

from constrained.models.batch import BatchSession
from constrained.models.hf_processor import ConstrainedLogitsProcessor
from constrained.models.language_model import LanguageModel, ModelSession
from constrained.models.loading import DEFAULT_MODEL, default_model_dir, load_hf, pick_device, pick_dtype
from constrained.models.table_model import TableBatch, TableModel, TableSession

__all__ = ["DEFAULT_MODEL", "BatchSession", "ConstrainedLogitsProcessor", "LanguageModel", "ModelSession",
           "TableBatch", "TableModel", "TableSession", "default_model_dir", "load_hf", "pick_device", "pick_dtype"]
