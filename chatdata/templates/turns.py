"""Where each assistant turn sits in a rendered chat: the text the model must learn.

For assistant message ``k`` of a chat rendered as ``text``:

1. **Start** -- after the generation prompt. ``render(messages[:k], add_generation_prompt=True)``
   is the prompt a model sees before it writes turn ``k``; the turn starts where that prompt
   stops agreeing with ``text`` (its length when it is a prefix). Whatever the prompt holds --
   the role header, a ``<think>`` opener some templates add -- is never learned, nor closing markup
   of the prompt the turn writes without its opener (DeepSeek-V3.2's ``</think>`` for the prompt's
   ``<think></think>``: :func:`_past_prompt_markup`). If that render
   fails or disagrees with ``text`` before the previous message ends (a system prompt the
   template moves into the last user turn), the start is found after what the prompt writes after
   the previous message, or after the profile's generation header. A closing marker the template
   writes only when a turn follows (``<|im_end|>`` after a tool reply) is skipped.
2. **End** -- ``render(messages[:k + 1])`` (the conversation stopping after turn ``k``) agrees
   with ``text`` up to a point ``c`` near the turn's end. The turn ends after the last
   end-of-turn text (:mod:`.profile`) starting before ``c``; if there is none (the template
   rendered turn ``k`` differently as a final turn, e.g. with its reasoning), after the first one
   at or after ``c`` that comes before the next message's text. Shared text after the turn is
   cut where the next turn opens (a marker with ``start``/``begin`` in its name). Templates with
   no end-of-turn text end the turn with the stop marker that opens the next turn (``<|user|>``,
   ``<|observation|>``, from the probes); a final turn of such a template ends where its text
   ends. Text of the message the template writes later, before the next assistant turn
   (Gemma-4 writes a tool-calling turn's text after the tool's reply), is a piece of its own.
3. Everything between start and end is learned: reasoning, content and tool calls as the
   template writes them, and the end of the turn. ``mask_reasoning=False`` leaves the rendered
   reasoning block (``<think>...</think>`` and its markers) out; ``mask_eot=False`` leaves the
   end-of-turn text out (content-only masks, as torchrl's History gives).

A turn that holds something to learn but cannot be placed raises :class:`UnplaceableTurnError`.
"""
from __future__ import annotations

import re
from typing import Any, Sequence

from .errors import TemplateError, UnplaceableTurnError
from .message_words import (_message_end, _next_bound, _own_spans, _owned_end, _owned_pieces, _reasoning_texts,
                            _text_of)
from .parts import message_texts
from .profile import _FRAGMENT_RE, _OPENER_RE, MARKER_RE, TemplateProfile, common_prefix_len, first_marker
from .render import Renderer
from .turn_text import (_after_header, _after_header_end, _after_prompt_end, _after_prompt_tail, _ends_with_header,
                        _first_eot, _first_opener, _last_eot, _marker_after, _marker_before, _next_header,
                        _only_markup, _prompt_markup_end, _skip_to_rest, _without_prompt_close)

_RENDER_ERRORS = (TemplateError, TypeError)


class _Prefixes:
    """Renderings of the chat's first ``n`` messages, each done once (None if the template
    raises on that prefix), and how far each agrees with the whole ``text`` (:meth:`agreement`,
    also once: a turn's start, opening and prompt markup all ask it of the same prompt)."""

    __slots__ = ("renderer", "chat", "text", "memo", "agreed")

    def __init__(self, renderer: Renderer, chat: list, text: str) -> None:
        self.renderer, self.chat, self.text, self.memo, self.agreed = renderer, chat, text, {}, {}

    def agreement(self, n: int, agp: bool) -> int:
        """:func:`_agreement` of the rendering of the first ``n`` messages with ``text``."""
        key = (n, agp)
        if key not in self.agreed:
            self.agreed[key] = _agreement(self(n, agp), self.text)
        return self.agreed[key]

    def __call__(self, n: int, agp: bool) -> str | None:
        key = (n, agp)
        if key not in self.memo:
            try:
                self.memo[key] = self.renderer.render(self.chat[:n], add_generation_prompt=agp)
            except _RENDER_ERRORS:
                self.memo[key] = None
        return self.memo[key]


