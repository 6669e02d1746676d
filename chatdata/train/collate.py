"""Collators: rows of token ids -> model-ready batches, padding-free or padded.

``rows`` is a list of dicts with ``input_ids`` and ``labels`` (or ``assistant_masks``, from
which labels are made; without either, every token is a label), or the :class:`TokenRows` a
:class:`TokenDataset` returns to a ``DataLoader`` (then no Python loop runs over the rows).
Rows with ``loss_weights`` give the batch a float32 ``loss_weights`` beside ``labels``
(:mod:`.weights_column`).

Padding-free batches follow transformers' ``DataCollatorWithFlattening(return_flash_attn_kwargs=True)``:
``input_ids``, ``labels`` and ``position_ids`` of shape (1, T) (int64), positions restarting at
0 for each sequence, -100 as each sequence's first label (so no sequence learns to predict
across a boundary), ``cu_seq_lens_q``/``cu_seq_lens_k`` (int32, n + 1) and
``max_length_q``/``max_length_k`` (Python ints). There is no ``attention_mask``: transformers'
sdpa/eager attention finds the sequences from the restarting positions and builds the
block-diagonal causal mask; flash-attention kernels take the ``cu_seq_lens``.
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch

from .dataset import IGNORE_INDEX, TokenRows
from .weights_column import loss_weights_for

__all__ = ["collate_padding_free", "collate_padded"]


def _as_1d(x, name: str, j: int) -> torch.Tensor:
    t = x if isinstance(x, torch.Tensor) else torch.as_tensor(x)
    if t.ndim != 1:
        raise ValueError(f"row {j}: {name} must be 1-D, got shape {tuple(t.shape)}")
    if t.numel() and (t.dtype.is_floating_point or t.dtype == torch.bool):
        raise TypeError(f"row {j}: {name} must hold integer ids, got dtype {t.dtype}")
    return t.to(torch.int64)


def _flat_columns(rows) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(flat input_ids, flat labels, lengths) of ``rows``."""
    if isinstance(rows, TokenRows):
        return rows.input_ids, rows.labels, rows.lengths
    if isinstance(rows, Mapping) or not hasattr(rows, "__len__"):
        raise TypeError(f"rows must be a list of dicts (one per sequence), got {type(rows).__name__}")
    if len(rows) == 0:
        raise ValueError("cannot collate an empty batch: rows is empty")
    ids, labels = [], []
    for j, row in enumerate(rows):
        if not isinstance(row, Mapping) or "input_ids" not in row:
            raise ValueError(f"row {j} must be a dict with an 'input_ids' entry, got "
                             f"{type(row).__name__}{' with keys ' + str(sorted(row)) if isinstance(row, Mapping) else ''}")
        x = _as_1d(row["input_ids"], "input_ids", j)
        if row.get("labels") is not None:
            y = _as_1d(row["labels"], "labels", j)
        elif row.get("assistant_masks") is not None:
            m = torch.as_tensor(row["assistant_masks"])
            if m.shape != x.shape:
                raise ValueError(f"row {j}: assistant_masks has shape {tuple(m.shape)} but input_ids {tuple(x.shape)}")
            y = x.masked_fill(~m.to(torch.bool), IGNORE_INDEX)
        else:
            y = x
        if y.shape != x.shape:
            raise ValueError(f"row {j}: labels has {y.numel()} entries but input_ids {x.numel()}")
        ids.append(x)
        labels.append(y)
    lengths = torch.tensor([t.numel() for t in ids], dtype=torch.int64)
    return (torch.from_numpy(np.concatenate([t.numpy() for t in ids])),
            torch.from_numpy(np.concatenate([t.numpy() for t in labels])), lengths)


_RAMP = np.arange(0, dtype=np.int64)


def _ramp(n: int) -> np.ndarray:
    """0, 1, ..., n - 1 (a cached array, grown on demand; slices of it are copied, never written)."""
    global _RAMP
    if _RAMP.size < n:
        _RAMP = np.arange(max(n, 2 * _RAMP.size), dtype=np.int64)
        _RAMP.flags.writeable = False
    return _RAMP


