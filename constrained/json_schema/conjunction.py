"""Conjunctions of located sub-schemas: what applies to one JSON value.

A value at one place of an instance must satisfy several sub-schemas at once:
the schema itself, the targets of its ``$ref``, the branches of its ``allOf``,
and, one level down, every ``properties`` / ``patternProperties`` /
``additionalProperties`` (or ``prefixItems`` / ``items``) entry that applies to
its key (index).  A `Conjunction` is that list, flattened (``allOf`` and ``$ref``
expanded, ``true`` dropped), so the compiler and the value checks see one flat
list of dictionaries and read keywords across all of them.

Disjunctive keywords (``anyOf``, ``oneOf``, ``if``) stay in place; the compiler
distributes them, marking the keyword as *done* in the `Part` it expanded.

Example:
    >>> from constrained.json_schema.resolver import SchemaIndex
    >>> schema = {"$defs": {"pos": {"minimum": 0}}, "allOf": [{"$ref": "#/$defs/pos"}, {"type": "integer"}]}
    >>> idx = SchemaIndex(schema)
    >>> from constrained.json_schema.dialect import dialect_of
    >>> conj = flatten([root_part(idx)], idx, dialect_of(schema))
    >>> sorted(k for p in conj for k in p.keywords())      # the root keeps its $defs (an annotation)
    ['$defs', 'minimum', 'type']
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Any

from constrained.errors import InvalidSchemaError, UnsupportedSchemaError
from constrained.json_schema.dialect import Dialect
from constrained.json_schema.resolver import Located, SchemaIndex, escape_pointer_token

# keywords expanded by `flatten` (never read through `Part.get`)
STRUCTURAL = frozenset({"allOf", "$ref"})


@dataclass(frozen=True)
class Part:
    """One sub-schema of a conjunction, with the keywords already expanded by the caller."""

    loc: Located
    done: frozenset[str] = field(default_factory=frozenset)

    @property
    def schema(self) -> dict:
        return self.loc.schema

    @property
    def pointer(self) -> str:
        return self.loc.pointer

    @cached_property
    def active(self) -> frozenset[str]:
        """The keywords still to be read here: the schema's, less the done and structural
        ones (computed once: a conjunction's parts are asked for keywords again and again)."""
        return frozenset(self.loc.schema).difference(self.done, STRUCTURAL)

    def has(self, keyword: str) -> bool:
        return keyword in self.active

    def get(self, keyword: str, default: Any = None) -> Any:
        return self.loc.schema[keyword] if self.has(keyword) else default

    def keywords(self) -> list[str]:
        return [k for k in self.loc.schema if k not in self.done and k not in STRUCTURAL]

    def without(self, keyword: str) -> Part:
        return Part(self.loc, self.done | {keyword})

    @cached_property
    def key(self) -> tuple:
        return (id(self.loc.schema), self.loc.base, self.done)

    @cached_property
    def flat(self) -> bool:
        """Whether ``$ref`` and ``allOf`` are expanded here already, or absent: `flatten`
        then only keeps or drops the part."""
        return STRUCTURAL.isdisjoint(self.loc.schema.keys() - self.done)


Conjunction = tuple[Part, ...]


def conjunction_key(conj: Conjunction) -> tuple:
    return tuple(p.key for p in conj)


def root_part(index: SchemaIndex) -> tuple[Any, str, str]:
    """The document root as a ``(schema, base, pointer)`` item for `flatten`."""
    return (index.document, index.root_uri, "")


def locate(index: SchemaIndex, schema: Any, base: str, pointer: str) -> Located:
    """The `Located` of a schema object (walked by the index, or described by its caller)."""
    here = index.locate(schema)
    if here is not None:
        return here
    return Located(schema, base, pointer, base, pointer)


def flatten(items: Iterable[Part | tuple[Any, str, str]], index: SchemaIndex, dialect: Dialect,
            on_ignored=None) -> Conjunction | None:
    """Expand ``$ref`` and ``allOf`` and drop ``true``: a flat conjunction, or None if it
    contains ``false``.  ``items`` are `Part`s or ``(schema, base, pointer)`` triples.

    Keywords the ``dialect`` does not evaluate (``const`` under draft-04, ...) start
    out done: they are annotations there.  Up to draft 07 ``$ref`` replaces its
    siblings (``on_ignored(pointer, keywords)`` hears about the ignored ones).
    """
    out: list[Part] = []
    seen: set[tuple] = set()
    stack = list(items)[::-1]
    while stack:
        item = stack.pop()
        if isinstance(item, Part):
            part = item
        else:
            schema, base, pointer = item
            if schema is True:
                continue
            if schema is False:
                return None
            if not isinstance(schema, dict):
                raise InvalidSchemaError(f"a schema must be an object or a boolean, not {type(schema).__name__}",
                                         pointer=pointer)
            loc = locate(index, schema, base, pointer)
            if index.locate(schema) is loc:     # an object of the document: memoised by its id
                memo_key = (id(schema), dialect.name)
                foreign = index.foreign_keywords.get(memo_key)
                if foreign is None:
                    foreign = index.foreign_keywords[memo_key] = _foreign_keywords(schema, dialect)
            else:
                foreign = _foreign_keywords(schema, dialect)
            part = Part(loc, foreign)
        if part.key in seen:
            continue
        seen.add(part.key)
        if part.flat:              # nothing to expand (e.g. a part of an earlier conjunction)
            if part.active:
                out.append(part)
            continue
        schema, base, pointer = part.schema, part.loc.base, part.pointer
        pending: list[Any] = []
        if "$ref" in schema and "$ref" not in part.done:
            target, tbase, _ = index.resolve(schema["$ref"], base, pointer)
            tloc = (target, tbase, pointer + "/$ref")
            if dialect.refs_replace_siblings:
                ignored = [k for k in schema if k not in ("$ref",) and k in _VALIDATION]
                if ignored and on_ignored is not None:
                    on_ignored(pointer, ignored)
                stack.append(tloc)
                continue
            pending.append(tloc)
        if "allOf" in schema and "allOf" not in part.done and dialect.evaluates("allOf"):
            branches = schema["allOf"]
            if not isinstance(branches, list) or not branches:
                raise InvalidSchemaError("allOf must be a non-empty array", keyword="allOf", pointer=pointer)
            pending.extend((sub, base, f"{pointer}/allOf/{i}") for i, sub in enumerate(branches))
        if part.active:
            expanded = STRUCTURAL.intersection(schema) - part.done
            out.append(Part(part.loc, part.done | expanded) if expanded else part)  # never expanded twice
        stack.extend(reversed(pending))
    return tuple(out)


def _foreign_keywords(schema: dict, dialect: Dialect) -> frozenset[str]:
    """The validation keywords of ``schema`` that its dialect gives no meaning."""
    return frozenset(k for k in schema if k in _VALIDATION and not dialect.evaluates(k))


# ---------------------------------------------------------------------- one level down
def _child(part: Part, index: SchemaIndex, *path: str | int) -> tuple[Any, str, str]:
    node: Any = part.schema
    pointer = part.pointer
    for step in path:
        node = node[step]
        pointer += "/" + (escape_pointer_token(step) if isinstance(step, str) else str(step))
    return (node, part.loc.base, pointer)


@lru_cache(maxsize=4096)
def ecma_search(pattern: str):
    """A compiled Python regex with the ECMA-262 ``pattern``'s search semantics."""
    from constrained.json_schema.ecma_regex import ecma_to_python

    try:
        return re.compile(ecma_to_python(pattern))
    except Exception as e:  # the ECMA front end names what it cannot translate
        raise UnsupportedSchemaError(f"pattern {pattern!r}: {e}", keyword="patternProperties") from e


def property_items(conj: Conjunction, key: str, index: SchemaIndex,
                   undecided=None) -> list[tuple[Any, str, str]]:
    """Every sub-schema that applies to the value of member ``key`` of an object.

    A ``patternProperties`` pattern without a translation cannot be decided here:
    ``undecided(part, pattern)`` is called (by default the error propagates) and,
    if it returns, the pattern's schema is left out and ``additionalProperties``
    is not applied either (a superset)."""
    out = []
    for p in conj:
        matched = False
        props = p.get("properties")
        if isinstance(props, dict) and key in props:
            out.append(_child(p, index, "properties", key))
            matched = True
        pats = p.get("patternProperties")
        if isinstance(pats, dict):
            for pat in pats:
                try:
                    hit = ecma_search(pat).search(key)
                except UnsupportedSchemaError:
                    if undecided is None:
                        raise
                    undecided(p, pat)
                    matched = True
                    continue
                if hit:
                    out.append(_child(p, index, "patternProperties", pat))
                    matched = True
        if not matched and p.has("additionalProperties"):
            out.append(_child(p, index, "additionalProperties"))
    return out


def item_items(conj: Conjunction, i: int, index: SchemaIndex) -> list[tuple[Any, str, str]]:
    """Every sub-schema that applies to element ``i`` of an array."""
    out = []
    for p in conj:
        items = p.get("items")
        if isinstance(items, list):                      # drafts up to 2019: a tuple
            if i < len(items):
                out.append(_child(p, index, "items", i))
            elif p.has("additionalItems"):
                out.append(_child(p, index, "additionalItems"))
            continue
        prefix = p.get("prefixItems")
        if isinstance(prefix, list) and i < len(prefix):
            out.append(_child(p, index, "prefixItems", i))
        elif p.has("items"):
            out.append(_child(p, index, "items"))
    return out


def tuple_length(conj: Conjunction) -> int:
    """How many leading array positions have their own sub-schemas."""
    n = 0
    for p in conj:
        items = p.get("items")
        if isinstance(items, list):
            n = max(n, len(items))
        prefix = p.get("prefixItems")
        if isinstance(prefix, list):
            n = max(n, len(prefix))
    return n


# validation keywords of every draft (annotations and identifiers excluded)
_VALIDATION = frozenset({
    "type", "enum", "const", "$ref", "allOf", "anyOf", "oneOf", "not", "if", "then", "else",
    "properties", "required", "additionalProperties", "patternProperties", "propertyNames",
    "minProperties", "maxProperties", "dependentRequired", "dependentSchemas", "dependencies",
    "unevaluatedProperties", "items", "prefixItems", "additionalItems", "minItems", "maxItems",
    "uniqueItems", "contains", "minContains", "maxContains", "unevaluatedItems",
    "minLength", "maxLength", "pattern", "format", "minimum", "maximum", "exclusiveMinimum",
    "exclusiveMaximum", "multipleOf", "$dynamicRef", "$recursiveRef",
})
VALIDATION_KEYWORDS = _VALIDATION
