"""Tool calling with the default model: two OpenAI-style tools, a call whose arguments validate.

The output follows the Hermes/Qwen format (``<tool_call>{"name": ..., "arguments": ...}</tool_call>``)
token by token: the name is one of the tools, the arguments a value of that tool's schema.

    python examples/tool_call.py ["What time is it in Tokyo?"]
"""

from __future__ import annotations

import sys

import constrained

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "The current weather in a city",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "get_time", "description": "The current local time in an IANA time zone",
        "parameters": {"type": "object", "properties": {"timezone": {"type": "string"}}, "required": ["timezone"]}}},
]


def main() -> None:
    prompt = sys.argv[1] if len(sys.argv) > 1 else "What's the weather like in Paris right now?"
    # "required": at least one call and nothing else; "auto" lets the model answer in text instead
    result = constrained.generate(prompt, tools=TOOLS, tool_choice="required", parallel_tool_calls=False,
                                  max_tokens=96)
    print("output:", result.text)
    print("tool calls:", [(c.name, c.arguments) for c in result.tool_calls])
    # a named tool: exactly one call to it
    named = constrained.generate("And the time there?", tools=TOOLS, tool_choice={"name": "get_time"},
                                 max_tokens=64)
    print("named call:", [(c.name, c.arguments) for c in named.tool_calls])


if __name__ == "__main__":
    main()
