"""Arrow's full validation (offsets in their buffers, text that is UTF-8) of an array that may be a
slice of a bigger one, at the cost of the slice: ``validate(full=True)`` of a slice checks the
children it shares whole, so its cost grows with the parent table. :func:`invalid_rows` first
cuts every list and struct child to the range the slice references (zero copy: a view over the
same buffers, only the slice's list offsets rebased), and finds failing rows by halving.

Example:
    >>> import pyarrow as pa
    >>> bad = pa.Array.from_buffers(pa.string(), 2, [None, pa.py_buffer(pa.array([0, 1, 2], pa.int32())
    ...                                                                 .buffers()[1]), pa.py_buffer(b"a\\xff")])
    >>> invalid_rows(bad)
    [(1, 'text that is not UTF-8')]
"""
from __future__ import annotations

import numpy as np

from .deps import require_pyarrow

__all__ = ["invalid_rows", "compact_view"]


def compact_view(arr):
    """``arr`` with each list and struct child cut to the rows ``arr`` references, over the same
    buffers (list offsets rebased: a copy of the slice's offsets only). Types it does not cut
    (views, unions, dictionaries, maps) are returned as they are. Raises ArrowInvalid for
    offsets outside their child.

    Example:
        >>> import pyarrow as pa
        >>> big = pa.array([["a"], ["b", "c"], ["d"]])
        >>> v = compact_view(big.slice(1, 1))
        >>> v.to_pylist(), len(v.values)
        ([['b', 'c']], 2)
    """
    pa = require_pyarrow()
    t = arr.type
    if isinstance(t, pa.ExtensionType):
        return pa.ExtensionArray.from_storage(t, compact_view(arr.storage))
    n = len(arr)
    validity = arr.is_valid().buffers()[1] if arr.null_count else None
    if pa.types.is_struct(t):
        children = [compact_view(arr.field(i)) for i in range(t.num_fields)]
        return pa.Array.from_buffers(t, n, [validity], null_count=arr.null_count, children=children)
    if pa.types.is_fixed_size_list(t):
        k = t.list_size
        child = arr.values.slice(arr.offset * k, n * k)
        return pa.Array.from_buffers(t, n, [validity], null_count=arr.null_count, children=[compact_view(child)])
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        off = arr.offsets.to_numpy()
        o0, o1 = int(off[0]), int(off[-1])
        values = arr.values
        if not 0 <= o0 <= o1 <= len(values):
            raise pa.ArrowInvalid(f"list offsets {o0}..{o1} outside their child of {len(values)} values")
        rebased = (off - o0).astype(np.int64 if pa.types.is_large_list(t) else np.int32)
        return pa.Array.from_buffers(t, n, [validity, pa.py_buffer(rebased)], null_count=arr.null_count,
                                     children=[compact_view(values.slice(o0, o1 - o0))])
    return arr  # strings, binary, primitives: Arrow validates a slice of them in the slice's cost


def _failure(arr):
    """Arrow's complaint about ``arr`` (None when it validates), at the cost of ``arr``'s rows."""
    pa = require_pyarrow()
    try:
        arr.validate()  # buffer sizes first: the view reads the slice's offsets
        compact_view(arr).validate(full=True)
        return None
    except pa.ArrowInvalid as err:
        return str(err)


def invalid_rows(arr, first: int = 0) -> list[tuple[int, str]]:
    """``(row + first, reason)`` for every row of ``arr`` that fails Arrow's full validation (text
    that is not UTF-8, offsets out of their buffers): one pass over the rows of ``arr`` (not of
    the table it is a slice of) when all is well, at most one per halving level when not.
    ValueError when ``arr`` fails and no row of it does alone.

    Example:
        >>> import pyarrow as pa
        >>> invalid_rows(pa.array([["fine"]]))
        []
    """
    why = _failure(arr)
    if why is None:
        return []
    found = _halve(arr, first, why)
    if not found:
        raise ValueError(f"corrupt Arrow data ({why.splitlines()[0][:300]})")
    return found


def _halve(arr, first: int, why: str) -> list[tuple[int, str]]:
    if len(arr) <= 1:
        if not len(arr):
            return []
        why = why.rsplit("Invalid: ", 1)[-1]
        return [(first, "text that is not UTF-8" if "UTF8" in why else f"corrupt data ({why})")]
    half = len(arr) // 2
    out = []
    for a, part in ((0, arr.slice(0, half)), (half, arr.slice(half))):
        w = _failure(part)
        if w is not None:
            out += _halve(part, first + a, w)
    return out
