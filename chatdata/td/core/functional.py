"""``torch.stack``, ``torch.cat``, ``torch.split``, ``torch.unbind`` ... on collections.

Stacking collections of equal batch sizes gives a dense TensorDict (or tensorclass). Stacking
items whose first dim differs (conversations of different lengths) gives a ragged, columnar
stack whose batch size shows ``-1`` there; indexing it gives the original items back.

Example:
    >>> a = TensorDict({"x": torch.zeros(2)}, [2]); b = TensorDict({"x": torch.ones(3)}, [3])
    >>> torch.stack([a, b]).batch_size
    torch.Size([2, -1])
"""
from __future__ import annotations

import torch

from ..nontensor import (Batched, BatchSizeError, NonTensorData, NonTensorStack, Pool, capture_non_tensor_stack, dummy,
                         is_non_tensor)
from .ragged import RaggedTensorDict
from .tensordict import TensorDict

__all__ = ["stack", "cat", "dispatch", "stack_non_tensor", "cat_non_tensor"]


def _kind(value) -> str:
    if isinstance(value, torch.Tensor):
        return "a tensor"
    if is_non_tensor(value):
        return "non-tensor data"
    return "a nested collection" if isinstance(value, Batched) else f"a {type(value).__name__}"


def _check_same_kind(values, key, op: str) -> None:
    """Every item's entry ``key`` must be of one kind (tensor, non-tensor data or collection)."""
    kinds = [_kind(v) for v in values]
    if len(set(kinds)) != 1:
        other = next(i for i, k in enumerate(kinds) if k != kinds[0])
        raise TypeError(f"cannot {op} entry {key!r}: it is {kinds[0]} in item 0 but {kinds[other]} in item {other}; "
                        "give every item the same kind of value for each key")


def _check_same_keys(items, op: str) -> list:
    """The keys of the first TensorDict, after checking every item has the same ones."""
    keys = list(items[0]._tensordict)
    for n, i in enumerate(items[1:], 1):
        if set(i._tensordict) != set(keys):
            missing, extra = sorted(set(keys) - set(i._tensordict)), sorted(set(i._tensordict) - set(keys))
            diff = " and ".join(([f"lacks {missing}"] if missing else []) + ([f"has extra keys {extra}"] if extra else []))
            raise KeyError(f"cannot {op} TensorDicts with different keys: item {n} {diff} "
                           f"(item 0 has {sorted(keys)}); select() the common keys first")
    return keys


def _stack_leaves(values, dim: int, key):
    _check_same_kind(values, key, "stack")
    first = values[0]
    if isinstance(first, torch.Tensor):
        shapes = {tuple(v.shape) for v in values}
        if len(shapes) != 1:
            raise BatchSizeError(f"cannot stack entry {key!r}: its shapes differ {sorted(shapes)}")
        return torch.stack(values, dim)
    if is_non_tensor(first):
        return stack_non_tensor(values, dim)
    return stack(values, dim)


def lazy_stack(items, dim: int = 0, *, out=None):
    """tensordict's ``lazy_stack``: chatdata's stacks are already column-wise, so this is
    :func:`stack` (items of different lengths along dim 0 give a ragged stack; other shape
    mismatches raise, as chatdata has no lazy stacks of heterogeneous collections).

    Example:
        >>> import torch
        >>> from chatdata.td import TensorDict
        >>> lazy_stack([TensorDict(a=torch.zeros(2), batch_size=[2]), TensorDict(a=torch.ones(3), batch_size=[3])]).batch_size
        torch.Size([2, -1])
    """
    return stack(items, dim, out=out)


