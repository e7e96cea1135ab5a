"""`register()`: make ``"constrained"`` a structured-output backend name of vLLM.

vLLM picks its structured-output backend from a fixed list (a ``Literal`` in
``vllm.config.structured_outputs``) and builds it in an if/elif chain
(``StructuredOutputManager.grammar_init``); there is no registry.  This function,
loaded in every vLLM process from the ``vllm.general_plugins`` entry point of this
package, patches exactly these places, and only on the vLLM releases in
`TESTED_VERSIONS` (on any other it logs why and leaves vLLM as it was):

1. ``StructuredOutputsConfig.backend`` also admits ``"constrained"`` (the config
   dataclass is rebuilt with the wider ``Literal``);
2. ``StructuredOutputManager.grammar_init`` builds a `ConstrainedBackend` when the
   request's backend is ``"constrained"`` and none is built yet, then goes on as before;
   ``_create_grammar`` hands each `ConstrainedGrammar` its request's ``max_tokens``
   (the budget guard);
3. ``SamplingParams._validate_structured_outputs``, for this backend only, compiles the
   request's spec in the front end (vLLM's own chain would treat an unknown name as
   "auto" and hand the request to xgrammar or guidance), so a bad schema is a
   per-request ``VLLMValidationError`` (HTTP 400).

Offline, ``LLM(...)`` validates ``structured_outputs_config`` before vLLM loads its
plugins: call ``constrained.integrations.vllm.register()`` first (the server and the
engine processes load it themselves).  Idempotent; safe to call without vLLM (it
returns False).
"""

from __future__ import annotations

import logging
import threading
import typing
from typing import Any

from constrained.integrations.vllm._compat import TESTED_VERSIONS, vllm_version

__all__ = ["register"]

logger = logging.getLogger("constrained.vllm")

_LOCK = threading.Lock()
_STATE: dict[str, Any] = {"registered": False}


def _supported(version: str | None) -> bool:
    return version is not None and ".".join(version.split(".")[:2]) in TESTED_VERSIONS


def register() -> bool:
    """Add the ``"constrained"`` backend to vLLM; True once it is in place."""
    from constrained.integrations.vllm.backend import BACKEND_NAME

    with _LOCK:
        if _STATE["registered"]:
            return True
        version = vllm_version()
        if version is None:
            return False
        if not _supported(version):
            logger.warning("constrained: vLLM %s is not one of the tested releases %s; the structured-output "
                           "backend %r is not registered (the logits-processor route still works)",
                           version, ", ".join(TESTED_VERSIONS), BACKEND_NAME)
            return False
        _widen_backend_literal(BACKEND_NAME)
        _patch_manager(BACKEND_NAME)
        _patch_validation(BACKEND_NAME)
        _STATE["registered"] = True
        return True


def _widen_backend_literal(name: str) -> None:
    import pydantic.dataclasses
    import vllm.config.structured_outputs as so

    names = typing.get_args(so.StructuredOutputsBackend)
    if name in names:
        return
    wider = typing.Literal[(*names, name)]  # type: ignore[valid-type]
    so.StructuredOutputsBackend = wider
    cls = so.StructuredOutputsConfig
    cls.__annotations__["backend"] = wider
    cls.__dataclass_fields__["backend"].type = wider
    pydantic.dataclasses.rebuild_dataclass(cls, force=True)


def _patch_manager(name: str) -> None:
    from vllm.v1.structured_output import StructuredOutputManager

    from constrained.integrations.vllm.backend import ConstrainedBackend, ConstrainedGrammar

    grammar_init = StructuredOutputManager.grammar_init
    create_grammar = StructuredOutputManager._create_grammar

    def patched_grammar_init(self, request):
        params = request.sampling_params
        if (self.backend is None and request.structured_output_request is not None and params is not None
                and params.structured_outputs is not None and params.structured_outputs._backend == name):
            self.backend = ConstrainedBackend(self.vllm_config, tokenizer=self.tokenizer,
                                              vocab_size=self.vllm_config.model_config.get_vocab_size())
        return grammar_init(self, request)

    def patched_create_grammar(self, request):
        grammar = create_grammar(self, request)
        if isinstance(grammar, ConstrainedGrammar) and request.sampling_params is not None:
            grammar.max_tokens = request.sampling_params.max_tokens
        return grammar

    StructuredOutputManager.grammar_init = patched_grammar_init
    StructuredOutputManager._create_grammar = patched_create_grammar


def _patch_validation(name: str) -> None:
    from vllm.exceptions import VLLMValidationError
    from vllm.sampling_params import SamplingParams
    from vllm.v1.structured_output.request import get_structured_output_key

    from constrained.errors import ConstrainedError
    from constrained.integrations.spec import cached_grammar
    from constrained.integrations.vllm.backend import spec_for_request_type

    validate = SamplingParams._validate_structured_outputs

    def patched_validate(self, model_config, structured_outputs_config, tokenizer):
        so = self.structured_outputs
        if structured_outputs_config is None or so is None or structured_outputs_config.backend != name:
            return validate(self, model_config, structured_outputs_config, tokenizer)
        # vLLM's own chain treats every name it does not know as "auto" (and would pick
        # xgrammar or guidance): validate here instead, as its per-backend branches do.
        if tokenizer is None:
            raise VLLMValidationError("structured outputs need a tokenizer (not 'skip_tokenizer_init')")
        if so._backend and so._backend != name:
            raise VLLMValidationError(f"request-level structured output backend selection is not supported: the "
                                      f"request asked for {so._backend!r}, the engine runs {name!r}")
        so._backend = name
        try:
            cached_grammar(spec_for_request_type(*get_structured_output_key(so)))
        except (ConstrainedError, ValueError) as e:
            raise VLLMValidationError(f"constrained: {e}") from e
        so.__post_init__()

    SamplingParams._validate_structured_outputs = patched_validate
