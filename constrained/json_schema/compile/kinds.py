"""The kinds of JSON value a conjunction of sub-schemas allows, read off ``type`` and
``not``: ``null``, ``boolean``, ``object``, ``array``, ``string``, ``integer`` and
``fraction`` (a number that is not an integer; ``"number"`` is both).

Example:
    >>> sorted(kinds_of(["number", "null"], pointer=""))
    ['fraction', 'integer', 'null']
    >>> sorted(value_kinds(2.5)), sorted(value_kinds(2.0)), sorted(value_kinds(True))
    (['fraction'], ['integer'], ['boolean'])
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from constrained.errors import InvalidSchemaError
from constrained.json_schema.conjunction import Conjunction, Part
from constrained.json_schema.keywords import ANNOTATIONS

if TYPE_CHECKING:                      # pragma: no cover
    from constrained.json_schema.compiler import SchemaCompiler

JSON_TYPES = ("null", "boolean", "object", "array", "number", "string", "integer")
ALL_KINDS = frozenset({"null", "boolean", "object", "array", "string", "integer", "fraction"})
KINDS_OF_TYPE = {"null": {"null"}, "boolean": {"boolean"}, "object": {"object"}, "array": {"array"},
                 "string": {"string"}, "integer": {"integer"}, "number": {"integer", "fraction"}}
_CONTAINER_KINDS: dict[type, str] = {str: "string", list: "array", dict: "object"}
# keywords that hold for every value outside one kind (their validators skip other values)
KEYWORD_KIND: dict[str, frozenset[str]] = {
    **dict.fromkeys(("required", "properties", "patternProperties", "additionalProperties", "minProperties",
                     "maxProperties", "dependentRequired", "dependentSchemas", "dependencies", "propertyNames",
                     "unevaluatedProperties"), frozenset({"object"})),
    **dict.fromkeys(("items", "prefixItems", "additionalItems", "minItems", "maxItems", "uniqueItems", "contains",
                     "minContains", "maxContains", "unevaluatedItems"), frozenset({"array"})),
    **dict.fromkeys(("minLength", "maxLength", "pattern"), frozenset({"string"})),
    **dict.fromkeys(("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"),
                    frozenset({"integer", "fraction"})),
}


def allowed_kinds(compiler: SchemaCompiler, conj: Conjunction) -> set[str]:
    """The kinds every ``type`` and ``not`` of ``conj`` allows.  A ``not`` beyond
    ``type`` and 'a number that is not an integer' become value checks (the grammar
    allows a superset)."""
    kinds = set(ALL_KINDS)
    for part in conj:
        if part.has("type"):
            kinds &= type_kinds(compiler, part)
        if part.has("not"):
            negated = part.get("not")
            if negated is True or negated == {}:
                return set()
            if isinstance(negated, dict) and set(negated) - ANNOTATIONS == {"type"}:
                kinds -= kinds_of(negated["type"], part.pointer + "/not")
            elif negated is not False:
                # a schema whose keywords all constrain one kind holds for every other value,
                # so its negation admits that kind only (the check decides the rest)
                kinds &= _constrained_kinds(compiler, negated) or ALL_KINDS
                compiler.check(part, "not", "not is enforced by validation")
    if "fraction" in kinds and "integer" not in kinds:
        # every part that narrows the kinds is validated: the one excluding integers may be any of them
        for part in conj:
            if part.has("type") or part.has("not"):
                compiler.check(part, "type", "'a number that is not an integer' is compiled as any number")
        kinds.add("integer")
    return kinds


def type_kinds(compiler: SchemaCompiler, part: Part, *, check: bool = True) -> set[str]:
    """The value kinds ``part``'s ``type`` allows (draft-03 ``any`` and schemas in a type list:
    every kind, the schemas enforced by a value check unless not ``check``)."""
    declared = part.get("type")
    if compiler.dialect.name == "draft3":
        types = declared if isinstance(declared, list) else [declared]
        if "any" in types:
            return set(ALL_KINDS)
        if any(isinstance(t, dict) for t in types):
            if check:
                compiler.check(part, "type", "draft-03 schemas inside type are not translated")
            return set(ALL_KINDS)
    return kinds_of(declared, part.pointer)


def kinds_of(declared: Any, pointer: str) -> set[str]:
    """The value kinds a ``type`` keyword's value allows."""
    types = [declared] if isinstance(declared, str) else declared
    if not isinstance(types, list) or not all(isinstance(t, str) and t in JSON_TYPES for t in types):
        raise InvalidSchemaError(f"type must be one of {JSON_TYPES} or a list of them, not {declared!r}",
                                 keyword="type", pointer=pointer)
    return {kind for t in types for kind in KINDS_OF_TYPE[t]}


def value_kinds(value: Any) -> set[str]:
    """The kind of a JSON value, as a one-element set."""
    if isinstance(value, bool):
        return {"boolean"}
    if value is None:
        return {"null"}
    if isinstance(value, (int, float)):
        return {"integer"} if float(value).is_integer() else {"fraction"}
    return {_CONTAINER_KINDS.get(type(value), "null")}


def _constrained_kinds(compiler: SchemaCompiler, schema: Any) -> set[str] | None:
    """The one kind of value every keyword of ``schema`` constrains (None: not one kind)."""
    if not isinstance(schema, dict) or "$ref" in schema:
        return None
    kinds = {KEYWORD_KIND.get(k) for k in schema if k not in ANNOTATIONS and compiler.dialect.evaluates(k)}
    if len(kinds) != 1 or None in kinds:
        return None
    only = kinds.pop()
    assert only is not None
    return set(only)
