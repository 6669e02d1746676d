"""A causal-LM loss that honours per-token ``loss_weights``.

transformers' ``model(**batch).loss`` treats every label alike; with a ``loss_weights`` column
(``apply_chat_template(loss_weights=...)``, ``chatdata tokenize --loss-weight``) compute the loss
from the logits instead: position ``t`` predicts ``labels[t + 1]`` and counts with
``loss_weights[t + 1]``, as transformers shifts labels.

Example:
    >>> logits = torch.zeros(1, 3, 4)                       # uniform predictions: ce = log(4)
    >>> labels = torch.tensor([[-100, 1, 2]]); w = torch.tensor([[0.0, 1.0, 0.5]])
    >>> round(float(weighted_causal_lm_loss(logits, labels, w)), 4)  # (1 + 0.5) * log 4 / 2 tokens
    1.0397
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from ..td.core import is_integer_dtype
from .dataset import IGNORE_INDEX

__all__ = ["weighted_causal_lm_loss"]

NORMALIZE = ("tokens", "weights", "sum")


def weighted_causal_lm_loss(logits: torch.Tensor, labels: torch.Tensor, loss_weights: torch.Tensor,
                            normalize: str = "tokens") -> torch.Tensor:
    """Next-token cross-entropy of ``logits`` (B, T, V) against ``labels`` (B, T), each term times
    its ``loss_weights`` (B, T) entry, summed, divided by: the number of trained tokens
    (``normalize="tokens"``, the default: with every weight 1.0 this is ``model(...).loss``), the
    sum of the trained tokens' weights (``"weights"``: a weighted mean), or nothing (``"sum"``).

    A weight where the label is -100 counts nowhere. Weights must be finite and >= 0 (a
    ValueError otherwise: a NaN gave a NaN loss, a negative one a loss that rewards errors);
    labels are integer ids below ``V`` or -100 (int32 and friends are widened to int64)."""
    if normalize not in NORMALIZE:
        raise ValueError(f"normalize must be one of {NORMALIZE}, got {normalize!r}")
    for name, t in (("logits", logits), ("labels", labels), ("loss_weights", loss_weights)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a tensor, got {type(t).__name__}")
    if not logits.dtype.is_floating_point:
        raise TypeError(f"logits must be floating point, got dtype {logits.dtype}")
    if not is_integer_dtype(labels.dtype):
        raise TypeError(f"labels must be integer token ids (-100 where not trained), got dtype {labels.dtype}")
    if loss_weights.dtype.is_complex or loss_weights.dtype == torch.bool:
        raise TypeError(f"loss_weights must be real numbers, got dtype {loss_weights.dtype}")
    if labels.shape != loss_weights.shape or logits.shape[:-1] != labels.shape:
        raise ValueError(f"logits {tuple(logits.shape)}, labels {tuple(labels.shape)} and loss_weights "
                         f"{tuple(loss_weights.shape)} must agree on (batch, tokens)")
    if loss_weights.numel():
        lo, hi = torch.aminmax(loss_weights.detach())
        if not bool((lo >= 0) & (hi < float("inf"))):  # one sync; a NaN fails lo >= 0
            raise ValueError("loss_weights must be finite and >= 0 (got "
                             f"{'NaN' if bool(loss_weights.isnan().any()) else f'min {float(lo)}, max {float(hi)}'})")
    y = labels[..., 1:].reshape(-1).long()
    trained = y != IGNORE_INDEX
    V = logits.shape[-1]
    wrong = (y >= V) | (y < 0) & trained
    if y.numel() and bool(wrong.any()):  # else torch's bare "Target 7 is out of bounds"
        bad = y[wrong][0]
        raise ValueError(f"labels hold {int(bad)}, but a label is a token id in [0, {V}) (the logits' last dim) or "
                         f"{IGNORE_INDEX} where the token is not trained: give the logits of the model whose "
                         "vocabulary the labels come from, and -100 as the ignore value")
    w = loss_weights[..., 1:].reshape(-1).to(logits.dtype) * trained  # no weight where no label
    ce = F.cross_entropy(logits[..., :-1, :].reshape(-1, logits.shape[-1]), y, ignore_index=IGNORE_INDEX,
                         reduction="none")
    total = (ce * w).sum()
    if normalize == "sum":
        return total
    denom = trained.sum().to(logits.dtype) if normalize == "tokens" else w.sum()
    return total / denom.clamp_min(torch.finfo(logits.dtype).tiny)
