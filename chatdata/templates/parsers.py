"""Output parsers (``from_text``): rendered chat text back to messages, table-driven.

Each family is one :class:`ParserSpec` entry: an optional prefix to skip (BOS), the turn
patterns (a role-capturing header pattern, or a fixed role per pattern), role renames, and
the optional tool-call / tool-response block patterns found inside contents. One generic
engine (:func:`parse_with_spec`) walks the text with those patterns.

Representation: messages are ``{"role", "content"}``; assistant tool calls written as
``<tool_call>{json}</tool_call>`` (qwen) come back in the shape chats are fed in with (OpenAI's and
transformers' docs): ``"tool_calls": [{"type": "function", "function": {"name", "arguments"}}]``,
``arguments`` a dict, plus ``"id"`` where the template writes one (Mistral), and are removed from
the content (Mistral's ``[TOOL_CALLS][...]`` lists and Llama 3's bare ``{"name", "parameters"}``
JSON too). Such a parsed message renders back to the same text. Families whose templates write reasoning inline
(``<think>...</think>``, Qwen3, QwQ, DeepSeek-R1) give it back as ``"reasoning_content"``. A user turn that consists only of ``<tool_response>``
blocks (what qwen writes for consecutive ``role="tool"`` messages) comes back as one
``{"role": "tool", "content": ...}`` message per block, so ``parse(render(chat)) == chat``
for chats whose tool calls are given in that shape. A user turn that
mixes text and tool responses keeps the text as content and lists the blocks under
``"tool_responses"``. An unterminated final message gets ``"is_complete": False``.
Malformed tool-call JSON raises ``ValueError`` naming the message.

Generated text (one assistant response, as a policy samples it after the generation prompt)
is parsed by :func:`parse_response` with the same table entry; :func:`parser_for_template`
picks the entry for any template source: the registered template's own parser, else the first
family of :data:`FAMILIES` whose ``detect`` markers all occur in the source.
"""
from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any, Callable

from .parser_spec import ParserSpec, compile_spec as _compile
from .registry import get_chat_template, get_parser, register_parser
from .render import unrenderable


def _call_json(raw: str) -> Any:
    """``json.loads`` of a written tool call; a JSONDecodeError (a malformed call) also for JSON
    nested too deeply or holding a lone surrogate (:func:`~chatdata.templates.render.unrenderable`):
    a message holding it could not be rendered back, stored or sent."""
    try:
        value = json.loads(raw, parse_constant=_not_json, parse_float=_finite)
        problem = unrenderable(value)
    except RecursionError:
        problem = "is nested too deeply"
    except json.JSONDecodeError:
        raise
    except ValueError as err:  # NaN / Infinity, an integer past Python's digit limit
        problem = str(err)
    if problem is not None:
        raise json.JSONDecodeError(f"the call {problem}", raw, 0)
    return value


def _not_json(name: str):
    raise ValueError(f"holds {name}, which is not JSON (write it as a string or null)")


def _finite(text: str) -> float:
    """A JSON number as a float; one too large (``1e999``, read as inf) is refused like
    ``Infinity``: a message holding inf could be answered, but never saved."""
    value = float(text)
    if value in (_INF, -_INF):
        raise ValueError(f"holds {text[:40]}, too large for a float (write it as a string)")
    return value


_INF = float("inf")


_CALL_KEYS = frozenset({"name", "arguments", "parameters", "id", "type"})


def _one_call(call: Any, raw: str, index: int) -> dict:
    """One written call as the chats' shape: ``{"type": "function", "function": {"name",
    "arguments"}}``, plus ``"id"`` when the text holds one. A name that is not a non-empty
    string, or keys a call does not have (they would be dropped), raise ValueError."""
    if not isinstance(call, dict) or "name" not in call:
        raise ValueError(f"message {index}: tool call without a name: {raw!r}")
    if not isinstance(call["name"], str) or not call["name"]:
        raise ValueError(f"message {index}: a tool call's name must be a non-empty string, got {call['name']!r:.40} in {raw!r:.200}")
    extra = sorted(set(call) - _CALL_KEYS)
    if extra:
        raise ValueError(f"message {index}: the tool call has keys a call does not have ({', '.join(map(repr, extra))}), "
                         f"which would be lost: {raw!r:.200}")
    args = call["arguments"] if "arguments" in call else call.get("parameters", {})
    out = {"type": "function", "function": {"name": call["name"], "arguments": args}}
    if "id" in call:
        out["id"] = call["id"]
    return out


