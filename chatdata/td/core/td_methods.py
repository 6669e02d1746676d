"""The TensorDict methods RL code calls most, beyond the core ones: lock methods that work as
context managers, ``setdefault``, ``to_tensordict``, ``set_non_tensor``, dtype casts,
``new_*`` constructors, element-wise arithmetic and comparisons with tensors, numbers and
other TensorDicts, and ``repeat_interleave`` (``where``: :mod:`.where`).

Example:
    >>> td = TensorDict({"a": torch.ones(2)}, [2]).lock_()
    >>> with td.unlock_():
    ...     td["b"] = torch.zeros(2)
    >>> td.is_locked, (td + 1)["a"].tolist()
    (True, [2.0, 2.0])
"""
from __future__ import annotations

import numbers
import operator

import torch

from .convert import is_collection
from .keys import check_same_keys
from ..nontensor import NonTensorData, NonTensorStack, Pool, is_non_tensor

__all__ = ["ExtraMethods"]


def _binary(op, reverse: bool = False):
    def method(self, other):
        if isinstance(other, (dict,)) or is_collection(other):
            other_td = other if not isinstance(other, dict) else type(self)(other, batch_size=self.batch_size)
            check_same_keys(self, other_td, f"{op.__name__}")

            def fn(a, b):
                return op(b, a) if reverse else op(a, b)

            return self.apply(fn, other_td)
        return self.apply(lambda a: op(other, a) if reverse else op(a, other))

    return method


def _inplace(op):
    def method(self, other):
        if is_collection(other):
            check_same_keys(self, other, "in-place operation", subset=True)  # before anything is written
            self.apply(lambda a, b: op(a, b), other, inplace=True)
        else:
            self.apply(lambda a: op(a, other), inplace=True)
        return self

    return method


def _factory(name: str, dtype, device, requires_grad: bool):
    """``Tensor.<name>`` (new_zeros, new_ones, new_empty, new_full) for a leaf, with the dtype,
    device and requires_grad given to the TensorDict method (the leaf's own when None)."""
    def make(t, shape, *fill):
        return getattr(t, name)(shape, *fill, dtype=t.dtype if dtype is None else dtype,
                                device=t.device if device is None else device, requires_grad=requires_grad)
    return make


