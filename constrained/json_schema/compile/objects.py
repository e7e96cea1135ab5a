"""Object values: declared members (``properties``, ``required``) in schema order, each
optional member skippable; members with other keys (``additionalProperties``,
``patternProperties``, ``propertyNames``) after them, their key terminals excluding
the declared names.

Two rules per declared member ``i``: ``first_from[i]`` (members ``i..`` with none
written yet) and ``after_from[i]`` (members ``i..`` after a comma-separated first
one), so an object never has a leading or doubled comma.  With ``property_order="any"``
members come in any order and the object is checked when it closes.  A single
``patternProperties`` of up to `MAX_KEY_PATTERNS` patterns is split exactly into one
key class per subset of the patterns a key matches; anything else is a union,
checked.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from itertools import combinations
from typing import TYPE_CHECKING, Any

from constrained.automata.json_words import json_words_regex
from constrained.errors import CompileTimeoutError, ConstrainedError, InvalidSchemaError
from constrained.json_schema.compile.literals import LARGE_ENUM, fixed_string, literal_regex
from constrained.json_schema.compile.rules import RAW_STRING_REGEX, Alternatives
from constrained.json_schema.compile.strings import StringPiece, string_pieces, string_terminal
from constrained.json_schema.conjunction import Conjunction, Part, property_items
from constrained.json_schema.ecma_regex import pattern_search_regex
from constrained.json_schema.json_string import json_string_regex
from constrained.json_schema.keywords import ANNOTATIONS
from constrained.json_schema.resolver import escape_pointer_token

if TYPE_CHECKING:                      # pragma: no cover
    from constrained.json_schema.compiler import SchemaCompiler

MAX_KEY_PATTERNS = 3     # patternProperties split exactly into 2**n key classes


def object_alternatives(compiler: SchemaCompiler, conj: Conjunction) -> Alternatives:
    """The alternatives of the objects ``conj`` allows."""
    builder, ws = compiler.builder, compiler.whitespace()
    names, required = _declared_names(compiler, conj)
    name_items = [(p.get("propertyNames"), p.loc.base, p.pointer + "/propertyNames")
                  for p in conj if p.has("propertyNames")]
    name_schemas = compiler.flatten(name_items) if name_items else ()
    declared: list[tuple[str, str, bool]] = []      # (name, value symbol, required)

    def undecided(part: Part, pattern: str) -> None:
        compiler.check(part, "patternProperties", f"pattern {pattern!r} has no regular translation")

    for name in names:
        name_ok = name_schemas is not None and all(compiler.validators.is_valid(q.loc, name) for q in name_schemas)
        value = compiler.items_symbol(property_items(conj, name, compiler.index, undecided), "p_" + name) \
            if name_ok else None
        if value is None:
            if name in required:
                return []
            continue
        declared.append((name, value, name in required))
    colon = builder.literal(":")
    builder.literal(",")    # the comma's terminal, named before the keys' (names follow creation order)
    # with members in any order the object is validated when it closes, so extra keys
    # need not exclude the declared names (cheaper automata: plain strings)
    unordered = compiler.options.property_order == "any" and bool(declared)
    extras = _extra_members(compiler, conj, [] if unordered else names, name_schemas)

    def member(name: str, value: str) -> tuple[str, ...]:
        return (fixed_string(compiler, name, "KEY", canonical=len(names) > LARGE_ENUM), *ws, colon, *ws, value)

    extra_members = [(key, *ws, colon, *ws, value) for key, value in extras]
    open_brace, close_brace = builder.literal("{"), builder.literal("}")
    if unordered:
        members = _members_in_any_order(compiler, conj, declared, member, extra_members)
    else:
        members = _members_in_order(compiler, declared, member, extra_members)
    # (members that may be empty would put two gaps between the braces: the empty object
    # is its own alternative)
    out: Alternatives = [(open_brace, *ws, members, *ws, close_brace)]
    if not any(is_required for _, _, is_required in declared):
        out.append((open_brace, *ws, close_brace))
    return out


def _declared_names(compiler: SchemaCompiler, conj: Conjunction) -> tuple[list[str], list[str]]:
    """The declared member names (``properties`` in schema order, then required names
    not among them) and the required ones; the object keywords counted by validation
    become checks."""
    order: list[str] = []
    required: list[str] = []
    for part in conj:
        properties = part.get("properties", {})
        if not isinstance(properties, dict):
            raise InvalidSchemaError("properties must be an object", keyword="properties", pointer=part.pointer)
        order += [k for k in properties if k not in order]
        required_here = part.get("required", [])
        if compiler.dialect.required_in_property:   # draft 03: a truthy "required" inside a property's schema
            required_here = [k for k, sub in properties.items()
                             if isinstance(sub, dict) and sub.get("required", False)]
        elif isinstance(required_here, bool):     # the draft-03 spelling under a later draft
            compiler.check(part, "required",
                           f"a boolean required ({compiler.dialect.name}) is enforced by validation")
            required_here = []
        if not isinstance(required_here, list) or not all(isinstance(r, str) for r in required_here):
            raise InvalidSchemaError("required must be an array of strings", keyword="required",
                                     pointer=part.pointer)
        required += [r for r in required_here if r not in required]
        if not isinstance(part.get("patternProperties", {}), dict):
            raise InvalidSchemaError("patternProperties must be an object", keyword="patternProperties",
                                     pointer=part.pointer)
        for keyword in ("minProperties", "maxProperties", "dependentRequired", "dependentSchemas",
                        "dependencies", "unevaluatedProperties"):
            if part.has(keyword):
                compiler.check(part, keyword, f"{keyword} is enforced by validation")
    return order + [r for r in required if r not in order], required


MemberSymbols = Callable[[str, str], tuple[str, ...]]
"""The symbols of a declared member: its key, a colon and its value's nonterminal."""


