"""Pytest fixtures for testing constraints (registered as the ``constrained`` plugin).

* ``byte_vocab``: a vocabulary of every single byte plus EOS (id 256): masks are
  cheap and every string has exactly one tokenization, so tests run fast;
* ``compile_for_test``: ``compile_for_test(grammar_or_text, vocab=None)`` compiles
  a `Grammar` (or lark text) for ``byte_vocab`` or a given vocabulary, without the
  disk cache.

Example test file (no imports of fixtures needed):

    import json
    from constrained.testing import assert_sound, parses

    def test_my_json_grammar_is_sound(compile_for_test):
        compiled = compile_for_test(open("my_json.lark").read())
        assert_sound(compiled, parses(json.loads), walks=500)
"""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def byte_vocab():
    """Every single byte as a token (ids 0-255) plus EOS (id 256)."""
    from constrained import TokenVocabulary

    return TokenVocabulary.from_token_bytes([bytes([b]) for b in range(256)] + [b""], eos_ids=[256])


@pytest.fixture
def compile_for_test(byte_vocab):
    """``compile_for_test(grammar_or_lark_text, vocab=None)``: a `CompiledGrammar` for
    ``byte_vocab`` (or ``vocab``), without the disk cache."""
    from constrained import Grammar, compile_grammar

    def compile_(grammar, vocab=None):
        g = Grammar.from_lark(grammar) if isinstance(grammar, str) else grammar
        return compile_grammar(g, vocab if vocab is not None else byte_vocab, cache_dir=None)

    return compile_
