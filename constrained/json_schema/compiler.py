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

import functools
import json
import re
import sys
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

from constrained.deadline import DEFAULT_COMPILE_TIMEOUT, check_deadline, compile_deadline
from constrained.errors import (
    CompileLimitError,
    CompileTimeoutError,
    ConstrainedError,
    InvalidSchemaError,
    UnsatisfiableSchemaError,
    UnsupportedGrammarError,
    UnsupportedSchemaError,
)
from constrained.grammar.ir import JSON_SCHEMA_SOURCE, Grammar, Rule, TerminalDef, derivable
from constrained.json_schema import grounding
from constrained.json_schema.conjunction import (
    VALIDATION_KEYWORDS,
    Conjunction,
    Part,
    conjunction_key,
    flatten,
    item_items,
    property_items,
    root_part,
    tuple_length,
)
from constrained.json_schema.ecma_regex import pattern_search_regex, regex_from_ast
from constrained.json_schema.formats import FORMAT_REGEXES
from constrained.json_schema.json_string import encoded_chars_ast, json_string_regex, length_bounded_any_string
from constrained.json_schema.keywords import ANNOTATIONS
from constrained.json_schema.numbers import decimal_range_regex, integer_bounds, integer_range_regex
from constrained.json_schema.options import JsonSchemaOptions, OptionError
from constrained.json_schema.resolver import Located, SchemaIndex, escape_pointer_token
from constrained.json_schema.validation import SchemaValidators

NUMBER_REGEX = r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"
STRING_REGEX = r'"(?:[^"\\\x00-\x1f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"'
RAW_STRING_REGEX = r'"[^"\\\x00-\x1f]*"'     # JSON strings written without escapes
STRING_BODY = r"[\s\S]*"
JSON_TYPES = ("null", "boolean", "object", "array", "number", "string", "integer")

# keywords translated structurally (exactly, or as a superset plus a value check)
KNOWN = VALIDATION_KEYWORDS | {"then", "else"}
# value kinds: "number" is integer or fractional
_KINDS = {"null": {"null"}, "boolean": {"boolean"}, "object": {"object"}, "array": {"array"},
          "string": {"string"}, "integer": {"integer"}, "number": {"integer", "fraction"}}
# keywords that hold for every value outside one kind (their validators skip other values)
_KEYWORD_KIND: dict[str, frozenset[str]] = {
    **dict.fromkeys(("required", "properties", "patternProperties", "additionalProperties", "minProperties",
                     "maxProperties", "dependentRequired", "dependentSchemas", "dependencies", "propertyNames",
                     "unevaluatedProperties"), frozenset({"object"})),
    **dict.fromkeys(("items", "prefixItems", "additionalItems", "minItems", "maxItems", "uniqueItems", "contains",
                     "minContains", "maxContains", "unevaluatedItems"), frozenset({"array"})),
    **dict.fromkeys(("minLength", "maxLength", "pattern"), frozenset({"string"})),
    **dict.fromkeys(("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"),
                    frozenset({"integer", "fraction"})),
}
_ALL_KINDS = frozenset({"null", "boolean", "object", "array", "string", "integer", "fraction"})
MAX_BRANCHES = 64        # anyOf/oneOf branches distributed over their conjunction
MAX_DISTRIBUTED = 4      # nested distributions along one conjunction
MAX_CONJUNCTIONS = 2000  # sub-grammars before disjunctions stop being expanded (then checked)
MAX_DOCUMENT_DEPTH = 256  # JSON nesting of the schema document itself
MAX_NESTING = 160         # sub-schemas compiled one inside the other (values nested that deep)
LARGE_ENUM = 64          # enum strings past which one terminal holds their canonical spellings
MAX_KEY_PATTERNS = 3     # patternProperties split exactly into 2**n key classes
MAX_COUNTED_LENGTH = 24  # string length bounds counted by the automaton (longer: value checks)


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


class _Builder:
    """Accumulates terminals (deduplicated by their regexes) and rules."""

    def __init__(self) -> None:
        self.terminals: dict[tuple, str] = {}     # (regex, also, excluding) -> name
        self.rules: list[Rule] = []
        self._names: set[str] = set()
        self._next: dict[str, int] = {}

    def fresh(self, hint: str) -> str:
        base = re.sub(r"[^a-zA-Z0-9_]", "_", hint)[:40] or "s"
        name, i = base, self._next.get(base, 1)
        while name in self._names:
            i += 1
            name = f"{base}_{i}"
        self._next[base] = i
        self._names.add(name)
        return name

    def term(self, regex: str, hint: str, also: tuple[str, ...] = (), excluding: tuple[str, ...] = ()) -> str:
        key = (regex, tuple(also), tuple(excluding))
        name = self.terminals.get(key)
        if name is None:
            name = self.terminals[key] = self.fresh(hint.upper())
        return name

    def lit(self, text: str) -> str:
        return self.term(re.escape(text), "LIT_" + ("".join(c for c in text if c.isalnum()) or "P"))

    def rule(self, lhs: str, *rhs: str) -> None:
        self.rules.append(Rule(lhs, tuple(rhs)))

    def terminal_defs(self) -> tuple[TerminalDef, ...]:
        out = []
        for (regex, also, excluding), name in self.terminals.items():
            if also or excluding:
                out.append(TerminalDef(name, regex, also=also, excluding=excluding))
            else:
                out.append(TerminalDef(name, regex))
        return tuple(out)


