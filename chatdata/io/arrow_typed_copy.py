"""A History's JSON columns saved once more as Arrow arrays, so ``to_arrow()`` parses nothing.

``History.memmap`` keeps ``tool_calls`` (and any other value that is not a string) as packed
JSON text. The first ``to_arrow()`` of a loaded History used to parse that text with Arrow's
JSON reader (twice when it inferred timestamps): about 11 ms for 10k sample chats, while every
other column is zero-copy. This module registers Arrow's IPC file format as the *typed copy*
of such columns (:mod:`chatdata.td.storage.typed_copies`): the writer stores the typed array
:func:`~chatdata.io.arrow_json.json_array_of` gives, beside the column, when that array reads
back exactly as the JSON; loading maps it; ``to_arrow()`` slices it.

A copy is read without trusting it: its schema must be the one field ``v`` of an exact type
(:func:`~chatdata.io.arrow_json.exact_type`), its length the column's, and Arrow's full
validation must pass (offsets inside their buffers, valid UTF-8); a copy that fails is not
used (a warning names the file and the column is parsed instead). ``chatdata verify`` checks
that a copy equals the parse of its column.

Example:
    >>> import os, tempfile, chatdata
    >>> path = tempfile.mkdtemp() + "/h"
    >>> chats = [[{"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": {"x": 1}}}]}]]
    >>> _ = chatdata.History.from_chats(chats).memmap(path)
    >>> sorted(f for f in os.listdir(path + "/_storage/_values") if "tool_calls" in f)
    ['tool_calls.bytes.memmap', 'tool_calls.offsets.memmap', 'tool_calls.typed.arrow']
    >>> chatdata.History.from_arrow(chatdata.load_memmap(path).to_arrow()).to_chats() == chats
    True
"""
from __future__ import annotations

import warnings

import numpy as np

from ..td.storage import TypedCopyFormat, register_typed_copy
from .arrow_json import exact_type, json_array_of, null_rows
from .deps import require_pyarrow

__all__ = ["FORMAT", "make_copy", "read_copy", "check_copy", "copy_of"]

FORMAT = "arrow-ipc"


def make_copy(data: np.ndarray, offsets: np.ndarray):
    """The Arrow IPC file (a ``pyarrow.Buffer``) holding the typed array of a packed JSON
    column as the field ``v``, or None when the values cannot be typed exactly (or pyarrow is
    not installed: the copy is only a cache).

    Example:
        >>> data = np.frombuffer(b'null[1]', np.uint8)
        >>> read_copy(np.frombuffer(make_copy(data, np.array([0, 4, 7])), np.uint8), 2).to_pylist()
        [None, [1]]
    """
    try:
        pa = require_pyarrow()
    except ImportError:
        return None
    arr = _parsed(data, offsets)
    if arr is None:
        return None
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, pa.schema([pa.field("v", arr.type)])) as writer:
        writer.write_batch(pa.record_batch([arr], names=["v"]))
    return sink.getvalue()


def _parsed(data: np.ndarray, offsets: np.ndarray):
    """What Arrow's JSON reader makes of a packed column, when it reads back exactly (else None)."""
    return json_array_of(data, offsets, null_rows(data, offsets), "typed")


def read_copy(blob: np.ndarray, n: int):
    """The typed array stored in ``blob`` (a copy's bytes), without copying them; raises
    ``ValueError`` saying what is wrong when it is not a valid copy of ``n`` values.

    Example:
        >>> read_copy(np.zeros(8, np.uint8), 1)
        Traceback (most recent call last):
        ...
        ValueError: not an Arrow IPC file (...)
    """
    pa = require_pyarrow()
    try:
        reader = pa.ipc.open_file(pa.py_buffer(blob))
        if reader.num_record_batches != 1:
            raise ValueError(f"{reader.num_record_batches} record batches, expected 1")
        batch = reader.get_batch(0)
        batch.validate(full=True)
        names = batch.schema.names  # exact_type decodes the names inside the type
        t = batch.schema.field(0).type if names else None
    except (pa.ArrowException, OSError, UnicodeDecodeError) as err:
        raise ValueError(f"not an Arrow IPC file ({str(err).splitlines()[0][:200]})") from None
    if names != ["v"]:
        raise ValueError(f"fields {names}, expected the one field 'v'")
    if pa.types.is_null(t) or not exact_type(t):
        raise ValueError(f"type {str(t)[:200]!r} is not one that reads back as the JSON exactly (struct, list, "
                         "string, int64 and bool, field names in UTF-8)")
    if batch.num_rows != n:
        raise ValueError(f"{batch.num_rows} values, the column has {n}")
    return batch.column(0)


def check_copy(data: np.ndarray, offsets: np.ndarray, blob: np.ndarray) -> str | None:
    """None when ``blob`` is the typed copy of the packed JSON column ``(data, offsets)``,
    else what differs (``chatdata verify`` calls it).

    Example:
        >>> data, offsets = np.frombuffer(b'[1][2]', np.uint8), np.array([0, 3, 6])
        >>> blob = np.frombuffer(make_copy(data, offsets), np.uint8)
        >>> check_copy(data, offsets, blob) is None
        True
        >>> check_copy(np.frombuffer(b'[1][3]', np.uint8), offsets, blob)
        'typed copy differs from its column at value 1'
    """
    try:
        stored = read_copy(blob, len(offsets) - 1)
    except ValueError as err:
        return f"typed copy is unreadable: {err}"
    parsed = _parsed(data, offsets)
    if parsed is None:
        return "the column's values cannot be typed exactly, yet it has a typed copy"
    if parsed.type != stored.type:
        return f"typed copy has type {stored.type}, its column parses as {parsed.type}"
    if not parsed.equals(stored):
        differs = next(i for i in range(len(parsed)) if not parsed[i].equals(stored[i]))
        return f"typed copy differs from its column at value {differs}"
    return None


def copy_of(stack):
    """The typed array of a loaded 1-D JSON column read from its typed copy (sliced to the rows
    the stack reads), or None when it has none or reads values the copy does not hold (values
    set in memory, rows out of order). The copy is read and validated once per column; every
    slice of the column slices it.

    Example:
        >>> from chatdata import NonTensorStack
        >>> copy_of(NonTensorStack.from_list([{"a": 1}])) is None
        True
    """
    from .arrow_memo import column_key, memo

    key = column_key(stack)  # a contiguous range of a packed column that changed nowhere
    typed = getattr(stack._pool, "_typed", None) if key is not None else None
    if typed is None or typed[0] != FORMAT:
        return None
    data, offsets, start, stop = key
    n = len(offsets) - 1
    arr = memo((data, offsets, 0, n), "typed copy", lambda: _read_or_warn(typed, n))
    if arr is None:
        return None
    return arr if (start, stop) == (0, n) else arr.slice(start, stop - start)


def _read_or_warn(typed, n: int):
    try:
        return read_copy(typed[1].numpy(), n)
    except ValueError as err:
        warnings.warn(f"{typed[2]} is not used ({err}); its column is parsed instead. `chatdata verify` "
                      "checks the folder; saving the collection again rewrites the copy.", stacklevel=5)
        return None


register_typed_copy(TypedCopyFormat(FORMAT, ".arrow", make_copy, check_copy))
