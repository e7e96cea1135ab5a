"""OpenAI-style tool calls: tools -> the model family's call format as a grammar, and back.

`tools_grammar(tools, format=..., tool_choice=...)` (also `Grammar.from_tools`) builds the
structural tag of a call format and compiles it (`constrained.grammar.structural_tag`):

* ``"hermes"`` (Hermes, Qwen 2.5/3): ``<tool_call>\\n{"name": "NAME", "arguments": ARGS}\\n</tool_call>``,
  free text around the calls;
* ``"llama3"`` (Llama 3.1+ JSON calls): ``{"name": "NAME", "parameters": ARGS}``, calls
  separated by ``; ``;
* ``"mistral"``: ``[TOOL_CALLS][{"name": "NAME", "arguments": ARGS}, ...]`` (``[TOOL_CALLS]``
  as text: a tokenizer that has it as a special token gives it no bytes, so it cannot be
  constrained as text).

``tool_choice``: ``"auto"`` (free text, and wherever the format's trigger appears a call to
one of the tools), ``"required"`` (only calls, at least one), ``"none"`` (free text that
never starts a call) or one tool by name (``{"type": "function", "function": {"name": ...}}``
or ``{"name": ...}``: exactly one call to it).  ``parallel_tool_calls=False`` allows at most
one call.  ``reasoning=True`` puts an optional free ``<think>...</think>`` section first
(``"required"``: it must be there).  Each call's arguments are a JSON value of that tool's
``parameters`` schema, value checks included, scoped to the call.

`parse_tool_calls(text, tools, format=...)` reads an output back into `ToolCall`s whose
arguments are validated with ``jsonschema``; `generate_tool_calls` (behind
``constrained.generate(prompt, tools=...)``) prompts the model with the tools, decodes under
the grammar and parses.

Example:
    >>> tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    ...     "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
    >>> g = tools_grammar(tools, format="hermes", tool_choice="required")
    >>> out = parse_tool_calls('<tool_call>\\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\\n</tool_call>', tools)
    >>> out.tool_calls[0].name, out.tool_calls[0].arguments
    ('get_weather', {'city': 'Oslo'})
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from constrained.errors import GenerationError, StructuralTagError
from constrained.grammar.ir import Grammar

FORMATS = ("hermes", "llama3", "mistral")
THINK_BEGIN, THINK_END = "<think>", "</think>"
DEFAULT_SCHEMA_OPTIONS = {"fixed_strings": "canonical", "additional_properties": False}


@dataclass(frozen=True)
class Tool:
    """One function a model may call: its name, description and JSON Schema of arguments."""

    name: str
    parameters: Any = field(default_factory=lambda: {"type": "object"})
    description: str = ""


@dataclass
class ToolCall:
    """A parsed call: the tool's name and its arguments (validated against its schema).

    Example:
        >>> ToolCall("f", {"x": 1}).to_openai()["function"]
        {'name': 'f', 'arguments': '{"x": 1}'}
    """

    name: str
    arguments: Any

    def to_openai(self, call_id: str | None = None) -> dict:
        """The OpenAI ``tool_calls`` entry (arguments as a JSON string)."""
        out = {"type": "function", "function": {"name": self.name, "arguments": json.dumps(self.arguments)}}
        if call_id is not None:
            out["id"] = call_id
        return out


@dataclass
class ToolCallResult:
    """What a tool-calling generation produced: the free text (calls removed), the calls,
    the ``<think>`` section's text if any, and the whole output."""

    content: str
    tool_calls: list[ToolCall]
    reasoning: str | None
    text: str


