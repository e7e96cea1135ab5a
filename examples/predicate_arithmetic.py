"""A constraint written as two Python predicates: ``a ∘ b`` (∘ one of + - *, numbers of
up to three digits) that evaluates to a target number.

`PredicateConstraint` turns ``prefix_ok(text)`` (can this still become an answer?)
and ``complete_ok(text)`` (may it end here?) into a constraint.  Here ``prefix_ok``
is exact — it searches the ways the text can still be completed — so no particle is
ever stuck.  SMC with adaptive weighted rejection sampling checks only the tokens it
draws, so the predicates run a few times per token instead of once per vocabulary
token, and its particles follow the model's own preferences among the valid answers.

    python examples/predicate_arithmetic.py [target]
"""

from __future__ import annotations

import operator
import re
import sys

import torch

from constrained.models import LanguageModel
from samplers import SMC, PredicateConstraint

FORM = re.compile(r" ?(\d{1,3}) ?(?:([-+*]) ?(\d{0,3}))?")
OPS = {"+": operator.add, "-": operator.sub, "*": operator.mul}


def completions(digits: str) -> range | list[int]:
    """Every number of at most three digits whose decimal spelling starts with ``digits``."""
    if not digits:
        return range(1000)
    return [int(digits + rest) for width in range(4 - len(digits)) for rest in
            (f"{i:0{width}d}" if width else "" for i in range(10 ** width))]


def prefix_ok(text: str, target: int) -> bool:
    if text in ("", " "):
        return True
    m = FORM.fullmatch(text)
    if m is None:
        return False
    a, op, b = m.groups()
    if op is None:
        return True                      # a + (target - a) or a - (a - target) always exists
    return any(OPS[op](int(a), n) == target for n in completions(b or ""))


def complete_ok(text: str, target: int) -> bool:
    m = FORM.fullmatch(text)
    return m is not None and bool(m.group(3)) and OPS[m.group(2)](int(m.group(1)), int(m.group(3))) == target


if __name__ == "__main__":
    target = int(sys.argv[1]) if len(sys.argv) > 1 else 24
    lm = LanguageModel.load("default")
    constraint = PredicateConstraint(lm.vocab, prefix_ok=lambda t: prefix_ok(t, target),
                                     complete_ok=lambda t: complete_ok(t, target))
    prompt = lm.prompt_ids(f"Write a product, sum or difference of two numbers that equals {target}. "
                           f"Answer with the expression only.")
    out = SMC(n_particles=8).run(lm.session(prompt), constraint, lm.eos_ids, max_tokens=10,
                                 generator=torch.Generator().manual_seed(0))
    for s in sorted(out, key=lambda s: -s.info["weight"]):
        print(f"weight {s.info['weight']:.3f}  log P {s.logprob:7.2f}  {lm.tokenizer.decode(s.tokens)!r}")
    tokens = sum(len(s.tokens) + 1 for s in out)
    print(f"\n{out[0].info['checks']} predicate checks for {tokens} particle tokens "
          f"(a full mask would check {len(lm.vocab)} tokens per step)")
