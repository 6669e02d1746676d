"""``NonTensorStack``: one non-tensor value per batch element, held as a column.

A ``NonTensorStack`` is a shared :class:`~chatdata.td.nontensor.pool.Pool` of values and an
int64 *index tensor* with the stack's batch shape that maps each element to a pool id. Every
shape operation (indexing, reshape, permute, flip, stack, cat, ...) is the same torch operation
on the index tensor, so a million strings are indexed and sliced at tensor speed. Basic
indexing returns views (a write is seen by the source); fancy indexing copies the index, so a
write into the result never reaches the source. A column built or loaded in order keeps its
index as a range until a write, shared with its slices (:mod:`.range_index`). An element
(``stack[i]``) is a :class:`~chatdata.td.nontensor.data.NonTensorData` that writes back into
the stack. The
column-level methods (sizes, packed views, value counts) are the mixin of
:mod:`chatdata.td.nontensor.columns`.

Example:
    >>> s = NonTensorStack.from_list(["a", "b", "c"])
    >>> s[1:].tolist()
    ['b', 'c']
    >>> is_non_tensor(s), is_non_tensor("a")
    (True, False)
"""
from __future__ import annotations

import torch

from .batched import Batched, BatchSizeError, as_batch_size, normalize_index
from .pool import Pool
from .nested_lists import _flatten_to, _infer_shape, _nested_list
from .columns import ColumnMethods
from .data import _DATA_FIELDS, _MEMMAP_PART, NonTensorData
from .flags import StateFlags as _StateFlags, device as _device
from .range_index import consecutive_run, materialise, range_tensor, share_range

__all__ = ["NonTensorStack", "is_non_tensor"]


def is_non_tensor(obj) -> bool:
    """``True`` for NonTensorData and NonTensorStack."""
    return isinstance(obj, (NonTensorData, NonTensorStack))


def _check_fits(shape: torch.Size, target: torch.Size, index) -> None:
    """BatchSizeError unless values of batch ``shape`` can be written into ``target`` elements,
    by torch's rule for ``t[index] = v``: ``v``'s shape, without extra leading 1s, broadcasts to
    the target's (on the shapes alone: a few microseconds, where a meta tensor costs tens)."""
    core, target = tuple(shape), tuple(target)
    while len(core) > len(target) and core[0] == 1:
        core = core[1:]
    if len(core) > len(target) or any(a != b and a != 1 for a, b in zip(reversed(core), reversed(target))):
        raise BatchSizeError(f"cannot write a NonTensorStack of batch size {tuple(shape)} into the {target} "
                             f"elements selected by {index!r}: its batch size must match theirs (or broadcast to it)")


def _expand_to(t: torch.Tensor, batch_size: torch.Size, what: str) -> torch.Tensor:
    """``t`` expanded to ``batch_size``; BatchSizeError naming ``what`` when it does not broadcast."""
    try:
        return t.expand(batch_size)
    except RuntimeError:
        raise BatchSizeError(f"where: {what} has shape {tuple(t.shape)}, which does not broadcast to the stack's "
                             f"batch size {tuple(batch_size)}") from None


