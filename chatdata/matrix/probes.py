"""Probe conversations of the template matrix, and fitting them to what a template accepts.

Every text is made of marker words that occur in no template: words owned by the assistant start
with ``Wqans`` (content), ``Wqrsn`` (reasoning) and ``Wqarg`` (tool-call arguments); words of
other roles with ``Wqsys``, ``Wqusr`` and ``Wqtool``. The kinds are ``plain``, ``tools``,
``reasoning`` (from :mod:`chatdata.templates.probes`) and ``parts``: a multimodal chat whose
``content`` is a list of parts (image, video, audio, text), as processors' templates take it.

Templates refuse some chats (no system role, strictly alternating roles, tool-call arguments as
JSON strings only, tool call ids of 9 characters, ``bos_token`` needed, no list content, ...).
:func:`fit` tries a fixed sequence of :class:`Variant` s derived from such refusals -- never a
table of template names -- and keeps the first one the template renders.

Example:
    >>> chat = probe_chat("plain")
    >>> [m["role"] for m in chat]
    ['system', 'user', 'assistant', 'user', 'assistant']
    >>> [m["role"] for m in Variant(no_system=True).apply(chat)]
    ['user', 'assistant', 'user', 'assistant']
"""
from __future__ import annotations

import copy
import dataclasses
import json
from typing import Any, Callable, Iterator

from ..templates import TemplateError
from ..templates.parts import has_media
from ..templates.probes import PROBE_TOOL, probe_chats

__all__ = ["KINDS", "OWNED", "FOREIGN", "PROBE_TOOL", "MATRIX_TOOL", "Variant", "probe_chat", "fit", "variants", "media_free"]

KINDS = ("plain", "tools", "reasoning", "parts")
#: The probe tool with a described parameter (Cohere's tool_use templates read the descriptions).
MATRIX_TOOL = {"type": "function", "function": {**PROBE_TOOL["function"], "parameters": {
    "type": "object", "properties": {"word": {"type": "string", "description": "The word."}}, "required": ["word"]}}}
OWNED = ("Wqans", "Wqrsn", "Wqarg")
FOREIGN = ("Wqsys", "Wqusr", "Wqtool")
_IMAGE = {"type": "image", "url": "https://example.com/cat.png"}
_VIDEO = {"type": "video", "url": "https://example.com/dog.mp4"}
_AUDIO = {"type": "audio", "url": "https://example.com/bark.wav"}


