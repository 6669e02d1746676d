"""``from_dataclass``: a dataclass type becomes a tensorclass type, an instance a tensorclass instance.

The new class has the dataclass's fields (annotations, defaults, ``field(default_factory=...)``)
and the methods written in its body (``__post_init__`` too); the dataclass's generated
``__init__`` / ``__repr__`` / ``__eq__`` are replaced by the tensorclass ones. The dataclass
itself is left untouched. Casting options are the tensorclass ones (``autocast``, ``nocast``,
``tensor_only``, ``frozen``, ``shadow``). The class is built once per (dataclass, options) and
cached (weakly keyed by the dataclass): converted instances of one dataclass share their class,
so they stack.

Example:
    >>> import dataclasses
    >>> @dataclasses.dataclass
    ... class Step:
    ...     reward: float
    ...     note: str = ""
    >>> s = from_dataclass(Step(reward=1.5, note="ok"))
    >>> s.reward, s.note
    (tensor(1.5000), 'ok')
    >>> Steps = from_dataclass(Step)
    >>> Steps(reward=torch.zeros(4), batch_size=[4]).reward.shape
    torch.Size([4])
"""
from __future__ import annotations

import dataclasses
import threading
import typing
import weakref

import torch

from .base import TensorClass

__all__ = ["from_dataclass", "tensordict_from_dataclass"]

# what ``@dataclass`` writes into a class body; the tensorclass provides its own
_GENERATED = {"__init__", "__repr__", "__eq__", "__hash__", "__setattr__", "__delattr__", "__lt__", "__le__",
              "__gt__", "__ge__", "__match_args__", "__dataclass_fields__", "__dataclass_params__",
              "__getstate__", "__setstate__", "__slots__", "__weakref__", "__dict__", "__annotations__",
              "__module__", "__qualname__", "__doc__"}

# dataclass -> {options: tensorclass}; weak so a dropped dataclass (and its tensorclass) can go
_CACHE: "weakref.WeakKeyDictionary[type, dict]" = weakref.WeakKeyDictionary()
_CACHE_LOCK = threading.RLock()


def _cached_class(dc: type, options: dict) -> type:
    key = tuple(sorted(options.items()))
    per_dc = _CACHE.get(dc)
    if per_dc is not None and key in per_dc:
        return per_dc[key]
    with _CACHE_LOCK:
        per_dc = _CACHE.setdefault(dc, {})
        if key not in per_dc:
            per_dc[key] = _class_from_dataclass(dc, options)
        return per_dc[key]


def _class_from_dataclass(dc: type, options: dict) -> type:
    try:
        hints = typing.get_type_hints(dc)
    except Exception:  # noqa: BLE001 - unresolvable forward references: keep the written annotations
        hints = {}
    namespace: dict = {"__module__": dc.__module__, "__qualname__": dc.__qualname__, "__doc__": dc.__doc__,
                       "__annotations__": {}}
    fields = dataclasses.fields(dc)
    for f in fields:
        namespace["__annotations__"][f.name] = hints.get(f.name, f.type)
        if f.default is not dataclasses.MISSING:
            namespace[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            namespace[f.name] = dataclasses.field(default_factory=f.default_factory)
    names = {f.name for f in fields}
    for base in reversed(dc.__mro__[:-1]):  # methods and properties written in the dataclass (and its bases)
        for k, v in vars(base).items():
            if k in names or (k.startswith("__") and k != "__post_init__") or k in _GENERATED:
                continue
            namespace[k] = v
    return type(dc.__name__, (TensorClass,), namespace, **options)


def from_dataclass(obj, *, dest_cls=None, auto_batch_size: bool = False, batch_dims: int | None = None,
                   batch_size=None, frozen: bool = False, autocast: bool = False, nocast: bool = False,
                   inplace: bool = False, shadow: bool = False, tensor_only: bool = False, device=None):
    """A tensorclass type from a dataclass type, or a tensorclass instance from a dataclass instance.

    ``dest_cls`` (instances): the tensorclass to build (default: ``from_dataclass(type(obj), ...)``).
    ``batch_size`` / ``device`` go to the new instance; ``auto_batch_size=True`` sets the batch size
    to the leading dims the tensor fields share (``batch_dims`` limits how many). A tensorclass type
    is returned as it is. Nested dataclass instances in fields become tensorclass instances too.
    ``inplace=True`` (rewrite the dataclass type itself) is refused: tensorclasses are new classes.
    The class is cached per (dataclass, options): every call returns the same one.

    Example:
        >>> import dataclasses
        >>> @dataclasses.dataclass
        ... class Point:
        ...     x: int
        >>> from_dataclass(Point(3)).x
        tensor(3)
        >>> from_dataclass(Point, autocast=True)(x=3.0).x
        3
        >>> type(from_dataclass(Point(1))) is type(from_dataclass(Point(2))) is from_dataclass(Point)
        True
    """
    options = {"autocast": autocast, "nocast": nocast, "tensor_only": tensor_only, "frozen": frozen, "shadow": shadow}
    if isinstance(obj, type):
        if issubclass(obj, TensorClass):
            return obj
        if not dataclasses.is_dataclass(obj):
            raise TypeError(f"from_dataclass expects a dataclass type or instance, got the class {obj.__name__}")
        if inplace:
            raise TypeError("from_dataclass(inplace=True) is not supported: chatdata builds a new tensorclass and "
                            "leaves the dataclass unchanged; use the returned class")
        return _cached_class(obj, options)
    if not dataclasses.is_dataclass(obj):
        raise TypeError(f"from_dataclass expects a dataclass type or instance, got a {type(obj).__name__}")
    if auto_batch_size and batch_size is not None:
        raise TypeError("from_dataclass: pass batch_size or auto_batch_size=True, not both")
    cls = dest_cls if dest_cls is not None else from_dataclass(type(obj), **options)
    if not (isinstance(cls, type) and issubclass(cls, TensorClass)):
        raise TypeError(f"from_dataclass: dest_cls must be a tensorclass, got {cls!r}")
    values = {}
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value) and not isinstance(value, (type, TensorClass)):
            value = from_dataclass(value, **options)
        values[f.name] = value
    out = cls(**values, batch_size=batch_size, device=device)
    if auto_batch_size:
        out.batch_size = _common_batch(out, batch_dims)
    return out


def _common_batch(tc, batch_dims):
    shapes = [v.shape for _, v in tc._storage.items(include_nested=True, leaves_only=True) if isinstance(v, torch.Tensor)]
    if not shapes:
        return torch.Size([])
    dims = []
    for i in range(min(len(s) for s in shapes)):
        if batch_dims is not None and i >= batch_dims or len({s[i] for s in shapes}) != 1:
            break
        dims.append(shapes[0][i])
    return torch.Size(dims)


def tensordict_from_dataclass(cls, dataclass, dest_cls=None, auto_batch_size: bool = False, batch_dims=None,
                              as_tensorclass: bool = False, device=None):
    """``TensorDict.from_dataclass(obj)``: the dataclass instance's fields as a TensorDict
    (``as_tensorclass=True``: the tensorclass instance).

    Example:
        >>> import dataclasses
        >>> Point = dataclasses.make_dataclass("Point", [("x", int)])
        >>> TensorDict.from_dataclass(Point(3))["x"]
        tensor(3)
    """
    out = from_dataclass(dataclass, dest_cls=dest_cls, auto_batch_size=auto_batch_size, batch_dims=batch_dims,
                         device=device)
    if isinstance(out, type):
        raise TypeError("TensorDict.from_dataclass expects a dataclass instance; use from_dataclass for a type")
    return out if as_tensorclass else out._storage
