"""Probe chats of each kind -- plain, tool-calling, reasoning -- whose texts are marker words.

They are what the mask engine checks a template's fast path against, and what
``chatdata templates check`` shows. Words owned by the assistant start with ``Wqans`` (content),
``Wqrsn`` (reasoning) and ``Wqarg`` (tool-call arguments); words of other roles with ``Wqsys``,
``Wqusr`` and ``Wqtool``.

Example:
    >>> [m["role"] for m in probe_chats()["tools"][0]]
    ['system', 'user', 'assistant', 'tool', 'assistant', 'tool', 'assistant']
"""
from __future__ import annotations

from typing import Any

PROBE_TOOL = {
    "type": "function",
    "function": {"name": "lookup", "description": "Look a word up.",
                 "parameters": {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]}},
}
KINDS = ("plain", "tools", "reasoning")


def _call(i: int, name: str, value: str) -> dict:
    return {"id": f"call{i}wq", "type": "function", "function": {"name": name, "arguments": {"word": value}}}


def probe_chats(tool_name: str = "lookup") -> dict[str, list[list[dict[str, Any]]]]:
    """``{kind: [chat, ...]}`` for the kinds plain, tools and reasoning (fresh copies).

    Example:
        >>> probe_chats()["plain"][0][2]
        {'role': 'assistant', 'content': 'Wqans one.'}
    """
    plain = [
        {"role": "system", "content": "Wqsys rules."},
        {"role": "user", "content": "Wqusr one?"},
        {"role": "assistant", "content": "Wqans one."},
        {"role": "user", "content": "Wqusr two?"},
        {"role": "assistant", "content": "Wqans two."},
    ]
    tools = [
        {"role": "system", "content": "Wqsys rules."},
        {"role": "user", "content": "Wqusr look up?"},
        {"role": "assistant", "content": "", "tool_calls": [_call(1, tool_name, "Wqarg first")]},
        {"role": "tool", "tool_call_id": "call1wq", "name": tool_name, "content": "Wqtool found"},
        {"role": "assistant", "content": "Wqans one more.", "tool_calls": [_call(2, tool_name, "Wqarg second")]},
        {"role": "tool", "tool_call_id": "call2wq", "name": tool_name, "content": "Wqtool found too"},
        {"role": "assistant", "content": "Wqans both found."},
    ]
    reasoning = [
        [
            {"role": "user", "content": "Wqusr one?"},
            {"role": "assistant", "content": "<think>Wqrsn inline.</think>Wqans one.", },
            {"role": "user", "content": "Wqusr two?"},
            {"role": "assistant", "content": "Wqans two.", "reasoning_content": "Wqrsn field."},
        ],
        [
            {"role": "user", "content": "Wqusr one?"},
            {"role": "assistant", "content": "Wqans one.", "reasoning_content": "Wqrsn field."},
            {"role": "user", "content": "Wqusr two?"},
            {"role": "assistant", "content": "<think>\nWqrsn inline.\n</think>\n\nWqans two."},
        ],
    ]
    return {"plain": [plain], "tools": [tools], "reasoning": reasoning}


def tool_name_of(tools: Any) -> str:
    """The first tool's name in ``tools`` (JSON schemas), else ``lookup``.

    Example:
        >>> tool_name_of([{"type": "function", "function": {"name": "get_weather"}}])
        'get_weather'
    """
    if tools and isinstance(tools[0], dict):
        fn = tools[0].get("function", tools[0])
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            return fn["name"]
    return "lookup"
