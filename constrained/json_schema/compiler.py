"""JSON Schema -> Grammar IR.

One nonterminal per (resolved) sub-schema; terminals are regexes over the JSON
text (strings in every valid JSON encoding of their characters, see
`constrained.json_schema.json_string`).  The translation follows
``../shared/docs/algorithms.md`` §2.2.

Exactness policy: every keyword is either translated exactly (up to the
documented sound restrictions: properties in schema order, canonical number and
integer spellings, bounded whitespace, no exponent in bounded numbers) or the
schema is refused with `UnsupportedSchemaError` naming the keyword and its JSON
pointer.  Nothing is approximated.  Keywords without validation meaning
(annotations, unknown keywords, unknown formats under the default option) are
listed in `SchemaCompilation.notes`.

Not yet translated (refused): value-level keywords (``uniqueItems: true``,
``oneOf``, ``not``, ``if``/``then``/``else``, ``contains``, ``multipleOf``,
``dependent*``, ``propertyNames``, ``min/maxProperties``,
``patternProperties``), ``allOf``, ``$ref`` or ``anyOf`` combined with sibling
constraints, and a string constrained by more than one of length / pattern /
format.

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

import json
import re
from dataclasses import dataclass, field
from typing import Any

from constrained.errors import (
    InvalidSchemaError,
    UnsatisfiableSchemaError,
    UnsupportedGrammarError,
    UnsupportedSchemaError,
)
from constrained.grammar.ir import Grammar, Rule, TerminalDef
from constrained.json_schema.ecma_regex import pattern_search_regex
from constrained.json_schema.formats import FORMAT_REGEXES
from constrained.json_schema.json_string import json_string_regex, length_bounded_any_string
from constrained.json_schema.numbers import decimal_range_regex, integer_bounds, integer_range_regex
from constrained.json_schema.options import JsonSchemaOptions
from constrained.json_schema.resolver import SchemaIndex, escape_pointer_token

NUMBER_REGEX = r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"
STRING_REGEX = r'"(?:[^"\\\x00-\x1f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"'
JSON_TYPES = ("null", "boolean", "object", "array", "number", "string", "integer")

# keywords that never constrain a value (draft 2020-12 annotations and identifiers)
ANNOTATIONS = frozenset({
    "$schema", "$id", "id", "$anchor", "$dynamicAnchor", "$comment", "$vocabulary", "$defs", "definitions",
    "title", "description", "default", "examples", "deprecated", "readOnly", "writeOnly",
    "contentMediaType", "contentEncoding", "contentSchema",
})
# validation keywords this compiler understands (in some contexts)
TRANSLATED = frozenset({
    "type", "enum", "const", "$ref", "anyOf",
    "properties", "required", "additionalProperties",
    "items", "prefixItems", "additionalItems", "minItems", "maxItems", "uniqueItems",
    "minLength", "maxLength", "pattern", "format",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
})
# validation keywords that need value-level checks or intersections (refused for now)
REFUSED = frozenset({
    "allOf", "oneOf", "not", "if", "then", "else", "contains", "minContains", "maxContains",
    "multipleOf", "dependentRequired", "dependentSchemas", "dependencies", "propertyNames",
    "minProperties", "maxProperties", "patternProperties", "unevaluatedProperties", "unevaluatedItems",
    "$dynamicRef", "$recursiveRef", "$recursiveAnchor",
})
_TYPE_KEYWORDS = {
    "object": ("properties", "required", "additionalProperties"),
    "array": ("items", "prefixItems", "additionalItems", "minItems", "maxItems", "uniqueItems"),
    "string": ("minLength", "maxLength", "pattern", "format"),
    "number": ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"),
}


@dataclass(frozen=True)
class SchemaNote:
    """A keyword that was deliberately not enforced, and why (at ``pointer``)."""

    pointer: str
    keyword: str
    note: str


@dataclass
class SchemaCompilation:
    """The grammar of a schema and the notes on keywords that constrain nothing."""

    grammar: Grammar
    notes: list[SchemaNote] = field(default_factory=list)


class _Builder:
    """Accumulates terminals (deduplicated by regex) and rules."""

    def __init__(self) -> None:
        self.terminals: dict[str, str] = {}     # regex -> name
        self.rules: list[Rule] = []
        self._names: set[str] = set()

    def fresh(self, hint: str) -> str:
        base = re.sub(r"[^a-zA-Z0-9_]", "_", hint)[:40] or "s"
        name, i = base, 1
        while name in self._names:
            i += 1
            name = f"{base}_{i}"
        self._names.add(name)
        return name

    def term(self, regex: str, hint: str) -> str:
        name = self.terminals.get(regex)
        if name is None:
            name = self.terminals[regex] = self.fresh(hint.upper())
        return name

    def lit(self, text: str) -> str:
        return self.term(re.escape(text), "LIT_" + ("".join(c for c in text if c.isalnum()) or "P"))

    def rule(self, lhs: str, *rhs: str) -> None:
        self.rules.append(Rule(lhs, tuple(rhs)))


class SchemaCompiler:
    """Compiles one schema document; use `compile_json_schema`."""

    def __init__(self, schema: Any, options: JsonSchemaOptions) -> None:
        self.schema = schema
        self.options = options
        self.index = SchemaIndex(schema)
        dialect = str(schema.get("$schema", "")) if isinstance(schema, dict) else ""
        self.legacy = any(d in dialect for d in ("draft-03", "draft-04", "draft-06", "draft-07"))
        self.b = _Builder()
        self.notes: list[SchemaNote] = []
        self._memo: dict[tuple[int, str], str | None] = {}
        self._any: str | None = None
        self._ws: tuple[str, ...] | None = None

    # ------------------------------------------------------------------ entry
    def compile(self) -> SchemaCompilation:
        root = self.schema_nt(self.schema, self.index.root_uri, "")
        if root is None:
            raise UnsatisfiableSchemaError("no JSON value satisfies the schema", pointer="")
        self.b.rule("start", root)
        terminals = tuple(TerminalDef(name, regex) for regex, name in self.b.terminals.items())
        grammar = Grammar(terminals=terminals, rules=tuple(self.b.rules), start="start", source="<json schema>")
        return SchemaCompilation(grammar, self.notes)

    # ------------------------------------------------------------------ helpers
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
        self.notes.append(SchemaNote(pointer, keyword, text))

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

    # ------------------------------------------------------------------ schemas
    def schema_nt(self, schema: Any, base: str, pointer: str) -> str | None:
        """The nonterminal of ``schema`` (None: no value satisfies it)."""
        if schema is True or schema == {}:
            return self.any_value()
        if schema is False:
            return None
        if not isinstance(schema, dict):
            raise InvalidSchemaError(f"a schema must be an object or a boolean, not {type(schema).__name__}",
                                     pointer=pointer)
        located = self.index.locate(schema)
        if located is not None:
            base = located.base
        key = (id(schema), base)
        if key in self._memo:
            return self._memo[key]
        name = self.b.fresh("s_" + (pointer.rsplit("/", 1)[-1] or "root"))
        self._memo[key] = name
        alternatives = self._alternatives(schema, base, pointer)
        if not alternatives:
            self._memo[key] = None
            return None
        for rhs in alternatives:
            self.b.rule(name, *rhs)
        return name

    def _alternatives(self, schema: dict, base: str, pointer: str) -> list[tuple[str, ...]]:
        keywords = set(schema)
        for k in sorted(keywords & REFUSED):
            raise UnsupportedSchemaError(f"{k!r} is not supported yet (it would need a value-level check "
                                         "or an intersection); refused rather than approximated",
                                         keyword=k, pointer=pointer)
        for k in sorted(keywords - ANNOTATIONS - TRANSLATED - REFUSED):
            self.note(pointer, k, "unknown keyword: an annotation without validation meaning")
        constraining = keywords & TRANSLATED
        if "$ref" in schema:
            if self.legacy:
                for k in sorted(constraining - {"$ref"}):
                    self.note(pointer, k, "ignored beside $ref, as drafts up to 07 specify")
            elif constraining - {"$ref"}:
                raise UnsupportedSchemaError("$ref beside other constraining keywords "
                                             f"({', '.join(sorted(constraining - {'$ref'}))}) needs an "
                                             "intersection; refused", keyword="$ref", pointer=pointer)
            target, tbase, _ = self.index.resolve(schema["$ref"], base, pointer)
            nt = self.schema_nt(target, tbase, pointer + "/$ref")
            return [] if nt is None else [(nt,)]
        if "anyOf" in schema:
            branches = schema["anyOf"]
            if not isinstance(branches, list) or not branches:
                raise InvalidSchemaError("anyOf must be a non-empty array", keyword="anyOf", pointer=pointer)
            if constraining - {"anyOf"}:
                raise UnsupportedSchemaError("anyOf beside other constraining keywords "
                                             f"({', '.join(sorted(constraining - {'anyOf'}))}) needs an "
                                             "intersection; refused", keyword="anyOf", pointer=pointer)
            out = []
            for i, sub in enumerate(branches):
                nt = self.schema_nt(sub, base, f"{pointer}/anyOf/{i}")
                if nt is not None:
                    out.append((nt,))
            return out
        if "const" in schema or "enum" in schema:
            return self._enum(schema, pointer)
        types = self._types(schema, pointer)
        out: list[tuple[str, ...]] = []
        for t in types:
            out.extend(self._typed(t, schema, base, pointer))
        return out

    def _types(self, schema: dict, pointer: str) -> list[str]:
        t = schema.get("type", list(JSON_TYPES))
        types = [t] if isinstance(t, str) else t
        if not isinstance(types, list) or not all(isinstance(x, str) and x in JSON_TYPES for x in types):
            raise InvalidSchemaError(f"type must be one of {JSON_TYPES} or a list of them, not {t!r}",
                                     keyword="type", pointer=pointer)
        if "number" in types and "integer" in types:
            types = [x for x in types if x != "integer"]
        return list(dict.fromkeys(types))

    # ------------------------------------------------------------------ enum / const
    def _enum(self, schema: dict, pointer: str) -> list[tuple[str, ...]]:
        values = [schema["const"]] if "const" in schema else schema["enum"]
        keyword = "const" if "const" in schema else "enum"
        if not isinstance(values, list):
            raise InvalidSchemaError("enum must be an array", keyword="enum", pointer=pointer)
        others = set(schema) & TRANSLATED - {"enum", "const", "type"}
        if others:
            raise UnsupportedSchemaError(f"{keyword} beside {', '.join(sorted(others))} is not supported yet",
                                         keyword=keyword, pointer=pointer)
        if "const" in schema and "enum" in schema:
            values = [v for v in values if any(_json_equal(v, e) for e in schema["enum"])]
        types = self._types(schema, pointer)
        out = []
        for v in values:
            if _json_type_ok(v, types):
                out.append(self._value_symbols(v))
        return out

    def _value_symbols(self, value: Any) -> tuple[str, ...]:
        """Symbols spelling exactly the JSON value ``value`` (object keys in the given order)."""
        b, w = self.b, self.ws()
        if isinstance(value, str):
            return (b.term(json_string_regex(_literal_regex(value)), "CONST_STR"),)
        if isinstance(value, bool) or value is None:
            return (b.lit(json.dumps(value)),)
        if isinstance(value, (int, float)):
            return (b.lit(json.dumps(value)),)
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
                out += [b.term(json_string_regex(_literal_regex(k)), "KEY"), *w, b.lit(":"), *w]
                out += self._value_symbols(item)
            return (*out, *w, b.lit("}"))
        raise InvalidSchemaError(f"not a JSON value: {value!r}", keyword="enum")

    # ------------------------------------------------------------------ typed values
    def _typed(self, t: str, schema: dict, base: str, pointer: str) -> list[tuple[str, ...]]:
        b = self.b
        if t == "null":
            return [(b.lit("null"),)]
        if t == "boolean":
            return [(b.lit("true"),), (b.lit("false"),)]
        if t in ("number", "integer"):
            return self._number(t, schema, pointer)
        if t == "string":
            return self._string(schema, pointer)
        if t == "array":
            return self._array(schema, base, pointer)
        return self._object(schema, base, pointer)

    def _number(self, t: str, schema: dict, pointer: str) -> list[tuple[str, ...]]:
        lo, hi = schema.get("minimum"), schema.get("maximum")
        xlo, xhi = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
        if isinstance(xlo, bool):  # draft-04: exclusiveMinimum: true makes minimum exclusive
            xlo, lo = (lo, None) if xlo else (None, lo)
        if isinstance(xhi, bool):
            xhi, hi = (hi, None) if xhi else (None, hi)
        for k, v in (("minimum", lo), ("maximum", hi), ("exclusiveMinimum", xlo), ("exclusiveMaximum", xhi)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
                raise InvalidSchemaError(f"{k} must be a number, not {v!r}", keyword=k, pointer=pointer)
        bounded = any(v is not None for v in (lo, hi, xlo, xhi))
        try:
            if t == "integer":
                ilo, ihi = integer_bounds(lo, hi, xlo, xhi)
                return [(self.b.term(integer_range_regex(ilo, ihi), "INTEGER"),)]
            if not bounded:
                return [(self.b.term(NUMBER_REGEX, "NUMBER"),)]
            low = _float_safe_bound(*_tightest(lo, xlo, max), upward=True)
            high = _float_safe_bound(*_tightest(hi, xhi, min), upward=False)
            return [(self.b.term(decimal_range_regex(low, high), "NUMBER_RANGE"),)]
        except ValueError as e:
            if "empty" in str(e):
                return []  # no number of this type: another type of the schema may still match
            raise InvalidSchemaError(str(e), keyword="minimum", pointer=pointer) from e

    def _string(self, schema: dict, pointer: str) -> list[tuple[str, ...]]:
        mn, mx = schema.get("minLength", 0), schema.get("maxLength")
        for k, v in (("minLength", mn), ("maxLength", mx)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
                raise InvalidSchemaError(f"{k} must be a non-negative integer, not {v!r}", keyword=k,
                                         pointer=pointer)
        pieces: list[tuple[str, str]] = []
        if mn or mx is not None:
            if mx is not None and mn > mx:
                return []
            pieces.append(("minLength" if mx is None else "maxLength", length_bounded_any_string(mn, mx)))
        if "pattern" in schema:
            p = schema["pattern"]
            if not isinstance(p, str):
                raise InvalidSchemaError("pattern must be a string", keyword="pattern", pointer=pointer)
            pieces.append(("pattern", json_string_regex(pattern_search_regex(p))))
        if "format" in schema:
            f = schema["format"]
            if f in FORMAT_REGEXES:
                pieces.append(("format", json_string_regex(FORMAT_REGEXES[f])))
            elif self.options.unknown_formats == "error":
                raise UnsupportedSchemaError(f"unknown format {f!r}", keyword="format", pointer=pointer)
            else:
                self.note(pointer, "format", f"unknown format {f!r}: an annotation, not enforced")
        if len(pieces) > 1:
            raise UnsupportedSchemaError("a string constrained by " + " and ".join(k for k, _ in pieces)
                                         + " needs an intersection; not supported yet",
                                         keyword=pieces[1][0], pointer=pointer)
        regex = pieces[0][1] if pieces else STRING_REGEX
        return [(self.b.term(regex, "STRING"),)]

    def _array(self, schema: dict, base: str, pointer: str) -> list[tuple[str, ...]]:
        b, w = self.b, self.ws()
        if schema.get("uniqueItems") is True:
            raise UnsupportedSchemaError("uniqueItems: true needs a value-level check; not supported yet",
                                         keyword="uniqueItems", pointer=pointer)
        items = schema.get("items", True)
        if isinstance(items, list):  # draft 2019 and earlier: a tuple
            prefix, tail, tail_kw = items, schema.get("additionalItems", True), "additionalItems"
        else:
            prefix, tail, tail_kw = schema.get("prefixItems", []), items, "items"
        lo, hi = schema.get("minItems", 0), schema.get("maxItems")
        for k, v in (("minItems", lo), ("maxItems", hi)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
                raise InvalidSchemaError(f"{k} must be a non-negative integer, not {v!r}", keyword=k,
                                         pointer=pointer)
        prefix_kw = "items" if isinstance(items, list) else "prefixItems"
        element = [self.schema_nt(s, base, f"{pointer}/{prefix_kw}/{i}") for i, s in enumerate(prefix)]
        tail_nt = self.schema_nt(tail, base, f"{pointer}/{tail_kw}")
        # the longest possible array, and the positions that need their own nonterminal
        longest = hi
        for i, nt in enumerate(element):
            if nt is None:
                longest = i if longest is None else min(longest, i)
                break
        if tail_nt is None:
            longest = len(element) if longest is None else min(longest, len(element))
        if longest is not None and lo > longest:
            return []
        distinct = max(len(element), lo) + 1
        if longest is not None:
            distinct = min(distinct, longest)
        if max(distinct, longest or 0) > self.options.max_repetition:
            raise UnsupportedSchemaError(f"array bounds need more than max_repetition="
                                         f"{self.options.max_repetition} unrolled positions",
                                         keyword="maxItems" if hi is not None else "minItems", pointer=pointer)
        last = longest if longest is not None else distinct   # positions 1..last get nonterminals
        names = [b.fresh(f"{pointer.rsplit('/', 1)[-1] or 'arr'}_from{j}") for j in range(1, last + 1)]
        comma = b.lit(",")

        def elem(j: int) -> str:
            return element[j - 1] if j <= len(element) else tail_nt  # type: ignore[return-value]

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

    def _object(self, schema: dict, base: str, pointer: str) -> list[tuple[str, ...]]:
        b, w = self.b, self.ws()
        props = schema.get("properties", {})
        required = schema.get("required", [])
        if not isinstance(props, dict):
            raise InvalidSchemaError("properties must be an object", keyword="properties", pointer=pointer)
        if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
            raise InvalidSchemaError("required must be an array of strings", keyword="required", pointer=pointer)
        extra_schema = schema.get("additionalProperties", True if self.options.additional_properties else False)
        extra = self.schema_nt(extra_schema, base, pointer + "/additionalProperties")
        declared: list[tuple[str, str | None, bool]] = []  # (name, value nonterminal, required)
        for name, sub in props.items():
            nt = self.schema_nt(sub, base, f"{pointer}/properties/{escape_pointer_token(name)}")
            if nt is None and name in required:
                return []
            if nt is not None:
                declared.append((name, nt, name in required))
        names = set(props)
        for name in dict.fromkeys(required):
            if name not in names:
                if extra is None:
                    return []
                declared.append((name, extra, True))
                names.add(name)
        colon, comma = b.lit(":"), b.lit(",")

        def kv(name: str, value: str) -> tuple[str, ...]:
            return (b.term(json_string_regex(_literal_regex(name)), "KEY"), *w, colon, *w, value)

        kvx: tuple[str, ...] | None = None
        if extra is not None:
            kvx = (b.term(json_string_regex(_none_of_regex(sorted(names))), "EXTRA_KEY"), *w, colon, *w, extra)
        tag = pointer.rsplit("/", 1)[-1] or "obj"
        # A_i: properties i.. with nothing emitted yet; B_i: something already emitted
        n = len(declared)
        a_names = [b.fresh(f"{tag}_a{i}") for i in range(n + 1)]
        b_names = [b.fresh(f"{tag}_b{i}") for i in range(n + 1)]
        a_end, b_end = a_names[n], b_names[n]
        b.rule(b_end)
        b.rule(a_end)
        if kvx is not None:
            more = b.fresh(f"{tag}_extras")
            b.rule(more)
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
        lb, rb = b.lit("{"), b.lit("}")
        return [(lb, *w, a_names[0], *w, rb)]


# ---------------------------------------------------------------------- helpers
def _tightest(inclusive: Any, exclusive: Any, pick) -> tuple[Any, bool]:
    """The tighter of an inclusive and an exclusive bound (``pick`` = max for lower bounds)."""
    if inclusive is None:
        return exclusive, exclusive is not None
    if exclusive is None:
        return inclusive, False
    from fractions import Fraction

    if Fraction(exclusive) == Fraction(inclusive):
        return exclusive, True
    chosen = pick(Fraction(inclusive), Fraction(exclusive))
    return (exclusive, True) if chosen == Fraction(exclusive) else (inclusive, False)


def _float_safe_bound(bound: Any, exclusive: bool, *, upward: bool) -> float | None:
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

    f = float(bound)
    if not math.isfinite(f):
        raise ValueError(f"bound {bound!r} is not a finite double")
    towards = math.inf if upward else -math.inf
    inside = (Fraction(f) >= Fraction(bound)) if upward else (Fraction(f) <= Fraction(bound))
    if not inside or (exclusive and Fraction(f) == Fraction(bound)):
        f = math.nextafter(f, towards)
    return f


def _literal_regex(text: str) -> str:
    """A Python regex matching exactly ``text`` (every character literal)."""
    return "".join(f"\\U{ord(c):08x}" if not c.isalnum() else c for c in text) if text else "(?:)"


def _none_of_regex(names: list[str]) -> str:
    """A Python regex matching every string except the given ones (a trie complement)."""
    if not names:
        return "[\\s\\S]*"
    trie: dict = {}
    for name in names:
        node = trie
        for ch in name:
            node = node.setdefault(ch, {})
        node[""] = {}

    def walk(node: dict) -> str:
        children = sorted(k for k in node if k)
        parts = []
        if "" not in node:
            parts.append("")                                     # the prefix itself is not a name
        excluded = "".join(f"\\U{ord(c):08x}" for c in children)
        parts.append(f"[^{excluded}][\\s\\S]*" if excluded else "[\\s\\S]+")
        for ch in children:
            parts.append(f"\\U{ord(ch):08x}(?:{walk(node[ch])})")
        return "|".join(parts)

    return f"(?:{walk(trie)})"


def _json_type_ok(value: Any, types: list[str]) -> bool:
    kind = {type(None): "null", bool: "boolean", str: "string", list: "array", dict: "object"}.get(type(value))
    if kind is None:
        if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
            return "integer" in types or "number" in types
        return "number" in types
    return kind in types


def _json_equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return a == b


def compile_json_schema(schema: Any, options: JsonSchemaOptions | None = None, **kwargs) -> SchemaCompilation:
    """Compile a JSON Schema (a parsed JSON value) to a `SchemaCompilation`.

    ``options`` or keyword arguments build `JsonSchemaOptions`.  Raises
    `InvalidSchemaError`, `UnsupportedSchemaError` or `UnsatisfiableSchemaError`.
    """
    if options is None:
        options = JsonSchemaOptions(**kwargs)
    elif kwargs:
        raise TypeError("pass either options or keyword options, not both")
    try:
        return SchemaCompiler(schema, options).compile()
    except UnsupportedGrammarError as e:  # e.g. from a sub-compiler that names no pointer
        if isinstance(e, UnsupportedSchemaError):
            raise
        raise UnsupportedSchemaError(str(e)) from e
