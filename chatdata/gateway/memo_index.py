"""Which open session's previous body a new body repeats, found from the new body's bytes.

A request without ``X-Session-Id`` still starts with its session's previous body (up to the end
of that body's last message: a :class:`~chatdata.gateway.body_prefix.BodyMemo` prefix), so only
its new messages need parsing. Many agents of one harness share their first bytes (the same
system prompt and tools), so the first bytes alone do not tell sessions apart: the index keeps,
under a body's first 256 bytes, each prefix's *length* and its *last* 64 bytes (the end of the
session's own latest message). A new body is looked up by its first 256 bytes, then, for the
lengths kept there from its own length down, by its own 64 bytes ending at that length: one
short slice and one dictionary look-up per length tried, and one ``memcmp`` of the whole prefix
for a hit. The first hit is the longest prefix a body starts with (so it parses exactly),
usually the session's own previous body.

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

from bisect import bisect_left, bisect_right, insort

from .body_prefix import BodyMemo

__all__ = ["MemoIndex", "MEMO_KEY"]

MEMO_KEY = 256  # a body's first bytes: its bucket (a shorter prefix is not indexed)
_TAIL = 64  # the last bytes of a prefix: which of a bucket's prefixes of that length a body repeats
_TRIES = 1024  # lengths tried per look-up at most (then the body is parsed whole: exact, only slower)


class _Bucket:
    """The prefixes that share their first bytes: their distinct lengths (sorted) and, per
    length, the prefixes by their last bytes."""

    __slots__ = ("lengths", "tails")

    def __init__(self) -> None:
        self.lengths: list[int] = []
        self.tails: dict[int, dict[bytes, list]] = {}


class MemoIndex:
    """The last body of each open session, by first bytes, prefix length and last bytes."""

    __slots__ = ("_buckets", "_count")

    def __init__(self) -> None:
        self._buckets: dict[bytes, _Bucket] = {}  # first MEMO_KEY bytes -> the prefixes starting so
        self._count = 0

    def __len__(self) -> int:
        """How many memos are indexed."""
        return self._count

    def add(self, owner, memo: BodyMemo) -> None:
        """Index ``memo`` (held by ``owner``); a prefix shorter than :data:`MEMO_KEY` is not."""
        p = memo.prefix
        if len(p) < MEMO_KEY:
            return
        bucket = self._buckets.get(p[:MEMO_KEY])
        if bucket is None:
            bucket = self._buckets[p[:MEMO_KEY]] = _Bucket()
        tails = bucket.tails.get(len(p))
        if tails is None:
            tails = bucket.tails[len(p)] = {}
            insort(bucket.lengths, len(p))
        tails.setdefault(p[-_TAIL:], []).append((owner, memo))
        self._count += 1

    def remove(self, owner, memo: BodyMemo) -> None:
        """Forget ``owner``'s ``memo`` (nothing happens if it is not indexed)."""
        p = memo.prefix
        bucket = self._buckets.get(p[:MEMO_KEY])
        tails = bucket.tails.get(len(p)) if bucket else None
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
            del bucket.tails[len(p)]
            del bucket.lengths[bisect_left(bucket.lengths, len(p))]
            if not bucket.lengths:
                del self._buckets[p[:MEMO_KEY]]

    def find(self, raw: bytes) -> BodyMemo | None:
        """The longest indexed prefix ``raw`` starts with, or None. The lengths are tried from
        the body's own length down (a session's previous body is a little shorter than its new
        one), at most :data:`_TRIES` of them."""
        bucket = self._buckets.get(raw[:MEMO_KEY])
        if bucket is None:
            return None
        lengths, tails = bucket.lengths, bucket.tails
        top = bisect_right(lengths, len(raw))
        for j in range(top - 1, max(top - 1 - _TRIES, -1), -1):
            length = lengths[j]
            for _, memo in tails[length].get(raw[length - _TAIL:length], ()):
                if raw.startswith(memo.prefix):
                    return memo
        return None
