"""The tensor dtypes the on-disk format stores, by name (``"float32"``, ``"bfloat16"``, ...).

Example:
    >>> import torch
    >>> dtype_name(torch.bfloat16), parse_dtype("int64", "meta.json")
    ('bfloat16', torch.int64)
"""
from __future__ import annotations

import torch

from .fsops import FormatError

__all__ = ["dtype_name", "parse_dtype", "raw_bytes"]

_DTYPES = {
    str(d).replace("torch.", ""): d
    for d in (torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32,
              torch.int16, torch.int8, torch.uint8, torch.bool, torch.complex64, torch.complex128,
              torch.uint16, torch.uint32, torch.uint64, torch.float8_e4m3fn, torch.float8_e5m2)
}


def raw_bytes(t: torch.Tensor) -> memoryview:
    """The bytes of ``t``'s values in C order, as a file stores them (a copy only when the layout
    needs one: a strided view, a lazy conj/neg view, a one-item slice whose stride is not 1).

    Example:
        >>> bytes(raw_bytes(torch.arange(6, dtype=torch.uint8).reshape(2, 3)[:, 1:]))
        b'\\x01\\x02\\x04\\x05'
    """
    flat = t.detach().cpu().resolve_conj().resolve_neg().contiguous().reshape(-1)
    if not flat.numel():
        return memoryview(b"")
    if flat.stride(0) != 1:  # contiguous() keeps a one-item view's stride, which .view(uint8) refuses
        flat = flat.clone(memory_format=torch.contiguous_format)
    return memoryview(flat.view(torch.uint8).numpy())


def dtype_name(dtype: torch.dtype) -> str:
    """The name a dtype is saved under; TypeError for one the format cannot store."""
    name = str(dtype).replace("torch.", "")
    if name not in _DTYPES:
        raise TypeError(f"dtype {dtype} cannot be saved; supported: {sorted(_DTYPES)}")
    return name


def parse_dtype(name, where) -> torch.dtype:
    """The dtype saved as ``name``; FormatError naming ``where`` for an unknown one."""
    name = str(name).replace("torch.", "")
    if name not in _DTYPES:
        raise FormatError(f"{where}: unknown dtype {name!r}")
    return _DTYPES[name]
