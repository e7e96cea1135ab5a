"""Validation plans: objects and arrays validated part by part, with memoised verdicts.

A value check (`constrained.json_schema.value_checks`) revalidates a container
every time a mask simulates a token that closes it; most of the container is
unchanged between those calls.  A plan splits a schema so that only what
changed is validated again:

* **in place** — ``allOf`` / ``anyOf`` / ``oneOf`` / ``not`` / ``if`` /
  ``then`` / ``else`` / ``$ref`` beside siblings (draft 2019+) and, for objects,
  ``dependentSchemas`` / schema-valued ``dependencies``: each sub-schema is
  validated by its own plan and the verdicts combined as the keyword says;
* **objects** (`ObjectPlan`) — key set first (``required``, ``min/maxProperties``,
  ``dependentRequired``), then each member's value against the sub-schemas that
  apply to its key (``properties``, ``patternProperties`` with Python ``re.search``
  and ``additionalProperties`` exactly as `jsonschema` reads them,
  ``propertyNames`` on the key), memoised per member;
* **arrays** (`ArrayPlan`) — length, then each element against its position's
  sub-schema (``prefixItems`` / ``items`` / ``additionalItems``), memoised per
  position class; ``uniqueItems`` by a set of the elements' equality keys when
  they are scalars (`jsonschema`'s equality: booleans apart from numbers,
  ``1 == 1.0``), by the draft's own validator when some element is a container.

Verdicts equal `jsonschema`'s: a plan is only built when every keyword of the
schema is one it splits (annotations aside), never with ``unevaluated*`` (which
read the in-place parts' annotations) nor in documents with dynamic scoping;
otherwise `SchemaValidators` validates the value whole.  Sub-schemas are found
through the document's `SchemaIndex` (a ``$ref`` resolved as the compiler
resolves it); one that is not located makes the plan fall back too.

Example:
    >>> from constrained.json_schema.resolver import SchemaIndex
    >>> from constrained.json_schema.validation import SchemaValidators
    >>> schema = {"oneOf": [{"required": ["a"]}, {"required": ["b"]}], "properties": {"a": {"type": "integer"}}}
    >>> idx = SchemaIndex(schema)
    >>> v = SchemaValidators(idx)
    >>> v.is_valid(idx.locate(schema), {"a": 1}), v.is_valid(idx.locate(schema), {"a": 1, "b": 2})
    (True, False)
    >>> type(v._member_plan(idx.locate(schema))).__name__
    'ObjectPlan'
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from constrained.json_schema.keywords import ANNOTATIONS
from constrained.json_schema.resolver import Located

if TYPE_CHECKING:
    from constrained.json_schema.validation import SchemaValidators

# object keywords that constrain each member on its own
MEMBER_KEYWORDS = frozenset({"type", "properties", "patternProperties", "additionalProperties", "propertyNames"})
# object keywords that constrain only the set of keys (also dependentRequired / array-valued dependencies)
KEY_SET_KEYWORDS = frozenset({"required", "minProperties", "maxProperties"})
# in-place applicators: their sub-schemas apply to the same value
IN_PLACE_KEYWORDS = frozenset({"allOf", "anyOf", "oneOf", "not", "if", "then", "else", "$ref"})
# in-place applicators of objects only
DEPENDENT_KEYWORDS = frozenset({"dependentRequired", "dependentSchemas", "dependencies"})
ELEMENT_KEYWORDS = frozenset({"type", "items", "prefixItems", "additionalItems", "minItems", "maxItems"})
# array keywords on the elements together that ArrayPlan checks itself
ARRAY_SET_KEYWORDS = frozenset({"uniqueItems"})
# keywords that only act on other kinds of values (`jsonschema` passes an object or array through them)
OBJECT_ONLY = MEMBER_KEYWORDS - {"type"} | KEY_SET_KEYWORDS | DEPENDENT_KEYWORDS | {"unevaluatedProperties"}
ARRAY_ONLY = ELEMENT_KEYWORDS - {"type"} | {"uniqueItems", "contains", "minContains", "maxContains",
                                            "unevaluatedItems"}
SCALAR_ONLY = frozenset({"minLength", "maxLength", "pattern", "format", "minimum", "maximum", "exclusiveMinimum",
                         "exclusiveMaximum", "multipleOf"})
_OBJECT_SPLIT = MEMBER_KEYWORDS | KEY_SET_KEYWORDS | IN_PLACE_KEYWORDS | DEPENDENT_KEYWORDS | ARRAY_ONLY | SCALAR_ONLY
_ARRAY_SPLIT = ELEMENT_KEYWORDS | ARRAY_SET_KEYWORDS | IN_PLACE_KEYWORDS | OBJECT_ONLY | SCALAR_ONLY
MEMO_LIMIT = 1 << 16

Target = Located | bool          # a located sub-schema, or a boolean schema


def _sub(validators: SchemaValidators, schema: Any) -> Target | None:
    if isinstance(schema, bool):
        return schema
    return validators.index.locate(schema) if isinstance(schema, dict) else None


def _splittable(validators: SchemaValidators, schema: Any, allowed: frozenset):
    """The keywords the draft evaluates, if every one of them in ``schema`` is in ``allowed``
    (annotations aside) and nothing resolves dynamically; else None."""
    if not isinstance(schema, dict) or validators.dynamic_scope():
        return None
    known = validators.validator_class.VALIDATORS
    if any(k in known and k not in allowed and k not in ANNOTATIONS for k in schema):
        return None
    return known


def _bounds(schema: dict, low: str, high: str) -> tuple[float, float] | None:
    """``(schema[low], schema[high])`` with defaults 0 and infinity (None: not numbers)."""
    pair = (schema.get(low, 0), schema.get(high, float("inf")))
    return pair if all(isinstance(n, (int, float)) and not isinstance(n, bool) for n in pair) else None


def _in_place(validators: SchemaValidators, loc: Located, known) -> list[tuple] | None:
    """The in-place entries of ``loc``'s schema (None: one is malformed or not located)."""
    schema = loc.schema
    out: list[tuple] = []
    for k, kind in (("allOf", "all"), ("anyOf", "any"), ("oneOf", "one")):
        if k in schema and k in known:
            branches = schema[k]
            if not isinstance(branches, list) or not branches:
                return None
            targets = [_sub(validators, b) for b in branches]
            if any(t is None for t in targets):
                return None
            out.append((kind, targets))
    if "not" in schema and "not" in known:
        target = _sub(validators, schema["not"])
        if target is None:
            return None
        out.append(("not", target))
    if "if" in schema and "if" in known:
        parts = [_sub(validators, schema[k]) if k in schema else True for k in ("if", "then", "else")]
        if any(t is None for t in parts):
            return None
        out.append(("if", *parts))
    if "$ref" in schema:
        if validators.refs_replace_siblings:          # not in place: `SchemaValidators` defers to the target
            return None
        target = validators.ref_target(loc, schema["$ref"])
        if target is None:
            return None
        out.append(("all", [target]))
    return out


