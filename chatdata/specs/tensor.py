"""Tensor specs for what sits beside a History in an environment: token ids, masks, rewards.

``Unbounded`` (any value of a dtype), ``Bounded`` (``low <= x <= high``), ``Categorical``
(``0 <= x < n``) and ``Binary`` (0/1 with a last dim of ``n``). ``Unbounded(...)`` and
``Bounded(...)`` give ``UnboundedContinuous`` / ``UnboundedDiscrete`` (``BoundedContinuous`` /
``BoundedDiscrete``) instances according to the dtype, as torchrl does.

Example:
    >>> spec = Bounded(low=-1.0, high=1.0, shape=(3,))
    >>> spec.is_in(spec.rand()), spec.is_in(torch.full((3,), 2.0))
    (True, False)
    >>> spec.project(torch.full((3,), 2.0)).tolist()
    [1.0, 1.0, 1.0]
"""
from __future__ import annotations

import torch

from ._shape import norm_shape, shape_mismatch
from .base import CategoricalBox, ContinuousBox, TensorSpec, as_device

__all__ = [
    "Unbounded", "UnboundedContinuous", "UnboundedDiscrete", "Bounded", "BoundedContinuous",
    "BoundedDiscrete", "Categorical", "Binary",
]

_F64_INT_MAX = 2.0**63 - 1024  # the largest float64 below 2**63: safe to cast to int64


def _as_dtype(dtype, default: torch.dtype) -> torch.dtype:
    if dtype is None:
        return default
    if isinstance(dtype, str):
        cand = getattr(torch, dtype.replace("torch.", ""), None)
        if isinstance(cand, torch.dtype):
            dtype = cand
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"dtype must be a torch.dtype (or its name), got {dtype!r}")
    if dtype.is_complex:
        raise TypeError(f"complex dtypes are not supported by specs, got {dtype}")
    return dtype


def _split_device_dtype(device, dtype):
    """Accept ``(dtype, device)`` in either order: a torch.dtype given as device is the dtype."""
    if isinstance(device, (torch.dtype, str)) and not isinstance(dtype, torch.dtype):
        if isinstance(device, torch.dtype) or isinstance(getattr(torch, device.replace("torch.", ""), None), torch.dtype):
            return dtype, device
    return device, dtype


def _as_numbers(value, what: str) -> torch.Tensor:
    """``value`` (a number, nested lists of numbers, an array or a tensor) as a real tensor;
    TypeError naming ``what`` for strings, None, complex numbers and other objects."""
    try:
        try:
            t = value if isinstance(value, torch.Tensor) else torch.as_tensor(value)
            if t.is_floating_point() and not hasattr(value, "dtype"):  # Python floats are float64:
                t = torch.as_tensor(value, dtype=torch.float64)  # not rounded to float32 (0.1 > 0.1)
        except (RuntimeError, ValueError, OverflowError):  # an int beyond int64 (2**70): as a float it is a fine bound
            if isinstance(value, bool) or not isinstance(value, int):
                raise
            t = torch.tensor(float(value), dtype=torch.float64)
    except (TypeError, ValueError, RuntimeError, OverflowError) as err:
        raise TypeError(f"{what} must be a real number, a nested list of them or a tensor, got {value!r:.60} ({err})") from None
    if t.is_complex():
        raise TypeError(f"{what} must hold real numbers, got the complex {t.dtype}")
    return t


def _dtype_range(dtype: torch.dtype):
    if dtype == torch.bool:
        return 0, 1
    if dtype.is_floating_point:
        info = torch.finfo(dtype)
    else:
        info = torch.iinfo(dtype)
    return info.min, info.max


def _is_int(dtype: torch.dtype) -> bool:
    return not dtype.is_floating_point


def _to_long(value: torch.Tensor, rounding=torch.round) -> torch.Tensor:
    """Integers as int64; floats rounded (NaN -> 0) and saturated instead of wrapping."""
    if value.is_floating_point():
        v = rounding(torch.nan_to_num(value.double(), nan=0.0))
        return v.clamp(-(2.0**63), _F64_INT_MAX).long()
    return value.long()


def _clamp(v, lo, hi):
    return torch.maximum(torch.minimum(v, hi), lo)


def _project_int(value, lo: torch.Tensor, hi: torch.Tensor, dtype) -> torch.Tensor:
    return _clamp(_to_long(value), lo.long(), hi.long()).to(dtype)


