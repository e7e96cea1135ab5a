"""`compile_grammar`: Grammar IR + TokenVocabulary -> `CompiledGrammar`."""

from __future__ import annotations

import time
import weakref
from pathlib import Path

import numpy as np

from constrained.automata.byte_dfa import DEFAULT_MAX_STATES, START, ByteDFA, chain_dfas, compile_terminal
from constrained.deadline import DEFAULT_COMPILE_TIMEOUT, check_deadline, compile_deadline
from constrained.engine.earley import EarleyParser, ParserTables
from constrained.engine.recognizer import DEFAULT_MASK_MEMORY, Recognizer
from constrained.engine.terminal_automata import TerminalAutomata
from constrained.engine.token_tables import TokenTables, default_cache_dir
from constrained.errors import GrammarError, UnsupportedGrammarError
from constrained.grammar.ir import JSON_SCHEMA_SOURCE, Grammar, Rule, TerminalDef

_DEFAULT = object()


class CompiledGrammar:
    """A grammar compiled against a vocabulary: immutable, thread-safe, reusable.

    All sequences share its memoised states, transitions and masks; create one
    `Matcher` per sequence with `matcher()`.

    Example:
        >>> from constrained import Grammar, TokenVocabulary, compile_grammar
        >>> vocab = TokenVocabulary.from_token_bytes([b"a", b"b", b"ab", b""], eos_ids=[3])
        >>> cg = compile_grammar(Grammar.from_regex("(ab)+"), vocab, cache_dir=None)
        >>> m = cg.matcher()
        >>> [t for t in range(4) if m.allows(t)]
        [0, 2]
    """

    def __init__(self, grammar: Grammar, vocab, recognizer: Recognizer, compile_seconds: float) -> None:
        # The grammar is held weakly, its rules and terminals as plain tuples: a `Rule` or
        # `TerminalDef` is an object the cyclic garbage collector tracks for as long as it
        # lives, and those of a batch of fresh schemas (~200 a schema) were a third of what
        # every full collection walked while the batch stepped.  `grammar` gives the same
        # grammar back (rebuilt from these parts once the caller has let go of it).
        self._grammar = weakref.ref(grammar)
        self._parts = (_terminal_parts(grammar),
                       tuple((r.lhs, r.rhs) for r in grammar.rules), grammar.start, grammar.ignore, grammar.source)
        self._checks = grammar.checks
        self.vocab = vocab
        self._recognizer = recognizer
        self.compile_seconds = compile_seconds
        self._eos_ids = tuple(int(t) for t in recognizer.eos_ids)
        self.eos_set: frozenset[int] = frozenset(self._eos_ids)

    @property
    def grammar(self) -> Grammar:
        """The grammar compiled (equal to the one given; the same object while the caller
        holds it)."""
        g = self._grammar()
        if g is None:
            terminals, rules, start, ignore, source = self._parts
            g = Grammar(terminals=tuple(TerminalDef(*parts) for parts in terminals),
                        rules=tuple(Rule(lhs, rhs) for lhs, rhs in rules), start=start, ignore=ignore,
                        source=source, checks=self._checks)
            self._grammar = weakref.ref(g)
        return g

    @property
    def recognizer(self) -> Recognizer:
        """The shared engine behind every matcher (for tools and tests)."""
        return self._recognizer

    @property
    def vocab_size(self) -> int:
        return self._recognizer.vocab_size

    @property
    def mask_words(self) -> int:
        """Number of int32 words in a packed mask: ceil(vocab_size / 32)."""
        return self._recognizer.nbytes // 4

    @property
    def eos_ids(self) -> tuple[int, ...]:
        return self._eos_ids

    @property
    def checks(self):
        """The grammar's value-level checks (None for a pure grammar)."""
        return self._checks

    def matcher(self):
        """A fresh `Matcher` at the start of the language (a `CheckedMatcher` when the
        grammar carries value-level checks)."""
        if self._checks is not None:
            from constrained.engine.checked import CheckedMatcher

            return CheckedMatcher(self)
        from constrained.engine.matcher import Matcher

        return Matcher(self)

    def accepts_bytes(self, data: bytes) -> bool:
        """Whether ``data`` (UTF-8) is in the grammar's language."""
        r = self._recognizer
        if not r.accepting(r.feed(r.initial, data)):
            return False
        checks = self._checks
        if checks is None:
            return True
        state = checks.step(checks.start(), b"", bytes(data))
        return state is not None and checks.accepts_end(state, bytes(data))

    def is_prefix_bytes(self, data: bytes) -> bool:
        """Whether ``data`` can be extended to a string of the language (for grammars with
        value-level checks: no value completed in ``data`` fails its check)."""
        r = self._recognizer
        if r.feed(r.initial, data) == 0:
            return False
        checks = self._checks
        return checks is None or checks.step(checks.start(), b"", bytes(data)) is not None

    def stats(self) -> dict[str, int]:
        """Sizes of the shared caches (states, parser nodes, memoised masks)."""
        r = self._recognizer
        return {"states": r.num_states, "parser_nodes": r.parser.num_nodes,
                "masks": len(r._mask_memo), "token_transitions": len(r._token_memo),
                "mask_memory_bytes": r._mask_memory, "mask_memo_resets": r.mask_memo_resets}


