"""Writes into a TensorDict's existing entries and batch: ``td[index] = value``, ``update``,
``update_`` and ``copy_``. Each checks everything it will write before the first write, so a
refused write leaves the TensorDict as it was. A mixin of :class:`~chatdata.td.TensorDict`
(which sets ``WriteMethods._td_class``), in its own module to keep the class's file walkable.

Example:
    >>> import torch
    >>> from chatdata.td import TensorDict
    >>> td = TensorDict(a=torch.zeros(3), b=torch.zeros(3), batch_size=[3])
    >>> try:
    ...     td.update({"a": torch.ones(3), "b": torch.ones(4)})
    ... except ValueError:
    ...     pass
    >>> td["a"].tolist()  # nothing was written
    [0.0, 0.0, 0.0]
"""
from __future__ import annotations

import numbers

import torch

from ..nontensor import BatchSizeError, NonTensorData, NonTensorStack, indexed_batch_size, normalize_index
from .convert import check_batch, check_fits, check_indexed_batch, is_collection, to_entry
from .keys import unravel_key

__all__ = ["WriteMethods", "allocate_like", "check_write", "write_into"]


class WriteMethods:
    """``td[index] = value`` (past the key case), ``update``, ``update_``, ``copy_``."""

    _td_class: type = None  # TensorDict, set by its module (which imports this one)

    def _set_at(self, index, value) -> None:
        idx = normalize_index(index, len(self._batch_size))
        if isinstance(value, dict):
            value = self._td_class(value, batch_size=self._batch_size[:0])
        self._check_set_at(idx, indexed_batch_size(self._batch_size, idx), value, index, ())
        self._write_at(idx, value)

    def _check_set_at(self, idx, target_bs, value, index, prefix) -> None:
        """Refuse ``td[index] = value`` before anything is written when some existing tensor
        entry could not take its part (shapes that do not broadcast, a value that is no number)."""
        if type(value) in (int, float, bool, complex):  # a number fills any tensor
            return
        if isinstance(value, self._td_class):
            if value._batch_size != target_bs:
                check_indexed_batch(target_bs, value._batch_size, index)
            pairs = value._tensordict.items()
        elif is_collection(value):
            check_indexed_batch(target_bs, value.batch_size, index)
            pairs = ((k, value._get_raw(k) if hasattr(value, "_get_raw") else value.get(k)) for k in value.keys())
        else:
            pairs = ((k, value) for k in self._tensordict)
        nb = len(self._batch_size)
        for key, src in pairs:
            dest = self._tensordict.get(key)
            if isinstance(dest, self._td_class):
                dest._check_set_at(idx, target_bs, src, index, prefix + (key,))
            elif isinstance(dest, torch.Tensor) and not dest.is_nested:
                check_fits(tuple(target_bs) + tuple(dest.shape[nb:]), src, prefix + (key,), f"set td[{index!r}]")

    def _write_at(self, idx, value) -> None:
        if isinstance(value, self._td_class) or is_collection(value):
            for key in value.keys():
                src = value._get_raw(key) if hasattr(value, "_get_raw") else value.get(key)
                if key not in self._tensordict:  # a new key: allocate it, then write the part
                    self._check_unlocked("add", key)
                    self._tensordict[key] = allocate_like(src, self._batch_size, len(value.batch_size), self._device)
                self._set_leaf_at(key, idx, src)
            return
        numeric = isinstance(value, (torch.Tensor, numbers.Number))
        for key in list(self._tensordict):
            if numeric and isinstance(self._tensordict[key], (NonTensorData, NonTensorStack)):
                continue  # td[i] = 0 fills the tensors; it never writes 0 into a text column
            self._set_leaf_at(key, idx, value)

    def _set_leaf_at(self, key: str, idx, src) -> None:
        dest = self._tensordict[key]
        if isinstance(dest, NonTensorData):
            same = not isinstance(src, NonTensorStack) and (src.data if isinstance(src, NonTensorData) else src) == dest.data
            if same:
                return
            dest = self._tensordict[key] = dest.maybe_to_stack()  # values now differ per element
        if isinstance(dest, torch.Tensor) and isinstance(src, NonTensorData):
            src = src.data
        dest[idx] = src

    def update(self, input_dict_or_td, clone: bool = False, inplace: bool = False, keys_to_update=None, **kwargs):
        """Merge entries from a dict or TensorDict (nested collections merge recursively).
        Every value is converted and checked before the first is set: a refused update changes nothing."""
        keys_to_update = None if keys_to_update is None else {unravel_key(k) for k in keys_to_update}
        plan: list = []
        self._plan_update(input_dict_or_td, clone, inplace, keys_to_update, plan)
        for node, key, value, converted in plan:
            if converted:  # a checked entry for a str key: what set() would store
                node._tensordict[key] = value
            else:
                node.set(key, value, inplace=inplace)
        return self

    def _plan_update(self, src, clone: bool, inplace: bool, keys_to_update, plan: list, prefix: tuple = ()) -> None:
        """``(collection, key, value, converted)`` for every set an update makes, each value
        converted into an entry and checked against its collection (nothing is set here)."""
        src = src._tensordict if isinstance(src, self._td_class) else src
        for key, value in src.items():
            if isinstance(key, tuple):  # a nested key: planned in the collection it names
                nested = unravel_key(key)
                key = nested[0]
                if len(nested) > 1:
                    if keys_to_update is None or any(k[0] == key for k in keys_to_update):
                        self._plan_nested(nested, value, clone, inplace, keys_to_update, plan, prefix)
                    continue
            if keys_to_update is not None and not any(k[0] == key for k in keys_to_update):
                continue
            target = self._tensordict.get(key)
            target_td = getattr(target, "_storage", target)  # a nested tensorclass merges into its fields
            if isinstance(target_td, self._td_class) and isinstance(value, (dict, self._td_class)):
                sub_keys = None if keys_to_update is None else [k[1:] for k in keys_to_update if k[0] == key and len(k) > 1] or None
                target_td._plan_update(value, clone, inplace, None if sub_keys is None else set(sub_keys), plan, prefix + (key,))
                continue
            if clone and hasattr(value, "clone"):
                value = value.clone()
            converted = False
            if target is not None and (inplace or self._is_locked):
                check_write(target, value, prefix + (key,))
            elif isinstance(key, str):
                if target is None:
                    self._check_unlocked("add", key)
                value = to_entry(value, self._batch_size, self._device, key, self._td_class)
                check_batch(key, value, self._batch_size)
                converted = True
            plan.append((self, key, value, converted))

    def _plan_nested(self, key: tuple, value, clone: bool, inplace: bool, keys_to_update, plan: list,
                     prefix: tuple) -> None:
        """Plan the set of a nested ``key`` (2 parts or more) of an update: in its sub-TensorDict
        when there is one, else checked against this batch size (``set`` makes the path); a path
        through a leaf is refused before anything is set."""
        target = self._tensordict.get(key[0])
        rest = key[1:] if len(key) > 2 else key[1]
        if isinstance(target, self._td_class):
            sub_keys = None if keys_to_update is None else [k[1:] for k in keys_to_update if k[0] == key[0] and len(k) > 1] or None
            target._plan_update({rest: value}, clone, inplace, None if sub_keys is None else set(sub_keys), plan,
                                prefix + (key[0],))
            return
        if target is not None and not is_collection(target):
            raise KeyError(f"cannot set {key!r}: {key[0]!r} is a leaf, not a TensorDict")
        if target is None:
            self._check_unlocked("add", key[0])
            if clone and hasattr(value, "clone"):
                value = value.clone()
            value = to_entry(value, self._batch_size, self._device, key[-1], self._td_class)
            check_batch(key[-1], value, self._batch_size)
        plan.append((self, key, value, False))

    def update_(self, input_dict_or_td, clone: bool = False, keys_to_update=None):
        """Write every entry of the input into the existing entries, in place (every key and
        shape is checked first: a refused update_ writes nothing)."""
        src = input_dict_or_td._tensordict if isinstance(input_dict_or_td, self._td_class) else input_dict_or_td
        check_write(self, src, ())
        for key, value in src.items():
            write_into(self._tensordict[key], value, key)
        return self

    def copy_(self, src, non_blocking: bool = False):
        """Copy ``src``'s entries into this TensorDict in place."""
        return self.update_(src)


