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

import torch

from ..core import GENERIC_NESTED_ERR, RaggedTensorDict, TensorDict, check_no_names, is_valid_key
from ..nontensor import Batched, NonTensorData, NonTensorStack, list_to_stack
from . import options as _options
from .fields import _is_tensor_annotation, _setup_fields, _unwrap
from .forwarded import ForwardedMethods
from .options import cast_value, check_tensor_only, options_base, set_options
from .registry import _REGISTRY, registered_tensorclass
from .repr import tensorclass_repr

__all__ = ["TensorClass", "is_tensorclass", "register_tensorclass", "registered_tensorclass"]

_MISSING = dataclasses.MISSING


def is_tensorclass(obj) -> bool:
    """``True`` for tensorclass instances and classes."""
    cls = obj if isinstance(obj, type) else type(obj)
    return issubclass(cls, TensorClass)


class TensorClass(ForwardedMethods, Batched):
    """Base class of tensorclasses: subclass it with annotated fields, or use ``@tensorclass``.

    Example:
        >>> class Pair(TensorClass):
        ...     a: torch.Tensor
        ...     b: torch.Tensor
        >>> Pair(a=torch.zeros(2), b=torch.ones(2), batch_size=[2]).b.tolist()
        [1.0, 1.0]
    """

    _field_names: tuple = ()
    # keys beyond the fields that a subclass keeps in its storage (History's "_flags"): from_tensordict
    # and load_state_dict take them as they take fields
    _storage_keys = ()
    _autocast = False
    _nocast = False
    _shadow = False
    _frozen = False
    _tensor_only = False

    def __init_subclass__(cls, autocast=None, nocast=None, shadow=None, frozen=None, tensor_only=None, **kwargs):
        super().__init_subclass__(**kwargs)
        set_options(cls, autocast=autocast, nocast=nocast, shadow=shadow, frozen=frozen, tensor_only=tensor_only)
        _setup_fields(cls, TensorClass)
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
        if "names" not in self._field_names:
            check_no_names(names)
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
        if not isinstance(tensordict, (TensorDict, RaggedTensorDict)):  # it would break at its first use
            raise TypeError(f"{cls.__name__}.from_tensordict needs a TensorDict (or a RaggedTensorDict), got "
                            f"{type(tensordict).__name__}; build from a dict with {cls.__name__}.from_dict(...)")
        if safe:
            extra = set(tensordict.keys()) - {*cls._field_names, *cls._storage_keys}
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

    @classmethod
    def from_dict(cls, input_dict, batch_size=None, device=None, batch_dims=None, auto_batch_size=False, **kwargs):
        """Build from a (nested) dict of field values (a key that is no field raises KeyError)."""
        td = TensorDict.from_dict(dict(input_dict), batch_size=batch_size, device=device, batch_dims=batch_dims,
                                  auto_batch_size=auto_batch_size, **kwargs)  # names= and unknown options checked there
        return cls.from_tensordict(td)

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
    if not isinstance(name, str):  # meta.json names classes by strings: any other key never matches
        raise TypeError(f"register_tensorclass needs the class name as saved data gives it (a str such as "
                        f"'otherlib.Sample'), got {name!r}")
    if not name:
        raise ValueError("register_tensorclass needs a non-empty class name, such as 'otherlib.Sample'")
    _REGISTRY[name] = cls


_options.tensorclass_type = TensorClass  # casting a mapping into a field checks for tensorclasses