class SchemaCompiler:
    """Compiles one schema document; use `compile_json_schema`."""

    def __init__(self, schema: Any, options: JsonSchemaOptions) -> None:
        self.schema = schema
        self.options = options
        self.index = SchemaIndex(schema, documents=dict(options.documents or {}))
        self.validators = SchemaValidators(self.index, formats=options.formats == "assert")
        self.dialect = self.validators.dialect      # the draft every keyword is read under
        self.b = _Builder()
        self.notes: list[SchemaNote] = []
        self._noted: set[SchemaNote] = set()
        self.checked: dict[tuple[str, str], Located] = {}
        self._memo: dict[tuple, str | None] = {}
        self._seen_dicts: set[int] = set()
        self._any: str | None = None
        self._ws: tuple[str, ...] | None = None
        self._fits: dict[tuple, bool | None] = {}
        self._stripped: dict[int, Located] = {}
        self._depth = 0                             # conjunctions being compiled, one inside the other

    # ------------------------------------------------------------------ entry
    def compile(self) -> SchemaCompilation:
        root = self.conj_nt(self.flatten([root_part(self.index)]), "root")
        if root is None:
            raise UnsatisfiableSchemaError("no JSON value satisfies the schema", pointer="")
        self.b.rule("start", root)
        rules = _productive(self.b.rules, {name for name in self.b.terminals.values()})
        if not any(r.lhs == "start" for r in rules):
            raise UnsatisfiableSchemaError("no JSON value satisfies the schema", pointer="")
        checks = None
        if self.checked:
            from constrained.json_schema.value_checks import JsonValueChecks

            checks = JsonValueChecks(self.index, self.validators, list(self.checked.values()))
        used = {s for r in rules for s in r.rhs}
        terminals = tuple(t for t in self.b.terminal_defs() if t.name in used)
        grammar = Grammar(terminals=terminals, rules=tuple(rules), start="start", source=JSON_SCHEMA_SOURCE,
                          checks=checks)
        return SchemaCompilation(grammar, self.notes, sorted(self.checked))

    # ------------------------------------------------------------------ helpers
    def flatten(self, items) -> Conjunction | None:
        def ignored(pointer: str, keywords: list[str]) -> None:
            for k in keywords:
                self.note(pointer, k, "ignored beside $ref, as drafts up to 07 specify")

        return flatten(items, self.index, self.dialect, on_ignored=ignored)

    def ws(self) -> tuple[str, ...]:
        """The optional-whitespace symbols between two JSON tokens (none when compact)."""
        if self._ws is None:
            if self.options.whitespace == "compact":
                self._ws = ()
            else:
                bound = "+" if self.options.whitespace == "any" else f"{{1,{self.options.max_whitespace}}}"
                ws = self.b.fresh("ws")
                self.b.rule(ws)
                self.b.rule(ws, self.b.term(f"[ \\t\\n\\r]{bound}", "WS"))
                self._ws = (ws,)
        return self._ws

    def note(self, pointer: str, keyword: str, text: str) -> None:
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

    def any_value(self) -> str:
        """The nonterminal of every JSON value (the ``true`` schema)."""
        if self._any is None:
            b, w = self.b, self.ws()
            value, obj, members, arr, elems = (b.fresh(n) for n in ("any_value", "any_object", "any_members",
                                                                       "any_array", "any_elements"))
            self._any = value
            string = b.term(STRING_REGEX, "STRING")
            for alt in (obj, arr, string, b.term(NUMBER_REGEX, "NUMBER"), b.lit("true"), b.lit("false"),
                        b.lit("null")):
                b.rule(value, alt)
            lb, rb, colon, comma = b.lit("{"), b.lit("}"), b.lit(":"), b.lit(",")
            b.rule(obj, lb, *w, rb)
            b.rule(obj, lb, *w, members, *w, rb)
            b.rule(members, string, *w, colon, *w, value)
            b.rule(members, members, *w, comma, *w, string, *w, colon, *w, value)
            ls, rs = b.lit("["), b.lit("]")
            b.rule(arr, ls, *w, rs)
            b.rule(arr, ls, *w, elems, *w, rs)
            b.rule(elems, value)
            b.rule(elems, elems, *w, comma, *w, value)
        return self._any

    def _survey(self, conj: Conjunction) -> None:
        """Notes for unknown keywords (once per schema object)."""
        for p in conj:
            if id(p.schema) in self._seen_dicts:
                continue
            self._seen_dicts.add(id(p.schema))
            for k in p.schema:
                if k in ANNOTATIONS or k in KNOWN:
                    continue
                if self.dialect.evaluates(k):      # draft-03's divisibleBy, disallow, extends
                    self.check(p, k, f"{k} ({self.dialect.name}) is not translated")
                else:
                    self.note(p.pointer, k, "unknown keyword: an annotation without validation meaning")

    # ------------------------------------------------------------------ conjunctions
    def conj_nt(self, conj: Conjunction | None, hint: str) -> str | None:
        """The nonterminal of a conjunction (None: no value satisfies it)."""
        if conj is None:
            return None
        if not conj:
            return self.any_value()
        key = conjunction_key(conj)
        if key in self._memo:
            return self._memo[key]
        check_deadline(pointer=conj[0].pointer)
        name = self.b.fresh("s_" + (hint or "v"))
        self._memo[key] = name
        if self._depth >= MAX_NESTING:
            raise CompileLimitError(f"sub-schemas nested more than {MAX_NESTING} deep", limit="max_nesting",
                                    value=MAX_NESTING, pointer=conj[0].pointer)
        self._depth += 1
        try:
            alternatives = self._alternatives(conj)
        except CompileTimeoutError as e:
            if e.pointer is not None:
                raise
            raise e.at(conj[0].pointer) from None     # out of time in an automaton: say which sub-schema
        finally:
            self._depth -= 1
        if not alternatives:
            self._memo[key] = None
            return None
        for rhs in dict.fromkeys(alternatives):
            self.b.rule(name, *rhs)
        return name

    def items_nt(self, items: list, hint: str) -> str | None:
        return self.conj_nt(self.flatten(items), hint)

    def _alternatives(self, conj: Conjunction) -> list[tuple[str, ...]]:
        self._survey(conj)
        if any(p.has("const") or p.has("enum") for p in conj):
            return self._enum(conj)
        for kw in ("anyOf", "oneOf"):
            for i, p in enumerate(conj):
                if p.has(kw):
                    return self._distribute(conj, i, kw)
        for i, p in enumerate(conj):
            if p.has("if") or p.has("then") or p.has("else"):
                return self._if_then_else(conj, i)
        for p in conj:
            for k in ("$dynamicRef", "$recursiveRef"):
                if p.has(k):
                    self.check(p, k, f"{k} is resolved dynamically; the grammar allows any value here")
        kinds = self._kinds(conj)
        out: list[tuple[str, ...]] = []
        b = self.b
        if "null" in kinds:
            out.append((b.lit("null"),))
        if "boolean" in kinds:
            out += [(b.lit("true"),), (b.lit("false"),)]
        if "integer" in kinds or "fraction" in kinds:
            out += grounding.grounded_numbers(self, conj, self._number(conj, fractions="fraction" in kinds))
        if "string" in kinds:
            out += self._string(conj)
        if "array" in kinds:
            out += self._array(conj)
        if "object" in kinds:
            out += self._object(conj)
        return out

    def _distribute(self, conj: Conjunction, i: int, kw: str) -> list[tuple[str, ...]]:
        p = conj[i]
        branches = p.get(kw)
        if not isinstance(branches, list) or not branches:
            raise InvalidSchemaError(f"{kw} must be a non-empty array", keyword=kw, pointer=p.pointer)
        rest = conj[:i] + (p.without(kw),) + conj[i + 1:]
        depth = sum(1 for q in conj for k in q.done if k in ("anyOf", "oneOf", "if"))
        if len(branches) > MAX_BRANCHES or depth >= MAX_DISTRIBUTED or len(self._memo) > MAX_CONJUNCTIONS:
            self.check(p, kw, f"{kw} with {len(branches)} branches at distribution depth {depth} "
                              f"({len(self._memo)} sub-grammars so far) is not expanded; the grammar ignores it")
            return self._alternatives(rest)
        items = [(sub, p.loc.base, f"{p.pointer}/{kw}/{j}") for j, sub in enumerate(branches)]
        if kw == "oneOf" and not self._pairwise_disjoint(items):
            self.check(p, "oneOf", "oneOf branches that may overlap are compiled as anyOf")
        out = []
        for j, item in enumerate(items):
            nt = self.conj_nt(self.flatten(list(rest) + [item]), f"{kw}{j}")
            if nt is not None:
                out.append((nt,))
        return out

    def _if_then_else(self, conj: Conjunction, i: int) -> list[tuple[str, ...]]:
        p = conj[i]
        rest = conj[:i] + (Part(p.loc, p.done | {"if", "then", "else"}),) + conj[i + 1:]
        base = p.loc.base
        if not p.has("if"):
            return self._alternatives(rest)        # then/else without if: no effect
        if not p.has("then") and not p.has("else"):
            return self._alternatives(rest)        # if alone: an annotation
        if len(self._memo) > MAX_CONJUNCTIONS:
            self.check(p, "if", f"if/then/else is not expanded ({len(self._memo)} sub-grammars so far)")
            return self._alternatives(rest)
        cond = (p.get("if"), base, p.pointer + "/if")
        then = (p.get("then", True), base, p.pointer + "/then")
        other = (p.get("else", True), base, p.pointer + "/else")
        self.check(p, "if", "if/then/else is compiled as (if and then) or else, without 'not if'")
        out = []
        for j, items in enumerate(([cond, then], [other])):
            nt = self.conj_nt(self.flatten(list(rest) + items), f"if{j}")
            if nt is not None:
                out.append((nt,))
        return out

    def _pairwise_disjoint(self, items: list) -> bool:
        """Whether no value can satisfy two of these sub-schemas (then oneOf is anyOf)."""
        sigs = []
        for item in items:
            conj = self.flatten([item])
            if conj is None:
                sigs.append(None)
                continue
            sigs.append(self._signature(conj))
        for a, b in combinations(sigs, 2):
            if a is None or b is None:
                continue
            kinds_a, disc_a = a
            kinds_b, disc_b = b
            if not (kinds_a & kinds_b):
                continue
            if kinds_a | kinds_b <= {"object"} and any(
                    k in disc_b and not any(_json_equal(x, y) for x in disc_a[k] for y in disc_b[k])
                    for k in disc_a):
                continue
            return False
        return True

    def _signature(self, conj: Conjunction) -> tuple[frozenset, dict]:
        kinds = set(_ALL_KINDS)
        disc: dict[str, list] = {}
        for p in conj:
            if p.has("type"):
                kinds &= self._type_kinds(p, check=False)
            for kw in ("const", "enum"):
                if p.has(kw):
                    vals = [p.get(kw)] if kw == "const" else p.get(kw)
                    if isinstance(vals, list):
                        kinds &= {k for v in vals for k in _value_kinds(v)}
            props = p.get("properties")
            required = p.get("required") if isinstance(p.get("required"), list) else []
            if isinstance(props, dict):
                for name in required:
                    vals = self._fixed_values(props.get(name))
                    if vals is not None:
                        disc[name] = vals
        return frozenset(kinds), disc

    def _fixed_values(self, sub: Any) -> list | None:
        """The values a property's schema ``sub`` admits at most (its const or enum), if it says."""
        if not isinstance(sub, dict) or (self.dialect.refs_replace_siblings and "$ref" in sub):
            return None                             # the $ref target decides, not its siblings
        for kw in ("const", "enum"):
            if kw in sub and self.dialect.evaluates(kw):
                vals = [sub["const"]] if kw == "const" else sub["enum"]
                return vals if isinstance(vals, list) else None
        return None

    def _constrained_kinds(self, schema: Any) -> set[str] | None:
        """The one kind of value every keyword of ``schema`` constrains (None: not one kind)."""
        if not isinstance(schema, dict) or "$ref" in schema:
            return None
        kinds = {_KEYWORD_KIND.get(k) for k in schema if k not in ANNOTATIONS and self.dialect.evaluates(k)}
        if len(kinds) != 1 or None in kinds:
            return None
        return set(kinds.pop())

    def _type_kinds(self, part: Part, *, check: bool = True) -> set[str]:
        """The value kinds ``part``'s ``type`` allows (draft-03 ``any`` and schemas in a type list:
        every kind, the schemas enforced by a value check)."""
        t = part.get("type")
        if self.dialect.name == "draft3":
            types = t if isinstance(t, list) else [t]
            if "any" in types:
                return set(_ALL_KINDS)
            if any(isinstance(x, dict) for x in types):
                if check:
                    self.check(part, "type", "draft-03 schemas inside type are not translated")
                return set(_ALL_KINDS)
        return _kinds_of(t, part.pointer)

    def _kinds(self, conj: Conjunction) -> set[str]:
        kinds = set(_ALL_KINDS)
        for p in conj:
            if p.has("type"):
                kinds &= self._type_kinds(p)
            if p.has("not"):
                neg = p.get("not")
                if neg is True or neg == {}:
                    return set()
                if isinstance(neg, dict) and set(neg) - ANNOTATIONS == {"type"}:
                    kinds -= _kinds_of(neg["type"], p.pointer + "/not")
                elif neg is not False:
                    # a schema whose keywords all constrain one kind holds for every other value,
                    # so its negation admits that kind only (the check decides the rest)
                    kinds &= self._constrained_kinds(neg) or _ALL_KINDS
                    self.check(p, "not", "not is enforced by validation")
        if "fraction" in kinds and "integer" not in kinds:
            # every part that narrows the kinds is validated: the one excluding integers may be any of them
            for p in conj:
                if p.has("type") or p.has("not"):
                    self.check(p, "type", "'a number that is not an integer' is compiled as any number")
            kinds.add("integer")
        return kinds

    # ------------------------------------------------------------------ enum / const
    def _enum(self, conj: Conjunction) -> list[tuple[str, ...]]:
        source = next(p for p in conj if p.has("const") or p.has("enum"))
        values = [source.get("const")] if source.has("const") else source.get("enum")
        if not isinstance(values, list):
            raise InvalidSchemaError("enum must be an array", keyword="enum", pointer=source.pointer)
        # validated against everything but the enum itself (already known to hold: an
        # enum of n values would cost n^2 comparisons)
        keyword = "const" if source.has("const") else "enum"
        parts = [self._without(p, keyword) if p is source else p.loc for p in conj]
        parts = [loc for loc in parts if loc is not None]
        out: list[tuple[str, ...]] = []
        strings: list[str] = []
        for v in values:
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                out += self._number_value(parts, v)
            elif all(self.validators.is_valid(loc, v) for loc in parts):
                if isinstance(v, str):
                    strings.append(v)
                else:
                    out.append(self._value_symbols(v))
        return self._string_values(source, grounding.enum_strings(self, conj, strings)) + out

    def _without(self, part: Part, keyword: str) -> Located | None:
        """``part``'s sub-schema without ``keyword`` (None: nothing else in it to check)."""
        rest = {k: v for k, v in part.schema.items() if k != keyword}
        if not any(part.has(k) and k not in ANNOTATIONS for k in rest):
            return None
        key = id(part.schema)
        if key not in self._stripped:     # kept alive: validators are cached by the schema's id
            loc = part.loc
            self._stripped[key] = Located(rest, loc.base, loc.pointer, loc.resource, loc.resource_pointer)
        return self._stripped[key]

    def _string_values(self, source: Part, strings: list[str]) -> list[tuple[str, ...]]:
        """Alternatives for an enum's strings: one terminal each, or, past `LARGE_ENUM`
        strings, one terminal of their canonical JSON spellings (a finite automaton built
        directly; every escape spelling of thousands of strings would not fit one)."""
        if len(strings) <= LARGE_ENUM:
            return [(self._fixed_string(v, "CONST_STR"),) for v in strings]
        if self.options.fixed_strings != "canonical":
            self.note(source.pointer, "enum", f"an enum of {len(strings)} strings (over {LARGE_ENUM}) accepts "
                                              f"each string's canonical JSON spelling only")
        spellings = sorted({_literal_regex(json.dumps(v, ensure_ascii=False)) for v in strings})
        return [(self.b.term("(?:" + "|".join(spellings) + ")", "ENUM_STR"),)]

    def _number_value(self, parts: list[Located], value: int | float) -> list[tuple[str, ...]]:
        """The spellings of an enum/const number valid for every sub-schema of ``parts``.

        An integral value has two JSON forms that parse differently: ``3`` (an int) and
        ``3.0``/``3.00`` (a float, not an integer in drafts 03/04, and not even the same
        number past 2**53); each form is validated as what it parses to."""
        # each form must still be the enum's value (parts no longer hold the enum itself)
        parsed = {form: json.loads(form) for form in _number_forms(value)}
        valid = [form for form, v in parsed.items()
                 if _json_equal(v, value) and all(self.validators.is_valid(loc, v) for loc in parts)]
        return [(self._number_symbol(valid),)] if valid else []

    def _number_symbol(self, forms: list[str]) -> str:
        """A terminal for the number spellings ``forms`` (of `_number_forms`: ``3``,
        ``3.0``, or both); ``3.0`` stands for every ``3.000...``."""
        if len(forms) == 2:
            return self.b.term(re.escape(forms[0]) + r"(?:\.0+)?", "CONST_NUM")
        if forms[0].endswith(".0"):
            return self.b.term(re.escape(forms[0][:-1]) + "0+", "CONST_NUM")
        return self.b.lit(forms[0])

    def _fixed_string(self, text: str, hint: str, *, canonical: bool = False) -> str:
        """A terminal for the JSON string ``text`` in the spellings ``fixed_strings`` allows
        (only ``json.dumps``' spelling when ``canonical``)."""
        if canonical or self.options.fixed_strings == "canonical":
            return self.b.term(_literal_regex(json.dumps(text, ensure_ascii=False)), hint)
        return self.b.term(_json_literal_regex(text), hint)

    def _value_symbols(self, value: Any) -> tuple[str, ...]:
        """Symbols spelling exactly the JSON value ``value`` (object keys in the given order)."""
        b, w = self.b, self.ws()
        if isinstance(value, str):
            return (self._fixed_string(value, "CONST_STR"),)
        if isinstance(value, bool) or value is None:
            return (b.lit(json.dumps(value)),)
        if isinstance(value, (int, float)):
            # inside a container: the form the schema wrote (what the enum filter validated),
            # and both integral forms where the draft makes them the same value
            forms = _number_forms(value)
            if len(forms) == 2 and not (self.dialect.floats_are_integers and abs(value) <= 2 ** 53):
                return (b.lit(forms[0] if isinstance(value, int) else forms[1]),)
            return (self._number_symbol(forms),)
        if isinstance(value, list):
            out: list[str] = [b.lit("["), *w]
            for i, item in enumerate(value):
                if i:
                    out += [*w, b.lit(","), *w]
                out += self._value_symbols(item)
            return (*out, *w, b.lit("]"))
        if isinstance(value, dict):
            out = [b.lit("{"), *w]
            for i, (k, item) in enumerate(value.items()):
                if i:
                    out += [*w, b.lit(","), *w]
                out += [self._fixed_string(k, "KEY"), *w, b.lit(":"), *w]
                out += self._value_symbols(item)
            return (*out, *w, b.lit("}"))
        raise InvalidSchemaError(f"not a JSON value: {value!r}", keyword="enum")

    # ------------------------------------------------------------------ numbers
    def _number(self, conj: Conjunction, *, fractions: bool) -> list[tuple[str, ...]]:
        lows: list[tuple[Any, bool]] = []
        highs: list[tuple[Any, bool]] = []
        for p in conj:
            lo, xlo = self._bound(p, "minimum", "exclusiveMinimum")
            hi, xhi = self._bound(p, "maximum", "exclusiveMaximum")
            for k, v in (("minimum", lo), ("maximum", hi), ("exclusiveMinimum", xlo), ("exclusiveMaximum", xhi)):
                if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
                    raise InvalidSchemaError(f"{k} must be a number, not {v!r}", keyword=k, pointer=p.pointer)
            lows += [(v, x) for v, x in ((lo, False), (xlo, True)) if v is not None]
            highs += [(v, x) for v, x in ((hi, False), (xhi, True)) if v is not None]
            m = p.get("multipleOf")
            if m is not None:
                if isinstance(m, bool) or not isinstance(m, (int, float)) or m <= 0:
                    raise InvalidSchemaError(f"multipleOf must be a positive number, not {m!r}",
                                             keyword="multipleOf", pointer=p.pointer)
                if not (m == 1 and not fractions):
                    self.check(p, "multipleOf", "multipleOf is enforced by validation")
        lo, xlo = _tightest_all(lows, lower=True)
        hi, xhi = _tightest_all(highs, lower=False)
        pointer = conj[0].pointer
        if fractions and lo is None and hi is None:
            return [(self.b.term(NUMBER_REGEX, "NUMBER"),)]
        out: list[tuple[str, ...]] = []
        try:
            # integer spellings parse to ints, which validators compare exactly with the bound
            ilo, ihi = integer_bounds(None if xlo else lo, None if xhi else hi,
                                      lo if xlo else None, hi if xhi else None)
            regex = integer_range_regex(ilo, ihi)
            if not fractions and self.dialect.floats_are_integers and \
                    all(v is None or abs(v) <= 2 ** 53 for v in (ilo, ihi)):
                regex = f"(?:{regex})(?:\\.0+)?"      # 1.0 is an integer too (from draft 6); its float is exact
            out.append((self.b.term(regex, "INTEGER"),))
        except ValueError as e:
            if "empty" not in str(e):
                raise InvalidSchemaError(str(e), keyword="minimum", pointer=pointer) from e
        if not fractions:
            return out
        try:
            # spellings with a fraction parse to floats, compared after rounding
            low = _float_safe_bound(lo, xlo, upward=True)
            high = _float_safe_bound(hi, xhi, upward=False)
            out.append((self.b.term(decimal_range_regex(low, high), "NUMBER_RANGE",
                                    also=(r"-?[0-9]+\.[0-9]+",)),))
        except ValueError as e:
            if "empty" not in str(e):
                raise InvalidSchemaError(str(e), keyword="minimum", pointer=pointer) from e
        return out

    def _bound(self, part: Part, inclusive: str, exclusive: str) -> tuple[Any, Any]:
        """``part``'s (inclusive, exclusive) bound on one side, as its draft reads them.

        Drafts 03/04: ``exclusiveMinimum`` is a flag of ``minimum`` (any truthy value
        makes it exclusive; alone it does nothing).  Later drafts: a bound of its own,
        compared as a number even when written ``true``/``false`` (1/0), as the validator does."""
        bound, other = part.get(inclusive), part.get(exclusive)
        if self.dialect.exclusive_bounds_are_flags:
            return (None, bound) if other else (bound, None)
        if isinstance(other, bool):
            self.note(part.pointer, exclusive, f"{exclusive}: {str(other).lower()} is the number "
                                               f"{int(other)} in {self.dialect.name}")
            other = int(other)
        return bound, other

    # ------------------------------------------------------------------ strings
    def _string(self, conj: Conjunction) -> list[tuple[str, ...]]:
        regexes = self._string_regexes(conj)
        if regexes is None:
            return []
        term = grounding.grounded_string(self, conj, regexes)    # x-grounded: a substring of the text
        if term is not None:
            return [(term,)]
        term = self._string_terminal(regexes, "STRING")
        return [] if term is None else [(term,)]

    def _string_regexes(self, conj: Conjunction) -> list[tuple[Part, str, str]] | None:
        """Character-level regexes ``(part, keyword, regex)`` a string must fully match
        (None: no string can); keywords that cannot be translated become checks."""
        mn, mx, length_part = _count_bounds(conj, "minLength", "maxLength")
        pieces: list[tuple[Part, str, str]] = []
        for p in conj:
            if p.has("pattern"):
                pat = p.get("pattern")
                if not isinstance(pat, str):
                    raise InvalidSchemaError("pattern must be a string", keyword="pattern", pointer=p.pointer)
                try:
                    pieces.append((p, "pattern", pattern_search_regex(pat)))
                except ConstrainedError as e:
                    self.check(p, "pattern", f"pattern {pat!r} has no regular translation ({e})")
            if p.has("format"):
                f = p.get("format")
                if self.options.formats == "annotation":
                    self.note(p.pointer, "format", f"format {f!r} is an annotation (formats='annotation')")
                elif f in FORMAT_REGEXES:
                    pieces.append((p, "format", FORMAT_REGEXES[f]))
                elif self.options.unknown_formats == "error":
                    raise UnsupportedSchemaError(f"unknown format {f!r}", keyword="format", pointer=p.pointer)
                else:
                    self.note(p.pointer, "format", f"unknown format {f!r}: an annotation, not enforced")
        if mx is not None and mn > mx:
            return None
        # a length automaton needs ~20 states per counted character (UTF-8, escapes,
        # surrogate pairs); long bounds are validated instead of counted
        if mx is not None and mx > MAX_COUNTED_LENGTH:
            self.check(length_part["maxLength"], "maxLength",
                       f"maxLength above {MAX_COUNTED_LENGTH} is enforced by validation")
            mx = None
        if mn > MAX_COUNTED_LENGTH:
            self.check(length_part["minLength"], "minLength",
                       f"minLength above {MAX_COUNTED_LENGTH} is enforced by validation")
            mn = 0
        if mn or mx is not None:
            part = length_part.get("maxLength") or length_part["minLength"]
            pieces.append((part, "maxLength" if mx is not None else "minLength",
                           ("length", mn, mx)))  # type: ignore[arg-type]
        return pieces

    def _string_terminal(self, pieces: list, hint: str, *, excluding: tuple[str, ...] = ()) -> str | None:
        """A terminal for JSON strings whose characters match every piece (None: no string does).
        Pieces that make the automaton too large are dropped from the grammar and checked."""
        def regex_of(piece) -> str:
            r = piece[2]
            if isinstance(r, tuple):
                return length_bounded_any_string(r[1], r[2]) if r[0] == "length" else r[1]
            return json_string_regex(r)

        kept = list(pieces)
        while True:
            regexes = []
            try:
                regexes = [regex_of(pc) for pc in kept]
            except ConstrainedError:
                regexes = None  # type: ignore[assignment]
            main, also = (regexes[0], tuple(regexes[1:])) if regexes else (STRING_REGEX, ())
            if regexes is not None:
                fits = self._fits_terminal(main, also, excluding)
                if fits is not None:
                    if not fits:
                        return None
                    return self.b.term(main, hint, also, excluding)
            if not kept:
                raise UnsupportedSchemaError("a JSON string terminal exceeds the automaton size limit",
                                             keyword="pattern", pointer=pieces[0][0].pointer if pieces else "")
            # drop the costliest piece: lengths first, then the last added
            drop = next((pc for pc in kept if isinstance(pc[2], tuple) and pc[2][0] == "length"), kept[-1])
            kept.remove(drop)
            self.check(drop[0], drop[1], f"{drop[1]} together with the other string constraints needs too "
                                         "large an automaton")

    def _fits_terminal(self, main: str, also: tuple, excluding: tuple) -> bool | None:
        """True if the terminal compiles and matches something, False if it matches nothing,
        None if it is too large."""
        key = (main, also, excluding)
        if key not in self._fits:
            from constrained.automata.byte_dfa import compile_terminal

            if key in _TOO_LARGE:               # known from an earlier schema of this process
                self._fits[key] = None
                return None
            try:
                dfa = compile_terminal(main, also, excluding)
                self._fits[key] = bool(dfa.accepting.any())
            except CompileTimeoutError:
                raise                           # out of time, not too large: nothing to drop
            except CompileLimitError:
                self._fits[key] = None
                if len(_TOO_LARGE) >= 1024:
                    _TOO_LARGE.clear()
                _TOO_LARGE.add(key)
        return self._fits[key]

    # ------------------------------------------------------------------ arrays
    def _array(self, conj: Conjunction) -> list[tuple[str, ...]]:
        b, w = self.b, self.ws()
        lo, hi, bound_parts = _count_bounds(conj, "minItems", "maxItems")
        for p in conj:
            if p.get("uniqueItems") is True:
                self.check(p, "uniqueItems", "uniqueItems is enforced by validation")
            if p.has("contains"):
                self.check(p, "contains", "contains (with minContains/maxContains) is enforced by validation")
            if p.has("unevaluatedItems"):
                self.check(p, "unevaluatedItems", "unevaluatedItems is enforced by validation")
        n_prefix = tuple_length(conj)
        element = [self.items_nt(item_items(conj, i, self.index), f"item{i}") for i in range(n_prefix)]
        tail_nt = self.items_nt(item_items(conj, n_prefix, self.index), "items")
        # the longest possible array, and the positions that need their own nonterminal
        longest = hi
        for i, nt in enumerate(element):
            if nt is None:
                longest = i if longest is None else min(longest, i)
                break
        if tail_nt is None:
            longest = n_prefix if longest is None else min(longest, n_prefix)
        if longest is not None and lo > longest:
            return []
        cap = self.options.max_repetition
        if n_prefix > cap:
            raise UnsupportedSchemaError(f"a tuple of {n_prefix} positions exceeds max_repetition={cap}",
                                         keyword="prefixItems", pointer=conj[0].pointer)
        if (longest is not None and longest > cap) or lo > cap - 1:
            kw = "maxItems" if longest is not None and longest > cap else "minItems"
            self.check(bound_parts.get(kw) or conj[0], kw,
                       f"array bounds beyond max_repetition={cap} unrolled positions")
            if longest is not None and longest > cap:
                longest = None if tail_nt is not None else longest
            lo = min(lo, cap - 1)
        distinct = max(n_prefix, lo) + 1
        if longest is not None:
            distinct = min(distinct, longest)
        last = longest if longest is not None else distinct   # positions 1..last get nonterminals
        names = [b.fresh(f"arr_from{j}") for j in range(1, last + 1)]
        comma = b.lit(",")

        def elem(j: int) -> str:
            return element[j - 1] if j <= n_prefix else tail_nt  # type: ignore[return-value]

        for j in range(1, last + 1):
            p = names[j - 1]
            if j >= lo:
                b.rule(p, elem(j))
            if longest is None and j == last:
                b.rule(p, elem(j), *w, comma, *w, p)        # the repeating tail
            elif j < last:
                b.rule(p, elem(j), *w, comma, *w, names[j])
        ls, rs = b.lit("["), b.lit("]")
        out: list[tuple[str, ...]] = []
        if lo == 0:
            out.append((ls, *w, rs))
        if last >= 1:
            out.append((ls, *w, names[0], *w, rs))
        return out

    # ------------------------------------------------------------------ objects
    def _object(self, conj: Conjunction) -> list[tuple[str, ...]]:
        b, w = self.b, self.ws()
        order: list[str] = []
        required: list[str] = []
        for p in conj:
            props = p.get("properties", {})
            if not isinstance(props, dict):
                raise InvalidSchemaError("properties must be an object", keyword="properties", pointer=p.pointer)
            order += [k for k in props if k not in order]
            req = p.get("required", [])
            if self.dialect.required_in_property:   # draft 03: a truthy "required" inside a property's schema
                req = [k for k, sub in props.items() if isinstance(sub, dict) and sub.get("required", False)]
            elif isinstance(req, bool):     # the draft-03 spelling under a later draft
                self.check(p, "required", f"a boolean required ({self.dialect.name}) is enforced by validation")
                req = []
            if not isinstance(req, list) or not all(isinstance(r, str) for r in req):
                raise InvalidSchemaError("required must be an array of strings", keyword="required",
                                         pointer=p.pointer)
            required += [r for r in req if r not in required]
            pats = p.get("patternProperties", {})
            if not isinstance(pats, dict):
                raise InvalidSchemaError("patternProperties must be an object", keyword="patternProperties",
                                         pointer=p.pointer)
            for k in ("minProperties", "maxProperties", "dependentRequired", "dependentSchemas",
                      "dependencies", "unevaluatedProperties"):
                if p.has(k):
                    self.check(p, k, f"{k} is enforced by validation")
        names = order + [r for r in required if r not in order]
        name_items = [(p.get("propertyNames"), p.loc.base, p.pointer + "/propertyNames")
                      for p in conj if p.has("propertyNames")]
        name_conj = self.flatten(name_items) if name_items else ()
        declared: list[tuple[str, str, bool]] = []

        def undecided(part: Part, pat: str) -> None:
            self.check(part, "patternProperties", f"pattern {pat!r} has no regular translation")

        for name in names:
            ok_name = name_conj is not None and all(self.validators.is_valid(q.loc, name) for q in name_conj)
            nt = self.items_nt(property_items(conj, name, self.index, undecided), "p_" + name) if ok_name \
                else None
            if nt is None:
                if name in required:
                    return []
                continue
            declared.append((name, nt, name in required))
        colon, comma = b.lit(":"), b.lit(",")
        # with members in any order the object is validated when it closes, so extra keys
        # need not exclude the declared names (cheaper automata: plain strings)
        unordered = self.options.property_order == "any" and bool(declared)
        extras = self._extra_members(conj, [] if unordered else names, name_conj)

        def kv(name: str, value: str) -> tuple[str, ...]:
            return (self._fixed_string(name, "KEY", canonical=len(names) > LARGE_ENUM), *w, colon, *w, value)

        kvxs = [(key, *w, colon, *w, value) for key, value in extras]
        lb, rb = b.lit("{"), b.lit("}")
        if self.options.property_order == "any" and declared:
            # members in any order: a superset (repeats, missing required) checked when the object completes
            self.check(conj[0], "properties", "property_order='any': required members and unique keys are "
                                              "checked")
            # one list rule over one member nonterminal: a parser set after a member
            # then holds one list item, not one per declared key
            members, member = b.fresh("obj_members"), b.fresh("obj_member")
            for alternative in [kv(name, value) for name, value, _ in declared] + kvxs:
                b.rule(member, *alternative)
            b.rule(members, member)
            b.rule(members, members, *w, comma, *w, member)
            out = [(lb, *w, members, *w, rb)]
            if not any(req for _, _, req in declared):
                out.append((lb, *w, rb))
            return out
        # A_i: properties i.. with nothing emitted yet; B_i: something already emitted
        n = len(declared)
        a_names = [b.fresh(f"obj_a{i}") for i in range(n + 1)]
        b_names = [b.fresh(f"obj_b{i}") for i in range(n + 1)]
        a_end, b_end = a_names[n], b_names[n]
        b.rule(b_end)                   # (A_n has no empty rule: the empty object is an alternative below)
        if kvxs:
            more = b.fresh("obj_extras")
            b.rule(more)
            for kvx in kvxs:
                b.rule(more, more, *w, comma, *w, *kvx)
                b.rule(b_end, *w, comma, *w, *kvx, more)
                b.rule(a_end, *kvx, more)
        for i in range(n - 1, -1, -1):
            name, value, req = declared[i]
            b.rule(a_names[i], *kv(name, value), b_names[i + 1])
            b.rule(b_names[i], *w, comma, *w, *kv(name, value), b_names[i + 1])
            if not req:
                b.rule(a_names[i], a_names[i + 1])
                b.rule(b_names[i], b_names[i + 1])
        out = [(lb, *w, a_names[0], *w, rb)]        # (A_0 empty would put two gaps between the braces)
        if not any(req for _, _, req in declared):
            out.append((lb, *w, rb))
        return out

    def _extra_members(self, conj: Conjunction, names: list[str],
                       name_conj: Conjunction | None) -> list[tuple[str, str]]:
        """``(key terminal, value nonterminal)`` for members whose key is not declared."""
        if name_conj is None:
            return []
        key_pieces: list = []
        declared_names: tuple[str, ...] = ()
        if len(names) > LARGE_ENUM:
            # every escape spelling of hundreds of names does not fit one automaton: extra keys
            # are then written without escapes, and exclude the names' canonical spellings
            # (a finite automaton built directly)
            self.note(conj[0].pointer, "properties", f"with {len(names)} declared properties, keys are accepted "
                                                     "in their canonical spelling, other keys without escapes")
            key_pieces.append((conj[0], "properties", ("encoded", RAW_STRING_REGEX)))
            declared_names = ("(?:" + "|".join(sorted({_literal_regex(json.dumps(n, ensure_ascii=False))
                                                       for n in names})) + ")",)
        elif names:
            declared_names = (json_string_regex("(?:" + "|".join(_literal_regex(n) for n in names) + ")"),)
        for q in name_conj:
            other = [k for k in q.keywords() if k not in ANNOTATIONS and k not in
                     ("pattern", "minLength", "maxLength", "format", "type")]
            if other or q.get("type", "string") not in ("string", ["string"]):
                self.check(q, "propertyNames", "propertyNames beyond pattern/length/format is enforced by "
                                               "validation")
        strings = self._string_regexes(tuple(q for q in name_conj)) if name_conj else []
        if strings is None:
            return []
        key_pieces += strings
        pattern_parts = [p for p in conj if p.get("patternProperties")]
        mode = self.options.additional_properties

        def absent(p) -> bool:
            """What an absent ``additionalProperties`` of ``p`` means under the option."""
            return (not p.has("properties")) if mode == "declared" else bool(mode)

        others = [(p.get("additionalProperties", absent(p)), p.loc.base, p.pointer + "/additionalProperties")
                  for p in conj if p not in pattern_parts and (p.has("additionalProperties") or not absent(p))]
        out: list[tuple[str, str]] = []

        def add(pieces: list, excluding: tuple[str, ...], items: list, hint: str) -> None:
            value = self.items_nt(items, hint)
            if value is None:
                return
            key = self._string_terminal(pieces, "EXTRA_KEY", excluding=declared_names + excluding)
            if key is not None:
                out.append((key, value))

        if not pattern_parts:
            add(key_pieces, (), others, "extra")
            return out
        exact = len(pattern_parts) == 1 and len(pattern_parts[0].get("patternProperties")) <= MAX_KEY_PATTERNS
        pp = pattern_parts[0]
        pats = list(pp.get("patternProperties"))
        regexes: dict[str, str] = {}
        if exact:
            try:
                regexes = {pat: json_string_regex(pattern_search_regex(pat)) for pat in pats}
            except ConstrainedError:
                exact = False
        if exact:
            pp_add = ([(pp.get("additionalProperties"), pp.loc.base, pp.pointer + "/additionalProperties")]
                      if pp.has("additionalProperties") else
                      ([] if absent(pp) else [(False, pp.loc.base, pp.pointer)]))
            for r in range(len(pats) + 1):
                for subset in combinations(pats, r):
                    also = [(pp, "patternProperties", ("encoded", regexes[pat])) for pat in subset]
                    excluding = tuple(regexes[pat] for pat in pats if pat not in subset)
                    items = [(pp.get("patternProperties")[pat], pp.loc.base,
                              f"{pp.pointer}/patternProperties/{escape_pointer_token(pat)}") for pat in subset]
                    add(key_pieces + also, excluding, items + (others if subset else pp_add + others),
                        f"pp{r}")
            return out
        for p in pattern_parts:
            self.check(p, "patternProperties", "several patternProperties are compiled as a union of their "
                                               "value schemas")
        value_nt = self.b.fresh("extra_value")
        alternatives = []
        for p in pattern_parts:
            for pat, sub in p.get("patternProperties").items():
                alternatives.append([(sub, p.loc.base, f"{p.pointer}/patternProperties/{escape_pointer_token(pat)}")])
            if p.has("additionalProperties"):
                alternatives.append([(p.get("additionalProperties"), p.loc.base,
                                      p.pointer + "/additionalProperties")])
        if not all(p.has("additionalProperties") for p in pattern_parts):
            alternatives.append([])
        rhs = [nt for alt in alternatives if (nt := self.items_nt(alt + others, "extra")) is not None]
        if not rhs:
            return out
        for nt in dict.fromkeys(rhs):
            self.b.rule(value_nt, nt)
        key = self._string_terminal(key_pieces, "EXTRA_KEY", excluding=declared_names)
        if key is not None:
            out.append((key, value_nt))
        return out


