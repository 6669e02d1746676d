"""Shape operations shared by every batched container (TensorDict, NonTensorStack, ...).

A batched container has a ``batch_size`` and holds leaves whose leading dims are those batch
dims. Every shape operation (indexing, reshape, permute, flip, ...) is expressed once here as
a function ``fn(x)`` over a tensor whose leading dims are the batch dims; each container
implements :meth:`Batched._apply_batch_fn` to run ``fn`` over its leaves (tensors directly,
string columns on their index tensor, constants on nothing). The new batch size is computed by
running ``fn`` on a zero-stride dummy, which also validates the operation (out-of-range
indices, bad shapes) before any leaf is touched.

Example:
    >>> from chatdata import TensorDict
    >>> td = TensorDict({"x": torch.arange(6).reshape(2, 3)}, batch_size=[2, 3])
    >>> td.permute(1, 0)["x"].shape
    torch.Size([3, 2])
"""
from __future__ import annotations

import operator
from typing import Callable, Sequence

import torch

__all__ = ["Batched", "normalize_index", "dummy", "BatchSizeError", "indexed_batch_size", "as_batch_size", "from_numpy_index"]


class BatchSizeError(ValueError, RuntimeError):
    """An entry's leading dims do not match the batch size (or a batch size is invalid)."""


class EmptyBatchIndexError(IndexError, RuntimeError):
    """A collection with an empty batch size was indexed (an ``IndexError``, and a
    ``RuntimeError`` as tensordict raises)."""


def dummy(batch_size: Sequence[int]) -> torch.Tensor:
    """A zero-stride tensor of shape ``batch_size`` used to compute result shapes cheaply."""
    return torch.zeros((), dtype=torch.uint8).expand(tuple(batch_size))


def as_batch_size(batch_size) -> torch.Size:
    """A user's ``batch_size`` (None, an int or a sequence of non-negative ints) as a Size.

    Example:
        >>> as_batch_size(3), as_batch_size([2, 0])
        (torch.Size([3]), torch.Size([2, 0]))
    """
    if batch_size is None:
        return torch.Size([])
    if type(batch_size) is torch.Size and all(s >= 0 for s in batch_size):
        return batch_size
    if isinstance(batch_size, int):
        batch_size = [batch_size]
    try:
        bs = torch.Size(batch_size)
    except TypeError:
        raise TypeError(f"batch_size must be a sequence of ints, got {batch_size!r}") from None
    if any(s < 0 for s in bs):
        raise BatchSizeError(f"batch_size {tuple(bs)} has negative dims")
    return bs


def _is_int(value) -> bool:
    """A Python or numpy/torch integer (not a bool, which would be a size of 0 or 1 by accident)."""
    if isinstance(value, bool) or (isinstance(value, torch.Tensor) and value.dtype == torch.bool):
        return False
    try:
        operator.index(value)
    except TypeError:
        return False
    return True


def _is_index_list(idx) -> bool:
    return isinstance(idx, (list, range)) or (
        isinstance(idx, torch.Tensor) and idx.dtype in (torch.long, torch.int, torch.bool, torch.int16, torch.uint8)
    )