class NonTensorStack(_StateFlags, ColumnMethods, Batched):
    """One non-tensor value per batch element, held as a column (pool + index tensor).

    Build it from NonTensorData items (``NonTensorStack(a, b)``) or from a (nested) list with
    :meth:`from_list`. ``tolist()`` gives the values back as nested lists.

    Example:
        >>> s = NonTensorStack(NonTensorData("x"), NonTensorData("y"))
        >>> s.tolist(), s.batch_size
        (['x', 'y'], torch.Size([2]))
    """

    _is_non_tensor = True

    def __init__(self, *items, stack_dim: int = 0, batch_size=None, device=None):
        if len(items) == 1 and isinstance(items[0], (list, tuple)):
            items = tuple(items[0])
        if not items:  # values unknown yet: None everywhere (as new_zeros gives a stack)
            index = torch.zeros(tuple(as_batch_size(batch_size) or (0,)), dtype=torch.long)
            self._init(index, Pool.from_values([None] if index.numel() else []), device)
            return
        # torch.stack dispatches to chatdata.td.core.functional (the stacking of every container)
        stacked = torch.stack([i if is_non_tensor(i) else NonTensorData(i) for i in items], stack_dim)
        if isinstance(stacked, NonTensorData):
            stacked = stacked.maybe_to_stack()
        self._init(stacked._rng if stacked._idx is None else stacked._idx, stacked._pool, device if device is not None else stacked._device,
                   stacked._shape)

    def _init(self, index, pool: Pool, device, shape=None):
        # the index is a tensor, or (not yet materialised) a Python range: loading or building
        # a column of n values then costs O(1), and contiguous slices stay ranges. ``shape``: the
        # batch shape of a range read in C order (unsqueeze / reshape of a range stack), None for 1-D
        if isinstance(index, range):
            self._idx, self._rng = None, index
            self._shape = None if shape is None or len(shape) == 1 else torch.Size(shape)
        else:
            self._idx, self._rng, self._shape = index, None, None
        self._pool = pool
        self._device = _device(device)

    @property
    def _index_t(self) -> torch.Tensor:
        """The index tensor (materialised from the range on first use, shared with the range
        views of this stack: :mod:`.range_index`)."""
        if self._idx is None:
            materialise(self)
        return self._idx

    @_index_t.setter
    def _index_t(self, value: torch.Tensor) -> None:
        self._idx, self._rng, self._shape = value, None, None

    @property
    def _index_view(self) -> torch.Tensor:
        """The index as a tensor, for reading: a range stays a range (a contiguous stack keeps
        its zero-copy paths: ``packed_column``, saving a loaded column as it is)."""
        if self._idx is None:
            return range_tensor(self._rng) if self._shape is None else range_tensor(self._rng).view(self._shape)
        return self._idx

    def __getstate__(self):
        # a copy (pickle, deepcopy) has an index of its own: never the views sharing this one's range
        state = self.__dict__.copy()
        state.pop("_range_group", None)
        return state

    def _ids(self):
        """Every element's pool id in order: a range (no allocation) or a list. An index that
        is one run of consecutive ids (a range turned into a tensor by a view, never written
        out of order) is given as a range too, found with one vectorised check."""
        if self._idx is None:
            return self._rng
        flat = self._idx.reshape(-1)
        run = consecutive_run(flat) if flat.numel() > 64 else None  # a short list costs less than the check
        return flat.tolist() if run is None else run

    def _index(self, index):
        if self._idx is None and self._shape is None:  # 1-D range: ints and slices need no tensor at all
            it = index[0] if isinstance(index, tuple) and len(index) == 1 else index
            if isinstance(it, slice):
                return self._view(self._rng[it])
            if isinstance(it, int) and not isinstance(it, bool):
                n = len(self._rng)
                if not -n <= it < n:
                    raise IndexError(f"index {it} is out of range for a stack of {n} values")
                return self._element(self._rng[it], it)
        # the index tensor is the batch: indexing it validates the index and gives the result
        norm = normalize_index(index, self.batch_dims)
        # a shaped range (unsqueeze of a column) becomes a tensor first: a view of it must write here
        index = (self._index_view if self._shape is None else self._index_t)[norm]
        if index.ndim == 0:
            return self._element(int(index), norm)
        return self._view(index)

    def _view(self, index) -> "NonTensorStack":
        """A stack over part of this one's index (a view: shares it when it can)."""
        out = NonTensorStack._from_parts(index, self._pool, self._device)
        if isinstance(index, range):  # a slice of a range: share the index, materialised on a write
            share_range(self, out)
        if self._is_memmap or self._in_memmap:
            out._in_memmap = True  # its own updates are refused: write into the mapped stack
        return out

    def _element(self, pool_id: int, where) -> NonTensorData:
        """One element as a NonTensorData that writes back here (``s[0].data = v``)."""
        out = NonTensorData(self._pool.get(pool_id), batch_size=(), device=self._device)
        out._view_of = (self, where)
        return out

    @classmethod
    def _from_parts(cls, index: torch.Tensor, pool: Pool, device=None, shape=None) -> "NonTensorStack":
        obj = cls.__new__(cls)
        obj._init(index, pool, device, shape)
        return obj

    @classmethod
    def from_list(cls, values: list, batch_size=None, device=None) -> "NonTensorStack":
        """Build a stack from nested lists: every level of lists down to ``batch_size`` (or
        every level of equal-length lists) becomes a batch dim.

        Example:
            >>> NonTensorStack.from_list([["a", "b"], ["c", "d"]]).batch_size
            torch.Size([2, 2])
        """
        if batch_size is None:
            shape, flat = _infer_shape(values)
        else:
            shape = as_batch_size(batch_size)
            flat = _flatten_to(values, shape)
        pool = Pool.from_values(flat)
        index = range(len(flat)) if len(shape) == 1 else torch.arange(len(flat), dtype=torch.long).reshape(shape)
        return cls._from_parts(index, pool, device)

    # -- basic properties ----------------------------------------------------------------
    @property
    def batch_size(self) -> torch.Size:
        if self._idx is None:
            return torch.Size([len(self._rng)]) if self._shape is None else self._shape
        return self._idx.shape

    @property
    def device(self):
        return self._device

    @property
    def names(self):
        return [None] * len(self.batch_size)

    @property
    def data(self):
        """The values as nested lists (same as :meth:`tolist`)."""
        return self.tolist()

    def tolist(self):
        """All values as nested lists with the batch shape."""
        return _nested_list(self._pool.take(self._ids()), self.batch_size)

    def _apply_batch_fn(self, fn, batch_size):
        if self._idx is None:
            shaped = self._range_reshape(fn)
            if shaped is not None:
                return shaped
        source = self._index_view
        index = fn(source)
        if self._idx is None and index.numel() and index.untyped_storage().data_ptr() == source.untyped_storage().data_ptr():
            # a view of a range index: writes through it must reach this stack, as for a tensor
            if index.shape == source.shape and index.stride() == source.stride() and not index.storage_offset():
                return self._view(self._rng)  # the same range (reshape(-1), flatten()): shared, still lazy
            index = fn(self._index_t)  # reshape, unsqueeze, expand, ...: the range becomes a tensor first
        if index.ndim == 0:  # a single element: its value, as tensordict gives it
            return NonTensorData(self._pool.get(int(index)), batch_size=(), device=self._device)
        return self._view(index)

    def _range_reshape(self, fn):
        """``fn`` of a range-indexed stack in O(1) when it is a reshape (unsqueeze, squeeze,
        view, flatten, unflatten: a view that reads the same ids in the same order): a stack of
        the same range, in the group of this one's views, with the new shape; else None. A
        meta tensor tells what ``fn`` does without building the index."""
        probe = torch.empty(self.batch_size, dtype=torch.long, device="meta")
        try:
            out = fn(probe)
        except (RuntimeError, NotImplementedError, TypeError, IndexError):  # an op meta tensors lack: the tensor path
            return None
        if not out.ndim or not out.numel() or not (out is probe or out._base is probe) \
                or out.storage_offset() or not out.is_contiguous() or out.numel() != probe.numel():
            return None
        view = self._view(self._rng)
        view._shape = None if out.ndim == 1 else out.shape
        return view

    def __getitem__(self, index):
        if isinstance(index, str) or (isinstance(index, tuple) and index and all(isinstance(i, str) for i in index)):
            return self.get(index)
        return self._index(index)

    # -- lock and memory-mapped state (a stack memory-mapped on its own: ``stack.memmap_(path)``) --
    _shape = None  # the batch shape of a range index read in C order (None: 1-D); see _init
    _is_memmap = False
    _is_locked = False
    _is_shared = False
    _disk = None  # the storage room's link to the folder it was saved on its own in (write_stack)
    _in_memmap = False  # a view of a memory-mapped stack

    def __setitem__(self, index, value):
        if self._in_memmap:
            raise RuntimeError(_MEMMAP_PART)
        if not (self._is_memmap and self._disk is not None):
            self._set(index, value)
            return
        # memory-mapped on its own: the folder is saved again, atomically, with the new values
        before = (None if self._idx is None else self._idx.clone(), self._rng)
        self._set(index, value)
        try:
            self._disk.write_stack(self)
        except BaseException:  # a value the format refuses: the stack keeps its old values
            if before[0] is None:  # the write materialised the range (for its views too): refill it
                self._idx.copy_(range_tensor(before[1]).view(self._idx.shape))
            else:
                self._idx.copy_(before[0])  # in place: views of this stack see the rollback
            raise

    def _set(self, index, value):
        idx = normalize_index(index, self._index_t.ndim)
        target_shape = self._index_t[idx].shape
        if isinstance(value, NonTensorStack):
            _check_fits(value.batch_size, target_shape, index)  # before the pool takes the values
            ids = torch.tensor(
                self._pool.extend(value._pool.take(value._ids())), dtype=torch.long
            ) + torch.arange(value.numel())
            self._index_t[idx] = ids.reshape(value.batch_size)
            return
        if isinstance(value, NonTensorData):
            value = value.data
        elif isinstance(value, list) and target_shape:
            flat = _flatten_to(value, target_shape)
            start = self._pool.extend(flat)
            self._index_t[idx] = torch.arange(start, start + len(flat)).reshape(target_shape)
            return
        self._index_t[idx] = self._pool.append(value)

    def get(self, key, default=...):
        if key in ("data", ("data",)):
            return self.tolist()
        if default is not ...:
            return default
        raise KeyError(f"NonTensorStack has a single field 'data', not {key!r}")

    def set(self, key, value, inplace: bool = False, non_blocking: bool = False):
        if key not in ("data", ("data",)):
            raise KeyError(f"NonTensorStack has a single field 'data', not {key!r}")
        self[...] = value
        return self

    def maybe_to_stack(self):
        return self

    def update(self, other, inplace: bool = False, non_blocking: bool = False, **kwargs):
        """Take ``other``'s values (a stack of the same shape or one value for all); a locked
        (memory-mapped) stack needs ``inplace=True`` and then saves its folder again."""
        if self._is_locked and not inplace:
            raise RuntimeError("cannot update a locked NonTensorStack (memory-mapped); use inplace=True or update_()")
        self[...] = other
        return self

    def update_at_(self, value, index):
        """``self[index] = value``; returns self."""
        self[index] = value
        return self

    def update_(self, other, non_blocking: bool = False, **kwargs):
        return self.update(other, inplace=True)

    def to(self, device=None, *args, **kwargs):
        if isinstance(device, torch.dtype) or device is None:
            return self
        return NonTensorStack._from_parts(self._index_t, self._pool, device)  # shares the index, as a view

    def cpu(self):
        return self.to("cpu")

    def clone(self, recurse: bool = True):
        """A copy with its own index (the pool is shared: values are never mutated in place)."""
        return NonTensorStack._from_parts(self._rng if self._idx is None else self._idx.clone(), self._pool, self._device,
                                          self._shape)

    def __eq__(self, other):
        mine = self._pool.take(self._ids())
        if isinstance(other, NonTensorStack):
            if other.batch_size != self.batch_size:
                raise ValueError(f"cannot compare stacks of shapes {self.batch_size} and {other.batch_size}")
            theirs = other._pool.take(other._ids())
            res = [a == b for a, b in zip(mine, theirs)]
        else:
            val = other.data if isinstance(other, NonTensorData) else other
            res = [a == val for a in mine]
        return torch.tensor(res, dtype=torch.bool).reshape(self.batch_size)

    def __ne__(self, other):
        return ~(self == other)

    __hash__ = None

    def __repr__(self):
        return f"NonTensorStack(\n    {self.tolist()!r},\n    batch_size={self.batch_size},\n    device={self._device})"

    def where(self, condition, other, *, out=None, pad=None):
        """Each element from self where ``condition`` holds, else from ``other`` (a stack of
        the same shape, a NonTensorData or a plain value).

        Example:
            >>> from chatdata.td import NonTensorStack
            >>> NonTensorStack("a", "b").where(torch.tensor([True, False]), "z").tolist()
            ['a', 'z']
        """
        bs = self.batch_size
        cond = _expand_to(torch.as_tensor(condition, dtype=torch.bool), bs, "the condition").reshape(-1).tolist()
        mine = self._pool.take(self._ids())
        if isinstance(other, NonTensorStack):
            theirs = other._pool.take(_expand_to(other._index_view, bs, "the other stack").reshape(-1).tolist())
        else:
            theirs = [other.data if isinstance(other, NonTensorData) else other] * len(mine)
        res = NonTensorStack.from_list(_nested_list([a if c else b for a, b, c in zip(mine, theirs, cond)], bs) if bs else [],
                                       batch_size=bs, device=self._device)
        if out is not None:
            out[...] = res
            return out
        return res

    @classmethod
    def lazy_stack(cls, items, dim: int = 0):
        return torch.stack(list(items), dim)

    @classmethod
    def fields(cls):
        """One dataclass field, ``data``."""
        return _DATA_FIELDS

    @classmethod
    def from_tensordict(cls, tensordict, non_tensordict=None, safe: bool = True):
        """Build from a TensorDict holding ``data`` as nested lists (or in ``non_tensordict``)."""
        value = non_tensordict["data"] if non_tensordict and "data" in non_tensordict else tensordict.get("data")
        if isinstance(value, NonTensorStack):
            return value
        return cls.from_list(value, batch_size=tensordict.batch_size, device=tensordict.device)

    def state_dict(self, destination=None, prefix="", keep_vars=False, flatten=False):
        """No tensors; the values (nested lists) in ``_metadata[""]["_non_tensor"]["data"]``."""
        from collections import OrderedDict

        sd = OrderedDict() if destination is None else destination
        sd._metadata = {"": {"batch_size": list(self.batch_size), "device": None if self._device is None else str(self._device), "_non_tensor": {"data": self.tolist()}}}
        return sd

    def load_state_dict(self, state_dict, strict=True, assign=False, from_flatten=False):
        """Set the values from a state dict made by :meth:`state_dict`."""
        meta = getattr(state_dict, "_metadata", {}).get("", {})
        if "_non_tensor" in meta and "data" in meta["_non_tensor"]:
            self.set("data", meta["_non_tensor"]["data"])
        elif strict:
            raise KeyError("load_state_dict: the state dict has no non-tensor 'data' (strict=True)")
        return self


NonTensorData._stack_type = NonTensorStack  # what maybe_to_stack() / expand() build
