"""Word and word n-gram hashes of many texts at once, for near-duplicates and decontamination.

Normalization (the definition): format characters (Unicode category Cf in the Basic Multilingual
Plane: zero-width spaces and joiners, soft hyphens, byte-order marks, bidi controls) are dropped,
then NFKC and case folding (``str.casefold``); a *word* is a maximal run of letters, digits,
underscores (regex ``\\w``) and combining marks (Unicode M of the BMP, variation selectors left
out: the vowel signs of Devanagari and other Indic scripts are part of their words, so ``"काम"``
and ``"कम"`` differ), except that each character of a script written without spaces (Han,
kana, Thai, Lao, Khmer, Myanmar: :data:`SOLO_CHARS`) is a word by itself, so a Chinese text is
compared character by character; everything else separates words. ``"Don't STOP!"`` gives the
words ``don``, ``t``, ``stop``; ``"ＳＴＲＡ\\u00adSSE"`` and ``"straße"`` both give ``strasse``, so a
benchmark prompt copied with full-width letters, ligatures or zero-width characters is still found.
ASCII texts take a byte-level path (one ``bytes.translate`` over the chunk, one ``split``): for
them the rule is lowercasing; other texts are normalized and cleaned with regexes each first.

Each word is hashed with xxh3-64; an n-gram's hash is a polynomial over its words' hashes,
computed for all positions of all texts with ``n`` vectorised numpy passes (uint64, wrapping),
then mixed (the splitmix64 finalizer). The result is flat: hashes plus int64 offsets per text.

Example:
    >>> h, off = word_hashes(["Don't STOP!", "", "don t stop"])
    >>> off.tolist(), h[0:3].tolist() == h[3:6].tolist()
    ([0, 3, 3, 6], True)
    >>> g, goff = ngram_hashes(h, off, 2)
    >>> goff.tolist()
    [0, 2, 2, 4]
"""
from __future__ import annotations

import re
import unicodedata

import numpy as np
import xxhash

__all__ = ["word_hashes", "ngram_hashes", "words_of", "fold", "FORMAT", "FORMAT_CHARS", "MARK_CHARS", "SOLO_CHARS"]

# Unicode category Cf of the Basic Multilingual Plane (unicodedata 14): invisible inside a word, so
# not a word boundary. (The few Cf characters beyond it, emoji tags and some historic scripts'
# controls, are left out: a class with them makes the search four times slower.)
FORMAT_CHARS = "".join(chr(c) for lo, hi in ((0xAD, 0xAD), (0x600, 0x605), (0x61C, 0x61C), (0x6DD, 0x6DD), (0x70F, 0x70F),
                                             (0x890, 0x891), (0x8E2, 0x8E2), (0x180E, 0x180E), (0x200B, 0x200F),
                                             (0x202A, 0x202E), (0x2060, 0x2064), (0x2066, 0x206F), (0xFEFF, 0xFEFF),
                                             (0xFFF9, 0xFFFB)) for c in range(lo, hi + 1))
FORMAT = re.compile("[" + FORMAT_CHARS + "]")
# Combining marks (Unicode Mn, Mc, Me) of the BMP, variation selectors left out (an emoji's U+FE0F
# is no word): part of a word, as the vowel signs and viramas of Indic scripts are. (\\w alone
# splits "हिन्दी" into three "words" and folds "है" and "हो" into one.)
MARK_CHARS = "".join(chr(c) for c in range(0x300, 0x10000) if unicodedata.category(chr(c)) in ("Mn", "Mc", "Me")
                     and not (0xFE00 <= c <= 0xFE0F or 0x180B <= c <= 0x180F))
# Scripts written without spaces between words: each character is a word by itself (a run of
# them would be one "word" per clause, so one changed character would change the whole clause).
SOLO_RANGES = ((0x0E00, 0x0EFF), (0x1000, 0x109F), (0x1780, 0x17FF), (0x2E80, 0x2FDF), (0x3005, 0x3007),
               (0x3021, 0x3029), (0x3031, 0x3035), (0x3038, 0x303C), (0x3040, 0x30FF), (0x31F0, 0x31FF),
               (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF), (0x20000, 0x3134F))
SOLO_CHARS = "".join(f"{chr(a)}-{chr(b)}" for a, b in SOLO_RANGES)  # a regex class body
_SOLO = re.compile("[" + SOLO_CHARS + "]")
_NON_WORD = re.compile("[^\\w\x00" + re.escape(MARK_CHARS) + "]+")
_WORD_CHAR = "[\\w" + re.escape(MARK_CHARS) + "]"  # (the ranges above hold some punctuation: not words)
_WORD = re.compile(f"(?={_WORD_CHAR})[{SOLO_CHARS}]|(?:(?![{SOLO_CHARS}]){_WORD_CHAR})+")
_TABLE = bytearray(range(256))
for _c in range(128):
    _ch = chr(_c)
    if _c != 0 and not (_ch.isalnum() or _ch == "_"):
        _TABLE[_c] = 32
    elif "A" <= _ch <= "Z":
        _TABLE[_c] = _c + 32