def collate_padding_free(rows) -> dict:
    """Concatenate ``rows`` into one padding-free sequence; see the module docstring.

    Example:
        >>> b = collate_padding_free([{"input_ids": [1, 2, 3], "labels": [1, 2, 3]}, {"input_ids": [4, 5]}])
        >>> b["input_ids"].tolist(), b["labels"].tolist(), b["position_ids"].tolist()
        ([[1, 2, 3, 4, 5]], [[-100, 2, 3, -100, 5]], [[0, 1, 2, 0, 1]])
        >>> b["cu_seq_lens_q"].tolist(), b["max_length_k"]
        ([0, 3, 5], 3)
    """
    ids, labels, lengths = _flat_columns(rows)  # labels is a fresh tensor: safe to edit in place
    # numpy for the index arithmetic: on small batches torch's thread pool costs more than the work
    lens = lengths.numpy()
    if lens.size == 0:
        raise ValueError("cannot collate an empty batch: rows is empty")
    if not lens.all():  # an empty sequence holds no token: leave it out of the boundaries
        lens = lens[lens > 0]
        if lens.size == 0:
            raise ValueError("cannot collate a batch whose sequences are all empty")
    total = ids.numel()
    cu = np.zeros(lens.size + 1, dtype=np.int64)
    np.cumsum(lens, out=cu[1:])
    starts = cu[:-1]
    labels.numpy()[starts] = IGNORE_INDEX
    weights = loss_weights_for(rows, labels)  # rows with a loss_weights column: (1, T) float32 beside labels
    ramp = _ramp(int(lens.max()))
    position_ids = np.concatenate([ramp[:k] for k in lens.tolist()]) if lens.size < 4096 else \
        np.arange(total, dtype=np.int64) - np.repeat(starts, lens)
    cu32 = torch.from_numpy(cu.astype(np.int32))
    max_len = int(lens.max())
    batch = {
        "input_ids": ids.reshape(1, total),
        "labels": labels.reshape(1, total),
        "position_ids": torch.from_numpy(position_ids).reshape(1, total),
        "cu_seq_lens_q": cu32,
        "cu_seq_lens_k": cu32,
        "max_length_q": max_len,
        "max_length_k": max_len,
    }
    if weights is not None:
        batch["loss_weights"] = weights.reshape(1, total)
    return batch


def collate_padded(rows, pad_token_id: int, pad_to_multiple_of: int | None = None, padding_side: str = "right") -> dict:
    """Pad ``rows`` into (B, L) ``input_ids``, ``attention_mask`` (1 on tokens) and ``labels`` (-100 on padding).

    ``L`` is the longest row, rounded up to ``pad_to_multiple_of`` when given.

    Example:
        >>> b = collate_padded([{"input_ids": [1, 2, 3]}, {"input_ids": [4]}], pad_token_id=0, padding_side="left")
        >>> b["input_ids"].tolist(), b["attention_mask"].tolist(), b["labels"].tolist()
        ([[1, 2, 3], [0, 0, 4]], [[1, 1, 1], [0, 0, 1]], [[1, 2, 3], [-100, -100, 4]])
    """
    if pad_token_id is None or isinstance(pad_token_id, bool) or not isinstance(pad_token_id, int):
        raise ValueError(f"pad_token_id must be an int (e.g. tokenizer.pad_token_id), got {pad_token_id!r}")
    if padding_side not in ("right", "left"):
        raise ValueError(f"padding_side must be 'right' or 'left', got {padding_side!r}")
    if pad_to_multiple_of is not None and (isinstance(pad_to_multiple_of, bool) or not isinstance(pad_to_multiple_of, int)
                                           or pad_to_multiple_of <= 0):
        raise ValueError(f"pad_to_multiple_of must be a positive int or None, got {pad_to_multiple_of!r}")
    ids, labels, lengths = _flat_columns(rows)
    weights = loss_weights_for(rows, labels)  # rows with a loss_weights column: (B, L) float32, 0 on padding
    B = lengths.numel()
    if B == 0:
        raise ValueError("cannot collate an empty batch: rows is empty")
    L = int(lengths.max())
    if pad_to_multiple_of:
        L = -(-L // pad_to_multiple_of) * pad_to_multiple_of
    L = max(L, 1) if pad_to_multiple_of else L
    total = ids.numel()
    offsets = torch.zeros(B + 1, dtype=torch.int64)
    torch.cumsum(lengths, 0, out=offsets[1:])
    row = torch.repeat_interleave(torch.arange(B), lengths, output_size=total)
    col = torch.arange(total, dtype=torch.int64) - offsets[:-1][row]
    if padding_side == "left":
        col += (L - lengths)[row]
    flat = row * L + col
    input_ids = torch.full((B * L,), pad_token_id, dtype=torch.int64)
    attention = torch.zeros(B * L, dtype=torch.int64)
    out_labels = torch.full((B * L,), IGNORE_INDEX, dtype=torch.int64)
    input_ids[flat] = ids
    attention[flat] = 1
    out_labels[flat] = labels
    batch = {"input_ids": input_ids.reshape(B, L), "attention_mask": attention.reshape(B, L),
             "labels": out_labels.reshape(B, L)}
    if weights is not None:
        batch["loss_weights"] = torch.zeros(B * L, dtype=torch.float32).index_put_((flat,), weights).reshape(B, L)
    return batch
