"""Output parsers (``from_text``): rendered chat text back to messages, table-driven.

Each family is one :class:`ParserSpec` entry: an optional prefix to skip (BOS), the turn
patterns (a role-capturing header pattern, or a fixed role per pattern), role renames, and
the optional tool-call / tool-response block patterns found inside contents. One generic
engine (:func:`parse_with_spec`) walks the text with those patterns.

Representation: messages are ``{"role", "content"}``; assistant tool calls written as
``<tool_call>{json}</tool_call>`` (qwen) come back as ``"tool_calls": [{"name", "arguments"}]``
and are removed from the content. A user turn that consists only of ``<tool_response>``
blocks (what qwen writes for consecutive ``role="tool"`` messages) comes back as one
``{"role": "tool", "content": ...}`` message per block, so ``parse(render(chat)) == chat``
for chats whose tool calls are given as ``{"name", "arguments"}`` dicts. A user turn that
mixes text and tool responses keeps the text as content and lists the blocks under
``"tool_responses"``. An unterminated final message gets ``"is_complete": False``.
Malformed tool-call JSON raises ``ValueError`` naming the message.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable

from .registry import get_chat_template, get_parser, register_parser


@dataclass(frozen=True)
class ParserSpec:
    """One family's parsing table entry.

    ``turns``: ``(role, pattern)`` pairs tried in order at each position; ``role=None`` means
    the pattern captures ``(?P<role>...)``. Each pattern captures ``(?P<content>...)`` and an
    optional ``(?P<end>...)`` group that matches only when the turn is terminated.

    Example:
        >>> spec = ParserSpec("demo", turns=((None, r"(?P<role>\\w+): (?P<content>.*?)(?:(?P<end>\\n)|\\Z)"),))
        >>> parse_with_spec("user: hi\\nassistant: yo", spec)
        [{'role': 'user', 'content': 'hi'}, {'role': 'assistant', 'content': 'yo', 'is_complete': False}]
    """

    name: str
    turns: tuple[tuple[str | None, str], ...]
    prefix: str = ""
    role_map: dict = field(default_factory=dict)
    tool_call: str | None = None  # regex with one group holding a JSON {"name", "arguments"}
    tool_response: str | None = None  # regex with one group holding one tool response

    def compiled(self):
        return _compile(self)


_COMPILED: dict = {}


def _compile(spec: ParserSpec):
    key = id(spec)
    if key not in _COMPILED:
        _COMPILED[key] = (
            re.compile(spec.prefix, re.S) if spec.prefix else None,
            [(role, re.compile(p, re.S)) for role, p in spec.turns],
            re.compile(spec.tool_call, re.S) if spec.tool_call else None,
            re.compile(spec.tool_response, re.S) if spec.tool_response else None,
        )
    return _COMPILED[key]


def _tool_calls(content: str, pattern: re.Pattern, index: int) -> tuple[str, list[dict]]:
    calls = []
    for m in pattern.finditer(content):
        try:
            call = json.loads(m.group(1))
        except json.JSONDecodeError as err:
            raise ValueError(f"message {index}: malformed tool-call JSON {m.group(1)!r}: {err}") from None
        if not isinstance(call, dict) or "name" not in call:
            raise ValueError(f"message {index}: tool call without a name: {m.group(1)!r}")
        calls.append({"name": call["name"], "arguments": call.get("arguments", {})})
    return pattern.sub("", content), calls


def _expand(msg: dict, spec_c, index: int) -> list[dict]:
    _, _, call_re, resp_re = spec_c
    if msg["role"] == "assistant" and call_re is not None and call_re.search(msg["content"]):
        content, calls = _tool_calls(msg["content"], call_re, index)
        msg = {**msg, "content": content, "tool_calls": calls}
    elif msg["role"] == "user" and resp_re is not None and resp_re.search(msg["content"]):
        blocks = resp_re.findall(msg["content"])
        rest = resp_re.sub("", msg["content"])
        if not rest:
            out = [{"role": "tool", "content": b} for b in blocks]
            if msg.get("is_complete") is False:
                out[-1]["is_complete"] = False
            return out
        msg = {**msg, "content": rest, "tool_responses": blocks}
    return [msg]


def parse_with_spec(text: str, spec: ParserSpec) -> list[dict]:
    """Parse ``text`` with one table entry (see :class:`ParserSpec`)."""
    spec_c = _compile(spec)
    prefix, turns = spec_c[0], spec_c[1]
    pos = 0
    if prefix is not None:
        m = prefix.match(text)
        if m:
            pos = m.end()
    messages: list[dict] = []
    while pos < len(text):
        for role, pat in turns:
            m = pat.match(text, pos)
            if m and m.end() > pos:
                break
        else:
            pos += 1  # text outside any turn (separators): skip it
            continue
        role = role or m.group("role")
        msg = {"role": spec.role_map.get(role, role), "content": m.group("content")}
        if m.groupdict().get("end") is None:
            msg["is_complete"] = False
        messages.extend(_expand(msg, spec_c, len(messages)))
        pos = m.end()
    return messages


_CHATML_TURN = r"<\|im_start\|>(?P<role>[^\n]*)\n(?P<content>.*?)(?:(?P<end><\|im_end\|>|<\|endoftext\|>)\n?|\Z)"

BUILTIN_PARSERS = {
    "chatml_format": ParserSpec("chatml_format", turns=((None, _CHATML_TURN),)),
    "qwen": ParserSpec(
        "qwen", turns=((None, _CHATML_TURN),),
        tool_call=r"\n?<tool_call>\n(.*?)\n</tool_call>",
        tool_response=r"\n?<tool_response>\n(.*?)\n</tool_response>",
    ),
    "llama3": ParserSpec(
        "llama3", prefix=r"<\|begin_of_text\|>",
        turns=((None, r"<\|start_header_id\|>(?P<role>.+?)<\|end_header_id\|>\n\n(?P<content>.*?)"
                      r"(?:(?P<end><\|eot_id\|>|<\|eom_id\|>)|\Z)"),),
        role_map={"ipython": "tool"},
    ),
    "mistral": ParserSpec(
        "mistral", prefix=r"<s>",
        turns=(
            ("user", r"\[INST\](?P<content>.*?)(?:(?P<end>\[/INST\])|\Z)"),
            ("tool", r"\[TOOL_RESULTS\](?P<content>.*?)(?:(?P<end>\[/TOOL_RESULTS\])|\Z)"),
            ("assistant", r"(?P<content>.*?)(?:(?P<end></s>)|(?=\[INST\]|\[TOOL_RESULTS\])|\Z)"),
        ),
    ),
    # torchrl's template names (Llama 4 headers; "User:"/"Assistant:" plain-text families). The
    # plain-text ones end an assistant turn at the blank line (falcon) or at a common EOS token
    # (deepseek); text before the first "User:" is the system message. dialogpt writes no roles:
    # it has no parser.
    "llama": ParserSpec(
        "llama", prefix=r"<\|begin_of_text\|>",
        turns=((None, r"<\|header_start\|>(?P<role>.+?)<\|header_end\|>\n\n(?P<content>.*?)(?:(?P<end><\|eot\|>)|\Z)"),),
        role_map={"ipython": "tool"},
    ),
    "falcon": ParserSpec(
        "falcon",
        turns=(
            ("user", r"User: (?P<content>.*?)(?:(?P<end>\n\n)|\Z)"),
            ("assistant", r"Assistant: ?(?P<content>.*?)(?:(?P<end>\n\n)|\Z)"),
            ("system", r"(?!User: |Assistant:)(?P<content>.+?)(?:(?P<end>\n\n)|\Z)"),
        ),
    ),
    "deepseek": ParserSpec(
        "deepseek", prefix=r"<｜begin▁of▁sentence｜>|<s>|<\|begin_of_text\|>",
        turns=(
            ("user", r"User: (?P<content>.*?)(?:(?P<end>\n\n)|\Z)"),
            ("assistant", r"Assistant: ?(?P<content>.*?)"
                          r"(?:(?P<end><｜end▁of▁sentence｜>|</s>|<\|endoftext\|>|<\|im_end\|>|<\|end_of_text\|>)|(?=User: )|\Z)"),
            ("system", r"(?!User: |Assistant:)(?P<content>.+?)(?:(?P<end>\n\n)|\Z)"),
        ),
    ),
}
for _name, _spec in BUILTIN_PARSERS.items():
    register_parser(_name, _spec)


def parse_chat_text(text: str, template_name: str) -> list[dict]:
    """Parse rendered chat ``text`` of the family ``template_name`` into messages.

    Example:
        >>> parse_chat_text("<|im_start|>user\\nhi<|im_end|>\\n<|im_start|>assistant\\nyo", "chatml_format")
        [{'role': 'user', 'content': 'hi'}, {'role': 'assistant', 'content': 'yo', 'is_complete': False}]
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    parser: Any = get_parser(template_name)
    if parser is None:
        get_chat_template(template_name)  # unknown name -> ValueError listing the known ones
        raise ValueError(f"chat template {template_name!r} has no output parser; register one with "
                         "add_chat_template(name, template, parser=...)")
    if isinstance(parser, ParserSpec):
        return parse_with_spec(text, parser)
    if callable(parser):
        return parser(text)
    raise TypeError(f"parser for {template_name!r} must be a ParserSpec or a callable")


ParserFn = Callable[[str], list]
