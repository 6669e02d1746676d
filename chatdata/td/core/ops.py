"""Whole-collection operations of TensorDict: apply, clone, fill, compare, reduce, lock,
share, and moving between devices and dtypes.

Example:
    >>> td = TensorDict({"a": torch.ones(2), "b": {"c": torch.zeros(2)}}, [2])
    >>> bool((td.clone() == td).all()), td.apply(lambda t: t + 1)["b", "c"].tolist()
    (True, [1.0, 1.0])
"""
from __future__ import annotations

from typing import Callable

import torch

from .convert import is_collection
from ..nontensor import NonTensorData, NonTensorStack, is_non_tensor
from .reductions import without_text_columns

__all__ = ["CollectionOps", "NO_DEFAULT"]

NO_DEFAULT = object()


def _to_args(args, kwargs) -> tuple:
    """``(device, dtype)`` from ``Tensor.to``-style arguments (a device, a dtype, both, a tensor
    standing for its device and dtype, a TensorDict for its device); later bools (non_blocking,
    copy) are ignored."""
    device, dtype = kwargs.get("device"), kwargs.get("dtype")
    rest = list(args)
    if rest:
        first = rest.pop(0)
        if isinstance(first, torch.Tensor):
            device, dtype = first.device, first.dtype
        elif isinstance(first, torch.dtype):
            dtype = first
        elif isinstance(first, _td()) or (hasattr(first, "batch_size") and hasattr(first, "device")):
            device = first.device
        else:
            device = first
    if rest and isinstance(rest[0], torch.dtype):
        dtype = rest[0]
    return device, dtype


def _other_value(other, key: str, default, mine):
    """``other``'s entry at ``key`` for :meth:`CollectionOps.apply`; when it is missing and a
    ``default`` was given: the default for a leaf, an empty TensorDict for a nested one (whose
    leaves then take the default)."""
    try:
        return other._get_raw(key) if isinstance(other, _td()) else other.get(key)
    except KeyError:
        if default is NO_DEFAULT:
            raise
    if isinstance(mine, _td()):
        return mine._new_unsafe({}, mine.batch_size, mine.device)
    return default