def _project_float(value, lo: torch.Tensor, hi: torch.Tensor, dtype) -> torch.Tensor:
    v = value.double()
    v = torch.where(torch.isnan(v), torch.zeros((), dtype=v.dtype, device=v.device), v)
    v = _clamp(v, lo.double(), hi.double()).to(dtype)
    return _clamp(v, lo.to(dtype), hi.to(dtype))  # rounding to ``dtype`` cannot leave the box


class _TensorLeaf(TensorSpec):
    """Checks shared by tensor specs: a tensor of the right dtype, device and shape."""

    def _check(self, value) -> str | None:
        if not isinstance(value, torch.Tensor):
            return f"expected a torch.Tensor, got {type(value).__name__}"
        if value.dtype != self.dtype:
            return f"dtype {value.dtype} does not match the spec's dtype {self.dtype}"
        if self.device is not None and value.device != self.device:
            return f"device {value.device} does not match the spec's device {self.device}"
        if value.is_nested:  # a ragged entry (conversations of different lengths)
            items = value.unbind()
            vshape = (len(items), -1, *value.values().shape[1:])
            reason = shape_mismatch(vshape, self.shape)
            if reason is not None:
                return reason
            for i, item in enumerate(items):
                sub = self if self.ndim < len(vshape) else self[0 if self.shape[0] == -1 else i]
                reason = sub._check(item)
                if reason is not None:
                    return f"item {i}: {reason}"
            return None
        reason = shape_mismatch(value.shape, self.shape)
        if reason is not None:
            return reason
        return self._check_values(value)

    def _check_values(self, value) -> str | None:
        return None

    def _bounds(self):
        """``low`` and ``high`` (tensors of the safe shape on the spec's device)."""
        raise NotImplementedError

    def _bounds_reason(self, value) -> str | None:
        low, high = self._bounds()
        ok = (value >= low) & (value <= high)
        if bool(ok.all()):
            return None
        bad = (~ok).nonzero()[0].tolist()
        lo = low.expand_as(ok)[tuple(bad)].item()
        hi = high.expand_as(ok)[tuple(bad)].item()
        return f"value {value[tuple(bad)].item()} at index {tuple(bad)} is out of bounds [{lo}, {hi}]"

    def project(self, value) -> torch.Tensor:
        """``value`` brought into the spec: cast to its dtype and device, clamped into its bounds
        (integers rounded, NaN mapped to the nearest value to 0). The shape must already fit."""
        value = _as_numbers(value, "the value to project")
        reason = shape_mismatch(value.shape, self.shape)
        if reason is not None:
            raise ValueError(f"cannot project onto the {type(self).__name__} spec: {reason}")
        if self.device is not None:
            value = value.to(self.device)
        low, high = self._bounds()
        if self.dtype.is_floating_point:
            return _project_float(value, low, high, self.dtype)
        return _project_int(value, low, high, self.dtype)

    def _rand_between(self, shape, low, high):
        """Uniform values in ``[low, high]`` (bounds broadcast to ``shape``)."""
        dev = self.device
        u = torch.rand(shape, dtype=torch.float64, device=dev)
        lo, hi = low.double().expand(shape), high.double().expand(shape)
        if self.dtype.is_floating_point:
            finite = torch.isfinite(lo) & torch.isfinite(hi)
            r = torch.where(finite, lo * (1 - u) + hi * u, torch.randn(shape, dtype=torch.float64, device=dev))
            return _project_float(r, low, high, self.dtype)
        r = torch.floor(lo * (1 - u) + (hi + 1) * u)
        return _project_int(r, low, high, self.dtype)


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


