"""Diverse beam search: G groups x B beams of pairwise different, valid product names.

    python examples/diverse_beams.py
"""

from __future__ import annotations

from constrained import Grammar, compile_grammar
from constrained.models import LanguageModel
from samplers import BeamSearch

if __name__ == "__main__":
    lm = LanguageModel.load("default")
    compiled = compile_grammar(Grammar.from_regex(r"[A-Z][a-z]{2,10}( [A-Z][a-z]{2,10})?"), lm.vocab)
    prompt = lm.prompt_ids("Suggest a name for a new coffee shop.")
    outs = BeamSearch(num_beams=6, groups=3, diversity=1.5).run(lm.session(prompt), compiled.matcher(),
                                                                 lm.eos_ids, max_tokens=24)
    for s in outs:
        print(f"group {s.info['group']}  {lm.tokenizer.decode(s.tokens)!r:30} logprob {s.logprob:.2f}")
