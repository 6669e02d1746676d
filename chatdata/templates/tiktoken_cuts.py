"""The same ids without the split pattern's lookahead: cut the text where it would cut.

The split patterns of Qwen2/2.5/3, Llama 3 and Mistral's tekken end with
``\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+``. The lookahead ``(?!\\S)`` (a run of spaces gives its last
space to the word after it) is the only thing there that a plain regex engine cannot run, so
tiktoken runs the whole pattern on its slower backtracking engine. Drop the ``\\s+(?!\\S)``
alternative and the pattern runs on the fast one -- and gives the same pieces, provided the
text is first cut at every place the lookahead would have cut it:

- a cut goes before character ``c`` when ``c - 1`` is whitespace, ``c`` is whitespace other
  than ``\\r``/``\\n``, and ``c + 1`` is not whitespace. No piece of the full pattern spans such
  a place (the other alternatives hold whitespace only as their first character or as trailing
  ``\\r``/``\\n``, checked on the pattern's text), and nothing in the pattern looks behind, so
  the pieces of the cut parts are those of the whole text;
- inside a part, a whitespace run that reaches a non-space character either is one character
  long (both patterns take it alone) or ends in ``\\r``/``\\n`` (``\\s*[\\r\\n]+``, tried first,
  takes it whole in both): the lookahead never decides anything there.

Cuts are made by inserting an added token (the *mark*) that tiktoken splits on and whose ids are
dropped afterwards; the texts given here hold no added token. :func:`lookahead_free` builds it
only for a pattern of that known shape, and the twin checks its ids on the probe texts again.

Example:
    >>> import re
    >>> cut_re = re.compile(cut_pattern("<|im_end|>"))
    >>> cut_re.sub(lambda m: m.group() + "|", "a  b\\n  c d  <|im_end|>")
    'a | b\\n | c d  <|im_end|>'
"""
from __future__ import annotations

import re

import numpy as np

__all__ = ["LOOKAHEAD_TAIL", "plain_pattern", "cut_pattern", "lookahead_free", "LookaheadFree"]

LOOKAHEAD_TAIL = r"|\s*[\r\n]+|\s+(?!\S)|\s+"
# Unicode White_Space, what ``\s`` means in tiktoken's regex engines
_WS = "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
_WS_NOT_NEWLINE = "\t\x0b\x0c \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"

# the alternatives before the tail that are known to hold whitespace only first (an optional
# space or non-letter) or as trailing \r\n: contractions, words, numbers, punctuation runs
_LETTERS = r"(?:\\p\{(?:L[ultmo]?|M)\}|\[(?:\\p\{(?:L[ultmo]?|M)\})+\])[*+?]?"
_BRANCHES = [
    re.compile(r"\(\?i:'s\|'t\|'re\|'ve\|'m\|'ll\|'d\)"),
    re.compile(r"(?:\[\^\\r\\n\\p\{L\}\\p\{N\}\]\?| \?)?(?:" + _LETTERS + ")+"),
    re.compile(r"(?: \?)?\\p\{N\}(?:\+|\{\d+(?:,\d+)?\})?"),
    re.compile(r"(?: \?)?\[\^\\s\\p\{L\}\\p\{N\}\]\+(?:\[\\r\\n/?\]\*)?"),
]


def plain_pattern(pattern: str) -> str | None:
    """``pattern`` without its ``\\s+(?!\\S)`` alternative when it has the shape the cuts are
    proven for (see the module docstring), else None.

    Example:
        >>> plain_pattern(r"\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")
        '\\\\p{N}| ?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+'
        >>> plain_pattern(r"\\s+(?!\\S)|\\s+") is None
        True
    """
    if not pattern.endswith(LOOKAHEAD_TAIL):
        return None
    head = pattern[: -len(LOOKAHEAD_TAIL)]
    contractions = _BRANCHES[0].pattern.replace("\\", "")
    rest = head.replace(contractions, "", 1) if head.startswith(contractions) else head
    branches = [b for b in rest.split("|")] if rest else []
    if head.startswith(contractions):
        branches = branches[1:] if branches and branches[0] == "" else branches
    if not branches or not all(any(r.fullmatch(b) for r in _BRANCHES[1:]) for b in branches):
        return None
    return head + r"|\s*[\r\n]+|\s+"