def normalize_index(index, batch_ndim: int):
    """Turn a user index into one that only touches batch dims of a leaf with more dims.

    Ellipsis is expanded to explicit slices over the batch dims (a leaf may have feature dims
    after them), lists become long tensors, and too many indices raise ``IndexError``.

    Example:
        >>> normalize_index((Ellipsis, 0), 2)
        (slice(None, None, None), 0)
    """
    if not isinstance(index, tuple):
        index = (index,)
    if len(index) == 1 and batch_ndim and (type(index[0]) is int or type(index[0]) is slice):
        return index  # the hot path: one int or slice on the first batch dim
    items = []
    for it in index:
        if type(it).__module__ == "numpy":  # np.int64(3), np.array([0, 2]), a bool mask: as torch takes them
            it = from_numpy_index(it)
        if isinstance(it, (list, range)):
            try:
                it = torch.as_tensor(list(it)) if len(it) else torch.zeros(0, dtype=torch.long)
            except (TypeError, ValueError, RuntimeError, OverflowError):  # None, str, ragged lists, past int64
                raise IndexError(f"list indices must hold ints or bools (a 1-D list), got {it!r:.80}") from None
            if it.dtype not in (torch.bool, torch.long):
                raise IndexError(f"list indices must hold ints or bools, got {it.dtype}")
        elif isinstance(it, torch.Tensor) and it.dtype == torch.uint8:
            it = it.bool()  # a byte tensor is a mask to torch (td["a"][m] == td[m]["a"]), not integer indices
        elif isinstance(it, torch.Tensor) and it.dtype in (torch.int, torch.int16, torch.int8):
            it = it.long()
        elif isinstance(it, torch.Tensor) and it.dtype.is_floating_point:
            raise IndexError("tensors used as indices must be long or bool tensors")
        elif not (it is None or it is Ellipsis or isinstance(it, (int, slice, torch.Tensor))):
            raise IndexError(f"unsupported index {it!r} of type {type(it).__name__}")
        items.append(it)
    n_ell = sum(1 for it in items if it is Ellipsis)
    if n_ell > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")

    def consumed(it):
        if it is None or it is Ellipsis or isinstance(it, bool):  # ``True``/``False`` add a dim, as None
            return 0
        if isinstance(it, torch.Tensor) and it.dtype == torch.bool:
            return max(it.ndim, 1)
        return 1

    used = sum(consumed(it) for it in items)
    if used and not batch_ndim:
        raise EmptyBatchIndexError(
            "indexing a tensordict with td.batch_dims==0 is not permitted: it has no batch dims to index; "
            "index its entries instead (td['key'][...])"
        )
    if used > batch_ndim:
        raise IndexError(
            f"too many indices: {used} dims indexed but the batch has {batch_ndim} dims"
        )
    if n_ell:
        pos = next(i for i, it in enumerate(items) if it is Ellipsis)
        items[pos : pos + 1] = [slice(None)] * (batch_ndim - used)
    return tuple(items)


def from_numpy_index(it):
    """A numpy index (an integer or bool scalar, an int or bool array) as the int, bool or tensor
    torch takes; IndexError for any other dtype."""
    kind = getattr(getattr(it, "dtype", None), "kind", "")
    if kind not in ("b", "i", "u"):
        raise IndexError(f"numpy indices must hold ints or bools, got {type(it).__name__} of dtype {getattr(it, 'dtype', None)}")
    if getattr(it, "ndim", 0) == 0:
        return bool(it) if kind == "b" else int(it)
    t = torch.as_tensor(it)
    if t.dtype == torch.uint8:  # a uint8 array is a mask to torch, as a byte tensor
        return t.bool()
    return t if t.dtype in (torch.bool, torch.long) else t.long()


