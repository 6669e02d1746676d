"""Exact-duplicate keys: one 64-bit hash per conversation of its normalized messages.

Normalization (the definition; :func:`normalize_text` is its reference implementation): format
characters (Unicode Cf of the BMP: zero-width spaces and joiners, soft hyphens, byte-order marks,
bidi controls; :data:`chatdata.hygiene.words.FORMAT`) are dropped, then Unicode NFC, then every
run of whitespace (the characters ``str.split()`` splits on) becomes one space, and leading and
trailing whitespace goes. A conversation's key covers, per message, its role, its
normalized text (:func:`~chatdata.hygiene.columns.message_texts`), its non-text parts (images,
audio: :func:`~chatdata.hygiene.columns.message_media`), its tool calls (name and arguments, as
canonical JSON; call ids are left out) and its ``reasoning_content``.

The bulk path normalizes a whole chunk at once: the texts are joined with a separator
(``"\\x00"``) and encoded once (format characters are dropped and NFC runs only if the chunk is
not ASCII; NFC only if it is not NFC already),
whitespace becomes spaces with one ``bytes.translate``, runs of spaces fold in two vectorised
numpy passes, and each conversation is one xxh3-64 call over its slice of the buffer; the roles
are mixed in as a vectorised sum of per-position role hashes.

Example:
    >>> from chatdata import History
    >>> h = History.from_chats([[{"role": "user", "content": "Hello  world"}],
    ...                         [{"role": "user", "content": " Hello\\nworld "}]])
    >>> a, b = conversation_hashes(h).tolist()
    >>> a == b
    True
"""
from __future__ import annotations

import json
import re
import unicodedata

import numpy as np
import xxhash

from .columns import conversation_offsets, extra_values, message_media, message_texts, message_values
from .words import FORMAT, FORMAT_CHARS

__all__ = ["normalize_text", "conversation_hashes", "hash_chunk", "message_items", "CHUNK_CHARS"]

SEP = "\x00"
_ASCII_WS = "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f "
_WS_TABLE = bytes.maketrans(_ASCII_WS.encode(), b" " * len(_ASCII_WS))  # "\x00" stays: the separator
# whitespace beyond ASCII (str.isspace): folded to a space on the str before encoding
_UNICODE_WS_CHARS = [chr(c) for c in range(128, 0x3001) if chr(c).isspace()]
_UNICODE_WS = re.compile("[" + "".join(_UNICODE_WS_CHARS) + "]")
_WS_CODES2 = np.array([int.from_bytes(c.encode(), "big") for c in _UNICODE_WS_CHARS if len(c.encode()) == 2])
_WS_CODES3 = np.array([int.from_bytes(c.encode(), "big") for c in _UNICODE_WS_CHARS if len(c.encode()) == 3])
# what normalization removes at either end of a text: whitespace (str.split's) and format characters
_JUNCTION = "".join(chr(c) for c in range(0x3001) if chr(c).isspace()) + FORMAT_CHARS
CHUNK_CHARS = 16 << 20  # text per bulk pass: bounds the temporary buffers


def normalize_text(text: str) -> str:
    """The normalized form of one text: format characters dropped, NFC, whitespace runs folded to
    one space, stripped.

    Example:
        >>> normalize_text("  Cafe\\u0301 \\t au\\u00a0lait\\u200b\\n")
        'Café au lait'
    """
    return " ".join(unicodedata.normalize("NFC", FORMAT.sub("", text)).split())


def _call_key(call) -> object:
    if isinstance(call, dict):
        fn = call.get("function") if isinstance(call.get("function"), dict) else call
        args = fn.get("arguments")
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except (ValueError, RecursionError):
                pass
        return [fn.get("name"), args]
    return call


