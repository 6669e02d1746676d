r"""Text scanning for turn placement (:mod:`.turns`): where headers, end-of-turn texts and
markers sit in a rendered chat. Pure functions of strings; no rendering.

Example:
    >>> _last_eot("a<|im_end|>\n<|im_start|>b", ["<|im_end|>"], 0, 5)
    (1, 11)
    >>> _first_opener("x<|im_end|><|im_start|>y", 0, 25, -1)
    11
"""
from __future__ import annotations

import re
from typing import Sequence

from .profile import _OPENER_RE, MARKER_RE


def _ends_with_header(text: str, lo: int, hi: int, header: str) -> bool:
    """Whether ``text[lo:hi]`` ends with a beginning of the generation header that names the role
    (up to ``assistant``, else its first line): ``<|im_start|>assistant\n`` of
    ``<|im_start|>assistant\n<think>\n``, ``<|assistant|>`` of ``<|assistant|><think>``."""
    i = header.lower().find("assistant")
    first = header[:i + len("assistant")] if i >= 0 else header.strip().split("\n")[0]
    if not first.strip():
        return False
    for n in range(len(header), 0, -1):
        h = header[:n]
        if first in h and hi - lo >= n and text.startswith(h, hi - n):
            return True
    return False

def _after_header_end(text: str, s: int, header: str) -> int:
    """After the longest end of the generation header (holding a marker or a word: ``<|im_start|>assistant\n``
    of Qwen1.5's ``<|im_end|>\n<|im_start|>assistant\n``) that the text holds at ``s``, after
    whitespace; else ``s``."""
    i = s + len(text[s:]) - len(text[s:].lstrip())
    for n in range(len(header), 0, -1):
        h = header[-n:]
        if (MARKER_RE.search(h) or re.search(r"[^\W\d_]{3}", h)) and text.startswith(h, i):
            return i + n
    return s

def _after_prompt_end(text: str, prompt: str, lo: int, hi: int) -> int | None:
    """The first place in ``text[lo:hi]`` right after an end of ``prompt`` that holds a whole
    marker (``[/INST]``), or None. A shorter end is a piece of markup any turn holds (``>\n``
    of DeepSeek's ``<｜Assistant｜><think>\n``, found after ``<｜User｜>``); a longer one found
    later is a later turn's (``\n[/INST]`` after a user message ``"\n"``)."""
    best = None
    for n in range(min(len(prompt), 400), 0, -1):
        tail = prompt[-n:]
        if not MARKER_RE.search(tail):
            break
        j = text.find(tail, lo, hi)
        if j >= 0 and (best is None or j + n < best):
            best = j + n
    return best

def _after_header(text: str, s: int, header: str) -> int:
    """After the generation header when it follows ``s`` (after whitespace): the prompt closed
    the previous turn where the history does not (a tool reply left open), else ``s``."""
    i = s + len(text[s:]) - len(text[s:].lstrip())
    for h in (header, header.strip()):
        if h.strip() and text.startswith(h, i):
            return i + len(h)
    return s

def _after_prompt_tail(text: str, s: int, rest: str) -> int:
    """After the longest end of ``rest`` (the prompt past where it stopped agreeing) that the
    text goes on with at ``s``, when what ``rest`` holds before that end is text, not markup;
    else ``s``. The prompt wrote text into an empty previous message that the whole chat does
    not (Mistral moves the system prompt into the last user turn: ``[INST]S\n\n[/INST]`` in
    the prompt, ``[INST][/INST]`` in the chat): the turn starts after the ``[/INST]`` both end
    with, not where they part. Markup alone (DeepSeek's prompt ``<think></think>`` against the
    chat's ``</think>``) is left to the rules that place it for any message."""
    for i in range(1, len(rest)):
        if rest[i:].strip() and text.startswith(rest[i:], s):
            return s if _only_markup(rest, 0, i) else s + len(rest) - i
    return s

def _only_markup(text: str, a: int, b: int) -> bool:
    return not MARKER_RE.sub("", text[a:b]).strip()

def _prompt_markup_end(text: str, s: int, rest: str) -> int:
    """The length of the longest end of ``rest`` (the prompt past where it stopped agreeing with
    the text at ``s``) that is markup only, starts with a marker and that the text goes on with at
    ``s``; 0 if none. DeepSeek-V3.2's prompt writes ``<think></think>``, its chat ``</think>``.

    Example:
        >>> _prompt_markup_end("</think>hi", 0, "<think></think>")
        8
        >>> _prompt_markup_end("</think>hi", 0, "<think>")
        0
    """
    for i in range(1, len(rest)):
        if MARKER_RE.match(rest, i) and _only_markup(rest, i, len(rest)) and text.startswith(rest[i:], s):
            return len(rest) - i
    return 0

