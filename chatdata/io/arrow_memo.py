"""What is derived from a packed column, computed once per column.

The packed base of a value pool (UTF-8 / JSON bytes plus offsets, e.g. memory-mapped files) is
never written in place: values added later go to an overflow list (see
:mod:`chatdata.td.nontensor.pool`). So whatever is computed from those bytes alone (which values
are ``null``, the Arrow array that Arrow's JSON reader parses from them) stays true for as long
as the column lives, and a second ``to_arrow()`` of the same loaded History can reuse it instead
of reading every message again. Entries hang on weak references to the column's two tensors:
they go when the column goes. Values that point back into the column's own memory must not be
stored (they would keep it alive forever); only self-contained results are.

Example:
    >>> import torch
    >>> from chatdata import NonTensorStack
    >>> col = NonTensorStack.from_packed(torch.tensor(list(b"null[1]"), dtype=torch.uint8),
    ...                                  torch.tensor([0, 4, 7]), "json")  # e.g. memory-mapped files
    >>> key = column_key(col)
    >>> memo(key, "demo", lambda: 42), memo(key, "demo", lambda: 0)
    (42, 42)
    >>> column_key(NonTensorStack.from_list(["not packed"])) is None
    True
"""
from __future__ import annotations

import threading
import weakref

__all__ = ["column_key", "memo"]

# (id(data), id(offsets)) -> (weak refs to both, {(start, stop, what): value}); tensors compare
# by value, so the table is keyed by identity, and a dead reference drops its entry
_ENTRIES: dict = {}
_LOCK = threading.Lock()


def _drop(ident):
    def callback(_ref):
        with _LOCK:
            _ENTRIES.pop(ident, None)
    return callback


def column_key(stack):
    """``(data, offsets, start, stop)`` naming the packed bytes a 1-D stack reads (a contiguous
    range of a packed pool without overflow values), or None when its values are Python objects
    or it picks values out of order (nothing is memoised then)."""
    pool = getattr(stack, "_pool", None)
    rng = getattr(stack, "_rng", None)
    if pool is None or rng is None or getattr(stack, "_shape", None) is not None or rng.step != 1 or not pool.is_packed or pool._extras:
        return None
    return pool.data, pool.offsets, rng.start, rng.stop


def memo(key, what, make):
    """``make()``, computed once per ``(column key, what)``; every call with ``key=None``
    computes it again. ``make`` must give a value that holds no reference to the column."""
    if key is None:
        return make()
    data, offsets, start, stop = key
    ident = (id(data), id(offsets))
    with _LOCK:
        entry = _ENTRIES.get(ident)
        if entry is None or entry[0]() is not data or entry[1]() is not offsets:  # new (or a reused id)
            entry = _ENTRIES[ident] = (weakref.ref(data, _drop(ident)), weakref.ref(offsets, _drop(ident)), {})
        found = entry[2].get((start, stop, what), _MISSING)
    if found is not _MISSING:
        return found
    value = make()
    with _LOCK:
        entry[2][(start, stop, what)] = value
    return value


_MISSING = object()
