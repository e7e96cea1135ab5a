"""Property-based soundness testing for grammars, JSON Schemas and token masks.

Building blocks, all independent of the mask engine they are used to test:

* `constrained.testing.reference.Reference`: a slow, textbook Earley recognizer
  of a `Grammar`'s language over bytes (and its token masks);
* `constrained.testing.derivation.GrammarSampler`: random derivations of a grammar;
* `constrained.testing.tokens`: tokenizations, random segmentations, sub-vocabularies.
"""
