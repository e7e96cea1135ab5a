"""$ref resolution: JSON pointers, $id base changes, anchors, typed errors."""

from __future__ import annotations

import pytest

from constrained.errors import InvalidSchemaError, SchemaError, UnsupportedSchemaError
from constrained.json_schema.resolver import SchemaIndex


def test_pointer_escapes_and_percent_encoding() -> None:
    schema = {"$defs": {"a/b": {"type": "null"}, "t~n": {"type": "boolean"}, "p%q": {"type": "string"}}}
    idx = SchemaIndex(schema)
    assert idx.resolve("#/$defs/a~1b", idx.root_uri, "")[0] == {"type": "null"}
    assert idx.resolve("#/$defs/t~0n", idx.root_uri, "")[0] == {"type": "boolean"}
    assert idx.resolve("#/$defs/p%25q", idx.root_uri, "")[0] == {"type": "string"}


def test_id_changes_the_base_and_anchors_resolve_against_it() -> None:
    schema = {"$id": "https://example.com/root.json",
              "$defs": {"a": {"$id": "nested/a.json", "$defs": {"b": {"$anchor": "bee", "type": "integer"}}}}}
    idx = SchemaIndex(schema)
    target, base, key = idx.resolve("nested/a.json#bee", idx.root_uri, "")
    assert target == {"$anchor": "bee", "type": "integer"}
    assert base == "https://example.com/nested/a.json"
    # the same schema reached by a pointer through the root has the same canonical key
    assert idx.resolve("#/$defs/a/$defs/b", idx.root_uri, "")[2] == key
    assert idx.resolve("https://example.com/nested/a.json#/$defs/b", idx.root_uri, "")[2] == key


def test_draft7_fragment_ids_are_anchors() -> None:
    idx = SchemaIndex({"definitions": {"x": {"$id": "#foo", "type": "null"}}})
    assert idx.resolve("#foo", idx.root_uri, "")[0] == {"$id": "#foo", "type": "null"}


def test_recursive_reference_key_is_stable() -> None:
    schema = {"type": "object", "properties": {"child": {"$ref": "#"}}}
    idx = SchemaIndex(schema)
    t1, _, k1 = idx.resolve("#", idx.root_uri, "/properties/child")
    t2, _, k2 = idx.resolve("", idx.root_uri, "/properties/child")
    assert t1 is schema and t2 is schema and k1 == k2


@pytest.mark.parametrize("ref,error", [
    ("https://elsewhere.example/schema.json", UnsupportedSchemaError),
    ("#/$defs/missing", InvalidSchemaError),
    ("#nope", InvalidSchemaError),
    ("#/$defs/n/enum", InvalidSchemaError),
    (17, InvalidSchemaError),
])
def test_bad_references_are_typed_errors_with_a_location(ref, error) -> None:
    idx = SchemaIndex({"$defs": {"n": {"enum": [1, 2]}}})
    with pytest.raises(error) as info:
        idx.resolve(ref, idx.root_uri, "/properties/x")
    assert isinstance(info.value, SchemaError)
    assert info.value.keyword == "$ref" and info.value.pointer == "/properties/x"
