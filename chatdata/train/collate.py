"""Collators: rows of token ids -> model-ready batches, padding-free or padded.

``rows`` is a list of dicts with ``input_ids`` and ``labels`` (or ``assistant_masks``, from
which labels are made; without either, every token is a label), the :class:`TokenRows` a
:class:`TokenDataset` returns to a ``DataLoader``, or a ragged token set such as
``Rollout.tokens()`` (in the last two, no Python loop runs over the rows).

Padding-free batches follow transformers' ``DataCollatorWithFlattening(return_flash_attn_kwargs=True)``:
``input_ids``, ``labels`` and ``position_ids`` of shape (1, T) (int64), positions restarting at
0 for each sequence, -100 as each sequence's first label (so no sequence learns to predict
across a boundary), ``cu_seq_lens_q``/``cu_seq_lens_k`` (int32, n + 1 for n rows with tokens:
an empty row gets no boundary, as in transformers),
``max_length_q``/``max_length_k`` (Python ints) and ``seq_idx`` (int32, (1, T): the index of each
token's sequence among the rows with tokens, what the short convolutions of hybrid models --
Mamba / linear-attention layers -- read to stop at a boundary; TRL's padding-free collator and
``DataCollatorWithFlattening(return_seq_idx=True)`` give it too). There is no ``attention_mask``: transformers'
sdpa/eager attention finds the sequences from the restarting positions and builds the
block-diagonal causal mask; flash-attention kernels take the ``cu_seq_lens``.

Both collates carry every other per-token column the rows hold (``logprobs``, ``advantages``,
``loss_weights``, ``routed_experts``, ...; see :mod:`chatdata.train.columns` for how a column is
recognised) under its own name, aligned with ``input_ids``: ``(1, T, ...)`` padding-free,
``(B, L, ...)`` padded with 0. ``assistant_masks`` (and TRL's ``completion_mask``) become
``labels``, as before. A row of TRL's ``pack_dataset`` (with ``seq_lengths``) is as many sequences
in the padding-free batch, and refused by the padded one (:mod:`chatdata.train.trl_columns`).
"""
from __future__ import annotations

import numpy as np
import torch

from .columns import gather_rows, pad_index, pad_rows
from .dataset import IGNORE_INDEX

_RAMP = np.arange(0, dtype=np.int64)


def _ramp(n: int) -> np.ndarray:
    """0, 1, ..., n - 1 (a cached array, grown on demand; slices of it are copied, never written)."""
    global _RAMP
    if _RAMP.size < n:
        _RAMP = np.arange(max(n, 2 * _RAMP.size), dtype=np.int64)
        _RAMP.flags.writeable = False
    return _RAMP


_CONSUMED = ("labels", "assistant_masks")  # assistant_masks is folded into labels


def collate_padding_free(rows) -> dict:
    """Concatenate ``rows`` into one padding-free sequence; see the module docstring.

    Example:
        >>> b = collate_padding_free([{"input_ids": [1, 2, 3], "labels": [1, 2, 3]}, {"input_ids": [4, 5]}])
        >>> b["input_ids"].tolist(), b["labels"].tolist(), b["position_ids"].tolist()
        ([[1, 2, 3, 4, 5]], [[-100, 2, 3, -100, 5]], [[0, 1, 2, 0, 1]])
        >>> b["cu_seq_lens_q"].tolist(), b["max_length_k"], b["seq_idx"].tolist()
        ([0, 3, 5], 3, [[0, 0, 0, 1, 1]])
    """
    flat = gather_rows(rows, labels=True, packed=True)
    ids, labels = flat.ids, flat.columns["labels"]  # labels is a fresh tensor: safe to edit in place
    # numpy for the index arithmetic: on small batches torch's thread pool costs more than the work
    lens = flat.lengths if flat.pieces is None else flat.pieces  # a TRL-packed row: its sequences
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
    weights = flat.columns.get("loss_weights")
    if weights is not None:  # a fresh tensor too (weights_column): no weight where no label
        if weights.requires_grad:  # (numpy cannot write a tensor autograd tracks)
            weights[torch.from_numpy(starts)] = 0.0
        else:
            weights.numpy()[starts] = 0.0
    ramp = _ramp(int(lens.max()))
    position_ids = np.concatenate([ramp[:k] for k in lens.tolist()]) if lens.size < 4096 else \
        np.arange(total, dtype=np.int64) - np.repeat(starts, lens)
    cu32 = torch.from_numpy(cu.astype(np.int32))
    seq_idx = np.repeat(np.arange(lens.size, dtype=np.int32), lens)
    max_len = int(lens.max())
    return {
        "input_ids": ids.reshape(1, total),
        "labels": labels.reshape(1, total),
        "position_ids": torch.from_numpy(position_ids).reshape(1, total),
        "cu_seq_lens_q": cu32,
        "cu_seq_lens_k": cu32,
        "max_length_q": max_len,
        "max_length_k": max_len,
        "seq_idx": torch.from_numpy(seq_idx).reshape(1, total),
        **{name: col.reshape(1, total, *col.shape[1:]) for name, col in flat.columns.items() if name not in _CONSUMED},
    }


