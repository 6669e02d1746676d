"""Probe chats for the mask tests: every text is built from marker words that occur in no template.

Words owned by the assistant (``Zqans``, ``Zqrsn``, ``Zqarg``) must be learned wherever the
template renders them; words of system, user and tool turns (``Zqsys``, ``Zqusr``, ``Zqtool``)
never.
"""
from __future__ import annotations

import json

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the weather for a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name"}},
                       "required": ["city"]},
    },
}
FOREIGN = ("Zqsys", "Zqusr", "Zqtool")


def _call(i: int, city: str) -> dict:
    return {"id": f"call{i}abcd", "type": "function",
            "function": {"name": "get_weather", "arguments": {"city": city}}}


PLAIN = [
    {"role": "system", "content": "Zqsys be brief."},
    {"role": "user", "content": "Zqusr first question?"},
    {"role": "assistant", "content": "Zqans first answer."},
    {"role": "user", "content": "Zqusr second question?"},
    {"role": "assistant", "content": "Zqans second answer."},
]
TOOLS = [
    {"role": "user", "content": "Zqusr weather in two cities?"},
    {"role": "assistant", "content": "", "tool_calls": [_call(1, "Zqarg north")]},
    {"role": "tool", "tool_call_id": "call1abcd", "name": "get_weather", "content": "Zqtool rain"},
    {"role": "assistant", "content": "Zqans checking the other.", "tool_calls": [_call(2, "Zqarg south")]},
    {"role": "tool", "tool_call_id": "call2abcd", "name": "get_weather", "content": "Zqtool sun"},
    {"role": "assistant", "content": "Zqans rain north, sun south."},
]
REASONING = [
    [
        {"role": "user", "content": "Zqusr first puzzle?"},
        {"role": "assistant", "content": "<think>Zqrsn inline one.</think>Zqans first solved."},
        {"role": "user", "content": "Zqusr second puzzle?"},
        {"role": "assistant", "content": "Zqans second solved.", "reasoning_content": "Zqrsn field two."},
    ],
    [
        {"role": "user", "content": "Zqusr first puzzle?"},
        {"role": "assistant", "content": "Zqans first solved.", "reasoning_content": "Zqrsn field one."},
        {"role": "user", "content": "Zqusr second puzzle?"},
        {"role": "assistant", "content": "<think>\nZqrsn inline two.\n</think>\n\nZqans second solved."},
    ],
]
KINDS = {
    "plain": dict(chats=[PLAIN], tools=None),
    "tools": dict(chats=[TOOLS], tools=[WEATHER]),
    "reasoning": dict(chats=REASONING, tools=None),
}


def owned_pieces(message: dict) -> dict:
    """{"content": str, "reasoning": [str], "args": [str]} a model must learn from one message."""
    content = message.get("content") or ""
    reasoning = []
    if "</think>" in content:
        head, content = content.split("</think>", 1)
        reasoning.append(head.replace("<think>", "").strip())
    if message.get("reasoning_content"):
        reasoning.append(message["reasoning_content"].strip())
    args = []
    for call in message.get("tool_calls", []):
        a = call["function"]["arguments"]
        args.append((json.loads(a) if isinstance(a, str) else a)["city"])
    return {"content": content.strip(), "reasoning": reasoning, "args": args}
