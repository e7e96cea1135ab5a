"""``enum`` and ``const``: each value valid for the rest of its conjunction, spelled as
symbols; and fixed strings (enum strings, object keys) in the JSON spellings the
``fixed_strings`` option allows.

An integral number has two JSON forms that parse differently (``3``, an int, and
``3.0``, a float); each is offered where the schema accepts what it parses to.  Past
`LARGE_ENUM` strings, one terminal holds their canonical spellings; past `LARGE_ENUM`
numbers, two terminals of finitely many spellings and one of ``.0`` tails hold them all
(the same language as a terminal per number: `_large_number_enum`).

Example:
    >>> literal_regex("a.b")
    'a\\\\U0000002eb'
    >>> number_forms(3), number_forms(2.5)
    (['3', '3.0'], ['2.5'])
"""

from __future__ import annotations

import functools
import json
import re
from typing import TYPE_CHECKING, Any

from constrained.errors import InvalidSchemaError
from constrained.json_schema import grounding
from constrained.json_schema.compile.rules import Alternatives
from constrained.json_schema.conjunction import Conjunction, Part
from constrained.json_schema.ecma_regex import regex_from_ast
from constrained.json_schema.json_string import encoded_chars_ast, json_string_regex
from constrained.json_schema.keywords import ANNOTATIONS
from constrained.json_schema.resolver import Located

if TYPE_CHECKING:                      # pragma: no cover
    from constrained.json_schema.compiler import SchemaCompiler

LARGE_ENUM = 64          # enum strings (numbers) past which one terminal holds their canonical spellings (all)


def enum_alternatives(compiler: SchemaCompiler, conj: Conjunction) -> Alternatives:
    """The alternatives of a conjunction with a ``const`` or ``enum``: its values that the
    rest of the conjunction accepts."""
    source = next(p for p in conj if p.has("const") or p.has("enum"))
    values = [source.get("const")] if source.has("const") else source.get("enum")
    if not isinstance(values, list):
        raise InvalidSchemaError("enum must be an array", keyword="enum", pointer=source.pointer)
    # validated against everything but the enum itself (already known to hold: an
    # enum of n values would cost n^2 comparisons)
    keyword = "const" if source.has("const") else "enum"
    with_keyword = [_schema_without(compiler, p, keyword) if p is source else p.loc for p in conj]
    schemas = [loc for loc in with_keyword if loc is not None]
    out: Alternatives = []
    strings: list[str] = []
    large = sum(1 for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)) > LARGE_ENUM
    number_forms_valid: list[list[str]] = []
    for value in values:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if large:
                number_forms_valid.append(_valid_number_forms(compiler, schemas, value))
            else:
                out += _number_value(compiler, schemas, value)
        elif all(compiler.validators.is_valid(loc, value) for loc in schemas):
            if isinstance(value, str):
                strings.append(value)
            else:
                out.append(value_symbols(compiler, value))
    if large:
        out += _large_number_enum(compiler, source, number_forms_valid)
    return _string_values(compiler, source, grounding.enum_strings(compiler, conj, strings)) + out


def fixed_string(compiler: SchemaCompiler, text: str, hint: str, *, canonical: bool = False) -> str:
    """A terminal for the JSON string ``text`` in the spellings ``fixed_strings`` allows
    (only ``json.dumps``' spelling when ``canonical``)."""
    if canonical or compiler.options.fixed_strings == "canonical":
        return compiler.builder.term(literal_regex(json.dumps(text, ensure_ascii=False)), hint)
    return compiler.builder.term(json_literal_regex(text), hint)


