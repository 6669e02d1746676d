"""Assistant turns of a chat whose texts collide, placed where the collision cannot mislead.

:mod:`.turns` and :mod:`.fast_turns` find a message by searching for its text. That is exact as
long as each text occurs once in the rendering, and silently wrong when it does not: a reply
``"s"`` is also found in ``User:`` or ``<|message|>``, a user message equal to the system
prompt is found where the system prompt is, an answer quoting ``<|im_start|>assistant`` looks
like a turn of its own. Such a chat is *ambiguous* (:func:`ambiguous`).

An ambiguous chat is rendered once more with every message's content replaced by a word that
occurs nowhere else (as :mod:`.message_spans` does for other roles). Where the rendering around
those words equals the real one, the turns are placed on that chat, which holds no collision,
and carried back: the text between two agreeing pieces is exactly the content the word stood
for. Where it does not (the template looks at the content and renders the word differently),
the caller places the turns on the real text as before.

Example:
    >>> from chatdata.templates import get_chat_template
    >>> from chatdata.templates.profile import template_profile
    >>> r = Renderer(get_chat_template("chatml_format"))
    >>> chat = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "a"}]
    >>> text = r.render(chat)
    >>> ambiguous(chat, text, template_profile(r))  # "a" is also in "assistant"
    True
"""
from __future__ import annotations

from bisect import bisect_right
from typing import Any

from .fast_turns import bounds_for
from .message_spans import _place_together, _substituted, content_slots
from .message_words import _owned_pieces, _reasoning_texts
from .profile import MARKER_RE, TemplateProfile
from .render import Renderer
from .turns import turn_spans

__all__ = ["ambiguous", "place_turns"]


def ambiguous(chat: list, text: str, profile: TemplateProfile) -> bool:
    """Whether searching for a message's text in ``text`` may find the wrong place: the text of
    one message (content or reasoning) equals another's, holds template markup (a marker, an
    end-of-turn text, the generation header), or occurs again near where it is rendered (within
    :data:`NEAR` characters: in a header, the next or the previous message). The placement looks
    for a message's words within its own turn, so an occurrence far away (the same word a hundred
    turns later) cannot mislead it; looking only nearby keeps this check linear in the chat's
    length. Tool-call arguments, which tool replies and answers often repeat ("Tokyo"), are placed
    as the call's own words already (:func:`~.message_words._next_bound`)."""
    slots = [(m, v) for m in chat for _, v in content_slots(m)]
    texts = [v.strip() for _, v in slots]
    bodies = [b for b in texts if b] + [b for m in chat for b in _reasoning_texts(m) if b]
    if len(set(bodies)) < len(bodies):  # equal texts: also where one is not rendered (a prompt's copy)
        return True
    # markup matters only in the texts a unique word replaces: an answer holding its reasoning
    # (`<think>...</think>`, what Qwen3 and DeepSeek-R1 write) and reasoning_content stay as they
    # are in the marked copy, so a second render could not help them (and most agentic chats hold one)
    joined = "\0".join(t for (m, v), t in zip(slots, texts) if not _parsed_by_templates(m, v))
    header = profile.header.strip()
    if _has_marker(joined) or (header and header in joined) or any(e in joined for e in profile.eots):
        return True
    cursor = 0
    for body in texts:  # reasoning is not replaced
        i = _find(text, body, cursor)  # in rendering order as a rule: each after the one before
        if i < 0:
            i = _find(text, body, 0, cursor)  # rendered out of order (a system prompt written last)
            if i < 0:
                continue  # not rendered
        else:
            cursor = i + len(body)
        if _find(text, body, max(0, i - NEAR), i + len(body) - 1) >= 0 \
                or _find(text, body, i + 1, i + len(body) + NEAR) >= 0:
            return True
    return False


def _find(text: str, body: str, start: int, end: int | None = None) -> int:
    """``text.find(body, start, end)``, looking for a long ``body`` by its first 32 characters:
    str.find prepares a long needle in time of its length on every call, which made this check
    cost more than rendering."""
    if len(body) <= 32:
        return text.find(body, start, end)
    probe, stop = body[:32], len(text) if end is None else min(end, len(text))
    i = text.find(probe, start, stop)
    while 0 <= i <= stop - len(body):
        if text.startswith(body, i):
            return i
        i = text.find(probe, i + 1, stop)
    return -1


NEAR = 1024
"""How far (in characters) from where a message is rendered :func:`ambiguous` looks for its text
again: more than a template's headers between two messages."""


def _has_marker(s: str) -> bool:
    """Whether ``s`` holds template markup (:data:`~.profile.MARKER_RE`), tried only where a
    marker can start (every marker starts with ``<`` or ``[``): a regex search over whole texts
    cost as much as the rest of the check."""
    for opener in "<[":
        i = s.find(opener)
        while i >= 0:
            if MARKER_RE.match(s, i):
                return True
            i = s.find(opener, i + 1)
    return False


