"""Per-token loss weights from weighted character spans.

A token's weight is the largest weight of the spans it covers a character of (0 for a token no
span touches), so ``weight > 0`` is exactly the assistant mask the same spans give. With a fast
tokenizer's encodings, each span's token range (the mask's own boundary tokens) is scattered once
(:func:`weights_from_ranges`); with bare offsets, the tokenizer's mask pass (``mask_of``, the
vectorised char -> token mapping of :mod:`.tokenization`) runs once per distinct weight
(:func:`token_weights`).

Example:
    >>> from chatdata.templates.tokenization import char_masks_to_token_masks
    >>> off = [torch.tensor([[0, 2], [2, 4], [4, 6]])]
    >>> mask_of = lambda sp: char_masks_to_token_masks([6], sp, off)
    >>> token_weights(mask_of, [[(0, 2), (4, 6)]], [[0.5, 2.0]])[0].tolist()
    [0.5, 0.0, 2.0]
"""
from __future__ import annotations

from typing import Callable, Sequence

import torch

__all__ = ["token_weights", "weights_from_ranges", "piece_weight", "check_span_weights"]


def _check(spans: Sequence[Sequence], span_weights: Sequence[Sequence[float]]) -> None:
    if len(span_weights) != len(spans):
        raise ValueError(f"span_weights needs one list per text: got {len(span_weights)} for {len(spans)} texts")
    for i, (sp, ws) in enumerate(zip(spans, span_weights)):
        if len(sp) != len(ws):
            raise ValueError(f"text {i}: {len(ws)} span weights for {len(sp)} spans")


def check_span_weights(spans: Sequence[Sequence], span_weights: Sequence[Sequence[float]]) -> None:
    """One weight per span, each a finite number >= 0 (the weights are compared in bulk);
    ValueError/TypeError naming the text and span otherwise. A NaN or negative weight would
    reach the loss (NaN) or leave a masked token with weight 0.

    Example:
        >>> check_span_weights([[(0, 2)]], [[-1.0]])
        Traceback (most recent call last):
        ...
        ValueError: text 0, span 0: a span weight must be a finite number >= 0, got -1.0
    """
    _check(spans, span_weights)
    flat = [w for ws in span_weights for w in ws]
    if not flat:
        return
    try:
        t = torch.tensor(flat, dtype=torch.float64)
    except (TypeError, ValueError, RuntimeError, OverflowError):
        k = next((k for k, w in enumerate(flat) if isinstance(w, (str, bytes)) or not hasattr(w, "__float__")), 0)
        raise TypeError(f"{_where(span_weights, k)}: a span weight must be a number >= 0, got {flat[k]!r:.40}") from None
    bad = ~torch.isfinite(t) | (t < 0)
    if bool(bad.any()):
        k = int(bad.nonzero()[0])
        raise ValueError(f"{_where(span_weights, k)}: a span weight must be a finite number >= 0, got {flat[k]!r:.40}")


def _where(span_weights, k: int) -> str:
    for i, ws in enumerate(span_weights):
        if k < len(ws):
            return f"text {i}, span {k}"
        k -= len(ws)
    return "a span"  # pragma: no cover


def token_weights(mask_of: Callable[[Sequence[Sequence[tuple[int, int]]]], list[torch.Tensor]],
                  spans: Sequence[Sequence[tuple[int, int]]], span_weights: Sequence[Sequence[float]],
                  masks: list[torch.Tensor] | None = None) -> list[torch.Tensor]:
    """float32 weights per token of each text (see the module docstring). ``mask_of(spans)``
    gives token masks for per-text span lists; ``masks`` (optional) is ``mask_of(spans)``
    already computed."""
    _check(spans, span_weights)
    distinct = sorted({float(w) for ws in span_weights for w in ws})
    if len(distinct) <= 1:
        masks = masks if masks is not None else mask_of(spans)
        w = distinct[0] if distinct else 0.0
        return [m.to(torch.float32) * w for m in masks]
    acc = None
    counts = None
    for w in distinct:
        sub = [[s for s, x in zip(sp, ws) if float(x) == w] for sp, ws in zip(spans, span_weights)]
        got = mask_of(sub)
        if counts is None:
            counts = [len(m) for m in got]
            acc = torch.zeros(sum(counts), dtype=torch.float32)
        if got:
            acc = torch.maximum(acc, torch.cat(got).to(torch.float32) * w)
    return list(torch.split(acc, counts)) if counts else []


def weights_from_ranges(ranges: Sequence[tuple[int, int, int]], counts: Sequence[int],
                        spans: Sequence[Sequence[tuple[int, int]]], span_weights: Sequence[Sequence[float]]
                        ) -> list[torch.Tensor]:
    """float32 weights per token from each span's token range (``(first, end, span number)``,
    tokens and spans numbered flat over all texts, as ``span_token_ranges`` gives them): one
    scatter with ``amax``, whatever the number of distinct weights.

    Example:
        >>> weights_from_ranges([(0, 2, 0), (1, 3, 1)], [4], [[(0, 5), (5, 9)]], [[0.5, 2.0]])[0].tolist()
        [0.5, 2.0, 2.0, 0.0]
    """
    _check(spans, span_weights)
    out = torch.zeros(sum(counts), dtype=torch.float32)
    if ranges:
        flat_w = torch.tensor([float(w) for ws in span_weights for w in ws], dtype=torch.float32)
        r = torch.tensor(ranges, dtype=torch.int64)
        lens = r[:, 1] - r[:, 0]
        total = int(lens.sum())
        first = torch.repeat_interleave(r[:, 0] - (torch.cumsum(lens, 0) - lens), lens, output_size=total)
        idx = torch.arange(total, dtype=torch.int64) + first
        out.scatter_reduce_(0, idx, torch.repeat_interleave(flat_w[r[:, 2]], lens, output_size=total), reduce="amax")
    return list(torch.split(out, list(counts)))


def piece_weight(spans: Sequence[tuple[int, int]], weights: Sequence[float], a: int, b: int) -> float:
    """The weight of the text piece ``[a, b)`` that lies inside spans or outside all of them:
    the largest weight of a span holding it, else 0.

    Example:
        >>> piece_weight([(0, 4), (4, 9)], [1.0, 0.3], 5, 7)
        0.3
    """
    return max((float(w) for (s, e), w in zip(spans, weights) if s <= a and b <= e), default=0.0)
