"""Options of the JSON Schema compiler (whitespace, property order, defaults, limits)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from constrained.errors import ConstrainedError

DEFAULT_MAX_WHITESPACE = 48
"""Bytes of whitespace allowed in one gap between JSON tokens by default.

Pretty-printed output needs a newline plus the indentation: 48 fits
``json.dumps(indent=2)`` to nesting depth 23 and ``indent=4`` to depth 11, while a
model can no longer fill its whole budget with whitespace (the most reported
failure of unbounded grammars): each gap is bounded and the number of gaps grows
only with the JSON tokens actually produced.
"""


@dataclass(frozen=True)
class JsonSchemaOptions:
    """How a JSON Schema becomes a grammar.

    * ``whitespace``: ``"bounded"`` (default; JSON whitespace ``[ \\t\\n\\r]`` up to
      ``max_whitespace`` bytes per gap), ``"compact"`` (none) or ``"any"``
      (unbounded, as RFC 8259 allows).  Never before or after the top-level value.
    * ``property_order``: ``"schema"`` (default): declared ``properties`` in
      schema order, then other keys — a sound restriction (every produced object
      is valid, some valid orders are not produced); or ``"any"``: members in any
      order (the grammar allows every order; required members and unique keys are
      then value checks when the object completes) — for validating JSON written
      by others, e.g. the MaskBench protocol.
    * ``fixed_strings``: how property names and ``const``/``enum`` strings may be
      spelled: ``"any"`` (default: every JSON spelling, e.g. ``"\\u0061"`` for
      ``"a"``, as a validator must accept) or ``"canonical"``: only the spelling of
      ``json.dumps(s, ensure_ascii=False)`` — a sound restriction for generation
      (the value is the same) that makes keys forced bytes, so jump-forward can
      append them without sampling.
    * ``additional_properties``: what an absent ``additionalProperties`` means:
      ``True`` per the specification (default), ``False`` (XGrammar's strict
      mode: only declared properties) or ``"declared"`` (strict where the object
      declares ``properties``, open where it declares none: records stay records,
      maps stay maps).  Both restrictions are sound (every output is valid).
    * ``formats``: ``"assert"`` (default: a known ``format`` constrains the
      string, as JSONSchemaBench and ``jsonschema``'s format checker expect) or
      ``"annotation"`` (draft 2020-12's default vocabulary: formats constrain
      nothing and are reported in the notes).
    * ``documents``: other schema documents by URI, for ``$ref`` outside the
      schema (nothing is fetched; the meta-schemas bundled with ``jsonschema`` are
      always known).
    * ``unknown_formats``: ``"annotation"`` (default; draft 2020-12 treats
      ``format`` as an annotation, so an unknown format constrains nothing and is
      reported in the compile notes) or ``"error"``.
    * ``max_repetition``: the largest ``minItems``/``maxItems`` unrolled into rules.
    * ``value_checks``: ``True`` (default): keywords a grammar cannot express
      (``uniqueItems``, overlapping ``oneOf``, ``not``, ``multipleOf``, ...) are
      over-approximated by the grammar and validated when their value completes
      (`constrained.json_schema.value_checks`); ``False``: such schemas are refused
      with `UnsupportedSchemaError` (a pure grammar, e.g. to export).
    * ``grounding``: a `constrained.json_schema.grounding.Grounding` (a text):
      string values must be substrings of that text (``x-grounded`` per value);
      None (default): no grounding, ``x-grounded`` is an annotation.

    Example:
        >>> JsonSchemaOptions(whitespace="compact").whitespace
        'compact'
    """

    whitespace: Literal["bounded", "compact", "any"] = "bounded"
    max_whitespace: int = DEFAULT_MAX_WHITESPACE
    property_order: Literal["schema", "any"] = "schema"
    fixed_strings: Literal["any", "canonical"] = "any"
    additional_properties: bool | Literal["declared"] = True
    unknown_formats: Literal["annotation", "error"] = "annotation"
    max_repetition: int = 256
    value_checks: bool = True
    formats: Literal["assert", "annotation"] = "assert"
    documents: Mapping[str, Any] | None = None
    grounding: Any = None

    def __post_init__(self) -> None:
        if self.whitespace not in ("bounded", "compact", "any"):
            raise OptionError(f"whitespace must be 'bounded', 'compact' or 'any', not {self.whitespace!r}")
        if self.max_whitespace < 1:
            raise OptionError(f"max_whitespace must be >= 1, not {self.max_whitespace}")
        if self.property_order not in ("schema", "any"):
            raise OptionError(f"property_order must be 'schema' or 'any', not {self.property_order!r}")
        if self.additional_properties not in (True, False, "declared"):
            raise OptionError(f"additional_properties must be True, False or 'declared', "
                              f"not {self.additional_properties!r}")
        if self.fixed_strings not in ("any", "canonical"):
            raise OptionError(f"fixed_strings must be 'any' or 'canonical', not {self.fixed_strings!r}")
        if self.unknown_formats not in ("annotation", "error"):
            raise OptionError(f"unknown_formats must be 'annotation' or 'error', not {self.unknown_formats!r}")
        if self.formats not in ("assert", "annotation"):
            raise OptionError(f"formats must be 'assert' or 'annotation', not {self.formats!r}")
        if self.grounding is not None:
            from constrained.json_schema.grounding import Grounding

            if not isinstance(self.grounding, Grounding):
                raise OptionError(f"grounding must be a Grounding, not {type(self.grounding).__name__}")
        if self.max_repetition < 1:
            raise OptionError(f"max_repetition must be >= 1, not {self.max_repetition}")


class OptionError(ConstrainedError, ValueError):
    """An option of the JSON Schema compiler has an invalid value."""