def _agreement(prefix: str | None, text: str) -> int:
    """How far ``prefix`` agrees with ``text`` (-1 when it could not be rendered), backed off
    to before a marker the two only half share (``<|assistant|><think>`` vs ``...|></think>``)."""
    if prefix is None:
        return -1
    if text.startswith(prefix):
        return len(prefix)
    n = common_prefix_len(prefix, text)
    m = _FRAGMENT_RE.search(text, max(0, n - 70), n)
    return m.start() if m else n


def _start(pre: _Prefixes, k: int, text: str, profile: TemplateProfile, floor: int) -> int | None:
    chat = pre.chat
    prompt = pre(k, True)
    s = pre.agreement(k, True)
    if prompt is not None and s == len(prompt) and s >= floor:
        h = profile.header.strip()
        if k and chat[k - 1].get("role") == "assistant" and h and not prompt.rstrip().endswith(h):
            # after an assistant message the template writes no generation header (at most the
            # previous turn's end): the header of this second answer in a row is in the text
            return _after_header_end(text, s, profile.header)
        return s
    if prompt is not None and s >= floor:
        j = _own_text_before(text, s, chat[k])
        if j is not None and j >= floor:
            return j
    if k and chat[k - 1].get("role") != "assistant":
        body = _text_of(chat[k - 1])
        floor = _message_end(text, chat[k - 1], floor)
        if not body and prompt is not None and s < len(prompt):
            # an empty message before the turn marks nothing to start after, and the prompt
            # disagrees (tools moved into the last user turn): after the prompt's longest end
            # found after where the prompt stops agreeing and before what the turn says. A turn
            # of the past may get no part of a generation prompt that opens more (Qwen3.5 and
            # Nemotron-Nano-v2 open `<think>` only after the last user message, Command R7B
            # writes `<|START_THINKING|><|END_THINKING|>` only in the prompt): that end is found
            # only in a later turn or in the system prompt (Command R7B's tool preamble quotes
            # `<|END_THINKING|>`), and the turn starts where the prompt stops agreeing
            lo = max(floor, s)
            got = _after_prompt_end(text, prompt, lo, _before_own_words(text, chat, k, lo, floor))
            if got is not None:
                return got
        if s >= floor:
            start = _skip_to_rest(text, s, prompt[s:], _next_bound(text, chat, k - 1, s))
            if start == s and not body:  # an empty message: nothing of it to find in the text
                start = _after_prompt_tail(text, s, prompt[s:])
            if start > s:
                return start
            start = _after_header(text, s, profile.header)
            if start > s or (body and body in text) or pre.agreement(k - 1, False) <= s:
                return start
            # a message with nothing rendered (empty, or content the template does not write)
            # gives no floor: where the prompt stops agreeing may lie before it, in text the
            # template words by the chat's length (Llama Guard's "'User' messages" / "'Agent'
            # messages" at the top), which the chat before that message still agrees with: no
            # turn starts there
        if body and prompt is not None and body in prompt:
            # the prompt renders earlier text differently (a system prompt moved into the last
            # user turn): match what it writes after the previous message instead
            tail = prompt[prompt.rindex(body) + len(body):]
            if tail.strip() and text.startswith(tail, floor):
                return floor + len(tail)
            # the prompt's header differs from the one the turn got as a turn of the past
            # (Qwen3.5 opens `<think>` only after the last user message): the turn starts where
            # the tail stops agreeing, once the tail's closing markup and header agree
            n = _agreement(tail, text[floor:floor + len(tail)])
            if _ends_with_header(text, floor, floor + n, profile.header):
                return floor + n
    elif s >= floor:
        return _skip_to_rest(text, s, prompt[s:] if prompt else "", len(text))
    header = profile.header
    bound = _next_bound(text, chat, k, floor)  # a header after the next message opens a later turn
    for h in (header, header.strip()):
        if h:
            j = text.find(h, floor, bound)
            if j >= 0:
                return j + len(h)
    return None


def _before_own_words(text: str, chat: list, k: int, lo: int, floor: int) -> int:
    """Where message ``k``'s first words (content, reasoning, tool-call arguments) are found from
    ``lo``, or where the next message's text starts if it comes first: its turn starts before."""
    hi = _next_bound(text, chat, k, floor)
    return min([a for a, _ in _own_spans(text, _owned_pieces(chat[k]), lo) if a < hi], default=hi)


