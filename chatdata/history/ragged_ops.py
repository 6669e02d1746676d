"""Offset arithmetic for growing batches of conversations (``append`` / ``extend``).

All functions work on storages (TensorDict / RaggedTensorDict) and compute the new element
positions with torch ops over the offsets: no per-conversation Python loop.

Example:
    >>> a = RaggedTensorDict(TensorDict({"x": torch.arange(3)}, [3]), torch.tensor([0, 1, 3]))
    >>> b = RaggedTensorDict(TensorDict({"x": torch.tensor([10, 20])}, [2]), torch.tensor([0, 1, 2]))
    >>> r = concat_rows(a, b)
    >>> r.offsets.tolist(), r.values["x"].tolist()
    ([0, 2, 5], [0, 10, 1, 2, 20])
"""
from __future__ import annotations

import torch

from ..td import RaggedTensorDict, TensorDict
from ..td import cat

__all__ = ["as_ragged", "concat_rows", "single_row"]


def as_ragged(storage) -> RaggedTensorDict:
    """``storage`` as a ragged stack of its rows (a dense ``(B, T)`` TensorDict: B rows of T)."""
    if isinstance(storage, RaggedTensorDict):
        return storage
    bs = storage.batch_size
    if len(bs) != 2:
        raise ValueError(f"expected a batch of conversations (2 batch dims), got batch size {tuple(bs)}")
    b, t = bs
    return RaggedTensorDict(storage.reshape(-1), torch.arange(b + 1, dtype=torch.int64) * t)


def single_row(storage: TensorDict) -> RaggedTensorDict:
    """A ragged stack holding one row: the 1-D ``storage``."""
    return RaggedTensorDict(storage, torch.tensor([0, storage.batch_size[0]], dtype=torch.int64))


def _rows_of(offsets: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    total = int(offsets[-1])
    return torch.repeat_interleave(torch.arange(lengths.numel()), lengths, output_size=total)


def concat_rows(a: RaggedTensorDict, b: RaggedTensorDict) -> RaggedTensorDict:
    """Row ``i`` of the result is row ``i`` of ``a`` followed by row ``i`` of ``b``."""
    if len(a) != len(b):
        raise ValueError(f"cannot extend {len(a)} conversations with {len(b)} rows of messages")
    la, lb = a.lengths, b.lengths
    off = torch.zeros(len(a) + 1, dtype=torch.int64)
    torch.cumsum(la + lb, 0, out=off[1:])
    na, nb = int(a.offsets[-1]), int(b.offsets[-1])
    rows_a, rows_b = _rows_of(a.offsets, la), _rows_of(b.offsets, lb)
    dest_a = torch.arange(na) - a.offsets[rows_a] + off[rows_a]
    dest_b = torch.arange(nb) - b.offsets[rows_b] + off[rows_b] + la[rows_b]
    src = torch.empty(na + nb, dtype=torch.int64)
    src[dest_a] = torch.arange(na)
    src[dest_b] = torch.arange(na, na + nb)
    values = cat([a.values, b.values], 0)
    return RaggedTensorDict(values._index(src), off)
