"""Shards <-> Arrow tables, for engines that move tables between workers (Ray Data).

A History shard becomes a ``messages`` table (:func:`~chatdata.io.arrow_history.history_to_arrow`);
a token shard (a ragged stack of ``input_ids`` / ``assistant_masks``) a table of list columns
over the same flat buffers. :func:`~chatdata.io.shard_writer.write_shard_from_arrow` writes one table back as a new shard.

Example:
    >>> from chatdata import History
    >>> _ = History.from_chats([[{"role": "user", "content": "hi"}]]).memmap("shard/")
    >>> shard_to_arrow("shard/").to_pylist()
    [{'messages': [{'role': 'user', 'content': 'hi'}]}]
"""
from __future__ import annotations

import torch

from .deps import require_pyarrow

__all__ = ["shard_to_arrow", "ragged_to_arrow", "ragged_from_arrow", "TOKEN_COLUMNS"]

TOKEN_COLUMNS = ("input_ids", "assistant_masks")


def ragged_to_arrow(r):
    """A ragged stack (batch ``(n, -1)``) as a table: one ``large_list`` column per key, no copy
    of number columns (bool masks are bit-packed by Arrow)."""
    pa = require_pyarrow()
    from .arrow_columns import tensor_buffer, tensor_to_array

    offsets = r.offsets.to(torch.int64).contiguous()
    if offsets.numel() and int(offsets[0]):
        offsets = offsets - offsets[0]
    off = pa.Array.from_buffers(pa.int64(), offsets.numel(), [None, tensor_buffer(offsets)])
    values = r.values
    return pa.table({k: pa.LargeListArray.from_arrays(off, tensor_to_array(values[k])) for k in values.keys()})


def ragged_from_arrow(table):
    """The ragged stack of a table of list columns sharing their row lengths (numbers: no copy)."""
    pa = require_pyarrow()
    import numpy as np

    from ..td import RaggedTensorDict, TensorDict
    from .arrow_columns import array_to_tensor

    cols, offsets = {}, None
    for name in table.column_names:
        arr = table.column(name)
        arr = arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr
        if not (pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type)):
            raise TypeError(f"column {name!r} has type {arr.type}; expected lists of numbers")
        if arr.null_count:
            row = int(np.flatnonzero(arr.is_null().to_numpy(zero_copy_only=False))[0])
            raise ValueError(f"row {row}: {name!r} is null; a token row holds a list of numbers")
        off = arr.offsets.to_numpy().astype(np.int64)
        off = off - off[0]
        if offsets is None:
            offsets = off
        elif not np.array_equal(offsets, off):
            row = int(np.flatnonzero(np.diff(offsets) != np.diff(off))[0])
            raise ValueError(f"row {row}: {name!r} holds {int(off[row + 1] - off[row])} values but "
                             f"{table.column_names[0]!r} {int(offsets[row + 1] - offsets[row])}; a token row's "
                             "columns have one length")
        if name == "input_ids" and not pa.types.is_integer(arr.type.value_type):
            raise TypeError(f"column 'input_ids' holds {arr.type.value_type} values; token ids are integers")
        try:
            cols[name] = array_to_tensor(arr.flatten())
        except (TypeError, ValueError) as err:  # lists of strings, of lists, with null values
            raise type(err)(f"column {name!r}: {err}; expected lists of numbers") from None
    if offsets is None:
        raise ValueError("a token table needs at least one column")
    n = int(offsets[-1])
    return RaggedTensorDict(TensorDict(cols, [n]), torch.from_numpy(offsets))


def shard_to_arrow(path, column: str = "messages"):
    """The Arrow table of one shard (or plain dataset) folder, zero-copy where the data allows."""
    from ..history import History
    from ..td import RaggedTensorDict, load_memmap

    obj = load_memmap(path)
    if isinstance(obj, History):
        return obj.to_arrow(column)
    if isinstance(obj, RaggedTensorDict):
        return ragged_to_arrow(obj)
    raise TypeError(f"{path} holds a {type(obj).__name__}; expected a History or a ragged token set")