def _own_text_before(text: str, s: int, message: dict) -> int | None:
    """Where the message's text starts, when it starts before ``s`` and runs past it: the prompt
    went on like the answer by chance (Apriel-1.6's ``Here are my reasoning steps:`` against the
    answer "Here you go", which lost its ``Here``)."""
    body = _text_of(message)
    if len(body) < 2:
        return None
    j = text.find(body, max(0, s - len(body) + 1), s - 1 + len(body))
    return j if 0 <= j < s else None


def _end(pre: _Prefixes, k: int, text: str, s: int, profile: TemplateProfile) -> tuple[int, int]:
    """(end of the turn, start of its end-of-turn text)."""
    chat = pre.chat
    c = max(pre.agreement(k + 1, False), s)
    bound = _next_bound(text, chat, k, s)
    owned = _owned_end(text, chat, k, s, bound)  # first occurrences: not a short content's match in later markup
    bound = _next_header(text, profile.header, max(c, owned), bound)
    c = _first_opener(text, owned, min(c, bound), c)  # shared text after the turn: cut where the next opens
    if profile.eots:
        hit = _last_eot(text, profile.eots, s, c)
        if hit is not None and hit[0] < owned:  # an end-of-turn text inside what the message says
            hit = None
        if hit is None:
            hit = _first_eot(text, profile.eots, max(c, owned), bound)
        if hit is not None:
            return hit[1], hit[0]
    said = _trim_openers(text, s, max(c, owned), chat[k])  # the end of what the turn says
    if owned > c or bound < len(text):
        # the turn goes on after the point the conversation-final rendering stopped agreeing:
        # it ends where the next turn opens
        c = _first_opener(text, max(c, owned), bound, max(c, owned))
    c = _trim_openers(text, s, c, chat[k])
    said = min(said, c)
    closed = next((x for x in profile.stops if text[s:c].rstrip().endswith(x)), None)
    if closed:  # the turn already ends with a stop marker (Hy3's eos after tool calls): no second one
        return c, min(said, s + len(text[s:c].rstrip()) - len(closed))
    if k + 1 < len(chat):
        stop = first_marker(text, c)
        if stop and stop in profile.stops:
            return text.index(stop, c) + len(stop), said
        # markup closing what the turn says (`</arg_value></tool_call>`) before the stop marker: a
        # turn of the past that agrees with no prefix rendering (GLM-5.1 drops its `<think>`)
        hit = _first_eot(text, profile.stops, c, bound)
        if hit is not None and hit[0] > c and _only_markup(text, c, hit[0]):
            return hit[1], len(text[:hit[0]].rstrip())
    return c, said


def _trim_openers(text: str, s: int, c: int, message: dict) -> int:
    """``c`` moved back over trailing whitespace and markers that open the next turn."""
    while True:
        while c > s and text[c - 1].isspace() and not _content_ends_with_space(message):
            c -= 1
        m = None
        for m in MARKER_RE.finditer(text, max(s, c - 80), c):
            pass
        if m is None or m.end() != c or not _OPENER_RE.search(m.group(0)) or m.start() < s:
            return c
        c = m.start()


def _without_reasoning(text: str, s: int, e: int, message: dict) -> list[tuple[int, int]]:
    """``[(s, e)]`` with the rendered reasoning block (markers included) cut out."""
    pieces = [(s, e)]
    for body in _reasoning_texts(message):
        for n, (a, b) in enumerate(pieces):
            j = text.find(body, a, b)
            if j < 0:
                continue
            lo = _marker_before(text, j, a)
            if not text[a:lo].strip():
                lo = a
            hi = _marker_after(text, j + len(body), b)
            pieces[n: n + 1] = [p for p in ((a, lo), (hi, b)) if p[1] > p[0]]
            break
    return pieces


def _has_work(message: dict) -> bool:
    return bool(message_texts(message) or message.get("tool_calls") or _reasoning_texts(message))


