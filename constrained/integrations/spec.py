"""`ConstraintSpec`: what a serving request asks to be constrained to, engine-agnostic.

Serving engines pass constraints as plain data: vLLM's ``SamplingParams.extra_args``
(``vllm_xargs`` over HTTP), its ``structured_outputs`` request types, SGLang's
``json_schema``/``regex``/``ebnf`` fields.  `ConstraintSpec` is that data parsed and
checked once, with a stable `key` to cache compiled grammars by, and a `grammar`
that builds the project's `Grammar` for it.

A request dict has exactly one source key and may add JSON Schema options and a
compile timeout:

* ``json_schema``: a schema (dict, bool or JSON text);
* ``lark``, ``gbnf``: grammar text; ``regex``: a pattern; ``choice``: a list of
  strings (the output is one of them, verbatim);
* ``structural_tag``: a structural-tag spec (free text with schema-constrained
  tagged sections; `constrained.grammar.structural_tag`);
* options (for ``json_schema`` and the schemas of a ``structural_tag``): the fields of
  `JsonSchemaOptions` (``whitespace``, ``property_order``, ``additional_properties``, ...);
* ``timeout``: compile time limit in seconds (default `DEFAULT_COMPILE_TIMEOUT`).

Example:
    >>> spec = ConstraintSpec.from_request({"json_schema": {"type": "integer"}, "whitespace": "compact"})
    >>> spec.kind, spec.options
    ('json_schema', (('whitespace', 'compact'),))
    >>> spec.key == ConstraintSpec.from_request({"whitespace": "compact", "json_schema": '{"type":"integer"}'}).key
    True
    >>> ConstraintSpec.from_request({"regex": "[0-9]+", "lark": "start: A"})
    Traceback (most recent call last):
    ...
    constrained.integrations.spec.ConstraintSpecError: a constraint names exactly one of choice, gbnf, json_schema, lark, regex, structural_tag; this one names lark, regex
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from constrained.deadline import DEFAULT_COMPILE_TIMEOUT
from constrained.errors import ConstrainedError

_REGEX_META = re.compile(r"[\\^$.|?*+()\[\]{}/]")

__all__ = ["SOURCE_KINDS", "ConstraintSpec", "ConstraintSpecError", "cached_grammar"]

#: The keys that name what a request is constrained to (exactly one per request).
SOURCE_KINDS: tuple[str, ...] = ("choice", "gbnf", "json_schema", "lark", "regex", "structural_tag")


class ConstraintSpecError(ConstrainedError, ValueError):
    """A request's constraint is malformed: no source or several, a source of the wrong
    type, or an unknown option (the message says which).  A ``ValueError``, so serving
    engines turn it into a per-request error (HTTP 400) instead of an engine failure."""


def _schema_options() -> frozenset[str]:
    from constrained.json_schema.options import JsonSchemaOptions

    return frozenset(f.name for f in dataclasses.fields(JsonSchemaOptions))


def _canonical_json(value: Any) -> str:
    """Compact JSON text; key order kept (a schema's ``properties`` order is the order
    members are generated in)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True)