def _holds(entry: tuple, value: Any, valid: Callable[[Target, Any], bool]) -> bool:
    kind = entry[0]
    if kind == "all":
        return all(valid(t, value) for t in entry[1])
    if kind == "any":
        return any(valid(t, value) for t in entry[1])
    if kind == "one":
        return sum(1 for t in entry[1] if valid(t, value)) == 1
    if kind == "not":
        return not valid(entry[1], value)
    if kind == "if":
        return valid(entry[2], value) if valid(entry[1], value) else valid(entry[3], value)
    return entry[1] not in value or valid(entry[2], value)         # "if-key": a dependent schema


def _type_allows(schema: dict, kind: str) -> bool | None:
    """Whether ``type`` admits ``kind`` (None: malformed)."""
    t = schema.get("type", kind)
    if isinstance(t, str):
        return t == kind
    if isinstance(t, list):
        return kind in t
    return None


def _memo_key(slot: Any, value: Any) -> tuple:
    if isinstance(value, (str, int, float, bool)) or value is None:
        return (slot, type(value), value)
    return (slot, "json", json.dumps(value, sort_keys=True))


class _Plan:
    """Shared by both plans: the in-place entries and the memoised per-part verdicts."""

    def __init__(self, validators: SchemaValidators, in_place: list[tuple]) -> None:
        self.validators = validators
        self.in_place = in_place
        self._verdicts: dict[tuple, bool] = {}

    def _valid(self, target: Target, value: Any) -> bool:
        return target if isinstance(target, bool) else self.validators.decide(target, value)

    def _remember(self, key: tuple, ok: bool) -> bool:
        """Store the verdict ``ok`` under ``key`` and return it.  Plans look verdicts up in
        ``_verdicts`` inline (once per member or element of every value they check: a
        call per lookup would cost more than the lookup)."""
        if len(self._verdicts) >= MEMO_LIMIT:
            self._verdicts.clear()
        self._verdicts[key] = ok
        return ok

    def _in_place_hold(self, value: Any) -> bool:
        return all(_holds(entry, value, self._valid) for entry in self.in_place)