def _members_in_order(compiler: SchemaCompiler, declared: list[tuple[str, str, bool]], member: MemberSymbols,
                      extra_members: list[tuple[str, ...]]) -> str:
    """The nonterminal of one or more members: the declared ones in order (the optional
    ones skippable), then the extra ones.  ``first_from[i]``: members ``i..`` with none
    written yet; ``after_from[i]``: members ``i..`` after one was written (each behind a
    comma)."""
    builder, ws, comma = compiler.builder, compiler.whitespace(), compiler.builder.literal(",")
    n = len(declared)
    first_from = [builder.fresh(f"obj_a{i}") for i in range(n + 1)]
    after_from = [builder.fresh(f"obj_b{i}") for i in range(n + 1)]
    first_at_end, after_at_end = first_from[n], after_from[n]
    builder.rule(after_at_end)       # (first_from[n] has no empty rule: no member at all is not its job)
    if extra_members:
        more = builder.fresh("obj_extras")
        builder.rule(more)
        for extra in extra_members:
            builder.rule(more, more, *ws, comma, *ws, *extra)
            builder.rule(after_at_end, *ws, comma, *ws, *extra, more)
            builder.rule(first_at_end, *extra, more)
    for i in range(n - 1, -1, -1):
        name, value, is_required = declared[i]
        builder.rule(first_from[i], *member(name, value), after_from[i + 1])
        builder.rule(after_from[i], *ws, comma, *ws, *member(name, value), after_from[i + 1])
        if not is_required:
            builder.rule(first_from[i], first_from[i + 1])
            builder.rule(after_from[i], after_from[i + 1])
    return first_from[0]


def _members_in_any_order(compiler: SchemaCompiler, conj: Conjunction, declared: list[tuple[str, str, bool]],
                          member: MemberSymbols, extra_members: list[tuple[str, ...]]) -> str:
    """The nonterminal of one or more members in any order: a superset (repeats, missing
    required members) checked when the object completes."""
    builder, ws, comma = compiler.builder, compiler.whitespace(), compiler.builder.literal(",")
    compiler.check(conj[0], "properties", "property_order='any': required members and unique keys are checked")
    # one list rule over one member nonterminal: a parser set after a member
    # then holds one list item, not one per declared key
    members, any_member = builder.fresh("obj_members"), builder.fresh("obj_member")
    for alternative in [member(name, value) for name, value, _ in declared] + extra_members:
        builder.rule(any_member, *alternative)
    builder.rule(members, any_member)
    builder.rule(members, members, *ws, comma, *ws, any_member)
    return members