def _named_call(m: re.Match) -> tuple[dict, str] | None:
    """A call written with its name outside the JSON (groups ``name...``, ``args...``, ``id``):
    ``[TOOL_CALLS]f[ARGS]{...}``, harmony's ``to=functions.f ... <|message|>{...}``."""
    found = {k.rstrip("0123456789"): v for k, v in m.groupdict().items() if v is not None}
    if "name" not in found or "args" not in found:
        return None
    call = {"name": found["name"].strip(), "arguments": _call_json(found["args"])}
    if found.get("id"):
        call["id"] = found["id"]
    return call, found["args"]


def _tool_calls(content: str, pattern: re.Pattern, index: int) -> tuple[str, list[dict]]:
    """Remove the tool-call blocks from ``content``; each block's group 1 (or group ``json``) is a
    JSON object or a JSON list of objects ``{"name", "arguments" | "parameters"[, "id"]}``, or
    the groups ``name`` and ``args`` (and ``id``) hold a call written around its JSON arguments."""
    calls = []
    for m in pattern.finditer(content):
        try:
            named = _named_call(m)
        except json.JSONDecodeError as err:
            raise ValueError(f"message {index}: malformed tool-call JSON {m.group(0)!r}: {err}") from None
        if named is not None:
            calls.append(_one_call(named[0], named[1], index))
            continue
        raw = m.group("json") if "json" in pattern.groupindex else m.group(1)
        try:
            call = _call_json(raw)
        except json.JSONDecodeError as err:
            raise ValueError(f"message {index}: malformed tool-call JSON {raw!r}: {err}") from None
        for c in call if isinstance(call, list) else [call]:
            calls.append(_one_call(c, raw, index))
    return pattern.sub("", content), calls


def _split_reasoning(content: str, pattern: re.Pattern) -> tuple[str | None, str]:
    m = pattern.match(content)
    if m is None:
        return None, content
    return m.group(1).strip("\n"), content[m.end():].lstrip("\n")


def _assistant_fields(msg: dict, spec_c, index: int) -> dict:
    call_re, reason_re = spec_c[2], spec_c[4]
    content = msg["content"]
    if reason_re is not None:
        reasoning, content = _split_reasoning(content, reason_re)
        if reasoning is not None:
            msg = {**msg, "content": content, "reasoning_content": reasoning}
    if spec_c[6] is not None:
        m = spec_c[6].match(content)
        if m is not None:
            content = m.group(1)
            msg = {**msg, "content": content}
    if call_re is not None and call_re.search(content):
        content, calls = _tool_calls(content, call_re, index)
        msg = {**msg, "content": content, "tool_calls": calls}
    return msg


def _expand(msg: dict, spec_c, index: int) -> list[dict]:
    resp_re = spec_c[3]
    if msg["role"] == "assistant":
        msg = _assistant_fields(msg, spec_c, index)
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
_CHATML_STOP = r"<\|im_end\|>|<\|endoftext\|>"
_HERMES_CALL = r"\n?<tool_call>\n?(.*?)\n?</tool_call>"
_HERMES_RESPONSE = r"\n?<tool_response>\n(.*?)\n</tool_response>"
_THINK = r"\s*(?:<think>)?(.*?)</think>"  # the generation prompt may already hold ``<think>``

# a "User:"/"Assistant:" turn ends at the blank line before the next header (or the end of the text):
# a content that ends with a newline or holds a blank line stays whole
_NEXT_PLAIN = r"(?=User: |Assistant:|\Z)"
_DEEPSEEK_EOS = r"<｜end▁of▁sentence｜>|</s>|<\|endoftext\|>|<\|im_end\|>|<\|end_of_text\|>"

