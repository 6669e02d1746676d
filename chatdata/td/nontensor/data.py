"""``NonTensorData``: one non-tensor value (a string, a dict, ...) shared by every element of a
batch, and what it does when it is an element of a stack (``stack[i]``: writes go back to it).

A batch of one value needs no storage per element: indexing, reshape, permute, ... only change
the batch size. ``maybe_to_stack()`` / ``expand()`` turn it into a
:class:`~chatdata.td.nontensor.stack.NonTensorStack` (one value per element); that class is
built on this one, so it registers itself here (``NonTensorData._stack_type``) when it is
defined, and this module never imports it.

Example:
    >>> NonTensorData("foo", batch_size=[2]).tolist()
    ['foo', 'foo']
    >>> NonTensorData("foo", batch_size=[2]).maybe_to_stack().batch_size
    torch.Size([2])
"""
from __future__ import annotations

import dataclasses as _dc
from typing import Any

import torch

from .batched import Batched, as_batch_size, dummy, indexed_batch_size, normalize_index
from .pool import Pool
from .nested_lists import _nested_list
from .flags import StateFlags as _StateFlags, device as _device

__all__ = ["NonTensorData"]

_DATA_FIELDS = _dc.fields(_dc.make_dataclass("NonTensorData", [("data", Any)]))


_MEMMAP_PART = ("Cannot update a leaf NonTensorDataBase from a memmaped parent NonTensorStack: write into "
                "the memory-mapped stack itself (stack[index] = value, stack.update_at_(value, index)), "
                "which saves its folder again")


