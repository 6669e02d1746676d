"""Where the content of a system, user or tool message sits in a rendered chat.

The mask engine places assistant turns (:mod:`.turns`); this module places the other roles, for
``train_on=("tool", ...)`` and loss weights. What is trained of such a message:

- its **content as the template renders it**: the text the template writes in place of the
  content (trimmed, JSON-quoted, moved into another turn -- wherever the template puts it), and
  for content given as a list of parts, the text of each ``{"type": "text"}`` part (image, video
  and audio placeholders are never trained);
- with ``mask_eot`` (the default), **the end of its turn** when the template closes it with an
  end-of-turn text of the template (the one that closes assistant turns), right after the content
  and closing tags: ``<|im_end|>``, ``</tool_response><|im_end|>``, ``<|eot_id|>``,
  ``<end_of_turn>``; nothing when the next turn simply opens (``[/INST]``, ``<｜Assistant｜>``);
- never the role header or the markup the template puts before the content.

How: the chat is rendered once more with each such content replaced by a marker word. The
rendering around the markers equals the real one, so the real text between two agreeing pieces is
exactly the rendered content. When a template renders the substituted chat differently (it looks
at the content), each message is tried alone (one render each), and last the content text is
searched after the previous message. Content that is in none of these raises
:class:`UnplaceableTurnError`.

Example:
    >>> from chatdata.templates import get_chat_template
    >>> from chatdata.templates.render import Renderer
    >>> from chatdata.templates.profile import template_profile
    >>> r = Renderer(get_chat_template("chatml_format"))
    >>> chat = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]
    >>> text = r.render(chat)
    >>> spans = message_spans(r, chat, text, [0], profile=template_profile(r))
    >>> [text[s:e] for s, e in spans[0]]
    ['hi<|im_end|>']
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Sequence

from .errors import TemplateError, UnplaceableTurnError
from .profile import TemplateProfile
from .render import Renderer

__all__ = ["message_spans", "content_slots"]

_CLOSING_RE = re.compile(r"</[^<>\s]{1,64}>|\[/[A-Z_]{1,64}\]")
_RENDER_ERRORS = (TemplateError, TypeError)


def content_slots(message: Mapping) -> list[tuple[int | None, str]]:
    """``(part index or None, text)`` of each piece of ``message``'s content that can be trained:
    the content string, or the text of each text part (non-blank only).

    Example:
        >>> content_slots({"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "what?"}]})
        [(1, 'what?')]
    """
    content = message.get("content")
    if isinstance(content, str):
        return [(None, content)] if content.strip() else []
    if isinstance(content, (list, tuple)):
        return [(j, p["text"]) for j, p in enumerate(content)
                if isinstance(p, Mapping) and p.get("type") == "text" and isinstance(p.get("text"), str)
                and p["text"].strip()]
    return []


def _marker_base(text: str, chat: Sequence[Mapping]) -> str:
    base = "Vqzslot"
    blob = text + repr(list(chat))
    while base in blob:
        base += "q"
    return base


def _substituted(chat: Sequence[Mapping], marks: dict) -> list:
    """``chat`` with the slot ``(k, part)`` texts replaced by ``marks[(k, part)]`` (new dicts)."""
    out = list(chat)
    for (k, part), marker in marks.items():
        m = dict(out[k])
        if part is None:
            m["content"] = marker
        else:
            parts = [dict(p) if isinstance(p, Mapping) else p for p in m["content"]]
            parts[part]["text"] = marker
            m["content"] = parts
        out[k] = m
    return out


def _place_together(text: str, rendered: str, marks: dict, values: dict) -> dict | None:
    """Spans of all slots from one rendering with every slot substituted, or None when the
    rendering around the markers does not agree with ``text``."""
    found = []
    for slot, marker in marks.items():
        i = rendered.find(marker)
        if i < 0 or rendered.find(marker, i + 1) >= 0:
            return None
        found.append((i, slot, marker))
    found.sort()
    out: dict = {}
    pt = pr = 0
    for n, (i, slot, marker) in enumerate(found):
        seg = rendered[pr:i]
        if not text.startswith(seg, pt):
            return None
        s = pt + len(seg)
        pr = i + len(marker)
        last = n + 1 == len(found)
        nxt = rendered[pr: found[n + 1][0] if not last else len(rendered)]
        e = None
        for cand in (values[slot], values[slot].strip()):
            if text.startswith(cand, s) and text.startswith(nxt, s + len(cand)) and (
                    not last or s + len(cand) + len(nxt) == len(text)):
                e = s + len(cand)
                break
        if e is None:
            if last:
                e = len(text) - len(nxt) if text.endswith(nxt) else -1
            else:
                e = text.find(nxt, s) if nxt else -1
            if e < s:
                return None
        out[slot] = (s, e)
        pt = e
    return out if text[pt:] == rendered[pr:] else None


def _place_alone(text: str, rendered: str, marker: str) -> tuple[int, int] | None:
    i = rendered.find(marker)
    if i < 0 or rendered.find(marker, i + 1) >= 0:
        return None
    pre, post = rendered[:i], rendered[i + len(marker):]
    if text.startswith(pre) and text.endswith(post) and len(pre) + len(post) <= len(text):
        return len(pre), len(text) - len(post)
    return None


def _end_of_turn(text: str, e: int, eots: Sequence[str]) -> int:
    """After ``e``: whitespace and closing tags, then an end-of-turn text -> the end of that
    text; anything else first -> ``e``."""
    i = e
    while i < len(text):
        for eot in eots:
            if eot and text.startswith(eot, i):
                return i + len(eot)
        m = _CLOSING_RE.match(text, i)
        if m:
            i = m.end()
        elif text[i].isspace():
            i += 1
        else:
            break
    return e


def _render(renderer: Renderer, chat: list, continued: Any) -> str | None:
    try:
        return renderer.render(chat, continue_final_message=continued)
    except _RENDER_ERRORS:
        return None


def message_spans(renderer: Renderer, chat: Sequence[Mapping], text: str, messages: Sequence[int], *,
                  profile: TemplateProfile, mask_eot: bool = True, continue_final_message: Any = False,
                  where: Any = None) -> dict[int, list[tuple[int, int]]]:
    """``{message index: [(start, end), ...]}``: the trained character spans of each message in
    ``messages`` (any role) of the normalised ``chat`` rendered as ``text`` (see the module
    docstring). A message with no text to train maps to ``[]``. ``where(k, reason)`` words the
    error of a message that cannot be placed.
    """
    slots = {(k, part): value for k in messages for part, value in content_slots(chat[k])}
    out: dict[int, list[tuple[int, int]]] = {k: [] for k in messages}
    if not slots:
        return out
    base = _marker_base(text, chat)
    marks = {slot: f"{base}{n}x" for n, slot in enumerate(slots)}
    rendered = _render(renderer, _substituted(chat, marks), continue_final_message)
    placed = _place_together(text, rendered, marks, slots) if rendered is not None else None
    if placed is None:
        placed = {}
        floor = 0
        for slot, marker in marks.items():
            one = _render(renderer, _substituted(chat, {slot: marker}), continue_final_message)
            got = _place_alone(text, one, marker) if one is not None else None
            if got is None:
                body = slots[slot].strip()
                j = text.find(body, floor)
                got = (j, j + len(body)) if j >= 0 else None
            if got is None:
                k = slot[0]
                reason = "its content is not in the rendering (the template drops or rewrites it)"
                raise UnplaceableTurnError(where(k, reason) if callable(where) else
                                           f"cannot place message {k} ({chat[k].get('role')}): {reason}")
            placed[slot] = got
            floor = got[1]
    for (k, _part), (s, e) in sorted(placed.items(), key=lambda kv: kv[1]):
        if e <= s:
            reason = "the template renders nothing of its content"
            raise UnplaceableTurnError(where(k, reason) if callable(where) else
                                       f"cannot place message {k} ({chat[k].get('role')}): {reason}")
        out[k].append((s, e))
    if mask_eot:
        for k, spans in out.items():
            if spans and chat[k].get("is_complete") is not False:  # an unfinished message never wrote it
                s, e = spans[-1]
                spans[-1] = (s, _end_of_turn(text, e, profile.eots))
    return out