# ---------------------------------------------------------------------- helpers
def _count_bounds(conj: Conjunction, low_kw: str, high_kw: str) -> tuple[int, int | None, dict[str, Part]]:
    """The tightest ``low_kw``/``high_kw`` counts (minLength/maxLength, minItems/maxItems)
    over a conjunction, and the parts that set them."""
    lo, hi, parts = 0, None, {}
    for p in conj:
        for k in (low_kw, high_kw):
            v = p.get(k)
            if v is None:
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0 or v != int(v):
                raise InvalidSchemaError(f"{k} must be a non-negative integer, not {v!r}", keyword=k,
                                         pointer=p.pointer)
            if k == low_kw and int(v) > lo:
                lo, parts[k] = int(v), p
            if k == high_kw and (hi is None or int(v) < hi):
                hi, parts[k] = int(v), p
    return lo, hi, parts


def _tightest_all(bounds: list[tuple[Any, bool]], *, lower: bool) -> tuple[Any, bool]:
    """The tightest of several ``(value, exclusive)`` bounds (``lower``: the largest)."""
    from fractions import Fraction

    best: tuple[Any, bool] = (None, False)
    for value, exclusive in bounds:
        if best[0] is None:
            best = (value, exclusive)
            continue
        a, b = Fraction(value), Fraction(best[0])
        if (a > b if lower else a < b) or (a == b and exclusive):
            best = (value, exclusive)
    return best


