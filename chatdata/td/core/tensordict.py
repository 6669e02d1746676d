"""``TensorDict``: a dict of tensors (and nested collections, and non-tensor data) that shares
leading batch dims and behaves like one tensor for indexing and shape operations.

Example:
    >>> td = TensorDict({"obs": torch.zeros(4, 3), "meta": {"id": torch.arange(4)}}, batch_size=[4])
    >>> td[1:3]["meta", "id"].tolist()
    [1, 2]
    >>> td.reshape(2, 2).batch_size
    torch.Size([2, 2])
"""
from __future__ import annotations

from typing import Any, Iterator

import types

import torch

from ..nontensor import (Batched, LinkedList, NonTensorData, NonTensorStack, as_batch_size, indexed_batch_size,
                         normalize_index)
from .convert import check_batch, check_no_names, is_collection, to_entry
from .keys import unravel_key
from .repr import td_repr
from .ops import NO_DEFAULT as _NO_DEFAULT, CollectionOps
from .td_methods import ExtraMethods
from .where import WhereMethods
from .pipeline_methods import PipelineMethods
from .key_methods import KeyMethods
from .entry_methods import EntryMethods
from .math_methods import MathMethods
from .row_methods import RowMethods
from .module_params import ModuleParams
from .autograd_methods import AutogradMethods
from .writes import WriteMethods, write_into

__all__ = ["TensorDict", "LockedError"]



class LockedError(RuntimeError):
    """Raised when a locked TensorDict is asked to add, rename or delete an entry."""


def _is_key(index) -> bool:
    """A str, or a tuple naming a nested key. A tuple that mixes str with other things is taken
    for a key too, so ``td["a", 1]`` is a TypeError about the key, not an index error about "a"."""
    if isinstance(index, str):
        return True
    return isinstance(index, tuple) and len(index) > 0 and (
        all(isinstance(i, (str, tuple)) for i in index) or any(isinstance(i, str) for i in index))


class _KeysView:
    """Keys of a TensorDict; ``in`` accepts nested keys."""

    def __init__(self, td: "TensorDict", include_nested: bool, leaves_only: bool, is_leaf=None):
        self._td, self._nested, self._leaves, self._is_leaf = td, include_nested, leaves_only, is_leaf

    def __iter__(self):
        yield from self._td._iter_keys(self._nested, self._leaves, self._is_leaf)

    def __len__(self):
        return sum(1 for _ in self)

    def __contains__(self, key) -> bool:
        try:
            k = unravel_key(key)
        except TypeError:
            return False
        if len(k) > 1 and not self._nested:
            return False
        try:
            val = self._td._get_raw(k)
        except KeyError:
            return False
        return not (self._leaves and is_collection(val))

    def __repr__(self):
        return f"_KeysView({list(self)})"

    def __eq__(self, other):
        return list(self) == list(other) if isinstance(other, (list, tuple)) else set(self) == set(other)


