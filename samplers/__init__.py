"""The sampler stack (second top-level package of the `constrained` distribution).

Samplers never know what a grammar is: they see a `Constraint`, anything that can
give a packed mask, check one token, advance, fork and say whether it may stop.
`constrained.Matcher` is one; user-written constraints (a Python predicate over
the text so far) implement the same protocol, so every sampler works with both.

Example:
    >>> from constrained import Grammar, TokenVocabulary, compile_grammar
    >>> vocab = TokenVocabulary.from_token_bytes([b"a", b"b", b""], eos_ids=[2])
    >>> m = compile_grammar(Grammar.from_regex("ab"), vocab, cache_dir=None).matcher()
    >>> isinstance(m, Constraint)
    True
"""

from samplers.ancestral import AncestralSampler, Greedy, MinP, Temperature, TokenRule, TopK, TopP
from samplers.base import LogitsSource, Sample, Sampler
from samplers.beam import BeamSearch
from samplers.constraint import Constraint
from samplers.mirostat import MirostatV1, MirostatV2

__all__ = ["AncestralSampler", "BeamSearch", "Constraint", "Greedy", "LogitsSource", "MinP", "MirostatV1",
           "MirostatV2", "Sample", "Sampler", "Temperature", "TokenRule", "TopK", "TopP"]
