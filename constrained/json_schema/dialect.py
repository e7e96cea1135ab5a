"""Which JSON Schema draft a document is read under, and what that changes.

The reference for what a schema means is `jsonschema`'s validator of the document's
draft (``$schema``; 2020-12 when absent or unknown).  The compiler and the value
checks take every draft-dependent decision from one `Dialect`, made from that same
validator class, so a keyword means in the grammar what it means to the validator:

* the keywords the draft evaluates (a keyword of another draft is an annotation:
  ``const`` under draft-04, ``dependencies`` under 2019-09, ``additionalItems``
  under 2020-12), and those only this project's compiler does not translate
  (draft-03's ``divisibleBy``, ``disallow``, ``extends``: value checks);
* whether ``1.0`` is an integer (not in drafts 03 and 04);
* whether ``exclusiveMinimum`` / ``exclusiveMaximum`` are flags of ``minimum`` /
  ``maximum`` (drafts 03 and 04: any truthy value makes the bound exclusive, and
  without the bound they do nothing) or bounds of their own (from draft 06);
* whether ``$ref`` replaces its siblings (up to draft 07);
* whether ``required: true`` inside a property's schema makes it required (draft 03).

Example:
    >>> d = dialect_of({"$schema": "http://json-schema.org/draft-04/schema#"})
    >>> d.name, d.floats_are_integers, d.evaluates("const"), d.refs_replace_siblings
    ('draft4', False, False, True)
    >>> dialect_of({}).name, dialect_of({}).evaluates("prefixItems")
    ('draft2020-12', True)
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

__all__ = ["Dialect", "dialect_of"]

_NAMES = {
    "Draft3Validator": "draft3", "Draft4Validator": "draft4", "Draft6Validator": "draft6",
    "Draft7Validator": "draft7", "Draft201909Validator": "draft2019-09", "Draft202012Validator": "draft2020-12",
}

# keywords a draft evaluates inside another keyword's validator (jsonschema reads them there)
_READ_BY = {
    "if": ("then", "else"),
    "minimum": ("exclusiveMinimum",),      # drafts 03/04 only: flags of the bound
    "maximum": ("exclusiveMaximum",),
}
_CONTAINS_COUNTS = ("minContains", "maxContains")   # read by `contains` from 2019-09 on


@dataclass(frozen=True)
class Dialect:
    """What one JSON Schema draft makes of the keywords the compiler reads."""

    name: str
    validator_class: Any
    keywords: frozenset[str]
    floats_are_integers: bool
    exclusive_bounds_are_flags: bool
    refs_replace_siblings: bool
    required_in_property: bool

    def evaluates(self, keyword: str) -> bool:
        """Whether this draft's validator gives ``keyword`` a meaning."""
        return keyword in self.keywords


@cache
def _dialect(cls: Any) -> Dialect:
    name = _NAMES.get(cls.__name__, "draft2020-12")
    keywords = set(cls.VALIDATORS)
    legacy_bounds = name in ("draft3", "draft4")
    for keyword, read in _READ_BY.items():
        if keyword in keywords and (keyword == "if" or legacy_bounds):
            keywords.update(read)
    if name in ("draft2019-09", "draft2020-12"):
        keywords.update(_CONTAINS_COUNTS)
    return Dialect(
        name=name,
        validator_class=cls,
        keywords=frozenset(keywords),
        floats_are_integers=cls.TYPE_CHECKER.is_type(1.0, "integer"),
        exclusive_bounds_are_flags=legacy_bounds,
        refs_replace_siblings=name in ("draft3", "draft4", "draft6", "draft7"),
        required_in_property=name == "draft3",
    )


def dialect_of(document: Any) -> Dialect:
    """The dialect of a schema document: its ``$schema``'s draft, 2020-12 by default."""
    import jsonschema

    cls = jsonschema.Draft202012Validator
    if isinstance(document, dict):
        cls = jsonschema.validators.validator_for(document, default=jsonschema.Draft202012Validator)
    return _dialect(cls)
