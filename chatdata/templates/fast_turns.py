"""The one-render fast path of assistant-turn placement, and when a template may use it.

:func:`~chatdata.templates.turns.turn_bounds` places each turn with two prefix renderings of
the chat, which costs several renders per chat. For most templates the turns can be read off
the rendered text alone, with the template's :class:`~chatdata.templates.profile.TemplateProfile`:
after the previous message's text and nothing but markup comes the generation header, and the
turn ends with the first end-of-turn text after everything the message says (its content,
reasoning and tool-call arguments) and before the next message's text.

A template may use the fast path when, on the probe chats of :mod:`.probes` (plain,
tool-calling, reasoning), it places every turn exactly as the prefix renderings do; this is
checked once per template and variables. For each chat the fast path also gives up (and the
prefix renderings are used) as soon as something is not where it expects it.
"""
from __future__ import annotations

from typing import Any

from .errors import TemplateError
from .probes import probe_chats, tool_name_of
from .profile import TemplateProfile
from .render import Renderer, prepare_chat
from .message_words import _next_bound, _owned_end, _owned_pieces, _texts_end
from .parts import message_texts
from .turn_text import _first_eot, _join_back, _only_markup
from .turns import turn_bounds

_FAST_OK: dict[tuple, bool] = {}


def fast_bounds(chat: list, text: str, profile: TemplateProfile, *, continued: bool = False):
    """Turn bounds as :func:`~chatdata.templates.turns.turn_bounds` gives them, read off the
    text alone; None when something is not where the fast path expects it.

    Example:
        >>> from chatdata.templates import get_chat_template
        >>> from chatdata.templates.profile import template_profile
        >>> r = Renderer(get_chat_template("chatml_format"))
        >>> chat = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]
        >>> fast_bounds(chat, r.render(chat), template_profile(r))
        [(1, 52, 64, 54)]
    """
    header, eots = profile.header, profile.eots
    if not header.strip() or not eots:
        return None
    turns = []
    floor = 0
    last = len(chat) - 1
    for k, m in enumerate(chat):
        if m.get("role") != "assistant":
            end = _texts_end(text, m, floor)
            if end is None or end == floor and not message_texts(m):
                return None  # not found, or nothing to find: an empty message sets no floor (a
                # header the template writes for it, deepseek-coder's for an empty tool reply, is not the answer's)
            floor = end
            continue
        if k == 0 or chat[k - 1].get("role") == "assistant":
            return None
        if any(e.strip() and e in piece for piece in _owned_pieces(m) for e in eots):
            return None  # its words hold an end-of-turn text: its first occurrence may be the template's
            # (GigaChat's <|message_sep|> after an empty content, before the argument that quotes it)
        j = text.find(header, floor)
        if j < 0 or not _only_markup(text, floor, j):
            return None
        s = j + len(header)
        if continued and k == last:
            turns.append((k, s, len(text), len(text)))
            floor = len(text)
            continue
        bound = _next_bound(text, chat, k, s)
        owned = _owned_end(text, chat, k, s, bound)
        hit = _first_eot(text, eots, owned, bound)
        if hit is None:
            return None
        start, end = _join_back(text, eots, owned, hit[0]), hit[1]
        while True:  # end-of-turn texts right after it belong to it (<|end|>\n</s>)
            i = end
            while i < bound and text[i].isspace():
                i += 1
            nxt = next((e for e in eots if e.strip() and text.startswith(e, i)), None)
            if nxt is None or i + len(nxt) > bound:
                break
            end = i + len(nxt)
        turns.append((k, s, end, start))
        floor = end
    return turns


def fast_path_ok(renderer: Renderer, profile: TemplateProfile) -> bool:
    """Whether the fast path places the probe chats' turns exactly as prefix renderings do
    (cached per template and variables).

    Example:
        >>> from chatdata.templates import get_chat_template
        >>> from chatdata.templates.profile import template_profile
        >>> r = Renderer(get_chat_template("qwen"))
        >>> fast_path_ok(r, template_profile(r))
        True
    """
    key = (renderer.template, repr(sorted((k, repr(v)) for k, v in renderer.variables.items())))
    ok = _FAST_OK.get(key)
    if ok is None:
        ok = _FAST_OK[key] = _check(renderer, profile)
    return ok


def _check(renderer: Renderer, profile: TemplateProfile) -> bool:
    tried = 0
    for chats in probe_chats(tool_name_of(renderer.variables.get("tools"))).values():
        for chat in chats:
            chat = prepare_chat(chat)
            try:
                text = renderer.render(chat)
            except (TemplateError, TypeError):
                continue
            tried += 1
            try:
                slow = turn_bounds(renderer, chat, text, profile)
            except TemplateError:
                return False
            if fast_bounds(chat, text, profile) != slow:
                return False
    return tried > 0


def bounds_for(renderer: Renderer, chat: list, text: str, profile: TemplateProfile, *, continued: bool = False,
               where: Any = None, fast: bool = True):
    """Turn bounds of one chat: the fast path when the template allows it and it succeeds,
    else prefix renderings."""
    if fast:
        got = fast_bounds(chat, text, profile, continued=continued)
        if got is not None:
            return got
    return turn_bounds(renderer, chat, text, profile, continued=continued, where=where)