def normalise_tools(tools: Sequence[Mapping]) -> list[Tool]:
    """`Tool`s from OpenAI's ``{"type": "function", "function": {...}}`` entries or bare
    ``{"name", "parameters"}`` ones; `StructuralTagError` (with the path) if malformed.

    Example:
        >>> normalise_tools([{"name": "f"}])[0].parameters
        {'type': 'object'}
    """
    if isinstance(tools, Mapping) or not isinstance(tools, Sequence) or isinstance(tools, str):
        raise StructuralTagError(f"tools must be a list, got {type(tools).__name__}", path="tools")
    out: list[Tool] = []
    for i, t in enumerate(tools):
        path = f"tools[{i}]"
        if not isinstance(t, Mapping):
            raise StructuralTagError(f"a tool must be an object, got {type(t).__name__}", path=path)
        if t.get("type", "function") != "function":
            raise StructuralTagError(f"only function tools are supported, not {t.get('type')!r}",
                                     path=f"{path}.type")
        if "function" in t:
            t, path = t["function"], f"{path}.function"
            if not isinstance(t, Mapping):
                raise StructuralTagError("'function' must be an object", path=path)
        name = t.get("name")
        if not isinstance(name, str) or not name:
            raise StructuralTagError("a tool needs a non-empty string 'name'", path=f"{path}.name")
        params = t.get("parameters", {"type": "object"})
        if params is None:
            params = {"type": "object"}
        if not isinstance(params, (dict, bool)):
            raise StructuralTagError("'parameters' must be a JSON Schema object", path=f"{path}.parameters")
        out.append(Tool(name, params, str(t.get("description") or "")))
    names = [t.name for t in out]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise StructuralTagError(f"tool names must be unique: {', '.join(dup)}", path="tools")
    if not out:
        raise StructuralTagError("tools is empty", path="tools")
    return out


def _chosen(tools: list[Tool], tool_choice: Any) -> tuple[str, list[Tool]]:
    """(mode, tools) for ``tool_choice``: mode auto / required / none / named."""
    if tool_choice in ("auto", "required", "none"):
        return tool_choice, tools
    if isinstance(tool_choice, Mapping):
        fn = tool_choice.get("function", tool_choice)
        name = fn.get("name") if isinstance(fn, Mapping) else None
        match = [t for t in tools if t.name == name]
        if not match:
            raise StructuralTagError(f"tool_choice names {name!r}, which is not one of the tools "
                                     f"({', '.join(t.name for t in tools)})", path="tool_choice")
        return "named", match
    raise StructuralTagError(f"tool_choice must be 'auto', 'required', 'none' or {{'name': ...}}, "
                             f"not {tool_choice!r}", path="tool_choice")


def _json_tag(begin: str, schema: Any, end: str) -> dict:
    return {"type": "tag", "begin": begin, "content": {"type": "json_schema", "json_schema": schema}, "end": end}


def _call_tags(format: str, tools: list[Tool]) -> tuple[list[dict], str, str]:
    """(one tag per tool, the trigger, the separator between parallel calls)."""
    if format == "hermes":
        return ([_json_tag('<tool_call>\n{"name": ' + json.dumps(t.name) + ', "arguments": ', t.parameters,
                           "}\n</tool_call>") for t in tools], "<tool_call>", "\n")
    if format == "llama3":
        return ([_json_tag('{"name": ' + json.dumps(t.name) + ', "parameters": ', t.parameters, "}")
                 for t in tools], '{"name": ', "; ")
    if format == "mistral":
        return ([_json_tag('{"name": ' + json.dumps(t.name) + ', "arguments": ', t.parameters, "}")
                 for t in tools], "[TOOL_CALLS]", ", ")
    raise StructuralTagError(f"unknown tool-call format {format!r} (one of {', '.join(FORMATS)})", path="format")


