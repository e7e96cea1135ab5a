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
MEMBER_MEMO_LIMIT = 1 << 16


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
        self._member_plans: dict[tuple[int, str], _MemberwiseObject | None] = {}

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

        A non-empty object under a schema whose keywords all act member by member
        or on the key set (`MEMBER_KEYWORDS`, `KEY_SET_KEYWORDS`, annotations) is
        checked one member at a time with memoised verdicts: a value check then
        revalidates only the member that changed, not the whole object."""
        try:
            if isinstance(value, dict) and value:
                plan = self._member_plan(loc)
                if plan is not None:
                    return plan.is_valid(value)
            return bool(self.validator(loc).is_valid(value))
        except Exception:  # noqa: BLE001 - a validator that cannot decide never accepts
            return False

    def _member_plan(self, loc: Located) -> "_MemberwiseObject | None":
        ref = (id(loc.schema), loc.base)
        if ref not in self._member_plans:
            self._member_plans[ref] = _MemberwiseObject.plan(self, loc)
        return self._member_plans[ref]


class _MemberwiseObject:
    """An object schema split into key-set conditions and a per-member schema.

    ``{k: v}`` is valid under the per-member schema (the original without its
    key-set keywords) iff member ``k: v`` satisfies properties, patternProperties,
    additionalProperties, propertyNames and type of the original, exactly as
    `jsonschema` evaluates them, so an object is valid iff its key set passes and
    every member passes on its own."""

    def __init__(self, validator, required: list, min_props: int, max_props: float,
                 dependent: dict) -> None:
        self.validator = validator
        self.required = required
        self.min_props = min_props
        self.max_props = max_props
        self.dependent = dependent
        self._verdicts: dict[tuple, bool] = {}

    @classmethod
    def plan(cls, validators: "SchemaValidators", loc: Located) -> "_MemberwiseObject | None":
        schema = loc.schema
        if not isinstance(schema, dict):
            return None
        if validators._cls is None:
            validators._setup()
        known = validators._cls.VALIDATORS          # keywords this draft's validator evaluates
        if "required" not in known or "$ref" in schema:    # draft 3, or $ref (siblings ignored up to draft 7)
            return None
        dependent_keywords = [k for k in ("dependentRequired", "dependencies") if k in known and k in schema]
        for k in schema:
            if k in known and k not in MEMBER_KEYWORDS and k not in KEY_SET_KEYWORDS and k not in ANNOTATIONS \
                    and k not in dependent_keywords:
                return None      # a keyword on the whole object: the whole-object validator decides
        required = schema.get("required", []) if "required" in known else []
        low = schema.get("minProperties", 0) if "minProperties" in known else 0
        high = schema.get("maxProperties", float("inf")) if "maxProperties" in known else float("inf")
        dependent = [schema[k] for k in dependent_keywords]
        if not (isinstance(required, list) and all(isinstance(r, str) for r in required)
                and all(isinstance(d, dict) and all(isinstance(v, list) and all(isinstance(r, str) for r in v)
                                                    for v in d.values()) for d in dependent)
                and all(isinstance(n, (int, float)) and not isinstance(n, bool) for n in (low, high))):
            return None          # malformed, or schema-valued dependencies: the whole-object validator decides
        member = {k: v for k, v in schema.items() if k not in KEY_SET_KEYWORDS and k not in dependent_keywords}
        member_loc = Located(member, loc.base, loc.pointer, loc.resource, loc.resource_pointer)
        merged: dict[str, list] = {}
        for d in dependent:
            for k, need in d.items():
                merged.setdefault(k, []).extend(need)
        return cls(validators.validator(member_loc), required, low, high, merged)

    def is_valid(self, value: dict) -> bool:
        if not self.min_props <= len(value) <= self.max_props:
            return False
        if any(r not in value for r in self.required):
            return False
        if any(k in value and any(r not in value for r in need) for k, need in self.dependent.items()):
            return False
        verdicts = self._verdicts
        for k, v in value.items():
            key = (k, type(v), v) if isinstance(v, (str, int, float, bool)) or v is None else \
                (k, "json", json.dumps(v, sort_keys=True))
            ok = verdicts.get(key)
            if ok is None:
                ok = bool(self.validator.is_valid({k: v}))
                if len(verdicts) >= MEMBER_MEMO_LIMIT:
                    verdicts.clear()
                verdicts[key] = ok
            if not ok:
                return False
        return True
