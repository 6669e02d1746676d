"""Ragged stacks: items of different lengths, held as columns.

A :class:`RaggedTensorDict` stacks ``n`` items whose first dim differs (conversations with
different numbers of messages). It keeps one flat collection of all items' elements
(``values``, batch ``(total, *inner)``) and int64 ``offsets`` of length ``n + 1``: item ``i``
is ``values[offsets[i]:offsets[i+1]]``. Its batch size shows ``-1`` for the ragged dim, as
tensordict's lazy stacks do. Selecting items is vectorised (one gather of flat positions),
never a Python loop over elements.

``values`` may be any batched collection: a TensorDict, or a NonTensorStack (what ``get``
returns for a string entry, whose ``tolist()`` gives nested lists).

Example:
    >>> a = TensorDict({"x": torch.zeros(2)}, [2]); b = TensorDict({"x": torch.ones(3)}, [3])
    >>> r = RaggedTensorDict.from_items([a, b])
    >>> r.batch_size, r[1]["x"].tolist()
    (torch.Size([2, -1]), [1.0, 1.0, 1.0])
"""
from __future__ import annotations

import torch

from ..nontensor import Batched, BatchSizeError, NonTensorData, NonTensorStack, from_numpy_index, is_non_tensor
from .convert import is_integer_dtype
from .repr import indent

__all__ = ["RaggedTensorDict", "ragged_positions", "ragged_slice_positions"]