def compile_grammar(grammar: Grammar, vocab, *, cache_dir: str | Path | None = _DEFAULT,  # type: ignore[assignment]
                    max_dfa_states: int = DEFAULT_MAX_STATES, precompute: bool | None = None,
                    max_mask_memory: int = DEFAULT_MASK_MEMORY,
                    lazy_terminals: bool | None = None,
                    timeout: float | None = DEFAULT_COMPILE_TIMEOUT,
                    first_mask: bool = True) -> CompiledGrammar:
    """Compile ``grammar`` for ``vocab``.

    ``cache_dir`` holds per-vocabulary token tables (default
    ``$CONSTRAINED_CACHE_DIR`` or ``~/.cache/constrained``; ``None`` disables the
    disk cache).  ``max_dfa_states`` bounds each terminal's automaton (a larger
    one raises `CompileLimitError`).  Token tables (per terminal DFA state) are
    built when a mask first needs them and shared by every state with the same
    residual language; ``precompute=True`` builds every state's table now (and
    saves it to the disk cache), so later masks never pay for them; the default
    (None) only loads tables already on disk.
    ``max_mask_memory`` bounds the bytes of memoised masks (beyond it they are
    dropped and recomputed on demand; parser states are always kept).
    ``lazy_terminals`` builds each terminal's automaton when a state first reads it
    (`TerminalAutomata`), not now; the default (None) is lazy for grammars compiled
    from JSON Schemas, whose terminals are well-formed by construction and mostly
    never read by one response (their key literals are built now all the same, in one
    pass: `chain_dfas`), and eager for written grammars, whose bad terminals (empty,
    too large) are then reported here.
    ``timeout`` bounds this call, each later lazy build of a terminal, and each first
    computation of a state's mask or of a token step (seconds, None: no limit; the
    recognizer's ``timeout``): past it `CompileTimeoutError` names the terminal, rule
    or state, and nothing of it stays.
    ``first_mask`` computes the start state's mask now, within ``timeout``: every
    matcher needs it first, and right after the compile the grammar's tables are still
    in the CPU's caches, so compile and first mask together cost less than apart (64
    fresh schemas: ~10% less), and a server's first step for the request reads it from
    memory instead of computing it among every other request's masks.

    Example:
        >>> from constrained import Grammar, TokenVocabulary, compile_grammar
        >>> vocab = TokenVocabulary.from_token_bytes([b"1", b"2", b"+", b""], eos_ids=[3])
        >>> cg = compile_grammar(Grammar.from_lark('start: N ("+" N)*\\nN: /[12]/'), vocab, cache_dir=None)
        >>> cg.accepts_bytes(b"1+2"), cg.accepts_bytes(b"1+")
        (True, False)
    """
    t0 = time.perf_counter()
    if not isinstance(grammar, Grammar):
        raise GrammarError(f"compile_grammar needs a Grammar, got {type(grammar).__name__}")
    if lazy_terminals is None:
        lazy_terminals = grammar.source == JSON_SCHEMA_SOURCE
    with compile_deadline(timeout):          # one deadline for the whole call
        tables = ParserTables.from_grammar(grammar)
        parser = EarleyParser(tables)
        # (what the lazy builds keep as bytes and tuples: a set or list of a request's
        # terminals is a container the cyclic GC visits element by element at each collection)
        read = bytearray(tables.num_terminals)
        for rhs in tables.rule_rhs:
            for s in rhs:
                if s < tables.num_terminals:
                    read[s] = 1
        used = bytes(read)
        term_of = {parts[0]: parts for parts in _terminal_parts(grammar)}   # tuples: see CompiledGrammar
        names = tuple(tables.terminal_names) + tuple(grammar.ignore)
        cdir = default_cache_dir() if cache_dir is _DEFAULT else (None if cache_dir is None else Path(cache_dir))
        token_tables = TokenTables.for_vocabulary(vocab, cdir)
        source = grammar.source                  # (the lazy builds hold the terminals, not the grammar)

        def build(i: int) -> ByteDFA | None:
            if i < tables.num_terminals and not used[i]:
                return None                       # no rule reads it: no state ever starts it
            with compile_deadline(timeout):       # a lazy build later: its own deadline
                dfa = _terminal_dfa(TerminalDef(*term_of[names[i]]), max_dfa_states, source)
            if precompute:
                token_tables.ensure(dfa)
            elif precompute is None:
                token_tables.load_cached(dfa)
            return dfa

        dfas = TerminalAutomata(len(names), build)
        if not lazy_terminals or precompute:
            dfas.build_all()
        else:       # key literals now, all in one pass (`chain_dfas`: cheaper than one by one later)
            wanted = [i for i, name in enumerate(names) if (i >= tables.num_terminals or used[i])
                      and not term_of[name][2] and not term_of[name][3]]
            for i, dfa in zip(wanted, chain_dfas([term_of[names[i]][1] for i in wanted], max_dfa_states)):
                if dfa is not None:
                    if precompute is None:
                        token_tables.load_cached(dfa)
                    dfas.add_built(i, dfa)
        eos = np.asarray(sorted(vocab.eos_ids), dtype=np.int64)
        recognizer = Recognizer(parser, dfas, tables.num_terminals, token_tables, eos,  # type: ignore[arg-type]
                                max_mask_memory=max_mask_memory, timeout=timeout)
        if grammar.source == JSON_SCHEMA_SOURCE:
            recognizer.min_abstract_depth = None    # its stack tops seldom recur (see MIN_ABSTRACT_DEPTH)
        if first_mask:
            recognizer.prepare_mask(recognizer.initial)
    return CompiledGrammar(grammar, vocab, recognizer, time.perf_counter() - t0)


