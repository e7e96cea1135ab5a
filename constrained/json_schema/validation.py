"""Validating JSON values against located sub-schemas with `jsonschema`.

The reference semantics of every keyword the grammar cannot express exactly:
enum values are filtered through it at compile time, and value-level checks
(`constrained.json_schema.value_checks`) call it when a value completes.  Each
sub-schema is validated *in place* — with a ``$ref``-resolver over a
registry holding the whole document, with the sub-schema's base URI — so
relative references and ``$id`` scopes resolve exactly as in the document.
Formats are checked with the grammar's own format regexes.  A validator that raises counts as a rejection (sound:
never an invalid value accepted).

Example:
    >>> from constrained.json_schema.resolver import SchemaIndex
    >>> idx = SchemaIndex({"$defs": {"even": {"type": "integer", "multipleOf": 2}}})
    >>> v = SchemaValidators(idx)
    >>> loc = idx.locate(idx.document["$defs"]["even"])
    >>> v.is_valid(loc, 4), v.is_valid(loc, 3)
    (True, False)
"""

from __future__ import annotations

import json
from typing import Any

from constrained.json_schema.keywords import ANNOTATIONS
from constrained.json_schema.resolver import Located, SchemaIndex

# object keywords that constrain each member on its own (checked on one-member objects)
MEMBER_KEYWORDS = frozenset({"type", "properties", "patternProperties", "additionalProperties", "propertyNames"})
# object keywords that constrain only the set of keys (checked here directly; also
# dependentRequired / draft-07 dependencies with arrays, where the draft knows them)
KEY_SET_KEYWORDS = frozenset({"required", "minProperties", "maxProperties"})
# in-place applicators: their sub-schemas apply to the same object and are validated on
# their own (each with its own plan), combined as the keyword says
IN_PLACE_KEYWORDS = frozenset({"allOf", "anyOf", "oneOf", "not", "if", "then", "else", "$ref",
                               "dependentSchemas", "dependencies"})
MEMBER_MEMO_LIMIT = 1 << 16
def _NO_MEMBER(key: str, value: Any) -> bool:
    return False


_DYNAMIC = frozenset({"$dynamicRef", "$dynamicAnchor", "$recursiveRef", "$recursiveAnchor"})


def format_checker():
    """A `jsonschema.FormatChecker` with exactly the grammar's format semantics
    (`constrained.json_schema.formats.FORMAT_REGEXES`, in every draft): a value
    check then agrees with the terminals it stands in for.  The regexes are sound
    for `jsonschema`'s own checkers, so what passes here passes there too."""
    global _FORMAT_CHECKER
    if _FORMAT_CHECKER is None:
        import re

        import jsonschema

        from constrained.json_schema.formats import FORMAT_REGEXES

        checker = jsonschema.FormatChecker(formats=())
        for name, regex in FORMAT_REGEXES.items():
            pattern = re.compile(regex)
            checker.checks(name)(lambda v, p=pattern: not isinstance(v, str) or p.fullmatch(v) is not None)
        _FORMAT_CHECKER = checker
    return _FORMAT_CHECKER


_FORMAT_CHECKER = None