def _parts_chat() -> list[dict]:
    return [
        {"role": "system", "content": "Wqsys rules."},
        {"role": "user", "content": [dict(_IMAGE), {"type": "text", "text": "Wqusr what is this?"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Wqans a cat, drawn:"}, dict(_IMAGE),
                                          {"type": "text", "text": "Wqans as you see."}]},
        {"role": "user", "content": [{"type": "text", "text": "Wqusr and these?"}, dict(_VIDEO), dict(_AUDIO)]},
        {"role": "assistant", "content": "Wqans a dog and a bark."},
    ]


def probe_chat(kind: str) -> list[dict]:
    """A fresh copy of the probe chat of ``kind`` (``reasoning`` has two; this is the first).

    Example:
        >>> probe_chat("parts")[1]["content"][0]["type"]
        'image'
    """
    if kind == "parts":
        return _parts_chat()
    if kind not in KINDS:
        raise ValueError(f"unknown probe kind {kind!r}; kinds: {', '.join(KINDS)}")
    return probe_chats_of(kind)[0]


def probe_chats_of(kind: str) -> list[list[dict]]:
    """All probe chats of ``kind`` (fresh copies). Tool call ids have 9 characters (Mistral's
    templates take no shorter ones).

    Example:
        >>> len(probe_chats_of("reasoning")), probe_chats_of("tools")[0][2]["tool_calls"][0]["id"]
        (2, 'call1wqid')
    """
    if kind == "parts":
        return [_parts_chat()]
    chats = probe_chats(tool_name_of_probe())[kind]
    for chat in chats:
        for m in chat:
            for c in m.get("tool_calls") or ():
                c["id"] = c["id"] + "id"
            if m.get("tool_call_id"):
                m["tool_call_id"] += "id"
    return chats


def tool_name_of_probe() -> str:
    return PROBE_TOOL["function"]["name"]


@dataclasses.dataclass(frozen=True)
class Variant:
    """One way of presenting a probe chat to a template.

    ``tools``: pass the probe tool (``tool_use`` templates want tools even in plain chats);
    ``string_args``: tool-call arguments as JSON strings; ``no_system``: drop system messages;
    ``specials``: supply ``bos_token`` / ``eos_token`` the tokenizer lacks; ``flat_assistant``:
    assistant content as a string; ``images_only``: keep only image parts; ``text_parts``: no
    media parts at all (list content of text parts only); ``as_parts``: string contents as one
    text part (processors' templates read only lists); ``call_text``: tool-calling turns
    without text get some (templates that drop tool calls would render them empty).
    """

    tools: bool = False
    string_args: bool = False
    no_system: bool = False
    specials: bool = False
    flat_assistant: bool = False
    images_only: bool = False
    text_parts: bool = False
    as_parts: bool = False
    call_text: bool = False

    def label(self) -> str:
        on = [f.name.replace("_", " ") for f in dataclasses.fields(self) if getattr(self, f.name)]
        return ", ".join(on) or "as is"

    def apply(self, chat: list[dict]) -> list[dict]:
        """``chat`` presented this way (a fresh copy)."""
        out = []
        for m in copy.deepcopy(chat):
            if self.no_system and m.get("role") == "system":
                continue
            if self.call_text and m.get("tool_calls") and not m.get("content"):
                m["content"] = "Wqans calling."
            if self.string_args and m.get("tool_calls"):
                for c in m["tool_calls"]:
                    fn = c.get("function", c)
                    if not isinstance(fn.get("arguments"), str):
                        fn["arguments"] = json.dumps(fn["arguments"], ensure_ascii=False)
            content = m.get("content")
            if self.as_parts and isinstance(content, str):
                m["content"] = [{"type": "text", "text": content}]
            elif isinstance(content, list):
                if self.flat_assistant and m.get("role") == "assistant":
                    m["content"] = " ".join(p["text"] for p in content if p.get("type") == "text")
                elif self.text_parts:
                    m["content"] = [p for p in content if p.get("type") == "text"]
                elif self.images_only:
                    m["content"] = [p for p in content if p.get("type") in ("text", "image")]
            out.append(m)
        return out

    def template_kwargs(self, tokenizer: Any) -> dict:
        """Extra template variables of this variant (``bos_token`` / ``eos_token`` when asked for
        and the tokenizer has none)."""
        if not self.specials:
            return {}
        special = dict(getattr(tokenizer, "special_tokens_map", None) or {}) if tokenizer is not None else {}
        return {k: v for k, v in (("bos_token", "<s>"), ("eos_token", "</s>")) if not special.get(k)}


_BASE = (Variant(), Variant(tools=True), Variant(string_args=True), Variant(tools=True, string_args=True))


def variants(kind: str) -> Iterator[Variant]:
    """The variants tried for ``kind``, in order: as is, with tools, with string arguments, then
    the same without system messages, then with the missing special tokens supplied, then all
    of it with string contents as text parts; for ``parts``, assistant content as a string, only
    image parts, and text parts only as well.

    Example:
        >>> next(variants("plain")).label(), sum(1 for _ in variants("plain"))
        ('as is', 16)
    """
    media = [{}, {"as_parts": True}] + ([{"call_text": True}] if kind == "tools" else [])
    if kind == "parts":
        media = [{}, {"flat_assistant": True}, {"flat_assistant": True, "images_only": True},
                 {"flat_assistant": True, "text_parts": True}, {"as_parts": True}]
    for extra in media:
        for specials in (False, True):
            for no_system in (False, True):
                for v in _BASE:
                    if (kind == "tools" and not v.tools) or (kind != "tools" and v.string_args):
                        continue
                    yield dataclasses.replace(v, specials=specials, no_system=no_system, **extra)


def media_free(chat: list[dict]) -> bool:
    """Whether no message of ``chat`` holds a media part (the parts probe lost all its media)."""
    return not any(has_media(m) for m in chat)


def fit(kind: str, attempt: Callable[[Variant], Any]) -> tuple[Variant | None, Any, str]:
    """The first variant of ``kind`` for which ``attempt(variant)`` does not raise a
    :class:`~chatdata.templates.TemplateError` (or ``TypeError`` / ``ValueError``, as templates
    raise): ``(variant, result, '')``, or ``(None, None, first error)`` when the template
    refuses them all.

    Example:
        >>> def attempt(v):
        ...     if not v.no_system:
        ...         raise TemplateError("System role not supported")
        ...     return "ok"
        >>> v, result, err = fit("plain", attempt)
        >>> v.label(), result, err
        ('no system', 'ok', '')
    """
    first = ""
    for v in variants(kind):
        try:
            return v, attempt(v), ""
        except (TemplateError, TypeError, ValueError) as err:
            first = first or _one_line(err)
    return None, None, first


def _one_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    text = text.replace("chat template failed to render: ", "")
    return text[:160]