def cut_pattern(separator: str) -> str:
    """The regex of the places to cut at (see the module docstring): it matches the whitespace
    character before each, so a cut goes at the end of every match. A place right before
    ``separator`` (the added token between joined texts) is not one: tiktoken cuts there already.
    (Matching that character, not an empty place behind a lookbehind, scans 2-3x faster.)"""
    return f"[{_WS}](?=[{_WS_NOT_NEWLINE}](?!{re.escape(separator)})[^{_WS}])"


class LookaheadFree:
    """A second tiktoken ``Encoding`` over the same ranks and added tokens with the plain
    pattern, and the cuts that make its ids those of the original (see the module docstring).
    """

    def __init__(self, encoding, separator: str, mark: str) -> None:
        self.encoding = encoding
        self.cut = re.compile(cut_pattern(separator))
        self.mark = mark
        self.mark_id = encoding.encode_single_token(mark)
        self.allowed = {separator, mark}
        self._insert = r"\g<0>" + mark.replace("\\", r"\\")  # the matched character, then the mark
        self.separator = separator

    def encode_joined(self, joined: str) -> np.ndarray:
        """The ids of ``joined`` -- texts without added tokens, joined by the separator -- as
        the original pattern gives them, int64."""
        marked, cuts = self._ascii_cuts(joined) if joined.isascii() else self.cut.subn(self._insert, joined)
        arr = self.encoding.encode_to_numpy(marked, allowed_special=self.allowed, disallowed_special=())
        return (arr[arr != self.mark_id] if cuts else arr).astype(np.int64)


    def _ascii_cuts(self, text: str) -> tuple[str, int]:
        """``cut.subn`` for ASCII text, with numpy over its bytes (a few passes at memory speed
        instead of Python's regex engine trying every character)."""
        if len(text) < 3:
            return text, 0
        kind = _ASCII_KIND[np.frombuffer(text.encode("ascii"), dtype=np.uint8)]  # bit 1: whitespace, 2: not \r\n
        places = np.flatnonzero(kind[:-2] & (kind[1:-1] >> 1) & ~kind[2:] & 1) + 1
        sep = self.separator
        cuts = [c for c in places.tolist() if not text.startswith(sep, c + 1)]
        if not cuts:
            return text, 0
        parts = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]
        return self.mark.join(parts), len(cuts)


_ASCII_KIND = np.zeros(256, dtype=np.uint8)
_ASCII_KIND[[9, 11, 12, 32]] = 3  # whitespace, not a newline
_ASCII_KIND[[10, 13]] = 1  # \n, \r


def _mark_for(specials: dict, separator: str) -> str | None:
    """An added token to cut with: no whitespace in it, neither it nor the separator inside
    the other."""
    ws = re.compile(f"[{_WS}]")
    for tok in sorted(specials, key=lambda s: (len(s), s)):
        if tok != separator and not ws.search(tok) and tok not in separator and separator not in tok:
            return tok
    return None


def lookahead_free(tiktoken, name: str, pattern: str, ranks: dict, specials: dict, separator: str):
    """A :class:`LookaheadFree` encoder for ``pattern`` or None (another shape, no usable mark,
    a separator with whitespace, or tiktoken refuses). The caller checks its ids.

    Example:
        >>> import tiktoken
        >>> ranks = {bytes([b]): b for b in range(256)}
        >>> pat = r"[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*" + LOOKAHEAD_TAIL
        >>> fast = lookahead_free(tiktoken, "demo", pat, ranks, {"<s>": 256, "<m>": 257}, "<s>")
        >>> fast.encode_joined("a  b<s>c").tolist() == [97, 32, 32, 98, 256, 99]
        True
    """
    plain = plain_pattern(pattern)
    if plain is None or re.search(f"[{_WS}]", separator):
        return None
    mark = _mark_for(specials, separator)
    if mark is None:
        return None
    try:
        encoding = tiktoken.Encoding(name, pat_str=plain, mergeable_ranks=ranks, special_tokens=specials)
    except Exception:  # noqa: BLE001 - tiktoken's regex engine refused the pattern
        return None
    return LookaheadFree(encoding, separator, mark)