class SchemaValidators:
    """One `jsonschema` validator per located sub-schema of a document (built lazily)."""

    def __init__(self, index: SchemaIndex, *, formats: bool = True) -> None:
        self.index = index
        self.formats = formats
        self._cls = None
        self._registry = None
        self._validators: dict[tuple[int, str], Any] = {}
        self._member_plans: dict[tuple[int, str], _ObjectPlan | None] = {}
        self._dynamic = False
        self._dynamic_seen = -1

    def _setup(self) -> None:
        import jsonschema
        from referencing import Registry, Resource
        from referencing.jsonschema import DRAFT4, DRAFT6, DRAFT7, DRAFT202012

        doc = self.index.document
        cls = jsonschema.validators.validator_for(doc, default=jsonschema.Draft202012Validator) \
            if isinstance(doc, dict) else jsonschema.Draft202012Validator
        spec = {jsonschema.Draft4Validator: DRAFT4, jsonschema.Draft6Validator: DRAFT6,
                jsonschema.Draft7Validator: DRAFT7}.get(cls, DRAFT202012)
        resource = Resource.from_contents(doc, default_specification=spec)
        registry = Registry().with_resource(self.index.root_uri, resource)
        for uri, loc in self.index.resources().items():
            if uri != self.index.root_uri and isinstance(loc.schema, (dict, bool)):
                registry = registry.with_resource(uri, Resource.from_contents(loc.schema,
                                                                              default_specification=spec))
        # every embedded resource is registered above from the index's own walk; no crawl
        # (referencing's crawler trips over documents with lists where it expects schemas)
        self._cls, self._registry = cls, registry

    def validator(self, loc: Located):
        """The validator of the sub-schema at ``loc``."""
        ref = (id(loc.schema), loc.base)      # not the URI: documents may reuse an id
        v = self._validators.get(ref)
        if v is None:
            if self._cls is None:
                self._setup()
            cls = self._cls
            registry = self._registry
            checker = format_checker() if self.formats else None
            if loc.resource_pointer == "":
                v = cls(loc.schema, registry=registry, format_checker=checker)  # type: ignore
            else:
                # the sub-schema itself, resolving against its base URI: no pointer walk (referencing
                # trips over legacy "id" properties when it walks one)
                v = cls(loc.schema, registry=registry, format_checker=checker,  # type: ignore
                        _resolver=registry.resolver(base_uri=loc.base))  # type: ignore[union-attr]
            self._validators[ref] = v
        return v

    def is_valid(self, loc: Located, value: Any) -> bool:
        """Whether ``value`` satisfies the sub-schema at ``loc``.

        A non-empty object under a schema whose keywords act member by member, on
        the key set or in place (`MEMBER_KEYWORDS`, `KEY_SET_KEYWORDS`,
        `IN_PLACE_KEYWORDS`, annotations) is checked by an `_ObjectPlan`: key set
        first, then one member at a time with memoised verdicts, then each in-place
        sub-schema by its own plan.  A value check then revalidates only the member
        that changed, not the whole object."""
        try:
            return self._valid(loc, value)
        except Exception:  # noqa: BLE001 - a validator that cannot decide never accepts
            return False

    def _valid(self, loc: Located, value: Any) -> bool:
        """`is_valid`, raising where a validator cannot decide (so ``not`` and
        ``oneOf`` never turn an error into a verdict)."""
        if isinstance(value, dict) and value:
            plan = self._member_plan(loc)
            if plan is not None:
                return plan.is_valid(value)
        return bool(self.validator(loc).is_valid(value))

    def dynamic_scope(self) -> bool:
        """Whether any schema located so far takes part in dynamic scoping (``$dynamicRef``,
        ``$recursiveRef`` and their anchors): sub-schemas then validate only in context."""
        if len(self.index) != self._dynamic_seen:
            self._dynamic = any(isinstance(loc.schema, dict) and not _DYNAMIC.isdisjoint(loc.schema)
                                for loc in self.index.all_located())
            self._dynamic_seen = len(self.index)
        return self._dynamic

    def _target(self, loc: Located, ref: Any) -> "Located | bool | None":
        """Where ``$ref`` at ``loc`` points (None: not a sub-schema this index located)."""
        from constrained.errors import ConstrainedError

        try:
            target, base, _ = self.index.resolve(ref, loc.base, loc.pointer)
        except ConstrainedError:
            return None
        if self.dynamic_scope():      # the reference loaded a document that resolves dynamically
            return None
        if isinstance(target, bool):
            return target
        here = self.index.locate(target)
        return here if here is not None and here.base == base else None

    def _member_plan(self, loc: Located) -> "_ObjectPlan | None":
        ref = (id(loc.schema), loc.base)
        if ref not in self._member_plans:
            self._member_plans[ref] = _ObjectPlan.plan(self, loc)
        return self._member_plans[ref]


