"""The leaf walks every TensorDict reduction shares (``sum``, ``mean``, ``std``, ``max``,
``amax``, ``any``, ...), and their rule for text leaves.

A text column (``NonTensorStack``: one value per row) has no sum or maximum, so every
reduction leaves it out, over all dims as over batch dims. A constant (``NonTensorData``: one
value for the whole batch) is kept with the result's batch size. tensordict 0.14.3 keeps
constants too; it leaves text columns out of ``max`` / ``amax`` / ``any`` over a dim and
recurses without end on them in the other reductions.

Example:
    >>> td = TensorDict({"x": torch.ones(2, 3), "s": ["a", "b"], "c": "k"}, [2])
    >>> r = reduce_all(td, torch.sum)
    >>> sorted(r.keys()), r["x"].item(), r.batch_size
    (['c', 'x'], 6.0, torch.Size([]))
"""
from __future__ import annotations

import torch

from ..nontensor import NonTensorData, NonTensorStack

__all__ = ["without_text_columns", "without_leaves", "reduce_all", "reduce_together"]


def without_text_columns(td):
    """``td`` without its ``NonTensorStack`` leaves (nested ones included): what a reduction
    keeps (a constant ``NonTensorData`` is one value whatever the batch).

    Example:
        >>> list(without_text_columns(TensorDict({"s": ["a"], "c": "k"}, [1])).keys())
        ['c']
    """
    return without_leaves(td, NonTensorStack)


def without_leaves(td, kinds):
    """``td`` (nested TensorDicts walked too) without its leaves of the types ``kinds``.

    Example:
        >>> list(without_leaves(TensorDict({"x": torch.zeros(1), "c": "k"}, [1]), NonTensorData).keys())
        ['x']
    """
    out = td._new_unsafe({}, td.batch_size, td.device)
    for k, v in td._tensordict.items():
        if isinstance(v, type(td)):
            out._tensordict[k] = without_leaves(v, kinds)
        elif not isinstance(v, kinds):
            out._tensordict[k] = v
    return out


def reduce_all(td, fn):
    """``fn(leaf)`` of every tensor leaf (a reduction over all its elements) in a TensorDict of
    batch size ``()``: nested collections get batch ``()`` too, whatever batch dims they had
    beyond ``td``'s, text columns are left out, constants kept.

    Example:
        >>> td = TensorDict({"n": TensorDict({"y": torch.ones(2, 3)}, [2, 3])}, [2])
        >>> r = reduce_all(td, torch.sum)
        >>> r["n", "y"].item(), r["n"].batch_size
        (6.0, torch.Size([]))
    """
    out = td._new_unsafe({}, torch.Size([]), td.device)
    for k, v in td._tensordict.items():
        if isinstance(v, torch.Tensor):
            out._tensordict[k] = fn(v)
        elif isinstance(v, NonTensorStack):
            continue
        elif isinstance(v, NonTensorData):
            out._tensordict[k] = NonTensorData(v.data, batch_size=torch.Size([]), device=v.device)
        elif isinstance(v, type(td)):
            out._tensordict[k] = reduce_all(v, fn)
        elif isinstance(getattr(v, "_storage", None), type(td)) and hasattr(v, "_from_storage"):  # a tensorclass
            out._tensordict[k] = v._from_storage(reduce_all(v._storage, fn))
        else:  # another collection (a ragged stack): its own apply
            out._tensordict[k] = v.apply(fn, batch_size=torch.Size([]))
    return out


def reduce_together(td, op, dims: tuple, keepdim: bool, what: str):
    """``reduce=True`` with batch dims ``dims``: the tensor leaves pooled along ``dims`` (they
    must have the same shape), then ``op(pooled, dim=dims, keepdim=keepdim)``: one tensor of the
    batch dims left and the leaves' feature shape, as tensordict 0.14.3 gives.

    Example:
        >>> td = TensorDict({"a": torch.ones(3, 2), "b": torch.zeros(3, 2), "s": ["x", "y", "z"]}, [3])
        >>> reduce_together(td, torch.sum, (0,), False, "sum").tolist()
        [3.0, 3.0]
    """
    leaves = [(k, v) for k, v in without_text_columns(td).items(True, True) if isinstance(v, torch.Tensor)]
    if not leaves:
        raise ValueError(f"{what}(dim=..., reduce=True): the TensorDict holds no tensor leaf to reduce")
    k0, v0 = leaves[0]
    for k, v in leaves[1:]:
        if v.shape != v0.shape:
            raise ValueError(f"{what}(dim=..., reduce=True) pools the tensor leaves along the batch dims, so they "
                             f"need one shape: {k0!r} has {tuple(v0.shape)}, {k!r} has {tuple(v.shape)}; "
                             f"select leaves of one shape first, or reduce without reduce=True")
    pooled = torch.cat([v for _, v in leaves], dim=dims[0])
    return op(pooled, dim=dims, keepdim=keepdim)