def stack(items, dim: int = 0, *, out=None):
    """Stack collections along a new batch dim ``dim`` (see the module docstring)."""
    items = list(items)
    if not items:
        raise ValueError("cannot stack an empty list of collections")
    if all(is_non_tensor(i) for i in items):
        return stack_non_tensor(items, dim)
    first = items[0]
    if hasattr(first, "_from_storage") and hasattr(first, "_storage"):  # tensorclass
        if any(type(i) is not type(first) for i in items):
            raise TypeError("cannot stack tensorclass instances of different classes")
        return type(first)._from_storage(stack([i._storage for i in items], dim))
    if any(not isinstance(i, (TensorDict, RaggedTensorDict)) for i in items):
        raise TypeError(f"cannot stack {sorted({type(i).__name__ for i in items})} together")
    shapes = {tuple(i.batch_size) for i in items}
    nd = len(first.batch_size) + 1
    if not -nd <= dim < nd:
        raise IndexError(f"stack dim {dim} out of range for items with {nd - 1} batch dims")
    dim %= nd
    if len(shapes) != 1:
        if dim == 0 and len({len(s) for s in shapes}) == 1 and len({s[1:] for s in shapes}) == 1 and all(len(s) for s in shapes):
            return RaggedTensorDict.from_items(items)
        raise BatchSizeError(
            f"cannot stack collections with batch sizes {sorted(shapes)} along dim {dim}: ragged "
            "stacks are supported along dim 0 for items that differ in their first dim only"
        )
    if any(isinstance(i, RaggedTensorDict) for i in items):
        raise BatchSizeError("stacking ragged stacks (a third level of nesting) is not supported")
    keys = _check_same_keys(items, "stack")
    entries = {k: _stack_leaves([i._tensordict[k] for i in items], dim, k) for k in keys}
    bs = list(first.batch_size)
    bs.insert(dim, len(items))
    result = TensorDict._new_unsafe(entries, bs, first.device if all(i.device == first.device for i in items) else None)
    if out is not None:
        out.update_(result)
        return out
    return result


def cat(items, dim: int = 0, *, out=None):
    """Concatenate collections along batch dim ``dim``."""
    items = list(items)
    if not items:
        raise ValueError("cannot concatenate an empty list of collections")
    if all(is_non_tensor(i) for i in items):
        return cat_non_tensor(items, dim)
    first = items[0]
    if hasattr(first, "_from_storage") and hasattr(first, "_storage"):
        if any(type(i) is not type(first) for i in items):
            raise TypeError(f"cannot cat {sorted({type(i).__name__ for i in items})} together: all items must be {type(first).__name__}")
        return type(first)._from_storage(cat([i._storage for i in items], dim))
    if all(isinstance(i, RaggedTensorDict) for i in items):
        return RaggedTensorDict.cat(items, dim)
    if any(not isinstance(i, (TensorDict, RaggedTensorDict)) for i in items):
        raise TypeError(f"cannot cat {sorted({type(i).__name__ for i in items})} together")
    nd = len(first.batch_size)
    if nd == 0:
        raise BatchSizeError("cannot concatenate collections with an empty batch size")
    if not -nd <= dim < nd:
        raise IndexError(f"cat dim {dim} out of range for items with {nd} batch dims")
    dim = dim % nd
    for i in items[1:]:
        if len(i.batch_size) != nd or any(a != b for d, (a, b) in enumerate(zip(i.batch_size, first.batch_size)) if d != dim):
            raise BatchSizeError(f"cannot concatenate batch sizes {tuple(first.batch_size)} and {tuple(i.batch_size)} along dim {dim}")
    keys = _check_same_keys(items, "concatenate")
    entries = {}
    for k in keys:
        vals = [i._tensordict[k] for i in items]
        _check_same_kind(vals, k, "concatenate")
        if isinstance(vals[0], torch.Tensor):
            entries[k] = torch.cat(vals, dim)
        elif is_non_tensor(vals[0]):
            entries[k] = cat_non_tensor(vals, dim)
        else:
            entries[k] = cat(vals, dim)
    bs = list(first.batch_size)
    bs[dim] = sum(i.batch_size[dim] for i in items)
    result = TensorDict._new_unsafe(entries, bs, first.device)
    if out is not None:
        out.update_(result)
        return out
    return result


