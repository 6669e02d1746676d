"""``ParserSpec``: one model family's table for parsing rendered or generated text back into
messages, and its compiled regexes (cached per spec). Its own module so that the registry, which
checks parsers at registration, and :mod:`chatdata.templates.parsers`, which applies them, both
import it without an import circle.

Example:
    >>> spec = ParserSpec("demo", turns=((None, "(?P<role>[a-z]+): (?P<content>.*)"),))
    >>> spec.compiled()[1][0][1].pattern
    '(?P<role>[a-z]+): (?P<content>.*)'
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["ParserSpec", "compile_spec"]


@dataclass(frozen=True)
class ParserSpec:
    """One family's parsing table entry.

    ``turns``: ``(role, pattern)`` pairs tried in order at each position; ``role=None`` means
    the pattern captures ``(?P<role>...)``. Each pattern captures ``(?P<content>...)`` and an
    optional ``(?P<end>...)`` group that matches only when the turn is terminated.

    Example:
        >>> from chatdata.templates.parsers import parse_with_spec
        >>> spec = ParserSpec("demo", turns=((None, r"(?P<role>\\w+): (?P<content>.*?)(?:(?P<end>\\n)|\\Z)"),))
        >>> parse_with_spec("user: hi\\nassistant: yo", spec)
        [{'role': 'user', 'content': 'hi'}, {'role': 'assistant', 'content': 'yo', 'is_complete': False}]
    """

    name: str
    turns: tuple[tuple[str | None, str], ...]
    prefix: str = ""
    role_map: dict = field(default_factory=dict)
    tool_call: str | None = None  # regex: group 1 (or ``json``) a JSON {"name", "arguments"}, or groups name/args/id
    tool_response: str | None = None  # regex with one group holding one tool response
    reasoning: str | None = None  # regex matched at the start of an assistant content: group 1 = reasoning
    stop: str | None = None  # regex of the end-of-turn marker(s) a generated response ends with
    content: str | None = None  # regex: when it matches the content (after reasoning), group 1 is the content
    detect: tuple[str, ...] = ()  # markers that all occur in a template source of this family

    def compiled(self):
        return compile_spec(self)


_COMPILED: dict = {}


def compile_spec(spec: ParserSpec):
    """The compiled regexes of ``spec`` (prefix, turns, tool_call, tool_response, reasoning, stop,
    content), cached per spec object.

    Example:
        >>> compile_spec(ParserSpec("demo", turns=(("user", "(?P<content>.*)"),)))[0] is None
        True
    """
    key = id(spec)
    entry = _COMPILED.get(key)
    if entry is None or entry[0] is not spec:  # the entry holds its spec, so an id is never reused
        _COMPILED[key] = (spec, (
            re.compile(spec.prefix, re.S) if spec.prefix else None,
            [(role, re.compile(p, re.S)) for role, p in spec.turns],
            re.compile(spec.tool_call, re.S) if spec.tool_call else None,
            re.compile(spec.tool_response, re.S) if spec.tool_response else None,
            re.compile(spec.reasoning, re.S) if spec.reasoning else None,
            re.compile(f"(?:{spec.stop})\\Z", re.S) if spec.stop else None,
            re.compile(spec.content, re.S) if spec.content else None,
        ))
    return _COMPILED[key][1]
