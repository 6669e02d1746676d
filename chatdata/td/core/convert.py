"""Turning user values into TensorDict entries, and recognising entry kinds.

Rules (tensordict's): tensors stay tensors; Python numbers, bools and lists of numbers become
tensors; dicts become nested TensorDicts with the parent's batch size; strings, ``None`` and
other objects become ``NonTensorData``; while ``set_list_to_stack`` is on (the default) a list of
same-shape tensors is stacked into one tensor and other lists become ``NonTensorStack``.

Example:
    >>> to_entry([1, 2, 3], torch.Size([3]), None, "k", TensorDict).dtype
    torch.int64
"""
from __future__ import annotations

import numbers

import torch

from ..nontensor import Batched, BatchSizeError, NonTensorData, NonTensorStack, list_to_stack

__all__ = ["check_no_names", "to_entry", "is_collection", "check_batch", "check_indexed_batch", "check_fits", "is_tensor", "is_integer_dtype"]


def is_integer_dtype(dtype: torch.dtype) -> bool:
    """True for the integer dtypes (ids, offsets, counts): not floating point, complex or bool.

    Example:
        >>> is_integer_dtype(torch.int32), is_integer_dtype(torch.bool), is_integer_dtype(torch.float16)
        (True, False, False)
    """
    return not (dtype.is_floating_point or dtype.is_complex or dtype == torch.bool)


def check_no_names(names) -> None:
    """Refuse ``names`` on batch dims: chatdata's ``names`` are always None, so names given
    would be dropped without a word. None (or a list of None) passes.

    Example:
        >>> check_no_names([None, None])
        >>> check_no_names(["batch"])
        Traceback (most recent call last):
        ...
        ValueError: names=['batch']: chatdata does not name batch dims (its names are always None); drop names=, or keep the dim names in your own code
    """
    if names is None or (isinstance(names, (list, tuple)) and all(n is None for n in names)):
        return
    raise ValueError(f"names={names!r}: chatdata does not name batch dims (its names are always None); "
                     f"drop names=, or keep the dim names in your own code")


def is_tensor(value) -> bool:
    return isinstance(value, torch.Tensor)


def is_collection(value) -> bool:
    """A nested batched container (TensorDict, tensorclass, ragged stack), not a leaf."""
    return isinstance(value, Batched) and not getattr(value, "_is_non_tensor", False)


def _all_numbers(values) -> bool:
    for v in values:
        if isinstance(v, (list, tuple)):
            if not v or not _all_numbers(v):
                return False
        elif not isinstance(v, numbers.Number):
            return False
    return True


def to_entry(value, batch_size: torch.Size, device, key, td_class):
    """Convert ``value`` into an entry for a collection of ``batch_size`` on ``device``;
    ``td_class`` is TensorDict (a dict becomes one; TensorDict calls this, so it passes itself)."""
    if isinstance(value, torch.Tensor):
        out = value
    elif isinstance(value, Batched):
        out = value
        if isinstance(value, NonTensorData) and not value.batch_size and batch_size:
            out = NonTensorData(value.data, batch_size=batch_size, device=value.device)
        elif tuple(value.batch_size[:len(batch_size)]) != tuple(batch_size):
            out = _rebatched(value, batch_size, key, td_class)
    elif isinstance(value, dict):
        out = td_class(value, batch_size=batch_size, device=device)
    elif isinstance(value, numbers.Number):
        out = torch.tensor(value)
    elif type(value).__module__ == "numpy" and hasattr(value, "dtype") and getattr(value.dtype, "kind", "O") in "biufc":
        out = torch.as_tensor(value)
    elif isinstance(value, (list, tuple)) and value and _all_numbers(value):
        try:
            out = torch.tensor(value)
        except (ValueError, TypeError):  # ragged lists of numbers: keep them as values
            out = _list_entry(list(value), batch_size)
    elif isinstance(value, list) and value and list_to_stack() and all(isinstance(v, torch.Tensor) for v in value) \
            and len({v.shape for v in value}) == 1:
        out = torch.stack(value)  # a list of same-shape tensors: one tensor, one element per item
    elif isinstance(value, list) and list_to_stack():
        out = _list_entry(value, batch_size)
    else:
        out = NonTensorData(value, batch_size=batch_size)
    if device is not None and getattr(out, "device", None) != device:
        out = out.to(device)
    return out


