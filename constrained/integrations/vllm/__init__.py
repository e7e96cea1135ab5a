"""vLLM integration: the project's constraints inside vLLM, by two routes.

* **Logits processor** (`ConstrainedLogitsProcessor`, vLLM's supported plug-in
  point, loaded from this package's ``vllm.logits_processors`` entry point): a
  request opts in with ``SamplingParams(extra_args={"constrained": {...}})`` or
  ``"vllm_xargs": {"constrained": ...}`` over HTTP; outputs finish inside
  ``max_tokens``.
* **Structured-output backend** (`ConstrainedBackend`, registered as ``"constrained"``
  by `register`, from this package's ``vllm.general_plugins`` entry point): vLLM's own
  ``structured_outputs`` / ``response_format`` and its speculative decoding run on
  this engine.

See docs/serving.md and README "Serving with vLLM" for the commands, and each module for details.
"""

from constrained.integrations.vllm.backend import BACKEND_NAME, ConstrainedBackend, ConstrainedGrammar
from constrained.integrations.vllm.logits_processor import EXTRA_ARGS_KEY, ConstrainedLogitsProcessor
from constrained.integrations.vllm.plugin import register

__all__ = ["BACKEND_NAME", "EXTRA_ARGS_KEY", "ConstrainedBackend", "ConstrainedGrammar",
           "ConstrainedLogitsProcessor", "register"]
