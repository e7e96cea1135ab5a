"""constrained: language-model output that provably follows a grammar or a JSON Schema.

Core API (the engine):

    >>> from constrained import Grammar, TokenVocabulary, compile_grammar
    >>> vocab = TokenVocabulary.from_token_bytes([b"{", b"}", b"[]", b"{}", b""], eos_ids=[4])
    >>> cg = compile_grammar(Grammar.from_lark('start: "{" start? "}" | "[]"'), vocab, cache_dir=None)
    >>> m = cg.matcher()
    >>> m.advance(0), m.allows(4), m.advance(1), m.allows(4)
    (True, False, True, True)
"""

from constrained.app import extract, extract_many, generate
from constrained.engine.batch import fill_masks
from constrained.engine.compiled import CompiledGrammar, compile_grammar
from constrained.engine.matcher import Matcher
from constrained.errors import (
    CompileLimitError,
    CompileTimeoutError,
    ConstrainedError,
    GrammarError,
    GrammarSyntaxError,
    MatcherError,
    RegexError,
    UnsupportedGrammarError,
    VocabularyError,
)
from constrained.grammar.ir import Grammar, Rule, TerminalDef
from constrained.masks import apply_token_mask, pack_mask, unpack_mask
from constrained.vocabulary import TokenVocabulary
from constrained.warmup import warm_up

__version__ = "0.1.0"

__all__ = [
    "CompileLimitError", "CompileTimeoutError", "CompiledGrammar", "ConstrainedError", "Grammar", "GrammarError",
    "GrammarSyntaxError", "Matcher", "MatcherError", "RegexError", "Rule", "TerminalDef",
    "TokenVocabulary", "UnsupportedGrammarError", "VocabularyError", "apply_token_mask",
    "compile_grammar", "extract", "extract_many", "fill_masks", "generate", "pack_mask", "unpack_mask", "warm_up",
]
