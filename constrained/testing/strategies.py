"""Hypothesis strategies for grammars, schemas, tokenizations and masked token walks.

Example (a user's property test in a few lines):
    >>> from hypothesis import given, settings
    >>> from constrained import Grammar
    >>> g = Grammar.from_lark('start: ("(" start ")")*')
    >>> @settings(max_examples=20, deadline=None)
    ... @given(grammar_strings(g))
    ... def test_balanced(text):
    ...     depth = 0
    ...     for c in text.decode():
    ...         depth += 1 if c == "(" else -1
    ...         assert depth >= 0
    ...     assert depth == 0
    >>> test_balanced()
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

from constrained.grammar.derivations import GrammarSampler
from constrained.grammar.ir import Grammar
from constrained.testing.tokens import canonical_ids, ids_by_bytes, segmentable, split_choices
from constrained.testing.walks import Walk, follow_mask

_SAMPLERS: dict[int, tuple[Grammar, GrammarSampler]] = {}


class HypothesisChooser:
    """`Chooser` over hypothesis draws: choices shrink to the first (simplest) option."""

    def __init__(self, draw) -> None:
        self.draw = draw

    def choose(self, options):
        if len(options) == 1:
            return options[0]
        return options[self.draw(st.integers(0, len(options) - 1))]

    def more(self, p: float) -> bool:
        return self.draw(st.floats(0, 1)) >= 1 - p if 0 < p < 1 else p >= 1


def _sampler(grammar: Grammar) -> GrammarSampler:
    hit = _SAMPLERS.get(id(grammar))
    if hit is None or hit[0] is not grammar:
        hit = _SAMPLERS[id(grammar)] = (grammar, GrammarSampler(grammar))
    return hit[1]


def _grammar_of(grammar_or_compiled) -> Grammar:
    return getattr(grammar_or_compiled, "grammar", grammar_or_compiled)


def grammar_strings(grammar, *, max_depth: int = 8, max_size: int | None = None,
                    max_terminal_bytes: int = 12, ignore_p: float = 0.2) -> st.SearchStrategy[bytes]:
    """Strings of ``grammar``'s language (a `Grammar` or a compiled one), as UTF-8 bytes.

    Random derivations that reach every rule and alternative (see
    `constrained.grammar.derivations`); ``max_depth`` bounds the derivation depth
    and ``max_size`` the number of terminals before only the shallowest
    alternatives are taken.  Failing examples shrink towards the first
    alternatives, short terminals and no ignored text."""
    g = _grammar_of(grammar)
    sampler = _sampler(g)

    @st.composite
    def strings(draw) -> bytes:
        return sampler.generate(HypothesisChooser(draw), max_depth=max_depth, max_size=max_size,
                                max_terminal_bytes=max_terminal_bytes, ignore_p=ignore_p)

    return strings()


def schema_instances(schema: Any, *, max_depth: int = 6, use_hypothesis_jsonschema: bool = True,
                     **options) -> st.SearchStrategy[Any]:
    """Valid instances of a JSON Schema (Python values).

    With ``hypothesis-jsonschema`` installed (and ``use_hypothesis_jsonschema``),
    its generator is used; otherwise strings of the schema's compiled grammar
    (``Grammar.from_json_schema(schema, **options)``) are parsed and kept when
    ``jsonschema`` (draft from ``$schema``, format checking on) accepts them."""
    import jsonschema

    validator_cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator) \
        if isinstance(schema, dict) else jsonschema.Draft202012Validator
    validator = validator_cls(schema, format_checker=validator_cls.FORMAT_CHECKER)
    if use_hypothesis_jsonschema:
        try:
            from hypothesis_jsonschema import from_schema
        except ImportError:
            pass
        else:
            return from_schema(schema).filter(validator.is_valid)
    grammar = Grammar.from_json_schema(schema, **options)
    return grammar_strings(grammar, max_depth=max_depth).map(json.loads).filter(validator.is_valid)


def tokenizations(text: bytes | str, vocab, *, max_token_bytes: int | None = None) -> st.SearchStrategy[list[int]]:
    """Token id sequences whose bytes spell ``text``: the canonical one (``vocab.encode``,
    the simplest example) and random non-canonical segmentations."""
    data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
    by_bytes = ids_by_bytes(vocab.token_bytes)
    longest = max_token_bytes or max((len(b) for b in by_bytes), default=1)
    ok = segmentable(data, by_bytes, longest)
    if not ok[0]:
        raise ValueError(f"{data[:40]!r}... cannot be spelled with this vocabulary")
    canonical = canonical_ids(text, vocab) if isinstance(text, str) else None

    @st.composite
    def split(draw) -> list[int]:
        out, i = [], 0
        while i < len(data):
            k = HypothesisChooser(draw).choose(split_choices(data, i, ok, by_bytes, longest))  # shrinks to greedy
            out.append(by_bytes[data[i:i + k]][0])
            i += k
        return out

    return (st.just(canonical) | split()) if canonical is not None else split()


def masked_walks(compiled, *, max_tokens: int = 64, eos_p: float = 0.3) -> st.SearchStrategy[Walk]:
    """Random token paths through ``compiled`` (a `CompiledGrammar`) that follow its mask.

    At each step a token is drawn among the allowed ones; where EOS is allowed it is
    taken with probability about ``eos_p`` (always once ``max_tokens`` is reached,
    if allowed).  Shrinks towards short walks and low token ids."""
    @st.composite
    def walk(draw) -> Walk:
        return follow_mask(compiled, HypothesisChooser(draw), max_tokens=max_tokens, eos_p=eos_p)

    return walk()
