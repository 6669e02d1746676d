"""Numbers and dtypes for the tensor specs: a dtype given by name or object, ``(dtype, device)``
in either order, bounds and values as real tensors (float64 for Python floats), the range a
dtype holds, and projection into ``[low, high]`` (integers rounded and saturated, NaN mapped to
0) that cannot leave the box by rounding.

Example:
    >>> _as_dtype("float16", torch.float32), _dtype_range(torch.int8)
    (torch.float16, (-128, 127))
    >>> _project_int(torch.tensor([-5.4, 2.6, float("nan")]), torch.tensor(0), torch.tensor(2), torch.int64).tolist()
    [0, 2, 0]
"""
from __future__ import annotations

import operator

import torch

__all__ = []

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


def _as_int(value):
    """``value`` as a Python int when it is an integer (an int, a numpy integer, a one-element
    integer tensor); otherwise (a bool, a float, a float tensor, ...) ``value`` as it is, for the
    caller's own error message."""
    if isinstance(value, bool) or (isinstance(value, torch.Tensor) and value.dtype == torch.bool):
        return value
    try:
        return operator.index(value)
    except TypeError:
        return value


def _dtype_range(dtype: torch.dtype):
    if dtype == torch.bool:
        return 0, 1
    if dtype.is_floating_point:
        info = torch.finfo(dtype)
    else:
        info = torch.iinfo(dtype)
    return info.min, info.max


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
