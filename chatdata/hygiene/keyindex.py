"""``KeyIndex``: uint64 keys -> int64 values in sorted numpy runs, for lookups of many keys at
once. 8 bytes of key and 8 of value per entry, no Python object per entry: at 10 M keys it holds
160 MB where a Python ``dict`` of ints takes about 1 GB.

Runs merge like a binary counter (a new run merges with the last one while it is at least as
large), so an insert costs amortised O(log n) per key and a lookup searches O(log n) runs.

Example:
    >>> import numpy as np
    >>> idx = KeyIndex()
    >>> idx.add(np.array([7, 3], dtype=np.uint64), np.array([0, 1]))
    >>> idx.add(np.array([3], dtype=np.uint64), np.array([2]))
    >>> q, v = idx.lookup(np.array([3, 9], dtype=np.uint64))
    >>> sorted(zip(q.tolist(), v.tolist()))
    [(0, 1), (0, 2)]
"""
from __future__ import annotations

import numpy as np

__all__ = ["KeyIndex"]


class KeyIndex:
    """uint64 keys -> int64 values; a key may hold several values (see the module docstring)."""

    def __init__(self):
        self._runs: list[tuple[np.ndarray, np.ndarray]] = []

    def __len__(self) -> int:
        return sum(len(k) for k, _ in self._runs)

    def add(self, keys: np.ndarray, values: np.ndarray) -> None:
        """Add the pairs ``(keys[i], values[i])``."""
        if not len(keys):
            return
        order = np.argsort(keys, kind="stable")
        run = (np.ascontiguousarray(keys[order], dtype=np.uint64), np.ascontiguousarray(values[order], dtype=np.int64))
        self._runs.append(run)
        while len(self._runs) > 1 and len(self._runs[-1][0]) >= len(self._runs[-2][0]):
            (k2, v2), (k1, v1) = self._runs.pop(), self._runs.pop()
            k, v = np.concatenate([k1, k2]), np.concatenate([v1, v2])
            order = np.argsort(k, kind="stable")  # two sorted runs: a linear merge
            self._runs.append((k[order], v[order]))

    def lookup(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Every match: ``(query positions, values)``, one pair per stored value of a queried key."""
        qs, vs = [], []
        keys = np.asarray(keys, dtype=np.uint64)
        for k, v in self._runs:
            lo = np.searchsorted(k, keys, side="left")
            hi = np.searchsorted(k, keys, side="right")
            n = hi - lo
            hit = np.flatnonzero(n)
            if not len(hit):
                continue
            counts = n[hit]
            q = np.repeat(hit, counts)
            # positions lo[h] .. hi[h]-1 for every hit h, flattened
            starts = np.repeat(lo[hit] - np.concatenate([[0], np.cumsum(counts)[:-1]]), counts)
            pos = starts + np.arange(len(q))
            qs.append(q)
            vs.append(v[pos])
        if not qs:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        return np.concatenate(qs), np.concatenate(vs)

    def first(self, keys: np.ndarray) -> np.ndarray:
        """The smallest value stored under each key, -1 where the key is absent."""
        out = np.full(len(keys), -1, dtype=np.int64)
        q, v = self.lookup(keys)
        if len(q):
            order = np.lexsort((v, q))
            q, v = q[order], v[order]
            firsts = np.concatenate([[True], q[1:] != q[:-1]])
            out[q[firsts]] = v[firsts]
        return out
