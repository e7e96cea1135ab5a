"""Resolving ``$ref`` in a JSON Schema document (draft 2020-12, with draft-07/04 spellings).

`SchemaIndex` walks a schema document once and records every schema resource
(``$id``, draft-04 ``id``), every ``$anchor`` (and the draft-07 ``"$id": "#name"``
spelling), and the base URI and JSON pointer of every sub-schema.  ``resolve``
then turns a ``$ref`` found in a sub-schema into the referenced sub-schema, its
base URI and its canonical location ``(resource URI, JSON pointer)``, which the
compiler uses as the nonterminal name so that recursion is a cycle of rules.

References inside the document, to resources it embeds, to other documents the
caller supplies (``documents={uri: schema}``) and to the meta-schemas bundled
with `jsonschema` are resolved; nothing is fetched over the network: any other
remote reference raises `UnsupportedSchemaError` naming the keyword and where
it is.

Example:
    >>> idx = SchemaIndex({"$defs": {"n": {"type": "integer"}}, "$ref": "#/$defs/n"})
    >>> idx.resolve("#/$defs/n", idx.root_uri, "")[0]
    {'type': 'integer'}
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urldefrag, urljoin

from constrained.errors import InvalidSchemaError, UnsupportedSchemaError
from constrained.json_schema.dialect import dialect_of

DEFAULT_ROOT_URI = "https://constrained.invalid/schema.json"  # hierarchical, so relative refs join

# keywords whose value is a schema / a list of schemas / a map name -> schema
_SCHEMA_VALUED = ("additionalProperties", "additionalItems", "contains", "propertyNames", "not",
                  "if", "then", "else", "unevaluatedItems", "unevaluatedProperties", "items")
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems", "items")
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas",
                "dependencies")


def join_uri(base: str, ref: str) -> str:
    """``ref`` resolved against ``base`` (RFC 3986), also for non-hierarchical bases
    such as ``urn:uuid:...`` where only a fragment can be relative."""
    if ref.startswith("#"):
        return urldefrag(base)[0] + ref
    return urljoin(base, ref)


def escape_pointer_token(token: str) -> str:
    """JSON pointer escaping (RFC 6901): ``~`` -> ``~0``, ``/`` -> ``~1``."""
    return token.replace("~", "~0").replace("/", "~1")


@dataclass(frozen=True)
class Located:
    """A sub-schema with its base URI and canonical location."""

    schema: Any
    base: str
    pointer: str           # JSON pointer from the document root
    resource: str          # URI of the innermost enclosing resource
    resource_pointer: str  # JSON pointer from that resource's root


class SchemaIndex:
    """Every resource, anchor and sub-schema location of one schema document."""

    def __init__(self, schema: Any, root_uri: str = DEFAULT_ROOT_URI, *,
                 documents: dict[str, Any] | None = None) -> None:
        self.document = schema
        self._resources: dict[str, Located] = {}
        self._anchors: dict[str, Located] = {}
        self._located: dict[int, Located] = {}
        # (id of a schema object of this document, dialect name) -> its keywords that
        # dialect gives no meaning (`conjunction.flatten` asks again and again; the
        # document's objects live as long as the index, so their ids stay theirs)
        self.foreign_keywords: dict[tuple[int, str], frozenset[str]] = {}
        self._resolved: dict[tuple[str, str], tuple[Any, str, str]] = {}   # (ref, base) -> `resolve`'s answer
        self._id_keyword = "id" if dialect_of(schema).name in ("draft3", "draft4") else "$id"
        self._walk(schema, root_uri, "", root_uri, "")
        here = self._located.get(id(schema))
        self.root_uri = here.base if here is not None else root_uri
        self._resources.setdefault(root_uri, here or Located(schema, root_uri, "", root_uri, ""))
        for uri, doc in (documents or {}).items():     # other documents, by URI (nothing is fetched)
            self._add_document(uri, doc)

    def _add_document(self, uri: str, doc: Any) -> None:
        uri = urldefrag(uri)[0]
        if uri in self._resources:
            return
        self._walk(doc, uri, "", uri, "")
        self._resources.setdefault(uri, self._located.get(id(doc)) or Located(doc, uri, "", uri, ""))

    def _known_document(self, uri: str) -> bool:
        """Load a well-known meta-schema (bundled with `jsonschema`) for ``uri``."""
        try:
            from jsonschema_specifications import REGISTRY
            contents = REGISTRY.contents(uri)
        except Exception:  # noqa: BLE001 - not a bundled meta-schema
            return False
        self._add_document(uri, contents)
        return True

    # ------------------------------------------------------------------ walking
    def _walk(self, node: Any, base: str, pointer: str, resource: str, rpointer: str) -> None:
        if isinstance(node, bool):
            return
        if not isinstance(node, dict):
            return
        ident = node.get(self._id_keyword)
        if isinstance(ident, str):
            uri, frag = urldefrag(join_uri(base, ident))
            if uri and not ident.startswith("#"):
                base = uri
                resource, rpointer = uri, ""
            if frag and not frag.startswith("/"):
                self._anchors[f"{uri or base}#{frag}"] = Located(node, base, pointer, resource, rpointer)
        dynamic = node.get("$dynamicAnchor")
        if isinstance(dynamic, str):     # a $ref to it behaves as to an $anchor
            self._anchors.setdefault(f"{base}#{dynamic}", Located(node, base, pointer, resource, rpointer))
        here = Located(node, base, pointer, resource, rpointer)
        self._located[id(node)] = here
        if rpointer == "":
            self._resources.setdefault(resource, here)
        anchor = node.get("$anchor")
        if isinstance(anchor, str):
            self._anchors[f"{base}#{anchor}"] = here
        for key, value in node.items():
            if key in ("enum", "const", "default", "examples"):
                continue
            child_ptr = f"{pointer}/{escape_pointer_token(key)}"
            child_rptr = f"{rpointer}/{escape_pointer_token(key)}"
            if isinstance(value, dict):
                if key in _SCHEMA_MAPS:
                    for name, sub in value.items():
                        t = escape_pointer_token(name)
                        self._walk(sub, base, f"{child_ptr}/{t}", resource, f"{child_rptr}/{t}")
                else:
                    self._walk(value, base, child_ptr, resource, child_rptr)
            elif isinstance(value, list) and key in _SCHEMA_LISTS:
                for i, sub in enumerate(value):
                    self._walk(sub, base, f"{child_ptr}/{i}", resource, f"{child_rptr}/{i}")

    # ------------------------------------------------------------------ queries
    def __len__(self) -> int:
        """How many sub-schema objects are located (grows when a known document is loaded)."""
        return len(self._located)

    def all_located(self) -> list[Located]:
        """Every sub-schema object of the document, located."""
        return list(self._located.values())

    def resources(self) -> dict[str, Located]:
        """Every schema resource of the document by its URI."""
        return dict(self._resources)

    def locate(self, schema: Any) -> Located | None:
        """Where ``schema`` (an object of this document) sits, if it was walked."""
        return self._located.get(id(schema))

    def resolve(self, ref: Any, base: str, pointer: str) -> tuple[Any, str, str]:
        """``(sub-schema, its base URI, canonical key)`` for ``ref`` found at ``pointer``."""
        if not isinstance(ref, str):
            raise InvalidSchemaError("$ref must be a string", keyword="$ref", pointer=pointer)
        hit = self._resolved.get((ref, base))
        if hit is not None:
            return hit
        resolved = self._resolve(ref, base, pointer)
        self._resolved[(ref, base)] = resolved
        return resolved

    def _resolve(self, ref: str, base: str, pointer: str) -> tuple[Any, str, str]:
        uri, frag = urldefrag(join_uri(base, ref))
        frag = unquote(frag)
        if frag and not frag.startswith("/"):
            if uri not in self._resources:
                self._known_document(uri)
            hit = self._anchors.get(f"{uri}#{frag}")
            if hit is None:
                raise InvalidSchemaError(f"$ref {ref!r}: no $anchor {frag!r} in {uri}", keyword="$ref",
                                         pointer=pointer)
            return hit.schema, hit.base, f"{hit.resource}#{hit.resource_pointer}"
        root = self._resources.get(uri)
        if root is None and self._known_document(uri):
            root = self._resources.get(uri)
        if root is None:
            raise UnsupportedSchemaError(f"$ref {ref!r} points outside the document ({uri}); remote "
                                         "references are not fetched", keyword="$ref", pointer=pointer)
        target: Any = root.schema
        base_here = root.base
        walked = ""
        for raw in frag.split("/")[1:] if frag else []:
            token = raw.replace("~1", "/").replace("~0", "~")
            walked += "/" + raw
            if isinstance(target, dict) and token in target:
                target = target[token]
            elif isinstance(target, list) and token.isdigit() and int(token) < len(target):
                target = target[int(token)]
            else:
                raise InvalidSchemaError(f"$ref {ref!r}: JSON pointer {frag!r} does not resolve "
                                         f"(stuck at {walked!r})", keyword="$ref", pointer=pointer)
            located = self._located.get(id(target))
            if located is not None:
                base_here = located.base
        if not isinstance(target, (dict, bool)):
            raise InvalidSchemaError(f"$ref {ref!r} resolves to a {type(target).__name__}, not a schema",
                                     keyword="$ref", pointer=pointer)
        located = self._located.get(id(target))
        key = f"{located.resource}#{located.resource_pointer}" if located else f"{uri}#{frag}"
        return target, base_here, key
