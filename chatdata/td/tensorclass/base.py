"""``TensorClass``: dataclass-like classes whose fields live in a TensorDict (``@tensorclass``,
in :mod:`.decorator`, makes one from an annotated class).

Fields annotated as tensors hold tensors; other fields hold strings, lists, dicts, None or
nested collections, stored as non-tensor entries, so indexing, stacking and saving treat every
field alike. Reading a non-tensor field gives the value (or nested lists for a stack).

Example:
    >>> @tensorclass
    ... class Sample:
    ...     x: torch.Tensor
    ...     label: str
    >>> s = Sample(x=torch.zeros(3, 2), label="cat", batch_size=[3])
    >>> s[0].x.shape, s[1:].label
    (torch.Size([2]), 'cat')
"""
from __future__ import annotations

import dataclasses
import typing

import torch

from ..core import GENERIC_NESTED_ERR, TensorDict, is_valid_key
from ..nontensor import Batched, NonTensorData, NonTensorStack, list_to_stack
from . import options as _options
from .field_types import field_hints, is_non_tensor_hint
from .options import cast_value, check_tensor_only, options_base, set_options
from .registry import _REGISTRY, registered_tensorclass
from .repr import tensorclass_repr

__all__ = ["TensorClass", "is_tensorclass", "register_tensorclass", "registered_tensorclass"]

_MISSING = dataclasses.MISSING

def is_tensorclass(obj) -> bool:
    """``True`` for tensorclass instances and classes."""
    cls = obj if isinstance(obj, type) else type(obj)
    return issubclass(cls, TensorClass)


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