def tools_structural_tag(tools: Sequence[Mapping], *, format: str = "hermes", tool_choice: Any = "auto",
                         parallel_tool_calls: bool = True, reasoning: bool | str = False) -> dict:
    """The structural tag (XGrammar's format tree) of ``tools`` in ``format`` under
    ``tool_choice`` (see the module docstring); `tools_grammar` compiles it.

    Example:
        >>> st = tools_structural_tag([{"name": "f"}], format="llama3")
        >>> st["format"]["type"], st["format"]["triggers"]
        ('triggered_tags', ['{"name": '])
    """
    mode, chosen = _chosen(normalise_tools(tools), tool_choice)
    tags, trigger, sep = _call_tags(format, chosen)
    single = not parallel_tool_calls or mode == "named"
    if format == "mistral":
        calls = {"type": "tag", "begin": "[TOOL_CALLS][", "end": "]",
                 "content": {"type": "tags_with_separator", "tags": tags, "separator": sep,
                             "at_least_one": True, "stop_after_first": single}}
        if mode == "none":
            body: dict = {"type": "any_text", "excludes": [trigger]}
        elif mode == "auto":
            body = {"type": "triggered_tags", "triggers": [trigger], "tags": [calls], "stop_after_first": True}
        else:
            body = calls
    elif mode == "none":
        body = {"type": "any_text", "excludes": [trigger]}
    elif mode == "auto":
        body = {"type": "triggered_tags", "triggers": [trigger], "tags": tags, "stop_after_first": single}
    else:
        body = {"type": "tags_with_separator", "tags": tags, "separator": sep, "at_least_one": True,
                "stop_after_first": single}
    if reasoning:
        think = {"type": "sequence", "elements": [
            {"type": "tag", "begin": THINK_BEGIN, "content": {"type": "any_text"}, "end": THINK_END},
            {"type": "regex", "pattern": "[ \\t\\n]*"}]}
        if reasoning != "required":
            think = {"type": "or", "elements": [think, {"type": "const_string", "value": ""}]}
        body = {"type": "sequence", "elements": [think, body]}
    return {"type": "structural_tag", "format": body}


def tools_grammar(tools: Sequence[Mapping], *, format: str = "hermes", tool_choice: Any = "auto",
                  parallel_tool_calls: bool = True, reasoning: bool | str = False, **schema_options: Any) -> Grammar:
    """The grammar of tool-calling outputs (see the module docstring).  ``schema_options`` go to
    `Grammar.from_json_schema` for every tool's ``parameters`` (defaults here: canonical key
    spelling, no members beyond the declared ones where ``additionalProperties`` is absent —
    sound restrictions that keep small models from inventing arguments).

    Example:
        >>> g = tools_grammar([{"name": "f", "parameters": {"type": "object"}}], tool_choice="none")
        >>> g.checks is None
        True
    """
    from constrained.grammar.structural_tag import grammar_from_structural_tag

    options = {**DEFAULT_SCHEMA_OPTIONS, **schema_options}
    return grammar_from_structural_tag(tools_structural_tag(tools, format=format, tool_choice=tool_choice,
                                                            parallel_tool_calls=parallel_tool_calls,
                                                            reasoning=reasoning), **options)


def parse_tool_calls(text: str, tools: Sequence[Mapping], *, format: str = "hermes") -> ToolCallResult:
    """The calls in ``text`` (an output of `tools_grammar`'s language) with arguments parsed and
    validated against their tool's schema; `GenerationError` if a call is malformed, names an
    unknown tool or has invalid arguments.

    Example:
        >>> r = parse_tool_calls('Sure. {"name": "f", "parameters": {}}', [{"name": "f"}], format="llama3")
        >>> r.content, [c.name for c in r.tool_calls]
        ('Sure.', ['f'])
    """
    by_name = {t.name: t for t in normalise_tools(tools)}
    reasoning = None
    rest = text
    stripped = rest.lstrip()
    if stripped.startswith(THINK_BEGIN) and THINK_END in stripped:
        head, _, rest = stripped[len(THINK_BEGIN):].partition(THINK_END)
        reasoning = head
    _, trigger, _ = _call_tags(format, [])
    decoder = json.JSONDecoder()
    calls: list[ToolCall] = []
    content: list[str] = []
    pos = 0
    while True:
        at = rest.find(trigger, pos)
        if at < 0:
            content.append(rest[pos:])
            break
        content.append(rest[pos:at])
        i = at + len(trigger)
        try:
            if format == "hermes":
                value, i = decoder.raw_decode(rest, i + 1 if rest.startswith("\n", i) else i)
                objects = [value]
                end = rest.find("</tool_call>", i)
                if end < 0:
                    raise ValueError("no </tool_call>")
                i = end + len("</tool_call>")
            elif format == "llama3":
                value, i = decoder.raw_decode(rest, at)
                objects = [value]
            else:
                value, i = decoder.raw_decode(rest, i)
                objects = value if isinstance(value, list) else [value]
        except ValueError as e:
            raise GenerationError(f"a tool call at offset {at} does not parse: {e}; output {text[:200]!r}") from None
        for obj in objects:
            calls.append(_checked_call(obj, by_name, format, text))
        pos = i
        if format == "llama3" and rest.startswith("; ", pos) and rest.startswith(trigger, pos + 2):
            pos += 2
    return ToolCallResult(content="".join(content).strip(), tool_calls=calls, reasoning=reasoning, text=text)


