"""The sampler stack (second top-level package of the `constrained` distribution).

Samplers never know what a grammar is: they see a `Constraint`, anything that can
give a packed mask, check one token, advance, fork and say whether it may stop.
`constrained.Matcher` is one; user-written constraints (a Python predicate over
the text so far, `PredicateConstraint`) implement the same protocol, so every
sampler works with both.

Per-step samplers (`AncestralSampler` with greedy/temperature/top-k/top-p/min-p,
mirostat, `BeamSearch`) sample the *locally* constrained distribution: mask, then
renormalise.  The grammar-aligned ones target the model conditioned on the
constraint, ``Q(w) ∝ P(w)·1[w ∈ L]``: `ASAp` (converges as samples accumulate) and
`SMC` (weighted particles, batched); `AWRSSampler` is exact per step without masks.
`samplers.exact` enumerates these distributions for small models and languages.

Example:
    >>> from constrained import Grammar, TokenVocabulary, compile_grammar
    >>> vocab = TokenVocabulary.from_token_bytes([b"a", b"b", b""], eos_ids=[2])
    >>> m = compile_grammar(Grammar.from_regex("ab"), vocab, cache_dir=None).matcher()
    >>> isinstance(m, Constraint)
    True
"""

from samplers.ancestral import AncestralSampler, Greedy, MinP, Temperature, TokenRule, TopK, TopP
from samplers.asap import ASAp, ASApTrie
from samplers.awrs import AWRSSampler, awrs_step
from samplers.base import LogitsSource, Sample, Sampler
from samplers.beam import BeamSearch
from samplers.constraint import Constraint
from samplers.mirostat import MirostatV1, MirostatV2
from samplers.predicate import PredicateConstraint
from samplers.smc import SMC, posterior

__all__ = ["ASAp", "ASApTrie", "AWRSSampler", "AncestralSampler", "BeamSearch", "Constraint", "Greedy",
           "LogitsSource", "MinP", "MirostatV1", "MirostatV2", "PredicateConstraint", "SMC", "Sample", "Sampler",
           "Temperature", "TokenRule", "TopK", "TopP", "awrs_step", "posterior"]
