"""Structural tags (vLLM / XGrammar): free text with triggered, schema-constrained sections.

Two spellings are accepted, as a dict or its JSON text:

* the original one (vLLM's ``structural_tag`` response format)::

      {"type": "structural_tag", "triggers": ["<function="],
       "structures": [{"begin": "<function=get_weather>", "schema": {...}, "end": "</function>"}, ...]}

  Text is free until a trigger appears; from there the output continues with the
  ``begin`` of a structure that starts with that trigger, a JSON value of its schema
  and its ``end``; then free text again, any number of times.
* XGrammar's newer format tree, ``{"type": "structural_tag", "format": FORMAT}`` where a
  FORMAT is one of ``const_string`` (``value``), ``json_schema`` (``json_schema``),
  ``any_text`` (``excludes``/``excluded_str``), ``regex`` (``pattern``, Python syntax),
  ``grammar`` (``grammar``: GBNF, or lark EBNF), ``sequence`` / ``or`` (``elements``),
  ``tag`` (``begin``, ``content``, ``end``), ``triggered_tags`` (``triggers``, ``tags``,
  ``at_least_one``, ``stop_after_first``, ``excludes``) and ``tags_with_separator``
  (``tags``, ``separator``, ``at_least_one``, ``stop_after_first``).  The original
  spelling is a ``triggered_tags`` of ``json_schema`` tags.

Exact semantics (what the compiled grammar accepts):

* free text of a ``triggered_tags`` contains no trigger except as the start of a tag:
  the *first* place where a trigger ends in the text starts a tag (so free text cannot
  even end in the first bytes of a trigger that the next tag completes differently);
* ``any_text`` as a tag's content is text in which the tag's ``end`` first appears at
  its end; elsewhere it is any text;
* ``excludes`` strings appear nowhere in the free text they apply to;
* a tag's JSON value is compiled with `Grammar.from_json_schema` (``schema_options``) and
  its value checks apply to that value alone (`constrained.grammar.compose.SectionChecks`).

Example:
    >>> from constrained import Grammar, TokenVocabulary, compile_grammar
    >>> spec = {"type": "structural_tag", "triggers": ["<f="],
    ...         "structures": [{"begin": "<f=add>", "end": "</f>",
    ...                         "schema": {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}}]}
    >>> g = Grammar.from_structural_tag(spec, whitespace="compact")
    >>> vocab = TokenVocabulary.from_token_bytes([bytes([c]) for c in range(256)] + [b""], eos_ids=[256])
    >>> cg = compile_grammar(g, vocab, cache_dir=None)
    >>> [cg.accepts_bytes(s) for s in (b"hi <f=add>[1,2]</f> ok", b"hi <f=add>[1,1]</f>", b"hi <f=sub>[]</f>")]
    [True, False, False]
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from constrained.errors import CompileLimitError, GrammarError, StructuralTagError
from constrained.grammar.compose import GrammarBuilder
from constrained.grammar.ir import Grammar

SOURCE = "<structural tag>"
MAX_FORMAT_DEPTH = 64       # nested formats (each level is a path component)
_ANY = "(?s:.*)"


def _alternation(strings: Sequence[str]) -> str:
    return "(?:" + "|".join(re.escape(s) for s in sorted(set(strings), key=lambda s: (-len(s), s))) + ")"


class _Compiler:
    def __init__(self, schema_options: Mapping[str, Any]) -> None:
        self.b = GrammarBuilder(SOURCE)
        self.schema_options = dict(schema_options)

    # ------------------------------------------------------------------ helpers
    def _text(self, value: Any, path: str, *, empty: bool = True) -> str:
        if not isinstance(value, str):
            raise StructuralTagError(f"expected a string, got {type(value).__name__}", path=path)
        if not empty and not value:
            raise StructuralTagError("must not be empty", path=path)
        return value

    def _list(self, value: Any, path: str) -> list:
        if not isinstance(value, list):
            raise StructuralTagError(f"expected a list, got {type(value).__name__}", path=path)
        return value

    def _excludes(self, fmt: Mapping, path: str) -> list[str]:
        raw = fmt.get("excludes", fmt.get("excluded_str", []))
        return [self._text(e, f"{path}.excludes[{i}]", empty=False)
                for i, e in enumerate(self._list(raw, f"{path}.excludes"))]

    def _free(self, excludes: Sequence[str], hint: str = "text") -> str:
        """Any text (possibly empty) containing none of ``excludes``."""
        excl = (f"{_ANY}{_alternation(excludes)}{_ANY}",) if excludes else ()
        term = self.b.terminal("(?s:.+)", excluding=excl, hint=hint.upper())
        return self.b.rule(hint, [(), (term,)])

    # ------------------------------------------------------------------ formats
    def compile(self, fmt: Any, path: str, end: str = "") -> str:
        """A nonterminal for ``fmt`` followed by the literal ``end`` (the end of an
        enclosing tag, which an ``any_text`` content must not contain before it)."""
        if path.count(".") > MAX_FORMAT_DEPTH:
            raise StructuralTagError(f"formats nested more than {MAX_FORMAT_DEPTH} levels deep", path=path)
        if not isinstance(fmt, Mapping):
            raise StructuralTagError(f"a format must be an object, got {type(fmt).__name__}", path=path)
        kind = fmt.get("type")
        b = self.b
        tail = b.literal(end)
        if kind == "const_string":
            return b.rule("const", [(b.literal(self._text(fmt.get("value"), f"{path}.value")), tail)])
        if kind == "json_schema":
            return b.rule("json", [(self._schema(fmt.get("json_schema", fmt.get("schema")), f"{path}.json_schema"),
                                    tail)])
        if kind == "any_text":
            excludes = self._excludes(fmt, path)
            if not end:
                return self._free(excludes)
            # the text up to the first occurrence of `end`, which ends it
            excl = [f"{_ANY}{re.escape(end)}(?s:.+)"]
            if excludes:
                excl.append(f"{_ANY}{_alternation(excludes)}{_ANY}{re.escape(end)}")
            return b.rule("text", [(b.terminal(_ANY + re.escape(end), excluding=excl, hint="TEXT_END"),)])
        if kind == "regex":
            pattern = self._text(fmt.get("pattern"), f"{path}.pattern")
            return b.rule("regex", self._regex_alternatives(pattern, path, tail))
        if kind == "grammar":
            return b.rule("grammar", [(b.embed(self._grammar(fmt.get("grammar"), f"{path}.grammar"), "grammar"),
                                       tail)])
        if kind == "sequence":
            elements = self._list(fmt.get("elements"), f"{path}.elements")
            if not elements:
                raise StructuralTagError("a sequence needs at least one element", path=f"{path}.elements")
            syms = [self.compile(e, f"{path}.elements[{i}]") for i, e in enumerate(elements[:-1])]
            syms.append(self.compile(elements[-1], f"{path}.elements[{len(elements) - 1}]", end))
            return b.rule("sequence", [syms])
        if kind == "or":
            elements = self._list(fmt.get("elements"), f"{path}.elements")
            if not elements:
                raise StructuralTagError("'or' needs at least one element", path=f"{path}.elements")
            elements = _merged_schemas(elements)
            return b.rule("or", [(self.compile(e, f"{path}.elements[{i}]", end),) for i, e in enumerate(elements)])
        if kind == "tag":
            return b.rule("tag_end", [(self._tag(fmt, path), tail)])
        if kind == "triggered_tags":
            return b.rule("triggered_end", [(self._triggered(fmt, path), tail)])
        if kind == "tags_with_separator":
            return b.rule("separated_end", [(self._separated(fmt, path), tail)])
        if kind == "structural_tag":
            return self.compile(_normalise(fmt, path), path, end)
        raise StructuralTagError(f"unknown format type {kind!r} (supported: const_string, json_schema, any_text, "
                                 "regex, grammar, sequence, or, tag, triggered_tags, tags_with_separator)",
                                 path=f"{path}.type")

    def _regex_alternatives(self, pattern: str, path: str, tail: str | None) -> list:
        try:
            empty = re.fullmatch(pattern, "") is not None
        except re.error as e:
            raise StructuralTagError(f"invalid regex {pattern!r}: {e}", path=f"{path}.pattern") from None
        term = self.b.terminal(pattern, excluding=("",) if empty else (), hint="REGEX")
        return [(term, tail)] + ([(tail,)] if empty else [])

    def _schema(self, schema: Any, path: str) -> str:
        if isinstance(schema, str):
            try:
                schema = json.loads(schema)
            except json.JSONDecodeError as e:
                raise StructuralTagError(f"the schema is not JSON: {e}", path=path) from None
        if schema is None:
            schema = True
        if not isinstance(schema, (dict, bool)):
            raise StructuralTagError(f"a JSON Schema must be an object or a boolean, got {type(schema).__name__}",
                                     path=path)
        return self.b.embed(Grammar.from_json_schema(schema, **self.schema_options), "json")

    def _grammar(self, text: Any, path: str) -> Grammar:
        text = self._text(text, path, empty=False)
        try:
            if "::=" in text:
                return Grammar.from_gbnf(text)
            return Grammar.from_lark(text)
        except CompileLimitError:
            raise                         # a limit reached (time, size) is not a grammar that fails to load
        except GrammarError as e:
            raise StructuralTagError(f"the grammar does not load: {e}", path=path) from None

    def _tag(self, tag: Any, path: str) -> str:
        if not isinstance(tag, Mapping):
            raise StructuralTagError(f"a tag must be an object, got {type(tag).__name__}", path=path)
        begin = self._text(tag.get("begin"), f"{path}.begin")
        end = self._text(tag.get("end", ""), f"{path}.end")
        content = tag.get("content")
        if content is None:
            raise StructuralTagError("a tag needs a 'content' format", path=f"{path}.content")
        return self.b.rule("tag", [(self.b.literal(begin), self.compile(content, f"{path}.content", end))])

    def _tag_after(self, tag: Mapping, path: str, skip: int) -> str:
        """A tag whose first ``skip`` bytes of ``begin`` (its trigger) were already read."""
        begin = tag["begin"]
        return self.b.rule("tag_rest", [(self.b.literal(begin[skip:]),
                                         self.compile(tag["content"], f"{path}.content", tag.get("end", "")))])

    def _tags(self, fmt: Mapping, path: str) -> list[Mapping]:
        tags = self._list(fmt.get("tags"), f"{path}.tags")
        if not tags:
            raise StructuralTagError("needs at least one tag", path=f"{path}.tags")
        for i, t in enumerate(tags):
            if not isinstance(t, Mapping):
                raise StructuralTagError(f"a tag must be an object, got {type(t).__name__}", path=f"{path}.tags[{i}]")
            self._text(t.get("begin"), f"{path}.tags[{i}].begin")
            self._text(t.get("end", ""), f"{path}.tags[{i}].end")
            if t.get("content") is None:
                raise StructuralTagError("a tag needs a 'content' format", path=f"{path}.tags[{i}].content")
        return list(tags)

    def _triggered(self, fmt: Mapping, path: str) -> str:
        b = self.b
        tags = self._tags(fmt, path)
        triggers = [self._text(t, f"{path}.triggers[{i}]", empty=False)
                    for i, t in enumerate(self._list(fmt.get("triggers"), f"{path}.triggers"))]
        if not triggers:
            raise StructuralTagError("needs at least one trigger", path=f"{path}.triggers")
        excludes = self._excludes(fmt, path)
        by_trigger: dict[str, list[int]] = {t: [] for t in dict.fromkeys(triggers)}
        for i, tag in enumerate(tags):
            matching = [t for t in by_trigger if tag["begin"].startswith(t)]
            if len(matching) != 1:
                raise StructuralTagError(
                    f"the begin {tag['begin']!r} must start with exactly one trigger, not "
                    f"{len(matching)} ({', '.join(map(repr, matching)) or 'none'})", path=f"{path}.tags[{i}].begin")
            by_trigger[matching[0]].append(i)
        any_trigger = _alternation(list(by_trigger))
        # free text then a trigger, where that trigger's end is the first place any trigger ends
        # (a trigger with another one inside it, ending before its own end, never gets there)
        calls = []
        for trig, idx in by_trigger.items():
            if not idx or any(_ends_inside(u, trig) for u in by_trigger if u != trig):
                continue
            excl = [f"{_ANY}{any_trigger}(?s:.+)"]
            if excludes:
                excl.append(f"{_ANY}{_alternation(excludes)}{_ANY}{re.escape(trig)}")
            lead = b.terminal(_ANY + re.escape(trig), excluding=excl, hint="TEXT_TRIGGER")
            rest = b.rule("tags", [(self._tag_after(tags[i], f"{path}.tags[{i}]", len(trig)),) for i in idx])
            calls.append((lead, rest))
        final = self._free(list(by_trigger) + excludes, "free_text")
        whole = b.rule("tag_any", [(self._tag(t, f"{path}.tags[{i}]"),) for i, t in enumerate(tags)])
        at_least_one = bool(fmt.get("at_least_one", False))
        stop_after_first = bool(fmt.get("stop_after_first", False))
        if at_least_one and stop_after_first:
            return whole
        call = b.rule("call", calls) if calls else None      # None: no tag is reachable by a trigger
        if stop_after_first:                                  # free text, or free text and one tag
            return b.rule("triggered", [(final,)] + ([(call,)] if call else []))
        calls_star = b.fresh("calls")                         # any number of (free text, tag)
        b._rules.append(_rule(calls_star, ()))
        if call:
            b._rules.append(_rule(calls_star, (calls_star, call)))
        if at_least_one:
            return b.rule("triggered", [(whole, calls_star, final)])
        return b.rule("triggered", [(calls_star, final)])

    def _separated(self, fmt: Mapping, path: str) -> str:
        b = self.b
        tags = self._tags(fmt, path)
        sep = self._text(fmt.get("separator", ""), f"{path}.separator")
        one = b.rule("tag_any", [(self._tag(t, f"{path}.tags[{i}]"),) for i, t in enumerate(tags)])
        at_least_one = bool(fmt.get("at_least_one", False))
        if fmt.get("stop_after_first", False):
            return b.rule("separated", [(one,)] + ([] if at_least_one else [()]))
        more = b.fresh("separated_more")
        b._rules.extend([_rule(more, (one,)), _rule(more, (more, b.literal(sep), one))])
        return b.rule("separated", [(more,)] + ([] if at_least_one else [()]))


def mergeable_schema(schema: Any) -> bool:
    """Whether ``schema`` can become an ``anyOf`` branch as it is: no references, ids or
    draft of its own (those read the document root, which the merge moves)."""
    if isinstance(schema, bool):
        return True
    text = json.dumps(schema)
    return isinstance(schema, dict) and not any(k in text for k in ('"$ref"', '"$id"', '"$schema"', '"$anchor"',
                                                                     '"$dynamicRef"', '"$recursiveRef"'))


def _merged_schemas(elements: list) -> list:
    """``or`` elements with every JSON Schema element merged into one ``anyOf``: alternative
    schemas reading the same bytes are one value with one set of checks (apart, each
    schema's checks would apply to a value the other branch may be parsing)."""
    schemas = [e for e in elements if isinstance(e, Mapping) and e.get("type") == "json_schema"
               and mergeable_schema(e.get("json_schema", e.get("schema", True)))]
    if len(schemas) < 2:
        return elements
    merged = {"type": "json_schema",
              "json_schema": {"anyOf": [e.get("json_schema", e.get("schema", True)) for e in schemas]}}
    out = [e for e in elements if not any(e is s for s in schemas)]
    return [merged] + out


def _ends_inside(inner: str, outer: str) -> bool:
    """Whether ``inner`` occurs in ``outer`` ending before ``outer`` ends (so a text reaching
    ``outer`` meets ``inner`` first)."""
    i = outer.find(inner)
    while i >= 0:
        if i + len(inner) < len(outer):
            return True
        i = outer.find(inner, i + 1)
    return False


def _rule(lhs: str, rhs: tuple):
    from constrained.grammar.ir import Rule

    return Rule(lhs, tuple(s for s in rhs if s is not None))


def _normalise(spec: Mapping, path: str) -> Mapping:
    """The format tree of a top-level spec (either spelling)."""
    if "format" in spec:
        return spec["format"]
    if "structures" in spec:
        structures = spec["structures"]
        if not isinstance(structures, list) or not structures:
            raise StructuralTagError("'structures' must be a non-empty list", path=f"{path}.structures")
        tags = []
        for i, s in enumerate(structures):
            if not isinstance(s, Mapping):
                raise StructuralTagError("a structure must be an object", path=f"{path}.structures[{i}]")
            missing = [k for k in ("begin", "end") if k not in s]
            if missing:
                raise StructuralTagError(f"a structure needs {' and '.join(missing)}", path=f"{path}.structures[{i}]")
            tags.append({"begin": s["begin"], "end": s["end"],
                         "content": {"type": "json_schema", "json_schema": s.get("schema", True)}})
        return {"type": "triggered_tags", "triggers": spec.get("triggers"), "tags": tags}
    raise StructuralTagError("a structural tag needs 'format' or 'structures' (and 'triggers')", path=path)


def grammar_from_structural_tag(spec: Mapping | str, **schema_options: Any) -> Grammar:
    """Compile a structural tag (a dict or its JSON text, either spelling; see the module
    docstring) to a `Grammar`; ``schema_options`` go to `Grammar.from_json_schema` for every
    embedded schema.  Raises `StructuralTagError` (with the path into the spec) for a
    malformed spec and the schema compiler's errors for a bad schema.

    Example:
        >>> spec = {"type": "structural_tag", "format": {"type": "tag", "begin": "<think>",
        ...         "content": {"type": "any_text"}, "end": "</think>"}}
        >>> grammar_from_structural_tag(spec).start
        'start'
    """
    if isinstance(spec, (str, bytes)):
        try:
            spec = json.loads(spec)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise StructuralTagError(f"the structural tag is not JSON: {e}") from None
        except RecursionError:
            raise StructuralTagError("the structural tag's JSON nests too deep to read") from None
    if not isinstance(spec, Mapping):
        raise StructuralTagError(f"a structural tag must be an object, got {type(spec).__name__}")
    top_level = spec.get("type") in ("structural_tag", None) and ("structures" in spec or "format" in spec)
    fmt = _normalise(spec, "$") if top_level or spec.get("type") == "structural_tag" else spec
    c = _Compiler(schema_options)
    top = c.compile(fmt, "$.format" if "format" in spec else "$")
    return c.b.build(c.b.rule("start", [(top,)]))
