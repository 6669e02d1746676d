"""Exact duplicates, streamed: ``ExactDeduper`` sees conversations chunk by chunk (in order) and
keeps the first of each normalized form (:mod:`chatdata.hygiene.normalize`). It holds 16 bytes
per distinct conversation (its key and its index), so 10 M conversations need about 160 MB.

Example:
    >>> import numpy as np
    >>> d = ExactDeduper()
    >>> d.add(np.array([5, 6, 5], dtype=np.uint64)).tolist()
    [-1, -1, 0]
    >>> d.add(np.array([6, 7], dtype=np.uint64)).tolist()
    [1, -1]
"""
from __future__ import annotations

import numpy as np

from .keyindex import KeyIndex

__all__ = ["ExactDeduper", "first_occurrences"]


def first_occurrences(keys: np.ndarray) -> np.ndarray:
    """For each position, the first earlier position holding the same key, or -1.

    Example:
        >>> import numpy as np
        >>> first_occurrences(np.array([4, 4, 2, 4], dtype=np.uint64)).tolist()
        [-1, 0, -1, 0]
    """
    keys = np.asarray(keys, dtype=np.uint64)
    if not len(keys):
        return np.zeros(0, dtype=np.int64)
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    owner = first[inverse.reshape(-1)]
    return np.where(owner == np.arange(len(keys)), -1, owner).astype(np.int64)


class ExactDeduper:
    """Streams of conversation keys in, for each one the index of the conversation it repeats
    (-1: the first of its kind, kept). Indices count from the first conversation ever added."""

    def __init__(self):
        self._seen = KeyIndex()
        self.count = 0

    def add(self, keys: np.ndarray) -> np.ndarray:
        """The index of the earlier conversation each key repeats, -1 for a new one."""
        keys = np.asarray(keys, dtype=np.uint64)
        base = self.count
        self.count += len(keys)
        earlier = self._seen.first(keys)
        inside = first_occurrences(keys)
        out = np.where(earlier >= 0, earlier, np.where(inside >= 0, inside + base, -1))
        new = np.flatnonzero(out < 0)
        self._seen.add(keys[new], new + base)
        return out
