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

from ..core import TensorDict
from ..nontensor import Batched, NonTensorData
from .field_types import field_hints, is_non_tensor_hint, is_tensor_hint, is_tensordict_hint, plain_class, union_args
from .registry import _REGISTRY

try:  # numpy is optional
    import numpy as _np
except ImportError:  # pragma: no cover
    _np = None

__all__ = ["set_options", "options_base", "check_tensor_only", "cast_value"]

#: TensorClass itself (casting a mapping into a field builds one when the field's class is a
#: tensorclass). tensorclass/base.py sets it when it defines the class: it imports this module,
#: so this module cannot import it.
tensorclass_type: type = None

_OPTIONS = ("autocast", "nocast", "shadow", "frozen", "tensor_only")
_BASES: dict = {}


def set_options(cls, **opts) -> None:
    """Set the given (non-None) options as class attributes ``_<name>``."""
    for name, value in opts.items():
        if value is not None:
            setattr(cls, f"_{name}", bool(value))
    if getattr(cls, "_autocast", False) and getattr(cls, "_nocast", False):
        raise ValueError(f"tensorclass {cls.__name__}: autocast and nocast exclude each other")
    if getattr(cls, "_tensor_only", False) and (getattr(cls, "_autocast", False) or getattr(cls, "_nocast", False)):
        raise TypeError(f"tensorclass {cls.__name__}: tensor_only excludes autocast and nocast (every field of a "
                        "tensor_only class is a tensor)")


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


def _is_tensor_string(ann: str) -> bool:
    """Best effort for an annotation that could not be evaluated (a forward reference)."""
    import re

    tc_names = {c.__name__ for c in _REGISTRY.values()}
    parts = [p.strip() for p in re.split(r"[|,\[\]]", ann) if p.strip() and p.strip() not in ("Optional", "Union", "typing.Optional", "typing.Union")]
    return all(p in ("torch.Tensor", "Tensor", "None") or p.startswith("torch.") and p.endswith("Tensor")
               or p in ("TensorDict", "TensorDictBase") or p in tc_names for p in parts)


def check_tensor_only(cls) -> None:
    """``tensor_only`` classes accept tensor annotations (and None) only."""
    if not getattr(cls, "_tensor_only", False):
        return
    hints = field_hints(cls)
    bad = [n for n, t in hints.items() if not (_is_tensor_string(t) if isinstance(t, str) else is_tensor_hint(t))]
    if bad:
        raise TypeError(
            f"tensor_only requires types to be Tensor, Tensor-subtrypes or None; {cls.__name__} fields "
            f"{bad} are not"
        )


def _string_target(cls, ann: str):
    """A class for a forward reference that could not be evaluated, by name."""
    name = ann.strip().strip("'\"").replace("Optional[", "").rstrip("]").split("|")[0].strip()
    if name == cls.__name__:
        return cls
    for c in reversed(list(_REGISTRY.values())):
        if c.__name__ == name:
            return c
    return ann


def _resolve(cls, name: str, *, unions: bool):
    """The target class of field ``name``: its annotation when that is a class; for a union the
    first member class when ``unions`` (else None: autocast leaves unions alone, as tensordict)."""
    hint = field_hints(cls).get(name)
    if isinstance(hint, str):
        return _string_target(cls, hint)
    if hint is typing.Any:
        return typing.Any
    members = union_args(hint)
    if members is not None:
        if not unions:
            return None
        classes = [plain_class(m) for m in members if plain_class(m) not in (None, type(None))]
        return classes[0] if classes else None
    return plain_class(hint)


def _plain_mapping(value):
    """A Mapping (UserDict, nested ones too) as a dict for a TensorDict; TensorDicts and other
    collections inside are kept as they are (same object, lock state kept)."""
    if isinstance(value, Batched) or not isinstance(value, Mapping):
        return value
    return {k: _plain_mapping(v) for k, v in value.items()}


def _from_mapping(target, value, batch_size):
    """A tensorclass built from a mapping of (some of) its fields; missing fields read None."""
    if not set(value) <= set(target._field_names):
        return target.from_dict(dict(value), batch_size=batch_size)
    required = [n for n in target._field_names if n not in target._field_defaults]
    if all(n in value for n in required):
        return target(**value, batch_size=batch_size)
    obj = target._from_storage(TensorDict(batch_size=batch_size))
    for k, v in value.items():
        if v is not None:
            obj.set(k, v)
    return obj


def _cast_mapping(cls, name, value, batch_size):
    tensor_only = getattr(cls, "_tensor_only", False)
    autocast = getattr(cls, "_autocast", False)
    hint = field_hints(cls).get(name)
    if tensor_only and not isinstance(hint, str):
        if is_non_tensor_hint(hint):
            return NonTensorData(value, batch_size=batch_size)
        if is_tensordict_hint(hint):
            return TensorDict(_plain_mapping(value), batch_size=batch_size)
    target = _resolve(cls, name, unions=not autocast)
    if isinstance(target, type) and issubclass(target, tensorclass_type):
        return _from_mapping(target, value, batch_size)
    if target is TensorDict or tensor_only or autocast and target is typing.Any:
        return TensorDict(_plain_mapping(value), batch_size=batch_size)
    return value


def _numeric(value) -> bool:
    if isinstance(value, (bool, int, float)):
        return True
    return _np is not None and isinstance(value, (_np.ndarray, _np.generic)) and value.dtype != object


def cast_value(cls, name: str, value, batch_size):
    """The value to store for field ``name`` of ``cls`` (see the module docstring)."""
    if isinstance(value, Mapping) and not isinstance(value, TensorDict):
        return _cast_mapping(cls, name, value, batch_size)
    if getattr(cls, "_tensor_only", False):
        return torch.as_tensor(value)
    if getattr(cls, "_nocast", False):
        return value
    if getattr(cls, "_autocast", False):
        target = _resolve(cls, name, unions=False)
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
