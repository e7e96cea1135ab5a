"""JSON Schema -> Grammar IR.

One nonterminal per *conjunction* of located sub-schemas (`constrained.json_schema.conjunction`):
``allOf``, ``$ref`` beside siblings, and every ``properties`` / ``patternProperties``
/ ``additionalProperties`` entry that applies to a key are read together, so
intersections are translated structurally (types intersected, bounds tightened,
string regexes intersected as terminals with ``also`` / ``excluding`` regexes,
required sets united).  ``anyOf`` / ``oneOf`` / ``if`` are distributed over the
rest of their conjunction.  Terminals are regexes over the JSON *text* (strings in
every valid JSON encoding of their characters).

Exactness policy: a keyword is translated exactly (up to the documented sound
restrictions: properties in schema order, canonical numbers, bounded whitespace,
no exponent in bounded numbers), or the grammar is made a *superset* for it and
the keyword is enforced by a value-level check (`SchemaCompilation.checked`,
`constrained.json_schema.value_checks`): the value is validated with `jsonschema`
when it completes, and a token that would complete an invalid value is not
allowed.  With ``value_checks=False`` such keywords are refused instead
(`UnsupportedSchemaError` naming the keyword and its JSON pointer).  Nothing is
silently approximated; annotations and unknown formats are listed in
`SchemaCompilation.notes`.

This module is the front door (`compile_json_schema`) and the core: `SchemaCompiler`
holds one document's state (its `RuleBuilder`, notes and checks) and gives each
conjunction one nonterminal, whose alternatives come from `constrained.json_schema.compile`:
``enum``/``const`` (`literals`), the applicators (`applicators`), then one module per
kind of value the conjunction allows (`kinds`; `numeric`, `strings`, `arrays`, `objects`).

Example:
    >>> from constrained.json_schema.compiler import compile_json_schema
    >>> c = compile_json_schema({"type": "object", "properties": {"a": {"type": "integer", "minimum": 1}},
    ...                          "required": ["a"], "additionalProperties": False})
    >>> from constrained import TokenVocabulary, compile_grammar
    >>> vocab = TokenVocabulary.from_token_bytes([bytes([b]) for b in range(1, 128)] + [b""], eos_ids=[127])
    >>> cg = compile_grammar(c.grammar, vocab, cache_dir=None)
    >>> cg.accepts_bytes(b'{"a": 3}'), cg.accepts_bytes(b'{"a": 0}'), cg.accepts_bytes(b'{}')
    (True, False, False)
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from constrained.deadline import DEFAULT_COMPILE_TIMEOUT, check_deadline, compile_deadline
from constrained.errors import (
    CompileLimitError,
    CompileTimeoutError,
    UnsatisfiableSchemaError,
    UnsupportedGrammarError,
    UnsupportedSchemaError,
)
from constrained.grammar.ir import JSON_SCHEMA_SOURCE, Grammar
from constrained.json_schema import grounding
from constrained.json_schema.compile import applicators, arrays, kinds, literals, numeric, objects, strings
from constrained.json_schema.compile.gaps import fuse_gaps
from constrained.json_schema.compile.rules import (
    NUMBER_REGEX,
    STRING_REGEX,
    Alternatives,
    RuleBuilder,
    productive_rules,
)
from constrained.json_schema.conjunction import (
    VALIDATION_KEYWORDS,
    Conjunction,
    Part,
    conjunction_key,
    flatten,
    root_part,
)
from constrained.json_schema.keywords import ANNOTATIONS
from constrained.json_schema.options import JsonSchemaOptions, OptionError
from constrained.json_schema.resolver import Located, SchemaIndex, escape_pointer_token
from constrained.json_schema.validation import SchemaValidators

# keywords translated structurally (exactly, or as a superset plus a value check)
TRANSLATED_KEYWORDS = VALIDATION_KEYWORDS | {"then", "else"}
MAX_DOCUMENT_DEPTH = 256  # JSON nesting of the schema document itself
MAX_NESTING = 160         # sub-schemas compiled one inside the other (values nested that deep)
_CONDITIONAL = frozenset({"if", "then", "else"})


@dataclass(frozen=True)
class SchemaNote:
    """A keyword that was not translated into the grammar, and how it is handled (at ``pointer``)."""

    pointer: str
    keyword: str
    note: str


@dataclass
class SchemaCompilation:
    """The grammar of a schema, the notes on keywords, and the value-level checks.

    ``checked`` lists ``(pointer, keyword)`` of every keyword the grammar only
    over-approximates; the grammar then carries a `JsonValueChecks` (``grammar.checks``)
    that validates completed values, so compiled matchers stay exact.
    """

    grammar: Grammar
    notes: list[SchemaNote] = field(default_factory=list)
    checked: list[tuple[str, str]] = field(default_factory=list)


class SchemaCompiler:
    """Compiles one schema document; use `compile_json_schema`.

    The state the modules of `constrained.json_schema.compile` read and extend:
    ``builder`` (the grammar so far), ``check``/``note`` (keywords left to value checks,
    notes), ``conjunction_symbol`` (the nonterminal of a sub-schema's conjunction).
    """

    def __init__(self, schema: Any, options: JsonSchemaOptions) -> None:
        self.schema = schema
        self.options = options
        self.index = SchemaIndex(schema, documents=dict(options.documents or {}))
        self.validators = SchemaValidators(self.index, formats=options.formats == "assert")
        self.dialect = self.validators.dialect      # the draft every keyword is read under
        self.builder = RuleBuilder()
        self.notes: list[SchemaNote] = []
        self._noted: set[SchemaNote] = set()
        self.checked: dict[tuple[str, str], Located] = {}
        # memos of the kind modules: `strings` (terminal automata that fit), `literals`
        # (a schema without its enum, kept alive: validators are cached by the schema's id)
        self.terminal_fits: dict[tuple[str, tuple[str, ...], tuple[str, ...]], bool | None] = {}
        self.schemas_without_keyword: dict[int, Located] = {}
        self._symbols: dict[tuple, str | None] = {}   # conjunction key -> nonterminal (None: unsatisfiable)
        self._surveyed: set[int] = set()              # ids of the schema objects whose keywords were surveyed
        self._any_value: str | None = None
        self._whitespace: tuple[str, ...] | None = None
        self._depth = 0                             # conjunctions being compiled, one inside the other

    # ------------------------------------------------------------------ entry
    def compile(self) -> SchemaCompilation:
        root = self.conjunction_symbol(self.flatten([root_part(self.index)]), "root")
        if root is None:
            raise UnsatisfiableSchemaError("no JSON value satisfies the schema", pointer="")
        self.builder.rule("start", root)
        rules = productive_rules(self.builder.rules, set(self.builder.terminals.values()))
        if not any(r.lhs == "start" for r in rules):
            raise UnsatisfiableSchemaError("no JSON value satisfies the schema", pointer="")
        checks = None
        if self.checked:
            from constrained.json_schema.value_checks import JsonValueChecks

            checks = JsonValueChecks(self.index, self.validators, list(self.checked.values()),
                                     [keyword for _, keyword in self.checked])
        if self._whitespace:
            rules = fuse_gaps(rules, self.builder, self._whitespace[0])
        used = {s for r in rules for s in r.rhs}
        terminals = tuple(t for t in self.builder.terminal_defs() if t.name in used)
        # (JsonValueChecks' step/accepts_end annotate ``text`` as bytes, the protocol as
        # bytes | bytearray: value_checks.py's annotation to widen)
        grammar = Grammar(terminals=terminals, rules=tuple(rules), start="start", source=JSON_SCHEMA_SOURCE,
                          checks=checks)  # type: ignore[arg-type]
        return SchemaCompilation(grammar, self.notes, sorted(self.checked))

    # ------------------------------------------------------------------ shared services
    def flatten(self, items: Iterable[Part | tuple[Any, str, str]]) -> Conjunction | None:
        """The conjunction of ``items`` (None: no value satisfies it), noting keywords a
        ``$ref`` makes its siblings ignore."""
        def ignored(pointer: str, keywords: list[str]) -> None:
            for k in keywords:
                self.note(pointer, k, "ignored beside $ref, as drafts up to 07 specify")

        return flatten(items, self.index, self.dialect, on_ignored=ignored)

    def whitespace(self) -> tuple[str, ...]:
        """The optional-whitespace symbols between two JSON tokens (none when compact)."""
        if self._whitespace is None:
            if self.options.whitespace == "compact":
                self._whitespace = ()
            else:
                bound = "+" if self.options.whitespace == "any" else f"{{1,{self.options.max_whitespace}}}"
                ws = self.builder.fresh("ws")
                self.builder.rule(ws)
                self.builder.rule(ws, self.builder.term(f"[ \\t\\n\\r]{bound}", "WS"))
                self._whitespace = (ws,)
        return self._whitespace

    def note(self, pointer: str, keyword: str, text: str) -> None:
        """Say how ``keyword`` at ``pointer`` is handled (once)."""
        note = SchemaNote(pointer, keyword, text)
        if note not in self._noted:
            self._noted.add(note)
            self.notes.append(note)

    def check(self, part: Part, keyword: str, why: str) -> None:
        """The grammar over-approximates ``keyword`` of ``part``: enforce it by a value check."""
        if not self.options.value_checks:
            raise UnsupportedSchemaError(f"{why}; refused because value_checks=False", keyword=keyword,
                                         pointer=part.pointer)
        self.checked[(part.pointer, keyword)] = part.loc
        self.note(part.pointer, keyword, f"{why}: checked when the value completes")

    @property
    def sub_grammars(self) -> int:
        """The conjunctions given a nonterminal so far."""
        return len(self._symbols)

    def any_value(self) -> str:
        """The nonterminal of every JSON value (the ``true`` schema)."""
        if self._any_value is None:
            builder, ws = self.builder, self.whitespace()
            value, obj, members, array, elements = (
                builder.fresh(n) for n in ("any_value", "any_object", "any_members", "any_array", "any_elements"))
            self._any_value = value
            string = builder.term(STRING_REGEX, "STRING")
            for alternative in (obj, array, string, builder.term(NUMBER_REGEX, "NUMBER"), builder.literal("true"),
                                builder.literal("false"), builder.literal("null")):
                builder.rule(value, alternative)
            open_brace, close_brace = builder.literal("{"), builder.literal("}")
            colon, comma = builder.literal(":"), builder.literal(",")
            builder.rule(obj, open_brace, *ws, close_brace)
            builder.rule(obj, open_brace, *ws, members, *ws, close_brace)
            builder.rule(members, string, *ws, colon, *ws, value)
            builder.rule(members, members, *ws, comma, *ws, string, *ws, colon, *ws, value)
            open_bracket, close_bracket = builder.literal("["), builder.literal("]")
            builder.rule(array, open_bracket, *ws, close_bracket)
            builder.rule(array, open_bracket, *ws, elements, *ws, close_bracket)
            builder.rule(elements, value)
            builder.rule(elements, elements, *ws, comma, *ws, value)
        return self._any_value

    # ------------------------------------------------------------------ conjunctions
    def conjunction_symbol(self, conj: Conjunction | None, hint: str) -> str | None:
        """The nonterminal of a conjunction (None: no value satisfies it)."""
        if conj is None:
            return None
        if not conj:
            return self.any_value()
        key = conjunction_key(conj)
        if key in self._symbols:
            return self._symbols[key]
        check_deadline(pointer=conj[0].pointer)
        name = self.builder.fresh("s_" + (hint or "v"))
        self._symbols[key] = name
        if self._depth >= MAX_NESTING:
            raise CompileLimitError(f"sub-schemas nested more than {MAX_NESTING} deep", limit="max_nesting",
                                    value=MAX_NESTING, pointer=conj[0].pointer)
        self._depth += 1
        try:
            alternatives = self.alternatives(conj)
        except CompileTimeoutError as e:
            if e.pointer is not None:
                raise
            raise e.at(conj[0].pointer) from None     # out of time in an automaton: say which sub-schema
        finally:
            self._depth -= 1
        if not alternatives:
            self._symbols[key] = None
            return None
        for rhs in dict.fromkeys(alternatives):
            self.builder.rule(name, *rhs)
        return name

    def items_symbol(self, items: Iterable[Part | tuple[Any, str, str]], hint: str) -> str | None:
        """The nonterminal of the conjunction of ``items`` (None: no value satisfies it)."""
        return self.conjunction_symbol(self.flatten(items), hint)

    def alternatives(self, conj: Conjunction) -> Alternatives:
        """The right-hand sides of ``conj``'s nonterminal: its enum values, the branches of
        its first applicator, or else one set per kind of value it allows."""
        self._survey(conj)
        present = frozenset().union(*(p.active for p in conj))    # every keyword some part still has
        if "const" in present or "enum" in present:
            return literals.enum_alternatives(self, conj)
        for keyword in ("anyOf", "oneOf"):
            if keyword in present:
                return applicators.distribute(self, conj, next(i for i, p in enumerate(conj) if p.has(keyword)),
                                              keyword)
        if not _CONDITIONAL.isdisjoint(present):
            return applicators.if_then_else(self, conj, next(i for i, p in enumerate(conj)
                                                             if not _CONDITIONAL.isdisjoint(p.active)))
        for part in conj:
            for keyword in ("$dynamicRef", "$recursiveRef"):
                if part.has(keyword):
                    self.check(part, keyword, f"{keyword} is resolved dynamically; the grammar allows any value here")
        allowed = kinds.allowed_kinds(self, conj)
        out: Alternatives = []
        builder = self.builder
        if "null" in allowed:
            out.append((builder.literal("null"),))
        if "boolean" in allowed:
            out += [(builder.literal("true"),), (builder.literal("false"),)]
        if "integer" in allowed or "fraction" in allowed:
            numbers = numeric.number_alternatives(self, conj, fractions="fraction" in allowed)
            out += grounding.grounded_numbers(self, conj, numbers)
        if "string" in allowed:
            out += strings.string_alternatives(self, conj)
        if "array" in allowed:
            out += arrays.array_alternatives(self, conj)
        if "object" in allowed:
            out += objects.object_alternatives(self, conj)
        return out

    def _survey(self, conj: Conjunction) -> None:
        """Notes for unknown keywords (once per schema object)."""
        for part in conj:
            if id(part.schema) in self._surveyed:
                continue
            self._surveyed.add(id(part.schema))
            for k in part.schema:
                if k in ANNOTATIONS or k in TRANSLATED_KEYWORDS:
                    continue
                if self.dialect.evaluates(k):      # draft-03's divisibleBy, disallow, extends
                    self.check(part, k, f"{k} ({self.dialect.name}) is not translated")
                else:
                    self.note(part.pointer, k, "unknown keyword: an annotation without validation meaning")


def compile_json_schema(schema: Any, options: JsonSchemaOptions | None = None, *,
                        timeout: float | None = DEFAULT_COMPILE_TIMEOUT, **kwargs) -> SchemaCompilation:
    """Compile a JSON Schema (a parsed JSON value) to a `SchemaCompilation`.

    ``options`` or keyword arguments build `JsonSchemaOptions`.  Raises
    `InvalidSchemaError`, `UnsupportedSchemaError` or `UnsatisfiableSchemaError`, and
    `CompileLimitError` for documents nested deeper than `MAX_DOCUMENT_DEPTH`, and
    `CompileTimeoutError` (naming the sub-schema being compiled) past ``timeout`` seconds
    (`constrained.deadline`; None: no limit).
    """
    if options is None:
        try:
            options = JsonSchemaOptions(**kwargs)
        except TypeError as e:            # an option name that does not exist
            raise OptionError(f"unknown JSON Schema option: {e}") from None
    elif kwargs:
        raise TypeError("pass either options or keyword options, not both")
    _check_depth(schema)
    try:
        with compile_deadline(timeout):
            return SchemaCompiler(schema, options).compile()
    except RecursionError as e:      # a deep caller's stack plus MAX_NESTING levels: still a typed error
        raise CompileLimitError("sub-schemas nested too deep for the interpreter's recursion limit",
                                limit="recursion_limit", value=sys.getrecursionlimit()) from e
    except UnsupportedGrammarError as e:  # e.g. from a sub-compiler that names no pointer
        if isinstance(e, UnsupportedSchemaError):
            raise
        raise UnsupportedSchemaError(str(e)) from e


def _check_depth(document: Any) -> None:
    """Refuse a document nested deeper than `MAX_DOCUMENT_DEPTH` (walked without recursion)."""
    # each entry: (node, depth, path) with path a linked list (key, parent path): the
    # pointer string is built only for the node that is too deep
    stack: list[tuple[Any, int, tuple | None]] = [(document, 0, None)]
    while stack:
        node, depth, path = stack.pop()
        if depth > MAX_DOCUMENT_DEPTH:
            keys = []
            while path is not None:
                key, path = path
                keys.append(escape_pointer_token(key) if isinstance(key, str) else str(key))
            raise CompileLimitError(f"the schema document nests more than {MAX_DOCUMENT_DEPTH} levels deep",
                                    limit="max_document_depth", value=MAX_DOCUMENT_DEPTH,
                                    pointer="".join("/" + k for k in reversed(keys)))
        if isinstance(node, dict):
            stack.extend((v, depth + 1, (k, path)) for k, v in node.items())
        elif isinstance(node, list):
            stack.extend((v, depth + 1, (i, path)) for i, v in enumerate(node))
