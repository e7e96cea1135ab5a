"""``anyOf`` / ``oneOf`` / ``if``-``then``-``else`` distributed over the rest of their
conjunction: one nonterminal per branch, each the conjunction of the branch with
everything else that applies to the value (so ``{"type": "object", "anyOf": [A, B]}``
becomes ``object∧A | object∧B``).

``oneOf`` is exact when its branches are pairwise disjoint (by kind, or by a required
property's const/enum values); otherwise it is compiled as ``anyOf`` and checked.
``if``/``then``/``else`` is compiled as ``(if ∧ then) | else`` and checked.  Past
`MAX_BRANCHES` branches, `MAX_DISTRIBUTED` nested distributions or `MAX_CONJUNCTIONS`
sub-grammars, the keyword is left to a value check and the grammar ignores it.
"""

from __future__ import annotations

from itertools import combinations
from typing import TYPE_CHECKING, Any

from constrained.errors import InvalidSchemaError
from constrained.json_schema.compile.kinds import ALL_KINDS, type_kinds, value_kinds
from constrained.json_schema.compile.literals import json_equal
from constrained.json_schema.compile.rules import Alternatives
from constrained.json_schema.conjunction import Conjunction, Part

if TYPE_CHECKING:                      # pragma: no cover
    from constrained.json_schema.compiler import SchemaCompiler

MAX_BRANCHES = 64        # anyOf/oneOf branches distributed over their conjunction
MAX_DISTRIBUTED = 4      # nested distributions along one conjunction
MAX_CONJUNCTIONS = 2000  # sub-grammars before disjunctions stop being expanded (then checked)


def distribute(compiler: SchemaCompiler, conj: Conjunction, index: int, keyword: str) -> Alternatives:
    """The alternatives of ``conj`` whose part ``index`` has an ``anyOf`` or ``oneOf`` (``keyword``)."""
    part = conj[index]
    branches = part.get(keyword)
    if not isinstance(branches, list) or not branches:
        raise InvalidSchemaError(f"{keyword} must be a non-empty array", keyword=keyword, pointer=part.pointer)
    rest = conj[:index] + (part.without(keyword),) + conj[index + 1:]
    depth = sum(1 for q in conj for k in q.done if k in ("anyOf", "oneOf", "if"))
    if len(branches) > MAX_BRANCHES or depth >= MAX_DISTRIBUTED or compiler.sub_grammars > MAX_CONJUNCTIONS:
        compiler.check(part, keyword, f"{keyword} with {len(branches)} branches at distribution depth {depth} "
                                      f"({compiler.sub_grammars} sub-grammars so far) is not expanded; "
                                      "the grammar ignores it")
        return compiler.alternatives(rest)
    items = [(branch, part.loc.base, f"{part.pointer}/{keyword}/{j}") for j, branch in enumerate(branches)]
    if keyword == "oneOf" and not _pairwise_disjoint(compiler, items):
        compiler.check(part, "oneOf", "oneOf branches that may overlap are compiled as anyOf")
    out: Alternatives = []
    for j, item in enumerate(items):
        symbol = compiler.items_symbol([*rest, item], f"{keyword}{j}")
        if symbol is not None:
            out.append((symbol,))
    return out


def if_then_else(compiler: SchemaCompiler, conj: Conjunction, index: int) -> Alternatives:
    """The alternatives of ``conj`` whose part ``index`` has ``if``, ``then`` or ``else``."""
    part = conj[index]
    rest = conj[:index] + (Part(part.loc, part.done | {"if", "then", "else"}),) + conj[index + 1:]
    base = part.loc.base
    if not part.has("if"):
        return compiler.alternatives(rest)        # then/else without if: no effect
    if not part.has("then") and not part.has("else"):
        return compiler.alternatives(rest)        # if alone: an annotation
    if compiler.sub_grammars > MAX_CONJUNCTIONS:
        compiler.check(part, "if", f"if/then/else is not expanded ({compiler.sub_grammars} sub-grammars so far)")
        return compiler.alternatives(rest)
    condition = (part.get("if"), base, part.pointer + "/if")
    then = (part.get("then", True), base, part.pointer + "/then")
    otherwise = (part.get("else", True), base, part.pointer + "/else")
    compiler.check(part, "if", "if/then/else is compiled as (if and then) or else, without 'not if'")
    out: Alternatives = []
    for j, items in enumerate(([condition, then], [otherwise])):
        symbol = compiler.items_symbol([*rest, *items], f"if{j}")
        if symbol is not None:
            out.append((symbol,))
    return out


def _pairwise_disjoint(compiler: SchemaCompiler, items: list[tuple[Any, str, str]]) -> bool:
    """Whether no value can satisfy two of these sub-schemas (then oneOf is anyOf)."""
    signatures = []
    for item in items:
        conj = compiler.flatten([item])
        signatures.append(None if conj is None else _signature(compiler, conj))
    for first, second in combinations(signatures, 2):
        if first is None or second is None:
            continue
        kinds_a, fixed_a = first
        kinds_b, fixed_b = second
        if not (kinds_a & kinds_b):
            continue
        if kinds_a | kinds_b <= {"object"} and any(
                name in fixed_b and not any(json_equal(x, y) for x in fixed_a[name] for y in fixed_b[name])
                for name in fixed_a):
            continue
        return False
    return True


def _signature(compiler: SchemaCompiler, conj: Conjunction) -> tuple[frozenset[str], dict[str, list]]:
    """The kinds ``conj`` allows, and the values its required properties are fixed to (by const/enum)."""
    kinds = set(ALL_KINDS)
    fixed: dict[str, list] = {}
    for part in conj:
        if part.has("type"):
            kinds &= type_kinds(compiler, part, check=False)
        for keyword in ("const", "enum"):
            if part.has(keyword):
                values = [part.get(keyword)] if keyword == "const" else part.get(keyword)
                if isinstance(values, list):
                    kinds &= {kind for v in values for kind in value_kinds(v)}
        properties = part.get("properties")
        required = part.get("required") if isinstance(part.get("required"), list) else []
        if isinstance(properties, dict):
            for name in required:
                values = _fixed_values(compiler, properties.get(name))
                if values is not None:
                    fixed[name] = values
    return frozenset(kinds), fixed


def _fixed_values(compiler: SchemaCompiler, schema: Any) -> list | None:
    """The values a property's schema admits at most (its const or enum), if it says."""
    if not isinstance(schema, dict) or (compiler.dialect.refs_replace_siblings and "$ref" in schema):
        return None                             # the $ref target decides, not its siblings
    for keyword in ("const", "enum"):
        if keyword in schema and compiler.dialect.evaluates(keyword):
            values = [schema["const"]] if keyword == "const" else schema["enum"]
            return values if isinstance(values, list) else None
    return None
