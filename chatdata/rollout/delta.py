"""The text a template adds after the last kept assistant turn: render, then diff strings.

After the policy generated a response (kept verbatim as ids) and new messages arrived (tool
results, a user turn), the rollout needs the text that follows the response in a render of the
conversation, up to and including the next generation prompt. Only that text is tokenized.

The rule (anchor on the last kept assistant turn's end, not on a whole-string prefix):

1. Render ``context + [assistant] + new messages`` with the generation prompt (``X``) and
   ``context`` alone with it (``S``); the assistant turn starts at ``P``, the length of their
   common prefix (``len(S)`` for templates that only append).
2. If the decoded response ``R`` sits in ``X`` at ``P`` (the template re-renders what the model
   wrote), the new text is ``X[P + len(R):]``. This also covers a response cut before its EOT:
   the template's EOT is then part of the new text.
3. Otherwise the template rewrote the turn (Qwen3 dropping ``<think>``, tool-call JSON written
   differently): the turn ends at its end-of-turn marker, the ``n+1``-th EOT of ``X`` where
   ``S`` holds ``n``; the new text starts after it (at it, for a response that had no EOT).

``context`` is the *fixed base*: the leading system messages and the last user message before
the assistant turn, so a turn costs one render of a few messages, never of the whole chat
(verl's fixed-base delta). The first time a template meets a kind of turn (its signature: the
roles around it), the fixed-base text is checked against the same rule applied with the whole
conversation as context; a template that fails the check (its output for a message depends
on far-away messages) is rendered whole from then on, and a kind of turn whose small base the
template refuses to render is rendered whole.

Example:
    >>> from chatdata.templates import Renderer, get_chat_template
    >>> d = TurnDelta(Renderer(get_chat_template("chatml_format")), "<|im_end|>")
    >>> chat = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"},
    ...         {"role": "user", "content": "and?"}]
    >>> d.after_turn(chat, 1, "yo<|im_end|>", True, {})
    '\\n<|im_start|>user\\nand?<|im_end|>\\n<|im_start|>assistant\\n'
"""
from __future__ import annotations

import hashlib

from ..templates import Renderer, TemplateError
from ..templates.profile import common_prefix_len  # the mask engine's; re-exported here
from .recent import RecentCache

__all__ = ["TurnDelta", "common_prefix_len"]

class _Known:
    """What the checks found for one template key: per kind of turn (signature), whether the
    fixed base agrees; and whether the template is rendered whole (a check failed, or its facts
    say the fixed base does not hold)."""

    __slots__ = ("verified", "whole")

    def __init__(self) -> None:
        self.verified: dict[tuple, bool] = {}
        self.whole = False


# template key -> _Known, for the most recent keys (a key holds the tools and template variables:
# a server sees new ones every session). A TurnDelta keeps its own, so an eviction never makes a
# live conversation forget that its template is rendered whole; a new one checks afresh.
_KNOWN = RecentCache(1024)


def known_for(key: str) -> _Known:
    """The checks' findings for template ``key`` (new and empty for a key not seen lately)."""
    k = _KNOWN.get(key)
    if k is None:
        k = _Known()
        _KNOWN[key] = k
    return k


def _nth(text: str, needle: str, n: int) -> int:
    pos = -len(needle)
    for _ in range(n + 1):
        pos = text.find(needle, pos + len(needle))
        if pos < 0:
            return -1
    return pos