def allocate_like(src, batch_size, src_batch_dims: int, device):
    """A new entry of batch ``batch_size`` for values like ``src`` (zeros; a non-tensor value
    everywhere)."""
    if isinstance(src, torch.Tensor):
        return torch.zeros(tuple(batch_size) + tuple(src.shape[src_batch_dims:]), dtype=src.dtype, device=src.device)
    if isinstance(src, NonTensorData):
        return NonTensorData(src.data, batch_size=batch_size, device=device)
    if isinstance(src, NonTensorStack):
        first = src.reshape(-1)[0].data if src.numel() else None
        return NonTensorData(first, batch_size=batch_size, device=device).maybe_to_stack()
    if isinstance(src, WriteMethods._td_class):
        out = WriteMethods._td_class._new_unsafe({}, batch_size, device)
        for k, v in src._tensordict.items():
            out._tensordict[k] = allocate_like(v, batch_size, src_batch_dims, device)
        return out
    if hasattr(src, "_from_storage"):  # a tensorclass
        return src._from_storage(allocate_like(src._storage, batch_size, src_batch_dims, device))
    if not isinstance(src, (list, dict)) and not hasattr(src, "batch_size"):
        return NonTensorData(src, batch_size=batch_size, device=device)
    raise TypeError(f"cannot allocate a new entry like a {type(src).__name__}")