def _setup_fields(cls) -> None:
    names, annotations, defaults = [], {}, {}
    for base in reversed(cls.__mro__):
        if base in (TensorClass, Batched, object):
            continue
        ann = base.__dict__.get("__annotations__", {})
        for n, t in ann.items():
            if n.startswith("__") or (n.startswith("_") and hasattr(TensorClass, n)) or typing.get_origin(t) is typing.ClassVar or (
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


class TensorClass(Batched):
    """Base class of tensorclasses: subclass it with annotated fields, or use ``@tensorclass``.

    Example:
        >>> class Pair(TensorClass):
        ...     a: torch.Tensor
        ...     b: torch.Tensor
        >>> Pair(a=torch.zeros(2), b=torch.ones(2), batch_size=[2]).b.tolist()
        [1.0, 1.0]
    """

    _field_names: tuple = ()
    _autocast = False
    _nocast = False
    _shadow = False
    _frozen = False
    _tensor_only = False

    def __init_subclass__(cls, autocast=None, nocast=None, shadow=None, frozen=None, tensor_only=None, **kwargs):
        super().__init_subclass__(**kwargs)
        set_options(cls, autocast=autocast, nocast=nocast, shadow=shadow, frozen=frozen, tensor_only=tensor_only)
        _setup_fields(cls)
        check_tensor_only(cls)
        _REGISTRY[f"{cls.__module__}.{cls.__qualname__}"] = cls

    def __class_getitem__(cls, item):
        """``class X(TensorClass["nocast"])``: a base with those options set."""
        return options_base(cls, item)

    def __init__(self, *args, batch_size=None, device=None, names=None, **kwargs):
        if len(args) > len(self._field_names):
            raise TypeError(f"{type(self).__name__}.__init__() takes {len(self._field_names) + 1} positional arguments "
                            f"but {len(args) + 1} were given (its fields are {list(self._field_names)})")
        for n, v in zip(self._field_names, args):
            if n in kwargs:
                raise TypeError(f"{type(self).__name__} got field {n!r} twice")
            kwargs[n] = v
        unknown = set(kwargs) - set(self._field_names)
        if unknown:
            raise TypeError(f"{type(self).__name__} got unexpected fields {sorted(unknown)}; its fields are {list(self._field_names)}")
        for n, v in (("batch_size", batch_size), ("device", device), ("names", names)):
            if n in self._field_names and v is not None:  # shadow=True: a field of that name
                kwargs[n] = v
        if "batch_size" in self._field_names:
            batch_size = None
        if "device" in self._field_names:
            device = None
        object.__setattr__(self, "_storage", TensorDict(batch_size=batch_size, device=device))
        missing = [repr(n) for n in self._field_names if n not in kwargs and n not in self._field_defaults]
        if missing:  # dataclass wording
            listed = missing[0] if len(missing) == 1 else ", ".join(missing[:-1]) + f"{',' * (len(missing) > 2)} and {missing[-1]}"
            raise TypeError(f"{type(self).__name__}.__init__() missing {len(missing)} required positional "
                            f"argument{'s' * (len(missing) > 1)}: {listed}")
        for n in self._field_names:
            if n in kwargs:
                value = kwargs[n]
            elif n in self._field_defaults:
                value = self._field_defaults[n]
                if isinstance(value, dataclasses.Field):  # field(default=...) / field(default_factory=...)
                    value = value.default_factory() if value.default_factory is not _MISSING else value.default
            else:
                raise TypeError(f"{type(self).__name__} missing required field {n!r}")
            if value is not None:
                setattr(self, n, value)  # through __setattr__, which subclasses may override
        post = getattr(self, "__post_init__", None)
        if post is not None:
            post()
        object.__setattr__(self, "_initialised", True)
        if self._frozen:
            self._storage.lock_()

    # -- construction from storage ----------------------------------------------------------
    @classmethod
    def _from_storage(cls, storage) -> "TensorClass":
        obj = cls.__new__(cls)
        object.__setattr__(obj, "_storage", storage)
        return obj

    @classmethod
    def from_tensordict(cls, tensordict, non_tensordict=None, safe: bool = True) -> "TensorClass":
        """Wrap ``tensordict`` (no copy); ``non_tensordict`` adds non-tensor fields."""
        if safe:
            extra = set(tensordict.keys()) - set(cls._field_names)
            if extra:
                raise KeyError(f"{cls.__name__} has no fields {sorted(extra)}; its fields are {list(cls._field_names)}")
        obj = cls._from_storage(tensordict)
        for k, v in (non_tensordict or {}).items():
            if v is not None:
                obj.set(k, v)
        return obj

    @classmethod
    def fields(cls):
        """The dataclass fields of this class."""
        if cls._dataclass is not None:
            return dataclasses.fields(cls._dataclass)
        return tuple(dataclasses.field() for _ in cls._field_names)

    # -- attributes -----------------------------------------------------------------------
    def __setattr__(self, name, value):
        if name in self._field_names:
            self.set(name, value)
            return
        if name.startswith("_"):
            object.__setattr__(self, name, value)
            return
        if name == "device":
            raise RuntimeError("device cannot be set using tensorclass.device = device; use tc = tc.to(device) "
                               "or tc.clear_device()")
        if name in ("batch_size",):
            self._storage.batch_size = value
            return
        if isinstance(getattr(type(self), name, None), property):  # a user property with a setter
            object.__setattr__(self, name, value)
            return
        raise AttributeError(
            f"Cannot set the attribute {name!r}: {type(self).__name__} has no such field; its fields are "
            f"{list(self._field_names)}"
        )

    def __delattr__(self, name):
        if name in self._field_names:  # ``del tc.x``: the field is gone (AttributeError) until set again
            if self._storage._tensordict.pop(name, None) is None:
                raise AttributeError(name)
            self.__dict__.setdefault("_deleted", set()).add(name)
            return
        object.__delattr__(self, name)

    @property
    def _tensordict(self):
        """The TensorDict holding the fields (tensordict's name for it)."""
        return self._storage

    def __getattr__(self, name):
        # TensorDict methods the class does not define (select, exclude, gather, to_dict, ...):
        # run on the storage; a TensorDict result with our fields comes back as this class
        if name.startswith("__") or name in ("_storage", "_field_names"):
            raise AttributeError(name)
        if name in self.__dict__.get("_deleted", ()):
            raise AttributeError(f"{type(self).__name__}.{name} was deleted (del); set it again to use it")
        storage = self.__dict__.get("_storage")
        if storage is None:
            raise AttributeError(name)
        attr = getattr(storage, name, None)
        if attr is None or not callable(attr):
            if attr is None:
                raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")
            return self._wrap_result(attr)  # td.grad / td.data: collections come back as this class

        def method(*args, **kwargs):
            args = [a._storage if isinstance(a, TensorClass) else a for a in args]
            kwargs = {k: v._storage if isinstance(v, TensorClass) else v for k, v in kwargs.items()}
            return self._wrap_result(attr(*args, **kwargs))

        return method

    def _wrap_result(self, out):
        if out is self._storage:
            return self
        if isinstance(out, TensorDict) and set(out.keys()) <= set(self._field_names):
            return self._from_storage(out)
        if isinstance(out, (tuple, list)) and out and all(isinstance(o, TensorDict) for o in out):
            return type(out)(self._wrap_result(o) for o in out)
        return out

    @classmethod
    def from_dict(cls, input_dict, batch_size=None, device=None, batch_dims=None, auto_batch_size=False, **kwargs):
        """Build from a (nested) dict of field values."""
        td = TensorDict.from_dict(dict(input_dict), batch_size=batch_size, device=device, batch_dims=batch_dims,
                                  auto_batch_size=auto_batch_size)
        return cls.from_tensordict(td, safe=False)

    @classmethod
    def _from_tensordict(cls, tensordict, non_tensordict=None, safe: bool = True):
        """Like :meth:`from_tensordict`, then ``__post_init__`` (validation) when the class has one."""
        obj = cls.from_tensordict(tensordict, non_tensordict, safe=safe)
        post = getattr(obj, "__post_init__", None)
        if post is not None:
            post()
        return obj

    @property
    def batch_size(self) -> torch.Size:
        return self._storage.batch_size

    @property
    def device(self):
        return self._storage.device

    @property
    def names(self):
        return [None] * len(self.batch_size)

    def get(self, key, default=...):
        """A field's value (nested keys go into nested collections); ``default`` (None when
        not given) for a missing one. ``get("batch_size")`` / ``"device"`` / ``"names"`` / ``"shape"``
        give those attributes when no field has that name."""
        if type(key) is not str and not is_valid_key(key):  # a str is always valid: skip the check
            raise KeyError(GENERIC_NESTED_ERR.format(key))
        try:
            return _unwrap(self._storage._get_raw(key))
        except KeyError:
            if key in ("batch_size", "device", "names", "shape") and key not in self._field_names:
                return getattr(self, key)
            return None if default is ... else default

    def _get_raw(self, key):
        return self._storage._get_raw(key)

    def set(self, key, value, inplace: bool = False, non_blocking: bool = False):
        """Set a field (``inplace=True`` writes into the existing entry); returns self."""
        name = key[0] if isinstance(key, tuple) else key
        if name not in self._field_names:
            raise AttributeError(f"Cannot set the attribute {name!r}: {type(self).__name__} has no such field; its "
                                 f"fields are {list(self._field_names)}")
        if isinstance(key, tuple) and len(key) > 1:
            self._storage.set(key, value, inplace=inplace)
            return self
        if "_deleted" in self.__dict__:
            self.__dict__["_deleted"].discard(name)
        if value is None:
            if isinstance(self._storage, TensorDict):
                self._storage._tensordict.pop(name, None)
            return self
        if self._frozen and "_storage" in self.__dict__ and getattr(self, "_initialised", False):
            raise dataclasses.FrozenInstanceError(f"{type(self).__name__} is frozen: its fields cannot be set")
        if not isinstance(value, (torch.Tensor, Batched)) or (self._autocast and isinstance(value, torch.Tensor)):
            value = cast_value(type(self), name, value, self._storage.batch_size)
        if not isinstance(value, (torch.Tensor, Batched)) and (self._nocast or not _is_tensor_annotation(self._field_types.get(name))):
            bs = self._storage.batch_size
            if isinstance(value, list) and bs and list_to_stack():
                value = NonTensorStack.from_list(value, batch_size=bs)
            else:
                value = NonTensorData(value, batch_size=bs)
        self._storage.set(name, value, inplace=inplace)
        return self

    def keys(self, *args, **kwargs):
        return self._storage.keys(*args, **kwargs)

    def _iter_keys(self, *args, **kwargs):
        # lets a parent's keys(include_nested=True) (and so consolidate, state_dict...) see our fields
        return self._storage._iter_keys(*args, **kwargs)

    def items(self, *args, **kwargs):
        return self._storage.items(*args, **kwargs)

    # -- shape machinery ----------------------------------------------------------------------
    def _batch_op(self, fn):
        return self._from_storage(self._storage._batch_op(fn))

    def _index(self, index):
        return self._from_storage(self._storage._index(index))

    def __getitem__(self, index):
        if isinstance(index, str) or (isinstance(index, tuple) and index and all(isinstance(i, str) for i in index)):
            return self.get(index)
        return self._index(index)

    def __setitem__(self, index, value):
        if isinstance(index, str):
            self.set(index, value)
            return
        self._storage[index] = value._storage if isinstance(value, TensorClass) else value

    def __len__(self):
        return len(self._storage)

    def numel(self) -> int:
        """The number of elements: its storage's (over a ragged batch ``(B, -1)``, every item of
        every row, where the product of the batch size would count -1 per row)."""
        return self._storage.numel()

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    def unbind(self, dim: int = 0):
        return tuple(self._from_storage(s) for s in self._storage.unbind(dim))

    # -- forwarded collection operations --------------------------------------------------------
    def to_tensordict(self, *, retain_none: bool | None = None) -> TensorDict:
        """A copy of the fields as a plain TensorDict."""
        return self._storage.clone()

    def clone(self, recurse: bool = True):
        return self._from_storage(self._storage.clone(recurse))

    def to(self, *args, **kwargs):
        out = self._storage.to(*args, **kwargs)
        return self if out is self._storage else self._from_storage(out)

    def cpu(self):
        return self.to("cpu")

    def apply(self, fn, *others, **kwargs):
        out = self._storage.apply(fn, *[o._storage if isinstance(o, TensorClass) else o for o in others], **kwargs)
        return self if kwargs.get("inplace") else self._from_storage(out)

    def _compare(self, other, op):
        return self._wrap_result(self._storage._compare(other._storage if isinstance(other, TensorClass) else other, op))

    def __enter__(self):  # ``with tc.lock_():`` / ``with tc.unlock_():``
        self._storage.__enter__()
        return self

    def __exit__(self, *exc):
        return self._storage.__exit__(*exc)

    def __eq__(self, other):
        return self._compare(other, lambda a, b: a == b)

    def __ne__(self, other):
        return self._compare(other, lambda a, b: a != b)

    def all(self, dim=None):
        return self._wrap_result(self._storage.all(dim))

    def _binop(self, name, other):
        other = other._storage if isinstance(other, TensorClass) else other
        return self._wrap_result(getattr(self._storage, name)(other))

    __add__ = lambda self, o: self._binop("__add__", o)  # noqa: E731
    __radd__ = lambda self, o: self._binop("__radd__", o)  # noqa: E731
    __sub__ = lambda self, o: self._binop("__sub__", o)  # noqa: E731
    __rsub__ = lambda self, o: self._binop("__rsub__", o)  # noqa: E731
    __mul__ = lambda self, o: self._binop("__mul__", o)  # noqa: E731
    __rmul__ = lambda self, o: self._binop("__rmul__", o)  # noqa: E731
    __truediv__ = lambda self, o: self._binop("__truediv__", o)  # noqa: E731
    __rtruediv__ = lambda self, o: self._binop("__rtruediv__", o)  # noqa: E731
    __pow__ = lambda self, o: self._binop("__pow__", o)  # noqa: E731
    __lt__ = lambda self, o: self._binop("__lt__", o)  # noqa: E731
    __le__ = lambda self, o: self._binop("__le__", o)  # noqa: E731
    __gt__ = lambda self, o: self._binop("__gt__", o)  # noqa: E731
    __ge__ = lambda self, o: self._binop("__ge__", o)  # noqa: E731
    __or__ = lambda self, o: self._binop("__or__", o)  # noqa: E731
    __and__ = lambda self, o: self._binop("__and__", o)  # noqa: E731
    __xor__ = lambda self, o: self._binop("__xor__", o)  # noqa: E731
    __neg__ = lambda self: self._wrap_result(-self._storage)  # noqa: E731
    __abs__ = lambda self: self._wrap_result(abs(self._storage))  # noqa: E731
    __invert__ = lambda self: self._wrap_result(~self._storage)  # noqa: E731

    def any(self, dim=None):
        return self._wrap_result(self._storage.any(dim))

    def zero_(self):
        self._storage.zero_()
        return self

    def lock_(self):
        self._storage.lock_()
        return self

    def unlock_(self):
        self._storage.unlock_()
        return self

    @property
    def is_locked(self) -> bool:
        return self._storage.is_locked

    def is_shared(self) -> bool:
        return self._storage.is_shared()

    def share_memory_(self):
        self._storage.share_memory_()
        return self

    _UPDATE_OPTIONS = ("clone", "inplace", "keys_to_update", "non_blocking", "is_leaf", "update_batch_size")

    def _split_update(self, other, kwargs):
        opts = {k: kwargs.pop(k) for k in list(kwargs) if k in self._UPDATE_OPTIONS and k not in self._field_names}
        opts.pop("non_blocking", None), opts.pop("is_leaf", None), opts.pop("update_batch_size", None)
        return other, kwargs, opts

    def update(self, other=None, **kwargs):
        """Merge ``other`` (a tensorclass, TensorDict or dict), then the fields given as keywords."""
        other, fields, opts = self._split_update(other, kwargs)
        if other is not None:
            self._storage.update(other._storage if isinstance(other, TensorClass) else other, **opts)
        for k, v in fields.items():
            self.set(k, v, inplace=opts.get("inplace", False))
        return self

    def update_(self, other=None, **kwargs):
        """Like :meth:`update`, writing into the existing entries in place."""
        other, fields, opts = self._split_update(other, kwargs)
        opts.pop("inplace", None)
        if other is not None:
            self._storage.update_(other._storage if isinstance(other, TensorClass) else other, **opts)
        for k, v in fields.items():
            self.set(k, v, inplace=True)
        return self

    def select(self, *keys, inplace: bool = False, strict: bool = True, as_tensordict: bool = False):
        """Only the given fields (the others None); ``as_tensordict=True`` gives a TensorDict."""
        out = self._storage.select(*keys, inplace=inplace, strict=strict)
        if as_tensordict:
            return out
        return self if inplace else self._from_storage(out)

    def exclude(self, *keys, inplace: bool = False, as_tensordict: bool = False):
        """Without the given fields (they read as None); ``as_tensordict=True`` gives a TensorDict."""
        out = self._storage.exclude(*keys, inplace=inplace)
        if as_tensordict:
            return out
        return self if inplace else self._from_storage(out)

    def __hash__(self):
        if not self._frozen:
            raise TypeError(f"unhashable type: {type(self).__name__!r} (declare it frozen=True to hash it)")
        return id(self)

    # state_dict / load_state_dict check classes against TensorClass: tensorclass/state.py
    # installs them (more methods: tensorclass/methods.py; torch functions: torch_functions.py).

    def __getstate__(self):
        return {"_storage": self._storage}

    def __setstate__(self, state):
        object.__setattr__(self, "_storage", state["_storage"])

    def __repr__(self) -> str:
        return tensorclass_repr(self)


def register_tensorclass(name: str, cls) -> None:
    """Make saved data whose class is ``name`` load as ``cls`` (see :mod:`.registry`).

    Example:
        >>> @tensorclass
        ... class Sample:
        ...     x: torch.Tensor
        >>> register_tensorclass("otherlib.Sample", Sample)  # folders saved by otherlib load as Sample
    """
    if not (isinstance(cls, type) and issubclass(cls, TensorClass)):
        raise TypeError(f"register_tensorclass needs a tensorclass, got {cls!r}")
    _REGISTRY[name] = cls


_options.tensorclass_type = TensorClass  # casting a mapping into a field checks for tensorclasses