def message_items(history) -> tuple[list, list]:
    """Role and text of every message, the text with the key of its non-text parts (images, audio:
    :func:`~chatdata.hygiene.columns.message_media`, after ``"\\x03"``), its tool calls (name and
    arguments as canonical JSON, after ``"\\x01"``) and ``reasoning_content`` (after ``"\\x02"``)
    appended.

    Example:
        >>> from chatdata import History
        >>> message_items(History.from_chats([[{"role": "assistant", "content": "ok",
        ...     "tool_calls": [{"name": "f", "arguments": '{"x": 1}'}]}]]))
        (['assistant'], ['ok\\x01[["f",{"x":1}]]'])
    """
    roles = message_values(history, "role")
    texts = message_texts(history)
    calls = message_values(history, "tool_calls")
    extras = extra_values(history)
    media = message_media(history)
    texts = list(texts) if any(c is not None for c in calls) or any(e for e in extras) or media else texts
    for i, (c, e) in enumerate(zip(calls, extras)):
        key = media[i] if media else None
        reasoning = e.get("reasoning_content") if e else None
        if key is None and c is None and not isinstance(reasoning, str):
            continue
        # no whitespace or format characters at a junction (the bulk pass folds whitespace only at
        # the ends of a message, after dropping format characters): "Sure.\u200b " and "Sure."
        # before a call are the same text. (strip, not normalize_text: the bulk pass normalizes
        # the rest, without a per-text Python pass over long reasoning)
        text = texts[i].rstrip(_JUNCTION)
        if key is not None:  # one word: the same question about another image is another conversation
            text += "\x03" + key
        if c is not None:
            text += "\x01" + json.dumps([_call_key(x) for x in c], sort_keys=True, ensure_ascii=False,
                                        separators=(",", ":"))
        if isinstance(reasoning, str):
            text += "\x02" + reasoning.strip(_JUNCTION)
        texts[i] = text
    return roles, texts


def hash_chunk(roles: list, texts: list, offsets: np.ndarray) -> np.ndarray:
    """uint64 keys of the conversations ``offsets`` bounds in the message lists ``roles`` and
    ``texts``: equal exactly when every message's role and normalized text are equal.

    Example:
        >>> import numpy as np
        >>> hash_chunk(["user", "user"], ["a  b", "a b"], np.array([0, 1, 2])).tolist()[0] == \\
        ...     hash_chunk(["user"], ["a b"], np.array([0, 1])).tolist()[0]
        True
    """
    n_msg = len(texts)
    joined = SEP.join(texts)
    if joined.count(SEP) != max(n_msg - 1, 0):  # a separator inside a text: the exact slow path
        return _hash_slow(roles, texts, offsets)
    ascii_only = joined.isascii()
    if not ascii_only and not unicodedata.is_normalized("NFC", joined):
        joined = unicodedata.normalize("NFC", joined)  # NFC never composes across "\\x00"
    buf = joined.encode("utf-8", "surrogatepass")
    del joined
    has_format, has_space = (False, False) if ascii_only else _rare_characters(np.frombuffer(buf, dtype=np.uint8))
    if has_format:  # rare: drop them from the texts, then again
        return hash_chunk(roles, [FORMAT.sub("", t) for t in texts], offsets)
    if has_space:  # rare: fold it on the text, then again
        return hash_chunk(roles, [_UNICODE_WS.sub(" ", t) for t in texts], offsets)
    arr = _fold_spaces(np.frombuffer(buf.translate(_WS_TABLE), dtype=np.uint8))
    del buf
    # message k ends at separator k; conversation i covers messages off[i]:off[i+1]
    ends = np.empty(n_msg + 1, dtype=np.int64)
    ends[0] = -1
    ends[1:n_msg] = np.flatnonzero(arr == 0)
    ends[n_msg] = len(arr)
    starts = ends[offsets[:-1]] + 1
    stops = np.maximum(ends[offsets[1:]], starts)
    mv = memoryview(arr)
    h = xxhash.xxh3_64_intdigest
    text_keys = np.fromiter((h(mv[a:b]) for a, b in zip(starts.tolist(), stops.tolist())), dtype=np.uint64,
                            count=len(offsets) - 1)
    return _with_roles(text_keys, roles, offsets)


def _with_roles(text_keys: np.ndarray, roles: list, offsets: np.ndarray) -> np.ndarray:
    """Mix each conversation's role sequence into its text key: a hash per distinct normalized
    role, mixed with the message's position, summed per conversation (vectorised)."""
    codes = {r: xxhash.xxh3_64_intdigest(normalize_text(r).encode("utf-8", "surrogatepass")) for r in set(roles)}
    role_h = np.fromiter(map(codes.__getitem__, roles), dtype=np.uint64, count=len(roles))
    counts = np.diff(offsets)
    pos = (np.arange(len(roles)) - np.repeat(offsets[:-1], counts)).astype(np.uint64)
    with np.errstate(over="ignore"):
        mixed = _mix64(role_h + pos * np.uint64(0x9E3779B97F4A7C15))
        csum = np.concatenate([np.zeros(1, dtype=np.uint64), np.cumsum(mixed, dtype=np.uint64)])
        per_conv = csum[offsets[1:]] - csum[offsets[:-1]] + counts.astype(np.uint64) * np.uint64(0xD6E8FEB86659FD93)
        return text_keys ^ _mix64(per_conv)


