"""Speculative decoding whose verifier applies the constraint exactly.

Drafters (`constrained.speculative.drafters`) guess the next tokens cheaply; the
decoder (`constrained.speculative.decoder`) checks a whole draft with one forward
pass of the target, masks every drafted position with the constraint, and accepts
or resamples with the exact rule, so output distributions (and greedy outputs) are
those of non-speculative constrained decoding with the same per-step distribution.
"""

from constrained.speculative.decoder import (
    ASApTarget,
    RuleTarget,
    SpeculativeSampler,
    StepTarget,
    speculative_decode,
)
from constrained.speculative.drafters import (
    ChainDrafter,
    Draft,
    Drafter,
    ForcedDrafter,
    LayerSkipDrafter,
    ModelDrafter,
    PromptLookupDrafter,
    SuffixDrafter,
    drafter_from_spec,
    layer_skip_model,
)

__all__ = ["ASApTarget", "ChainDrafter", "Draft", "Drafter", "ForcedDrafter", "LayerSkipDrafter", "ModelDrafter",
           "PromptLookupDrafter", "RuleTarget", "SpeculativeSampler", "StepTarget", "SuffixDrafter",
           "drafter_from_spec", "layer_skip_model", "speculative_decode"]