class CollectionOps:
    """Mixin of TensorDict (``self._tensordict``, ``self._batch_size``, ``self._device``)."""

    #: TensorDict itself, which these methods build and recognise. core/tensordict.py sets it
    #: when it defines the class: TensorDict subclasses this mixin, so this module cannot import it.
    _td_class: type = None

    # -- whole-collection operations ------------------------------------------------------
    def apply(self, fn: Callable, *others, batch_size=None, device=NO_DEFAULT, inplace: bool = False,
              default=NO_DEFAULT, filter_empty=None, propagate_lock: bool = False, out=None, **kwargs):
        """Apply ``fn`` to every tensor leaf (with matching leaves of ``others``); a ``None``
        result drops the entry, and a nested TensorDict left empty that way (unless
        ``filter_empty=False``). Non-tensor entries are kept as they are. As in tensordict:
        ``default`` stands in for a leaf missing from ``others``, ``out`` receives the result in
        place (and is returned), ``propagate_lock`` locks the result of a locked TensorDict.

        Example:
            >>> TensorDict({"a": torch.ones(2)}, [2]).apply(lambda x: x * 2)["a"].tolist()
            [2.0, 2.0]
        """
        if out is not None:  # computed first, then written: a refused write leaves ``out`` as it was
            return out.update_(self.apply(fn, *others, batch_size=batch_size, device=device, default=default,
                                          filter_empty=filter_empty))
        out_entries = {}
        for k, v in self._tensordict.items():
            other_vals = [_other_value(o, k, default, v) for o in others]
            if isinstance(v, torch.Tensor):
                r = fn(v, *other_vals)
                if inplace and r is not None and r is not v:
                    v.copy_(r)
                    r = v
            elif isinstance(v, _td()):
                r = v.apply(fn, *other_vals, batch_size=None if batch_size is None else torch.Size(batch_size) + v.batch_size[len(self._batch_size):],
                            inplace=inplace, default=default, filter_empty=filter_empty)
                if not inplace and filter_empty is not False and v._tensordict and not r._tensordict:
                    r = None  # every leaf gave None: the nested TensorDict goes too
            elif is_collection(v) and hasattr(v, "apply"):  # a tensorclass, a ragged stack
                nested_bs = {} if batch_size is None else {"batch_size": torch.Size(batch_size) + v.batch_size[len(self._batch_size):]}
                r = v.apply(fn, *other_vals, inplace=inplace, **nested_bs)
            elif isinstance(v, NonTensorData) and batch_size is not None:  # one value: any batch size
                r = NonTensorData(v.data, batch_size=torch.Size(batch_size) + v.batch_size[len(self._batch_size):], device=v.device)
            else:
                r = v
            if r is not None:
                out_entries[k] = r
        if inplace:
            return self
        new_device = self._device if device is NO_DEFAULT else device
        result = self._new_unsafe({}, torch.Size(batch_size) if batch_size is not None else self._batch_size, None if new_device is None else torch.device(new_device))
        for k, v in out_entries.items():
            result._set_str(k, v, False)
        if propagate_lock and self._is_locked:
            result.lock_()
        return result

    def clone(self, recurse: bool = True) -> "TensorDict":
        """A copy; with ``recurse=False`` the tensors are shared."""
        if not recurse:
            return self._shallow_copy()
        entries = {k: v.clone() for k, v in self._tensordict.items()}
        return self._new_unsafe(entries, self._batch_size, self._device)

    def zero_(self) -> "TensorDict":
        """Zero every tensor in place."""
        for v in self._tensordict.values():
            if isinstance(v, torch.Tensor) or isinstance(v, _td()) or hasattr(v, "zero_"):
                v.zero_()
        return self

    def fill_(self, key, value) -> "TensorDict":
        """Fill the tensor (or every tensor of the nested TensorDict) at ``key`` with ``value``."""
        target = self._get_raw(key)
        if isinstance(target, torch.Tensor):
            target.fill_(value)
        elif isinstance(target, _td()):
            target.apply(lambda t: t.fill_(value), inplace=True)
        else:
            raise TypeError(f"fill_: entry {key!r} is not a tensor")
        return self

    def _compare(self, other, op):
        out = self._new_unsafe({}, self._batch_size, self._device)
        if isinstance(other, dict):
            other = _td()(other, batch_size=self._batch_size)
        if isinstance(other, _td()) or is_collection(other):
            extra = set(getattr(other, "_storage", other).keys()) - set(self._tensordict)
            if extra:  # each nested level checks its own keys (nested entries compare recursively)
                raise KeyError(f"cannot compare: the other TensorDict has keys {sorted(extra)} that this one lacks")
        for k, v in self._tensordict.items():
            if isinstance(other, _td()) or is_collection(other):
                try:
                    o = other._get_raw(k) if hasattr(other, "_get_raw") else other.get(k)
                except KeyError:
                    raise KeyError(f"cannot compare: key {k!r} is missing from the other TensorDict") from None
            else:
                o = other
            if isinstance(v, torch.Tensor):
                if isinstance(o, NonTensorData):
                    o = o.data
                r = op(v, o)
            elif is_non_tensor(v):
                if isinstance(o, (int, float, torch.Tensor)) and not is_non_tensor(o):
                    continue  # text against a number: not comparable, left out of the result
                r = op(v, o)
            else:
                r = v._compare(o, op) if hasattr(v, "_compare") else op(v, o)
            out._tensordict[k] = r
        return out

    def __eq__(self, other):
        return self._compare(other, lambda a, b: a == b)

    def __ne__(self, other):
        return self._compare(other, lambda a, b: a != b)

    __hash__ = None

    def all(self, dim: int | None = None):
        """True when every tensor leaf is all True; ``dim`` reduces along a batch dim (text
        columns are left out, constants kept).

        Example:
            >>> td = TensorDict({"a": torch.tensor([True, False]), "s": ["x", "y"]}, [2])
            >>> td.all(), list(td.all(0).keys())
            (False, ['a'])
        """
        if dim is not None:
            d = self._norm_dim(dim)
            bs = self._batch_size[:d] + self._batch_size[d + 1 :]
            return without_text_columns(self).apply(lambda t: t.all(d), batch_size=bs)
        return all(bool(v.all()) for v in self.values(True, True) if isinstance(v, torch.Tensor))

    def any(self, dim: int | None = None):
        """True when any tensor leaf holds a True value; ``dim`` as in :meth:`all`.

        Example:
            >>> TensorDict({"a": torch.tensor([True, False]), "s": ["x", "y"]}, [2]).any(0)["a"].item()
            True
        """
        if dim is not None:
            d = self._norm_dim(dim)
            bs = self._batch_size[:d] + self._batch_size[d + 1 :]
            return without_text_columns(self).apply(lambda t: t.any(d), batch_size=bs)
        return any(bool(v.any()) for v in self.values(True, True) if isinstance(v, torch.Tensor))

    def lock_(self) -> "TensorDict":
        """Refuse new, renamed or deleted keys (in-place writes stay allowed)."""
        self._is_locked = True
        for v in self._tensordict.values():
            if isinstance(v, NonTensorData):
                v._is_locked = True
            elif hasattr(v, "lock_") and not is_non_tensor(v):
                v.lock_()
        return self

    def unlock_(self) -> "TensorDict":
        """Allow new keys again (a memmapped TensorDict then stops being marked memmapped)."""
        self._is_locked = False
        self._is_memmap = False
        for v in self._tensordict.values():
            if isinstance(v, NonTensorData):
                v._is_locked = False
            elif hasattr(v, "unlock_") and not is_non_tensor(v):
                v.unlock_()
        return self

    def share_memory_(self) -> "TensorDict":
        """Move every tensor to shared memory (and lock, as tensordict does)."""
        for v in self._tensordict.values():
            if isinstance(v, NonTensorData):
                v._is_shared = True
            elif isinstance(v, torch.Tensor) or hasattr(v, "share_memory_"):
                v.share_memory_()
        self._is_shared = True
        return self.lock_()

    # -- devices and dtypes ---------------------------------------------------------------
    def to(self, *args, non_blocking: bool = False, inplace: bool = False, **kwargs) -> "TensorDict":
        """Move to a device and/or cast the tensors, with ``Tensor.to``'s arguments:
        ``td.to("cpu")``, ``td.to(torch.float16)``, ``td.to("cpu", torch.float16)``,
        ``td.to(device=..., dtype=...)``, ``td.to(tensor)`` (its device and dtype) or
        ``td.to(other_td)`` (its device); ``inplace=True`` changes this TensorDict and returns it."""
        device, dtype = _to_args(args, kwargs)
        src = self
        if dtype is not None:
            src = self.apply(lambda t: t.to(dtype))
            if inplace:
                self._tensordict.update(src._tensordict)
                src = self
            if device is None:
                return src
        device = torch.device(device) if device is not None else None
        if device is not None and device.type == "cuda" and not torch.cuda.is_available():
            raise RuntimeError(
                f"cannot move the TensorDict to {device}: CUDA is not available in this PyTorch "
                "build or on this machine; keep it on the CPU (td.cpu())"
            )
        entries = {}
        for k, v in src._tensordict.items():
            entries[k] = v.to(device, non_blocking=non_blocking) if isinstance(v, torch.Tensor) else v.to(device)
        if inplace:
            self._tensordict.update(entries)
            self._device = device
            return self
        return self._new_unsafe(entries, self._batch_size, device)

    @property
    def dtype(self):
        """The dtype shared by every tensor leaf, or None when they differ (or there are none)."""
        dtypes = {v.dtype for v in self.values(True, True) if isinstance(v, torch.Tensor)}
        return dtypes.pop() if len(dtypes) == 1 else None

    def cpu(self) -> "TensorDict":
        return self.to("cpu")

    def cuda(self, device=None) -> "TensorDict":
        return self.to(torch.device("cuda") if device is None else torch.device("cuda", device) if isinstance(device, int) else device)

    def clear_device(self) -> "TensorDict":
        """Forget the device (entries stay where they are); returns self."""
        self._device = None
        for v in self._tensordict.values():
            if hasattr(v, "clear_device"):
                v.clear_device()
        return self

    def to_dict(self, retain_none: bool = True) -> dict:
        """Nested plain dicts of tensors and values."""
        out = {}
        for k, v in self._tensordict.items():
            if isinstance(v, _td()):
                out[k] = v.to_dict(retain_none=retain_none)
            elif hasattr(v, "_storage") and hasattr(v, "to_dict"):  # a tensorclass: a dict of its fields too
                out[k] = v.to_dict(retain_none=retain_none)
            elif isinstance(v, NonTensorData):
                out[k] = v.data
            elif isinstance(v, NonTensorStack):
                out[k] = v.tolist()
            else:
                out[k] = v
        return out

    def empty(self, recurse: bool = False) -> "TensorDict":
        """A TensorDict with the same batch size and device and no entries; ``recurse=True``
        keeps the nested TensorDicts (emptied too) and, as tensordict does, the text leaves
        (``NonTensorData``, ``NonTensorStack``: the same objects, as a shallow copy holds them).

        Example:
            >>> td = TensorDict({"x": torch.zeros(2), "s": ["a", "b"], "n": {"y": torch.ones(2)}}, [2])
            >>> sorted(td.empty(recurse=True).keys(True)), list(td.empty().keys())
            (['n', 's'], [])
        """
        out = self._new_unsafe({}, self._batch_size, self._device)
        if recurse:
            for k, v in self._tensordict.items():
                if isinstance(v, _td()):
                    out._tensordict[k] = v.empty(recurse=True)
                elif isinstance(v, (NonTensorData, NonTensorStack)):
                    out._tensordict[k] = v
        return out


def _td():
    return CollectionOps._td_class