class ObjectPlan(_Plan):
    """A non-empty object: key set, members by their own sub-schemas, in-place parts."""

    def __init__(self, validators: SchemaValidators, in_place: list[tuple], *, typed: bool, required: list,
                 low, high, dependent: dict[str, list], props: dict[str, Target],
                 pats: list[tuple[re.Pattern, Target]], additional: Target, names: Target) -> None:
        super().__init__(validators, in_place)
        self.typed, self.required, self.low, self.high, self.dependent = typed, required, low, high, dependent
        self.props, self.pats, self.additional, self.names = props, pats, additional, names
        # jsonschema's additionalProperties: keys neither declared nor matching the joined patterns
        self.any_pattern = re.compile("|".join(p.pattern for p, _ in pats)) if pats else None

    @classmethod
    def plan(cls, validators: SchemaValidators, loc: Located) -> ObjectPlan | None:
        schema = loc.schema
        known = _splittable(validators, schema, _OBJECT_SPLIT)
        if known is None or "required" not in known:  # a keyword on the whole object, or draft 3
            return None
        required = schema.get("required", [])
        bounds = _bounds(schema, "minProperties", "maxProperties")
        typed = _type_allows(schema, "object")
        if typed is None or bounds is None or not (isinstance(required, list)
                                                   and all(isinstance(r, str) for r in required)):
            return None        # malformed: the whole-object validator decides
        low, high = bounds
        in_place = _in_place(validators, loc, known)
        if in_place is None:
            return None
        dependent: dict[str, list] = {}
        for k in ("dependentRequired", "dependencies", "dependentSchemas"):
            if k not in schema or k not in known:
                continue
            spec = schema[k]
            if not isinstance(spec, dict):
                return None
            for name, need in spec.items():
                if k != "dependentSchemas" and isinstance(need, list) and all(isinstance(r, str) for r in need):
                    dependent.setdefault(name, []).extend(need)
                elif k != "dependentRequired" and isinstance(need, (dict, bool)):
                    target = _sub(validators, need)
                    if target is None:
                        return None
                    in_place.append(("if-key", name, target))
                else:
                    return None
        props = schema.get("properties", {}) if "properties" in known else {}
        pats = schema.get("patternProperties", {}) if "patternProperties" in known else {}
        if not isinstance(props, dict) or not isinstance(pats, dict):
            return None
        try:
            compiled = [(re.compile(pat), _sub(validators, v)) for pat, v in pats.items()]
            re.compile("|".join(pats))
        except re.error:
            return None
        members = {name: _sub(validators, v) for name, v in props.items()}
        additional = _sub(validators, schema["additionalProperties"]) \
            if "additionalProperties" in schema and "additionalProperties" in known else True
        names = _sub(validators, schema["propertyNames"]) \
            if "propertyNames" in schema and "propertyNames" in known else True
        if any(t is None for t in (*members.values(), *(t for _, t in compiled), additional, names)):
            return None
        return cls(validators, in_place, typed=typed, required=required, low=low, high=high, dependent=dependent,
                   props=members, pats=compiled, additional=additional, names=names)

    def is_valid(self, value: dict) -> bool:
        if not self.typed:
            return False
        if not self.low <= len(value) <= self.high:
            return False
        if any(r not in value for r in self.required):
            return False
        if any(k in value and any(r not in value for r in need) for k, need in self.dependent.items()):
            return False
        verdicts = self._verdicts
        for k, v in value.items():
            key = _memo_key(k, v)
            ok = verdicts.get(key)
            if ok is None:
                ok = self._remember(key, self._member_ok(k, v))
            if not ok:
                return False
        return self._in_place_hold(value)

    def _member_ok(self, key: str, value: Any) -> bool:
        valid = self._valid
        if self.names is not True and not valid(self.names, key):
            return False
        target = self.props.get(key)
        if target is not None and not valid(target, value):
            return False
        for pattern, target in self.pats:
            if pattern.search(key) and not valid(target, value):
                return False
        if self.additional is not True and key not in self.props and \
                (self.any_pattern is None or not self.any_pattern.search(key)):
            return valid(self.additional, value)
        return True


