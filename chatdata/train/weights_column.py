"""The ``loss_weights`` column of a batch: float32 per token, aligned with ``labels``.

Rows carry it when their token set has one (``TokenRows.loss_weights``, or a ``"loss_weights"``
entry in each row dict). The collators put it beside ``labels``, in the same shape, and keep the
two in agreement: the weight is 0 wherever the label is -100, and the label is -100 wherever the
weight is 0. :func:`~chatdata.train.weighted_causal_lm_loss` consumes it.

Example:
    >>> labels = torch.tensor([5, -100, 7])
    >>> loss_weights_for([{"input_ids": [5, 6, 7], "loss_weights": [0.5, 1.0, 0.0]}], labels).tolist(), labels.tolist()
    ([0.5, 0.0, 0.0], [5, -100, -100])
"""
from __future__ import annotations

from collections.abc import Mapping

import torch

from .dataset import IGNORE_INDEX, TokenRows

__all__ = ["loss_weights_for"]


def _flat_weights(rows) -> torch.Tensor | None:
    if isinstance(rows, TokenRows):
        return rows.loss_weights
    present = [isinstance(r, Mapping) and r.get("loss_weights") is not None for r in rows]
    if not any(present):
        return None
    if not all(present):
        raise ValueError(f"row {present.index(False)} has no loss_weights but row {present.index(True)} has: "
                         "give every row of a batch its loss_weights, or none")
    parts = []
    for j, row in enumerate(rows):
        w = torch.as_tensor(row["loss_weights"], dtype=torch.float32)
        n = len(row["input_ids"])
        if w.ndim != 1 or w.numel() != n:
            raise ValueError(f"row {j}: loss_weights has shape {tuple(w.shape)} but input_ids has {n} tokens")
        parts.append(w)
    return torch.cat(parts)


def loss_weights_for(rows, labels: torch.Tensor) -> torch.Tensor | None:
    """The flat float32 weights of ``rows`` (None when they carry none), 0 where ``labels`` is
    -100; ``labels`` (flat, same length) is set to -100 in place where the weight is 0."""
    w = _flat_weights(rows)
    if w is None:
        return None
    if w.numel() != labels.numel():
        raise ValueError(f"loss_weights has {w.numel()} entries but the batch {labels.numel()} tokens")
    if not bool(torch.isfinite(w).all()) or bool((w < 0).any()):
        raise ValueError("loss_weights must be finite and >= 0")
    dead = (labels == IGNORE_INDEX) | (w == 0)
    labels.masked_fill_(dead, IGNORE_INDEX)
    return w.masked_fill(dead, 0.0)