def _terminal_parts(grammar: Grammar) -> tuple[tuple, ...]:
    """The grammar's terminals as plain tuples, ``TerminalDef(*parts)`` each (see
    `CompiledGrammar`: tuples the cyclic garbage collector stops tracking)."""
    return tuple((t.name, t.regex, t.also, t.excluding) for t in grammar.terminals)


def _terminal_dfa(t: TerminalDef, max_dfa_states: int, source: str | None) -> ByteDFA:
    """A terminal's automaton; a terminal matching the empty string or nothing is refused."""
    check_deadline(terminal=t.name)
    dfa = compile_terminal(t.regex, t.also, t.excluding, terminal=t.name, max_states=max_dfa_states)
    if not dfa.accepting[START] and dfa.accepting.any():
        return dfa                        # the common case: nothing to refuse
    shown = (f"/{t.regex}/" + "".join(f" and /{r}/" for r in t.also)
             + "".join(f" but not /{r}/" for r in t.excluding))
    if dfa.matches_empty():
        raise UnsupportedGrammarError(f"terminal {t.name!r} matches the empty string "
                                      f"({shown}); make it non-empty and the rule optional", source=source)
    if not dfa.accepting.any():
        raise UnsupportedGrammarError(f"terminal {t.name!r} matches nothing ({shown})", source=source)
    return dfa