def value_symbols(compiler: SchemaCompiler, value: Any) -> tuple[str, ...]:
    """Symbols spelling exactly the JSON value ``value`` (object keys in the given order)."""
    builder, ws = compiler.builder, compiler.whitespace()
    if isinstance(value, str):
        return (fixed_string(compiler, value, "CONST_STR"),)
    if isinstance(value, bool) or value is None:
        return (builder.literal(json.dumps(value)),)
    if isinstance(value, (int, float)):
        # inside a container: the form the schema wrote (what the enum filter validated),
        # and both integral forms where the draft makes them the same value
        forms = number_forms(value)
        if len(forms) == 2 and not (compiler.dialect.floats_are_integers and abs(value) <= 2 ** 53):
            return (builder.literal(forms[0] if isinstance(value, int) else forms[1]),)
        return (_number_symbol(compiler, forms),)
    if isinstance(value, list):
        out: list[str] = [builder.literal("["), *ws]
        for i, item in enumerate(value):
            if i:
                out += [*ws, builder.literal(","), *ws]
            out += value_symbols(compiler, item)
        return (*out, *ws, builder.literal("]"))
    if isinstance(value, dict):
        out = [builder.literal("{"), *ws]
        for i, (key, item) in enumerate(value.items()):
            if i:
                out += [*ws, builder.literal(","), *ws]
            out += [fixed_string(compiler, key, "KEY"), *ws, builder.literal(":"), *ws]
            out += value_symbols(compiler, item)
        return (*out, *ws, builder.literal("}"))
    raise InvalidSchemaError(f"not a JSON value: {value!r}", keyword="enum")


def number_forms(value: int | float) -> list[str]:
    """The JSON spellings of a number the compiler offers: an integral value as ``3`` and
    ``3.0`` (each parses to its own Python value), any other as ``json.dumps`` writes it."""
    if isinstance(value, float) and not value.is_integer():
        if value != value or value in (float("inf"), float("-inf")):
            raise InvalidSchemaError(f"not a JSON number: {value!r}", keyword="enum")
        return [json.dumps(value)]
    whole = str(int(value))
    return [whole, whole + ".0"]


def json_equal(a: Any, b: Any) -> bool:
    """Equality of JSON values (``true`` is not ``1``)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return a == b


def _schema_without(compiler: SchemaCompiler, part: Part, keyword: str) -> Located | None:
    """``part``'s sub-schema without ``keyword`` (None: nothing else in it to check)."""
    rest = {k: v for k, v in part.schema.items() if k != keyword}
    if not any(part.has(k) and k not in ANNOTATIONS for k in rest):
        return None
    key = id(part.schema)
    stripped = compiler.schemas_without_keyword
    if key not in stripped:     # kept alive: validators are cached by the schema's id
        loc = part.loc
        stripped[key] = Located(rest, loc.base, loc.pointer, loc.resource, loc.resource_pointer)
    return stripped[key]


def _string_values(compiler: SchemaCompiler, source: Part, strings: list[str]) -> Alternatives:
    """Alternatives for an enum's strings: one terminal each, or, past `LARGE_ENUM`
    strings, one terminal of their canonical JSON spellings (a finite automaton built
    directly; every escape spelling of thousands of strings would not fit one)."""
    if len(strings) <= LARGE_ENUM:
        return [(fixed_string(compiler, v, "CONST_STR"),) for v in strings]
    if compiler.options.fixed_strings != "canonical":
        compiler.note(source.pointer, "enum", f"an enum of {len(strings)} strings (over {LARGE_ENUM}) accepts "
                                              f"each string's canonical JSON spelling only")
    spellings = sorted({literal_regex(json.dumps(v, ensure_ascii=False)) for v in strings})
    return [(compiler.builder.term("(?:" + "|".join(spellings) + ")", "ENUM_STR"),)]


def _number_value(compiler: SchemaCompiler, schemas: list[Located], value: int | float) -> Alternatives:
    """The spellings of an enum/const number valid for every sub-schema of ``schemas``.

    An integral value has two JSON forms that parse differently: ``3`` (an int) and
    ``3.0``/``3.00`` (a float, not an integer in drafts 03/04, and not even the same
    number past 2**53); each form is validated as what it parses to."""
    valid = _valid_number_forms(compiler, schemas, value)
    return [(_number_symbol(compiler, valid),)] if valid else []


def _valid_number_forms(compiler: SchemaCompiler, schemas: list[Located], value: int | float) -> list[str]:
    """The forms of `number_forms` that parse to ``value`` and that every sub-schema of
    ``schemas`` accepts (as what each parses to)."""
    # each form must still be the enum's value (the schemas no longer hold the enum itself)
    parsed = {form: json.loads(form) for form in number_forms(value)}
    return [form for form, v in parsed.items()
            if json_equal(v, value) and all(compiler.validators.is_valid(loc, v) for loc in schemas)]


