"""Which open session's previous body a new body repeats, found from the new body's bytes.

A request without ``X-Session-Id`` still starts with its session's previous body (up to the end
of that body's last message: a :class:`~chatdata.gateway.body_prefix.BodyMemo` prefix), so only
its new messages need parsing. Many agents of one harness share their first bytes (the same
system prompt and tools), so the first bytes alone do not tell sessions apart: the index keeps,
under a body's first 256 bytes, each prefix's *length* and its *last* 64 bytes (the end of the
session's own latest message). A new body is looked up by its first 256 bytes, then, for each
length kept there, by its own 64 bytes ending at that length: one short slice and one dictionary
look-up per distinct length, and one ``memcmp`` of the whole prefix for a hit. Any hit parses
exactly (the body starts with those bytes); the session's own is the one expected.

Example:
    >>> from chatdata.gateway.body_prefix import parse_body
    >>> index = MemoIndex()
    >>> head = b'{"model": "m", "messages": [{"role": "system", "content": "' + b"x" * 300 + b'"}'
    >>> _, _, a = parse_body(head + b', {"role": "user", "content": "task a"}]}', None)
    >>> _, _, b = parse_body(head + b', {"role": "user", "content": "task b"}]}', None)
    >>> owner_a, owner_b = object(), object()  # the sessions holding them
    >>> index.add(owner_a, a); index.add(owner_b, b)
    >>> index.find(head + b', {"role": "user", "content": "task b"}, {"role": "assistant"}]}') is b
    True
    >>> index.remove(owner_b, b); len(index)
    1
"""
from __future__ import annotations

from .body_prefix import BodyMemo

__all__ = ["MemoIndex", "MEMO_KEY"]

MEMO_KEY = 256  # a body's first bytes: its bucket (a shorter prefix is not indexed)
_TAIL = 64  # the last bytes of a prefix: which of a bucket's prefixes of that length a body repeats


class MemoIndex:
    """The last body of each open session, by first bytes, prefix length and last bytes."""

    __slots__ = ("_buckets", "_count")

    def __init__(self) -> None:
        # first MEMO_KEY bytes -> prefix length -> last _TAIL bytes -> [(owner, memo), ...]
        self._buckets: dict[bytes, dict[int, dict[bytes, list]]] = {}
        self._count = 0

    def __len__(self) -> int:
        """How many memos are indexed."""
        return self._count

    def add(self, owner, memo: BodyMemo) -> None:
        """Index ``memo`` (held by ``owner``); a prefix shorter than :data:`MEMO_KEY` is not."""
        p = memo.prefix
        if len(p) < MEMO_KEY:
            return
        by_len = self._buckets.setdefault(p[:MEMO_KEY], {})
        by_len.setdefault(len(p), {}).setdefault(p[-_TAIL:], []).append((owner, memo))
        self._count += 1

    def remove(self, owner, memo: BodyMemo) -> None:
        """Forget ``owner``'s ``memo`` (nothing happens if it is not indexed)."""
        p = memo.prefix
        by_len = self._buckets.get(p[:MEMO_KEY])
        tails = by_len.get(len(p)) if by_len else None
        entries = tails.get(p[-_TAIL:]) if tails else None
        if not entries:
            return
        kept = [e for e in entries if e[1] is not memo or e[0] != owner]
        self._count -= len(entries) - len(kept)
        if kept:
            tails[p[-_TAIL:]] = kept
            return
        del tails[p[-_TAIL:]]
        if not tails:
            del by_len[len(p)]
            if not by_len:
                del self._buckets[p[:MEMO_KEY]]

    def find(self, raw: bytes) -> BodyMemo | None:
        """The longest indexed prefix ``raw`` starts with, or None."""
        by_len = self._buckets.get(raw[:MEMO_KEY])
        if not by_len:
            return None
        best = None
        n = len(raw)
        for length, tails in by_len.items():
            if length > n or (best is not None and length <= len(best.prefix)):
                continue
            for _, memo in tails.get(raw[length - _TAIL:length], ()):
                if raw.startswith(memo.prefix):
                    best = memo
                    break
        return best