class ConstraintSpec:
    """One request's constraint: ``kind`` (one of `SOURCE_KINDS`), ``source`` (grammar
    text, or canonical JSON text for schemas, choices and structural tags), JSON Schema
    ``options`` (sorted name/value pairs) and the compile ``timeout``."""

    kind: str
    source: str
    options: tuple[tuple[str, Any], ...] = ()
    timeout: float | None = DEFAULT_COMPILE_TIMEOUT

    @classmethod
    def from_request(cls, request: Mapping[str, Any]) -> ConstraintSpec:
        """Parse a request dict (see the module docstring); raises `ConstraintSpecError`."""
        if not isinstance(request, Mapping):
            raise ConstraintSpecError(f"a constraint must be a dict, not {type(request).__name__}")
        kinds = sorted(k for k in request if k in SOURCE_KINDS)
        if len(kinds) != 1:
            raise ConstraintSpecError(f"a constraint names exactly one of {', '.join(SOURCE_KINDS)}; "
                                      f"this one names {', '.join(kinds) or 'none'}")
        kind = kinds[0]
        rest = {k: v for k, v in request.items() if k != kind}
        timeout = rest.pop("timeout", DEFAULT_COMPILE_TIMEOUT)
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                    or not timeout > 0):
            raise ConstraintSpecError(f"timeout must be a positive number of seconds or null, not {timeout!r}")
        if rest and kind not in ("json_schema", "structural_tag"):
            raise ConstraintSpecError(f"options {sorted(rest)} apply to json_schema and structural_tag "
                                      f"constraints only, not to {kind}")
        unknown = sorted(set(rest) - _schema_options())
        if unknown:
            raise ConstraintSpecError(f"unknown option(s) {unknown} for a {kind} constraint; known: "
                                      f"{sorted(_schema_options())}")
        source = cls._source(kind, request[kind])
        options = tuple(sorted(rest.items()))
        try:
            hash(options)
        except TypeError:
            raise ConstraintSpecError("option values must be strings, numbers or booleans") from None
        return cls(kind, source, options, None if timeout is None else float(timeout))

    @staticmethod
    def _source(kind: str, value: Any) -> str:
        if kind in ("json_schema", "structural_tag"):
            if isinstance(value, str):
                try:
                    value = json.loads(value)
                except json.JSONDecodeError as e:
                    raise ConstraintSpecError(f"{kind} is not valid JSON: {e}") from None
            if kind == "json_schema" and not isinstance(value, (dict, bool)):
                raise ConstraintSpecError(f"json_schema must be an object or a boolean, not {type(value).__name__}")
            if kind == "structural_tag" and not isinstance(value, dict):
                raise ConstraintSpecError(f"structural_tag must be an object, not {type(value).__name__}")
            return _canonical_json(value)
        if kind == "choice":
            if isinstance(value, str):
                try:
                    value = json.loads(value)
                except json.JSONDecodeError:
                    raise ConstraintSpecError("choice must be a list of strings") from None
            if not isinstance(value, (list, tuple)) or not value or not all(isinstance(c, str) for c in value):
                raise ConstraintSpecError("choice must be a non-empty list of strings")
            return _canonical_json(list(value))
        if not isinstance(value, str):
            raise ConstraintSpecError(f"{kind} must be a string, not {type(value).__name__}")
        if kind != "regex" and not value.strip():
            raise ConstraintSpecError(f"{kind} grammar is empty")
        return value

    @property
    def key(self) -> str:
        """A stable digest of everything that changes the compiled grammar."""
        text = json.dumps([self.kind, self.source, [list(o) for o in self.options]], ensure_ascii=False)
        return hashlib.sha256(text.encode()).hexdigest()

    def grammar(self):
        """The `Grammar` this spec stands for (compile errors are typed `GrammarError`s).

        Example:
            >>> ConstraintSpec.from_request({"choice": ["yes", "no"]}).grammar().source
            '<choice>'
        """
        from constrained.grammar.ir import Grammar

        if self.kind == "json_schema":
            return Grammar.from_json_schema(json.loads(self.source), timeout=self.timeout, **dict(self.options))
        if self.kind == "lark":
            return Grammar.from_lark(self.source, timeout=self.timeout)
        if self.kind == "gbnf":
            return Grammar.from_gbnf(self.source, timeout=self.timeout)
        if self.kind == "regex":
            return Grammar.from_regex(self.source)
        if self.kind == "choice":
            pattern = "|".join(_REGEX_META.sub(r"\\\g<0>", c) for c in json.loads(self.source))
            return Grammar.from_regex(pattern, source="<choice>")
        if self.kind == "structural_tag":
            return Grammar.from_structural_tag(json.loads(self.source), **dict(self.options))
        raise AssertionError(self.kind)  # pragma: no cover - from_request admits SOURCE_KINDS only


@functools.lru_cache(maxsize=256)
def cached_grammar(spec: ConstraintSpec):
    """`ConstraintSpec.grammar`, memoised for the last 256 specs of the process (a
    server's front end validates the same schema for every request that brings it).

    Example:
        >>> spec = ConstraintSpec.from_request({"regex": "a|b"})
        >>> cached_grammar(spec) is cached_grammar(spec)
        True
    """
    return spec.grammar()