def _kinds_of(t: Any, pointer: str) -> set[str]:
    """The value kinds a ``type`` keyword allows."""
    types = [t] if isinstance(t, str) else t
    if not isinstance(types, list) or not all(isinstance(x, str) and x in JSON_TYPES for x in types):
        raise InvalidSchemaError(f"type must be one of {JSON_TYPES} or a list of them, not {t!r}",
                                 keyword="type", pointer=pointer)
    return {k for x in types for k in _KINDS[x]}


def _number_forms(value: int | float) -> list[str]:
    """The JSON spellings of a number the compiler offers: an integral value as ``3`` and
    ``3.0`` (each parses to its own Python value), any other as ``json.dumps`` writes it."""
    if isinstance(value, float) and not value.is_integer():
        if value != value or value in (float("inf"), float("-inf")):
            raise InvalidSchemaError(f"not a JSON number: {value!r}", keyword="enum")
        return [json.dumps(value)]
    whole = str(int(value))
    return [whole, whole + ".0"]


def _value_kinds(value: Any) -> set[str]:
    if isinstance(value, bool):
        return {"boolean"}
    if value is None:
        return {"null"}
    if isinstance(value, (int, float)):
        return {"integer"} if float(value).is_integer() else {"fraction"}
    return {{str: "string", list: "array", dict: "object"}.get(type(value), "null")}