def _skip_to_rest(text: str, s: int, rest: str, bound: int) -> int:
    """The prompt stopped agreeing with the text at ``s``; if the rest of the prompt (the
    generation header) follows after nothing but markup (a closing marker the template writes
    only when a turn follows), the turn starts after it. Not when the text at ``s`` already goes
    on with an end of the rest (:func:`_prompt_markup_end`): a rest found later is then the
    answer's own (an answer ``<think></think>...`` after DeepSeek-V3.2's ``</think>``)."""
    if rest.strip() and not _prompt_markup_end(text, s, rest):
        j = text.find(rest, s, bound)
        if j >= 0 and _only_markup(text, s, j):
            return j + len(rest)
    return s

def _last_eot(text: str, eots: Sequence[str], lo: int, hi: int) -> tuple[int, int] | None:
    """(start, end) of the end-of-turn text starting last in ``text[lo:hi]`` (may end after hi),
    with end-of-turn texts right before it joined (``<|end|>\n</s>``). One found inside a longer
    one (Kimi-K3's ``<|close|>`` in ``<|close|>response<|sep|><|close|>message...``) is that one."""
    hits = []
    for eot in eots:
        j = text.rfind(eot, lo, min(len(text), hi + len(eot) - 1))
        if j >= 0:
            hits.append((j, j + len(eot)))
    if not hits:
        return None
    best = max(hits, key=lambda h: (h[0], h[1]))  # on equal starts the longest wins
    best = max((h for h in hits if h[0] <= best[0] and h[1] >= best[1]), key=lambda h: h[1] - h[0])
    return _join_back(text, eots, lo, best[0]), best[1]

def _join_back(text: str, eots: Sequence[str], lo: int, j: int) -> int:
    """Start of the run of end-of-turn texts (and whitespace between them) ending at ``j``."""
    while True:
        i = j
        while i > lo and text[i - 1].isspace():
            i -= 1
        for eot in eots:
            if eot.strip() and i - len(eot) >= lo and text.startswith(eot, i - len(eot)):
                j = i - len(eot)
                break
        else:
            return j

def _first_eot(text: str, eots: Sequence[str], lo: int, hi: int) -> tuple[int, int] | None:
    best = None
    for eot in eots:
        j = text.find(eot, lo, hi)
        if j >= 0 and (best is None or j < best[0]):
            best = (j, j + len(eot))
    return best

def _next_header(text: str, header: str, lo: int, bound: int) -> int:
    """``bound``, or the start of the generation header when it comes first after ``lo``: the next
    assistant turn opens there, so this turn ends before it (a tool reply the template renders
    other than as its text cannot be found to bound the turn)."""
    h = header.strip()
    j = text.find(h, lo, bound) if h else -1
    return j if j >= 0 else bound

def _first_opener(text: str, lo: int, hi: int, default: int) -> int:
    """Start of the first marker in ``text[lo:hi]`` that opens something (``<|start|>``,
    ``<|begin_tool_result|>``), else ``default``."""
    for m in MARKER_RE.finditer(text, lo, hi):
        if _OPENER_RE.search(m.group(0)):
            return m.start()
    return default

def _marker_before(text: str, i: int, lo: int) -> int:
    """Start of a marker ending exactly at ``i`` (after skipping whitespace back), else ``i``."""
    j = i
    while j > lo and text[j - 1].isspace():
        j -= 1
    for m in MARKER_RE.finditer(text, max(lo, j - 80), j):
        if m.end() == j:
            return m.start()
    return i

def _marker_after(text: str, i: int, hi: int) -> int:
    """End of the marker (and whitespace) right after ``i``, else ``i``."""
    m = MARKER_RE.match(text, i + len(text[i:hi]) - len(text[i:hi].lstrip()))
    if m is None or m.end() > hi:
        return i
    j = m.end()
    while j < hi and text[j].isspace():
        j += 1
    return j

def _without_prompt_close(text: str, pieces: list[tuple[int, int]], header: str) -> list[tuple[int, int]]:
    r"""``pieces`` without the tag a turn starts with that closes the reasoning the generation
    header opens: a turn of the past whose reasoning the template dropped keeps only its
    ``</think>`` (DeepSeek-V3.2 with thinking: ``<｜Assistant｜></think>answer``), which
    ``mask_reasoning=False`` leaves out as it does the rest of a reasoning block.

    Example:
        >>> t = "<A></think>\nhi"
        >>> _without_prompt_close(t, [(3, 14)], "<A><think>\n")
        [(12, 14)]
    """
    m = None
    for m in MARKER_RE.finditer(header.rstrip()):
        pass
    tag = m.group(0) if m is not None and m.end() == len(header.rstrip()) else ""
    if not pieces or not tag.startswith("<") or tag.startswith(("</", "<|", "<｜")):
        return pieces
    a, b = pieces[0]
    i = a + len(text[a:b]) - len(text[a:b].lstrip())
    close = "</" + tag[1:]
    if not text.startswith(close, i) or i + len(close) > b:
        return pieces
    i += len(close)
    while i < b and text[i].isspace():
        i += 1
    return ([(i, b)] if i < b else []) + pieces[1:]