class Categorical(_TensorLeaf):
    """Integers ``0 <= x < n``: ``Categorical(n, shape=(), device=None, dtype=torch.int64)``.

    A floating dtype holds the categories as whole floats.

    Example:
        >>> spec = Categorical(4, shape=(2,))
        >>> spec.is_in(torch.tensor([0, 3])), spec.is_in(torch.tensor([0, 4]))
        (True, False)
    """

    def __init__(self, n, shape=None, device=None, dtype=None, **kwargs):
        kwargs.pop("domain", None)
        kwargs.pop("mask", None)
        if kwargs:
            raise TypeError(f"{type(self).__name__} got unexpected arguments {sorted(kwargs)}")
        device, dtype = _split_device_dtype(device, dtype)
        if isinstance(n, torch.Tensor) and n.numel() == 1:
            n = int(n)
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"{type(self).__name__} needs an int n >= 1 (the number of categories), got {n!r}")
        self.dtype = _as_dtype(dtype, torch.int64)
        if not self.dtype.is_floating_point and n - 1 > _dtype_range(self.dtype)[1]:
            raise ValueError(f"{type(self).__name__}: n={n} categories do not fit in {self.dtype}")
        if self.dtype.is_floating_point and n - 1 > 2 / torch.finfo(self.dtype).eps:
            # past 2**mantissa bits a float cannot hold every integer: rand() would round to n
            raise ValueError(
                f"{type(self).__name__}: n={n} categories are not all exact in {self.dtype} (whole numbers "
                f"are exact only up to {int(2 / torch.finfo(self.dtype).eps)}); use an integer dtype"
            )
        self.n = n
        self.shape = norm_shape(() if shape is None else shape)
        self.device = as_device(device) or torch.device("cpu")
        self.domain = "discrete"

    @property
    def space(self) -> CategoricalBox:
        return CategoricalBox(self.n)

    def _bounds(self):
        safe = self._safe_shape
        return (
            torch.zeros(safe, dtype=torch.int64, device=self.device),
            torch.full(safe, self.n - 1, dtype=torch.int64, device=self.device),
        )

    def _check_values(self, value):
        if value.is_floating_point():
            frac = value != torch.round(value)
            if bool(frac.any()):
                bad = tuple(frac.nonzero()[0].tolist())
                return f"value {value[bad].item()} at index {bad} is not a category (an integer in [0, {self.n - 1}])"
            return self._bounds_reason(value)
        return self._bounds_reason(value.long())

    def project(self, value) -> torch.Tensor:
        """``value`` rounded to the nearest category, clamped into ``[0, n-1]``, cast and moved."""
        if isinstance(value, torch.Tensor) and value.is_floating_point() and self.dtype.is_floating_point:
            value = torch.round(value.double())
        return super().project(value)

    def _fill(self, shape, kind):
        dev, dt = self.device, self.dtype
        if kind == "zero":
            return torch.zeros(shape, dtype=dt, device=dev)
        if kind == "one":
            return torch.full(shape, min(1, self.n - 1), dtype=torch.int64, device=dev).to(dt)
        return torch.randint(0, self.n, shape, device=dev).to(dt)

    def _rebuild(self, shape=None, device=..., dtype=None, fn=None):
        return type(self)(
            self.n,
            shape=self.shape if shape is None else shape,
            device=self.device if device is ... else device,
            dtype=dtype or self.dtype,
        )


class Binary(Categorical):
    """0/1 values with a last dim of length ``n``: ``Binary(n=None, shape=None, device=None,
    dtype=torch.int8)``; ``shape`` defaults to ``(n,)`` and its last dim must be ``n``.

    As in torchrl, it is a ``Categorical`` of 2 values: its ``n`` attribute and its space
    (``CategoricalBox(n=2)``) count the values, not the vector length.

    Example:
        >>> Binary(4).zero().tolist()
        [0, 0, 0, 0]
    """

    def __init__(self, n=None, shape=None, device=None, dtype=None, **kwargs):
        device, dtype = _split_device_dtype(device, dtype)
        if n is None and shape is None:
            raise TypeError("Binary needs n (the length of the last dim) or shape")
        if shape is None or not len(norm_shape(shape)):
            shape = (n,)
        shape = norm_shape(shape)
        if n is None:
            n = shape[-1]
        if isinstance(n, bool) or not isinstance(n, int) or n < 0 or shape[-1] != n:
            raise ValueError(f"Binary: the last dim of the shape {tuple(shape)} must be n={n!r}")
        super().__init__(2, shape=shape, device=device, dtype=_as_dtype(dtype, torch.int8), **kwargs)

    def _rebuild(self, shape=None, device=..., dtype=None, fn=None):
        shape = self.shape if shape is None else shape
        if not len(shape):
            raise ValueError("a Binary spec needs at least one dim (its last dim is the vector length)")
        return Binary(
            n=shape[-1],
            shape=shape,
            device=self.device if device is ... else device,
            dtype=dtype or self.dtype,
        )

    def expand(self, *shape):
        out = super().expand(*shape)
        if out.shape[-1] != self.shape[-1]:
            raise ValueError(f"cannot expand a Binary spec of shape {tuple(self.shape)} to {tuple(out.shape)}: its last dim is fixed")
        return out