def _productive(rules: list[Rule], terminals: set[str]) -> list[Rule]:
    """The rules whose symbols all derive some string (recursion without a base case drops out)."""
    productive = derivable(((r.lhs, r.rhs) for r in rules), terminals.__contains__)
    return [r for r in rules if r.lhs in productive and all(s in terminals or s in productive for s in r.rhs)]


def _float_safe_bound(bound: Any, exclusive: bool, *, upward: bool):
    """An inclusive bound on the exact decimal value of the text that keeps the
    *parsed float* within ``bound`` (validators compare ``float(text)``).

    The nearest float on the inside of the bound (the bound itself when it is a
    float and inclusive): text whose exact value is inside it parses, by monotone
    rounding, to a float inside it too.  Loses only spellings that round onto the
    bound's neighbourhood; never admits one a validator rejects.
    """
    if bound is None:
        return None
    import math
    from fractions import Fraction

    try:
        f = float(bound)
    except OverflowError:         # an integer bound beyond every double (10**400)
        if (bound > 0) == upward:
            raise ValueError(f"empty: no double is on the inside of a {len(str(abs(bound)))}-digit bound") from None
        return None               # every double is inside it
    if not math.isfinite(f):
        raise ValueError(f"bound {bound!r} is not a finite double")
    towards = math.inf if upward else -math.inf
    inside = (Fraction(f) >= Fraction(bound)) if upward else (Fraction(f) <= Fraction(bound))
    if not inside or (exclusive and Fraction(f) == Fraction(bound)):
        f = math.nextafter(f, towards)
    # the shortest decimal that parses to f: text on its side of it parses to f or
    # beyond (monotone rounding), and "0.01" itself stays valid for minimum 0.01
    from decimal import Decimal

    return Decimal(repr(f))  # type: ignore[return-value]