class _Marked:
    """The chat with its contents replaced by unique words, its rendering, and the map of its
    positions back to the real text."""

    __slots__ = ("chat", "text", "ms", "me", "ts", "te")

    def __init__(self, chat: list, text: str, ms: list, me: list, ts: list, te: list) -> None:
        self.chat, self.text, self.ms, self.me, self.ts, self.te = chat, text, ms, me, ts, te

    def to_text(self, p: int) -> int | None:
        """Position ``p`` of the marked text in the real text; None inside a marker word."""
        n = bisect_right(self.ms, p) - 1  # the last marker word starting at or before p
        if n < 0:
            return p
        if p == self.ms[n]:
            return self.ts[n]
        if p < self.me[n]:
            return None
        return self.te[n] + p - self.me[n]


def _marked(renderer: Renderer, chat: list, text: str, continued: Any) -> _Marked | None:
    slots = {(k, part): value for k, m in enumerate(chat) for part, value in content_slots(m)
             if not _parsed_by_templates(m, value)}
    if not slots:
        return None
    replaced = {v.strip() for v in slots.values()}
    kept = {p for m in chat if m.get("role") == "assistant" for p in _owned_pieces(m) if p and p not in replaced}
    marks = _marker_words(list(slots), text, chat, kept)
    if marks is None:
        return None
    marked = _substituted(chat, marks)
    try:
        rendered = renderer.render(marked, continue_final_message=continued)
    except Exception:  # noqa: BLE001 - any refusal of the marked chat: place on the real text
        return None
    # a word the template dropped (a system prompt it writes only before a final user turn)
    # marks nothing; the rendering around the others must still equal the text
    marks = {s: m for s, m in marks.items() if m in rendered}
    placed = _place_together(text, rendered, marks, slots)
    if placed is None:
        return None
    order = sorted((rendered.index(marks[slot]), slot) for slot in placed)
    return _Marked(marked, rendered, [i for i, _ in order], [i + len(marks[slot]) for i, slot in order],
                   [placed[slot][0] for _, slot in order], [placed[slot][1] for _, slot in order])


_LETTERS = "ZQJXKVWYBCDFGHLMNPRSTzqjxkvwybcdfghlmnprst"


def _marker_words(slots: list, text: str, chat: list, kept: set) -> dict | None:
    """A word per slot, all of one length, that occurs nowhere in the chat, and in which no word
    kept as it is (a tool-call argument ``"x"``) can be found: none holds a kept word's first
    character. None when too few letters are left."""
    avoid = {w[0] for w in kept}
    letters = [c for c in _LETTERS if c not in avoid]
    if len(letters) < 4:
        return None
    head, end, digits = letters[0], letters[1], letters[2:]
    width, n = 1, len(slots)
    while len(digits) ** width < n:
        width += 1

    def spell(i: int) -> str:
        out = ""
        for _ in range(width):
            i, r = divmod(i, len(digits))
            out += digits[r]
        return out

    base = head * 3
    blob = text + repr(chat)
    while base in blob:
        base += head
    return {slot: f"{base}{spell(i)}{end}" for i, slot in enumerate(slots)}


def place_turns(renderer: Renderer, chat: list, text: str, profile: TemplateProfile, *, continued: bool = False,
                where: Any = None, fast: bool = True, spans: bool = False, mask_reasoning: bool = True,
                mask_eot: bool = True) -> tuple[list, list | None]:
    """``(bounds, spans)`` of the assistant turns of one rendered, normalised chat: the turn
    bounds ``(k, start, end, eot start)`` of :func:`~.fast_turns.bounds_for` and, with ``spans``,
    the spans to learn of :func:`~.turns.turn_spans` (else None). An :func:`ambiguous` chat is
    placed with its contents replaced by unique words where the template renders that chat as
    ``text`` around them (see the module docstring)."""
    def placed(c: list, t: str) -> tuple[list, list | None]:
        bounds = bounds_for(renderer, c, t, profile, continued=continued, where=where, fast=fast)
        return bounds, (turn_spans(renderer, c, t, profile, mask_reasoning=mask_reasoning, mask_eot=mask_eot,
                                   bounds=bounds) if spans else None)

    marked = _marked(renderer, chat, text, continued) if ambiguous(chat, text, profile) else None
    if marked is not None:
        bounds, sp = placed(marked.chat, marked.text)
        got_b = [(b[0], *map(marked.to_text, b[1:])) for b in bounds]
        got_s = [tuple(map(marked.to_text, p)) for p in sp] if spans else None
        if not any(None in b for b in got_b + (got_s or [])):  # no bound inside a marker word
            return got_b, got_s
    return placed(chat, text)


def _parsed_by_templates(message: dict, value: str) -> bool:
    """An assistant content that templates take apart (reasoning before ``</think>``): it is
    kept, so that its reasoning can still be found (``mask_reasoning=False``). Not when it has no
    reasoning to find and holds markup besides its think tags (an answer quoting QwQ's whole
    generation prompt ``<|im_start|>assistant\n<think>\n</think>``): it is replaced, as any
    answer that quotes markup, else the quoted header is taken for the turn's own."""
    if message.get("role") != "assistant" or "</think>" not in value:
        return False
    if value.split("</think>", 1)[0].split("<think>", 1)[-1].strip():
        return True
    return not _has_marker(value.replace("<think>", "").replace("</think>", ""))