class NonTensorData(_StateFlags, Batched):
    """One non-tensor value (a string, a dict, ...) shared by every element of a batch.

    Example:
        >>> d = NonTensorData("foo", batch_size=[3])
        >>> d[0].data, d.batch_size
        ('foo', torch.Size([3]))
    """

    _is_non_tensor = True
    _is_shared = False
    _is_memmap = False
    _is_locked = False
    _disk = None  # the storage room's link to the folder it was loaded from (write_value)
    _view_of = None  # (stack, index) when this is ``stack[index]``: writes go back to the stack
    _stack_type = None  # NonTensorStack, set by chatdata.td.nontensor.stack when it defines it

    def __init__(self, data: Any, _metadata=None, _is_non_tensor=True, *, batch_size=(), device=None, names=None):
        if isinstance(data, NonTensorData):
            data = data.data
        self._data = data
        self._batch_size = batch_size if type(batch_size) is torch.Size else as_batch_size(batch_size)  # a Size comes from our ops
        self._device = _device(device)

    @property
    def data(self):
        """The value."""
        return self._data

    @data.setter
    def data(self, value):
        if self._is_memmap and self._disk is not None:  # in a memory-mapped folder: write through
            self._disk.write_value(value)  # atomic; a refused value changes nothing
        if self._view_of is not None:  # an element of a stack: the stack sees the write
            stack, index = self._view_of
            if stack._is_memmap or stack._in_memmap:
                raise RuntimeError(_MEMMAP_PART)
            stack[index] = value
        self._data = value

    @property
    def _tensordict(self):
        # tensordict keeps a NonTensorData's state on an inner TensorDict; ours is on self
        return self

    def update(self, other, inplace: bool = False, non_blocking: bool = False, **kwargs):
        """Take ``other``'s value (a NonTensorData or a plain value); a locked (shared or
        memory-mapped) one needs ``inplace=True``. In a memory-mapped folder the new value is
        written through to its ``meta.json`` atomically (:mod:`chatdata.td.storage.writethrough`)."""
        if self._is_locked and not inplace:
            raise RuntimeError("cannot update a locked NonTensorData (shared or memory-mapped); use inplace=True or update_()")
        if isinstance(other, self._stack_type):
            raise ValueError("Cannot update a NonTensorDataBase object with a NonTensorStack: one value cannot "
                             "take many; use maybe_to_stack().update(...) to get a stack of them")
        self.data = other.data if isinstance(other, NonTensorData) else other
        return self

    def update_(self, other, non_blocking: bool = False, **kwargs):
        """Take ``other``'s value in place."""
        return self.update(other, inplace=True)

    def __getstate__(self):
        # a copy (pickle, deepcopy) is a value of its own: never drag the stack it came from along
        state = self.__dict__.copy()
        state.pop("_view_of", None)
        return state

    def contiguous(self, canonical: bool = False):
        """Self: one value needs no layout."""
        return self

    def _is_memmaped_from_above(self) -> bool:
        """Whether this value lives in a memory-mapped folder, itself or as an element of a
        memory-mapped stack."""
        parent = None if self._view_of is None else self._view_of[0]
        return self._is_memmap or (parent is not None and (parent._is_memmap or parent._in_memmap))

    def __call__(self, *args, **kwargs):
        """Call the stored value (a function kept as non-tensor data)."""
        return self._data(*args, **kwargs)

    @property
    def batch_size(self) -> torch.Size:
        return self._batch_size

    @batch_size.setter
    def batch_size(self, value):
        self._batch_size = as_batch_size(value)

    @property
    def device(self):
        return self._device

    @property
    def names(self):
        return [None] * len(self._batch_size)

    def _apply_batch_fn(self, fn, batch_size):
        return NonTensorData(self.data, batch_size=batch_size, device=self._device)

    def _index(self, index):
        idx = normalize_index(index, len(self._batch_size))
        return NonTensorData(self.data, batch_size=indexed_batch_size(self._batch_size, idx), device=self._device)

    def __getitem__(self, index):
        if isinstance(index, str) or (isinstance(index, tuple) and index and all(isinstance(i, str) for i in index)):
            return self.get(index)
        return self._index(index)

    def __setitem__(self, index, value):
        """Only for an element of a stack (``stack[i][...] = v``): the value replaces this
        element's, in the stack too. A NonTensorData on its own holds one value for the whole
        batch and cannot be set in parts."""
        if self._view_of is None:
            raise RuntimeError(
                "NonTensorData holds one value for the whole batch; use maybe_to_stack() to get a "
                "NonTensorStack whose elements can be set one by one"
            )
        if dummy(self._batch_size)[index].numel() == 0:  # torch's rules (``[True]``, ``[None]``, masks)
            return  # an empty selection (e.g. ``[False]``): nothing to write
        if isinstance(value, self._stack_type):
            values = value._pool.take(value._ids())
            if not values or any(v != values[0] for v in values[1:]):
                raise ValueError(f"cannot write {len(values)} different values into one element of a stack")
            value = values[0]
        self.data = value.data if isinstance(value, NonTensorData) else value

    def get(self, key, default=...):
        """``get("data")`` returns the value (the only field)."""
        if key in ("data", ("data",)):
            return self.data
        if default is not ...:
            return default
        raise KeyError(f"NonTensorData has a single field 'data', not {key!r}")

    def set(self, key, value, inplace: bool = False, non_blocking: bool = False):
        """``set("data", value)`` replaces the value."""
        if key not in ("data", ("data",)):
            raise KeyError(f"NonTensorData has a single field 'data', not {key!r}")
        self.data = value.data if isinstance(value, NonTensorData) else value
        return self

    def tolist(self):
        """The value, or nested lists of it when the batch is not empty."""
        if not self._batch_size:
            return self.data
        return _nested_list([self.data] * self.numel(), self._batch_size)

    def maybe_to_stack(self):
        """A ``NonTensorStack`` with this value at every position (self if the batch is empty)."""
        if not self._batch_size:
            return self
        pool = Pool.from_values([self.data])
        return self._stack_type._from_parts(torch.zeros(self._batch_size, dtype=torch.long), pool, self._device)

    def to(self, device=None, *args, **kwargs):
        if isinstance(device, torch.dtype) or device is None:
            return self
        return NonTensorData(self.data, batch_size=self._batch_size, device=device)

    def cpu(self):
        return self.to("cpu")

    def clone(self, recurse: bool = True):
        import copy

        return NonTensorData(copy.deepcopy(self.data) if recurse else self.data, batch_size=self._batch_size, device=self._device)

    def expand(self, *shape):
        """A NonTensorStack of this value with the expanded batch (as tensordict gives)."""
        if len(shape) == 1 and isinstance(shape[0], (list, tuple, torch.Size)):
            shape = tuple(shape[0])
        bs = torch.Size(dummy(self._batch_size).expand(*shape).shape)
        return self._stack_type._from_parts(torch.zeros((), dtype=torch.long).expand(bs), Pool.from_values([self.data]), self._device)

    def __eq__(self, other):
        other_data = other.data if isinstance(other, NonTensorData) else other
        if isinstance(other, self._stack_type):
            return other == self
        return torch.full(self._batch_size, bool(self.data == other_data), dtype=torch.bool)

    def __ne__(self, other):
        return ~(self == other)

    __hash__ = None

    def __repr__(self):
        return f"NonTensorData(data={self.data}, batch_size={self._batch_size}, device={self._device})"

    @classmethod
    def fields(cls):
        """One dataclass field, ``data``."""
        return _DATA_FIELDS

    @classmethod
    def from_tensordict(cls, tensordict, non_tensordict=None, safe: bool = True):
        """Build from a TensorDict holding ``data`` (or ``non_tensordict={"data": value}``)."""
        if non_tensordict and "data" in non_tensordict:
            value = non_tensordict["data"]
        else:
            value = tensordict.get("data")
        return cls(value, batch_size=tensordict.batch_size, device=tensordict.device)

    def state_dict(self, destination=None, prefix="", keep_vars=False, flatten=False):
        from collections import OrderedDict

        sd = OrderedDict() if destination is None else destination
        sd._metadata = {"": {"batch_size": list(self._batch_size), "device": None if self._device is None else str(self._device), "_non_tensor": {"data": self.data}}}
        return sd

    def load_state_dict(self, state_dict, strict=True, assign=False, from_flatten=False):
        meta = getattr(state_dict, "_metadata", {}).get("", {})
        if "_non_tensor" in meta:
            self.data = meta["_non_tensor"].get("data", self.data)
        return self