def _mix64(h: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        h = (h ^ (h >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        h = (h ^ (h >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return h ^ (h >> np.uint64(31))


def _rare_characters(arr: np.ndarray) -> tuple[bool, bool]:
    """Whether the UTF-8 buffer holds a format character (U+00AD, U+200B-U+200F, U+FEFF, ...:
    :data:`~chatdata.hygiene.words.FORMAT_CHARS`) and whether it holds a non-ASCII whitespace
    character (U+0085, U+00A0, U+1680, U+2000-U+200A, U+2028/9, U+202F, U+205F, U+3000): one
    vectorised pass over the few lead bytes of their encodings, then a look at the next two
    bytes."""
    lead = np.flatnonzero((arr == 0xC2) | ((arr >= 0xD8) & (arr <= 0xDC)) | ((arr >= 0xE0) & (arr <= 0xE3)) | (arr == 0xEF))
    if not len(lead):
        return False, False
    pad = np.concatenate([arr, np.zeros(2, dtype=np.uint8)])
    code = (pad[lead].astype(np.uint32) << 16) | (pad[lead + 1].astype(np.uint32) << 8) | pad[lead + 2]
    two = code >> 8
    return (bool(np.isin(two, _FORMAT_CODES2).any() or np.isin(code, _FORMAT_CODES3).any()),
            bool(np.isin(two, _WS_CODES2).any() or np.isin(code, _WS_CODES3).any()))


def _codes(chars, size: int) -> np.ndarray:
    return np.array([int.from_bytes(c.encode(), "big") for c in chars if len(c.encode()) == size], dtype=np.int64)


_FORMAT_CODES2, _FORMAT_CODES3 = _codes(FORMAT_CHARS, 2), _codes(FORMAT_CHARS, 3)
assert not set((np.concatenate([_FORMAT_CODES2 >> 8, _FORMAT_CODES3 >> 16, _WS_CODES2 >> 8, _WS_CODES3 >> 16])
                ).tolist()) - {0xC2, 0xD8, 0xD9, 0xDA, 0xDB, 0xDC, 0xE0, 0xE1, 0xE2, 0xE3, 0xEF}  # the lead bytes tested


def _fold_spaces(arr: np.ndarray) -> np.ndarray:
    """Spaces folded in a buffer of ``"\\x00"``-separated texts: one space per run, none next to
    a separator or at either end (vectorised: two masks and two compressions)."""
    if not len(arr):
        return arr
    sp = arr == 32
    keep = np.empty(len(arr), dtype=bool)
    keep[0] = not sp[0]
    np.logical_not(sp[1:] & sp[:-1], out=keep[1:])  # the first space of a run stays
    arr = arr[keep]
    if not len(arr):
        return arr
    sp = arr == 32
    edge = arr == 0
    edge[1:] |= edge[:-1].copy()
    edge[:-1] |= arr[1:] == 0
    edge[-1] = True
    drop = sp & edge  # a space next to a separator, or at an end
    return arr[~drop] if drop.any() else arr


def _hash_slow(roles, texts, offsets) -> np.ndarray:
    """The keys by the reference normalization, one text at a time (texts holding ``"\\x00"``)."""
    keys = np.zeros(len(offsets) - 1, dtype=np.uint64)
    for i in range(len(offsets) - 1):
        body = "\x00".join(normalize_text(texts[k]) for k in range(offsets[i], offsets[i + 1]))
        keys[i] = xxhash.xxh3_64_intdigest(body.encode("utf-8", "surrogatepass"))
    return _with_roles(keys, roles, offsets)


def conversation_hashes(history) -> np.ndarray:
    """One uint64 key per conversation of ``history``: equal keys mean equal conversations after
    normalization (see the module docstring). Computed in bulk passes of about 16 M characters.

    Example:
        >>> from chatdata import History
        >>> h = History.from_chats([[{"role": "user", "content": "x"}], [{"role": "assistant", "content": "x"}]])
        >>> len(set(conversation_hashes(h).tolist()))
        2
    """
    offsets = conversation_offsets(history)
    roles, texts = message_items(history)
    n = len(offsets) - 1
    if not n:
        return np.zeros(0, dtype=np.uint64)
    sizes = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
    csum = np.concatenate([[0], np.cumsum(sizes)])[offsets]
    out = np.empty(n, dtype=np.uint64)
    a = 0
    while a < n:  # chunks of whole conversations, about CHUNK_CHARS of text each
        b = max(int(np.searchsorted(csum, csum[a] + CHUNK_CHARS, side="right")) - 1, a + 1)
        b = min(b, n)
        lo, hi = offsets[a], offsets[b]
        out[a:b] = hash_chunk(roles[lo:hi], texts[lo:hi], offsets[a:b + 1] - lo)
        a = b
    return out
