"""Messages whose ``content`` is a list of parts (text, image, video, audio), for the mask engine.

A multimodal chat gives ``content`` as ``[{"type": "image"}, {"type": "text", "text": "..."}]``.
Templates write text parts as text and a *placeholder* for each other part (``<|image_pad|>``,
``<image>``, ``[IMG]``, ``<start_of_image>``, ...). The mask engine needs two things from this:

- the texts of a message, in order (:func:`message_texts`), to find where it sits in a rendering;
- where the placeholders of an assistant message are (:func:`placeholder_ranges`), because a
  placeholder is never trained, even inside a turn that is: it stands for data the model does not
  write. The ranges come from the template itself: the chat is rendered once more with the
  message's non-text parts removed, and what the first rendering has in addition is a placeholder.

Example:
    >>> message_texts({"role": "user", "content": [{"type": "image"}, {"type": "text", "text": " hi "}]})
    ['hi']
    >>> message_texts({"role": "assistant", "content": "<think>x</think> yo"})
    ['yo']
"""
from __future__ import annotations

import difflib
from typing import Any

from .errors import TemplateError
from .profile import MARKER_RE, common_prefix_len

__all__ = ["message_texts", "has_media", "placeholder_ranges", "without_placeholders"]

_TEXT_TYPES = frozenset({"text", "input_text", "output_text"})


def _is_text_part(part: Any) -> bool:
    return isinstance(part, dict) and part.get("type") in _TEXT_TYPES and isinstance(part.get("text"), str)


def message_texts(message: dict) -> list[str]:
    """The non-empty, stripped texts of a message in order: its string content -- for an
    assistant message without a leading ``<think>...</think>`` block (several templates drop
    it; they write other roles' content as it is) -- or its text parts.

    Example:
        >>> message_texts({"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": ""}]})
        ['a']
        >>> message_texts({"role": "user", "content": "what does </think> mean?"})
        ['what does </think> mean?']
    """
    content = message.get("content")
    if isinstance(content, str):
        if "</think>" in content and message.get("role") == "assistant":
            content = content.split("</think>", 1)[1]
        content = content.strip()
        return [content] if content else []
    if isinstance(content, (list, tuple)):
        return [p["text"].strip() for p in content if _is_text_part(p) and p["text"].strip()]
    return []


def has_media(message: dict) -> bool:
    """Whether the message's content holds a part that is not text (image, video, audio, ...).

    Example:
        >>> has_media({"role": "user", "content": [{"type": "image", "url": "x.png"}]}), has_media({"content": "hi"})
        (True, False)
    """
    content = message.get("content")
    return isinstance(content, (list, tuple)) and any(isinstance(p, dict) and not _is_text_part(p) for p in content)


def _without_media(message: dict) -> dict:
    parts = [p for p in message["content"] if not (isinstance(p, dict) and not _is_text_part(p))]
    return dict(message, content=parts)


def _aligned(text: str, a: int, b: int) -> tuple[int, int]:
    """Of the equal ways to cut ``text[a:b]`` out (the block slid left or right over repeated
    characters), the first that starts and ends at marker boundaries ('<|IMG_PATCH|>', not
    '|><|IMG_PATCH'), else the leftmost."""
    while a > 0 and text[a - 1] == text[b - 1]:
        a, b = a - 1, b - 1
    i, j = a, b
    while True:
        m = MARKER_RE.match(text, i)
        if m and any(x.end() == j for x in MARKER_RE.finditer(text, i, j)):
            return i, j
        if j >= len(text) or text[i] != text[j]:
            return a, b
        i, j = i + 1, j + 1


def placeholder_ranges(renderer: Any, chat: list, k: int, text: str, lo: int, hi: int) -> list[tuple[int, int]]:
    """Character ranges inside ``text[lo:hi]`` that the template writes for the non-text parts
    of message ``k`` (``text`` is the rendering of ``chat``): what a rendering with those parts
    removed does not have. ``[]`` when the message has none, or when that rendering fails.

    Example:
        >>> from chatdata.templates import Renderer
        >>> r = Renderer("{% for m in messages %}{% for p in m.content %}{% if p.type == 'text' %}"
        ...              "{{ p.text }}{% else %}<img>{% endif %}{% endfor %}|{% endfor %}")
        >>> chat = [{"role": "assistant", "content": [{"type": "text", "text": "see"}, {"type": "image"}]}]
        >>> text = r.render(chat)
        >>> [text[a:b] for a, b in placeholder_ranges(r, chat, 0, text, 0, len(text))]
        ['<img>']
    """
    if not has_media(chat[k]):
        return []
    try:
        alt = renderer.render(chat[:k] + [_without_media(chat[k])] + chat[k + 1:])
    except (TemplateError, TypeError):
        return []
    # only the middle where the two differ is compared (a placeholder is a few characters)
    head = common_prefix_len(text, alt)
    n = min(len(text), len(alt)) - head
    tail = common_prefix_len(text[::-1][:n], alt[::-1][:n])
    matcher = difflib.SequenceMatcher(None, text[head:len(text) - tail], alt[head:len(alt) - tail], autojunk=False)
    out = []
    for op, a, b, _, _ in matcher.get_opcodes():
        if op in ("delete", "replace"):
            a, b = a + head, b + head
            if op == "delete":
                a, b = _aligned(text, a, b)
            a, b = max(a, lo), min(b, hi)
            if b > a:
                out.append((a, b))
    return out


def without_placeholders(renderer: Any, chat: list, text: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``spans`` (of the rendering ``text`` of ``chat``) without the placeholders of the
    assistant messages that hold media parts: a placeholder is never learned, also inside a
    ``{% generation %}`` block.

    Example:
        >>> from chatdata.templates import Renderer
        >>> r = Renderer("{% for m in messages %}{% for p in m.content %}{% if p.type == 'text' %}"
        ...              "{{ p.text }}{% else %}<img>{% endif %}{% endfor %}{% endfor %}")
        >>> chat = [{"role": "assistant", "content": [{"type": "text", "text": "a"}, {"type": "image"}]}]
        >>> without_placeholders(r, chat, r.render(chat), [(0, 6)])
        [(0, 1)]
    """
    for k, m in enumerate(chat):
        if m.get("role") != "assistant" or not has_media(m):
            continue
        for a, b in placeholder_ranges(renderer, chat, k, text, 0, len(text)):
            out = []
            for s, e in spans:
                out += [(s, e)] if b <= s or a >= e else [p for p in ((s, a), (b, e)) if p[1] > p[0]]
            spans = out
    return spans
