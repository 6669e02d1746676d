"""Reading a Composite's entries out of a value (a TensorDict, a tensorclass, a ragged batch):
what ``is_in`` and ``encode`` look at, and torchrl's unbatched conversations whose list entries
give the batch its trailing dims.
"""
from __future__ import annotations

import torch

from ..td import NonTensorData, NonTensorStack, RaggedTensorDict
from ..td.tensorclass import TensorClass
from ._shape import shape_mismatch
from .nontensor import NonTensor, _list_shape

__all__ = ["_entry", "_lists_fill_shape"]


def _entry(value, key: str):
    """The raw entry ``key`` of a collection (KeyError when missing)."""
    if isinstance(value, TensorClass):
        value = value._storage
    if isinstance(value, RaggedTensorDict):
        inner = value.values
        if not hasattr(inner, "_get_raw") or isinstance(inner, (NonTensorData, NonTensorStack)):
            raise KeyError(key)
        leaf = inner._get_raw(key)
        if isinstance(leaf, torch.Tensor):
            return value.get(key)  # a nested (jagged) tensor
        return RaggedTensorDict(leaf, value.offsets)
    return value._get_raw(key)


def _lists_fill_shape(spec, value) -> bool:
    """Whether an unbatched-enough ``value`` fits ``spec.shape`` through its entries: a
    collection of batch ``()`` whose non-tensor entries hold lists (``History(role=[...],
    content=[...])``, torchrl's unbatched conversation) has the lists' common shape as its
    trailing batch dims."""
    missing = len(spec.shape) - len(value.batch_size)
    if missing <= 0 or isinstance(value, RaggedTensorDict):
        return False
    shapes = set()
    for key, sub in spec._specs.items():
        if not isinstance(sub, NonTensor):
            continue
        try:
            entry = _entry(value, key)
        except (KeyError, AttributeError):
            return False
        if not isinstance(entry, NonTensorData) or entry.batch_size or not isinstance(entry.data, list):
            return False
        shapes.add(_list_shape(entry.data)[:missing])
    if len(shapes) != 1:
        return False
    implied = (*value.batch_size, *shapes.pop())
    return len(implied) == len(spec.shape) and shape_mismatch(implied, spec.shape) is None
