"""The one check of the counts the io functions take (chunk sizes, shard sizes, rows per shard, lengths).

A count that is not a whole number >= 1 used to fail far from the call (``range() arg 3 must
not be zero``, ``'<=' not supported between 'str' and 'int'``, a slice of a float), or worse:
``export_parquet(chunk_size=-1)`` wrote an empty file and reported 0 conversations.

Example:
    >>> check_count("chunk_size", 8192)
    8192
    >>> check_count("chunk_size", 0)
    Traceback (most recent call last):
    ...
    ValueError: chunk_size must be an integer >= 1, got 0
"""
from __future__ import annotations

import operator

__all__ = ["check_count"]


def check_count(name: str, value, minimum: int = 1) -> int:
    """``value`` as an int if it is a whole number >= ``minimum`` (numpy / torch integers too);
    TypeError for what is not an integer (a bool, a float, a str, None), ValueError for one below."""
    try:
        n = operator.index(value) if not isinstance(value, bool) else None
    except TypeError:
        n = None
    if n is None:
        raise TypeError(f"{name} must be an integer >= {minimum}, got {type(value).__name__} {value!r:.50}")
    if n < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {n}")
    return n
