"""``Bounded``: values with ``low <= x <= high``. ``Bounded(...)`` gives a ``BoundedContinuous``
spec for a floating dtype, ``BoundedDiscrete`` for the others, as torchrl does; the bounds are
checked (no NaN, they broadcast to the shape, they fit the dtype, ``low <= high``) when the
spec is made.

Example:
    >>> spec = Bounded(low=-1.0, high=1.0, shape=(3,))
    >>> type(spec).__name__, spec.is_in(torch.full((3,), 2.0))
    ('BoundedContinuous', False)
"""
from __future__ import annotations

import torch

from ._numbers import _as_dtype, _as_numbers, _dtype_range, _split_device_dtype, _to_long
from ._shape import norm_shape
from ._tensor_leaf import _TensorLeaf
from .base import ContinuousBox, as_device

__all__ = ["Bounded", "BoundedContinuous", "BoundedDiscrete"]


class Bounded(_TensorLeaf):
    """Values with ``low <= x <= high``: ``Bounded(low, high, shape=None, device=None, dtype=None)``.

    ``low``/``high`` are numbers or tensors broadcastable to ``shape`` (inferred from them when
    not given). Integer dtypes round the bounds inwards. Floating dtypes give a
    ``BoundedContinuous`` spec, other dtypes ``BoundedDiscrete``. ``zero()``/``one()`` give 0/1
    clamped into the bounds, so they are always in the spec.

    Example:
        >>> Bounded(0, 10, shape=(2,), dtype=torch.int64).project(torch.tensor([-3, 12])).tolist()
        [0, 10]
    """

    _default_dtype = None

    def __new__(cls, *args, **kwargs):
        if cls in (Bounded, BoundedContinuous, BoundedDiscrete):
            dtype = kwargs.get("dtype")
            pos = [a for a in args[3:] if isinstance(a, torch.dtype)]
            dtype = pos[0] if pos and dtype is None else dtype
            dtype = _as_dtype(dtype, cls._default_dtype or torch.get_default_dtype())
            cls = BoundedContinuous if dtype.is_floating_point else BoundedDiscrete
        return super().__new__(cls)

    def __init__(self, low=None, high=None, shape=None, device=None, dtype=None, **kwargs):
        low = kwargs.pop("minimum", low)
        high = kwargs.pop("maximum", high)
        kwargs.pop("domain", None)
        if kwargs:
            raise TypeError(f"{type(self).__name__} got unexpected arguments {sorted(kwargs)}")
        if low is None or high is None:
            raise TypeError(f"{type(self).__name__} needs both low and high")
        device, dtype = _split_device_dtype(device, dtype)
        self.dtype = _as_dtype(dtype, self._default_dtype or torch.get_default_dtype())
        self.device = as_device(device) or torch.device("cpu")
        if self.device.type == "meta":
            raise ValueError(f"{type(self).__name__} checks its bounds, and the meta device holds no values: use a real device such as 'cpu'")
        self.domain = "continuous" if self.dtype.is_floating_point else "discrete"
        low_t, high_t = _as_numbers(low, "low").to(self.device), _as_numbers(high, "high").to(self.device)
        for name, t in (("low", low_t), ("high", high_t)):
            if t.is_floating_point() and bool(torch.isnan(t).any()):
                raise ValueError(f"{name} must hold real numbers, not NaN: got {t}")
        if shape is None:
            try:
                shape = torch.broadcast_shapes(low_t.shape, high_t.shape)
            except RuntimeError:
                raise ValueError(f"low of shape {tuple(low_t.shape)} and high of shape {tuple(high_t.shape)} do not broadcast") from None
        self.shape = norm_shape(shape)
        safe = self._safe_shape
        try:
            low_t, high_t = low_t.expand(safe), high_t.expand(safe)
        except RuntimeError:
            raise ValueError(
                f"low (shape {tuple(low_t.shape)}) and high (shape {tuple(high_t.shape)}) must broadcast "
                f"to the spec's shape {tuple(self.shape)}"
            ) from None
        lo, hi = _dtype_range(self.dtype)
        low_d, high_d = low_t.double(), high_t.double()  # infinite bounds are what they say; finite ones past
        outside = ((low_d > hi) & torch.isfinite(low_d)) | ((high_d < lo) & torch.isfinite(high_d))  # the dtype
        if bool(outside.any()):  # would be clamped to its extreme (or inf): a box shrunk to one value
            k = tuple(outside.nonzero()[0].tolist())
            raise ValueError(
                f"{type(self).__name__}: the bounds [{low_t[k].item()}, {high_t[k].item()}] at index {k} lie outside "
                f"what {self.dtype} holds [{lo}, {hi}]; use a wider dtype"
            )
        if self.dtype.is_floating_point:
            low_t, high_t = low_t.to(self.dtype), high_t.to(self.dtype)
        else:
            low_t = _to_long(low_t, torch.ceil).clamp(lo, hi).to(self.dtype)
            high_t = _to_long(high_t, torch.floor).clamp(lo, hi).to(self.dtype)
        if bool((low_t > high_t).any()):
            raise ValueError(f"{type(self).__name__} needs low <= high everywhere; got low={low_t} and high={high_t}")
        self._low, self._high = low_t.contiguous().clone(), high_t.contiguous().clone()

    @property
    def low(self) -> torch.Tensor:
        return self._low

    @property
    def high(self) -> torch.Tensor:
        return self._high

    @property
    def space(self) -> ContinuousBox:
        return ContinuousBox(self._low, self._high)

    def _bounds(self):
        return self._low, self._high

    def _check_values(self, value):
        return self._bounds_reason(value)

    def _fill(self, shape, kind):
        if kind == "rand":
            return self._rand_between(shape, self._low, self._high)
        fill = torch.zeros if kind == "zero" else torch.ones
        return self.project(fill(shape, dtype=self.dtype, device=self.device))

    def _stacked(self, specs, dim, shape):
        return Bounded(
            torch.stack([s._low for s in specs], dim), torch.stack([s._high for s in specs], dim),
            shape=shape, device=self.device, dtype=self.dtype,
        )

    def _rebuild(self, shape=None, device=..., dtype=None, fn=None):
        fn = fn or (lambda t: t)
        return Bounded(
            low=fn(self._low),
            high=fn(self._high),
            shape=self.shape if shape is None else shape,
            device=self.device if device is ... else device,
            dtype=dtype or self.dtype,
        )


class BoundedContinuous(Bounded):
    """A ``Bounded`` spec of a floating dtype."""


class BoundedDiscrete(Bounded):
    """A ``Bounded`` spec of an integer or bool dtype (int64 by default)."""

    _default_dtype = torch.int64
