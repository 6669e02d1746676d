"""The end of an assistant turn: the one place that works out a template's end-of-turn text.

A template's end-of-turn text (``<|im_end|>`` for ChatML, ``<|eot_id|>`` for Llama 3, ``</s>`` for
Mistral) is read off two renderings of the same assistant message: what the template writes
after it when another turn follows (``tail_next``), and when the conversation ends there
(``tail_end``). What both write, without a trailing partial marker, cut before any marker that
opens something (``start`` / ``begin`` in its name), is what closes the turn whatever follows.
:func:`end_of_turn` gives it, with the whitespace that follows it in both renderings.

Two corner cases are decided by the caller, as named options, because masks and rollouts need
different answers:

* ``whitespace_end``: when only whitespace closes a turn and the conversation (RWKV-world's
  ``"\\n\\n"``), that whitespace is the end-of-turn text. The masks train it (the model must write it
  to stop); a rollout leaves it out of the EOT and keeps it as the text after it.
* ``differing_final_marker``: when the two renderings share nothing but the conversation's end does
  write something (gpt-oss closes the last turn with ``<|return|>``, the others with ``<|end|>``),
  the first marker of ``tail_next`` is the end-of-turn text. The masks take it; a rollout does not
  (the policy stops on either).

The marker patterns every probe of the template engine shares live here too.

Example:
    >>> end_of_turn("<|im_end|>\\n<|im_start|>user\\n", "<|im_end|>\\n")
    EndOfTurn(text='<|im_end|>', after='\\n')
"""
from __future__ import annotations

import re
from typing import NamedTuple

__all__ = ["EndOfTurn", "end_of_turn", "first_marker", "common_prefix_len", "MARKER_RE", "FRAGMENT_RE",
           "OPENER_RE"]

# a special-token-like marker: <|x|>, <｜x｜>, <x> / </x>, [X] / [/X]
MARKER_RE = re.compile(r"<\|[^<>|]{0,64}\|>|<｜[^<>｜]{0,64}｜>|</?[^<>\s]{1,64}>|\[/?[A-Z_]{1,64}\]")
# the start of a marker cut off at the end of a text (``<|im_``)
FRAGMENT_RE = re.compile(r"(?:<\||<｜|<|\[)[\w~-]*\Z")
# a marker that opens something (the next turn's header) rather than closing one
OPENER_RE = re.compile(r"start|begin", re.IGNORECASE)


class EndOfTurn(NamedTuple):
    """``text`` closes an assistant turn; ``after`` is the whitespace both renderings write after it."""

    text: str
    after: str


def first_marker(text: str, pos: int = 0) -> str:
    """The special-token-like marker at ``text[pos:]`` after whitespace, or ''.

    Example:
        >>> first_marker("\\n<|user|>\\nhi")
        '<|user|>'
    """
    i = pos
    while i < len(text) and text[i].isspace():
        i += 1
    m = MARKER_RE.match(text, i)
    return m.group(0) if m else ""


def common_prefix_len(a: str, b: str) -> int:
    """Length of the common prefix of ``a`` and ``b``.

    Example:
        >>> common_prefix_len("abcd", "abxy")
        2
    """
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # binary search on slices: C-speed comparisons
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _shared_close(tail_next: str, tail_end: str) -> str:
    """What both tails write first, without a trailing partial marker, cut before an opener."""
    shared = FRAGMENT_RE.sub("", tail_next[: common_prefix_len(tail_next, tail_end)])
    for m in MARKER_RE.finditer(shared):
        if OPENER_RE.search(m.group(0)):
            return shared[: m.start()]
    return shared


def end_of_turn(tail_next: str, tail_end: str, *, whitespace_end: bool = True,
                differing_final_marker: bool = True) -> EndOfTurn:
    """The end-of-turn text from what follows an assistant message when another turn follows
    (``tail_next``) and when the conversation ends there (``tail_end``); see the module docstring
    for the rule and the two options (both on: what the masks train; both off: a rollout's EOT).

    Example:
        >>> end_of_turn("<|end|><|start|>user", "<|return|>").text
        '<|end|>'
        >>> end_of_turn("<|end|><|start|>user", "<|return|>", differing_final_marker=False).text
        ''
        >>> end_of_turn("\\n\\nUser:", "\\n\\n")
        EndOfTurn(text='\\n\\n', after='')
        >>> end_of_turn("\\n\\nUser:", "\\n\\n", whitespace_end=False)
        EndOfTurn(text='', after='\\n\\n')
        >>> end_of_turn("<|user|>", "").text
        ''
    """
    shared = _shared_close(tail_next, tail_end)
    if whitespace_end and shared and not shared.strip() and shared == tail_end:
        return EndOfTurn(shared, "")  # only whitespace ends a turn, and the conversation
    text = shared.rstrip()
    if text or not differing_final_marker or not tail_end.strip():
        return EndOfTurn(text, shared[len(text):])
    return EndOfTurn(first_marker(tail_next), "")