def dispatch(func, types, args, kwargs):
    """``__torch_function__`` body shared by our collection classes."""
    if func is torch.stack:
        return stack(*args, **kwargs)
    if func is torch.cat or func is torch.concat or func is torch.concatenate:
        return cat(*args, **kwargs)
    if func is torch.unbind:
        return args[0].unbind(*args[1:], **kwargs)
    if func is torch.split:
        return args[0].split(*args[1:], **kwargs)
    if func is torch.chunk:
        return args[0].chunk(*args[1:], **kwargs)
    if func in (torch.squeeze, torch.unsqueeze, torch.permute, torch.reshape, torch.flatten, torch.flip, torch.transpose):
        return getattr(args[0], func.__name__)(*args[1:], **kwargs)
    if func is torch.clone:
        return args[0].clone()
    return NotImplemented


# -- non-tensor stacks: one merged pool, index tensors stacked / concatenated --------------
def stack_non_tensor(items, dim: int = 0):
    """Stack NonTensorData / NonTensorStack items along a new dim ``dim``.

    Identical NonTensorData values stay a NonTensorData; anything else becomes a stack that
    shares no state with the items.
    """
    items = list(items)
    if not items:
        raise ValueError("cannot stack an empty sequence")
    shapes = {i.batch_size for i in items}
    if len(shapes) != 1:
        raise ValueError(f"cannot stack non-tensor items of different batch sizes {sorted(map(tuple, shapes))}")
    bs = items[0].batch_size
    nd = len(bs) + 1
    if not -nd <= dim < nd:
        raise IndexError(f"stack dim {dim} out of range for items with {len(bs)} dims")
    dim %= nd
    device = items[0].device
    if capture_non_tensor_stack() and all(isinstance(i, NonTensorData) for i in items):
        first = items[0].data
        try:
            same = all(i.data is first or (type(i.data) is type(first) and i.data == first) for i in items[1:])
        except Exception:  # values whose == is not a plain bool (arrays, ...)
            same = False
        if same:
            new_bs = list(bs)
            new_bs.insert(dim, len(items))
            return NonTensorData(first, batch_size=new_bs, device=device)
    pool, indices = _merge_pools(items)
    return NonTensorStack._from_parts(torch.stack(indices, dim), pool, device)


def _merge_pools(items) -> tuple[Pool, list]:
    """One pool for all ``items`` and each item's index into it.

    A source pool that an item uses densely is copied whole (a C-level list extend) and the
    item's index shifted, so stacking two million-string stacks is not a per-value loop;
    sparse users (a few rows of a big pool) copy just their values.
    """
    pool = Pool.from_values([])
    bases: dict = {}
    indices = []
    for it in items:
        if isinstance(it, NonTensorData):
            indices.append(torch.full(it.batch_size, pool.append(it.data), dtype=torch.long))
            continue
        src = it._pool
        if id(src) in bases:
            indices.append(it._index_view + bases[id(src)])
        elif it.numel() * 4 >= len(src):
            base = pool.extend(src._list if src._list is not None else src.take(range(len(src))))
            bases[id(src)] = base
            indices.append(it._index_view + base)
        else:
            start = pool.extend(src.take(it._ids()))
            indices.append(torch.arange(start, start + it.numel(), dtype=torch.long).reshape(it.batch_size))
    return pool, indices


def cat_non_tensor(items, dim: int = 0):
    """Concatenate NonTensorData / NonTensorStack items along batch dim ``dim``."""
    items = list(items)
    if all(isinstance(i, NonTensorData) for i in items) and all(i.data == items[0].data for i in items[1:]):
        shape = torch.cat([dummy(i.batch_size) for i in items], dim).shape
        return NonTensorData(items[0].data, batch_size=shape, device=items[0].device)
    items = [i.maybe_to_stack() if isinstance(i, NonTensorData) else i for i in items]
    pools = {id(i._pool) for i in items}
    if len(pools) == 1:
        return NonTensorStack._from_parts(torch.cat([i._index_view for i in items], dim), items[0]._pool, items[0].device)
    pool, parts = _merge_pools(items)
    return NonTensorStack._from_parts(torch.cat(parts, dim), pool, items[0].device)


Batched._torch_function_handler = staticmethod(dispatch)
