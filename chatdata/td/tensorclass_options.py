"""Tensorclass options and how a field value is cast before it is stored.

Options (``@tensorclass(autocast=True)``, ``class X(TensorClass["nocast"])`` or
``class X(TensorClass, nocast=True)``):

- default: numbers, bools and numpy arrays become tensors (when their shape fits the batch;
  a scalar for a batched class stays one value for the whole batch); strings and other objects are
  non-tensor data; a dict given to a field annotated as a tensorclass or TensorDict becomes one.
- ``nocast``: values are stored as given (an int stays an int).
- ``autocast``: values are cast to their field's annotation (``int``, ``str``, ``float``,
  ``np.ndarray``, ``torch.Tensor``, a tensorclass, TensorDict).
- ``tensor_only``: every field is a tensor (annotations must be tensor types or None).
- ``shadow``: fields may be named ``batch_size``, ``device`` or ``names``.
- ``frozen``: fields cannot be reassigned after construction.

Example:
    >>> @tensorclass(nocast=True)
    ... class X:
    ...     a: int
    >>> X(a=1).a
    1
"""
from __future__ import annotations

import typing
from collections.abc import Mapping

import torch

try:  # numpy is optional
    import numpy as _np
except ImportError:  # pragma: no cover
    _np = None

__all__ = ["set_options", "options_base", "check_tensor_only", "cast_value"]

_OPTIONS = ("autocast", "nocast", "shadow", "frozen", "tensor_only")
_BASES: dict = {}


def set_options(cls, **opts) -> None:
    """Set the given (non-None) options as class attributes ``_<name>``."""
    for name, value in opts.items():
        if value is not None:
            setattr(cls, f"_{name}", bool(value))
    if getattr(cls, "_autocast", False) and getattr(cls, "_nocast", False):
        raise ValueError(f"tensorclass {cls.__name__}: autocast and nocast exclude each other")


def options_base(cls, item):
    """The base class ``cls[item]`` (``TensorClass["nocast", "shadow"]``), cached."""
    items = item if isinstance(item, tuple) else (item,)
    unknown = [i for i in items if i not in _OPTIONS]
    if unknown:
        raise ValueError(f"unknown tensorclass option(s) {unknown}; known: {list(_OPTIONS)}")
    key = (cls, items)
    if key not in _BASES:
        _BASES[key] = type(f"{cls.__name__}[{', '.join(items)}]", (cls,), {"__module__": cls.__module__},
                           **{i: True for i in items})
    return _BASES[key]


def _is_tensor_type(ann) -> bool:
    if ann is None or ann is type(None):
        return True
    if isinstance(ann, type):
        if issubclass(ann, torch.Tensor):
            return True
        from .batched import Batched

        return issubclass(ann, Batched)
    if isinstance(ann, str):
        import re

        from .tensorclass import _REGISTRY

        tc_names = {c.__name__ for c in _REGISTRY.values()}
        parts = [p.strip() for p in re.split(r"[|,\[\]]", ann) if p.strip() and p.strip() not in ("Optional", "Union", "typing.Optional", "typing.Union")]
        return all(p in ("torch.Tensor", "Tensor", "None") or p.startswith("torch.") and p.endswith("Tensor")
                   or p in ("TensorDict", "TensorDictBase") or p in tc_names for p in parts)
    args = typing.get_args(ann)
    return bool(args) and all(_is_tensor_type(a) for a in args)


def check_tensor_only(cls) -> None:
    """``tensor_only`` classes accept tensor annotations (and None) only."""
    if not getattr(cls, "_tensor_only", False):
        return
    bad = [n for n, t in cls._field_types.items() if not _is_tensor_type(t)]
    if bad:
        raise TypeError(
            f"tensor_only requires types to be Tensor, Tensor-subtrypes or None; {cls.__name__} fields "
            f"{bad} are not"
        )


def _resolve(cls, ann):
    """A string annotation naming ``cls`` or a defined tensorclass becomes that class."""
    if isinstance(ann, str):
        name = ann.strip().strip("'\"")
        name = name.replace("Optional[", "").rstrip("]").split("|")[0].strip()
        if name == cls.__name__:
            return cls
        builtin = {"int": int, "float": float, "bool": bool, "str": str, "torch.Tensor": torch.Tensor,
                   "Tensor": torch.Tensor, "Any": typing.Any, "typing.Any": typing.Any}
        if _np is not None:
            builtin.update({"np.ndarray": _np.ndarray, "numpy.ndarray": _np.ndarray})
        if name in builtin:
            return builtin[name]
        if name in ("TensorDict", "TensorDictBase"):
            from .tensordict import TensorDict

            return TensorDict
        from .tensorclass import _REGISTRY

        for c in reversed(list(_REGISTRY.values())):
            if c.__name__ == name:
                return c
        return ann
    args = typing.get_args(ann)
    if args:
        for a in args:
            r = _resolve(cls, a)
            if isinstance(r, type) and r is not type(None):
                return r
    return ann


def _numeric(value) -> bool:
    if isinstance(value, (bool, int, float)):
        return True
    return _np is not None and isinstance(value, (_np.ndarray, _np.generic)) and value.dtype != object


def cast_value(cls, name: str, value, batch_size):
    """The value to store for field ``name`` of ``cls`` (see the module docstring)."""
    from .tensorclass import TensorClass
    from .tensordict import TensorDict

    ann = cls._field_types.get(name)
    if isinstance(value, Mapping) and not isinstance(value, TensorDict):
        target = _resolve(cls, ann)
        if isinstance(target, type) and issubclass(target, TensorClass):
            if set(value) <= set(target._field_names):
                return target(**value, batch_size=batch_size)
            return target.from_dict(dict(value), batch_size=batch_size)
        if target is TensorDict or getattr(cls, "_tensor_only", False) or getattr(cls, "_autocast", False) and target is typing.Any:
            return TensorDict(dict(value), batch_size=batch_size)
        return value
    if getattr(cls, "_tensor_only", False):
        return torch.as_tensor(value)
    if getattr(cls, "_nocast", False):
        return value
    if getattr(cls, "_autocast", False):
        target = _resolve(cls, ann)
        if target is torch.Tensor:
            if isinstance(value, str):
                raise TypeError(f"{cls.__name__}.{name} is annotated as a Tensor; cannot cast {value!r} to one")
            return torch.as_tensor(value)
        if target in (int, float, bool, str):
            return target(value)
        if _np is not None and target is _np.ndarray:
            return _np.asarray(value)
        return _as_batched_tensor(value, batch_size)
    return _as_batched_tensor(value, batch_size)


def _as_batched_tensor(value, batch_size):
    """Numbers become tensors when they fit the batch; a scalar given to a batched class stays
    one value for the whole batch (non-tensor data), as a constant column does."""
    if not _numeric(value):
        return value
    t = torch.as_tensor(value)
    nb = len(batch_size)
    return t if t.ndim >= nb and tuple(t.shape[:nb]) == tuple(batch_size) else value
