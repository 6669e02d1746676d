"""How much text a request makes the gateway render and encode: what decides whether that
work runs on the event loop or in a worker thread (``create_app(offload_chars=...)``), and
whether new messages can fit the backend's context at all.

:func:`rendered_chars` counts what a template writes of a message: its content, its reasoning,
its tool calls (names and arguments) and its ``name`` / ``tool_call_id``; :func:`text_chars`
counts the strings of any JSON value (tool schemas). :func:`verbatim_chars` counts only the text
every template writes whole (a lower bound, for the context check).

Example:
    >>> call = {"id": "c1", "type": "function", "function": {"name": "write", "arguments": '{"text": "' + "x" * 90 + '"}'}}
    >>> rendered_chars([{"role": "user", "content": "hi"}, {"role": "assistant", "content": None, "tool_calls": [call]}])
    109
    >>> verbatim_chars([{"role": "user", "content": "hi"}, {"role": "assistant", "content": None, "tool_calls": [call]}])
    2
"""
from __future__ import annotations

from typing import Any

__all__ = ["rendered_chars", "text_chars", "verbatim_chars"]


def text_chars(value: Any) -> int:
    """The characters of every string (keys too) in a parsed JSON value; numbers, booleans and
    null count the length of their text. Values come checked (at most 64 levels deep).

    Example:
        >>> text_chars([{"type": "function", "function": {"name": "f", "parameters": {"x": 1.5}}}])
        39
    """
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        return sum(len(k) if isinstance(k, str) else 0 for k in value) + sum(map(text_chars, value.values()))
    if isinstance(value, (list, tuple)):
        return sum(map(text_chars, value))
    return 0 if value is None else len(str(value))


def _content(c: Any) -> int:
    if isinstance(c, str):
        return len(c)
    if isinstance(c, list):
        return sum(len(p["text"]) for p in c if isinstance(p, dict) and isinstance(p.get("text"), str))
    return 0


def rendered_chars(messages: list) -> int:
    """The characters of ``messages`` (raw, as sent, or normalised) that a template renders:
    content (text parts), ``reasoning_content`` / ``reasoning``, each tool call's name and
    arguments (a JSON string, or an object: its strings), ``name`` and ``tool_call_id``. This is
    what rendering and encoding them costs: a request whose new messages, or whose fork's shared
    prefix, hold many is prepared in a worker thread. Malformed parts count 0 (they are refused
    when normalised).

    Example:
        >>> rendered_chars([{"role": "assistant", "content": "ok", "reasoning_content": "think",
        ...                  "tool_calls": [{"function": {"name": "f", "arguments": {"q": "abc"}}}]},
        ...                 {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "de"}]},
        ...                 "not a message"])
        16
    """
    n = 0
    for m in messages:
        if not isinstance(m, dict):
            continue
        n += _content(m.get("content"))
        for key in ("reasoning_content", "reasoning", "name", "tool_call_id"):
            v = m.get(key)
            if isinstance(v, str):
                n += len(v)
        calls = m.get("tool_calls")
        if isinstance(calls, list):
            for c in calls:
                fn = c.get("function") if isinstance(c, dict) else None
                if isinstance(fn, dict):
                    n += text_chars(fn.get("name")) + text_chars(fn.get("arguments"))
    return n


def verbatim_chars(messages: list) -> int:
    """The characters of the ``content`` of the system, developer, user and tool messages among
    ``messages`` (raw, as sent): text every template writes whole (an assistant's may be cut, as
    Qwen3 drops past reasoning). Malformed content counts 0.

    Example:
        >>> verbatim_chars([{"role": "user", "content": "abc"}, {"role": "assistant", "content": "xyz"},
        ...                 {"role": "tool", "content": [{"type": "text", "text": "de"}]}, "not a message"])
        5
    """
    return sum(_content(m.get("content")) for m in messages
               if isinstance(m, dict) and m.get("role") in ("system", "developer", "user", "tool"))