def check_write(dest, value, key: tuple) -> None:
    """Raise before :func:`_write_into` writes anything when ``dest`` (nested keys too) could not
    take ``value``: a key it lacks, a tensor whose shape does not broadcast to the entry's."""
    if isinstance(dest, torch.Tensor):
        if not (isinstance(value, torch.Tensor) and value.shape == dest.shape) and not dest.is_nested:
            check_fits(tuple(dest.shape), value, key, "write in place")
    elif isinstance(dest, WriteMethods._td_class) and isinstance(value, (dict, WriteMethods._td_class)):
        src = value._tensordict if isinstance(value, WriteMethods._td_class) else value
        missing = [k for k in src if k not in dest._tensordict]
        if missing:
            where = f" of {key if len(key) > 1 else key[0]!r}" if key else ""
            raise KeyError(f"update_: keys {missing}{where} are not in the destination TensorDict (it has "
                           f"{sorted(dest._tensordict)}); use update() to add new keys")
        for k, v in src.items():
            check_write(dest._tensordict[k], v, key + (k,))


def write_into(dest, value, key) -> None:
    """Copy ``value`` into the existing entry ``dest`` in place."""
    if isinstance(dest, torch.Tensor):
        if isinstance(value, NonTensorData):
            value = value.data
        if not isinstance(value, torch.Tensor):
            try:
                value = torch.as_tensor(value, dtype=dest.dtype)
            except (TypeError, ValueError, RuntimeError) as err:
                raise RuntimeError(f"Cannot update an existing tensor entry {key!r} in place with a "
                                   f"{type(value).__name__} ({err}); set it without inplace=True to replace it") from None
        try:
            dest.copy_(value)
        except RuntimeError as err:  # torch's message names neither the entry nor the shapes
            raise BatchSizeError(f"cannot write entry {key!r} of shape {tuple(dest.shape)} in place with a value of shape "
                                 f"{tuple(value.shape)} ({err}); set it without inplace=True to replace it") from None
    elif isinstance(dest, WriteMethods._td_class):
        dest.update_(value)
    elif isinstance(dest, NonTensorStack):
        dest[...] = value
    elif isinstance(dest, NonTensorData):
        if isinstance(value, torch.Tensor):
            raise ValueError(f"Failed to update {key!r} in place: it holds non-tensor data and the value is a "
                             f"tensor of shape {tuple(value.shape)}; set it without inplace=True to replace it")
        dest.data = value.data if isinstance(value, NonTensorData) else value
    elif hasattr(dest, "update_"):
        dest.update_(value)
    else:
        raise TypeError(f"cannot write into entry {key!r} of type {type(dest).__name__}")