def _large_number_enum(compiler: SchemaCompiler, source: Part, valid_forms: list[list[str]]) -> Alternatives:
    """Alternatives for an enum of more than `LARGE_ENUM` numbers, given each number's valid
    forms (`_valid_number_forms`): the language of a `_number_symbol` per number, in three
    terminals instead of one each (whose automata and token tables a first mask would
    build one by one: seconds for 10,000 numbers).

    A number's symbol matches ``3``; ``3`` with an optional ``.0+`` tail; ``3`` with a
    ``.0+`` tail; or a fixed spelling (``2.5``).  The union of these is a finite set of
    untailed spellings, or a base from a finite set followed by a ``.0+`` tail: two
    terminals of finitely many words (built directly as finite automata) and one tail
    terminal after the second.  A grammar with ignored terminals (lark's ``%ignore``
    around a ``%json`` section) would also allow them between a base and its tail."""
    whole: set[str] = set()          # spellings matched as they are
    based: set[str] = set()          # bases followed by a .0+ tail
    for forms in valid_forms:
        if len(forms) == 2:                       # 3, and 3 with a .0+ tail
            whole.add(forms[0])
            based.add(forms[0])
        elif len(forms) == 1 and forms[0].endswith(".0"):
            based.add(forms[0][:-2])              # 3 with a .0+ tail only
        elif forms:
            whole.add(forms[0])
    compiler.note(source.pointer, "enum", f"an enum of {len(valid_forms)} numbers (over {LARGE_ENUM}) is compiled "
                                          f"as one terminal of their spellings (and one of their .0 tails)")
    out: Alternatives = []
    if whole:
        out.append((compiler.builder.term(_words_regex(whole), "ENUM_NUM"),))
    if based:
        out.append((compiler.builder.term(_words_regex(based), "ENUM_NUM_BASE"),
                    compiler.builder.term(r"\.0+", "ENUM_NUM_TAIL")))
    return out


def _words_regex(words: set[str]) -> str:
    """A regex of exactly ``words`` (an alternation of literals: a finite automaton)."""
    return "(?:" + "|".join(sorted(map(literal_regex, words))) + ")"


def _number_symbol(compiler: SchemaCompiler, forms: list[str]) -> str:
    """A terminal for the number spellings ``forms`` (of `number_forms`: ``3``,
    ``3.0``, or both); ``3.0`` stands for every ``3.000...``."""
    if len(forms) == 2:
        return compiler.builder.term(re.escape(forms[0]) + r"(?:\.0+)?", "CONST_NUM")
    if forms[0].endswith(".0"):
        return compiler.builder.term(re.escape(forms[0][:-1]) + "0+", "CONST_NUM")
    return compiler.builder.literal(forms[0])


@functools.lru_cache(maxsize=8192)
def _encoded_char_regex(code_point: int) -> str:
    """Every JSON spelling of the character ``code_point`` as one regex item (a group if it
    has alternatives): `json_string.encoded_chars_ast`, printed."""
    ast = encoded_chars_ast(((code_point, code_point),))
    text = regex_from_ast(ast)
    return f"(?:{text})" if ast[0] == "alt" else text


@functools.lru_cache(maxsize=8192)
def json_literal_regex(text: str) -> str:
    """``json_string_regex(literal_regex(text))`` (the JSON string ``text`` in every
    escape spelling), a character at a time: keys recur across schemas and each
    character's spellings are printed once, instead of parsing and re-encoding the
    whole literal.  The result's items are finite sets, which
    `constrained.automata.byte_dfa` builds as a chain of tries."""
    if not text or any(0xD800 <= ord(c) <= 0xDFFF for c in text):
        return json_string_regex(literal_regex(text))      # lone surrogates: no spelling at all
    return '"' + "".join(map(_encoded_char_regex, map(ord, text))) + '"'


def literal_regex(text: str) -> str:
    """A Python regex matching exactly ``text`` (every character literal)."""
    return "".join(f"\\U{ord(c):08x}" if not c.isalnum() else c for c in text) if text else "(?:)"