_TABLE = bytes(_TABLE)
_SEP = b"\x00"
_SEP_HASH = np.uint64(xxhash.xxh3_64_intdigest(_SEP))
_MUL = np.uint64(0x9E3779B97F4A7C15)


def fold(text: str) -> str:
    """``text`` without format characters, NFKC and case folded (the words' normalization).

    Example:
        >>> fold("ＣＡＦＥ\u0301 ﬁ\u200bne Straße")
        'café fine strasse'
    """
    # texts equal after NFKC are equal after case folding: no second NFKC is needed for matching
    return unicodedata.normalize("NFKC", FORMAT.sub("", text)).casefold()


def words_of(text: str) -> list[str]:
    """The words of one text (the reference of the normalization; the bulk path agrees).

    Example:
        >>> words_of("Café, CAFÉ; naïve_x 42 東京")
        ['café', 'café', 'naïve_x', '42', '東', '京']
    """
    return _WORD.findall(fold(text))


def _clean(text: str) -> bytes:
    if text.isascii():
        return text.encode()
    words = _NON_WORD.sub(" ", fold(text).replace("\x00", " "))
    if _SOLO.search(words):
        words = _SOLO.sub(r" \g<0> ", words)
    return words.encode("utf-8", "surrogatepass")


def word_hashes(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """``(hashes, offsets)``: the uint64 hashes of the words of every text, flat, and int64
    offsets (text ``i`` is ``hashes[offsets[i]:offsets[i+1]]``).

    Example:
        >>> word_hashes(["a b", "c"])[1].tolist()
        [0, 2, 3]
    """
    n = len(texts)
    if not n:
        return np.zeros(0, dtype=np.uint64), np.zeros(1, dtype=np.int64)
    buf = b" \x00 ".join(map(_clean, texts))
    if buf.count(_SEP) != n - 1:  # a NUL inside an ASCII text: it separates words like any symbol
        buf = b" \x00 ".join(_clean(t.replace("\x00", " ")) for t in texts)
    words = buf.translate(_TABLE).split()
    del buf
    h = np.fromiter(map(xxhash.xxh3_64_intdigest, words), dtype=np.uint64, count=len(words))
    del words
    sep = np.flatnonzero(h == _SEP_HASH)
    offsets = np.empty(n + 1, dtype=np.int64)
    offsets[0] = 0
    offsets[1:n] = sep - np.arange(n - 1)  # words before each separator, separators removed
    offsets[n] = len(h) - (n - 1)
    if len(sep):
        keep = np.ones(len(h), dtype=bool)
        keep[sep] = False
        h = h[keep]
    return h, offsets


def _mix(h: np.ndarray) -> np.ndarray:
    h = h ^ (h >> np.uint64(30))
    h = h * np.uint64(0xBF58476D1CE4E5B9)
    h = h ^ (h >> np.uint64(27))
    h = h * np.uint64(0x94D049BB133111EB)
    return h ^ (h >> np.uint64(31))


def ngram_hashes(hashes: np.ndarray, offsets: np.ndarray, n: int, *, short: bool = False):
    """``(gram_hashes, gram_offsets)``: the hashes of every run of ``n`` consecutive words inside
    each text (n-grams never cross texts). With ``short=True`` a text of fewer than ``n`` words
    (also none) gives one hash of all its words instead of none: the hash its words would have
    as a ``len``-gram.

    Example:
        >>> h, off = word_hashes(["a b c", "a b"])
        >>> ngram_hashes(h, off, 2)[1].tolist(), ngram_hashes(h, off, 3, short=True)[1].tolist()
        ([0, 2, 3], [0, 1, 2])
    """
    if n < 1:
        raise ValueError(f"n-gram size must be >= 1, got {n}")
    lengths = np.diff(offsets)
    total = len(hashes)
    m = max(total - n + 1, 0)
    acc = np.zeros(m, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for t in range(n if m else 0):  # no gram fits: skip the loop (n may be huge: --ngram 10**20)
            acc = acc * _MUL + hashes[t:t + m]
        grams = _mix(acc)
    counts = np.maximum(lengths - n + 1, 0)
    if m:
        starts = offsets[:-1]
        valid = np.zeros(m + 1, dtype=np.int64)
        # position p is a valid start iff starts[i] <= p <= starts[i] + counts[i] - 1 for its text i
        has = counts > 0
        np.add.at(valid, starts[has], 1)
        np.add.at(valid, starts[has] + counts[has], -1)
        grams = grams[np.cumsum(valid[:m]) > 0]
    else:
        grams = grams[:0]
    if short:
        few = np.flatnonzero(lengths < n)
        if len(few):
            whole = np.array([_whole(hashes[offsets[i]:offsets[i + 1]]) for i in few.tolist()], dtype=np.uint64)
            counts = counts.copy()
            counts[few] = 1
            # insert each whole-text hash where its text's grams would be
            at = np.concatenate([[0], np.cumsum(np.maximum(lengths - n + 1, 0))])[few]
            grams = np.insert(grams, at, whole)
    out_offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(counts, out=out_offsets[1:])
    return grams, out_offsets


def _whole(words: np.ndarray) -> int:
    acc = np.zeros(1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for w in words:
            acc = acc * _MUL + w
        return int(_mix(acc)[0])
