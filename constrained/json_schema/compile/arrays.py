"""Array values: ``prefixItems`` / ``items`` (and draft ``additionalItems``) per position,
``minItems`` / ``maxItems`` unrolled into one nonterminal per position up to the
longest array or the first repeating position; ``uniqueItems``, ``contains`` and
``unevaluatedItems`` as value checks.

Positions past ``max_repetition`` are not unrolled: the bound is then a value check.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from constrained.errors import UnsupportedSchemaError
from constrained.json_schema.compile.bounds import count_bounds
from constrained.json_schema.compile.rules import Alternatives
from constrained.json_schema.conjunction import Conjunction, item_items, tuple_length

if TYPE_CHECKING:                      # pragma: no cover
    from constrained.json_schema.compiler import SchemaCompiler


def array_alternatives(compiler: SchemaCompiler, conj: Conjunction) -> Alternatives:
    """The alternatives of the arrays ``conj`` allows: the empty array (where it may be
    empty) and ``[`` elements ``]``."""
    builder, ws = compiler.builder, compiler.whitespace()
    min_items, max_items, bound_parts = count_bounds(conj, "minItems", "maxItems")
    for part in conj:
        if part.get("uniqueItems") is True:
            compiler.check(part, "uniqueItems", "uniqueItems is enforced by validation")
        if part.has("contains"):
            compiler.check(part, "contains", "contains (with minContains/maxContains) is enforced by validation")
        if part.has("unevaluatedItems"):
            compiler.check(part, "unevaluatedItems", "unevaluatedItems is enforced by validation")
    n_prefix = tuple_length(conj)
    prefix_elements = [compiler.items_symbol(item_items(conj, i, compiler.index), f"item{i}")
                       for i in range(n_prefix)]
    tail_element = compiler.items_symbol(item_items(conj, n_prefix, compiler.index), "items")
    # the longest possible array, and the positions that need their own nonterminal
    longest = max_items
    for i, element in enumerate(prefix_elements):
        if element is None:
            longest = i if longest is None else min(longest, i)
            break
    if tail_element is None:
        longest = n_prefix if longest is None else min(longest, n_prefix)
    if longest is not None and min_items > longest:
        return []
    cap = compiler.options.max_repetition
    if n_prefix > cap:
        raise UnsupportedSchemaError(f"a tuple of {n_prefix} positions exceeds max_repetition={cap}",
                                     keyword="prefixItems", pointer=conj[0].pointer)
    if (longest is not None and longest > cap) or min_items > cap - 1:
        keyword = "maxItems" if longest is not None and longest > cap else "minItems"
        compiler.check(bound_parts.get(keyword) or conj[0], keyword,
                       f"array bounds beyond max_repetition={cap} unrolled positions")
        if longest is not None and longest > cap:
            longest = None if tail_element is not None else longest
        min_items = min(min_items, cap - 1)
    distinct = max(n_prefix, min_items) + 1
    if longest is not None:
        distinct = min(distinct, longest)
    last = longest if longest is not None else distinct   # positions 1..last get nonterminals
    # from_position[j - 1]: the elements from position j (1-based) to the end
    from_position = [builder.fresh(f"arr_from{j}") for j in range(1, last + 1)]
    comma = builder.literal(",")

    def element_at(j: int) -> str:
        symbol = prefix_elements[j - 1] if j <= n_prefix else tail_element
        assert symbol is not None       # positions past `longest` get no nonterminal
        return symbol

    for j in range(1, last + 1):
        rest = from_position[j - 1]
        if j >= min_items:
            builder.rule(rest, element_at(j))
        if longest is None and j == last:
            builder.rule(rest, element_at(j), *ws, comma, *ws, rest)        # the repeating tail
        elif j < last:
            builder.rule(rest, element_at(j), *ws, comma, *ws, from_position[j])
    open_bracket, close_bracket = builder.literal("["), builder.literal("]")
    out: Alternatives = []
    if min_items == 0:
        out.append((open_bracket, *ws, close_bracket))
    if last >= 1:
        out.append((open_bracket, *ws, from_position[0], *ws, close_bracket))
    return out
