"""The keys of a ``Composite``: nested keys checked against its reserved attribute names, and
the keys view its ``keys()`` returns (``in`` accepts nested keys).

Example:
    >>> from chatdata.specs._keys import _SpecKeys, _check_key
    >>> _check_key(("a", "b")), ("a", "b") in _SpecKeys([("a", "b")])
    (('a', 'b'), True)
"""
from __future__ import annotations

from ..td import unravel_key

__all__ = ["RESERVED_KEYS", "_check_key", "_unravel", "_SpecKeys"]

RESERVED_KEYS = frozenset({"shape", "device", "dtype", "space", "domain", "data_cls"})


def _unravel(key) -> tuple[str, ...]:
    try:
        return unravel_key(key)
    except TypeError as err:
        raise TypeError(f"Composite keys must be str or tuples of str: {err}") from None


def _check_key(key) -> tuple[str, ...]:
    k = _unravel(key)
    for part in k:
        if part in RESERVED_KEYS:
            raise ValueError(
                f"{part!r} is reserved in a Composite (it names one of its attributes: "
                f"{sorted(RESERVED_KEYS)}); choose another key"
            )
    return k


class _SpecKeys:
    """Keys of a Composite: iterable, sized, and ``in`` accepts nested keys."""

    def __init__(self, keys: list):
        self._keys = keys

    def __iter__(self):
        return iter(self._keys)

    def __len__(self):
        return len(self._keys)

    def __contains__(self, key):
        try:
            k = unravel_key(key)
        except TypeError:
            return False
        return (k[0] if len(k) == 1 else k) in self._keys

    def __eq__(self, other):
        return list(self) == list(other) if isinstance(other, (list, tuple)) else set(self) == set(other)

    def __repr__(self):
        return f"_SpecKeys({self._keys})"
