"""The fields of a tensorclass: how a class's annotations become fields when it is defined,
and how a field reads back.

:func:`_setup_fields` runs once per class (from ``TensorClass.__init_subclass__``): it collects
the annotated names and defaults along the class's bases, refuses names that shadow TensorDict
attributes (unless ``shadow=True``), installs one property per field, and builds the dataclass
twin (``dataclasses.fields``) and the ``__init__`` signature. A field's property reads the
entry from the TensorDict holding the fields; a non-tensor entry gives its value
(:func:`_unwrap`), or the ``NonTensorData`` wrapper when the field is annotated so.

Example:
    >>> from chatdata.td import TensorClass
    >>> class Pair(TensorClass):
    ...     a: torch.Tensor
    ...     b: str = "x"
    >>> Pair._field_names, Pair._field_defaults
    (('a', 'b'), {'b': 'x'})
    >>> import inspect; str(inspect.signature(Pair))
    "(a, *, b='x', batch_size=None, device=None, names=None)"
"""
from __future__ import annotations

import dataclasses
import typing

import torch

from ..core import TensorDict
from ..nontensor import Batched, NonTensorData, NonTensorStack
from .field_types import field_hints, is_non_tensor_hint

__all__ = []


def _is_tensor_annotation(ann) -> bool:
    if ann is torch.Tensor:
        return True
    if isinstance(ann, str):
        return ann.replace(" ", "") in ("torch.Tensor", "Tensor", "torch.Tensor|None", "Tensor|None")
    origin = typing.get_origin(ann)
    if origin is typing.Union:
        return any(a is torch.Tensor for a in typing.get_args(ann))
    return False


def _unwrap(value):
    if isinstance(value, NonTensorData):
        return value.data
    if isinstance(value, NonTensorStack):
        return value.tolist()
    if getattr(value, "_is_non_tensor", False) and hasattr(value, "tolist"):
        return value.tolist()  # a ragged stack of strings: nested lists
    return value


def _field_property(name: str, raw: bool = False):
    def getter(self):
        storage = self._storage
        if isinstance(storage, TensorDict):
            value = storage._tensordict.get(name)
            if value is None and name in self.__dict__.get("_deleted", ()):
                raise AttributeError(name)
            return value if raw else _unwrap(value)
        try:  # a ragged storage: strings come back as nested lists
            return _unwrap(storage.get(name))
        except KeyError:
            return None

    def setter(self, value):
        self.set(name, value)

    return property(getter, setter)


def _setup_fields(cls, root) -> None:
    """Read ``cls``'s fields from its annotations (``root``, the base class ``TensorClass``, and
    its own attributes are never fields)."""
    names, annotations, defaults = [], {}, {}
    for base in reversed(cls.__mro__):
        if base in (root, Batched, object):
            continue
        ann = base.__dict__.get("__annotations__", {})
        for n, t in ann.items():
            if n.startswith("__") or (n.startswith("_") and hasattr(root, n)) or typing.get_origin(t) is typing.ClassVar or (
                    isinstance(t, str) and t.startswith(("ClassVar", "typing.ClassVar"))):
                continue
            if n not in annotations:
                names.append(n)
            annotations[n] = t
            if n in base.__dict__ and not isinstance(base.__dict__[n], property):
                defaults[n] = base.__dict__[n]
    reserved = {"batch_size", "device", "names", "shape"} | (set(dir(TensorDict)) - {"data", "_is_non_tensor"})
    bad = reserved.intersection(names)
    if bad and not cls.__dict__.get("_shadow", getattr(cls, "_shadow", False)):
        raise AttributeError(
            f"Attribute name {sorted(bad)[0]} can't be used with @tensorclass or TensorClass: fields "
            f"{sorted(bad)} shadow TensorDict attributes; declare it with @tensorclass(shadow=True) to allow that"
        )
    cls._field_names = tuple(names)
    cls.__expected_keys__ = set(names)
    cls._field_types = annotations
    cls._field_defaults = defaults
    hints = field_hints(cls)  # a field annotated NonTensorData reads as the wrapper, not its value
    for n in names:
        setattr(cls, n, _field_property(n, raw=is_non_tensor_hint(hints.get(n))))
    try:
        cls._dataclass = dataclasses.make_dataclass(
            cls.__name__,
            [(n, annotations[n], dataclasses.field(default=defaults[n])) if n in defaults else (n, annotations[n]) for n in names],
        )
    except (TypeError, ValueError):  # e.g. a field without default after one with a default
        cls._dataclass = None
    if cls._dataclass is not None:  # dataclasses.is_dataclass / fields() work on the class
        cls.__dataclass_fields__ = cls._dataclass.__dataclass_fields__
    import inspect

    params = [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                default=defaults.get(n, inspect.Parameter.empty)) for n in names]
    seen_default = False
    for i, prm in enumerate(params):  # a signature needs defaults last: keyword-only from there on
        seen_default = seen_default or prm.default is not inspect.Parameter.empty
        if seen_default:
            params[i] = prm.replace(kind=inspect.Parameter.KEYWORD_ONLY)
    params += [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=None)
               for n in ("batch_size", "device", "names") if n not in names]
    cls.__signature__ = inspect.Signature(params)