class TensorDict(WriteMethods, WhereMethods, KeyMethods, EntryMethods, MathMethods, PipelineMethods, RowMethods, ExtraMethods, AutogradMethods, ModuleParams, CollectionOps, Batched):
    """A batched dictionary of tensors, nested collections and non-tensor data.

    Args:
        source: a dict (nested dicts become nested TensorDicts) or None.
        batch_size: the shared leading dims of every entry (empty by default).
        device: if set, every entry is moved to it on ``set``.
        **kwargs: entries given as keywords (without ``source``: a dict and keywords together
            raise ``ValueError``, as in tensordict).

    Example:
        >>> td = TensorDict(a=torch.zeros(3), b="text", batch_size=[3])
        >>> td["b"]
        'text'
    """

    __class_getitem__ = classmethod(types.GenericAlias)  # ``TensorDict[str, torch.Tensor]`` annotations

    def __init__(self, source=None, batch_size=None, device=None, names=None, non_blocking=None, lock=False, **kwargs):
        if source is not None and not isinstance(source, (dict, TensorDict)):
            raise TypeError(f"TensorDict source must be a dict or a TensorDict, got {type(source).__name__}")
        if source is not None and kwargs:  # a misspelt option (auto_batch_size=, batchsize=) would become an entry
            raise ValueError(f"TensorDict takes its entries from a dict or from keywords, not both: got a source and "
                             f"the keywords {sorted(kwargs)} (TensorDict's options are batch_size, device, names, "
                             f"non_blocking, lock; for an inferred batch size call .auto_batch_size_())")
        self._tensordict: dict[str, Any] = {}
        self._batch_size = as_batch_size(batch_size)
        check_no_names(names)
        self._device = None if device is None else torch.device(device)
        self._is_locked = False
        self._is_shared = False
        self._is_memmap = False
        self._saved_path = None
        items = list(source.items()) if source is not None else []
        items += list(kwargs.items())
        for key, value in items:
            self.set(key, value)
        if lock:
            self.lock_()

    @classmethod
    def _new_unsafe(cls, entries: dict, batch_size, device) -> "TensorDict":
        obj = cls.__new__(cls)
        obj._tensordict = entries
        obj._batch_size = torch.Size(batch_size)
        obj._device = device
        obj._is_locked = False
        obj._is_shared = False
        obj._is_memmap = False
        obj._saved_path = None
        return obj

    # -- constructors ----------------------------------------------------------------------
    @classmethod
    def fromkeys(cls, keys, value=0, batch_size=None, device=None) -> "TensorDict":
        """A TensorDict with every key (nested keys allowed) set to ``value``.

        Example:
            >>> TensorDict.fromkeys(["a", ("nested", "e")], 0)["nested", "e"]
            tensor(0)
        """
        td = cls(batch_size=batch_size, device=device)
        for k in keys:
            td.set(k, value.clone() if isinstance(value, torch.Tensor) else value)
        return td

    @classmethod
    def from_dict(cls, input_dict, batch_size=None, device=None, batch_dims=None, auto_batch_size=False, names=None,
                  **kwargs) -> "TensorDict":
        """Build from a (nested) dict; ``auto_batch_size=True`` finds the common leading dims.
        Unknown options are a TypeError (they were dropped without a word)."""
        if kwargs:
            raise TypeError(f"from_dict got unexpected options {sorted(kwargs)}; its options are batch_size, device, "
                            f"batch_dims, auto_batch_size, names")
        td = cls(input_dict, batch_size=batch_size, device=device, names=names)
        if auto_batch_size or batch_dims is not None:
            td.auto_batch_size_(batch_dims)
        return td

    def auto_batch_size_(self, batch_dims: int | None = None) -> "TensorDict":
        """Set the batch size to the longest leading shape shared by every entry (a constant
        NonTensorData fits any batch size, so it does not limit it, and takes the one found)."""
        if batch_dims is not None and (not isinstance(batch_dims, int) or batch_dims < 0):
            raise ValueError(f"batch_dims must be a non-negative int or None, got {batch_dims!r}")
        shapes = []
        for v in self._tensordict.values():
            if is_collection(v):
                v.auto_batch_size_(batch_dims) if hasattr(v, "auto_batch_size_") else None
            elif isinstance(v, NonTensorData):
                continue
            shapes.append(tuple(v.shape if isinstance(v, torch.Tensor) else v.batch_size))
        common = []
        if shapes:
            for dims in zip(*shapes):
                if len(set(dims)) != 1 or (batch_dims is not None and len(common) >= batch_dims):
                    break
                common.append(dims[0])
        self._batch_size = torch.Size(common)
        for k, v in self._tensordict.items():
            if isinstance(v, NonTensorData) and v.batch_size != self._batch_size:
                self._tensordict[k] = NonTensorData(v.data, batch_size=self._batch_size, device=v.device)
        return self

    # -- basic properties ----------------------------------------------------------------
    @property
    def batch_size(self) -> torch.Size:
        return self._batch_size

    @batch_size.setter
    def batch_size(self, value) -> None:
        bs = as_batch_size(value)
        for k, v in self._tensordict.items():
            check_batch(k, v, bs)
        self._batch_size = bs

    @property
    def device(self):
        return self._device

    @device.setter
    def device(self, value):
        raise RuntimeError("set the device with td.to(device) or td.clear_device()")

    @property
    def names(self):
        return [None] * len(self._batch_size)

    @property
    def is_locked(self) -> bool:
        return self._is_locked

    @is_locked.setter
    def is_locked(self, value: bool):
        self.lock_() if value else self.unlock_()

    def is_shared(self) -> bool:
        return bool(self._is_shared or (self._device is not None and self._device.type == "cuda"))

    def is_memmap(self) -> bool:
        return self._is_memmap

    def is_empty(self) -> bool:
        return all(is_collection(v) and v.is_empty() for v in self._tensordict.values())

    # -- key access ------------------------------------------------------------------------
    def _get_raw(self, key):
        k = unravel_key(key)
        node = self
        for i, part in enumerate(k):
            store = node._tensordict if isinstance(node, TensorDict) else None
            if store is None:
                if hasattr(node, "_get_raw"):
                    return node._get_raw(k[i:])
                raise KeyError(f"key {key!r} not found: {k[:i]!r} is a leaf, not a collection")
            if part not in store:
                raise KeyError(f"key {key!r} not found in TensorDict with keys {sorted(node._tensordict)}")
            node = store[part]
        return node

    def get(self, key, default=_NO_DEFAULT):
        """The entry at ``key`` (a str or nested tuple) as it is stored: a tensor, a nested
        collection, or a NonTensorData / NonTensorStack (``td[key]`` gives their values).
        A missing key gives ``default`` (None when not given, as in tensordict 0.14).

        Example:
            >>> TensorDict({"a": {"b": torch.ones(1)}}).get(("a", "b"))
            tensor([1.])
        """
        try:
            return self._get_raw(key)
        except KeyError:
            return None if default is _NO_DEFAULT else default

    def get_non_tensor(self, key, default=_NO_DEFAULT):
        """The value of a non-tensor entry: the data, or nested lists for a stack."""
        try:
            val = self._get_raw(key)
        except KeyError:
            if default is _NO_DEFAULT:
                raise
            return default
        if isinstance(val, NonTensorData):
            return val.data
        return val.tolist() if isinstance(val, NonTensorStack) else val

    def _check_unlocked(self, action: str, key) -> None:
        if self._is_locked:
            raise LockedError(
                f"cannot {action} {key!r}: the TensorDict is locked (memmapped or lock_()'ed); "
                "call unlock_() first, or write in place with td[...] = value / update_()"
            )

    def set(self, key, value, inplace: bool = False, non_blocking: bool = False, **kwargs) -> "TensorDict":
        """Set ``key`` (nested keys create sub-TensorDicts) to ``value``; returns self.

        ``inplace=True`` writes into the existing entry when there is one.
        """
        k = unravel_key(key)
        node = self
        for i, part in enumerate(k[:-1]):
            nxt = node._tensordict.get(part)
            if nxt is None:
                node._check_unlocked("add", part)
                nxt = TensorDict(batch_size=node._batch_size, device=node._device)
                node._tensordict[part] = nxt
            elif not isinstance(nxt, TensorDict):
                if is_collection(nxt):  # a tensorclass or another collection sets the rest
                    nxt.set(k[i + 1 :], value, inplace=inplace)
                    return self
                raise KeyError(f"cannot set {key!r}: {part!r} is a leaf, not a TensorDict")
            node = nxt
        node._set_str(k[-1], value, inplace)
        return self

    def _set_str(self, key: str, value, inplace: bool) -> None:
        existing = self._tensordict.get(key)
        if existing is not None and (inplace or self._is_locked):
            write_into(existing, value, key)
            return
        if existing is None:
            self._check_unlocked("add", key)
        entry = to_entry(value, self._batch_size, self._device, key, TensorDict)
        check_batch(key, entry, self._batch_size)
        self._tensordict[key] = entry

    def set_(self, key, value, *, non_blocking: bool = False) -> "TensorDict":
        """Write ``value`` into the existing entry ``key`` in place (KeyError if absent);
        ``non_blocking`` is accepted for tensordict's signature (CPU copies block anyway)."""
        existing = self._get_raw(key)
        write_into(existing, value, key)
        return self

    def __getitem__(self, index):
        if _is_key(index):  # non-tensor entries come back as values (a stack as a LinkedList)
            val = self._get_raw(index)
            if isinstance(val, NonTensorData):
                return val.data
            return LinkedList.of(val) if isinstance(val, NonTensorStack) else val
        return self._index(index)

    def __setitem__(self, index, value):
        if _is_key(index):
            self.set(index, value)
            return
        self._set_at(index, value)

    def __delitem__(self, key):
        self.del_(key)

    def del_(self, key) -> "TensorDict":
        """Remove ``key``; returns self."""
        k = unravel_key(key)
        parent = self._get_raw(k[:-1]) if len(k) > 1 else self
        if k[-1] not in parent._tensordict:
            raise KeyError(f"key {key!r} not found in TensorDict with keys {sorted(parent._tensordict)}")
        parent._check_unlocked("delete", key)
        del parent._tensordict[k[-1]]
        return self

    def pop(self, key, default=_NO_DEFAULT):
        """Remove ``key`` and return its entry."""
        try:
            val = self._get_raw(key)
        except KeyError:
            if default is _NO_DEFAULT:
                raise
            return default
        self.del_(key)
        return val

    def __contains__(self, key) -> bool:
        return key in self.keys(include_nested=True)

    def __iter__(self) -> Iterator:
        if not self._batch_size:
            raise TypeError("iteration over a TensorDict with an empty batch size (use .items() for its entries)")
        for i in range(self._batch_size[0]):
            yield self[i]

    def __bool__(self):
        raise ValueError("the truth value of a TensorDict is ambiguous; use .all() or .any()")

    def _iter_keys(self, include_nested, leaves_only, is_leaf=None, prefix=()):
        for k, v in self._tensordict.items():
            coll = is_collection(v) if is_leaf is None else not is_leaf(type(v))
            if not (leaves_only and coll):
                yield k if not prefix else prefix + (k,)
            if include_nested and coll and hasattr(v, "_iter_keys"):
                yield from v._iter_keys(include_nested, leaves_only, is_leaf, prefix + (k,))

    def keys(self, include_nested: bool = False, leaves_only: bool = False, is_leaf=None, sort: bool = False):
        """The keys; nested keys are tuples when ``include_nested``."""
        view = _KeysView(self, include_nested, leaves_only, is_leaf)
        if sort:
            return sorted(view, key=lambda k: k if isinstance(k, tuple) else (k,))
        return view

    def values(self, include_nested: bool = False, leaves_only: bool = False, is_leaf=None, sort: bool = False):
        for k in self.keys(include_nested, leaves_only, is_leaf, sort):
            yield self.get(k)

    def items(self, include_nested: bool = False, leaves_only: bool = False, is_leaf=None, sort: bool = False):
        for k in self.keys(include_nested, leaves_only, is_leaf, sort):
            yield k, self.get(k)

    def rename_key_(self, old_key, new_key, safe: bool = False) -> "TensorDict":
        """Rename an entry; ``safe=True`` refuses to overwrite an existing key."""
        self._check_unlocked("rename", old_key)
        if safe and new_key in self.keys(include_nested=True):
            raise KeyError(f"key {new_key!r} already exists")
        unravel_key(new_key)  # a bad new key is refused before anything moves
        value = self._get_raw(old_key)
        self.del_(old_key)
        try:
            self.set(new_key, value)
        except Exception:
            self.set(old_key, value)  # refused (the new key runs through a leaf, ...): put it back
            raise
        return self

    def exclude(self, *keys, inplace: bool = False, as_tensordict: bool = False) -> "TensorDict":
        """A TensorDict without the given keys (nested keys allowed)."""
        out = self if inplace else self._shallow_copy()
        for key in keys:
            k = unravel_key(key)
            parent = out
            try:
                for part in k[:-1]:
                    child = parent._tensordict[part]
                    if not inplace:
                        child = child._shallow_copy()
                        parent._tensordict[part] = child
                    parent = child
                parent._tensordict.pop(k[-1], None)
            except (KeyError, AttributeError):
                continue
        return out

    def select(self, *keys, inplace: bool = False, strict: bool = True, as_tensordict: bool = False) -> "TensorDict":
        """A TensorDict with only the given keys (nested keys allowed)."""
        out = TensorDict._new_unsafe({}, self._batch_size, self._device)
        for key in keys:
            k = unravel_key(key)
            try:
                value = self._get_raw(k)
            except KeyError:
                if strict:
                    raise
                continue
            node = out
            src = self
            for part in k[:-1]:
                src = src._tensordict[part]
                if part not in node._tensordict:
                    node._tensordict[part] = TensorDict._new_unsafe({}, src.batch_size, src.device)
                node = node._tensordict[part]
            node._tensordict[k[-1]] = value
        if inplace:
            self._tensordict = out._tensordict
            return self
        return out

    def _shallow_copy(self) -> "TensorDict":
        return TensorDict._new_unsafe(dict(self._tensordict), self._batch_size, self._device)

    def flatten_keys(self, separator: str = ".", inplace: bool = False) -> "TensorDict":
        """Nested entries become top-level entries named ``"a.b"``."""
        out = TensorDict._new_unsafe({}, self._batch_size, self._device)
        for key in self.keys(include_nested=True, leaves_only=True):
            name = separator.join(key) if isinstance(key, tuple) else key
            if name in out._tensordict:
                raise KeyError(f"flatten_keys: {name!r} exists twice; use another separator")
            out._tensordict[name] = self._get_raw(key)
        if inplace:
            self._tensordict = out._tensordict
            return self
        return out

    def unflatten_keys(self, separator: str = ".", inplace: bool = False) -> "TensorDict":
        """Entries named ``"a.b"`` become nested entries ``("a", "b")``."""
        out = TensorDict._new_unsafe({}, self._batch_size, self._device)
        for key, value in self._tensordict.items():
            nested = tuple(key.split(separator))
            if nested in out.keys(include_nested=True):  # set() would silently replace what is there
                raise KeyError(f"unflatten_keys: {key!r} collides with another key once split at {separator!r} "
                               f"(both name {nested!r}); rename one of them first")
            out.set(nested, value)
        if inplace:
            self._tensordict = out._tensordict
            return self
        return out

    # -- batch-shape machinery --------------------------------------------------------------
    def _index(self, index):
        idx = normalize_index(index, len(self._batch_size))
        new_bs = indexed_batch_size(self._batch_size, idx)
        entries = {}
        for k, v in self._tensordict.items():
            entries[k] = v[idx] if isinstance(v, torch.Tensor) else v._index(idx)
        return TensorDict._new_unsafe(entries, new_bs, self._device)

    def _apply_batch_fn(self, fn, batch_size):
        entries = {}
        own = self._batch_size
        for k, v in self._tensordict.items():
            if isinstance(v, torch.Tensor):
                entries[k] = fn(v)
            elif type(v) in (TensorDict, NonTensorData, NonTensorStack) and v.batch_size == own:  # known new batch size
                entries[k] = v._apply_batch_fn(fn, batch_size)
            else:
                entries[k] = v._batch_op(fn)
        return TensorDict._new_unsafe(entries, batch_size, self._device)

    def __repr__(self) -> str:
        return td_repr(self)

    # state_dict, load_state_dict, consolidate and pickling (__getstate__ / __setstate__, for the
    # one buffer of a consolidated TensorDict) build TensorDicts: core/state.py installs them.


CollectionOps._td_class = TensorDict  # the mixin's methods build and recognise TensorDicts
WriteMethods._td_class = TensorDict
TensorDictBase = TensorDict  # tensordict's base-class name, for isinstance checks in ported code