class TurnDelta:
    """Finds the text after a kept assistant turn for one template (see the module docstring)."""

    def __init__(self, renderer: Renderer, eot: str) -> None:
        self.renderer = renderer
        self.eot = eot
        self.key = hashlib.sha1(repr((renderer.template, sorted(renderer.variables.items(), key=str))).encode()).hexdigest()
        self.known = known_for(self.key)

    def render(self, chat: list[dict], gen: bool = True) -> str:
        return self.renderer.render(chat, add_generation_prompt=gen)

    # -- the cut ----------------------------------------------------------------------------
    def cut(self, x: str, s: str, response: str | None, complete: bool) -> str:
        """The text of ``x`` after the assistant turn that starts where ``x`` leaves ``s``."""
        p = common_prefix_len(s, x)
        if response is not None and x.startswith(response, p):
            return x[p + len(response):]
        if self.eot:
            pos = _nth(x, self.eot, s.count(self.eot))
            if pos >= p:
                return x[pos + (len(self.eot) if complete else 0):]
        if response is None:
            return x[p:]
        return x[p + common_prefix_len(response, x[p:p + len(response)]):]  # last resort: what matches

    # -- the two contexts -------------------------------------------------------------------
    @staticmethod
    def base_indices(chat: list[dict], a_idx: int, last_user: int | None) -> list[int]:
        """Indices of the fixed base of the turn at ``a_idx``: leading system messages and the
        last user message before it."""
        head = 0
        while head < a_idx and chat[head].get("role") == "system":
            head += 1
        idx = list(range(head))
        if last_user is not None and head <= last_user < a_idx:
            idx.append(last_user)
        return idx

    def whole(self, chat: list[dict], a_idx: int, response: str | None, complete: bool) -> str:
        """The text after the turn at ``a_idx``, rendering the whole conversation."""
        return self.cut(self.render(chat), self.render(chat[:a_idx]), response, complete)

    def fixed(self, chat: list[dict], a_idx: int, base: list[int], response: str | None, complete: bool,
              cache: dict) -> str:
        """The text after the turn at ``a_idx``, rendering only the fixed base, the turn and what
        follows it. ``cache`` (per row) keeps the base's render between turns."""
        key = tuple(base)
        if cache.get("base") != key:
            cache["base"], cache["s"] = key, self.render([chat[i] for i in base])
        x = self.render([chat[i] for i in base] + chat[a_idx:])
        return self.cut(x, cache["s"], response, complete)

    def after_turn(self, chat: list[dict], a_idx: int, response: str | None, complete: bool, cache: dict,
                   last_user: int | None = None) -> str:
        """The text after the assistant turn at ``a_idx`` (a fixed-base render when the template
        has passed the check for this kind of turn, else a whole render)."""
        known = self.known
        if known.whole:
            return self.whole(chat, a_idx, response, complete)
        if last_user is None:
            last_user = next((i for i in range(a_idx - 1, -1, -1) if chat[i].get("role") == "user"), None)
        base = self.base_indices(chat, a_idx, last_user)
        sig = self.signature(chat, a_idx, base)
        ok = known.verified.get(sig)
        if ok:
            try:
                return self.fixed(chat, a_idx, base, response, complete, cache)
            except TemplateError:
                known.verified[sig] = False
        truth = self.whole(chat, a_idx, response, complete)
        if ok is None:
            try:
                agrees = known.verified[sig] = self.fixed(chat, a_idx, base, response, complete, {}) == truth
                if not agrees:  # the template looks at far-away messages: render it whole
                    known.whole = True
            except TemplateError:  # the template refuses the small base: this kind of turn goes whole
                known.verified[sig] = False
        return truth

    @staticmethod
    def signature(chat: list[dict], a_idx: int, base: list[int]) -> tuple:
        turn = chat[a_idx]
        return (len(base), bool(base) and base[-1] != a_idx - 1, bool(turn.get("tool_calls")),
                "reasoning_content" in turn, tuple(m.get("role") for m in chat[a_idx + 1:]))

    # -- template facts -----------------------------------------------------------------------
    def agrees_on(self, chat: list[dict]) -> bool:
        """Whether the fixed-base and whole renders give the same text after every assistant
        turn of ``chat`` that is followed by other messages."""
        for k, msg in enumerate(chat[:-1]):
            if msg.get("role") != "assistant":
                continue
            nxt = next((j for j in range(k + 1, len(chat)) if chat[j].get("role") == "assistant"), len(chat))
            part = chat[:nxt]
            last_user = next((i for i in range(k - 1, -1, -1) if chat[i].get("role") == "user"), None)
            try:
                fixed = self.fixed(part, k, self.base_indices(part, k, last_user), None, True, {})
                whole = self.whole(part, k, None, True)
            except TemplateError:
                return False
            if fixed != whole:
                return False
        return True
