"""Hypothesis strategies and a hand-written list of hostile inputs for `test_hostile_corpus`.

A *case* is ``(kind, payload)``:

* ``("schema", (schema, options))``: `Grammar.from_json_schema(schema, **options)`;
* ``("regex", pattern)``: `Grammar.from_regex(pattern)`;
* ``("lark", text)``: `Grammar.from_lark(text)`;
* ``("gbnf", text)``: `Grammar.from_gbnf(text)`.

Every case must end, compiled or with a `constrained.errors.ConstrainedError`; the
strategies aim at the corners that used to (or could) end otherwise: nesting depth,
width, counted repetition, products of applicators, reference cycles, numbers
outside float range, unicode edge cases (lone surrogates, NUL, U+10FFFF, BOM,
line separators), malformed syntax.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

# ---------------------------------------------------------------------- characters and text

EDGE_CHARS = ["\x00", "\x01", "\x1f", "\x7f", "\x80", "\xff", "\ud800", "\udbff", "\udc00", "\udfff",
              "\ufeff", "\ufffe", "\uffff", "\U0001f600", "\U0010ffff", "\u2028", "\u2029", "\u0301",
              "é", "ß", "İ", "K", '"', "\\", "/", "\n", "\r", "\t", " ", "$", "#", "~", "%", "^",
              "[", "]", "(", ")", "{", "}", "|", "*", "+", "?", ".", "-", ":", ",", "'", "`", "a", "Z", "0"]

# every code point, surrogates included (hypothesis leaves category Cs out by default)
any_char = st.one_of(st.sampled_from(EDGE_CHARS),
                     st.characters(min_codepoint=0x20, max_codepoint=0x7E),
                     st.characters(min_codepoint=0x20, max_codepoint=0x7E),
                     st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=()))

edge_text = st.text(any_char, max_size=12)
plain_name = st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True)

HUGE_INTS = [0, 1, -1, 2, 7, 255, 256, 1000, 4096, 65535, 65536, 2**31 - 1, 2**31, 2**53 + 1, 2**63,
             2**64 + 1, 10**18, 10**100, 10**308, 10**309, 10**400, -10**400, 10**4000]
HUGE_FLOATS = [0.0, -0.0, 0.5, 1e-300, 5e-324, 1e-7, 1e-20, 0.1, 1.5, 3.14159, 1e15, 1e16, 1e21, 1e100, 1e308,
               -1e308, 1.7976931348623157e308, float("inf"), float("-inf"), float("nan")]

huge_number = st.one_of(st.sampled_from(HUGE_INTS), st.sampled_from(HUGE_FLOATS),
                        st.integers(-10**30, 10**30), st.floats(allow_nan=True, allow_infinity=True))
count = st.one_of(st.sampled_from([0, 1, 2, 3, 5, 9, 16, 24, 25, 64, 100, 255, 256, 257, 1000, 10**4, 10**6,
                                   2**31, 10**20, -1, 1.5, 2.0, 1e308, 10**400]),
                  st.integers(0, 40))

# ---------------------------------------------------------------------- regexes


def _escape_char(c: str) -> str:
    return "\\" + c if c in "\\^$.|?*+()[]{}-/" else c


regex_atoms = st.one_of(
    st.builds(_escape_char, any_char),
    st.sampled_from(["a", "b", "ab", ".", "\\d", "\\w", "\\s", "\\D", "\\W", "\\S", "[a-z]", "[^a-z]", "[^\\x00-\\x7f]",
                     "[\\u0000-\\uffff]", "[\\ud800-\\udfff]", "[\\U00010000-\\U0010ffff]", "[^\\n]", "[]", "[^]",
                     "[a-]", "[z-a]", "\\x00", "\\0", "\\u00e9", "\\uD800", "\\U0010FFFF", "\\p{L}", "\\P{Lu}",
                     "\\b", "\\B", "^", "$", "\\A", "\\Z", "\\z", "\\1", "\\k<n>", "(?=a)", "(?!a)", "(?<=a)",
                     "(?<!a)", "(?i)", "(?s:.)", "(?L)", "(?>a)", "a++", "(?P<n>a)(?P=n)", "(?(1)a|b)", "\\c",
                     "\\", "(", ")", "[", "{", "}", "{1,2}", "a{,3}", "\\/", "\\-", "\\cA", "[[:alpha:]]",
                     "[\\w-.]", "(?u)", "(?a)", "(?#comment)", "(?x) a b"]),
    st.builds(lambda a, b: f"[{_escape_char(a)}-{_escape_char(b)}]", any_char, any_char),
)


def _quantify(inner: str, q: tuple) -> str:
    kind, lo, hi, lazy = q
    group = f"(?:{inner})"
    if kind == "star":
        s = group + "*"
    elif kind == "plus":
        s = group + "+"
    elif kind == "opt":
        s = group + "?"
    elif kind == "exact":
        s = f"{group}{{{lo}}}"
    elif kind == "open":
        s = f"{group}{{{lo},}}"
    else:
        s = f"{group}{{{lo},{hi}}}"
    return s + ("?" if lazy else "")


_repeat_counts = st.one_of(st.integers(0, 12), st.sampled_from([20, 50, 99, 100, 255, 256, 1000, 4095, 65535,
                                                                 65536, 100000, 10**9, 2**32]))
quantifier = st.tuples(st.sampled_from(["star", "plus", "opt", "exact", "open", "range", "range", "range"]),
                       _repeat_counts, _repeat_counts, st.booleans())

regexes: st.SearchStrategy[str] = st.recursive(
    regex_atoms,
    lambda inner: st.one_of(
        st.lists(inner, min_size=2, max_size=4).map("".join),
        st.lists(inner, min_size=2, max_size=6).map("|".join),
        st.lists(inner, min_size=1, max_size=3).map(lambda xs: "(" + "|".join(xs) + ")"),
        st.builds(_quantify, inner, quantifier),
        inner.map(lambda s: f"(?={s})"),
        inner.map(lambda s: f"({s})\\1"),
    ),
    max_leaves=12,
)

nested_repeats = st.builds(
    lambda atom, counts: _nest_repeats(atom, counts),
    st.sampled_from(["a", "[ab]", ".", "\\w", "(a|b)", "[\\u0080-\\U0010ffff]", "x?"]),
    st.lists(st.tuples(st.integers(0, 30), st.integers(0, 300)), min_size=1, max_size=5))


def _nest_repeats(atom: str, counts: list[tuple[int, int]]) -> str:
    s = atom
    for lo, extra in counts:
        s = f"(?:{s}){{{lo},{lo + extra}}}"
    return s


def _big_alternation(words: list[str]) -> str:
    return "|".join(_escape_word(w) for w in words)


def _escape_word(w: str) -> str:
    return "".join(_escape_char(c) for c in w)


any_regex = st.one_of(regexes, nested_repeats,
                      st.lists(edge_text, min_size=1, max_size=200).map(_big_alternation),
                      st.text(st.sampled_from(list("ab()[]{}|*+?^$\\.-,0123456789:=!<>P")), max_size=30),
                      edge_text)

# ---------------------------------------------------------------------- JSON Schemas

json_leaf_values = st.one_of(st.none(), st.booleans(), huge_number, edge_text)
json_values = st.recursive(json_leaf_values,
                           lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                   st.dictionaries(edge_text, inner, max_size=4)),
                           max_leaves=10)

TYPES = ["null", "boolean", "integer", "number", "string", "array", "object"]
type_value = st.one_of(st.sampled_from(TYPES), st.sampled_from(["int", "float", "any", "String", "", "bigint"]),
                       st.lists(st.sampled_from(TYPES + ["foo"]), max_size=4), st.just(5), st.just(None))
FORMATS = ["date-time", "date", "time", "duration", "email", "idn-email", "hostname", "idn-hostname", "ipv4",
           "ipv6", "uri", "uri-reference", "iri", "iri-reference", "uuid", "uri-template", "json-pointer",
           "relative-json-pointer", "regex", "unknown-format", "", "int32", "byte", "binary"]

REFS = ["#", "#/", "#/$defs/a", "#/$defs/b", "#/$defs/missing", "#/definitions/a", "#/properties",
        "#/$defs/a/properties/x", "#a", "#/%24defs/a", "#/$defs/~0~1", "#/items/0", "#/allOf/0",
        "http://example.com/remote.json", "https://json-schema.org/draft/2020-12/schema",
        "http://json-schema.org/draft-07/schema#", "file:///etc/passwd", "urn:uuid:1", "other.json#/x",
        "", "#/$defs/a#b", "\x00", "#/\ud800", "//host/x", "#/$defs/" + "a" * 200]

ref_value = st.one_of(st.sampled_from(REFS), edge_text)


def _scalar_schema() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.booleans(),
        st.builds(lambda t: {"type": t}, type_value),
        st.fixed_dictionaries({"type": st.just("string")},
                              optional={"pattern": any_regex, "minLength": count, "maxLength": count,
                                        "format": st.sampled_from(FORMATS), "const": edge_text,
                                        "enum": st.lists(edge_text, max_size=6)}),
        st.fixed_dictionaries({"type": st.sampled_from(["integer", "number"])},
                              optional={"minimum": huge_number, "maximum": huge_number,
                                        "exclusiveMinimum": st.one_of(huge_number, st.booleans()),
                                        "exclusiveMaximum": st.one_of(huge_number, st.booleans()),
                                        "multipleOf": st.one_of(st.sampled_from([1e-300, 5e-324, 0.1, 1e308,
                                                                                 0, -1, 3, 10**400, 0.3]),
                                                                huge_number)}),
        st.builds(lambda v: {"const": v}, json_values),
        st.builds(lambda vs: {"enum": vs}, st.lists(json_values, max_size=8)),
        st.builds(lambda n, v: {"enum": [v + str(i) for i in range(n)]},
                  st.sampled_from([0, 1, 1000, 5000]), edge_text),
        st.builds(lambda r: {"$ref": r}, ref_value),
        st.builds(lambda k, v: {k: v}, st.one_of(edge_text, st.sampled_from(
            ["nullable", "x-kubernetes", "$comment", "$schema", "$id", "$anchor", "$dynamicRef", "$recursiveRef",
             "unevaluatedProperties", "unevaluatedItems", "contentMediaType", "contentEncoding", "default",
             "examples", "deprecated", "readOnly", "dependencies", "dependentSchemas", "minContains"])),
                  json_values),
        st.fixed_dictionaries({"format": st.sampled_from(FORMATS)}),
    )


def _compound(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    keys = edge_text
    return st.one_of(
        st.fixed_dictionaries({"type": st.just("object")}, optional={
            "properties": st.dictionaries(keys, inner, max_size=6),
            "required": st.lists(keys, max_size=4),
            "additionalProperties": inner,
            "patternProperties": st.dictionaries(any_regex, inner, max_size=3),
            "propertyNames": inner,
            "minProperties": count, "maxProperties": count,
            "dependentRequired": st.dictionaries(keys, st.lists(keys, max_size=2), max_size=2)}),
        st.fixed_dictionaries({"type": st.just("array")}, optional={
            "items": st.one_of(inner, st.lists(inner, max_size=3)),
            "prefixItems": st.lists(inner, max_size=3),
            "additionalItems": inner,
            "contains": inner, "minContains": count, "maxContains": count,
            "minItems": count, "maxItems": count, "uniqueItems": st.booleans()}),
        st.builds(lambda k, xs: {k: xs}, st.sampled_from(["allOf", "anyOf", "oneOf"]),
                  st.lists(inner, min_size=0, max_size=5)),
        st.builds(lambda x: {"not": x}, inner),
        st.fixed_dictionaries({"if": inner}, optional={"then": inner, "else": inner}),
        st.builds(lambda a, b: {**a, **b} if isinstance(a, dict) and isinstance(b, dict) else a, inner, inner),
    )


schemas_tree: st.SearchStrategy[Any] = st.recursive(_scalar_schema(), _compound, max_leaves=15)


def _deep(depth: int, key: str, leaf: Any) -> Any:
    s = leaf
    for _ in range(depth):
        if key == "items":
            s = {"type": "array", "items": s}
        elif key == "properties":
            s = {"type": "object", "properties": {"a": s}, "required": ["a"]}
        elif key == "allOf":
            s = {"allOf": [s]}
        elif key == "anyOf":
            s = {"anyOf": [s, {"type": "null"}]}
        else:
            s = {"not": s}
    return s


deep_schemas = st.builds(_deep, st.sampled_from([10, 100, 127, 128, 129, 255, 256, 257, 1000, 3000]),
                         st.sampled_from(["items", "properties", "allOf", "anyOf", "not"]),
                         st.sampled_from([{"type": "integer"}, True, {"$ref": "#"}, {}]))


def _wide(n: int, kind: str, leaf: Any) -> Any:
    if kind == "properties":
        return {"type": "object", "properties": {f"p{i}": leaf for i in range(n)},
                "required": [f"p{i}" for i in range(0, n, 2)]}
    if kind == "product":     # allOf of anyOfs: a product of n factors of 3 branches
        return {"allOf": [{"anyOf": [{"type": "object", "properties": {f"k{i}_{j}": leaf}, "required": [f"k{i}_{j}"]}
                                     for j in range(3)]} for i in range(n)]}
    if kind == "oneOf":
        return {"oneOf": [{"type": "object", "properties": {"t": {"const": i}, "v": leaf}} for i in range(n)]}
    if kind == "prefixItems":
        return {"type": "array", "prefixItems": [leaf] * n, "minItems": n}
    return {"enum": list(range(n)) + [f"s{i}" for i in range(n)]}


wide_schemas = st.builds(_wide, st.sampled_from([1, 5, 20, 64, 65, 200, 1000]),
                         st.sampled_from(["properties", "product", "oneOf", "prefixItems", "enum"]),
                         st.sampled_from([{"type": "integer"}, {"type": "string", "pattern": "^[a-z]{2,40}$"},
                                          {"type": "number", "multipleOf": 0.01}, {"$ref": "#"}, True]))


@st.composite
def ref_graphs(draw) -> Any:
    """``$defs`` that reference each other: chains, cycles, self references, wrapped refs."""
    n = draw(st.integers(1, 8))
    defs: dict[str, Any] = {}
    for i in range(n):
        target = f"#/$defs/d{draw(st.integers(0, n))}"      # d{n} does not exist
        form = draw(st.sampled_from(["bare", "anyOf", "allOf", "items", "prop", "leaf", "oneOf", "not"]))
        if form == "bare":
            defs[f"d{i}"] = {"$ref": target}
        elif form == "anyOf":
            defs[f"d{i}"] = {"anyOf": [{"$ref": target}, {"type": "integer"}]}
        elif form == "allOf":
            defs[f"d{i}"] = {"allOf": [{"$ref": target}, {"$ref": f"#/$defs/d{i}"}]}
        elif form == "items":
            defs[f"d{i}"] = {"type": "array", "items": {"$ref": target}}
        elif form == "prop":
            defs[f"d{i}"] = {"type": "object", "properties": {"x": {"$ref": target}}, "required": ["x"]}
        elif form == "oneOf":
            defs[f"d{i}"] = {"oneOf": [{"$ref": target}, {"$ref": f"#/$defs/d{(i + 1) % n}"}]}
        elif form == "not":
            defs[f"d{i}"] = {"not": {"$ref": target}}
        else:
            defs[f"d{i}"] = draw(_scalar_schema())
    root: dict[str, Any] = {"$defs": defs, "$ref": "#/$defs/d0"}
    if draw(st.booleans()):
        root["definitions"] = {"a": {"$ref": "#/$defs/d0"}}
    if draw(st.booleans()):
        root["$id"] = draw(st.sampled_from(["http://example.com/root.json", "urn:x", "", "#frag", "relative/x"]))
    return root


ref_chain = st.builds(lambda n: {"$defs": {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(n)}
                                 | {f"d{n}": {"type": "integer"}}, "$ref": "#/$defs/d0"},
                      st.sampled_from([1, 10, 100, 1000, 5000]))

schema_options = st.fixed_dictionaries({}, optional={
    "whitespace": st.sampled_from(["bounded", "compact", "any", "any", "weird"]),
    "property_order": st.sampled_from(["schema", "any"]),
    "fixed_strings": st.sampled_from(["any", "canonical"]),
    "additional_properties": st.sampled_from([True, False, "declared"]),
    "value_checks": st.booleans(),
    "formats": st.sampled_from(["assert", "annotation"]),
    "unknown_formats": st.sampled_from(["annotation", "error"]),
    "max_repetition": st.sampled_from([0, 1, 256, 256, 10**6, -1]),
    "max_whitespace": st.sampled_from([0, 1, 48, 48, 10**6, -1]),
})

any_schema = st.one_of(schemas_tree, schemas_tree, deep_schemas, wide_schemas, ref_graphs(), ref_chain,
                       json_values)
schema_cases = st.tuples(any_schema, st.one_of(st.just({}), st.just({}), schema_options)).map(lambda p: ("schema", p))

# ---------------------------------------------------------------------- lark and GBNF


def _lark_string(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)


@st.composite
def lark_grammars(draw) -> str:
    n = draw(st.integers(1, 6))
    names = [f"r{i}" for i in range(n)]
    terms = [f"T{i}" for i in range(draw(st.integers(0, 3)))]
    item = st.one_of(
        st.sampled_from(names + terms),
        edge_text.map(_lark_string),
        st.just('""'),
        st.integers(1, 5000).map(lambda k: _lark_string("x" * k)),
        regexes.map(lambda r: "/" + r.replace("/", "\\/") + "/"),
        st.sampled_from(names).map(lambda r: f"({r})*"),
        st.tuples(st.sampled_from(names + terms), st.sampled_from(["?", "*", "+", " ~ 3", " ~ 0..1000",
                                                                   " ~ 100000", " ~ 5..2", ""]))
          .map("".join),
        st.sampled_from(names).map(lambda r: f"[{r}]"),
    )
    alt = st.lists(item, min_size=0, max_size=4).map(" ".join)
    lines = []
    for i, name in enumerate(["start"] + names):
        alts = draw(st.lists(alt, min_size=1, max_size=4))
        lines.append(f"{name}: " + " | ".join(alts))
    for t in terms:
        body = draw(st.one_of(regexes.map(lambda r: "/" + r.replace("/", "\\/") + "/"), edge_text.map(_lark_string),
                              st.sampled_from(terms).map(lambda u: f"{u} {u}")))
        lines.append(f"{t}: {body}")
    if draw(st.booleans()):
        lines.append(draw(st.sampled_from(["%ignore \" \"", "%import common.WS", "%ignore WS",
                                           "%import common (NUMBER, CNAME)", "%declare X", "%override r0: \"a\"",
                                           "%import nonexistent.X", "%ignore /\\s*/"])))
    text = "\n".join(lines)
    return draw(_maybe_mangle(text))


def _gbnf_string(s: str) -> str:
    out = []
    for c in s:
        if c in '"\\':
            out.append("\\" + c)
        elif c == "\n":
            out.append("\\n")
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


@st.composite
def gbnf_grammars(draw) -> str:
    n = draw(st.integers(1, 6))
    names = [f"r-{i}" for i in range(n)]
    item = st.one_of(
        st.sampled_from(names + ["root"]),
        edge_text.map(_gbnf_string),
        st.just('""'),
        st.integers(1, 5000).map(lambda k: '"' + "y" * k + '"'),
        st.sampled_from(["[a-z]", "[^\"\\\\]", "[\\x00-\\x7f]", "[^]", "[]", "[\\u0000-\\U0010FFFF]", ".",
                         "[\\ud800]", "[z-a]", "[a-]", "\\x00", "[^\\n]"]),
        st.tuples(st.sampled_from(names + ['"a"', "[ab]"]),
                  st.sampled_from(["?", "*", "+", "{3}", "{0,1000}", "{1000}", "{100000}", "{5,2}", "{2,}",
                                   "{,3}", "", "{-1}"])).map("".join),
        st.sampled_from(names).map(lambda r: f"({r})"),
        st.integers(1, 30).map(lambda d: "(" * d + '"a"' + ")" * d),
        st.integers(90, 2000).map(lambda d: "(" * d + '"a"' + ")" * d),
    )
    alt = st.lists(item, min_size=0, max_size=4).map(" ".join)
    lines = []
    for name in ["root"] + names:
        alts = draw(st.lists(alt, min_size=1, max_size=4))
        lines.append(f"{name} ::= " + " | ".join(alts))
    if draw(st.booleans()):
        lines.insert(draw(st.integers(0, len(lines))), "# comment \x00 \ud800")
    text = "\n".join(lines)
    return draw(_maybe_mangle(text))


def _maybe_mangle(text: str) -> st.SearchStrategy[str]:
    """The text, or a copy with a slice deleted, duplicated or replaced by edge characters."""
    if not text:
        return st.just(text)

    @st.composite
    def mangled(draw) -> str:
        i = draw(st.integers(0, len(text)))
        j = draw(st.integers(i, min(len(text), i + 8)))
        how = draw(st.sampled_from(["delete", "insert", "dup"]))
        if how == "delete":
            return text[:i] + text[j:]
        if how == "insert":
            return text[:i] + draw(edge_text) + text[j:]
        return text[:j] + text[i:j] * draw(st.integers(2, 50)) + text[j:]

    return st.one_of(st.just(text), st.just(text), mangled())


def _left_recursive(n: int) -> str:
    return "start: start \"a\" | \"b\"\n" + "\n".join(f"r{i}: r{i + 1} | \"c\"" for i in range(n)) \
        + f"\nr{n}: \"d\""


def _unused_chain(n: int) -> str:
    """A lark grammar with a chain of ``n`` rules nothing uses: lark's loader drops unused
    rules one link per sweep over all rules (quadratic)."""
    return 'start: "a"\n' + "\n".join(f"u{i}: u{i + 1}" for i in range(n)) + f'\nu{n}: "b"'


def _counted_rules(n: int, fmt: str) -> str:
    """``n`` rules, each a counted repetition ``{0,1000}`` of its own recursive rule: 1000
    helper rules per rule when lowered (GBNF), a 1000-fold expansion in lark."""
    if fmt == "lark":
        return "start: " + " ".join(f"r{i}" for i in range(n)) + "\n" + "\n".join(
            f'r{i}: y{i} ~ 0..1000\ny{i}: "a" | y{i} "b"' for i in range(n))
    return "root ::= " + " ".join(f"r-{i}" for i in range(n)) + "\n" + "\n".join(
        f'r-{i} ::= y-{i}{{0,1000}}\ny-{i} ::= "a" | y-{i} "b"' for i in range(n))


def _chain_rules(n: int, fmt: str) -> str:
    if fmt == "lark":
        return "start: r0\n" + "\n".join(f"r{i}: r{i + 1} \"x\"?" for i in range(n)) + f"\nr{n}: \"end\""
    return "root ::= r0\n" + "\n".join(f"r{i} ::= r{i + 1} \"x\"?" for i in range(n)) + f"\nr{n} ::= \"end\""


lark_cases = st.one_of(
    lark_grammars(),
    st.builds(_left_recursive, st.sampled_from([1, 10, 200])),
    st.builds(_chain_rules, st.sampled_from([10, 300, 2000]), st.just("lark")),
    st.builds(lambda d: "start: " + "(" * d + '"a"' + ")" * d, st.sampled_from([10, 100, 500, 3000])),
    st.builds(lambda k: "start: " + " | ".join(_lark_string(f"w{i}") for i in range(k)),
              st.sampled_from([10, 1000, 5000])),
).map(lambda t: ("lark", t))

gbnf_cases = st.one_of(
    gbnf_grammars(),
    st.builds(_chain_rules, st.sampled_from([10, 300, 2000]), st.just("gbnf")),
    st.builds(lambda d: "root ::= " + "(" * d + '"a"' + ")" * d, st.sampled_from([10, 99, 100, 101, 500, 5000])),
    st.builds(lambda k: "root ::= " + " | ".join(f'"w{i}"' for i in range(k)), st.sampled_from([10, 1000, 5000])),
).map(lambda t: ("gbnf", t))

regex_cases = any_regex.map(lambda r: ("regex", r))

STRATEGIES = {"schema": schema_cases, "regex": regex_cases, "lark": lark_cases, "gbnf": gbnf_cases}

# ---------------------------------------------------------------------- hand-written cases


def _nested_lists(depth: int) -> Any:
    v: Any = 0
    for _ in range(depth):
        v = [v]
    return v


def _self_nested_dict(depth: int) -> Any:
    v: Any = {}
    for _ in range(depth):
        v = {"a": v}
    return v


HANDWRITTEN: list[tuple[str, str, Any]] = [
    # (label, kind, payload)
    ("schema: empty", "schema", ({}, {})),
    ("schema: false", "schema", (False, {})),
    ("schema: not a schema (list)", "schema", ([1, 2], {})),
    ("schema: not a schema (str)", "schema", ("string", {})),
    ("schema: None", "schema", (None, {})),
    ("schema: unknown type", "schema", ({"type": "integr"}, {})),
    ("schema: type list with unknown", "schema", ({"type": ["string", 5]}, {})),
    ("schema: self $ref", "schema", ({"$ref": "#"}, {})),
    ("schema: $ref cycle a<->b", "schema", ({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}},
                                            "$ref": "#/$defs/a"}, {})),
    ("schema: allOf self", "schema", ({"allOf": [{"$ref": "#"}]}, {})),
    ("schema: remote $ref", "schema", ({"$ref": "http://example.com/s.json"}, {})),
    ("schema: file $ref", "schema", ({"$ref": "file:///etc/passwd"}, {})),
    ("schema: ref chain 3000", "schema", ({"$defs": {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(3000)}
                                          | {"d3000": {"type": "integer"}}, "$ref": "#/$defs/d0"}, {})),
    ("schema: ref to missing", "schema", ({"$ref": "#/$defs/nope"}, {})),
    ("schema: ref with NUL", "schema", ({"$ref": "#/\x00"}, {})),
    ("schema: ref with lone surrogate", "schema", ({"$ref": "#/\ud800"}, {})),
    ("schema: deep items 5000", "schema", (_deep(5000, "items", {"type": "integer"}), {})),
    ("schema: deep allOf 2000", "schema", (_deep(2000, "allOf", {"type": "integer"}), {})),
    ("schema: deep not 2000", "schema", (_deep(2000, "not", {"type": "integer"}), {})),
    ("schema: deep const", "schema", ({"const": _nested_lists(5000)}, {})),
    ("schema: deep const dict", "schema", ({"const": _self_nested_dict(2000)}, {})),
    ("schema: deep enum", "schema", ({"enum": [_nested_lists(3000), 1]}, {})),
    ("schema: 5000 properties", "schema", ({"type": "object", "properties": {f"k{i}": {"type": "integer"}
                                                                            for i in range(5000)}}, {})),
    ("schema: 5000 required", "schema", ({"type": "object", "properties": {f"k{i}": {"type": "integer"}
                                                                          for i in range(5000)},
                                          "required": [f"k{i}" for i in range(5000)]}, {})),
    ("schema: 50000 enum", "schema", ({"enum": [f"v{i}" for i in range(50000)]}, {})),
    ("schema: mixed huge enum", "schema", ({"enum": list(range(10000)) + [None, True, [1], {"a": 1}]}, {})),
    ("schema: allOf x anyOf product 10x4", "schema", (_wide(10, "product", {"type": "integer"}), {})),
    ("schema: oneOf 200", "schema", (_wide(200, "oneOf", {"type": "integer"}), {})),
    ("schema: anyOf of anyOf", "schema", ({"anyOf": [{"anyOf": [{"anyOf": [{"type": "string", "pattern": f"^{i}{j}{k}"}
                                                                          for k in range(8)]} for j in range(8)]}
                                                    for i in range(8)]}, {})),
    ("schema: minimum 1e308 maximum inf-ish", "schema", ({"type": "number", "minimum": 1e308,
                                                         "maximum": 1.7976931348623157e308}, {})),
    ("schema: integer bounds 10**400", "schema", ({"type": "integer", "minimum": -10**400, "maximum": 10**400}, {})),
    ("schema: integer min 10**400", "schema", ({"type": "integer", "minimum": 10**400}, {})),
    ("schema: number exclusiveMinimum 10**4000", "schema", ({"type": "number", "exclusiveMinimum": 10**4000}, {})),
    ("schema: number minimum 10**400", "schema", ({"type": "number", "minimum": 10**400}, {})),
    ("schema: number maximum -10**400", "schema", ({"type": "number", "maximum": -10**400}, {})),
    ("schema: multipleOf 1e-300", "schema", ({"type": "number", "multipleOf": 1e-300}, {})),
    ("schema: multipleOf 5e-324 integer", "schema", ({"type": "integer", "multipleOf": 5e-324,
                                                     "minimum": 0, "maximum": 10}, {})),
    ("schema: multipleOf 10**400", "schema", ({"type": "integer", "multipleOf": 10**400}, {})),
    ("schema: multipleOf 0", "schema", ({"type": "number", "multipleOf": 0}, {})),
    ("schema: minimum nan", "schema", ({"type": "number", "minimum": float("nan")}, {})),
    ("schema: maximum inf", "schema", ({"type": "number", "maximum": float("inf")}, {})),
    ("schema: minimum 1e-300 maximum 2e-300", "schema", ({"type": "number", "minimum": 1e-300,
                                                         "maximum": 2e-300}, {})),
    ("schema: minimum -0.0 exclusiveMaximum 5e-324", "schema", ({"type": "number", "minimum": -0.0,
                                                                 "exclusiveMaximum": 5e-324}, {})),
    ("schema: minLength 10**9", "schema", ({"type": "string", "minLength": 10**9}, {})),
    ("schema: maxLength 10**400", "schema", ({"type": "string", "maxLength": 10**400}, {})),
    ("schema: minItems 10**6", "schema", ({"type": "array", "minItems": 10**6}, {})),
    ("schema: minItems 1e308", "schema", ({"type": "array", "minItems": 1e308}, {})),
    ("schema: maxItems 300 of objects", "schema", ({"type": "array", "minItems": 300, "maxItems": 300,
                                                   "items": {"type": "object"}}, {})),
    ("schema: minProperties 10**6", "schema", ({"type": "object", "minProperties": 10**6}, {})),
    ("schema: pattern a{1000}{1000}", "schema", ({"type": "string", "pattern": "^(a{1000}){1000}$"}, {})),
    ("schema: pattern nested bounded", "schema", ({"type": "string", "pattern": "^((a{1,9}){1,9}){1,9}$"}, {})),
    ("schema: pattern huge count", "schema", ({"type": "string", "pattern": "a{4294967296}"}, {})),
    ("schema: pattern backref", "schema", ({"type": "string", "pattern": "(a)\\1"}, {})),
    ("schema: pattern lookahead", "schema", ({"type": "string", "pattern": "^(?=.*\\d)(?=.*[a-z]).{8,}$"}, {})),
    ("schema: pattern lone surrogate", "schema", ({"type": "string", "pattern": "\ud800"}, {})),
    ("schema: pattern escaped surrogate", "schema", ({"type": "string", "pattern": "\\ud800"}, {})),
    ("schema: pattern NUL", "schema", ({"type": "string", "pattern": "^a\x00b$"}, {})),
    ("schema: pattern \\p{L}+", "schema", ({"type": "string", "pattern": "^\\p{L}+$"}, {})),
    ("schema: pattern malformed", "schema", ({"type": "string", "pattern": "(("}, {})),
    ("schema: pattern not a string", "schema", ({"type": "string", "pattern": 5}, {})),
    ("schema: patternProperties 6 patterns", "schema", ({"type": "object", "patternProperties": {
        f"^{c}": {"type": "integer"} for c in "abcdef"}}, {})),
    ("schema: key NUL and surrogate", "schema", ({"type": "object", "properties": {"\x00": {"type": "integer"},
                                                                                  "\ud800": {"const": "\udfff"}},
                                                 "required": ["\x00", "\ud800"]}, {})),
    ("schema: enum of edge strings", "schema", ({"enum": ["\x00", "\ud800", "\U0010ffff", "\u2028", "\ufeff", "",
                                                         '"', "\\"]}, {})),
    ("schema: const lone surrogate", "schema", ({"const": "\udc00"}, {"fixed_strings": "canonical"})),
    ("schema: const nan", "schema", ({"const": float("nan")}, {})),
    ("schema: const inf", "schema", ({"enum": [float("inf"), float("-inf"), 10**400]}, {})),
    ("schema: format unknown error", "schema", ({"type": "string", "format": "nope"}, {"unknown_formats": "error"})),
    ("schema: unknown keywords", "schema", ({"type": "object", "x-a": {"b": 1}, "nullable": True,
                                            "discriminator": {"propertyName": "t"}}, {})),
    ("schema: $dynamicRef", "schema", ({"$dynamicAnchor": "n", "anyOf": [{"type": "integer"},
                                                                        {"type": "array",
                                                                         "items": {"$dynamicRef": "#n"}}]}, {})),
    ("schema: draft-04 exclusiveMaximum bool", "schema", ({"$schema": "http://json-schema.org/draft-04/schema#",
                                                          "type": "number", "maximum": 3,
                                                          "exclusiveMaximum": True}, {})),
    ("schema: unknown $schema", "schema", ({"$schema": "http://example.com/mine", "type": "integer"}, {})),
    ("schema: bad option", "schema", ({"type": "integer"}, {"whitespace": "lots"})),
    ("schema: unknown option", "schema", ({"type": "integer"}, {"no_such_option": 1})),
    ("schema: timeout negative", "schema", ({"type": "integer"}, {"timeout": -1})),
    ("schema: timeout nan", "schema", ({"type": "integer"}, {"timeout": float("nan")})),
    ("schema: timeout a string", "schema", ({"type": "integer"}, {"timeout": "5"})),
    ("schema: value_checks off with uniqueItems", "schema", ({"type": "array", "uniqueItems": True},
                                                             {"value_checks": False})),
    ("regex: empty", "regex", ""),
    ("regex: a{1000}{1000}", "regex", "(a{1000}){1000}"),
    ("regex: nested bounded x5", "regex", "((((a{2,9}){2,9}){2,9}){2,9}){2,9}"),
    ("regex: nested optional repeats", "regex", "(?:(?:x?){0,127}){0,127}"),
    ("regex: nested counted repeats of one character", "regex", "(?:a{11,92}){6,287}"),
    ("regex: count 2**32", "regex", "a{4294967296}"),
    ("regex: count 65536", "regex", "a{65536}"),
    ("regex: lookahead", "regex", "(?=a)a"),
    ("regex: backref", "regex", "(a)\\1"),
    ("regex: deep groups 5000", "regex", "(" * 5000 + "a" + ")" * 5000),
    ("regex: deep groups 95", "regex", "(" * 95 + "a" + ")" * 95),
    ("regex: alternation of 20000 words", "regex", "|".join(f"w{i}" for i in range(20000))),
    ("regex: (.*a){20}", "regex", "(.*a){20}"),
    ("regex: [^a]{0,24}x{3}[^b]{5,30}", "regex", "[^a]{0,24}x{3}[^b]{5,30}"),
    ("regex: unicode class x count", "regex", "[\\u0080-\\U0010ffff]{50,200}"),
    ("regex: .{n} on the n-th from the end", "regex", "(a|b)*a(a|b){20}"),
    ("regex: lone surrogate", "regex", "\ud800"),
    ("regex: NUL", "regex", "a\x00b"),
    ("regex: \\Z mid", "regex", "a\\Zb"),
    ("regex: locale flag", "regex", "(?L)a"),
    ("regex: bytes", "regex", b"abc"),
    ("regex: malformed", "regex", "a[b"),
    ("regex: only anchors", "regex", "^$"),
    ("lark: empty", "lark", ""),
    ("lark: empty rule", "lark", "start: "),
    ("lark: only empty string", "lark", 'start: ""'),
    ("lark: left recursion", "lark", 'start: start "a" | "a"'),
    ("lark: right recursion", "lark", 'start: "a" start | "a"'),
    ("lark: unproductive", "lark", "start: start"),
    ("lark: mutual unproductive", "lark", "start: a\na: start"),
    ("lark: undefined rule", "lark", "start: nope"),
    ("lark: huge literal", "lark", "start: " + _lark_string("z" * 200000)),
    ("lark: deep parentheses 3000", "lark", "start: " + "(" * 3000 + '"a"' + ")" * 3000),
    ("lark: chain of 3000 rules", "lark", _chain_rules(3000, "lark")),
    ("lark: ~ 100000", "lark", 'start: "a" ~ 100000'),
    ("lark: 4000 unused rules", "lark", _unused_chain(4000)),
    ("lark: 300 counted repetitions of rules", "lark", _counted_rules(300, "lark")),
    ("lark: ~ 1000 of group", "lark", 'start: ("a" | "bb") ~ 1000'),
    ("lark: terminal matching empty", "lark", "start: A\nA: /a*/"),
    ("lark: terminal regex lookahead", "lark", "start: A\nA: /(?=a)a/"),
    ("lark: terminal regex huge count", "lark", "start: A\nA: /a{100000}/"),
    ("lark: recursive terminals", "lark", "start: A\nA: B\nB: A"),
    ("lark: import nonexistent", "lark", "%import nonexistent.X\nstart: X"),
    ("lark: regex with a bad range", "lark", "start: /[z-a]/"),
    ("lark: regex with a bad group reference", "lark", "start: /(?=a)\\1/"),
    ("lark: regex with \\p", "lark", "start: /\\p{L}/"),
    ("lark: NUL in literal", "lark", 'start: "\x00"'),
    ("lark: surrogate in literal", "lark", 'start: "\ud800"'),
    ("lark: malformed", "lark", "start: (\"a\""),
    ("lark: not a str", "lark", None),
    ("gbnf: empty", "gbnf", ""),
    ("gbnf: no root", "gbnf", 'a ::= "x"'),
    ("gbnf: empty root", "gbnf", "root ::= "),
    ("gbnf: empty literal", "gbnf", 'root ::= ""'),
    ("gbnf: left recursion", "gbnf", 'root ::= root "a" | "a"'),
    ("gbnf: unproductive", "gbnf", "root ::= root"),
    ("gbnf: deep parentheses 5000", "gbnf", "root ::= " + "(" * 5000 + '"a"' + ")" * 5000),
    ("gbnf: repeat {1000}{1000}", "gbnf", 'root ::= ("a"{1000}){1000}'),
    ("gbnf: repeat {100000}", "gbnf", 'root ::= "a"{100000}'),
    ("gbnf: repeat of rule {1000}", "gbnf", 'root ::= x{1000}\nx ::= "a" | "b" x'),
    ("gbnf: repeat {5,2}", "gbnf", 'root ::= "a"{5,2}'),
    ("gbnf: huge literal", "gbnf", 'root ::= "' + "q" * 200000 + '"'),
    ("gbnf: class with surrogate", "gbnf", "root ::= [\\uD800-\\uDFFF]"),
    ("gbnf: class \\U0010FFFF", "gbnf", "root ::= [\\U0010FFFF]+"),
    ("gbnf: NUL escape", "gbnf", 'root ::= "\\x00"'),
    ("gbnf: raw NUL", "gbnf", 'root ::= "\x00"'),
    ("gbnf: malformed", "gbnf", 'root ::= "a" ('),
    ("gbnf: unterminated string", "gbnf", 'root ::= "a'),
    ("gbnf: undefined rule", "gbnf", "root ::= nope"),
    ("gbnf: chain 3000", "gbnf", _chain_rules(3000, "gbnf")),
    ("gbnf: 300 counted repetitions of rules", "gbnf", _counted_rules(300, "gbnf")),
    ("gbnf: not a str", "gbnf", 5),
]
