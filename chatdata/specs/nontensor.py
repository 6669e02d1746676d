"""``NonTensor``: the spec of strings and other non-tensor values (a History's roles and contents).

``zero``/``one``/``rand`` all give the spec's ``example_data`` as ``NonTensorData`` with the
spec's shape as batch size (``-1`` counted as 1, extra leading dims when asked).

Example:
    >>> spec = NonTensor(shape=(-1,), example_data="foo")
    >>> spec.zero()
    NonTensorData(data=foo, batch_size=torch.Size([1]), device=None)
    >>> spec.is_in(NonTensorStack.from_list(["a", "b", "c"]))
    True
"""
from __future__ import annotations

import copy

import torch

from ..td import NonTensorData, NonTensorStack, RaggedTensorDict
from ..td.nontensor import Batched
from ._shape import norm_shape, shape_mismatch
from .base import TensorSpec, as_device

__all__ = ["NonTensor"]


def _list_shape(values) -> tuple:
    """Batch shape of nested lists: every level where all items are lists of one length."""
    shape, level, seen = [], [values], set()
    while level and all(isinstance(v, list) for v in level):
        lens = {len(v) for v in level}
        if len(lens) != 1:
            break
        if any(id(v) in seen for v in level):  # a list that holds itself: no finite shape
            raise ValueError("a list that contains itself has no batch shape")
        seen.update(id(v) for v in level)
        n = lens.pop()
        shape.append(n)
        level = [x for v in level for x in v]
        if n == 0:
            break
    return tuple(shape)


def _same(a, b) -> bool:
    """Whether two example values are equal; tensors and arrays compare whole (same type, shape and values)."""
    if a is b:
        return True
    if hasattr(a, "shape") or hasattr(b, "shape"):  # a tensor or an array: == is elementwise
        if type(a) is not type(b) or tuple(a.shape) != tuple(b.shape) or getattr(a, "dtype", None) != getattr(b, "dtype", None):
            return False
        if isinstance(a, torch.Tensor):
            return bool(torch.equal(a.cpu(), b.cpu()))
    try:
        eq = a == b
        return bool(eq.all()) if hasattr(eq, "all") else bool(eq)
    except Exception:  # values whose == is neither a bool nor elementwise
        return False


class NonTensor(TensorSpec):
    """A spec for non-tensor data: ``NonTensor(shape=(1,), device=None, dtype=None, example_data=None)``.

    ``is_in`` accepts NonTensorData, NonTensorStack, ragged stacks of strings, nested lists
    (their shape must fit) and single plain values (which fit any shape, as a TensorDict
    broadcasts them); it refuses tensors and tensor collections.
    """

    def __init__(self, shape=(1,), device=None, dtype=None, example_data=None, **kwargs):
        for compat in ("batched", "feature_dims", "domain"):  # torchrl options: accepted, unused
            kwargs.pop(compat, None)
        if kwargs:
            raise TypeError(f"NonTensor got unexpected arguments {sorted(kwargs)}")
        if dtype is not None and not isinstance(dtype, torch.dtype):
            raise TypeError(f"dtype must be a torch.dtype or None, got {dtype!r}")
        self.shape = norm_shape((1,) if shape is None else shape)
        self.device = as_device(device)
        self.dtype = dtype
        self.domain = None
        self.example_data = example_data

    def _fill(self, shape, kind):
        return NonTensorData(copy.deepcopy(self.example_data), batch_size=shape, device=self.device)

    def _check(self, value) -> str | None:
        if isinstance(value, torch.Tensor):
            return "expected non-tensor data, got a torch.Tensor"
        if isinstance(value, (NonTensorData, NonTensorStack)) or (
            isinstance(value, RaggedTensorDict) and value._is_non_tensor
        ):
            if isinstance(value, NonTensorData) and not value.batch_size:
                shape = None  # one value for any batch
            else:
                shape = value.batch_size
            device = value.device
        elif isinstance(value, Batched):
            return f"expected non-tensor data, got a {type(value).__name__}"
        elif isinstance(value, list):
            shape, device = _list_shape(value), None
        else:
            return None  # a single value fits any batch
        if self.device is not None and device is not None and device != self.device:
            return f"device {device} does not match the spec's device {self.device}"
        return None if shape is None else shape_mismatch(shape, self.shape)

    def encode(self, value):
        """``value`` as non-tensor data of the spec: a list becomes a ``NonTensorStack``, a
        single value ``NonTensorData`` of the spec's shape (``-1`` counted as 1); collections
        are kept. ValueError when it does not fit."""
        self.assert_is_in(value)
        if isinstance(value, list):
            return NonTensorStack.from_list(value, device=self.device)
        if isinstance(value, (NonTensorData, NonTensorStack, RaggedTensorDict)):
            return value
        return NonTensorData(value, batch_size=self._safe_shape, device=self.device)

    def _rebuild(self, shape=None, device=..., dtype=None, fn=None):
        return NonTensor(
            shape=self.shape if shape is None else shape,
            device=self.device if device is ... else device,
            dtype=self.dtype,
            example_data=copy.deepcopy(self.example_data),
        )

    def to(self, dest) -> "NonTensor":
        """Move to a device; a dtype leaves non-tensor data unchanged (a copy is returned)."""
        if isinstance(dest, torch.dtype):
            return self.clone()
        return super().to(dest)

    def _eq_fields(self):
        return (self.shape, self.device, self.dtype)

    def __eq__(self, other):
        return super().__eq__(other) and _same(self.example_data, other.example_data)

    def _repr_fields(self):
        return super()._repr_fields() + [("example_data", self.example_data)]