BUILTIN_PARSERS = {
    "chatml_format": ParserSpec("chatml_format", turns=((None, _CHATML_TURN),), stop=_CHATML_STOP,
                                detect=("<|im_start|>",)),
    "qwen": ParserSpec(
        "qwen", turns=((None, _CHATML_TURN),), stop=_CHATML_STOP,
        tool_call=r"\n?<tool_call>\n(.*?)\n</tool_call>", tool_response=_HERMES_RESPONSE,
        detect=("<|im_start|>", "<tool_call>"),
    ),
    "qwen_reasoning": ParserSpec(  # Qwen3, QwQ, DeepSeek-R1 distills on ChatML: inline <think>
        "qwen_reasoning", turns=((None, _CHATML_TURN),), stop=_CHATML_STOP, tool_call=_HERMES_CALL,
        tool_response=_HERMES_RESPONSE, reasoning=_THINK, detect=("<|im_start|>", "</think>"),
    ),
    "llama3": ParserSpec(
        "llama3", prefix=r"<\|begin_of_text\|>",
        turns=((None, r"<\|start_header_id\|>(?P<role>.+?)<\|end_header_id\|>\n\n(?P<content>.*?)"
                      r"(?:(?P<end><\|eot_id\|>|<\|eom_id\|>)|\Z)"),),
        role_map={"ipython": "tool"}, stop=r"<\|eot_id\|>|<\|eom_id\|>",
        # a bare JSON answer is a call only with the "parameters" its template writes: {"name": "Bob", "age": 3} is content
        tool_call=r'\A\s*(\{"name":.*"(?:parameters|arguments)":.*\})\s*\Z', detect=("<|start_header_id|>",),
    ),
    "mistral": ParserSpec(
        "mistral", prefix=r"<s>",
        turns=(
            ("user", r"\[INST\](?P<content>.*?)(?:(?P<end>\[/INST\])|\Z)"),
            ("tool", r"\[TOOL_RESULTS\](?P<content>.*?)(?:(?P<end>\[/TOOL_RESULTS\])|\Z)"),
            ("assistant", r"(?P<content>.*?)(?:(?P<end></s>)|(?=\[INST\]|\[TOOL_RESULTS\])|\Z)"),
        ),
        stop=r"</s>", detect=("[INST]",),
        tool_call=(r"\[TOOL_CALLS\]\s*(?:(?P<json>\[.*\])|(?P<name>[^\[\]]+?)(?:\[CALL_ID\](?P<id>[^\[\]]+))?"
                   r"\[ARGS\](?P<args>\{.*?\})(?=\[TOOL_CALLS\]|\s*\Z))"),  # v3 lists; v11+ name[ARGS]{...}
    ),
    "gpt_oss": ParserSpec(  # harmony: reasoning on the analysis channel, the answer on the final one
        "gpt_oss", turns=(), stop=r"<\|return\|>|<\|end\|>|<\|call\|>",
        reasoning=r"\A<\|channel\|>analysis<\|message\|>(.*?)<\|end\|>(?:<\|start\|>assistant)?",
        content=r"\A<\|channel\|>final<\|message\|>(.*)\Z", detect=("<|channel|>", "<|message|>"),
        tool_call=(r"(?:\A\s*to=functions\.(?P<name>[^\s<]+)\s*<\|channel\|>commentary[^<]*|<\|channel\|>commentary\s+"
                   r"to=functions\.(?P<name2>[^\s<]+)\s*(?:<\|constrain\|>[^<]*)?)<\|message\|>(?P<args>.*)"),
    ),
    "think": ParserSpec(  # any other template that knows inline reasoning
        "think", turns=(), reasoning=_THINK, detect=("</think>",),
    ),
    "gemma": ParserSpec(
        "gemma", prefix=r"<bos>",
        turns=((None, r"<start_of_turn>(?P<role>\w+)\n(?P<content>.*?)(?:(?P<end><end_of_turn>)\n?|\Z)"),),
        role_map={"model": "assistant"}, stop=r"<end_of_turn>|<eos>", detect=("<start_of_turn>",),
    ),
    # torchrl's template names (Llama 4 headers; "User:"/"Assistant:" plain-text families). The
    # plain-text ones end an assistant turn at the blank line (falcon) or at a common EOS token or
    # the next "User:" (deepseek: its EOS is empty without a tokenizer); text before the first
    # "User:" is the system message. dialogpt writes no roles:
    # it has no parser.
    "llama": ParserSpec(
        "llama", prefix=r"<\|begin_of_text\|>",
        turns=((None, r"<\|header_start\|>(?P<role>.+?)<\|header_end\|>\n\n(?P<content>.*?)(?:(?P<end><\|eot\|>)|\Z)"),),
        role_map={"ipython": "tool"},
    ),
    "falcon": ParserSpec(
        "falcon",
        turns=(
            ("user", r"User: (?P<content>.*?)(?:(?P<end>\n\n)" + _NEXT_PLAIN + r"|\Z)"),
            ("assistant", r"Assistant: ?(?P<content>.*?)(?:(?P<end>\n\n)" + _NEXT_PLAIN + r"|\Z)"),
            ("system", r"(?!User: |Assistant:)(?P<content>.+?)(?:(?P<end>\n\n)" + _NEXT_PLAIN + r"|\Z)"),
        ),
    ),
    "deepseek": ParserSpec(
        "deepseek", prefix=r"<｜begin▁of▁sentence｜>|<s>|<\|begin_of_text\|>",
        turns=(
            ("user", r"User: (?P<content>.*?)(?:(?P<end>\n\n)" + _NEXT_PLAIN + r"|\Z)"),
            # a reply ends at its EOS; at the next "User: " only in a text holding no EOS after it (rendered
            # without a tokenizer, the EOS is empty): a reply that says "User: " before its EOS keeps it
            ("assistant", r"Assistant: ?(?P<content>.*?)(?:(?P<end>" + _DEEPSEEK_EOS + r"|(?=User: )(?!.*?(?:"
                          + _DEEPSEEK_EOS + r")))|\Z)"),
            ("system", r"(?!User: |Assistant:)(?P<content>.+?)(?:(?P<end>\n\n)" + _NEXT_PLAIN + r"|\Z)"),
        ),
    ),
}
for _name, _spec in BUILTIN_PARSERS.items():
    register_parser(_name, _spec)

