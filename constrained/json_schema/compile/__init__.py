"""The parts of the JSON Schema compiler; `constrained.json_schema.compiler` is its front
door and the small core that dispatches a conjunction of sub-schemas to them.

- `rules`: the grammar being built (terminals deduplicated by their regexes, rules,
  fresh names) and the regexes of JSON's tokens;
- `kinds`: the kinds of value a conjunction allows (``type``, ``not``);
- `applicators`: ``anyOf`` / ``oneOf`` / ``if``-``then``-``else`` distributed over the
  rest of their conjunction;
- `literals`: ``enum`` / ``const`` values, and fixed strings (keys) in their spellings;
- `bounds`: the tightest of several bounds (counts, numbers; float-safe decimal bounds);
- `numeric`: number values (integer and decimal ranges);
- `strings`: string values (``pattern``, ``format``, lengths) as string terminals;
- `arrays`: array values (positions, item schemas, length bounds);
- `objects`: object values (declared members in order, extra and pattern keys).

Each of them reads and extends one `SchemaCompiler`'s state: its `RuleBuilder`, its
notes and its value checks.
"""