def _rebatched(value, batch_size: torch.Size, key, td_class):
    """A TensorDict (or tensorclass) whose leaves all start with ``batch_size`` but whose own batch
    size is shorter (``td["sub"] = TensorDict()`` in a batched parent): a shallow copy with the
    parent's batch size. Anything else is returned as it is (the caller's check reports it)."""
    storage = getattr(value, "_storage", value)
    if not isinstance(storage, td_class) or len(value.batch_size) >= len(batch_size):
        return value
    copy = storage._shallow_copy()
    nb = len(batch_size)
    try:
        for k, v in list(copy._tensordict.items()):  # constants and nested collections follow
            if isinstance(v, Batched) and len(v.batch_size) < nb:
                if isinstance(v, NonTensorData):
                    copy._tensordict[k] = NonTensorData(v.data, batch_size=batch_size, device=v.device)
                elif not v.batch_size or tuple(v.batch_size) == tuple(value.batch_size):
                    copy._tensordict[k] = _rebatched(v, batch_size, k, td_class)
        copy.batch_size = batch_size
    except BatchSizeError as err:
        raise BatchSizeError(f"cannot set {key!r} with batch size {tuple(value.batch_size)} in a collection of "
                             f"batch size {tuple(batch_size)}: {err}") from None
    return value._from_storage(copy) if storage is not value else copy


def _list_entry(value: list, batch_size: torch.Size):
    if batch_size:
        return NonTensorStack.from_list(value, batch_size=batch_size)
    return NonTensorStack.from_list(value)


def check_batch(key, entry, batch_size: torch.Size) -> None:
    """Raise ``BatchSizeError`` naming ``key`` when ``entry`` does not start with ``batch_size``."""
    nb = len(batch_size)
    if isinstance(entry, torch.Tensor) and entry.is_nested:  # dims past the regular ones have no size
        shape = _nested_leading(entry, nb)
    else:
        shape = entry.shape if isinstance(entry, torch.Tensor) else entry.batch_size
    if len(shape) < nb or tuple(shape[:nb]) != tuple(batch_size):
        what = "Tensor" if isinstance(entry, torch.Tensor) else type(entry).__name__
        raise BatchSizeError(
            f"batch dimension mismatch for key {key!r}: its shape {tuple(shape)} does not start "
            f"with the batch size {tuple(batch_size)} (the {what} {key} has shape {torch.Size(shape)} which "
            f"is incompatible with the batch-size {torch.Size(batch_size)})"
        )


def _nested_leading(t: torch.Tensor, n: int) -> tuple:
    """The first ``n`` dims of a nested tensor (an irregular one shows as ``-1``)."""
    out = []
    for i in range(min(n, t.dim())):
        try:
            out.append(t.size(i))
        except RuntimeError:
            out.append(-1)
    return tuple(out)


def check_indexed_batch(target: torch.Size, source: torch.Size, index) -> None:
    """``td[index] = other``: ``other``'s batch size must broadcast to the indexed part's.

    Example:
        >>> check_indexed_batch(torch.Size([3, 2]), torch.Size([2]), (slice(None), [1, 2]))  # fine
    """
    try:
        ok = torch.broadcast_shapes(tuple(source), tuple(target)) == tuple(target)
    except RuntimeError:
        ok = False
    if not ok:
        raise BatchSizeError(
            f"indexed destination TensorDict batch size is {tuple(target)} (index {index!r}), which the source "
            f"batch size {tuple(source)} does not broadcast to; index the source the same way or reshape it"
        )


def check_fits(target: tuple, src, key: tuple, what: str) -> None:
    """Writing ``src`` into the part of a tensor entry of shape ``target`` (``td[i] = ...``, an
    in-place update): raise, naming the entry and ``what`` was refused, unless ``src`` is a number
    or broadcasts to ``target``.

    Example:
        >>> check_fits((3,), torch.ones(3), ("a",), "set td[0]")  # a row of a (4, 3) entry: fine
    """
    if isinstance(src, torch.Tensor):
        shape = tuple(src.shape)
    elif isinstance(src, NonTensorData):
        return check_fits(target, src.data, key, what)
    elif type(src).__module__ == "numpy" and hasattr(src, "shape"):
        shape = tuple(src.shape)
    elif isinstance(src, numbers.Number):
        return
    elif isinstance(src, (list, tuple)) and _all_numbers(src):
        shape = tuple(torch.as_tensor(src).shape) if src else (0,)
    else:
        raise TypeError(f"cannot {what}: entry {key if len(key) > 1 else key[0]!r} is a tensor and the "
                        f"value for it is a {type(src).__name__}; give a number or a tensor")
    if shape != target and (len(shape) > len(target) or any(
            s != t and s != 1 for s, t in zip(reversed(shape), reversed(target)))):
        raise BatchSizeError(f"cannot {what}: entry {key if len(key) > 1 else key[0]!r} has shape {target} "
                             f"there and the value's shape {shape} does not broadcast to it; nothing was written")
