"""Assistant spans: where, in each rendered chat, is the text a model must learn.

A span is ``(start, end)`` in characters of the rendered text. By default the spans of an
assistant turn cover everything the model writes in it, as the template renders it: reasoning
(``reasoning_content`` or inline ``<think>``, when the template renders it), content, tool calls
(also in turns that hold only tool calls), and the end of the turn (the end-of-turn token, or,
for templates with none, the marker that opens the next turn). Never system, user or tool text,
nor role headers / the generation prompt. See :mod:`.turns` for how turns are placed and
:mod:`.profile` for what is learned from probe renderings; ``docs/masks.md`` lists the rule per
template family.

Templates with ``{% generation %}`` blocks keep their author's spans, unchanged.

Example:
    >>> from chatdata.templates import get_chat_template
    >>> chat = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]
    >>> texts, spans = render_chats_with_spans([chat], get_chat_template("chatml_format"))
    >>> [texts[0][s:e] for s, e in spans[0]]
    ['yo<|im_end|>']
"""
from __future__ import annotations

import hashlib
from typing import Any, Sequence

from .errors import TemplateError
from .jinja_env import has_generation_tags
from .profile import TemplateProfile, end_of_turn_text, template_profile
from .render import Renderer, _check_chats, prepare_chat, render_in_batch
from .fast_turns import fast_path_ok
from .marked_turns import place_turns
from .parts import has_media, without_placeholders
from .turns import tagged_spans_with_options

__all__ = ["render_chats_with_spans", "assistant_spans", "template_profile", "end_of_turn_text",
           "TemplateProfile", "template_label"]


def template_label(template: str) -> str:
    """A short name for a template in messages: its registered name, else a hash and first line.

    Example:
        >>> from chatdata.templates import get_chat_template
        >>> template_label(get_chat_template("qwen"))
        "'qwen'"
    """
    from .registry import get_chat_template, list_chat_templates

    for name in list_chat_templates():
        if get_chat_template(name) == template:
            return repr(name)
    digest = hashlib.sha1(template.encode("utf-8")).hexdigest()[:10]
    head = template.strip().splitlines()[0][:40] if template.strip() else ""
    return f"<unregistered template sha1:{digest} {head!r}>"


def render_chats_with_spans(
    chats: Sequence[Sequence[Any]],
    template: str,
    *,
    add_generation_prompt: bool = False,
    continue_final_message: bool | str = False,
    tools: Any = None,
    documents: Any = None,
    tokenizer: Any = None,
    mask_reasoning: bool = True,
    mask_eot: bool = True,
    **template_kwargs: Any,
) -> tuple[list[str], list[list[tuple[int, int]]]]:
    """Render chats (identical to :func:`render_chats`) and return the spans to learn of each.

    ``mask_reasoning=False`` leaves rendered reasoning out of the spans; ``mask_eot=False``
    leaves the end of each turn out (content and tool calls only). With
    ``continue_final_message`` the open final assistant message is learned up to where the text
    stops. An assistant turn that holds something to learn but cannot be placed raises
    :class:`~chatdata.templates.UnplaceableTurnError` naming the template, chat and message.

    Example:
        >>> from chatdata.templates import get_chat_template
        >>> chat = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]
        >>> texts, spans = render_chats_with_spans([chat], get_chat_template("chatml_format"), mask_eot=False)
        >>> [texts[0][s:e] for s, e in spans[0]]
        ['yo']
    """
    _check_chats(chats)
    for opt, val in (("mask_reasoning", mask_reasoning), ("mask_eot", mask_eot)):
        if not isinstance(val, bool):
            raise TypeError(f"{opt} must be True or False, got {val!r}")
    if continue_final_message and add_generation_prompt:
        raise TemplateError("continue_final_message and add_generation_prompt are not compatible")
    renderer = Renderer(template, tools=tools, documents=documents, tokenizer=tokenizer,
                        add_generation_prompt=add_generation_prompt, **template_kwargs)
    tagged = has_generation_tags(template)
    profile = None if tagged else template_profile(renderer)
    fast = not tagged and fast_path_ok(renderer, profile)
    texts, spans = [], []
    for i, chat in enumerate(chats):
        chat = prepare_chat(chat)
        if tagged:
            text, sp = render_in_batch(renderer, chat, i, len(chats), track=True,
                                       continue_final_message=continue_final_message)
            sp = [(a, min(b, len(text))) for a, b in sp if a < len(text)]  # cut by continue_final_message
            if not (mask_eot and mask_reasoning) or any(m.get("is_complete") is False for m in chat):
                sp = tagged_spans_with_options(text, sp, chat, template_profile(renderer),
                                               mask_reasoning=mask_reasoning, mask_eot=mask_eot)
        else:
            text = render_in_batch(renderer, chat, i, len(chats), continue_final_message=continue_final_message)

            def where(k, reason, i=i):
                return (f"template {template_label(template)}, chat {i}, message {k} (assistant): cannot place "
                        f"the turn to learn: {reason}. Check that this template renders this message, or "
                        f"mask it yourself with {{% generation %}} blocks")

            _, sp = place_turns(renderer, chat, text, profile, continued=bool(continue_final_message), where=where,
                                fast=fast, spans=True, mask_reasoning=mask_reasoning, mask_eot=mask_eot)
        if any(m.get("role") == "assistant" and has_media(m) for m in chat):
            sp = without_placeholders(renderer, chat, text, sp)  # a placeholder is never learned
        texts.append(text)
        spans.append(sp)
    return texts, spans


def assistant_spans(chats: Sequence[Sequence[Any]], template: str, **kwargs: Any) -> list[list[tuple[int, int]]]:
    """Only the spans of :func:`render_chats_with_spans` (same keyword arguments).

    Example:
        >>> from chatdata.templates import get_chat_template
        >>> assistant_spans([[{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]],
        ...                 get_chat_template("chatml_format"))
        [[(51, 62)]]
    """
    return render_chats_with_spans(chats, template, **kwargs)[1]
