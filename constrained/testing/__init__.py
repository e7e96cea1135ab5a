"""Property-based soundness testing for grammars, JSON Schemas and token masks.

Prove by testing that a grammar, a schema or a mask accepts exactly the language
you meant, in a few lines of hypothesis:

* strategies (`constrained.testing.strategies`): `grammar_strings`,
  `schema_instances`, `tokenizations`, `masked_walks`;
* checkers (`constrained.testing.checks`) with readable failure reports:
  `assert_sound` (every finished masked walk is accepted by your reference;
  `parses` turns a parser into one),
  `assert_complete` (every string your reference accepts is produced under every
  tokenization), `assert_mask_exact` (the fast mask equals a slow reference mask);
* building blocks: `Reference` (a textbook byte-level Earley recognizer),
  `GrammarSampler` (random derivations), token helpers
  (`constrained.testing.tokens`);
* a pytest plugin (`constrained.pytest_plugin`, registered on install; it needs no hypothesis):
  fixtures ``byte_vocab`` and ``compile_for_test``.

Example:
    >>> import json
    >>> from constrained import Grammar, TokenVocabulary, compile_grammar
    >>> vocab = TokenVocabulary.from_token_bytes([bytes([b]) for b in range(32, 127)] + [b""], eos_ids=[95])
    >>> compiled = compile_grammar(Grammar.from_file("grammars/json.lark"), vocab, cache_dir=None)
    >>> assert_sound(compiled, parses(json.loads), walks=20, max_tokens=30) > 0
    True
"""

from constrained.grammar.derivations import GrammarSampler, RandomChooser
from constrained.testing.checks import (
    CompletenessError,
    ConstraintCheckError,
    MaskMismatchError,
    SoundnessError,
    assert_complete,
    assert_mask_exact,
    assert_sound,
    parses,
)
from constrained.testing.reference import Reference
from constrained.testing.strategies import Walk, grammar_strings, masked_walks, schema_instances, tokenizations

__all__ = [
    "CompletenessError", "ConstraintCheckError", "GrammarSampler", "MaskMismatchError", "RandomChooser",
    "Reference", "SoundnessError", "Walk", "assert_complete", "assert_mask_exact", "assert_sound",
    "grammar_strings", "masked_walks", "parses", "schema_instances", "tokenizations",
]
