"""The application API: `extract` a schema-valid value from text, `generate` constrained text.

Both load the model once per process (the embedded default, SmolLM2-135M-Instruct,
unless ``model=`` names another: a local Hugging Face directory, or a
`constrained.models.LanguageModel`) and compile each constraint once per
(constraint, vocabulary).  Tokens the constraint forces are appended without
sampling (jump-forward): a JSON key, the ``": "`` after it, closing brackets.

`extract` never returns an invalid value: the output is parsed and validated with
``jsonschema`` (format checking on) before it is returned.  Where the token budget
would run out, the default sampler ends the output with the constraint's shortest
completion instead (``finish_within_budget``: a long string may be cut short, the
value stays valid); a run that still cannot finish (no completion fits in
``max_tokens``) raises `GenerationError`.

Example (with the default model installed):
    >>> schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    >>> extract(schema, "I flew from Paris to Rome.")                         # doctest: +SKIP
    {'city': 'Paris'}
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from constrained.errors import ContextLengthError, GenerationError, InvalidSchemaError
from constrained.json_schema.grounding import GroundingError

if TYPE_CHECKING:                      # pragma: no cover
    from constrained.grammar.ir import Grammar
    from constrained.tools import ToolCallResult

DEFAULT_INSTRUCTIONS = ("Extract the information the user's text gives as one JSON value that follows this "
                        "JSON Schema. Answer with the JSON only.\nSchema: {schema}")
FIELD_LIST_INSTRUCTIONS = "Extract the information the user's text gives as one JSON value. Answer with the JSON only."
"""The default system prompt where the field list says all a model needs of the schema
(`field_list_describes`); the grammar enforces the rest."""


@lru_cache(maxsize=4)
def _model(spec: str):
    from constrained.models import LanguageModel

    return LanguageModel.load(spec)


def _language_model(model):
    from constrained.models import LanguageModel

    if model is None:
        lm = _model("default")
    elif isinstance(model, LanguageModel):
        lm = model
    else:
        lm = _model(str(model))
    _fit_cpu_threads(lm)
    return lm


_DEFAULT_THREADS: list[int] = []


def cpu_threads_for_load(default: int, cpus: int | None = None, load: float | None = None) -> int:
    """Torch CPU threads for the next generation: ``default`` (torch's own choice),
    or 1 when the machine is busy (1-minute load average above ``cpus - 1``).

    Every forward pass of a small model is a series of short parallel kernels; on an
    oversubscribed CPU each one waits for its slowest thread to be scheduled again
    (measured on 2 busy cores, SmolLM2-135M: 370-440 ms per token with 2 threads,
    92-106 ms with 1; masking the logits 3-5x slower likewise).

    Example:
        >>> cpu_threads_for_load(2, cpus=2, load=9.0), cpu_threads_for_load(2, cpus=2, load=0.3)
        (1, 2)
    """
    import os

    cpus = cpus if cpus is not None else (os.cpu_count() or 1)
    if load is None:
        try:
            load = os.getloadavg()[0]
        except OSError:                 # pragma: no cover - no load average on this platform
            return default
    return 1 if load > cpus - 1 else default


def _fit_cpu_threads(lm) -> None:
    """Choose torch's CPU threads by the machine's load (`cpu_threads_for_load`) before a
    generation on the CPU, unless the user pinned them (``CONSTRAINED_CPU_THREADS``,
    ``OMP_NUM_THREADS`` or ``MKL_NUM_THREADS`` in the environment)."""
    import os

    import torch

    if getattr(getattr(lm, "device", None), "type", "cpu") != "cpu":
        return
    pinned = os.environ.get("CONSTRAINED_CPU_THREADS")
    if pinned:
        torch.set_num_threads(max(1, int(pinned)))
        return
    if os.environ.get("OMP_NUM_THREADS") or os.environ.get("MKL_NUM_THREADS"):
        return
    if not _DEFAULT_THREADS:
        _DEFAULT_THREADS.append(torch.get_num_threads())
    want = cpu_threads_for_load(_DEFAULT_THREADS[0])
    if torch.get_num_threads() != want:
        torch.set_num_threads(want)


def is_file(spec: str | Path) -> bool:
    """Whether ``spec`` names an existing file; False (not an error) for a string no
    file can have as its name, such as a long text or one with a NUL byte, since the
    command line and `generate` take a file name or the text itself in one argument.

    Example:
        >>> is_file("pyproject.toml"), is_file("x" * 5000), is_file("a\\x00b")
        (True, False, False)
    """
    try:
        return Path(spec).is_file()
    except (OSError, ValueError):
        return False


def load_schema(schema: Any) -> tuple[dict | bool, Any]:
    """``(JSON Schema, pydantic class or None)`` from a dict/bool schema, a path to a JSON
    file, or a pydantic model class (its ``model_json_schema()``)."""
    if isinstance(schema, (dict, bool)):
        return schema, None
    if isinstance(schema, (str, Path)):
        path = Path(schema)
        if not is_file(path):
            raise InvalidSchemaError(f"schema file {str(schema)[:200]!r} does not exist (a schema given as a string "
                                     f"is a file name: pass the schema itself as a dict)")
        try:
            return json.loads(path.read_text(encoding="utf-8")), None
        except json.JSONDecodeError as e:
            raise InvalidSchemaError(f"{path} is not JSON: {e}") from None
    if isinstance(schema, type) and hasattr(schema, "model_json_schema"):
        return schema.model_json_schema(), schema
    raise InvalidSchemaError(f"a schema must be a dict, a JSON file path or a pydantic model class, "
                             f"not {type(schema).__name__}")


_COMPILED: dict[tuple[str, str], Any] = {}
COMPILED_CACHE_SIZE = 64     # compiled constraints kept per process (least recently used dropped)


def _compiled(grammar, lm):
    from constrained import compile_grammar

    key = (grammar.content_hash() if hasattr(grammar, "content_hash") else repr(grammar), lm.vocab.content_hash())
    hit = _COMPILED.pop(key, None)
    if hit is None:
        hit = compile_grammar(grammar, lm.vocab)
        while len(_COMPILED) >= COMPILED_CACHE_SIZE:
            _COMPILED.pop(next(iter(_COMPILED)))
    _COMPILED[key] = hit          # most recently used last
    return hit


class _ProgressSource:
    """A logits source that counts the tokens it is fed on a tqdm bar."""

    def __init__(self, source, bar) -> None:
        self.source, self.bar = source, bar

    def logits(self):
        return self.source.logits()

    def extend(self, tokens) -> None:
        self.source.extend(tokens)
        self.bar.update(len(tokens))

    def extend_scored(self, tokens):
        out = self.source.extend_scored(tokens)
        self.bar.update(len(tokens))
        return out

    def truncate(self, length: int) -> None:
        self.bar.update(length - len(self.source.tokens))      # rejected draft tokens do not count
        self.source.truncate(length)

    def __getattr__(self, name: str):
        return getattr(self.source, name)

    def fork(self):   # pragma: no cover - samplers that fork get the bare source
        return self.source.fork()


def _progress(enabled: bool, total: int, desc: str):
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="tok", disable=None if enabled else True, leave=False)


_DRAFTERS: dict[tuple[str, int], Any] = {}


def _speculative(sampler, speculative, lm):
    """``sampler`` made speculative with the drafter ``speculative`` names (drafters are
    kept per process and model, so the suffix index learns from earlier outputs)."""
    from constrained.speculative import SpeculativeSampler, drafter_from_spec

    if not isinstance(speculative, str):
        drafter = speculative
    else:
        key = (speculative, id(lm))
        drafter = _DRAFTERS.get(key)
        if drafter is None:
            drafter = _DRAFTERS[key] = drafter_from_spec(speculative, lm)
    rule = getattr(sampler, "rule", None) if sampler is not None else None
    if sampler is not None and rule is None:
        raise ValueError(f"{type(sampler).__name__} cannot run speculatively: give a token-rule sampler")
    return SpeculativeSampler(drafter, rule)


def default_sampler():
    """What `extract`, `extract_many` and `generate` decode with unless given a sampler:
    greedy, jump-forward, and outputs ended by their shortest completion where the
    budget would run out.

    Example:
        >>> default_sampler().finish_within_budget
        True
    """
    from samplers import AncestralSampler, Greedy

    return AncestralSampler(Greedy(), jump_forward=True, finish_within_budget=True)


def _run(lm, prompt_ids: list[int], grammar, sampler, max_tokens: int, seed: int | None, progress: bool = False,
         speculative=None):
    import torch

    if speculative:
        sampler = _speculative(sampler, speculative, lm)
    sampler = sampler or default_sampler()
    generator = torch.Generator().manual_seed(seed) if seed is not None else None
    constraint = _compiled(grammar, lm).matcher()
    with _progress(progress, max_tokens, "generating") as bar:
        source = lm.session(prompt_ids)
        samples = sampler.run(_ProgressSource(source, bar) if progress else source, constraint, lm.eos_ids,
                              max_tokens=max_tokens, generator=generator)
    return samples[0]


def _finished_text(lm, sample, max_tokens: int) -> str:
    """The sample's text; `GenerationError` if it did not end where the constraint accepts."""
    text = b"".join(lm.vocab.token_bytes[t] for t in sample.tokens).decode("utf-8", "replace")
    if not sample.finished:
        raise GenerationError(f"the constraint was not satisfied within max_tokens={max_tokens} ({sample.stop}); "
                              f"output so far: {text[:200]!r}")
    return text


GROUNDED_VALUES = (False, True, "strings", "all")
"""What ``grounded=`` takes: nothing grounded by default, free strings (``True`` and
``"strings"``), or free strings and numbers (``"all"``)."""


def extraction_grammar(json_schema: Any, text: str | None = None, *, grounded: bool | str = False,
                       **schema_options) -> Grammar:
    """The grammar `extract` decodes with: `Grammar.from_json_schema` with compact
    whitespace, canonical keys and enum strings (jump-forward appends them) and no
    members beyond the declared ones where ``additionalProperties`` is absent and the
    object declares ``properties`` (``additional_properties="declared"``: an object
    that declares none stays a map, so ``{"minProperties": 3}`` can be met), unless
    ``schema_options`` say otherwise.  With ``text``, values are grounded in it where
    ``grounded`` (``True``/``"strings"``: every free string; ``"all"``: every free
    string and number) or their ``x-grounded: true`` annotation says so
    (`constrained.json_schema.grounding`).  Grammars without grounding are kept per
    schema and options (compiled once per process).

    Example:
        >>> extraction_grammar({"type": "object", "properties": {"a": {"type": "integer"}}}).source
        '<json schema>'
        >>> g = extraction_grammar({"type": "string"}, "Ada Lovelace", grounded=True)
        >>> [t.name for t in g.terminals]
        ['GROUNDED']
    """
    schema_options.setdefault("whitespace", "compact")
    schema_options.setdefault("additional_properties", "declared")
    schema_options.setdefault("fixed_strings", "canonical")
    if not (isinstance(grounded, bool) or grounded in ("strings", "all")):
        raise ValueError(f"grounded must be one of {GROUNDED_VALUES}, not {grounded!r}")
    if text is not None and (grounded or _asks_grounding(json_schema)):
        from constrained import Grammar
        from constrained.json_schema.grounding import Grounding

        return Grammar.from_json_schema(json_schema, grounding=Grounding(text, default=bool(grounded),
                                                                         numbers=grounded == "all"),
                                        **schema_options)
    try:
        key = json.dumps([json_schema, schema_options], sort_keys=True)
    except (TypeError, ValueError):           # options that are not JSON (documents=...): not kept
        key = None
    return _ungrounded_grammar(key, json_schema, schema_options)


def _asks_grounding(json_schema: Any) -> bool:
    """Whether some sub-schema says ``"x-grounded": true``."""
    stack = [json_schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if node.get("x-grounded") is True:
                return True
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return False


_GRAMMARS: dict[str, Any] = {}


def _ungrounded_grammar(key: str | None, json_schema: Any, schema_options: dict):
    from constrained import Grammar

    hit = _GRAMMARS.get(key) if key is not None else None
    if hit is None:
        hit = Grammar.from_json_schema(json_schema, **schema_options)
        if key is not None:
            while len(_GRAMMARS) >= COMPILED_CACHE_SIZE:
                _GRAMMARS.pop(next(iter(_GRAMMARS)))
            _GRAMMARS[key] = hit
    return hit


COMPLETE_BLOCKERS = ("minProperties", "maxProperties", "dependentRequired", "dependentSchemas",
                     "dependencies", "patternProperties", "propertyNames", "unevaluatedProperties", "allOf", "anyOf",
                     "oneOf", "not", "if", "then", "else", "$ref", "$dynamicRef", "$recursiveRef", "enum", "const")
"""Keywords of an object schema that `complete_schema` leaves alone (they count, tie or
constrain members, so a member answered ``null`` and left out could change the value's
validity); so is a ``required`` that is not a list of names."""


def complete_schema(json_schema: Any) -> tuple[Any, list[tuple[str, ...]]]:
    """``(schema, asked)``: ``json_schema`` with every optional declared member of its
    objects made required, its value ``null`` or what its schema allows
    (``{"anyOf": [{"type": "null"}, schema]}``), and the paths (member names from the
    root) of those members.  `extract(..., complete=True)` decodes with it: the model
    is asked for every member in schema order (jump-forward writes each key) and
    answers ``null`` where the text does not give one; `drop_unanswered` then leaves
    those members out, so the value validates against ``json_schema``.

    Objects changed: the root and the objects declared inline in ``properties`` (not
    behind ``$ref``, not in arrays), whose ``properties`` is an object and which have
    none of `COMPLETE_BLOCKERS` but a list ``required``.  Not at all: a draft-03 schema
    (``required`` inside properties) or one with a ``$ref`` into ``properties`` (the
    wrapping moves the paths it names).

    Example:
        >>> s, asked = complete_schema({"type": "object", "properties": {"a": {"type": "string"},
        ...                             "b": {"type": "integer"}}, "required": ["b"]})
        >>> s["required"], s["properties"]["a"], asked
        (['b', 'a'], {'anyOf': [{'type': 'null'}, {'type': 'string'}]}, [('a',)])
    """
    if not isinstance(json_schema, dict) or "draft-03" in str(json_schema.get("$schema", "")) \
            or _refs_into_properties(json_schema):
        return json_schema, []
    asked: list[tuple[str, ...]] = []

    def walk(node: Any, path: tuple[str, ...]) -> Any:
        if not isinstance(node, dict) or not isinstance(node.get("properties"), dict):
            return node
        required = node.get("required", [])
        if not isinstance(required, list) or not all(isinstance(r, str) for r in required) \
                or any(k in node for k in COMPLETE_BLOCKERS):
            return node
        out = dict(node)
        props = {}
        for name, sub in node["properties"].items():
            sub = walk(sub, path + (name,))
            if name not in required and sub is not False:
                asked.append(path + (name,))
                sub = {"anyOf": [{"type": "null"}, sub]}
            props[name] = sub
        out["properties"] = props
        out["required"] = list(required) + [n for n in props if n not in required and props[n] is not False]
        return out

    return walk(json_schema, ()), asked


OBJECT_WHERE_DECLARED_BLOCKERS = ("type", "enum", "const", "$ref", "$dynamicRef", "$recursiveRef", "allOf", "anyOf",
                                  "oneOf", "not", "if", "then", "else")


def object_where_declared(json_schema: Any) -> Any:
    """``json_schema`` with ``"type": "object"`` where its root declares ``properties``
    but no type (nor anything else that could make another kind of value wanted or
    the restriction empty: `OBJECT_WHERE_DECLARED_BLOCKERS`).  Such a schema accepts
    any value, but describes an object; extraction restricts it to objects (a sound
    restriction, like ``additional_properties="declared"``): the default model, free to
    choose, answered ``123`` for ``{"properties": {"bar": ..., "baz": ...}}``.

    Example:
        >>> object_where_declared({"properties": {"a": {"type": "string"}}})
        {'properties': {'a': {'type': 'string'}}, 'type': 'object'}
        >>> object_where_declared({"properties": {"a": {}}, "anyOf": [{"type": "string"}, {}]})["anyOf"][0]
        {'type': 'string'}
    """
    if isinstance(json_schema, dict) and isinstance(json_schema.get("properties"), dict) \
            and json_schema["properties"] and not any(k in json_schema for k in OBJECT_WHERE_DECLARED_BLOCKERS):
        return {**json_schema, "type": "object"}
    return json_schema


def decoding_schema(json_schema: Any, complete: bool = False) -> tuple[Any, list[tuple[str, ...]]]:
    """The schema `extract` decodes with (`object_where_declared`, and `complete_schema`
    with ``complete``) and the members asked for.

    Example:
        >>> decoding_schema({"properties": {"a": {"type": "integer"}}})
        ({'properties': {'a': {'type': 'integer'}}, 'type': 'object'}, [])
    """
    decoded = object_where_declared(json_schema)
    return complete_schema(decoded) if complete else (decoded, [])


def _refs_into_properties(node: Any) -> bool:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and "/properties/" in ref:
            return True
        return any(_refs_into_properties(v) for v in node.values())
    if isinstance(node, list):
        return any(_refs_into_properties(v) for v in node)
    return False


def drop_unanswered(value: Any, asked: list[tuple[str, ...]]) -> Any:
    """``value`` without the members at ``asked`` (`complete_schema`) answered ``null``.

    Example:
        >>> drop_unanswered({"a": None, "b": 2, "c": {"d": None}}, [("a",), ("c", "d")])
        {'b': 2, 'c': {}}
    """
    for path in sorted(asked, key=len, reverse=True):
        node = value
        for name in path[:-1]:
            node = node.get(name) if isinstance(node, dict) else None
        if isinstance(node, dict) and path[-1] in node and node[path[-1]] is None:
            del node[path[-1]]
    return value


def extract(schema: Any, text: str, *, model=None, instructions: str | None = None, max_tokens: int = 512,
            sampler=None, seed: int | None = None, progress: bool = False, speculative=None,
            grounded: bool | str = False, complete: bool = False, **schema_options) -> Any:
    """A value extracted from ``text`` that validates against ``schema`` (a dict, a JSON
    file path, or a pydantic model class: then an instance of it).

    ``instructions`` replace the default system prompt (``{schema}`` in them is
    replaced by the schema); ``schema_options`` go to `Grammar.from_json_schema`
    (defaults here: compact whitespace, keys and enum strings in their canonical
    spelling so jump-forward can append them, and no members beyond the declared ones
    where ``additionalProperties`` is absent and ``properties`` are declared — a sound
    restriction that keeps small models from copying schema keywords into the value).  ``progress`` shows a
    token bar on a terminal.  ``speculative`` (a drafter or its name, see
    `constrained.speculative.drafter_from_spec`) decodes speculatively: the same
    output for greedy, the same distribution for sampling rules, fewer forward
    passes.  Where the budget would run out the output is ended by its shortest
    completion (`default_sampler`; not when decoding speculatively); raises
    `GenerationError` when even that does not fit in ``max_tokens``; never returns an
    invalid value.

    ``grounded=True`` (or ``"strings"``): every free string value (not keys,
    ``enum``/``const`` strings, numbers or booleans) is a span of ``text`` (a non-empty
    substring without whitespace at either end, inside one sentence and without the
    period that ends it, unless the value says ``"x-grounded-sentences": false``),
    intersected with the value's own
    schema, so the model copies values instead of inventing them; ``grounded="all"``:
    numbers too, each one a number the text writes (``10.0`` in "radius 10.0", not
    ``1``).  A value annotated ``"x-grounded": false`` in the schema stays free, and
    one annotated ``true`` is grounded even without ``grounded`` (pydantic:
    ``Field(json_schema_extra={"x-grounded": True})``).  Where nothing in the text fits
    a grounded value's schema, a value grounded by default falls back to its schema
    alone, while an ``x-grounded: true`` value raises
    `constrained.json_schema.grounding.GroundingError` before generation (see
    `constrained.json_schema.grounding`).

    ``complete=True``: the model is asked for every declared member, in schema order
    (jump-forward writes each key), and answers a value or ``null``; members answered
    ``null`` are left out of the result (`complete_schema`, `drop_unanswered`).  Greedy
    decoding of a small model otherwise closes objects early (the default model left
    out a quarter of the members the benchmark's texts give).  The cost: a member the
    text does not give is filled where the model does not answer ``null`` — with a span
    of the text where grounded, invented otherwise — so use it where texts are expected
    to give most fields (``benchmarks/extraction_accuracy.py --absent`` measures how
    often an absent member is filled).

    Example (with the default model installed):
        >>> extract("examples/contact.schema.json", "Reach Ada Lovelace at ada@example.org.",
        ...         grounded=True)                                              # doctest: +SKIP
        {'name': 'Ada Lovelace', 'email': 'ada@example.org'}"""
    json_schema, pydantic_class = load_schema(schema)
    lm = _language_model(model)
    decoded, asked = decoding_schema(json_schema, complete)
    grammar = extraction_grammar(decoded, text, grounded=grounded, **schema_options)
    prompt = _extraction_prompt(lm, json_schema, text, instructions, max_tokens)
    output = _finished_text(lm, _run(lm, prompt, grammar, sampler, max_tokens, seed, progress, speculative),
                            max_tokens)
    return _validated(json_schema, pydantic_class, output, asked)


def extract_many(schema: Any, texts: list[str], *, model=None, instructions: str | None = None,
                 max_tokens: int = 512, sampler=None, seed: int | None = None, batch_size: int = 8,
                 progress: bool = False, grounded: bool | str = False, complete: bool = False,
                 **schema_options) -> list[Any]:
    """`extract` for many texts, ``batch_size`` at a time in one forward pass per step
    (`constrained.decoding.decode_batch`; each row has its own matcher).  Returns one
    item per text: the value, or the `GenerationError` that text raised (one text
    whose budget runs out does not lose the others).  ``sampler`` must have
    ``run_batch`` (`samplers.AncestralSampler`); ``progress`` shows a bar of texts.
    ``grounded`` as in `extract` (each text then has its own grammar, a row its own
    matcher; a text whose grounding fails with `GroundingError` gets that error as its
    item); ``complete`` as in `extract`.

    Example (with the default model installed):
        >>> schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
        >>> extract_many(schema, ["I live in Oslo.", "Lyon is lovely."])          # doctest: +SKIP
        [{'city': 'Oslo'}, {'city': 'Lyon'}]
    """
    import torch
    from tqdm import tqdm

    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, not {batch_size}")
    json_schema, pydantic_class = load_schema(schema)
    lm = _language_model(model)
    decoded, asked = decoding_schema(json_schema, complete)
    systems = _extraction_systems(json_schema, instructions)
    per_text = grounded or _asks_grounding(json_schema)
    shared = None if per_text else _compiled(extraction_grammar(decoded, **schema_options), lm)
    sampler = sampler or default_sampler()
    if not hasattr(sampler, "run_batch"):
        raise ValueError(f"{type(sampler).__name__} cannot decode batches (it has no run_batch)")
    generator = torch.Generator().manual_seed(seed) if seed is not None else None
    out: list[Any] = []
    with tqdm(total=len(texts), desc="extracting", unit="text", disable=None if progress else True) as bar:
        for start in range(0, len(texts), batch_size):
            chunk = texts[start:start + batch_size]
            matchers: list[Any] = []
            prompts: dict[int, list[int]] = {}
            for i, t in enumerate(chunk):
                try:
                    matcher: Any = shared.matcher() if shared is not None else _compiled(
                        extraction_grammar(decoded, t, grounded=grounded, **dict(schema_options)), lm).matcher()
                    prompts[i] = _fitting_prompt(lm, t, systems, max_tokens)
                except (GroundingError, ContextLengthError) as e:
                    matcher = e
                matchers.append(matcher)
            rows = list(prompts)
            results: list[Any] = list(matchers)
            if rows:
                batch = lm.batch_session([prompts[i] for i in rows])
                samples = sampler.run_batch(batch, [matchers[i] for i in rows], lm.eos_ids,
                                            max_tokens=max_tokens, generator=generator)
                for i, sample in zip(rows, samples):
                    try:
                        results[i] = _validated(json_schema, pydantic_class, _finished_text(lm, sample, max_tokens),
                                                asked)
                    except GenerationError as e:
                        results[i] = e
            out.extend(results)
            bar.update(len(chunk))
    return out


def field_list(json_schema: Any, max_description: int = 120, levels: int | None = None) -> str:
    """The default prompt's list of the root object's declared members, one a line with
    its type and description, an object member's own declared members indented under it
    (``""`` where the root declares none; ``levels``: how many levels of members, four
    at most): the schema's JSON alone leaves a small model unsure which members to
    write (measured in ``benchmarks/extraction_accuracy.py``: more members given, fewer
    copied from another field's sentence).

    Example:
        >>> print(field_list({"properties": {"name": {"type": "string", "description": "Full name"},
        ...                                  "age": {"type": ["integer", "null"]}, "x": {},
        ...                                  "home": {"type": "object", "properties": {"city": {"type": "string"}}}}}))
        Fields:
        - "name" (string): Full name
        - "age" (integer/null)
        - "x"
        - "home" (object)
          - "city" (string)
    """
    lines = _member_lines(json_schema, max_description, min(levels or _LISTED_DEPTH, _LISTED_DEPTH))
    return "\n".join(["Fields:", *lines]) if lines else ""


_LISTED_DEPTH = 4
"""How deep `field_list` lists the members of object members."""


def _member_lines(json_schema: Any, max_description: int, levels: int, depth: int = 0) -> list[str]:
    """`field_list`'s lines for the members ``depth`` levels down, and ``levels`` in all."""
    props = json_schema.get("properties") if isinstance(json_schema, dict) else None
    if not isinstance(props, dict) or depth >= levels:
        return []
    lines = []
    for name, sub in props.items():
        kind = sub.get("type", "") if isinstance(sub, dict) else ""
        kind = "/".join(k for k in kind if isinstance(k, str)) if isinstance(kind, list) else kind
        about = sub.get("description", "") if isinstance(sub, dict) else ""
        about = " ".join(about.split())[:max_description] if isinstance(about, str) else ""
        lines.append("  " * depth + f"- {json.dumps(name, ensure_ascii=False)}"
                     + (f" ({kind})" if isinstance(kind, str) and kind else "") + (f": {about}" if about else ""))
        lines += _member_lines(sub, max_description, levels, depth + 1)
    return lines


_NESTING_KEYWORDS = frozenset({"items", "prefixItems", "additionalItems", "contains", "unevaluatedItems", "extends",
                               "disallow"})
_UNLISTED_IN_OBJECT = frozenset(COMPLETE_BLOCKERS) | _NESTING_KEYWORDS
"""Keywords of an object whose meaning a field list cannot say: those that count, tie or
choose between members (`COMPLETE_BLOCKERS`) and those that nest values other than
declared members (keywords JSON Schema does not know are annotations)."""
_UNLISTED_IN_SCALAR = _UNLISTED_IN_OBJECT - {"enum", "const"} | {"properties", "additionalProperties"}
_SCALAR_TYPES = frozenset({"string", "integer", "number", "boolean", "null"})


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def field_list_describes(json_schema: Any, _depth: int = 0) -> bool:
    """Whether `field_list` says all a model needs of ``json_schema``: an object of
    declared members, each a scalar (a type among string, integer, number, boolean and
    null, or scalar ``enum``/``const`` values) or an object of the same kind, with no
    keyword that nests other values, ties members together or chooses between schemas
    (`_UNLISTED_IN_OBJECT`, `_UNLISTED_IN_SCALAR`, a schema-valued
    ``additionalProperties``).  `extract`'s default prompt then gives the list without
    the schema's JSON (`FIELD_LIST_INSTRUCTIONS`); the grammar still enforces every
    keyword.  The schema's JSON made the default model invent more
    (``benchmarks/extraction_accuracy.py``; RESULTS).

    Example:
        >>> field_list_describes({"type": "object", "properties": {"name": {"type": "string"},
        ...                       "home": {"type": "object", "properties": {"city": {"type": "string"}}}}})
        True
        >>> field_list_describes({"properties": {"tags": {"type": "array", "items": {"type": "string"}}}})
        False
    """
    if not isinstance(json_schema, dict) or _UNLISTED_IN_OBJECT & set(json_schema) or _depth >= _LISTED_DEPTH:
        return False
    props = json_schema.get("properties")
    if not isinstance(props, dict) or not props or json_schema.get("type", "object") != "object" \
            or not isinstance(json_schema.get("additionalProperties", False), bool):
        return False
    for sub in props.values():
        if isinstance(sub, dict) and sub.get("type") == "object":
            if not field_list_describes(sub, _depth + 1):
                return False
            continue
        if not isinstance(sub, dict) or _UNLISTED_IN_SCALAR & set(sub):
            return False
        kind = sub.get("type")
        kinds = kind if isinstance(kind, list) else [kind] if kind is not None else []
        if not all(isinstance(k, str) and k in _SCALAR_TYPES for k in kinds):
            return False
        if not kinds and "enum" not in sub and "const" not in sub:
            return False
        enum = sub.get("enum", [])
        if not isinstance(enum, list) or not all(_scalar(v) for v in enum) or not _scalar(sub.get("const")):
            return False
    return True


def _extraction_system(json_schema, instructions: str | None) -> str:
    """`extract`'s system prompt for ``json_schema`` where the model's context has room
    (the same for every text): the first of `_extraction_systems`."""
    return _extraction_systems(json_schema, instructions)[0]


def _extraction_systems(json_schema, instructions: str | None) -> list[str]:
    """`extract`'s system prompts for ``json_schema``, the most detailed first: the
    default (the field list, after the schema's JSON unless `field_list_describes`),
    then the field list without the schema's JSON, the root's members only, and the
    bare instruction.  `_fitting_prompt` takes the first that fits the model's context
    with the text and the budget (the grammar enforces the schema whatever the prompt
    says).  Given ``instructions`` (``{schema}`` in them replaced) are the only one."""
    shown = json.dumps(_without_grounding_annotations(json_schema))
    if instructions is not None:
        return [(instructions or DEFAULT_INSTRUCTIONS).replace("{schema}", shown)]
    fields = field_list(json_schema)
    listed = [FIELD_LIST_INSTRUCTIONS + "\n" + f if f else FIELD_LIST_INSTRUCTIONS
              for f in (fields, field_list(json_schema, levels=1), "")]
    if field_list_describes(json_schema):
        out = listed
    else:
        head = DEFAULT_INSTRUCTIONS.replace("{schema}", shown)
        out = [head + "\n" + fields if fields else head, *listed]
    return list(dict.fromkeys(out))


def _without_grounding_annotations(node: Any) -> Any:
    """``node`` without its ``x-grounded*`` annotations (at any depth): directives to the
    engine, not part of what the model is asked for (``x-grounded-text`` would repeat a
    part of the input in the prompt)."""
    if isinstance(node, dict):
        return {k: _without_grounding_annotations(v) for k, v in node.items()
                if not (isinstance(k, str) and k.startswith("x-grounded"))}
    if isinstance(node, list):
        return [_without_grounding_annotations(v) for v in node]
    return node


def _fitting_prompt(lm, text: str | list[dict], systems: Sequence[str | None], max_tokens: int) -> list[int]:
    """The prompt ids of ``text`` under the first of ``systems`` with which the prompt
    and ``max_tokens`` fit in ``lm.context_length``; `ContextLengthError` if none does
    (a model decoding past its context degrades, and slowly: never silently)."""
    limit = getattr(lm, "context_length", None)
    ids: list[int] = []
    for system in systems:
        ids = lm.prompt_ids(text, instructions=system)
        if limit is None or len(ids) + max_tokens <= limit:
            return ids
    shortest = " even with the schema left out of the system prompt" if len(systems) > 1 else ""
    raise ContextLengthError(f"the prompt takes {len(ids)} tokens{shortest}; with max_tokens={max_tokens} that is "
                             f"more than the model's context of {limit} tokens: shorten the text or lower max_tokens")


def _extraction_prompt(lm, json_schema, text: str, instructions: str | None, max_tokens: int) -> list[int]:
    return _fitting_prompt(lm, text, _extraction_systems(json_schema, instructions), max_tokens)


def _validated(json_schema, pydantic_class, output: str, asked=()) -> Any:
    """The parsed ``output`` (members at ``asked`` answered ``null`` left out,
    `drop_unanswered`), validated against the schema (the last line of defence: the
    grammar already guarantees validity); `GenerationError` if it does not."""
    import jsonschema

    value = drop_unanswered(json.loads(output), asked)
    cls = jsonschema.validators.validator_for(json_schema, default=jsonschema.Draft202012Validator) \
        if isinstance(json_schema, dict) else jsonschema.Draft202012Validator
    errors = list(cls(json_schema, format_checker=cls.FORMAT_CHECKER).iter_errors(value))
    if errors:
        raise GenerationError(f"the output {output[:200]!r} does not validate: {errors[0].message}")
    return pydantic_class.model_validate(value) if pydantic_class is not None else value


def generate(prompt: str, *, grammar: Any = None, regex: str | None = None, json_schema: Any = None,
             sampler=None, model=None, instructions: str | None = None, max_tokens: int = 256,
             seed: int | None = None, progress: bool = False, speculative=None, tools: list | None = None,
             tool_choice: Any = "auto", tool_format: str = "hermes", **tool_options: Any) -> str | ToolCallResult:
    """Text for ``prompt`` that follows exactly one of ``grammar`` (a `Grammar`, lark text or
    a grammar file path), ``regex`` or ``json_schema``.  ``progress`` shows a token bar on
    a terminal; ``speculative`` as in `extract`.  Raises `GenerationError` if the budget
    runs out before the constraint is satisfied.

    With ``tools`` (OpenAI-style function tools) instead: a `constrained.tools.ToolCallResult`
    (``.tool_calls`` parsed, arguments validated; ``.content`` the free text) under
    ``tool_choice`` ("auto", "required", "none" or ``{"name": ...}``) in ``tool_format``
    ("hermes", "llama3", "mistral"); ``tool_options``: ``parallel_tool_calls``, ``reasoning``
    and schema options (`constrained.tools.generate_tool_calls`)."""
    from constrained import Grammar

    if tools is not None:
        if any(x is not None for x in (grammar, regex, json_schema)) or speculative:
            raise ValueError("tools= goes alone: not with grammar=, regex=, json_schema= or speculative=")
        from constrained.tools import generate_tool_calls

        return generate_tool_calls(prompt, tools, tool_choice=tool_choice, format=tool_format, model=model,
                                   instructions=instructions, sampler=sampler, max_tokens=max_tokens, seed=seed,
                                   progress=progress, **tool_options)
    given = [x is not None for x in (grammar, regex, json_schema)]
    if sum(given) != 1:
        raise ValueError("give exactly one of grammar=, regex=, json_schema=")
    if regex is not None:
        g = Grammar.from_regex(regex)
    elif json_schema is not None:
        g = Grammar.from_json_schema(load_schema(json_schema)[0], fixed_strings="canonical")
    elif isinstance(grammar, Grammar):
        g = grammar
    elif isinstance(grammar, (str, Path)) and Path(grammar).suffix in (".lark", ".gbnf", ".regex") \
            and is_file(grammar):
        g = Grammar.from_file(grammar)
    else:
        g = Grammar.from_lark(str(grammar))
    lm = _language_model(model)
    return _finished_text(lm, _run(lm, _fitting_prompt(lm, prompt, [instructions], max_tokens), g, sampler,
                                   max_tokens, seed, progress, speculative), max_tokens)
