r"""Where a message's own words sit in a rendered chat: the pieces that are its (content,
reasoning, tool-call argument values as templates write them), their first occurrences, and
the bounds they set (where its text ends, where the next message's text starts).

:mod:`.turns` and :mod:`.fast_turns` place assistant turns with these.

Example:
    >>> text = "<|im_start|>assistant\nok<|im_end|>\n<|im_start|>user\nok<|im_end|>\n"
    >>> chat = [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "ok"}]
    >>> _owned_end(text, chat, 0, 0, len(text)), _next_bound(text, chat, 0, 0)  # the user's "ok" is not its own
    (24, 52)
"""
from __future__ import annotations

import json

from .parts import message_texts
from .profile import MARKER_RE

def _text_of(message: dict) -> str:
    """The start of the message's content as templates render it at least: stripped, without a
    leading ``<think>...</think>`` block (several templates drop it); for content given as parts,
    its first text part."""
    texts = message_texts(message)
    return texts[0] if texts else ""


def _texts_end(text: str, message: dict, pos: int) -> int | None:
    """End of the message's last text in ``text``, its texts found in order from ``pos``; None
    if one is missing."""
    for body in message_texts(message):
        j = text.find(body, pos)
        if j < 0:
            return None
        pos = j + len(body)
    return pos


def _message_end(text: str, message: dict, pos: int) -> int:
    """End of ``message``'s content in ``text`` at or after ``pos``, or ``pos`` if not found."""
    end = _texts_end(text, message, pos)
    return pos if end is None else end


def _next_bound(text: str, chat: list, k: int, pos: int) -> int:
    """Where the next non-assistant message's content starts (``len(text)`` if none found),
    skipping occurrences inside message ``k``'s own words (a tool reply may repeat the call's
    arguments) and inside markers. Message ``k``'s words are their first occurrences from
    ``pos``, as many as it has: a user who repeats the assistant's reply ("ok" after "ok") is
    not its words."""
    for j in range(k + 1, len(chat)):
        if chat[j].get("role") == "assistant":
            continue
        body = _text_of(chat[j])
        i = text.find(body, pos) if body else -1
        if i < 0:
            return len(text)
        pieces = [p for p in _owned_pieces(chat[k]) if body in p] if chat[k].get("role") == "assistant" else []
        own = _own_spans(text, pieces, pos) if pieces else []  # only words that hold the body can cover it
        while i >= 0 and (any(a <= i and i + len(body) <= b for a, b in own) or _inside_marker(text, i, len(body))):
            i = text.find(body, i + 1)
        return i if i >= 0 else len(text)
    return len(text)


def _inside_marker(text: str, i: int, n: int) -> bool:
    """Whether ``text[i:i + n]`` is part of a marker, not all of it (a user message ``"1"``
    found in Nemotron's ``<SPECIAL_12>``, ``"a"`` in gpt-oss's ``<|start|>``). A marker holds
    no ``<`` or ``[`` after its first character: one that holds ``i`` starts at the last of them."""
    lo = max(0, i - 66)
    for j in (text.rfind("<", lo, i + 1), text.rfind("[", lo, i + 1)):
        m = MARKER_RE.match(text, j) if j >= 0 else None
        if m and i + n <= m.end() and (j, m.end()) != (i, i + n):
            return True
    return False


def _own_spans(text: str, pieces: list[str], pos: int) -> list[tuple[int, int]]:
    """``[start, end)`` of the first occurrences from ``pos`` of a message's ``pieces`` (its
    content, reasoning and tool-call argument values; a piece it holds twice: its first two).
    A piece is never found inside a marker (an argument ``"a"`` in ``<|im_start|>``) nor inside
    a longer piece found already (an argument ``"Paris"`` in the content "Checking Paris" is the
    one the tool call writes after it)."""
    spans: list[tuple[int, int]] = []
    counts: dict[str, int] = {}
    for p in pieces:
        if p:
            counts[p] = counts.get(p, 0) + 1
    for p in sorted(counts, key=len, reverse=True):
        a = pos - 1
        for _ in range(counts[p]):
            a = text.find(p, a + 1)
            while a >= 0 and (_inside_marker(text, a, len(p)) or
                              any(x <= a and a + len(p) <= y for x, y in spans)):
                a = text.find(p, a + 1)
            if a < 0:
                break
            spans.append((a, a + len(p)))
    return spans


def _owned_pieces(message: dict) -> list[str]:
    """The message's content, reasoning and tool-call argument values. A blank argument value
    (``"\n"``) is not one: it is found in any template's layout (the newline after the next
    header), which would carry the turn's end past the message that follows."""
    pieces = message_texts(message) + _reasoning_texts(message)
    for call in message.get("tool_calls") or ():
        fn = call.get("function", call) if isinstance(call, dict) else None
        args = fn.get("arguments") if isinstance(fn, dict) else None
        if isinstance(args, dict):
            for v in args.values():
                if isinstance(v, str) and v.strip():
                    pieces += _written_forms(v)
        elif isinstance(args, str) and args.strip():
            pieces.append(args)
    return pieces


def _written_forms(value: str) -> list[str]:
    """``value`` as templates write an argument: as is, and escaped inside JSON (``tojson``, with
    or without ``ensure_ascii``) or a Python repr (``{{ arguments }}``): a value holding a newline,
    a quote or a backslash (code, paths) is found where it is written escaped."""
    forms = [value]
    if value.isascii() and value.isprintable() and '"' not in value and "'" not in value and "\\" not in value:
        return forms
    for form in (json.dumps(value, ensure_ascii=False)[1:-1], json.dumps(value)[1:-1], repr(value)[1:-1]):
        if form not in forms:
            forms.append(form)
    return forms


def _owned_end(text: str, chat: list, k: int, s: int, bound: int) -> int:
    """The furthest end, in ``text[s:bound]``, of message ``k``'s content, reasoning and tool-call
    argument values (``s`` if none is found): their first occurrences from ``s``, not the last
    ones before ``bound``, which may sit in the markup after the turn (a reply ``"s"`` in the
    ``<|user|>`` that follows it), and none at or after the next assistant message's text (an
    argument the template does not write, ``"x"``, found in a later answer)."""
    for j in range(k + 1, len(chat)):
        body = _text_of(chat[j]) if chat[j].get("role") == "assistant" else ""
        if body:
            i = text.find(body, s, bound)
            bound = i if i >= 0 else bound
            break
    return max([s] + [b for a, b in _own_spans(text, _owned_pieces(chat[k]), s) if b <= bound])


def _reasoning_texts(message: dict) -> list[str]:
    out = []
    r = message.get("reasoning_content")
    if isinstance(r, str) and r.strip():
        out.append(r.strip())
    content = message.get("content")
    if isinstance(content, str) and "</think>" in content:
        inner = content.split("</think>", 1)[0].split("<think>", 1)[-1].strip()
        if inner:
            out.append(inner)
    return out