#: Families in detection order (most specific first) for templates that are not registered.
FAMILIES = ("gpt_oss", "qwen_reasoning", "qwen", "chatml_format", "llama3", "mistral", "gemma", "think")


def parser_for_template(template: str) -> ParserSpec | None:
    """The parser table entry for a template source: the parser registered for a template
    whose source equals ``template``, else the first of :data:`FAMILIES` whose ``detect``
    markers all occur in it, else ``None``.

    Example:
        >>> parser_for_template(get_chat_template("qwen")).name
        'qwen'
        >>> parser_for_template("{{ messages }}") is None
        True
    """
    from .registry import list_chat_templates

    for name in list_chat_templates():
        if get_chat_template(name) == template and isinstance(get_parser(name), ParserSpec):
            return get_parser(name)
    for name in FAMILIES:
        spec = BUILTIN_PARSERS[name]
        if all(marker in template for marker in spec.detect):
            return spec
    return None


_PLAIN = ParserSpec("plain", turns=())


@lru_cache(maxsize=256)
def _stop_re(family: str | None, literal: str) -> re.Pattern:
    alternatives = f"{family}|{re.escape(literal)}" if family else re.escape(literal)
    return re.compile(f"(?:{alternatives})\\Z", re.S)


def parse_response(text: str, spec: ParserSpec | None = None, stop: str | None = None) -> dict:
    """One generated assistant response (the text after the generation prompt) as a message:
    ``content``, plus ``reasoning_content`` and ``tool_calls`` when the family has them;
    ``is_complete: False`` when the text does not end with the family's end-of-turn marker.

    ``stop`` (a literal marker, such as the template's end-of-turn text) is accepted besides
    the family's stop pattern; ``spec=None`` gives a plain content parser.

    Example:
        >>> parse_response('<tool_call>{"name": "f", "arguments": {}}</tool_call><|im_end|>',
        ...                BUILTIN_PARSERS["qwen_reasoning"])
        {'role': 'assistant', 'content': '', 'tool_calls': [{'type': 'function', 'function': {'name': 'f', 'arguments': {}}}]}
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    if spec is not None and not isinstance(spec, ParserSpec):
        raise TypeError(f"spec must be a ParserSpec (e.g. BUILTIN_PARSERS['qwen']) or None, got {spec!r:.60}")
    if stop is not None and not isinstance(stop, str):
        raise TypeError(f"stop must be a str (a literal end-of-turn marker) or None, got {type(stop).__name__}")
    spec = spec or _PLAIN
    spec_c = _compile(spec)
    stop_re = _stop_re(spec.stop, stop) if stop else spec_c[5]
    msg: dict = {"role": "assistant", "content": text}
    m = stop_re.search(text) if stop_re is not None else None
    if m is not None:
        msg["content"] = text[: m.start()]
    else:
        msg["is_complete"] = False
    return _assistant_fields(msg, spec_c, 0)


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
