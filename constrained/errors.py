"""Typed errors raised by `constrained`.

Every error says what was wrong and where: a grammar line and column, a regex and
its position, a terminal name, a token id.  All derive from `ConstrainedError`, so
``except ConstrainedError`` catches anything this package raises on bad input.

Example:
    >>> from constrained import Grammar
    >>> from constrained.errors import GrammarSyntaxError
    >>> try:
    ...     Grammar.from_gbnf('root ::= "a" (')
    ... except GrammarSyntaxError as e:
    ...     (e.line, e.column) == (1, 15)
    True
"""

from __future__ import annotations

from typing import Any


class ConstrainedError(Exception):
    """Base class of every error this package raises on bad input or misuse."""


class GrammarError(ConstrainedError):
    """A grammar is wrong or unsupported.

    ``line`` and ``column`` are 1-based positions in the grammar source when known.
    """

    def __init__(self, message: str, *, line: int | None = None, column: int | None = None,
                 source: str | None = None) -> None:
        self.message = message
        self.line = line
        self.column = column
        self.source = source
        where = ""
        if line is not None:
            where = f" (line {line}" + (f", column {column}" if column is not None else "") + ")"
        if source:
            where += f" in {source}"
        super().__init__(message + where)


class GrammarSyntaxError(GrammarError):
    """The grammar text does not parse (lark EBNF or GBNF syntax)."""


class UnsupportedGrammarError(GrammarError):
    """The grammar is valid but uses a feature this engine refuses (named in the message)."""


class EmptyLanguageError(GrammarError):
    """The grammar's start symbol derives no string at all."""


class RegexError(GrammarError):
    """A regular expression is malformed or uses an unsupported feature.

    ``pattern`` is the regex, ``position`` the 0-based offset in it when known, and
    ``terminal`` the grammar terminal it belongs to when known.
    """

    def __init__(self, message: str, *, pattern: str, position: int | None = None,
                 terminal: str | None = None) -> None:
        self.reason = message
        self.pattern = pattern
        self.position = position
        self.terminal = terminal
        where = f" in regex {pattern!r}" if len(pattern) <= 200 else f" in regex {pattern[:200]!r}..."
        if position is not None:
            where += f" at position {position}"
        if terminal:
            where += f" (terminal {terminal})"
        super().__init__(message + where)

    def named(self, terminal: str) -> RegexError:
        """The same error, said of the grammar terminal ``terminal``."""
        return type(self)(self.reason, pattern=self.pattern, position=self.position, terminal=terminal)


class CompileLimitError(GrammarError):
    """Compiling would exceed a configured limit (automaton states, nesting, time).

    Raised instead of hanging or exhausting memory on pathological input; ``limit``
    names the limit and ``value`` the configured bound; ``terminal``, or ``keyword``
    and ``pointer`` (a JSON pointer into a schema), or a grammar's ``rule`` and
    ``line``, say what was too big.
    """

    def __init__(self, message: str, *, limit: str, value: float, terminal: str | None = None,
                 keyword: str | None = None, pointer: str | None = None, rule: str | None = None,
                 line: int | None = None) -> None:
        self.reason = message
        self.limit = limit
        self.value = value
        self.terminal = terminal
        self.keyword = keyword
        self.pointer = pointer
        self.rule = rule
        where = [f"terminal {terminal}"] if terminal else []
        if rule is not None:
            where.append(f"rule {rule!r}")
        if line is not None:
            where.append(f"line {line}")
        if keyword:
            where.append(f"keyword {keyword!r}")
        if pointer is not None:
            where.append(f"at #{pointer}")
        suffix = f" (limit {limit}={value}" + "".join(", " + w for w in where) + ")"
        super().__init__(message + suffix)
        self.line = line

    def at(self, pointer: str) -> CompileLimitError:
        """The same error, located at ``pointer`` in a schema."""
        return self._replaced(pointer=pointer)

    def named(self, terminal: str) -> CompileLimitError:
        """The same error, said of the grammar terminal ``terminal``."""
        return self._replaced(terminal=terminal)

    def _replaced(self, **changes: Any) -> CompileLimitError:
        where = {"terminal": self.terminal, "keyword": self.keyword, "pointer": self.pointer, "rule": self.rule,
                 "line": self.line, **changes}
        return type(self)(self.reason, limit=self.limit, value=self.value, **where)


class CompileTimeoutError(CompileLimitError):
    """Compiling took longer than its time limit (`constrained.deadline`)."""


class InvalidTimeoutError(ConstrainedError, ValueError):
    """A compile ``timeout`` that is neither None nor a number of seconds >= 0."""


class SchemaError(GrammarError):
    """A JSON Schema cannot be compiled; ``keyword`` and ``pointer`` (a JSON pointer
    into the schema document, ``""`` for the root) say where."""

    def __init__(self, message: str, *, keyword: str | None = None, pointer: str = "") -> None:
        self.keyword = keyword
        self.pointer = pointer
        where = f"at {pointer or '#'}" if pointer.startswith("#") else f"at #{pointer}"
        if keyword:
            where = f"keyword {keyword!r} {where}"
        super().__init__(f"{message} ({where})")


class InvalidSchemaError(SchemaError):
    """The document is not a valid JSON Schema (wrong keyword value type, bad $ref, ...)."""


class UnsupportedSchemaError(SchemaError):
    """A valid schema uses a keyword or form that cannot be enforced exactly; refused
    rather than approximated (the keyword and its pointer are named)."""


class UnsatisfiableSchemaError(SchemaError):
    """No JSON value satisfies the schema (e.g. ``minimum`` above ``maximum``)."""


class VocabularyError(ConstrainedError):
    """A tokenizer cannot be turned into a byte-level `TokenVocabulary`."""


class MatcherError(ConstrainedError):
    """A matcher was used wrongly (e.g. rolled back further than its history)."""


class MatcherTerminatedError(MatcherError):
    """The matcher already accepted an end-of-sequence token; it takes no more input."""


class ModelError(ConstrainedError):
    """A language model cannot be found, loaded or used (names the path and the cause)."""


class GenerationError(ConstrainedError):
    """Constrained generation could not finish (e.g. the token budget ran out)."""


class ContextLengthError(GenerationError):
    """The prompt and the token budget do not fit in the model's context (raised before
    any token is generated; says the prompt's tokens, the budget and the context)."""


class SamplerError(ConstrainedError):
    """A sampler cannot do what was asked (e.g. an ASAp trie learned for another prompt,
    or a file that is not a saved trie)."""


class StructuralTagError(GrammarError):
    """A structural tag (vLLM/XGrammar's ``{"type": "structural_tag", ...}``) or a tool
    list is malformed; ``path`` says where in the spec (e.g. ``format.tags[1].begin``)."""

    def __init__(self, message: str, *, path: str = "") -> None:
        self.path = path
        super().__init__(message + (f" (at {path})" if path else ""))