class _ObjectPlan:
    """An object schema split into key-set conditions, a per-member schema and in-place parts.

    ``{k: v}`` is valid under the per-member schema (the original without its
    key-set and in-place keywords) iff member ``k: v`` satisfies properties,
    patternProperties, additionalProperties, propertyNames and type of the
    original, exactly as `jsonschema` evaluates them.  Without
    ``unevaluatedProperties`` (which would read the in-place parts' annotations) an
    object is valid iff its key set passes, every member passes on its own, and
    every in-place keyword holds over the sub-schemas' own verdicts."""

    def __init__(self, validators: "SchemaValidators", member_validator, required: list, min_props: int,
                 max_props: float, dependent: dict, in_place: list[tuple]) -> None:
        self.validators = validators
        self.validator = member_validator
        self.required = required
        self.min_props = min_props
        self.max_props = max_props
        self.dependent = dependent
        self.in_place = in_place
        self.members = None          # member verdicts from the member keywords' own sub-schemas
        self._verdicts: dict[tuple, bool] = {}

    @classmethod
    def plan(cls, validators: "SchemaValidators", loc: Located) -> "_ObjectPlan | None":
        schema = loc.schema
        if not isinstance(schema, dict):
            return None
        if validators._cls is None:
            validators._setup()
        known = validators._cls.VALIDATORS          # keywords this draft's validator evaluates
        if "required" not in known or validators.dynamic_scope():
            return None        # draft 3, or references resolved by the dynamic scope (no sub-schema alone)
        legacy = "dependentRequired" not in known   # drafts up to 07: $ref replaces its siblings
        if legacy and "$ref" in schema:
            target = validators._target(loc, schema["$ref"])
            return None if target is None else cls(validators, None, [], 0, float("inf"), {},
                                                    [("all", [target])])
        allowed = MEMBER_KEYWORDS | KEY_SET_KEYWORDS | IN_PLACE_KEYWORDS | {"dependentRequired"}
        for k in schema:
            if k in known and k not in allowed and k not in ANNOTATIONS:
                return None      # a keyword on the whole object: the whole-object validator decides
        required = schema.get("required", [])
        low = schema.get("minProperties", 0)
        high = schema.get("maxProperties", float("inf"))
        if not (isinstance(required, list) and all(isinstance(r, str) for r in required)
                and all(isinstance(n, (int, float)) and not isinstance(n, bool) for n in (low, high))):
            return None          # malformed: the whole-object validator decides
        merged: dict[str, list] = {}
        in_place: list[tuple] = []

        def sub(schema_: Any) -> Located | bool | None:
            if isinstance(schema_, bool):
                return schema_
            return validators.index.locate(schema_) if isinstance(schema_, dict) else None

        for k in ("dependentRequired", "dependencies", "dependentSchemas"):
            if k not in schema or k not in known:
                continue
            spec = schema[k]
            if not isinstance(spec, dict):
                return None
            for name, need in spec.items():
                if k != "dependentSchemas" and isinstance(need, list) and all(isinstance(r, str) for r in need):
                    merged.setdefault(name, []).extend(need)
                elif k != "dependentRequired" and isinstance(need, (dict, bool)):
                    target = sub(need)
                    if target is None:
                        return None
                    in_place.append(("if-key", name, target))
                else:
                    return None
        for k, kind in (("allOf", "all"), ("anyOf", "any"), ("oneOf", "one")):
            if k in schema and k in known:
                branches = schema[k]
                if not isinstance(branches, list) or not branches:
                    return None
                targets = [sub(b) for b in branches]
                if any(t is None for t in targets):
                    return None
                in_place.append((kind, targets))
        if "not" in schema and "not" in known:
            target = sub(schema["not"])
            if target is None:
                return None
            in_place.append(("not", target))
        if "if" in schema and "if" in known:
            parts = [sub(schema[k]) if k in schema else True for k in ("if", "then", "else")]
            if any(t is None for t in parts):
                return None
            in_place.append(("if", *parts))
        if "$ref" in schema:
            target = validators._target(loc, schema["$ref"])
            if target is None:
                return None
            in_place.append(("all", [target]))
        plan = cls(validators, None, required, low, high, merged, in_place)
        if not plan._split_members(schema, known, sub):
            member = {k: v for k, v in schema.items()          # annotations stay: $defs, $id resolve references
                      if k not in KEY_SET_KEYWORDS and k not in IN_PLACE_KEYWORDS and k != "dependentRequired"}
            member_loc = Located(member, loc.base, loc.pointer, loc.resource, loc.resource_pointer)
            plan.validator = validators.validator(member_loc)
        return plan

    def _split_members(self, schema: dict, known, sub) -> bool:
        """Read the member keywords as sub-schemas, so a member's value is validated by its own
        plans (nested objects member by member too); False if one is not located."""
        import re

        get = {k: schema[k] for k in MEMBER_KEYWORDS if k in schema and k in known}
        kind = get.get("type", "object")
        if not (kind == "object" or (isinstance(kind, list) and "object" in kind)):
            if isinstance(kind, (str, list)):
                self.members = _NO_MEMBER          # an object is not of the type: no member passes
                return True
            return False
        props, pats = get.get("properties", {}), get.get("patternProperties", {})
        if not isinstance(props, dict) or not isinstance(pats, dict):
            return False
        try:
            self.props = {name: sub(v) for name, v in props.items()}
            self.pats = [(re.compile(pat), sub(v)) for pat, v in pats.items()]
            # jsonschema's additionalProperties: keys neither declared nor matching the joined patterns
            self.any_pattern = re.compile("|".join(pats)) if pats else None
        except re.error:
            return False
        self.additional = sub(get["additionalProperties"]) if "additionalProperties" in get else True
        self.names = sub(get["propertyNames"]) if "propertyNames" in get else True
        if any(t is None for t in (*self.props.values(), *(t for _, t in self.pats), self.additional,
                                     self.names)):
            return False
        self.members = self._member_ok
        return True

    def is_valid(self, value: dict) -> bool:
        if not self.min_props <= len(value) <= self.max_props:
            return False
        if any(r not in value for r in self.required):
            return False
        if any(k in value and any(r not in value for r in need) for k, need in self.dependent.items()):
            return False
        if self.validator is not None or self.members is not None:
            verdicts = self._verdicts
            for k, v in value.items():
                key = (k, type(v), v) if isinstance(v, (str, int, float, bool)) or v is None else \
                    (k, "json", json.dumps(v, sort_keys=True))
                ok = verdicts.get(key)
                if ok is None:
                    ok = self.members(k, v) if self.members is not None else bool(self.validator.is_valid({k: v}))
                    if len(verdicts) >= MEMBER_MEMO_LIMIT:
                        verdicts.clear()
                    verdicts[key] = ok
                if not ok:
                    return False
        for entry in self.in_place:
            if not self._holds(entry, value):
                return False
        return True

    def _member_ok(self, key: str, value: Any) -> bool:
        """Member ``key: value`` under properties / patternProperties / additionalProperties /
        propertyNames, each sub-schema validated by `SchemaValidators` (its own plan)."""
        valid = self._sub_valid
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

    def _holds(self, entry: tuple, value: dict) -> bool:
        kind = entry[0]
        valid = self._sub_valid
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
        return entry[1] not in value or valid(entry[2], value)         # "if-key": dependent schema

    def _sub_valid(self, target: "Located | bool", value: Any) -> bool:
        return target if isinstance(target, bool) else self.validators._valid(target, value)