def _resolve_shape(shape, numel: int) -> tuple:
    """Replace a single -1 in ``shape`` using the batch's ``numel`` (so that leaves with
    zero-size feature dims reshape too); anything invalid is left for torch to report."""
    shape = tuple(shape)
    if shape.count(-1) == 1:
        known = 1
        for s in shape:
            if s != -1:
                known *= s
        if known and numel % known == 0:
            shape = tuple(numel // known if s == -1 else s for s in shape)
    return shape


def indexed_batch_size(batch_size: torch.Size, idx: tuple) -> torch.Size:
    """The batch size after indexing with the normalised ``idx`` (IndexError when out of range)."""
    if len(idx) == 1 and batch_size:
        it = idx[0]
        if type(it) is int:
            if not -batch_size[0] <= it < batch_size[0]:
                raise IndexError(f"index {it} is out of range for batch size {tuple(batch_size)}")
            return batch_size[1:]
        if type(it) is slice:
            return torch.Size([len(range(batch_size[0])[it])]) + batch_size[1:]
    return dummy(batch_size)[idx].shape


class Batched:
    """Mixin: shape operations for containers with a ``batch_size``.

    Subclasses implement ``batch_size`` and ``_apply_batch_fn(fn, batch_size)`` which returns
    a new container whose leaves are ``fn(leaf)`` and whose batch size is ``batch_size``.
    """

    batch_size: torch.Size

    def _apply_batch_fn(self, fn: Callable[[torch.Tensor], torch.Tensor], batch_size: torch.Size):
        raise NotImplementedError

    def _batch_op(self, fn: Callable[[torch.Tensor], torch.Tensor]):
        new_bs = fn(dummy(self.batch_size)).shape
        return self._apply_batch_fn(fn, torch.Size(new_bs))

    # torch functions (torch.stack, torch.cat, ...) on any container: the tensorclass room's face
    # installs the handler here (chatdata.td.tensorclass.torch_functions, which dispatches to
    # chatdata.td.core.functional), so this base module needs nothing above it
    _torch_function_handler = None

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return Batched._torch_function_handler(func, types, args, kwargs or {})

    # -- shape accessors -----------------------------------------------------------------
    @property
    def shape(self) -> torch.Size:
        return self.batch_size

    @property
    def batch_dims(self) -> int:
        return len(self.batch_size)

    ndim = batch_dims

    def dim(self) -> int:
        return len(self.batch_size)

    def ndimension(self) -> int:
        return len(self.batch_size)

    def numel(self) -> int:
        n = 1
        for s in self.batch_size:
            n *= s
        return n

    def __len__(self) -> int:
        return self.batch_size[0] if len(self.batch_size) else 0

    def _norm_dim(self, dim: int, extra: int = 0) -> int:
        nd = len(self.batch_size) + extra
        if not -nd <= dim < max(nd, 1) or (nd == 0 and dim not in (0, -1)):
            raise IndexError(f"dim {dim} is out of range for a batch of {len(self.batch_size)} dims")
        return dim % nd if nd else 0

    # -- indexing ------------------------------------------------------------------------
    def _index(self, index):
        idx = normalize_index(index, len(self.batch_size))
        return self._batch_op(lambda x: x[idx])

    # -- shape operations ----------------------------------------------------------------
    def reshape(self, *shape):
        """Reshape the batch dims (leaves keep their feature dims).

        Example: ``td.reshape(-1)`` flattens the batch.
        """
        if len(shape) == 1 and isinstance(shape[0], (list, tuple, torch.Size)):
            shape = tuple(shape[0])
        nb = len(self.batch_size)
        shape = _resolve_shape(shape, self.numel())  # -1 is about the batch, not a leaf's numel
        return self._batch_op(lambda x: x.reshape(*shape, *x.shape[nb:]))

    def view(self, *shape):
        """Same as :meth:`reshape` for the batch dims (a view where the leaves allow it)."""
        return self.reshape(*shape)

    def contiguous(self, canonical: bool = False):
        """A copy whose tensors are contiguous (non-tensor columns are kept as they are)."""
        return self.apply(lambda t: t.contiguous()) if hasattr(self, "apply") else self

    def permute(self, *dims):
        """Permute the batch dims. Example: ``td.permute(1, 0)``."""
        if len(dims) == 1 and isinstance(dims[0], (list, tuple, torch.Size)):
            dims = tuple(dims[0])
        nb = len(self.batch_size)
        if any(not -nb <= d < nb for d in dims) or sorted(d % nb if nb else d for d in dims) != list(range(nb)):
            raise ValueError(f"permute needs a permutation of the {nb} batch dims, got {dims}")
        dims = tuple(d % nb for d in dims)
        return self._batch_op(lambda x: x.permute(*dims, *range(nb, x.ndim)))

    def transpose(self, dim0: int, dim1: int):
        """Swap two batch dims."""
        d0, d1 = self._norm_dim(dim0), self._norm_dim(dim1)
        return self._batch_op(lambda x: x.transpose(d0, d1))

    def flip(self, dims):
        """Reverse the order along the given batch dims."""
        if isinstance(dims, int):
            dims = (dims,)
        dims = tuple(self._norm_dim(d) for d in dims)
        return self._batch_op(lambda x: x.flip(dims))

    def unsqueeze(self, dim: int):
        """Insert a batch dim of size one."""
        d = self._norm_dim(dim, extra=1)
        return self._batch_op(lambda x: x.unsqueeze(d))

    def squeeze(self, dim: int | None = None):
        """Remove batch dims of size one (all of them, or ``dim``)."""
        if dim is None:
            keep = [i for i, s in enumerate(self.batch_size) if s != 1]
            shape = [self.batch_size[i] for i in keep]
            nb = len(self.batch_size)
            return self._batch_op(lambda x: x.reshape(*shape, *x.shape[nb:]))
        d = self._norm_dim(dim)
        if self.batch_size[d] != 1:
            return self
        return self._batch_op(lambda x: x.squeeze(d))

    def flatten(self, start_dim: int = 0, end_dim: int = -1):
        """Merge batch dims ``start_dim..end_dim`` into one."""
        nb = len(self.batch_size)
        if nb == 0:
            return self._batch_op(lambda x: x.unsqueeze(0))
        s, e = self._norm_dim(start_dim), self._norm_dim(end_dim)
        return self._batch_op(lambda x: x.flatten(s, e))

    def unflatten(self, dim: int, sizes):
        """Split batch dim ``dim`` into ``sizes``."""
        d = self._norm_dim(dim)
        return self._batch_op(lambda x: x.unflatten(d, tuple(sizes)))

    def expand(self, *shape):
        """Expand the batch to ``shape`` without copying (leading new dims allowed).

        Example: ``TensorDict({"a": torch.zeros(3)}, []).expand(1_000_000)`` uses no new memory.
        """
        if len(shape) == 1 and isinstance(shape[0], (list, tuple, torch.Size)):
            shape = tuple(shape[0])
        nb = len(self.batch_size)
        if len(shape) < nb:
            raise ValueError(f"cannot expand a batch of {nb} dims to {len(shape)} dims")
        return self._batch_op(lambda x: x.expand(*shape, *x.shape[nb:]))

    def repeat(self, *repeats):
        """Repeat along batch dims (copies)."""
        if len(repeats) == 1 and isinstance(repeats[0], (list, tuple, torch.Size)):
            repeats = tuple(repeats[0])
        return self._batch_op(lambda x: x.repeat(*repeats, *([1] * (x.ndim - len(repeats)))))

    def repeat_interleave(self, repeats, dim: int = 0, *, output_size=None):
        """Repeat every element ``repeats`` times along batch dim ``dim`` (copies)."""
        d = self._norm_dim(dim)
        return self._batch_op(lambda x: x.repeat_interleave(repeats, dim=d))

    def unbind(self, dim: int = 0):
        """Split into a tuple of items along ``dim`` (views where the leaves allow it)."""
        d = self._norm_dim(dim)
        return tuple(self._index((slice(None),) * d + (i,)) for i in range(self.batch_size[d]))

    def split(self, split_size, dim: int = 0):
        """Split along ``dim`` into chunks of ``split_size`` (an int or a list of sizes)."""
        d = self._norm_dim(dim)
        n = self.batch_size[d]
        if _is_int(split_size):
            split_size = operator.index(split_size)
            if split_size <= 0:
                raise ValueError(f"split_size must be a positive int, got {split_size}")
            sizes = [min(split_size, n - s) for s in range(0, n, split_size)]
        else:
            sizes = list(split_size) if isinstance(split_size, (list, tuple, torch.Size, range)) else None
            if sizes is None or not all(_is_int(s) for s in sizes):
                raise TypeError(f"split_size must be an int or a list of ints, got {split_size!r}")
            sizes = [operator.index(s) for s in sizes]
            if any(s < 0 for s in sizes):
                raise ValueError(f"split sizes must be non-negative ints, got {sizes}")
            if sum(sizes) != n:
                raise ValueError(f"split sizes {sizes} do not sum to the dim size {n}")
        out, start = [], 0
        for s in sizes:
            out.append(self._index((slice(None),) * d + (slice(start, start + s),)))
            start += s
        return tuple(out)

    def chunk(self, chunks: int, dim: int = 0):
        """Split into ``chunks`` pieces along ``dim`` (like ``torch.chunk``)."""
        if not _is_int(chunks):
            raise TypeError(f"chunks must be a positive int, got {type(chunks).__name__} {chunks!r}")
        if chunks <= 0:
            raise ValueError(f"chunks must be a positive int, got {chunks!r}")
        d = self._norm_dim(dim)
        n = self.batch_size[d]
        size = -(-n // chunks) if n else 1
        return self.split(size, d)