def turn_spans(renderer: Renderer, chat: list, text: str, profile: TemplateProfile, *,
               mask_reasoning: bool = True, mask_eot: bool = True, continued: bool = False,
               where: Any = None, bounds: list | None = None) -> list[tuple[int, int]]:
    """Character spans to learn of every assistant turn of one rendered, normalised chat.

    ``continued``: the text was rendered with ``continue_final_message`` (the final turn is
    open: it is learned up to where the text stops). ``where`` names the template and chat in
    errors: a callable ``(message_index, reason) -> str``. ``bounds``: turns already placed
    (see :func:`turn_bounds`).

    Example:
        >>> from chatdata.templates import get_chat_template
        >>> from chatdata.templates.profile import template_profile
        >>> r = Renderer(get_chat_template("chatml_format"))
        >>> chat = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]
        >>> text = r.render(chat)
        >>> [text[s:e] for s, e in turn_spans(r, chat, text, template_profile(r))]
        ['yo<|im_end|>']
    """
    if bounds is None:
        bounds = turn_bounds(renderer, chat, text, profile, continued=continued, where=where)
    spans: list[tuple[int, int]] = []
    for n, (k, s, e, eot) in enumerate(bounds):
        message = chat[k]
        limit = bounds[n + 1][1] if n + 1 < len(bounds) else len(text)
        own_eot = mask_eot and message.get("is_complete") is not False  # an unfinished reply never wrote it
        if not own_eot:
            e = eot
            while e > s and text[e - 1].isspace() and not _content_ends_with_space(message):
                e -= 1
        pieces = [(s, e)] if mask_reasoning else _without_prompt_close(
            text, _without_reasoning(text, s, e, message), profile.header)
        pieces += _stray_pieces(text, message, s, e, limit, profile, own_eot)
        spans.extend(p for p in pieces if p[1] > p[0])
    return spans


def turn_bounds(renderer: Renderer, chat: list, text: str, profile: TemplateProfile, *,
                continued: bool = False, where: Any = None) -> list[tuple[int, int, int, int]]:
    """``(message index, start, end, end-of-turn start)`` of every assistant turn, placed with
    prefix renderings (see the module docstring).

    Example:
        >>> from chatdata.templates import get_chat_template
        >>> from chatdata.templates.profile import template_profile
        >>> r = Renderer(get_chat_template("chatml_format"))
        >>> chat = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]
        >>> turn_bounds(r, chat, r.render(chat), template_profile(r))
        [(1, 52, 64, 54)]
    """
    pre = _Prefixes(renderer, chat, text)
    turns = []
    floor = 0
    last = len(chat) - 1
    for k, message in enumerate(chat):
        if message.get("role") != "assistant":
            continue
        s = _start(pre, k, text, profile, floor)
        if s is None:
            if _has_work(message):
                raise UnplaceableTurnError(_describe(where, k, "its start (the generation prompt) is not in the rendering"))
            continue
        if not _opened(pre, k, text, s, profile, floor) and not _says_here(text, chat, k, s):
            continue  # an answer the template does not render (GLM-4's empty one or tool calls): nothing to learn
        s = _past_prompt_markup(pre(k, True), text, s, profile.header, pre.agreement(k, True))
        if continued and k == last:
            e = eot = len(text)
        else:
            e, eot = _end(pre, k, text, s, profile)
        if e <= s:
            if _has_work(message):
                raise UnplaceableTurnError(_describe(where, k, "the template renders nothing of it"))
            continue
        turns.append((k, s, e, eot))
        floor = max(floor, e)
    return turns


def _past_prompt_markup(prompt: str | None, text: str, s: int, header: str, agreed: int | None = None) -> int:
    """After the closing markup of the generation prompt that the turn writes without its opener.

    When the turn starts where the prompt stops agreeing with the text (``s``), or right after a
    beginning of the generation ``header``, and the text goes on with an end of the prompt's (the
    header's) rest that is markup only, that markup is the prompt's, written shorter:
    DeepSeek-V3.2's prompt ends ``<｜Assistant｜><think></think>``, its turns of the chat
    ``<｜Assistant｜></think>``. The model is given ``<think></think>`` and writes the answer, so the
    ``</think>`` is not learned. A rest that only opens (``<think>``) is not skipped: closing it is
    the turn's. Else ``s``.

    Example:
        >>> _past_prompt_markup("<A><think></think>", "<A></think>hi", 3, "<A><think></think>")
        11
        >>> _past_prompt_markup("<A><think>", "<A></think>hi", 3, "<A><think>")  # the prompt opened it
        3
    """
    if agreed is None:  # how far ``prompt`` agrees with ``text``, when the caller has not measured it
        agreed = _agreement(prompt, text)
    if prompt is not None and agreed == s and s < len(prompt):
        return s + _prompt_markup_end(text, s, prompt[s:])
    for n in range(min(len(header) - 1, s), 0, -1):  # the prompt disagrees earlier (systems gathered at the top)
        if text.startswith(header[:n], s - n) and _ends_with_header(text, s - n, s, header):
            return s + _prompt_markup_end(text, s, header[n:])
    return s