class ExtraMethods:
    """Mixin of TensorDict; see the module docstring."""

    # -- entries ---------------------------------------------------------------------------
    def setdefault(self, key, default, inplace: bool = False):
        """The entry at ``key``; set to ``default`` first when missing."""
        try:
            return self._get_raw(key)
        except KeyError:
            self.set(key, default, inplace=inplace)
            return self._get_raw(key)

    def set_non_tensor(self, key, value):
        """Store ``value`` as non-tensor data (never converted to a tensor); returns self."""
        self.set(key, value if is_non_tensor(value) else NonTensorData(value, batch_size=self.batch_size, device=self.device))
        return self

    def is_non_tensor(self, key) -> bool:
        """Whether the entry at ``key`` is a NonTensorData / NonTensorStack."""
        return is_non_tensor(self._get_raw(key))

    def to_tensordict(self, *, retain_none: bool | None = None):
        """A plain TensorDict copy (its tensors cloned)."""
        return self.clone()

    def _get_str(self, key, default=...):
        """The raw entry at a one-level key (tensordict's internal accessor; ``default`` when missing)."""
        if default is ...:
            return self._get_raw(key)
        return self._tensordict.get(key, default) if isinstance(key, str) else self.get(key, default)

    def get_at(self, key, index, default=...):
        """The entry at ``key`` indexed by ``index``."""
        try:
            val = self._get_raw(key)
        except KeyError:
            if default is not ...:
                return default
            raise
        return val[index]

    def set_at_(self, key, value, index):
        """Write ``value`` into ``self[key][index]`` in place; returns self."""
        self._get_raw(key)[index] = value
        return self

    def apply_(self, fn, *others, **kwargs):
        """``apply`` in place."""
        return self.apply(fn, *others, inplace=True, **kwargs)

    # -- locks as context managers ---------------------------------------------------------
    def lock_(self):
        """Refuse new, renamed or deleted keys (in-place writes stay allowed); returns self.
        ``with td.lock_():`` restores the previous lock state on exit."""
        prev = self._is_locked
        super().lock_()
        self.__dict__["_last_lock"] = prev
        return self

    def unlock_(self):
        """Allow new keys again; ``with td.unlock_():`` re-locks on exit if it was locked."""
        prev = self._is_locked
        super().unlock_()
        self.__dict__["_last_lock"] = prev
        return self

    def __enter__(self):
        self.__dict__.setdefault("_lock_stack", []).append(self.__dict__.pop("_last_lock", None))
        return self

    def __exit__(self, *exc):
        stack = self.__dict__.get("_lock_stack")
        prev = stack.pop() if stack else None
        if prev is True and not self._is_locked:
            super().lock_()
        elif prev is False and self._is_locked:
            super().unlock_()
        return False

    # -- dtypes and new tensors ------------------------------------------------------------
    def float(self):
        return self.to(torch.float32)

    def double(self):
        return self.to(torch.float64)

    def half(self):
        return self.to(torch.float16)

    def bfloat16(self):
        return self.to(torch.bfloat16)

    def int(self):
        return self.to(torch.int32)

    def long(self):
        return self.to(torch.int64)

    def bool(self):
        return self.to(torch.bool)

    def to_lazystack(self, dim: int = 0):
        """tensordict's lazy stack of ``self`` along ``dim``: chatdata's stacks are dense
        columns already, so this is ``self`` (writes reach it, as they reach tensordict's
        stack of views). ``dim`` must be a batch dim.

        Example:
            >>> td = TensorDict({"a": torch.zeros(2)}, [2])
            >>> td.to_lazystack() is td
            True
        """
        if not self.batch_size:
            raise RuntimeError("to_lazystack needs a batch dim to stack along; this TensorDict has none")
        self._norm_dim(dim)  # an IndexError for a dim outside the batch
        return self

    def contiguous(self, canonical: bool = False):
        """Self when every tensor is contiguous, else a copy whose tensors are (non-tensor
        entries are kept). ``canonical`` is accepted for tensordict code: chatdata's stacks
        are already dense columns.

        Example:
            >>> td = TensorDict({"a": torch.zeros(3, 2).t()}, [2])
            >>> td.contiguous()["a"].is_contiguous(), td.contiguous() is td, TensorDict({"b": torch.ones(2)}, [2]).contiguous()["b"].is_contiguous()
            (True, False, True)
        """
        leaves = self.values(include_nested=True, leaves_only=True)
        if all(not isinstance(v, torch.Tensor) or v.is_contiguous() for v in leaves):
            return self
        return self.apply(lambda t: t.contiguous())

    def detach(self):
        """A TensorDict of detached tensors."""
        return self.apply(lambda t: t.detach())

    def detach_(self):
        return self.apply(lambda t: t.detach_(), inplace=True)

    def requires_grad_(self, requires_grad: bool = True):
        return self.apply(lambda t: t.requires_grad_(requires_grad) if t.is_floating_point() else t, inplace=True)

    def _new_like(self, size, factory):
        size = tuple(size[0]) if len(size) == 1 and isinstance(size[0], (list, tuple, torch.Size)) else tuple(size)
        nb = len(self.batch_size)
        out = self._new_unsafe({}, torch.Size(size), self._device)
        for k, v in self._tensordict.items():
            shape = size + tuple((v.shape if isinstance(v, torch.Tensor) else v.batch_size)[nb:])
            if isinstance(v, torch.Tensor):
                out._tensordict[k] = factory(v, shape)
            elif isinstance(v, NonTensorStack):  # values unknown yet: None everywhere
                out._tensordict[k] = NonTensorStack._from_parts(torch.zeros(shape, dtype=torch.long), Pool.from_values([None]), v.device)
            elif isinstance(v, NonTensorData):
                out._tensordict[k] = NonTensorData(v.data, batch_size=shape, device=v.device)
            elif hasattr(v, "_new_like"):
                out._tensordict[k] = v._new_like((shape,), factory)
            elif hasattr(v, "_storage") and hasattr(v._storage, "_new_like"):
                out._tensordict[k] = v._from_storage(v._storage._new_like((shape,), factory))
            else:
                raise TypeError(f"new_*: cannot build a new entry {k!r} like a {type(v).__name__}")
        return out

    def new_zeros(self, *size, dtype=None, device=None, requires_grad: bool = False, **kwargs):
        """Zeros with the batch size ``size`` (leaves keep their feature dims, and their dtypes
        and devices unless ``dtype`` / ``device`` are given, as ``Tensor.new_zeros``)."""
        return self._new_like(size, _factory("new_zeros", dtype, device, requires_grad))

    def new_ones(self, *size, dtype=None, device=None, requires_grad: bool = False, **kwargs):
        return self._new_like(size, _factory("new_ones", dtype, device, requires_grad))

    def new_empty(self, *size, dtype=None, device=None, requires_grad: bool = False, **kwargs):
        return self._new_like(size, _factory("new_empty", dtype, device, requires_grad))

    def new_full(self, size, fill_value, dtype=None, device=None, requires_grad: bool = False, **kwargs):
        make = _factory("new_full", dtype, device, requires_grad)
        return self._new_like((size,), lambda t, s: make(t, s, fill_value))

    def zeros_like(self):
        return self.apply(torch.zeros_like)

    def ones_like(self):
        return self.apply(torch.ones_like)

    # -- element-wise ---------------------------------------------------------------------
    __add__ = _binary(operator.add)
    __radd__ = _binary(operator.add, reverse=True)
    __sub__ = _binary(operator.sub)
    __rsub__ = _binary(operator.sub, reverse=True)
    __mul__ = _binary(operator.mul)
    __rmul__ = _binary(operator.mul, reverse=True)
    __truediv__ = _binary(operator.truediv)
    __rtruediv__ = _binary(operator.truediv, reverse=True)
    __pow__ = _binary(operator.pow)
    __rpow__ = _binary(operator.pow, reverse=True)
    __mod__ = _binary(operator.mod)
    __lt__ = _binary(operator.lt)
    __le__ = _binary(operator.le)
    __gt__ = _binary(operator.gt)
    __ge__ = _binary(operator.ge)
    __iadd__ = _inplace(lambda a, b: a.add_(b))
    __isub__ = _inplace(lambda a, b: a.sub_(b))
    __imul__ = _inplace(lambda a, b: a.mul_(b))
    __itruediv__ = _inplace(lambda a, b: a.div_(b))

    def __neg__(self):
        return self.apply(operator.neg)

    def __abs__(self):
        return self.apply(operator.abs)

    def __invert__(self):
        return self.apply(operator.invert)

    def __or__(self, other):
        return self._compare(other, _logical(operator.or_))

    def __and__(self, other):
        return self._compare(other, _logical(operator.and_))

    def __xor__(self, other):
        return self._compare(other, _logical(operator.xor))

    def add(self, other, alpha=None):
        return self + (other if alpha is None else other * alpha)

    def sub(self, other, alpha=None):
        return self - (other if alpha is None else other * alpha)

    def mul(self, other):
        return self * other

    def div(self, other):
        return self / other

    def abs(self):
        return self.apply(torch.abs)

    def exp(self):
        return self.apply(torch.exp)

    def sqrt(self):
        return self.apply(torch.sqrt)

    def tensor_split(self, indices_or_sections, dim: int = 0):
        """Split along batch dim ``dim`` like ``torch.tensor_split``."""
        d = self._norm_dim(dim)
        n = self.batch_size[d]
        parts = torch.arange(n).tensor_split(indices_or_sections)
        return tuple(self._index((slice(None),) * d + (slice(int(p[0]), int(p[-1]) + 1) if len(p) else slice(0, 0),))
                     for p in parts)

    def gather(self, dim: int, index, out=None):
        """``torch.gather`` along batch dim ``dim`` for every leaf."""
        nb = len(self.batch_size)
        d = self._norm_dim(dim)

        def fn(t):
            idx = index.reshape(index.shape + (1,) * (t.ndim - nb)).expand(*index.shape, *t.shape[nb:])
            return torch.gather(t, d, idx)

        res = self.apply(fn, batch_size=index.shape)
        if out is not None:
            out.update_(res)
            return out
        return res


def _logical(op):
    def fn(a, b):
        if is_non_tensor(a):
            a = a.data if isinstance(a, NonTensorData) else a
            b = b.data if isinstance(b, NonTensorData) else b
            if isinstance(a, NonTensorStack):
                return a
            return NonTensorData(op(a, b))
        return op(a, b)

    return fn
