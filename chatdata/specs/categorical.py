"""``Categorical`` (integers ``0 <= x < n``) and ``Binary`` (0/1 vectors of length ``n``, a
``Categorical`` of 2 values as in torchrl).

Example:
    >>> Categorical(3, shape=(2,)).project(torch.tensor([-1.0, 7.2])).tolist()
    [0, 2]
    >>> Binary(3).is_in(torch.tensor([0, 1, 1], dtype=torch.int8))
    True
"""
from __future__ import annotations

import torch

from ._numbers import _as_dtype, _as_int, _dtype_range, _split_device_dtype
from ._shape import norm_shape
from ._tensor_leaf import _TensorLeaf
from .base import CategoricalBox, as_device

__all__ = ["Categorical", "Binary"]


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
        n = _as_int(n)  # a numpy integer or a one-element integer tensor counts; 2.7 or tensor(2.7) does not
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
        n = _as_int(n)
        if n is None and shape is None:
            raise TypeError("Binary needs n (the length of the last dim) or shape")
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 0):
            raise ValueError(f"Binary needs an int n >= 0 (the length of the last dim), got {n!r}")
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
