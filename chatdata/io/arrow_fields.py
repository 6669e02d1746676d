"""The whole-column path of ``History.to_arrow``: the optional message fields (``is_complete``,
``tool_calls``, ``tool_responses``, extra keys) built from packed JSON columns in one pass per
column, parsed by Arrow's C++ JSON reader (or taken from a saved typed copy, or kept as JSON
text), without a Python object per message. :func:`optional_fields` returns None when a value
needs :mod:`chatdata.io.arrow_history`'s per-message path instead.

Example:
    >>> import numpy as np
    >>> flag_union(np.array([1, 4, 0, 16], dtype=np.int8))
    21
"""
from __future__ import annotations

import numpy as np

from ..history.columns import IS_COMPLETE, TOOL_CALLS, TOOL_RESPONSES
from ..td import NonTensorData
from .arrow_check import NULL_KEYS
from .arrow_columns import JSON_META
from .deps import require_pyarrow

__all__ = ["optional_fields", "flag_union", "DEFAULTS", "is_default_const"]

DEFAULTS = {"is_complete": True, "tool_calls": None, "tool_responses": None, "extra": None}


def is_default_const(col, name: str) -> bool:
    """Whether the message column ``col`` of field ``name`` is one constant default for all."""
    return isinstance(col, NonTensorData) and col.data is DEFAULTS[name]


def flag_union(a: np.ndarray) -> int:
    """The bits set in any element of a contiguous int8 array (one pass, 8 bytes at a time)."""
    if not a.flags.c_contiguous:
        a = np.ascontiguousarray(a)
    whole = a.nbytes // 8 * 8
    wide = int(np.bitwise_or.reduce(a[:whole].view(np.uint64))) if whole else 0
    bits = int(np.bitwise_or.reduce(a[whole:].view(np.uint8))) if a.nbytes > whole else 0
    while wide:
        bits |= wide & 0xFF
        wide >>= 8
    return bits


def _typed(col, parse, objects: bool = False):
    """The typed array of a packed JSON column: its saved typed copy when it has one
    (:mod:`.arrow_typed_copy`; for ``objects`` only when its values are objects: the struct
    array the parse would give), else ``parse()``."""
    from .arrow_typed_copy import copy_of

    arr = copy_of(col)
    if arr is None or (objects and not require_pyarrow().types.is_struct(arr.type)):
        return parse()
    return arr


def _null_mask(col, got) -> np.ndarray:
    """A bool per value of a packed JSON column: it is ``null`` (from its typed copy when it
    has one: no pass over the column's offsets and bytes)."""
    from .arrow_json import null_rows
    from .arrow_typed_copy import copy_of

    arr = copy_of(col)
    if arr is None:
        return null_rows(*got)
    if not arr.null_count:
        return np.zeros(len(arr), dtype=bool)
    bits = np.frombuffer(arr.buffers()[0], dtype=np.uint8)  # the validity bitmap: 1 = not null
    return ~np.unpackbits(bits, bitorder="little")[arr.offset:arr.offset + len(arr)].astype(bool)


def _given_as_none(col, given: np.ndarray, nulls) -> bool:
    """Whether a message that has the key (``given``: nonzero, per value of the packed JSON
    column ``col``) holds ``null`` there: read from the validity bitmap of the column's typed
    copy when it has one (8 messages a byte), else from ``nulls()``."""
    valid = _valid_bitmap(col)
    if valid is None:
        return bool(given[nulls()].any())
    packed = np.packbits(given, bitorder="little")  # nonzero = 1; the last byte's padding is 0
    return bool((packed & ~valid).any())


def _valid_bitmap(col):
    """The validity bitmap (1 = not null, little-endian bits, a copy) of a packed JSON column's
    typed copy, once per column; None when it has no copy (or it starts inside a byte)."""
    from .arrow_memo import column_key, memo
    from .arrow_typed_copy import copy_of

    def make():
        arr = copy_of(col)
        if arr is None or arr.offset % 8:
            return None
        if not arr.null_count:
            return np.full((len(arr) + 7) // 8, 0xFF, dtype=np.uint8)
        return np.frombuffer(arr.buffers()[0], dtype=np.uint8)[arr.offset // 8:][:(len(arr) + 7) // 8].copy()
    return memo(column_key(col), "valid bitmap", make)


def optional_fields(cols: dict, flags_np: np.ndarray, set_bits: int, n: int, json: str):
    """(fields, arrays) of ``is_complete``, ``tool_calls``, ``tool_responses`` and the extra keys,
    computed over whole columns (packed JSON parsed by Arrow, or kept as JSON text), or None when
    a value needs the per-message path (a key present with None, values Arrow cannot type
    exactly, columns held as Python objects)."""
    pa = require_pyarrow()
    from .arrow_json import json_array_of, json_text_array, null_rows, packed_json, valid_bits
    from .arrow_memo import column_key, memo

    fields, arrays = [], []
    for name, bit in (("is_complete", IS_COMPLETE), ("tool_calls", TOOL_CALLS), ("tool_responses", TOOL_RESPONSES)):
        col = cols[name]
        if is_default_const(col, name) and not set_bits & bit:
            continue
        got = packed_json(col)
        if got is None:
            return None
        key = column_key(col)  # what is parsed from the packed bytes is parsed once per column

        def nulls(key=key, got=got, col=col):  # which values are null: read from a typed copy if any
            return memo(key, "nulls", lambda: _null_mask(col, got))

        if name == "is_complete":
            if nulls().any():
                return None
            given = (flags_np & bit) != 0 if set_bits & bit else np.zeros(n, dtype=bool)
            value = memo(key, "true", lambda: got[0][got[1][:-1]] == ord("t"))  # true / false
            arr, meta = pa.array(value, pa.bool_(), mask=~given & value), None  # True not given: absent
        else:
            if set_bits & bit and _given_as_none(col, flags_np.view(np.uint8) & bit, nulls):
                return None  # a key given as None: the per-message path writes _null_keys
            if json == "text":  # a view of the column: never memoised (see arrow_memo), its bitmap is
                arr = json_text_array(*got, nulls(), memo(key, "valid", lambda: valid_bits(nulls())))
            else:
                arr = memo(key, "typed", lambda: _typed(col, lambda: json_array_of(*got, nulls(), json)))
            if arr is None:
                return None
            meta = JSON_META if json == "text" else None
        fields.append(pa.field(name, arr.type, metadata=meta))
        arrays.append(arr)
    extra = cols["extra"]
    if not is_default_const(extra, "extra"):
        got = packed_json(extra)
        arr = None if got is None else memo(column_key(extra), "typed objects", lambda: _typed(
            extra, lambda: json_array_of(*got, null_rows(*got), "typed", objects=True), objects=True))
        if arr is None or not pa.types.is_struct(arr.type):
            return None
        reserved = {"role", "content", *DEFAULTS, NULL_KEYS}
        if reserved & {f.name for f in arr.type}:
            return None  # the per-message path names the clash
        for f, child in zip(arr.type, arr.flatten()):  # a message without extra keys: null in every child
            if pa.types.is_string(child.type):
                child = child.cast(pa.large_string())
            fields.append(pa.field(f.name, child.type))
            arrays.append(child)
    return fields, arrays