def collate_padded(rows, pad_token_id: int, pad_to_multiple_of: int | None = None, padding_side: str = "right") -> dict:
    """Pad ``rows`` into (B, L) ``input_ids``, ``attention_mask`` (1 on tokens) and ``labels`` (-100 on padding).

    ``L`` is the longest row, rounded up to ``pad_to_multiple_of`` when given. Every other
    per-token column comes out as ``(B, L, ...)``, 0 on padding.

    Example:
        >>> b = collate_padded([{"input_ids": [1, 2, 3]}, {"input_ids": [4]}], pad_token_id=0, padding_side="left")
        >>> b["input_ids"].tolist(), b["attention_mask"].tolist(), b["labels"].tolist()
        ([[1, 2, 3], [0, 0, 4]], [[1, 1, 1], [0, 0, 1]], [[1, 2, 3], [-100, -100, 4]])
    """
    if pad_token_id is None or isinstance(pad_token_id, (bool, np.bool_)) or not isinstance(pad_token_id, (int, np.integer)):
        raise ValueError(f"pad_token_id must be an int (e.g. tokenizer.pad_token_id), got {pad_token_id!r}")
    if pad_token_id < 0:  # padding is still looked up in the embedding table, attention mask or not
        raise ValueError(f"pad_token_id must be a token id >= 0 (e.g. tokenizer.pad_token_id or eos_token_id), "
                         f"got {pad_token_id}; -100 belongs in labels, which the collate pads itself")
    pad_token_id = int(pad_token_id)
    if padding_side not in ("right", "left"):
        raise ValueError(f"padding_side must be 'right' or 'left', got {padding_side!r}")
    if pad_to_multiple_of is not None:  # a numpy int too, as pad_token_id (a config read through numpy)
        if isinstance(pad_to_multiple_of, (bool, np.bool_)) or not isinstance(pad_to_multiple_of, (int, np.integer)) \
                or pad_to_multiple_of <= 0:
            raise ValueError(f"pad_to_multiple_of must be a positive int or None, got {pad_to_multiple_of!r}")
        pad_to_multiple_of = int(pad_to_multiple_of)
    flat = gather_rows(rows, labels=True)
    lengths = flat.lengths
    B = lengths.size
    if B == 0:
        raise ValueError("cannot collate an empty batch: rows is empty")
    L = int(lengths.max())
    if L == 0:  # a (B, 0) batch (or one of padding alone) fails inside the model, far from here
        raise ValueError("cannot collate a batch whose sequences are all empty")
    if pad_to_multiple_of:
        L = -(-L // pad_to_multiple_of) * pad_to_multiple_of
    left = padding_side == "left"
    index = pad_index(flat.offsets, L, left)
    input_ids = pad_rows(flat.ids, flat.offsets, L, pad_token_id, left, index)
    attention = pad_rows(torch.ones(flat.ids.numel(), dtype=torch.int64), flat.offsets, L, 0, left, index)
    out = {"input_ids": input_ids, "attention_mask": attention,
           "labels": pad_rows(flat.columns["labels"], flat.offsets, L, IGNORE_INDEX, left, index)}
    for name, col in flat.columns.items():
        if name not in _CONSUMED:
            out[name] = pad_rows(col, flat.offsets, L, 0, left, index)
    return out