def _checked_call(obj: Any, by_name: dict[str, Tool], format: str, text: str) -> ToolCall:
    import jsonschema

    key = "parameters" if format == "llama3" else "arguments"
    if not isinstance(obj, dict) or "name" not in obj or key not in obj:
        raise GenerationError(f"a tool call must be an object with 'name' and {key!r}: {obj!r}")
    tool = by_name.get(obj["name"])
    if tool is None:
        raise GenerationError(f"the output calls an unknown tool {obj['name']!r}; output {text[:200]!r}")
    schema = tool.parameters
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator) \
        if isinstance(schema, dict) else jsonschema.Draft202012Validator
    errors = list(cls(schema, format_checker=cls.FORMAT_CHECKER).iter_errors(obj[key]))
    if errors:
        raise GenerationError(f"the arguments of {tool.name!r} do not validate: {errors[0].message}")
    return ToolCall(tool.name, obj[key])


TOOLS_INSTRUCTIONS = {
    "hermes": ("You are a function calling AI model. You may call one or more functions to assist with the user "
               "query. Here are the available tools: <tools>{tools}</tools>\nFor each function call, return a json "
               "object with the function name and arguments within <tool_call></tool_call> XML tags:\n"
               "<tool_call>\n{{\"name\": <function-name>, \"arguments\": <args-json-object>}}\n</tool_call>"),
    "llama3": ("You have access to the following functions: {tools}\nTo call a function, respond with JSON of the "
               "form {{\"name\": function name, \"parameters\": dictionary of argument name and its value}}."),
    "mistral": ("You have access to these tools: {tools}\nTo call tools, answer with [TOOL_CALLS] followed by a "
                "JSON list of {{\"name\": ..., \"arguments\": ...}} objects."),
}


def tools_instructions(tools: Sequence[Mapping], format: str = "hermes") -> str:
    """A system prompt that shows the model ``tools`` and the call format.

    Example:
        >>> "<tools>" in tools_instructions([{"name": "f"}])
        True
    """
    listed = json.dumps([{"type": "function", "function": {"name": t.name, "description": t.description,
                                                           "parameters": t.parameters}}
                         for t in normalise_tools(tools)])
    if format not in TOOLS_INSTRUCTIONS:
        _call_tags(format, [])
    return TOOLS_INSTRUCTIONS[format].format(tools=listed)


def generate_tool_calls(prompt: str, tools: Sequence[Mapping], *, tool_choice: Any = "auto", format: str = "hermes",
                        parallel_tool_calls: bool = True, reasoning: bool | str = False, model: Any = None,
                        instructions: str | None = None, sampler: Any = None, max_tokens: int = 256,
                        seed: int | None = None, progress: bool = False, **schema_options: Any) -> ToolCallResult:
    """``constrained.generate(prompt, tools=...)``: the model answers ``prompt`` under
    `tools_grammar` and the output is parsed (`parse_tool_calls`); ``instructions`` replace the
    tools system prompt (`tools_instructions`).  `GenerationError` if the budget runs out before
    the output is complete.

    Example (with the default model installed):
        >>> tools = [{"name": "get_weather", "parameters": {"type": "object",
        ...           "properties": {"city": {"type": "string"}}, "required": ["city"]}}]
        >>> generate_tool_calls("Weather in Oslo?", tools, tool_choice="required").tool_calls   # doctest: +SKIP
        [ToolCall(name='get_weather', arguments={'city': 'Oslo'})]
    """
    from constrained import app

    grammar = tools_grammar(tools, format=format, tool_choice=tool_choice, parallel_tool_calls=parallel_tool_calls,
                            reasoning=reasoning, **schema_options)
    lm = app._language_model(model)
    system = instructions if instructions is not None else tools_instructions(tools, format)
    sample = app._run(lm, app._fitting_prompt(lm, prompt, [system], max_tokens), grammar, sampler, max_tokens, seed,
                      progress)
    return parse_tool_calls(app._finished_text(lm, sample, max_tokens), tools, format=format)
