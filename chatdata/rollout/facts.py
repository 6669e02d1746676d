"""Per-template facts a rollout needs, computed once per template (and variables) and cached.

* ``eot``: the end-of-turn text the template writes right after an assistant message
  (``<|im_end|>`` for ChatML, ``<|eot_id|>`` for Llama 3, ``</s>`` for Mistral); the policy
  generates it to stop.
* ``after_eot``: what the template writes after that EOT before the next turn (Qwen's ``"\\n"``,
  Gemma's ``"\\n"``, nothing for Llama 3). A fresh render of a conversation ending with an
  assistant turn goes on with this text after the last generated id.
* ``generation_prompt``: the text ``add_generation_prompt=True`` adds after a user turn.
* ``turn_prefix``: what an assistant turn holds between the generation prompt and its content
  (Reka's ``" "``, Solar's ``<|content|>``, Qwen3's empty ``<think>`` block for the last turn);
  a generated response starting with it is parsed without it.
* ``prefix_preserving``: rendering a probe conversation turn by turn only ever appends text
  (each ``render(messages[:k], add_generation_prompt=...)`` is a prefix of the full render).
  Templates that rewrite the past (Qwen3 dropping earlier ``<think>`` blocks) are not.
  ``first_rewrite`` names the first probe message whose addition changed earlier text.
* ``fixed_base_delta``: the text after an assistant turn is the same whether the turn is
  rendered after a small fixed base (leading system messages + the last user message) or after
  the whole conversation. When it is not (Mistral writes the system prompt into the last user
  turn), a rollout renders the whole conversation for each turn.

Facts are measured with probe conversations (a system prompt, users, assistants with reasoning,
a tool call and a tool reply); messages a template refuses (tools, system) are left out.

Example:
    >>> from chatdata.templates import get_chat_template
    >>> f = template_facts(get_chat_template("qwen"))
    >>> f.eot, f.after_eot, f.prefix_preserving
    ('<|im_end|>', '\\n', True)
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from ..templates import Renderer, TemplateError
from ..templates.end_of_turn import end_of_turn
from .delta import TurnDelta
from .recent import RecentCache

__all__ = ["TemplateFacts", "template_facts"]

_MARK = ("Zq9user0", "Zq9asst0", "Zq9user1", "Zq9asst1")


@dataclass(frozen=True)
class TemplateFacts:
    """What a rollout needs to know about a template (see the module docstring)."""

    eot: str
    after_eot: str
    generation_prompt: str
    turn_prefix: str
    prefix_preserving: bool
    first_rewrite: str | None
    fixed_base_delta: bool

    def as_dict(self) -> dict:
        """The facts as a JSON-ready dict (what ``chatdata templates check`` prints)."""
        return asdict(self)


_CACHE = RecentCache(256)  # per template and variables (tools too): a server sees new ones every session


def _key(template: str, variables: dict, tools: Any) -> str:
    return json.dumps([template, variables, tools], sort_keys=True, default=repr)


def template_facts(template: str, tokenizer: Any = None, tools: Any = None, **template_kwargs: Any) -> TemplateFacts:
    """The :class:`TemplateFacts` of ``template`` (jinja source) rendered with the tokenizer's
    special tokens, ``tools`` and ``template_kwargs``; computed on first use, then cached.

    Example:
        >>> from chatdata.templates import get_chat_template
        >>> template_facts(get_chat_template("llama3"), bos_token="<|begin_of_text|>").eot
        '<|eot_id|>'
    """
    renderer = Renderer(template, tools=tools, tokenizer=tokenizer, **template_kwargs)
    key = _key(template, renderer.variables, None)
    facts = _CACHE.get(key)
    if facts is None:
        facts = _measure(renderer)
        _CACHE[key] = facts
    return facts


def facts_for_renderer(renderer: Renderer) -> TemplateFacts:
    """:func:`template_facts` for an existing :class:`~chatdata.templates.Renderer`."""
    key = _key(renderer.template, renderer.variables, None)
    facts = _CACHE.get(key)
    if facts is None:
        facts = _measure(renderer)
        _CACHE[key] = facts
    return facts


def _render(renderer: Renderer, chat: list[dict], gen: bool) -> str | None:
    try:
        return renderer.render(chat, add_generation_prompt=gen)
    except (TemplateError, RecursionError):
        return None


def _eot(renderer: Renderer, head: list[dict]) -> tuple[str, str]:
    u0, a0, u1 = ({"role": "user", "content": _MARK[0]}, {"role": "assistant", "content": _MARK[1]},
                  {"role": "user", "content": _MARK[2]})
    end = _render(renderer, head + [u0, a0], False)
    nxt = _render(renderer, head + [u0, a0, u1], False)
    if end is None or nxt is None or _MARK[1] not in end or _MARK[1] not in nxt:
        return "", ""
    tail_end = end[end.rindex(_MARK[1]) + len(_MARK[1]):]
    tail_next = nxt[nxt.rindex(_MARK[1]) + len(_MARK[1]):]
    # a rollout's EOT is what the policy generates to stop: whitespace alone is text after an empty
    # EOT, and gpt-oss's <|end|> is not taken when the last turn ends with <|return|>
    return end_of_turn(tail_next, tail_end, whitespace_end=False, differing_final_marker=False)


def _probe(with_system: bool, with_tools: bool) -> list[dict]:
    chat = [{"role": "system", "content": "Probe system."}] if with_system else []
    chat.append({"role": "user", "content": "First question?"})
    chat.append({"role": "assistant", "content": "First answer.", "reasoning_content": "Think one."})
    if with_tools:
        chat.append({"role": "user", "content": "Call the tool."})
        chat.append({"role": "assistant", "content": "",
                     "tool_calls": [{"type": "function", "id": "call00001",
                                     "function": {"name": "probe", "arguments": {"x": 1}}}]})
        chat.append({"role": "tool", "content": "42", "tool_call_id": "call00001", "name": "probe"})
        chat.append({"role": "assistant", "content": "It is 42.", "reasoning_content": "Think two."})
    chat.append({"role": "user", "content": "Second question?"})
    chat.append({"role": "assistant", "content": "Second answer."})
    return chat


def _first_rewrite(renderer: Renderer, chat: list[dict]) -> str | None:
    full = _render(renderer, chat, False)
    for k in range(1, len(chat)):
        gen = chat[k]["role"] == "assistant"
        part = _render(renderer, chat[:k], gen)
        if part is not None and not full.startswith(part):
            return f"message {k} ({chat[k]['role']}) changes the text of earlier messages"
    return None


def _measure(renderer: Renderer) -> TemplateFacts:
    head: list[dict] = [{"role": "system", "content": "Probe system."}]
    if _render(renderer, head + [{"role": "user", "content": "q"}], True) is None:
        head = []
    eot, after = _eot(renderer, head)
    user = head + [{"role": "user", "content": _MARK[0]}]
    plain, prompted = _render(renderer, user, False), _render(renderer, user, True)
    gen = prompted[len(plain):] if plain is not None and prompted is not None and prompted.startswith(plain) else ""
    turn = _render(renderer, user + [{"role": "assistant", "content": _MARK[1]}], False)
    prefix = ""
    if prompted is not None and turn is not None and turn.startswith(prompted) and _MARK[1] in turn[len(prompted):]:
        prefix = turn[len(prompted): turn.index(_MARK[1], len(prompted))]
    chat = None
    for with_system, with_tools in ((bool(head), True), (bool(head), False), (False, False)):
        candidate = _probe(with_system, with_tools)
        if _render(renderer, candidate, False) is not None:
            chat = candidate
            break
    if chat is None:
        return TemplateFacts(eot, after, gen, prefix, False, "the probe conversations do not render", False)
    rewrite = _first_rewrite(renderer, chat)
    return TemplateFacts(eot, after, gen, prefix, rewrite is None, rewrite, TurnDelta(renderer, eot).agrees_on(chat))


def rollout_section(template: str, tokenizer: Any = None, tools: Any = None, **template_kwargs: Any) -> list:
    """The rollout facts as a ``chatdata templates check`` report section (a list of one
    :class:`chatdata.templates.report.Section`).

    Example:
        >>> from chatdata.templates import get_chat_template
        >>> rollout_section(get_chat_template("qwen"))[0].lines[0]
        "eot: '<|im_end|>'"
    """
    from ..templates.report import Section

    facts = template_facts(template, tokenizer=tokenizer, tools=tools, **template_kwargs)
    lines = [f"{name}: {value!r}" for name, value in facts.as_dict().items()]
    return [Section("rollout facts (token in, token out)", lines)]
