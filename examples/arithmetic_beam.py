"""Arithmetic expressions with constrained beam search (grammars/arithmetic.lark).

    python examples/arithmetic_beam.py
"""

from __future__ import annotations

from pathlib import Path

from constrained import Grammar, compile_grammar
from constrained.models import LanguageModel
from samplers import AncestralSampler, BeamSearch, Greedy

GRAMMAR = Path(__file__).resolve().parents[1] / "grammars" / "arithmetic.lark"

if __name__ == "__main__":
    lm = LanguageModel.load("default")
    compiled = compile_grammar(Grammar.from_file(GRAMMAR), lm.vocab)
    prompt = lm.prompt_ids("Write an arithmetic expression whose value is 24, using 3, 8 and 1.")
    greedy = AncestralSampler(Greedy()).run(lm.session(prompt), compiled.matcher(), lm.eos_ids, max_tokens=24)[0]
    print(f"greedy   {lm.tokenizer.decode(greedy.tokens)!r:40} logprob {greedy.logprob:.2f}")
    for s in BeamSearch(num_beams=4).run(lm.session(prompt), compiled.matcher(), lm.eos_ids, max_tokens=24):
        text = lm.tokenizer.decode(s.tokens)
        try:
            value = eval(text, {"__builtins__": {}})      # the grammar admits only arithmetic
        except ZeroDivisionError:
            value = "division by zero"
        print(f"beam     {text!r:40} logprob {s.logprob:.2f}  = {value}")
