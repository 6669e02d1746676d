"""The ``loss_weights`` column: float32 per token, kept in agreement with ``labels`` and the mask.

A token set written with loss weights (``chatdata tokenize --loss-weight ...``,
``History.apply_chat_template(..., loss_weights=...)``) carries it like any other per-token
column (:mod:`.columns`); this module adds what makes it a weight rather than a plain column:
it is a finite float >= 0, every row of a batch has one or none has, and a weight of 0 means
"not trained": the label is -100 and the mask is off there, and the weight is 0 wherever the
label is -100 (in a batch without labels, such as a prefix tree of rows that carry none,
wherever the mask is off). :func:`~chatdata.train.weighted_causal_lm_loss` consumes it.

Example:
    >>> import torch
    >>> cols = {"labels": torch.tensor([5, -100, 7]), "loss_weights": torch.tensor([0.5, 1.0, 0.0])}
    >>> reconcile_loss_weights(cols)
    >>> cols["loss_weights"].tolist(), cols["labels"].tolist()
    ([0.5, 0.0, 0.0], [5, -100, -100])
"""
from __future__ import annotations

import numpy as np
import torch

from .dataset import IGNORE_INDEX

__all__ = ["reconcile_loss_weights", "LOSS_WEIGHTS"]

LOSS_WEIGHTS = "loss_weights"


def reconcile_loss_weights(columns: dict) -> None:
    """In place: ``columns["loss_weights"]`` as float32, 0 where ``labels`` is -100 (without
    labels: where ``assistant_masks`` is off); ``labels`` -100 and ``assistant_masks`` off where
    the weight is 0. No-op without a weights column."""
    w = columns.get(LOSS_WEIGHTS)
    if w is None:
        return
    if w.ndim != 1:
        raise ValueError(f"loss_weights must hold one weight per token, got per-token shape {tuple(w.shape[1:])}")
    if w.dtype == torch.bool or not (w.dtype.is_floating_point or w.dtype in (torch.int8, torch.uint8, torch.int16,
                                                                             torch.int32, torch.int64)):
        raise TypeError(f"loss_weights must be numbers, got dtype {w.dtype}")
    w = w.to(torch.float32)
    wn = w.detach().numpy()
    if not np.isfinite(wn).all() or (wn < 0).any():
        raise ValueError("loss_weights must be finite and >= 0")
    dead = wn == 0
    labels = columns.get("labels")
    if labels is not None:
        labels = columns["labels"] = labels.clone()  # never the caller's tensor
        ln = labels.numpy()
        ln[dead] = IGNORE_INDEX
        dead = dead | (ln == IGNORE_INDEX)
    masks = columns.get("assistant_masks")
    if masks is not None:
        masks = masks.to(torch.bool)
        if labels is None:  # no labels to say what is trained (a tree batch): the mask says it
            dead = dead | ~masks.numpy()
        columns["assistant_masks"] = masks & torch.from_numpy(~dead)
    columns[LOSS_WEIGHTS] = w.masked_fill(torch.from_numpy(dead), 0.0)  # a new tensor, never the caller's