def _opened(pre: _Prefixes, k: int, text: str, s: int, profile: TemplateProfile, floor: int) -> bool:
    """Whether turn ``k`` is opened in the text at ``s``: the prompt before it agrees with the text
    up to ``s``, or the text before ``s`` ends with a beginning of the generation header (True
    when the template has none to look for)."""
    prompt = pre(k, True)
    if prompt is not None and pre.agreement(k, True) == len(prompt) == s:
        return True
    header = profile.header
    if not header.strip() or _ends_with_header(text, floor, s, header):
        return True
    for n in range(len(header), 0, -1):  # a beginning of it, holding a marker or a word
        h = header[:n]
        if s - n >= floor and text.startswith(h, s - n) and (MARKER_RE.search(h) or re.search(r"[^\W\d_]{3}", h)):
            return True
    return False


def _says_here(text: str, chat: list, k: int, s: int) -> bool:
    """Whether message ``k``'s own words (content, reasoning, tool-call arguments) are in the text
    from ``s`` on, before the next message's."""
    hi = _next_bound(text, chat, k, s)
    return any(a < hi for a, _ in _own_spans(text, _owned_pieces(chat[k]), s))


def _stray_pieces(text: str, message: dict, s: int, e: int, limit: int, profile: TemplateProfile,
                  mask_eot: bool) -> list[tuple[int, int]]:
    """The message's content when the template writes it outside its turn, later, before the
    next assistant turn (Gemma-4 writes a tool-calling turn's text after the tool's reply)."""
    body = _text_of(message) if isinstance(message.get("content"), str) else ""
    if not body or text.find(body, s, e) >= 0:
        return []
    j = text.find(body, e, limit)
    if j < 0:
        return []
    end = j + len(body)
    if mask_eot:
        k = end
        while k < limit and text[k].isspace():
            k += 1
        for eot in profile.eots:
            if text.startswith(eot, k):
                end = k + len(eot)
                break
    return [(j, end)]


def _describe(where: Any, k: int, reason: str) -> str:
    if callable(where):
        return where(k, reason)
    return f"cannot place assistant message {k}: {reason}"


def tagged_spans_with_options(text: str, spans: Sequence[tuple[int, int]], chat: list, profile: TemplateProfile,
                              *, mask_reasoning: bool = True, mask_eot: bool = True) -> list[tuple[int, int]]:
    """``{% generation %}`` spans with the options applied: ``mask_eot=False`` drops the
    end-of-turn texts a span ends with, ``mask_reasoning=False`` cuts the reasoning of any
    assistant message found in a span. When there is one span per assistant message, the span of
    an unfinished one (``is_complete: False``) drops them too: the model never wrote them.

    Example:
        >>> tagged_spans_with_options("a<|im_end|>", [(0, 11)], [], TemplateProfile(["<|im_end|>"]), mask_eot=False)
        [(0, 1)]
    """
    out: list[tuple[int, int]] = []
    assistants = [m for m in chat if m.get("role") == "assistant"]
    quoting = [p for m in assistants for p in _owned_pieces(m) if any(x in p for x in profile.eots)]
    one_each = len(spans) == len(assistants)
    for n, (s, e) in enumerate(spans):
        if not mask_eot or one_each and assistants[n].get("is_complete") is False:
            hit = _last_eot(text, profile.eots, s, e) if profile.eots else None
            if hit is not None and not text[hit[1]:e].strip():
                # an answer that quotes the end-of-turn text keeps it: the end is the one after it
                said = [j + len(p) for p in quoting for j in [text.find(p, s, hit[1])]
                        if j >= 0 and any(x in text[j + len(p):e] for x in profile.eots)]
                e = max([hit[0]] + said)
        pieces = [(s, e)]
        if not mask_reasoning:
            for m in assistants:
                cut = []
                for a, b in pieces:
                    cut += _without_reasoning(text, a, b, m)
                pieces = cut
        out += [p for p in pieces if p[1] > p[0]]
    return out


def _content_ends_with_space(message: dict) -> bool:
    content = message.get("content")
    return isinstance(content, str) and content[-1:].isspace()
