"""A story sampled with mirostat v2 at a target surprise, constrained to plain prose.

    python examples/mirostat_story.py [tau]
"""

from __future__ import annotations

import sys

import numpy as np
import torch

from constrained import Grammar, compile_grammar
from constrained.models import LanguageModel
from samplers import AncestralSampler, MirostatV2

if __name__ == "__main__":
    tau = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
    lm = LanguageModel.load("default")
    compiled = compile_grammar(Grammar.from_regex(r"[A-Za-z ,.'\n-]+"), lm.vocab)
    rule = MirostatV2(tau=tau)
    out = AncestralSampler(rule).run(lm.session(lm.prompt_ids("Tell a short story about a lighthouse keeper.")),
                                     compiled.matcher(), lm.eos_ids, max_tokens=200,
                                     generator=torch.Generator().manual_seed(0))[0]
    print(lm.tokenizer.decode(out.tokens))
    print(f"\nmean surprise {np.mean(rule.surprises):.2f} bits (target {tau})")
