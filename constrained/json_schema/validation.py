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

from typing import Any

from constrained.json_schema.dialect import dialect_of
from constrained.json_schema.keywords import ANNOTATIONS
from constrained.json_schema.resolver import Located, SchemaIndex
from constrained.json_schema.validation_plans import ArrayPlan, ObjectPlan

_UNSET = object()
_TYPE_NAMES = frozenset({"null", "boolean", "object", "array", "number", "string", "integer"})
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
        self.dialect = dialect_of(index.document)
        self.formats = formats
        self._cls = None
        self._registry = None
        self._validators: dict[tuple[int, str], Any] = {}
        # per located sub-schema: its object plan, array plan, $ref it defers to, bare types
        self._member_plans: dict[tuple[int, str], ObjectPlan | None] = {}
        self._array_plans: dict[tuple[int, str], ArrayPlan | None] = {}
        self._forwards: dict[tuple[int, str], Located | bool | None] = {}
        self._types: dict[tuple[int, str], tuple[str, ...] | None] = {}
        self._dynamic = False
        self._dynamic_seen = -1

    def _setup(self) -> None:
        import jsonschema
        from jsonschema_specifications import REGISTRY as SPECIFICATIONS
        from referencing import Resource
        from referencing.jsonschema import DRAFT3, DRAFT4, DRAFT6, DRAFT7, DRAFT201909, DRAFT202012

        doc = self.index.document
        cls = self.dialect.validator_class
        spec = {jsonschema.Draft3Validator: DRAFT3, jsonschema.Draft4Validator: DRAFT4,
                jsonschema.Draft6Validator: DRAFT6, jsonschema.Draft7Validator: DRAFT7,
                jsonschema.Draft201909Validator: DRAFT201909}.get(cls, DRAFT202012)
        resource = Resource.from_contents(doc, default_specification=spec)
        # the meta-schemas jsonschema bundles first (a $ref into one, e.g. swagger's to draft-04's
        # properties/type, then follows its own "#/definitions/..." refs; a sub-schema's validator
        # gets this registry's resolver, so jsonschema does not add them itself), the document's
        # own resources over them
        registry = SPECIFICATIONS.with_resource(self.index.root_uri, resource)
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

        A bare ``$ref`` defers to its target; a non-empty object or array whose
        schema splits into parts is checked by its plan
        (`constrained.json_schema.validation_plans`), so a value check revalidates
        only the members and elements that changed, not the whole value."""
        try:
            return self.decide(loc, value)
        except Exception:  # noqa: BLE001 - a validator that cannot decide never accepts
            return False

    def decide(self, loc: Located, value: Any) -> bool:
        """`is_valid`, raising where a validator cannot decide (so ``not`` and
        ``oneOf`` of plans never turn an error into a verdict)."""
        target = self._forward(loc)
        while target is not None:                   # a bare $ref: its target decides
            if isinstance(target, bool):
                return target
            loc, target = target, self._forward(target)
        types = self._type_only(loc)
        if types is not None:                       # {"type": ...} alone: the draft's own type checker
            checker = self.validator_class.TYPE_CHECKER
            return any(checker.is_type(value, t) for t in types)
        if isinstance(value, dict) and value:
            plan = self._member_plan(loc)
            if plan is not None:
                return plan.is_valid(value)
        elif isinstance(value, list) and value:
            plan = self._array_plan(loc)
            if plan is not None:
                return plan.is_valid(value)
        return bool(self.validator(loc).is_valid(value))

    @property
    def validator_class(self):
        """The `jsonschema` validator class of the document's draft."""
        if self._cls is None:
            self._setup()
        return self._cls

    @property
    def refs_replace_siblings(self) -> bool:
        """Drafts up to 07: a ``$ref`` makes its sibling keywords ignored."""
        return self.dialect.refs_replace_siblings

    @staticmethod
    def _per_loc(store: dict, loc: Located, compute):
        ref = (id(loc.schema), loc.base)
        hit = store.get(ref, _UNSET)
        if hit is _UNSET:
            hit = store[ref] = compute(loc)
        return hit

    def _forward(self, loc: Located) -> Located | bool | None:
        """The target of ``loc``'s ``$ref`` when nothing else there validates (draft 2019+: no
        other keyword but annotations; up to draft 07: siblings are ignored), else None."""
        def compute(loc: Located) -> Located | bool | None:
            schema = loc.schema
            if not isinstance(schema, dict) or "$ref" not in schema or self.dynamic_scope():
                return None
            if self.refs_replace_siblings or all(k == "$ref" or k in ANNOTATIONS for k in schema):
                return self.ref_target(loc, schema["$ref"])
            return None

        return self._per_loc(self._forwards, loc, compute)

    def _type_only(self, loc: Located) -> tuple[str, ...] | None:
        """The types of a schema whose only keyword is a well-formed ``type`` (else None)."""
        def compute(loc: Located) -> tuple[str, ...] | None:
            schema = loc.schema
            if not isinstance(schema, dict) or "type" not in schema or \
                    not all(k == "type" or k in ANNOTATIONS for k in schema):
                return None
            t = schema["type"]
            types = (t,) if isinstance(t, str) else tuple(t) if isinstance(t, list) else ()
            return types if types and all(x in _TYPE_NAMES for x in types) else None

        return self._per_loc(self._types, loc, compute)

    def _member_plan(self, loc: Located) -> ObjectPlan | None:
        return self._per_loc(self._member_plans, loc, lambda loc: ObjectPlan.plan(self, loc))

    def _array_plan(self, loc: Located) -> ArrayPlan | None:
        return self._per_loc(self._array_plans, loc, lambda loc: ArrayPlan.plan(self, loc))

    def dynamic_scope(self) -> bool:
        """Whether any schema located so far takes part in dynamic scoping (``$dynamicRef``,
        ``$recursiveRef`` and their anchors): sub-schemas then validate only in context."""
        if len(self.index) != self._dynamic_seen:
            self._dynamic = any(isinstance(loc.schema, dict) and not _DYNAMIC.isdisjoint(loc.schema)
                                for loc in self.index.all_located())
            self._dynamic_seen = len(self.index)
        return self._dynamic

    def ref_target(self, loc: Located, ref: Any) -> Located | bool | None:
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