def _equality_key(v: Any) -> tuple | None:
    """A hashable key equal for two scalars iff `jsonschema` finds them equal (booleans are
    not numbers; numbers compare by value, ``1 == 1.0``); None for a container."""
    if v is None:
        return ("null",)
    if isinstance(v, bool):
        return ("bool", v)
    if isinstance(v, (int, float)):
        return ("number", v)
    if isinstance(v, str):
        return ("string", v)
    return None


class ArrayPlan(_Plan):
    """A non-empty array: length, elements by their position's sub-schema, uniqueness,
    in-place parts."""

    def __init__(self, validators: SchemaValidators, in_place: list[tuple], prefix: list[Target],
                 rest: Target, low, high, typed: bool, unique: bool) -> None:
        super().__init__(validators, in_place)
        self.prefix, self.rest, self.low, self.high, self.typed = prefix, rest, low, high, typed
        # uniqueItems: the draft's own check, for arrays with a container element
        self._unique_validator = validators.validator_class({"uniqueItems": True}) if unique else None

    @classmethod
    def plan(cls, validators: SchemaValidators, loc: Located) -> ArrayPlan | None:
        schema = loc.schema
        known = _splittable(validators, schema, _ARRAY_SPLIT)
        if known is None:
            return None
        typed = _type_allows(schema, "array")
        bounds = _bounds(schema, "minItems", "maxItems")
        if typed is None or bounds is None:
            return None
        low, high = bounds
        in_place = _in_place(validators, loc, known)
        if in_place is None:
            return None
        items = schema.get("items", True) if "items" in known else True
        if "prefixItems" in known:                    # draft 2020-12
            prefix, rest = schema.get("prefixItems", []), items
        elif isinstance(items, list):                 # up to draft 2019-09: a tuple, then additionalItems
            prefix = items
            rest = schema.get("additionalItems", True) if "additionalItems" in known else True
        else:
            prefix, rest = [], items
        if not isinstance(prefix, list):
            return None
        targets = [_sub(validators, s) for s in prefix]
        rest_target = _sub(validators, rest)
        if rest_target is None or any(t is None for t in targets):
            return None
        # `jsonschema` enforces any truthy uniqueItems
        unique = "uniqueItems" in known and bool(schema.get("uniqueItems"))
        return cls(validators, in_place, targets, rest_target, low, high, typed, unique)

    def is_valid(self, value: list) -> bool:
        if not self.typed or not self.low <= len(value) <= self.high:
            return False
        n = len(self.prefix)
        verdicts = self._verdicts
        for i, v in enumerate(value):
            target = self.prefix[i] if i < n else self.rest
            if target is True:
                continue
            if target is False:
                return False
            key = _memo_key(i if i < n else n, v)
            ok = verdicts.get(key)
            if ok is None:
                ok = self._remember(key, self._valid(target, v))
            if not ok:
                return False
        if self._unique_validator is not None and not self._all_unique(value):
            return False
        return self._in_place_hold(value)

    def _all_unique(self, value: list) -> bool:
        keys = set()
        for v in value:
            key = _equality_key(v)
            if key is None:     # a container: the draft's own uniqueItems decides
                return self._unique_validator.is_valid(value)
            keys.add(key)
        return len(keys) == len(value)
