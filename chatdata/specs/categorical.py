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

from ._catmask import allowed_at, as_mask, first_allowed, nearest_allowed, sample_allowed
from ._numbers import _as_dtype, _as_int, _dtype_range, _split_device_dtype
from ._shape import index_shape, norm_shape
from ._tensor_leaf import _TensorLeaf
from .base import CategoricalBox, as_device

__all__ = ["Categorical", "Binary"]


class Categorical(_TensorLeaf):
    """Integers ``0 <= x < n``: ``Categorical(n, shape=(), device=None, dtype=torch.int64, mask=None)``.

    A floating dtype holds the categories as whole floats. ``mask`` (see :meth:`update_mask`)
    leaves out categories: ``rand``/``zero``/``one`` give only allowed ones, ``is_in`` refuses
    masked ones, ``project`` moves them to the nearest allowed category.

    Example:
        >>> spec = Categorical(4, shape=(2,))
        >>> spec.is_in(torch.tensor([0, 3])), spec.is_in(torch.tensor([0, 4]))
        (True, False)
        >>> masked = Categorical(3, shape=(2,), mask=torch.tensor([False, True, True]))
        >>> masked.zero().tolist(), masked.is_in(torch.tensor([0, 1]))
        ([1, 1], False)
    """

    mask: torch.Tensor | None = None

    def __init__(self, n, shape=None, device=None, dtype=None, mask=None, **kwargs):
        kwargs.pop("domain", None)
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
        self.update_mask(mask)

    def update_mask(self, mask) -> None:
        """Allow only some categories: ``mask`` is a bool tensor of shape ``(*shape, n)``, or
        anything that broadcasts to it (``n`` bools for every position); ``True`` = allowed.
        ``None`` removes the mask. A refused mask leaves the spec as it was."""
        self.mask = None if mask is None else as_mask(mask, self._safe_shape, self.n, self.device)

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
        else:
            value = value.long()
        reason = self._bounds_reason(value)
        if reason is not None or self.mask is None:
            return reason
        ok = allowed_at(self.mask, value.long())
        if bool(ok.all()):
            return None
        bad = tuple((~ok).nonzero()[0].tolist())
        return f"value {value[bad].item()} at index {bad} is a masked category (not allowed by the spec's mask)"

    def project(self, value) -> torch.Tensor:
        """``value`` rounded to the nearest category, clamped into ``[0, n-1]``, cast and moved."""
        if isinstance(value, torch.Tensor) and value.is_floating_point() and self.dtype.is_floating_point:
            value = torch.round(value.double())
        out = super().project(value)
        if self.mask is None:
            return out
        return nearest_allowed(self.mask, out.long()).to(self.dtype)

    def _fill(self, shape, kind):
        dev, dt = self.device, self.dtype
        if self.mask is not None:
            lead = shape[: len(shape) - self.ndim]
            if kind == "rand":
                return sample_allowed(self.mask, lead).to(dt)
            out = first_allowed(self.mask)
            if kind == "one" and self.n > 1:
                out = torch.where(self.mask[..., 1], 1, out)
            return out.expand(shape).to(dt)
        if kind == "zero":
            return torch.zeros(shape, dtype=dt, device=dev)
        if kind == "one":
            return torch.full(shape, min(1, self.n - 1), dtype=torch.int64, device=dev).to(dt)
        return torch.randint(0, self.n, shape, device=dev).to(dt)

    def _rebuild(self, shape=None, device=..., dtype=None, fn=None):
        out = type(self)(
            self.n,
            shape=self.shape if shape is None else shape,
            device=self.device if device is ... else device,
            dtype=dtype or self.dtype,
        )
        if self.mask is not None:
            mask = self.mask
            if fn is not None:  # fn maps tensors of the safe shape: map the positions, then take their rows
                pos = fn(torch.arange(self._safe_shape.numel(), device=mask.device).reshape(self._safe_shape))
                mask = mask.reshape(-1, self.n)[pos.reshape(-1)].reshape(*pos.shape, self.n)
            out.update_mask(mask)
        return out

    def _stacked(self, specs, dim, shape):
        if all(s.mask is None for s in specs) or any(s.n != self.n for s in specs):
            return super()._stacked(specs, dim, shape)  # equal, or of different n: no one spec
        out = Categorical(self.n, shape=shape, device=self.device, dtype=self.dtype)
        full = torch.ones((*self._safe_shape, self.n), dtype=torch.bool, device=self.device)
        out.update_mask(torch.stack([full if s.mask is None else s.mask for s in specs], dim))
        return out

    def _same_mask(self, other) -> bool:
        a, b = self.mask, getattr(other, "mask", None)
        if a is None or b is None:
            return a is b
        return a.shape == b.shape and bool(torch.equal(a.cpu(), b.cpu()))

    def __eq__(self, other):
        return super().__eq__(other) and self._same_mask(other)

    __hash__ = None


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

    def update_mask(self, mask) -> None:
        if mask is not None:
            raise TypeError("Binary takes no mask (every 0/1 vector is allowed, as in torchrl); use a Categorical for masks")
        self.mask = None

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

    def __getitem__(self, index):
        if not len(index_shape(self.shape, index)[0]):
            raise IndexError(
                f"cannot index a Binary spec of shape {tuple(self.shape)} by {index!r:.60}: no dim would be left, and a "
                "Binary spec's last dim is its vector (a single 0/1 value is Categorical(2, shape=()))"
            )
        return super().__getitem__(index)

    def expand(self, *shape):
        out = super().expand(*shape)
        if out.shape[-1] != self.shape[-1]:
            raise ValueError(f"cannot expand a Binary spec of shape {tuple(self.shape)} to {tuple(out.shape)}: its last dim is fixed")
        return out
