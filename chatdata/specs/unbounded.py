"""``Unbounded``: any value of a dtype. ``Unbounded(...)`` gives an ``UnboundedContinuous``
spec for a floating dtype, ``UnboundedDiscrete`` for the others, as torchrl does.

Example:
    >>> spec = Unbounded(shape=(2,), dtype=torch.int8)
    >>> type(spec).__name__, spec.project(torch.tensor([300.0, -1.4])).tolist()
    ('UnboundedDiscrete', [127, -1])
"""
from __future__ import annotations

import torch

from ._numbers import _as_dtype, _as_numbers, _dtype_range, _split_device_dtype
from ._shape import norm_shape, shape_mismatch
from ._tensor_leaf import _TensorLeaf
from .base import ContinuousBox, as_device

__all__ = ["Unbounded", "UnboundedContinuous", "UnboundedDiscrete"]


class Unbounded(_TensorLeaf):
    """Any value of ``dtype``: ``Unbounded(shape=(1,), device=None, dtype=None)``.

    Floating dtypes give an ``UnboundedContinuous`` spec, other dtypes ``UnboundedDiscrete``.

    Example:
        >>> type(Unbounded(shape=(2,), dtype=torch.int64)).__name__
        'UnboundedDiscrete'
    """

    _default_dtype = None  # the default float dtype

    def __new__(cls, *args, **kwargs):
        if cls in (Unbounded, UnboundedContinuous, UnboundedDiscrete):
            dtype = kwargs.get("dtype")
            pos = [a for a in args[1:] if isinstance(a, torch.dtype)]
            dtype = pos[0] if pos and dtype is None else dtype
            dtype = _as_dtype(dtype, cls._default_dtype or torch.get_default_dtype())
            cls = UnboundedContinuous if dtype.is_floating_point else UnboundedDiscrete
        return super().__new__(cls)

    def __init__(self, shape=(1,), device=None, dtype=None, **kwargs):
        kwargs.pop("domain", None)
        if kwargs:
            raise TypeError(f"{type(self).__name__} got unexpected arguments {sorted(kwargs)}")
        device, dtype = _split_device_dtype(device, dtype)
        self.shape = norm_shape(shape if shape is not None else (1,))
        self.dtype = _as_dtype(dtype, self._default_dtype or torch.get_default_dtype())
        self.device = as_device(device) or torch.device("cpu")
        self.domain = "continuous" if self.dtype.is_floating_point else "discrete"

    @property
    def space(self) -> ContinuousBox:
        return ContinuousBox(*self._bounds())

    def _bounds(self):
        lo, hi = _dtype_range(self.dtype)
        safe = self._safe_shape
        return (
            torch.full(safe, lo, dtype=self.dtype, device=self.device),
            torch.full(safe, hi, dtype=self.dtype, device=self.device),
        )

    def _eq_fields(self):
        return (self.shape, self.device, self.dtype, self.domain)

    def _fill(self, shape, kind):
        dev, dt = self.device, self.dtype
        if kind == "zero":
            return torch.zeros(shape, dtype=dt, device=dev)
        if kind == "one":
            return torch.ones(shape, dtype=dt, device=dev)
        if dt.is_floating_point:
            return torch.randn(shape, dtype=torch.float32, device=dev).to(dt)
        if dt == torch.bool:
            return torch.randint(0, 2, shape, device=dev).bool()
        lo, hi = _dtype_range(dt)
        return torch.randint(max(lo, -100), min(hi, 100) + 1, shape, dtype=dt, device=dev)

    def project(self, value) -> torch.Tensor:
        """``value`` cast to the spec's dtype and device (integers rounded and saturated)."""
        value = _as_numbers(value, "the value to project")
        if self.dtype.is_floating_point:
            reason = shape_mismatch(value.shape, self.shape)
            if reason is not None:
                raise ValueError(f"cannot project onto the {type(self).__name__} spec: {reason}")
            return value.to(device=self.device, dtype=self.dtype)
        return super().project(value)

    def _rebuild(self, shape=None, device=..., dtype=None, fn=None):
        return Unbounded(
            shape=self.shape if shape is None else shape,
            device=self.device if device is ... else device,
            dtype=dtype or self.dtype,
        )


class UnboundedContinuous(Unbounded):
    """An ``Unbounded`` spec of a floating dtype."""


class UnboundedDiscrete(Unbounded):
    """An ``Unbounded`` spec of an integer or bool dtype (int64 by default)."""

    _default_dtype = torch.int64