# terminals whose automaton exceeds the default limits (the compiled ones are cached by
# `compile_terminal`; a refusal is not, and finding it out costs a whole determinization:
# an ``email`` format, ~0.3 s, once per process instead of once per schema)
_TOO_LARGE: set[tuple[str, tuple, tuple]] = set()


@functools.lru_cache(maxsize=8192)
def _encoded_char_regex(cp: int) -> str:
    """Every JSON spelling of the character ``cp`` as one regex item (a group if it has
    alternatives): `json_string.encoded_chars_ast`, printed."""
    ast = encoded_chars_ast(((cp, cp),))
    text = regex_from_ast(ast)
    return f"(?:{text})" if ast[0] == "alt" else text


@functools.lru_cache(maxsize=8192)
def _json_literal_regex(text: str) -> str:
    """``json_string_regex(_literal_regex(text))`` (the JSON string ``text`` in every
    escape spelling), a character at a time: keys recur across schemas and each
    character's spellings are printed once, instead of parsing and re-encoding the
    whole literal.  The result's items are finite sets, which
    `constrained.automata.byte_dfa` builds as a chain of tries."""
    if not text or any(0xD800 <= ord(c) <= 0xDFFF for c in text):
        return json_string_regex(_literal_regex(text))      # lone surrogates: no spelling at all
    return '"' + "".join(map(_encoded_char_regex, map(ord, text))) + '"'


def _literal_regex(text: str) -> str:
    """A Python regex matching exactly ``text`` (every character literal)."""
    return "".join(f"\\U{ord(c):08x}" if not c.isalnum() else c for c in text) if text else "(?:)"


def _json_equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return a == b


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