def ragged_positions(offsets: torch.Tensor, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Flat positions of the elements of ``rows`` and the new offsets, in one vectorised pass.

    Example:
        >>> pos, off = ragged_positions(torch.tensor([0, 2, 5]), torch.tensor([1, 0]))
        >>> pos.tolist(), off.tolist()
        ([2, 3, 4, 0, 1], [0, 3, 5])
    """
    starts = offsets[rows]
    lengths = offsets[rows + 1] - starts
    new_off = torch.zeros(rows.numel() + 1, dtype=torch.int64)
    torch.cumsum(lengths, 0, out=new_off[1:])
    total = int(new_off[-1])
    pos = torch.arange(total, dtype=torch.int64) + torch.repeat_interleave(starts - new_off[:-1], lengths, output_size=total)
    return pos, new_off


def ragged_slice_positions(offsets: torch.Tensor, sl: slice) -> tuple[torch.Tensor, torch.Tensor]:
    """Flat positions of ``item[sl]`` for every item, and the new offsets: the slice is applied to
    each item as Python slices a list (negative bounds count from each item's end, bounds past an
    end are clipped), in one vectorised pass. The step must be positive, as torch's.

    Example:
        >>> pos, off = ragged_slice_positions(torch.tensor([0, 3, 4, 6]), slice(-2, None))
        >>> pos.tolist(), off.tolist()
        ([1, 2, 3, 4, 5], [0, 2, 3, 5])
    """
    for name in ("start", "stop", "step"):
        v = getattr(sl, name)
        if v is not None and (type(v) is bool or not hasattr(v, "__index__")):
            raise IndexError(f"a slice along the ragged dim takes int bounds, got {name}={v!r:.40}")
    step = 1 if sl.step is None else sl.step.__index__()
    if step <= 0:
        raise ValueError(f"a slice along the ragged dim needs a positive step (as torch), got {step}")
    lengths = offsets[1:] - offsets[:-1]

    def bound(v, default):
        if v is None:
            return default
        v = max(-2**62, min(v.__index__(), 2**62))  # past any length either way: no int64 overflow
        return (v + lengths).clamp(min=0) if v < 0 else lengths.clamp(max=v)

    start = bound(sl.start, torch.zeros_like(lengths))
    stop = bound(sl.stop, lengths)
    counts = ((stop - start).clamp(min=0) + step - 1) // step
    new_off = torch.zeros(lengths.numel() + 1, dtype=torch.int64)
    torch.cumsum(counts, 0, out=new_off[1:])
    total = int(new_off[-1])
    rows = torch.repeat_interleave(torch.arange(lengths.numel()), counts, output_size=total)
    k = torch.arange(total, dtype=torch.int64) - new_off[rows]
    return offsets[rows] + start[rows] + k * step, new_off


def _list_index(index: list) -> torch.Tensor:
    """A list index as a tensor: ints as int64; bools only as a mask; ints mixed with bools as ints
    (as torch reads them). Floats (which an int64 cast would truncate: ``[0.5]`` is not item 0),
    None, str, ... are an IndexError.

    Example:
        >>> _list_index([2, 0]).tolist(), _list_index([True, False]).dtype, _list_index([True, 0]).tolist()
        ([2, 0], torch.bool, [1, 0])
    """
    if set(map(type, index)) <= {int}:  # one C-level pass; the common case
        try:
            return torch.as_tensor(index, dtype=torch.long)
        except (ValueError, OverflowError, RuntimeError):  # past int64
            raise IndexError(f"an index of {index!r:.80} is out of range") from None
    try:
        out = torch.as_tensor(index)
    except (TypeError, ValueError, RuntimeError, OverflowError):
        out = None
    if out is None or not (out.dtype is torch.bool or is_integer_dtype(out.dtype)):
        raise IndexError(f"a ragged stack selects items by ints, slices, or a 1-D list/tensor of ints or bools; "
                         f"got {index!r:.80}")
    return out


class RaggedTensorDict(Batched):
    """A stack of items whose first dim differs; see the module docstring."""

    def __init__(self, values, offsets: torch.Tensor):
        t = offsets if isinstance(offsets, torch.Tensor) else torch.as_tensor(offsets)
        if t.ndim != 1 or t.numel() < 1:
            raise ValueError("offsets must be a 1-D int64 tensor starting at 0")
        if not is_integer_dtype(t.dtype):
            raise TypeError(f"offsets must be integers, got dtype {t.dtype}")
        offsets = t.to(torch.int64)
        if int(offsets[0]) != 0:
            raise ValueError("offsets must be a 1-D int64 tensor starting at 0")
        size = getattr(values, "batch_size", None)
        if not size:
            raise ValueError("values must be batched along their first dim (the items' elements, one after the "
                             f"other), got batch size {None if size is None else list(size)}")
        if int(offsets[-1]) != size[0]:
            raise BatchSizeError(f"offsets end at {int(offsets[-1])} but values hold {size[0]} elements")
        self._check_order(offsets)
        self._values = values
        self._offsets = offsets
        self._is_locked = False

    def _check_order(self, offsets: torch.Tensor) -> None:
        """Offsets never decrease (one vectorised pass; two offsets, first 0 and last the size, are fine)."""
        if offsets.numel() > 2:
            a = offsets.cpu().numpy()
            bad = a[1:] < a[:-1]
            if bad.any():
                i = int(bad.argmax()) + 1
                raise ValueError(f"offsets must not decrease: offset {i} is {int(a[i])}, after {int(a[i - 1])}")

    @classmethod
    def _derived(cls, values, offsets: torch.Tensor) -> "RaggedTensorDict":
        """A stack over offsets made from an existing stack's (already checked): no checks."""
        obj = RaggedTensorDict.__new__(RaggedTensorDict)
        obj._values, obj._offsets, obj._is_locked = values, offsets, False
        return obj

    @classmethod
    def from_items(cls, items) -> "RaggedTensorDict":
        """Stack ``items`` (same inner dims, any first dim) into a ragged stack."""

        lengths = torch.tensor([i.batch_size[0] for i in items], dtype=torch.int64)
        offsets = torch.zeros(len(items) + 1, dtype=torch.int64)
        torch.cumsum(lengths, 0, out=offsets[1:])
        return cls(torch.cat(items, 0), offsets)  # functional.cat, through torch function dispatch

    # -- shape -------------------------------------------------------------------------------
    @property
    def values(self):
        return self._values

    @property
    def offsets(self) -> torch.Tensor:
        return self._offsets

    @property
    def lengths(self) -> torch.Tensor:
        """Length of every item."""
        return self._offsets[1:] - self._offsets[:-1]

    @property
    def batch_size(self) -> torch.Size:
        return torch.Size([self._offsets.numel() - 1, -1, *self._values.batch_size[1:]])

    @property
    def device(self):
        return self._values.device

    @property
    def is_locked(self) -> bool:
        return self._is_locked

    def numel(self) -> int:
        return int(self._offsets[-1])

    def __len__(self) -> int:
        return self._offsets.numel() - 1

    @property
    def _is_non_tensor(self) -> bool:
        return is_non_tensor(self._values)

    # -- indexing ----------------------------------------------------------------------------
    def _row(self, i: int):
        n = len(self)
        if not -n <= i < n:
            raise IndexError(f"index {i} is out of range for a ragged stack of {n} items")
        i %= n
        off = self._offsets_view()
        return self._values._index(slice(off[i], off[i + 1]))

    def __getstate__(self):
        state = self.__dict__.copy()
        state.pop("_off_mv", None)  # a cache of the offsets, rebuilt on demand
        return state

    def _offsets_view(self):
        # Python ints from the offsets without a tensor op per read (offsets never change)
        view = self.__dict__.get("_off_mv")
        if view is None:
            view = self._off_mv = memoryview(self._offsets.contiguous().numpy())
        return view

    def _rows(self, sel) -> "RaggedTensorDict":
        n = len(self)
        if isinstance(sel, slice) and sel.step in (None, 1):
            a, b, _ = sel.indices(n)
            b = max(a, b)
            lo, hi = int(self._offsets[a]), int(self._offsets[b])
            return RaggedTensorDict._derived(self._values._index(slice(lo, hi)), self._offsets[a : b + 1] - lo)
        rows = torch.arange(n)[sel]
        if rows.ndim != 1:
            raise IndexError("a ragged stack takes 1-D selections of items")
        pos, off = ragged_positions(self._offsets, rows)
        return RaggedTensorDict._derived(self._values._index(pos), off)

    def _index(self, index):
        if not isinstance(index, tuple):
            index = (index,)
        if any(i is Ellipsis for i in index):
            pos = index.index(Ellipsis)
            fill = len(self.batch_size) - (len(index) - 1)
            index = index[:pos] + (slice(None),) * max(fill, 0) + index[pos + 1 :]
        if not index:
            return self
        first, rest = index[0], index[1:]
        if type(first).__module__ == "numpy":  # np.int64(1) is no int: it would be taken for a selection
            first = from_numpy_index(first)
        if type(first) is bool or (isinstance(first, torch.Tensor) and first.dtype is torch.bool and first.ndim == 0):
            # torch reads True / False as a new dim of size 1 / 0 (as None); a ragged stack cannot add
            # one, and taking them as the ints 1 / 0 would return the wrong item
            raise IndexError(f"a ragged stack takes 1-D selections of items; {first!r} as an index would add a dim "
                             "(use a list or tensor of bools, one per item, to select items)")
        if isinstance(first, int):
            row = self._row(first)
            return row._index(rest) if rest else row
        if isinstance(first, list):
            first = _list_index(first)
        sub = self._rows(first)
        if not rest:
            return sub
        j = rest[0]
        if type(j) is bool:
            raise IndexError(f"a ragged stack takes an int or a slice along the ragged dim, got {j!r} (a bool would add a dim)")
        if isinstance(j, int):
            lengths = sub.lengths
            if (j >= 0 and bool((lengths <= j).any())) or (j < 0 and bool((lengths < -j).any())):
                raise IndexError(f"index {j} along the ragged dim is out of range for some items")
            flat = sub._offsets[:-1] + j if j >= 0 else sub._offsets[1:] + j
            out = sub._values._index(flat)
            return out._index((slice(None),) + rest[1:]) if rest[1:] else out
        if isinstance(j, slice) and j == slice(None):
            if rest[1:]:
                return RaggedTensorDict._derived(sub._values._index((slice(None),) + rest[1:]), sub._offsets)
            return sub
        if isinstance(j, slice):  # the same slice of every item: a new stack of the selected elements
            pos, off = ragged_slice_positions(sub._offsets, j)
            values = sub._values._index(pos)
            if rest[1:]:
                values = values._index((slice(None),) + rest[1:])
            return RaggedTensorDict._derived(values, off)
        raise IndexError(
            "a ragged stack is indexed by item first (int, slice, list or tensor), then an int "
            f"or a slice along the ragged dim; got {index!r}"
        )

    def __getitem__(self, index):
        if isinstance(index, str) or (isinstance(index, tuple) and index and all(isinstance(i, str) for i in index)):
            return self.get(index)
        return self._index(index)

    def __iter__(self):
        for i in range(len(self)):
            yield self._row(i)

    def unbind(self, dim: int = 0):
        """The items (only along the stack dim)."""
        if dim != 0:
            raise ValueError("a ragged stack can only be unbound along dim 0 (its items)")
        return tuple(self)

    def _batch_op(self, fn):
        raise RuntimeError(
            "this shape operation is not defined on a ragged stack (batch size "
            f"{tuple(self.batch_size)}); index items first, or pad them into a dense collection"
        )

    # -- entries --------------------------------------------------------------------------
    def get(self, key, default=...):
        """One entry of every item. A tensor entry is a dense ``(n, length, ...)`` view of the
        values when every item has the same length (as a lazy stack of equal shapes gives in
        tensordict), else a nested jagged tensor; strings and other values give a ragged stack
        (``.tolist()`` gives nested lists).

        Example:
            >>> r = RaggedTensorDict(TensorDict({"x": torch.arange(4)}, [4]), torch.tensor([0, 2, 4]))
            >>> r.get("x").tolist()
            [[0, 1], [2, 3]]
            >>> RaggedTensorDict(TensorDict({"x": torch.arange(3)}, [3]), torch.tensor([0, 1, 3])).get("x").is_nested
            True
        """
        try:
            leaf = self._values._get_raw(key)
        except KeyError:
            if default is not ...:
                return default
            raise
        if isinstance(leaf, torch.Tensor):
            return self._stack_leaf(leaf)
        return RaggedTensorDict._derived(leaf, self._offsets)

    def _stack_leaf(self, leaf: torch.Tensor) -> torch.Tensor:
        """``leaf``'s items as a dense view when they share one length, else a nested tensor."""
        n = self._offsets.numel() - 1
        if n > 0:
            lengths = self._offsets[1:] - self._offsets[:-1]
            first = int(lengths[0])
            if first > 0 and bool((lengths == first).all()):
                return leaf.view(n, first, *leaf.shape[1:])
        return torch.nested.nested_tensor_from_jagged(leaf, self._offsets)

    def _get_raw(self, key):
        leaf = self._values._get_raw(key)
        if isinstance(leaf, torch.Tensor):  # a tensor leaf cannot be a RaggedTensorDict's values
            return torch.nested.nested_tensor_from_jagged(leaf, self._offsets)
        return RaggedTensorDict._derived(leaf, self._offsets)

    def set(self, key, value, inplace: bool = False, **kwargs) -> "RaggedTensorDict":
        """Set an entry from a ragged stack with the same offsets, or nested lists."""
        if isinstance(value, RaggedTensorDict):
            if not torch.equal(value._offsets, self._offsets):
                raise BatchSizeError(f"cannot set {key!r}: its item lengths differ from the stack's")
            flat = value._values
        elif isinstance(value, list):
            if len(value) != len(self) or [len(v) for v in value] != self.lengths.tolist():
                raise BatchSizeError(f"cannot set {key!r}: nested list lengths do not match the item lengths")
            flat = [x for v in value for x in v]
        else:
            flat = value
        self._values.set(key, flat, inplace=inplace)
        return self

    def keys(self, include_nested: bool = False, leaves_only: bool = False, **kwargs):
        return self._values.keys(include_nested, leaves_only, **kwargs)

    def __contains__(self, key) -> bool:
        # an entry name, as for a TensorDict (``"input_ids" in out``), not a row
        return key in self._values.keys(include_nested=True)

    def _iter_keys(self, *args, **kwargs):
        return self._values._iter_keys(*args, **kwargs)

    def items(self, include_nested: bool = False, leaves_only: bool = False):
        for k in self.keys(include_nested, leaves_only):
            yield k, self.get(k)

    def tolist(self):
        """Nested lists: one list per item."""
        if is_non_tensor(self._values):
            flat = self._values.tolist() if isinstance(self._values, NonTensorStack) else [self._values.data] * self.numel()
            off = self._offsets.tolist()
            return [flat[a:b] for a, b in zip(off[:-1], off[1:])]
        # rows as lists, but TensorDict and tensorclass rows as they are (TensorDict.tolist() gives dicts)
        return [row.tolist() if hasattr(row, "tolist") and not (hasattr(row, "_tensordict") or hasattr(row, "_storage"))
                else row for row in self]

    def to_dict(self, retain_none: bool = True) -> dict:
        """Plain dicts, one entry per key as :meth:`get` gives it: a tensor entry as a dense
        ``(n, length, ...)`` tensor when every item has the same length, else a nested jagged
        tensor; strings and other values as nested lists (one list per item); a nested
        collection as a dict of its own.

        Example:
            >>> r = RaggedTensorDict(TensorDict({"x": torch.arange(3), "s": NonTensorStack("a", "b", "c")}, [3]),
            ...                      torch.tensor([0, 1, 3]))
            >>> d = r.to_dict()
            >>> d["x"].is_nested, [t.tolist() for t in d["x"].unbind()], d["s"]
            (True, [[0], [1, 2]], [['a'], ['b', 'c']])
        """
        out = {}
        for k in self.keys():
            v = self.get(k)
            if isinstance(v, RaggedTensorDict):
                v = v.tolist() if is_non_tensor(v._values) else v.to_dict(retain_none)
            out[k] = v
        return out

    # -- whole-collection operations -----------------------------------------------------
    def clone(self, recurse: bool = True) -> "RaggedTensorDict":
        return RaggedTensorDict._derived(self._values.clone(recurse), self._offsets.clone())

    def to(self, *args, **kwargs) -> "RaggedTensorDict":
        return RaggedTensorDict._derived(self._values.to(*args, **kwargs), self._offsets)

    def apply(self, fn, *others, inplace: bool = False, **kwargs):
        other_vals = [o._values for o in others]
        out = self._values.apply(fn, *other_vals, inplace=inplace)
        return self if inplace else RaggedTensorDict(out, self._offsets)

    def _compare(self, other, op):
        if isinstance(other, RaggedTensorDict):
            if not torch.equal(other._offsets, self._offsets):
                raise BatchSizeError("cannot compare ragged stacks whose item lengths differ")
            other = other._values
        vals = self._values._compare(other, op) if hasattr(self._values, "_compare") else op(self._values, other)
        return RaggedTensorDict._derived(vals, self._offsets)

    def __eq__(self, other):
        return self._compare(other, lambda a, b: a == b)

    def __ne__(self, other):
        return self._compare(other, lambda a, b: a != b)

    __hash__ = None

    def all(self, dim=None):
        v = self._values
        return bool(v.all()) if not isinstance(v, torch.Tensor) else bool(v.all())

    def any(self, dim=None):
        return bool(self._values.any())

    def lock_(self):
        self._is_locked = True
        if hasattr(self._values, "lock_"):
            self._values.lock_()
        return self

    def unlock_(self):
        self._is_locked = False
        if hasattr(self._values, "unlock_"):
            self._values.unlock_()
        return self

    def is_shared(self) -> bool:
        return self._values.is_shared() if hasattr(self._values, "is_shared") else False

    @classmethod
    def cat(cls, items, dim: int = 0) -> "RaggedTensorDict":
        """Concatenate ragged stacks along their item dim."""

        if dim != 0:
            raise ValueError("ragged stacks concatenate along dim 0 only")
        vals = torch.cat([i._values for i in items], 0)
        parts, shift = [torch.zeros(1, dtype=torch.int64)], 0
        for i in items:
            parts.append(i._offsets[1:] + shift)
            shift += int(i._offsets[-1])
        return cls(vals, torch.cat(parts))

    def field_repr(self, v) -> str:
        """How a column ``v`` of the values prints in this stack: its type and the ragged shape
        (``-1`` for the ragged dim), as tensordict prints a field.

        Example:
            >>> from chatdata.td import TensorDict
            >>> r = RaggedTensorDict.from_items([TensorDict({"a": torch.zeros(2)}, [2])])
            >>> r.field_repr(r._values["a"])
            'Tensor(shape=torch.Size([1, -1]), device=cpu, dtype=torch.float32, is_shared=False)'
        """
        shape = torch.Size([len(self), -1, *(v.shape if isinstance(v, torch.Tensor) else v.batch_size)[1:]])
        if isinstance(v, torch.Tensor):
            return f"Tensor(shape={shape}, device={v.device}, dtype={v.dtype}, is_shared={v.is_shared()})"
        if isinstance(v, (NonTensorStack, NonTensorData)):
            return f"NonTensorStack(batch_size={shape}, device={v.device})"
        return f"{type(v).__name__}(batch_size={shape})"

    def __repr__(self) -> str:
        values = self._values
        if not isinstance(getattr(values, "_tensordict", None), dict):  # a leaf column (strings, a constant)
            return f"RaggedTensorDict(\n    {self.tolist()!r},\n    batch_size={self.batch_size})"
        lines = [f"{k}: {self.field_repr(v)}" for k, v in values._tensordict.items()]
        body = "fields={\n" + indent(",\n".join(lines)) + "}"
        body += f",\nbatch_size={self.batch_size},\ndevice={self.device},\nis_shared={self.is_shared()}"
        return f"RaggedTensorDict(\n{indent(body)})"
