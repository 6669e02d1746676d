"""``_TensorLeaf``, the base of every tensor spec (:mod:`.unbounded`, :mod:`.bounded`,
:mod:`.categorical`): what ``is_in`` checks on a tensor (type, dtype, device, shape, also item by
item for a ragged ``torch.nested`` entry, then the subclass's values check), the out-of-bounds
message, ``project`` (cast, move, clamp) and uniform sampling between bounds. A subclass gives
its bounds (``_bounds``) and, when it checks values, ``_check_values``.

Example:
    >>> from chatdata.specs import Bounded
    >>> spec = Bounded(0, 1, shape=(2,))
    >>> isinstance(spec, _TensorLeaf), spec._check(torch.tensor([0.5, 2.0]))
    (True, 'value 2.0 at index (1,) is out of bounds [0.0, 1.0]')
    >>> spec._check(torch.zeros(3, dtype=torch.int64))
    "dtype torch.int64 does not match the spec's dtype torch.float32"
"""
from __future__ import annotations

import torch

from ._numbers import _as_numbers, _project_float, _project_int, _to_long
from ._shape import shape_mismatch
from .base import TensorSpec

__all__ = []


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

    def encode(self, value) -> torch.Tensor:
        """``value`` (a number, nested lists, a numpy array or a tensor) as a tensor of the spec's
        dtype on its device, checked against the spec (ValueError saying why it does not fit). It
        is never reshaped, rounded or clamped: a fraction for an integer dtype, a value its dtype
        cannot hold, or a finite value that would become inf is refused (``project`` rounds and
        clamps)."""
        t = _as_numbers(value, "the value to encode")
        out = t.to(device=self.device, dtype=self.dtype)
        if self.dtype.is_floating_point:
            lost = torch.isfinite(t) & ~torch.isfinite(out)
        else:
            back = out.double() if t.is_floating_point() else out.long()
            lost = back != (t.double() if t.is_floating_point() else t.long()).to(back.device)
        if bool(lost.any()):
            k = tuple(lost.nonzero()[0].tolist())
            raise ValueError(
                f"cannot encode {t[k].item()} at index {k} as {self.dtype}: it would become {out[k].item()} "
                "(use project() to round and clamp)"
            )
        self.assert_is_in(out)
        return out

    def _rand_between(self, shape, low, high):
        """Uniform values in ``[low, high]`` (bounds broadcast to ``shape``)."""
        dev = self.device
        u = torch.rand(shape, dtype=torch.float64, device=dev)
        lo, hi = low.double().expand(shape), high.double().expand(shape)
        if self.dtype.is_floating_point:
            finite = torch.isfinite(lo) & torch.isfinite(hi)
            r = torch.where(finite, lo * (1 - u) + hi * u, torch.randn(shape, dtype=torch.float64, device=dev))
            return _project_float(r, low, high, self.dtype)
        lo_i, hi_i = low.long(), high.long()  # the bounds' own shape; u broadcasts over them
        exact = hi_i.double() - lo_i.double() < 2.0**53  # then high - low fits int64 and float64 counts it exactly
        span = torch.where(exact, hi_i - lo_i, 0).double() + 1  # (bounds near 2**62 are 1024 apart as floats)
        off = torch.minimum(torch.floor(u * span), span - 1)
        if bool(exact.all()):  # low + off lies in [low, high] exactly
            return (lo_i + off.long()).to(self.dtype)
        wide = _to_long(torch.floor(lo * (1 - u) + (hi + 1) * u))  # spans past 2**53: float steps are relatively tiny
        r = torch.where(exact, lo_i + torch.where(exact, off, 0).long(), wide)
        return _project_int(r, low, high, self.dtype)
