"""``RecentCache``: a dict that keeps only its most recently used entries.

What the rollout learns of a template is cached per template *and its variables* (tools,
template kwargs): a server whose sessions each send their own tools (``chatdata serve`` running
for days) made one entry per session, forever. These caches keep the last ``size`` keys; an
evicted key is learnt again when it comes back (as in a new process). Safe to use from several
threads (a look-up that races an eviction is a miss).

Example:
    >>> c = RecentCache(2)
    >>> c["a"], c["b"] = 1, 2
    >>> c.get("a")              # "a" is now the most recent
    1
    >>> c["c"] = 3              # evicts "b", the least recently used
    >>> c.get("b"), c.get("a"), c.get("c"), len(c)
    (None, 1, 3, 2)
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Any

__all__ = ["RecentCache"]


class RecentCache:
    """Up to ``size`` entries, the least recently used evicted first (see the module docstring)."""

    __slots__ = ("size", "_d")

    def __init__(self, size: int) -> None:
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"RecentCache size must be an integer >= 1, got {size!r}")
        self.size = size
        self._d: OrderedDict = OrderedDict()

    def get(self, key: Any, default: Any = None) -> Any:
        """The value of ``key`` (now the most recent), or ``default``."""
        try:
            value = self._d[key]
            self._d.move_to_end(key)
        except KeyError:  # absent, or evicted by another thread in between
            return default
        return value

    def __setitem__(self, key: Any, value: Any) -> None:
        d = self._d
        d[key] = value
        try:
            d.move_to_end(key)
        except KeyError:
            pass
        while len(d) > self.size:
            try:
                d.popitem(last=False)
            except KeyError:
                break

    def __len__(self) -> int:
        return len(self._d)

    def __contains__(self, key: Any) -> bool:
        return key in self._d
