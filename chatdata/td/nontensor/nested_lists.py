"""Nested Python lists as batched values: their batch shape, flattening to it, and back.

Example:
    >>> shape, flat = _infer_shape([["a", "b"], ["c", "d"]])
    >>> tuple(shape), flat, _nested_list(flat, shape)
    ((2, 2), ['a', 'b', 'c', 'd'], [['a', 'b'], ['c', 'd']])
"""
from __future__ import annotations

import torch

from .batched import BatchSizeError

def _nested_list(flat: list, shape) -> list:
    if len(shape) == 0:
        return flat[0]
    if len(shape) == 1:
        return flat
    step = len(flat) // shape[0] if shape[0] else 0
    return [_nested_list(flat[i * step : (i + 1) * step], shape[1:]) for i in range(shape[0])]


def _infer_shape(values) -> tuple[torch.Size, list]:
    """Batch shape of nested lists: every level where all items are lists of one length."""
    shape = []
    level = [values]
    while level and all(isinstance(v, list) for v in level):
        lens = {len(v) for v in level}
        if len(lens) != 1:
            break  # ragged inner lists stay values
        n = lens.pop()
        shape.append(n)
        level = [x for v in level for x in v]
        if n == 0:
            break
    return torch.Size(shape), level


def _flatten_to(values, shape) -> list:
    level = [values]
    for d, n in enumerate(shape):
        for v in level:
            if not isinstance(v, (list, tuple)) or len(v) != n:
                raise BatchSizeError(
                    f"batch dimension mismatch: list does not match batch size {tuple(shape)} at dim {d}: expected a list of "
                    f"length {n}, got {type(v).__name__}" + (f" of length {len(v)}" if isinstance(v, (list, tuple)) else "")
                )
        level = [x for v in level for x in v]
    return level