def _extra_members(compiler: SchemaCompiler, conj: Conjunction, names: list[str],
                   name_schemas: Conjunction | None) -> list[tuple[str, str]]:
    """``(key terminal, value nonterminal)`` for members whose key is not one of ``names``."""
    if name_schemas is None:
        return []
    key_pieces: list[StringPiece] = []
    declared_names: tuple[str, ...] = ()
    if len(names) > LARGE_ENUM:
        # every escape spelling of hundreds of names does not fit one automaton: extra keys
        # are then written without escapes, and exclude the names' canonical spellings
        # (a finite automaton built directly)
        compiler.note(conj[0].pointer, "properties", f"with {len(names)} declared properties, keys are accepted "
                                                     "in their canonical spelling, other keys without escapes")
        key_pieces.append((conj[0], "properties", ("encoded", RAW_STRING_REGEX)))
        declared_names = ("(?:" + "|".join(sorted({literal_regex(json.dumps(n, ensure_ascii=False))
                                                   for n in names})) + ")",)
    elif names:     # every spelling of the names, built directly (`constrained.automata.json_words`)
        declared_names = (json_words_regex(names),)
    for q in name_schemas:
        other = [k for k in q.keywords() if k not in ANNOTATIONS and k not in
                 ("pattern", "minLength", "maxLength", "format", "type")]
        if other or q.get("type", "string") not in ("string", ["string"]):
            compiler.check(q, "propertyNames", "propertyNames beyond pattern/length/format is enforced by "
                                               "validation")
    name_pieces = string_pieces(compiler, tuple(q for q in name_schemas)) if name_schemas else []
    if name_pieces is None:
        return []
    key_pieces += name_pieces
    pattern_parts = [p for p in conj if p.get("patternProperties")]
    mode = compiler.options.additional_properties

    def absent_allows_more(part: Part) -> bool:
        """What an absent ``additionalProperties`` of ``part`` means under the option."""
        return (not part.has("properties")) if mode == "declared" else bool(mode)

    # the additionalProperties of the parts without patternProperties
    additional: list[tuple[Any, str, str]] = [
        (p.get("additionalProperties", absent_allows_more(p)), p.loc.base, p.pointer + "/additionalProperties")
        for p in conj if p not in pattern_parts and (p.has("additionalProperties") or not absent_allows_more(p))]
    out: list[tuple[str, str]] = []

    def add(pieces: list[StringPiece], excluding: tuple[str, ...], items: list[tuple[Any, str, str]],
            hint: str) -> None:
        value = compiler.items_symbol(items, hint)
        if value is None:
            return
        key = string_terminal(compiler, pieces, "EXTRA_KEY", excluding=declared_names + excluding)
        if key is not None:
            out.append((key, value))

    if not pattern_parts:
        add(key_pieces, (), additional, "extra")
        return out
    exact = len(pattern_parts) == 1 and len(pattern_parts[0].get("patternProperties")) <= MAX_KEY_PATTERNS
    pattern_part = pattern_parts[0]
    patterns = list(pattern_part.get("patternProperties"))
    key_regexes: dict[str, str] = {}
    if exact:
        try:
            key_regexes = {pattern: json_string_regex(pattern_search_regex(pattern)) for pattern in patterns}
        except CompileTimeoutError:
            raise
        except ConstrainedError:
            exact = False
    if exact:
        # the schema of a key no pattern matches (beside the other parts' additionalProperties)
        unmatched = ([(pattern_part.get("additionalProperties"), pattern_part.loc.base,
                       pattern_part.pointer + "/additionalProperties")]
                     if pattern_part.has("additionalProperties") else
                     ([] if absent_allows_more(pattern_part)
                      else [(False, pattern_part.loc.base, pattern_part.pointer)]))
        for r in range(len(patterns) + 1):
            for matched in combinations(patterns, r):
                also: list[StringPiece] = [(pattern_part, "patternProperties", ("encoded", key_regexes[pattern]))
                                           for pattern in matched]
                excluding = tuple(key_regexes[pattern] for pattern in patterns if pattern not in matched)
                items = [(pattern_part.get("patternProperties")[pattern], pattern_part.loc.base,
                          f"{pattern_part.pointer}/patternProperties/{escape_pointer_token(pattern)}")
                         for pattern in matched]
                add(key_pieces + also, excluding, items + (additional if matched else unmatched + additional),
                    f"pp{r}")
        return out
    for p in pattern_parts:
        compiler.check(p, "patternProperties", "several patternProperties are compiled as a union of their "
                                               "value schemas")
    value_symbol = compiler.builder.fresh("extra_value")
    alternatives: list[list[tuple[Any, str, str]]] = []
    for p in pattern_parts:
        for pattern, schema in p.get("patternProperties").items():
            alternatives.append([(schema, p.loc.base,
                                  f"{p.pointer}/patternProperties/{escape_pointer_token(pattern)}")])
        if p.has("additionalProperties"):
            alternatives.append([(p.get("additionalProperties"), p.loc.base, p.pointer + "/additionalProperties")])
    if not all(p.has("additionalProperties") for p in pattern_parts):
        alternatives.append([])
    values = [symbol for alternative in alternatives
              if (symbol := compiler.items_symbol(alternative + additional, "extra")) is not None]
    if not values:
        return out
    for symbol in dict.fromkeys(values):
        compiler.builder.rule(value_symbol, symbol)
    key = string_terminal(compiler, key_pieces, "EXTRA_KEY", excluding=declared_names)
    if key is not None:
        out.append((key, value_symbol))
    return out
