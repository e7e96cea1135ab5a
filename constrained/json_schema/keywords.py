"""Keyword vocabularies shared by the compiler and the validators."""

from __future__ import annotations

# keywords that never constrain a value (draft 2020-12 annotations and identifiers)
ANNOTATIONS = frozenset({
    "$schema", "$id", "id", "$anchor", "$dynamicAnchor", "$recursiveAnchor", "$comment", "$vocabulary",
    "$defs", "definitions", "title", "description", "default", "examples", "deprecated", "readOnly",
    "writeOnly", "contentMediaType", "contentEncoding", "contentSchema",
})
