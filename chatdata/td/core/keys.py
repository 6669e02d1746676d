"""Nested keys: validation, normalisation, and safe key <-> file-name encoding.

A key is a ``str`` or a (possibly nested) tuple of ``str``. ``("a", ("b", "c"))`` and
``("a", "b", "c")`` name the same entry; a one-element tuple is the same as the bare string.

This module is also the only place that turns keys into file names: :func:`key_to_filename`
maps any key (``".."``, ``"/"``, an empty string, control characters...) to a single, safe path
component, and :func:`filename_to_key` gives the key back.

Example:
    >>> unravel_key(("a", ("b", "c")))
    ('a', 'b', 'c')
    >>> key_to_filename("../etc")
    '%2E%2E%2Fetc'
"""
from __future__ import annotations

from typing import Tuple, Union

NestedKey = Union[str, Tuple["NestedKey", ...]]

__all__ = ["NestedKey", "unravel_key", "key_to_filename", "filename_to_key", "is_valid_key", "check_same_keys"]


def _flatten(key, out: list) -> None:
    if isinstance(key, str):
        out.append(key)
    elif isinstance(key, tuple):
        for sub in key:
            _flatten(sub, out)
    else:
        raise TypeError(
            f"keys must be str or tuples of str, got {type(key).__name__} ({key!r}); "
            "use td['a'] or td['a', 'b'] for nested entries"
        )


def unravel_key(key) -> tuple[str, ...]:
    """Return ``key`` as a flat tuple of strings, raising ``TypeError`` for bad keys.

    Example:
        >>> unravel_key("a")
        ('a',)
        >>> unravel_key((("a",), "b"))
        ('a', 'b')
    """
    if isinstance(key, str):
        return (key,)
    out: list = []
    _flatten(key, out)
    if not out:
        raise TypeError("an empty tuple is not a valid key")
    return tuple(out)


# the error for a key that is not a str or a tuple of str (tensordict's name for it too)
GENERIC_NESTED_ERR = _GENERIC_NESTED_ERR = "Keys are str or tuples of str. Only NestedKeys are supported. Got key {}."


def is_valid_key(key) -> bool:
    """``True`` when ``key`` is a str or a non-empty nested tuple of str."""
    try:
        unravel_key(key)
    except TypeError:
        return False
    return True


# Characters kept as they are in file names. Everything else is percent-encoded, so the name
# is one safe path component. "." is always encoded (our files add suffixes such as
# ".memmap" and ".json", which a key can therefore never produce), and so is a leading "_"
# (names like "_offsets.memmap" are ours).
_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_")
_MAX_COMPONENT_BYTES = 200


def key_to_filename(key: str) -> str:
    """Encode one key (a single ``str`` level) into a safe, reversible file-name component.

    The result never contains a path separator or a ``"."``, is never empty, and does not
    start with ``"_"`` (names we keep for our own files). Very long keys are
    refused so that a key can never produce an invalid file name silently.

    Example:
        >>> key_to_filename("content")
        'content'
        >>> filename_to_key(key_to_filename("a/b"))
        'a/b'
    """
    if not isinstance(key, str):
        raise TypeError(f"a key level must be a str, got {type(key).__name__}")
    if key == "":
        return "%"  # the one name that no other key encodes to
    parts = []
    for i, ch in enumerate(key):
        if ch in _SAFE and not (i == 0 and ch == "_"):
            parts.append(ch)
        else:
            parts.extend(f"%{b:02X}" for b in ch.encode("utf-8", "surrogatepass"))
    name = "".join(parts)
    if len(name.encode()) > _MAX_COMPONENT_BYTES:
        raise ValueError(
            f"key {key[:40]!r}... is too long to be stored as a file name "
            f"({len(name)} encoded bytes, at most {_MAX_COMPONENT_BYTES}); use a shorter key"
        )
    return name


def filename_to_key(name: str) -> str:
    """Decode a component made by :func:`key_to_filename` back into the key.

    Example:
        >>> filename_to_key("%2E%2E")
        '..'
    """
    if name == "%":
        return ""
    raw = bytearray()
    i = 0
    while i < len(name):
        ch = name[i]
        if ch == "%":
            if i + 3 > len(name):
                raise ValueError(f"bad encoded key file name {name!r}")
            raw.append(int(name[i + 1 : i + 3], 16))
            i += 3
        else:
            raw.extend(ch.encode())
            i += 1
    return raw.decode("utf-8", "surrogatepass")


def check_same_keys(first, second, what: str, subset: bool = False) -> None:
    """KeyError unless the two collections hold the same leaf keys (nested ones included), or
    with ``subset=True`` unless ``second`` holds every leaf key of ``first``: element-wise
    operations between TensorDicts (``==``, ``+``) pair entries by key, and an entry of one side
    alone would silently drop out of the result (tensordict raises too); ``td += other`` writes
    ``td``'s entries, so ``other`` must hold them all before the first is written."""
    mine, theirs = set(first.keys(True, True)), set(second.keys(True, True))
    if mine != theirs and not (subset and mine <= theirs):
        only_second = "" if subset else f", only the second has {sorted(theirs - mine, key=str)}"
        raise KeyError(f"{what}: the TensorDicts' keys differ (only the first has {sorted(mine - theirs, key=str)}"
                       f"{only_second}); select() the common keys first")
