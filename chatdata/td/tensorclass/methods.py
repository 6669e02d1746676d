"""More TensorClass methods, as tensordict's tensorclasses have them: ``replace``,
``get_at``, the class constructors ``from_list`` / ``fromkeys`` / ``stack`` / ``cat`` (which
return the subclass they are called on), reflected logical operators, and shape operations
used as context managers (``with tc.view(-1) as flat: ...`` writes back on exit).

Example:
    >>> @tensorclass
    ... class Pair:
    ...     a: torch.Tensor
    ...     b: str
    >>> p = Pair(a=torch.zeros(2), b="x", batch_size=[2])
    >>> p.replace(b="y").b, p.b
    ('y', 'x')
    >>> with p.view(2, 1) as v:
    ...     v.a = torch.ones(2, 1)
    >>> p.a.tolist()
    [1.0, 1.0]
"""
from __future__ import annotations

import torch

from .base import TensorClass
from .fields import _unwrap
from ..core import TensorDict

__all__ = ["install"]

_MISSING = object()


# -- entries ----------------------------------------------------------------------------------
def replace(self, *args, **kwargs):
    """A copy with some fields replaced (by a tensorclass, TensorDict or dict, then by keywords);
    the other fields are shared with ``self``, which is left as it was.

    Example: ``p.replace(b="y")``
    """
    if len(args) > 1:
        raise TypeError(f"replace takes at most one positional argument (a mapping), got {len(args)}")
    out = self._from_storage(self._storage._shallow_copy())
    if args:
        other = args[0]
        if isinstance(other, TensorClass):
            other = other._storage
        items = other._tensordict.items() if isinstance(other, TensorDict) else dict(other).items()
        for k, v in items:
            out.set(k, v)
    for k, v in kwargs.items():
        out.set(k, v)
    return out


def get_at(self, key, index, default=_MISSING):
    """The field (or nested entry) ``key`` indexed by ``index``; ``default`` (None when not
    given) when it is missing.

    Example: ``p.get_at("a", 0)``
    """
    val = self._storage.get(key)
    if val is None:
        return None if default is _MISSING else default
    return _unwrap(val[index])


def setitem(self, index, value):
    """``tc[index] = value``: a field by name, or a part of the batch; a tensorclass value must have
    the same fields (any class).

    Example: ``p[0] = p[1]``
    """
    if isinstance(index, str):
        self.set(index, value)
        return
    if isinstance(value, TensorClass):
        if set(value._field_names) != set(self._field_names):
            raise ValueError(
                f"__setitem__ is only allowed for same-class or compatible class (i.e. same members) assignment: "
                f"{type(value).__name__} has fields {sorted(value._field_names)}, {type(self).__name__} has "
                f"{sorted(self._field_names)}")
        value = value._storage
    self._storage[index] = value


def _non_tensordict(self):
    """tensordict keeps non-tensor fields apart; chatdata stores every field in the TensorDict,
    so this is always empty."""
    return {}


# -- class constructors ------------------------------------------------------------------------
def from_list(cls, input_list, batch_size=None, device=None, **kwargs):
    """Stack a list of dicts (one per element) into an instance of ``cls``.

    Example: ``Pair.from_list([{"a": 1.0, "b": "x"}, {"a": 2.0, "b": "y"}]).batch_size`` -> ``[2]``
    """
    from ..core import stack

    if not input_list:
        raise ValueError(f"{cls.__name__}.from_list needs a non-empty list")
    items = [cls(**d) if isinstance(d, dict) else d for d in input_list]
    out = stack(items, 0)
    if batch_size is not None:
        out.batch_size = batch_size
    return out.to(device) if device is not None else out


def fromkeys(cls, keys, value=0, batch_size=None, device=None):
    """An instance of ``cls`` with every field in ``keys`` set to ``value``.

    Example: ``Pair.fromkeys(["a"], 0).a`` -> ``tensor(0)``
    """
    return cls.from_tensordict(TensorDict.fromkeys(keys, value, batch_size=batch_size, device=device))


def _class_stacker(name):
    def method(cls, items, dim: int = 0, *, out=None, **kwargs):
        from ..core import functional

        items = list(items)
        wrong = sorted({type(i).__name__ for i in items if not isinstance(i, cls)})
        if wrong:
            raise TypeError(f"{cls.__name__}.{name} needs {cls.__name__} instances, got {wrong}")
        fn = functional.cat if name == "cat" else functional.stack
        return fn(items, dim, out=out)

    method.__name__ = name
    method.__doc__ = f"``torch.{'cat' if name == 'cat' else 'stack'}`` of instances of the class it is called on."
    return classmethod(method)


# -- shape operations as context managers ------------------------------------------------------
def _recording(name):
    base = getattr(TensorClass, name, None) or getattr(TensorDict, name)

    def method(self, *args, **kwargs):
        out = base(self, *args, **kwargs)
        if isinstance(out, TensorClass) and out is not self:
            out.__dict__["_shape_parent"] = (self, name)
        return out

    method.__name__ = name
    method.__doc__ = base.__doc__
    return method


def _enter(self):
    self.__dict__.setdefault("_cm_stack", []).append(self.__dict__.pop("_shape_parent", None))
    self._storage.__enter__()
    return self


def _exit(self, *exc):
    stack = self.__dict__.get("_cm_stack")
    parent = stack.pop() if stack else None
    result = self._storage.__exit__(*exc)
    if parent is not None and exc[0] is None:
        _write_back(self, *parent)
    return result


def _write_back(view, parent, op: str) -> None:
    """Bring ``view``'s entries back to ``parent``'s batch shape and store them there."""
    nb = len(parent.batch_size)
    if op in ("view", "reshape", "flatten", "unflatten", "squeeze", "unsqueeze"):
        back = view._storage.reshape(parent.batch_size)
    elif op == "permute":
        order = _last_permutation(view)
        back = view._storage.permute([order.index(i) for i in range(nb)]) if order else view._storage
    else:  # transpose is its own inverse
        back = view._storage.transpose(*view.__dict__.get("_transpose_dims", (0, 1)))
    store = parent._storage
    for k, v in back._tensordict.items():
        current = store._tensordict.get(k)
        if current is not None and isinstance(v, torch.Tensor) and isinstance(current, torch.Tensor) \
                and v.shape == current.shape and v.data_ptr() == current.data_ptr():
            continue  # a view of the parent's own tensor: already written
        store.set(k, v)
    for k in set(store._tensordict) - set(back._tensordict):
        store._tensordict.pop(k)


def _last_permutation(view):
    return view.__dict__.get("_permute_dims")


def _permute(self, *dims):
    """Permute the batch dims (``with tc.permute(1, 0) as p:`` writes back on exit)."""
    out = self._from_storage(self._storage.permute(*dims))
    if len(dims) == 1 and isinstance(dims[0], (list, tuple, torch.Size)):
        dims = tuple(dims[0])
    nb = len(self.batch_size)
    out.__dict__["_permute_dims"] = [d % nb for d in dims]
    out.__dict__["_shape_parent"] = (self, "permute")
    return out


def _transpose(self, dim0, dim1):
    """Swap two batch dims (``with tc.transpose(0, 1) as t:`` writes back on exit)."""
    out = self._from_storage(self._storage.transpose(dim0, dim1))
    out.__dict__["_transpose_dims"] = (dim0, dim1)
    out.__dict__["_shape_parent"] = (self, "transpose")
    return out


# -- reflected logical operators ----------------------------------------------------------------
def _reflected(name):
    def method(self, other):
        return self._binop(name, other)  # and, or, xor are symmetric

    return method


def install() -> None:
    """Attach the methods above to TensorClass (the tensorclass room's face calls this once).

    Example: ``install()``
    """
    TensorClass.replace = replace
    TensorClass.get_at = get_at
    TensorClass.__setitem__ = setitem
    TensorClass._non_tensordict = property(_non_tensordict)
    TensorClass.from_list = classmethod(from_list)
    TensorClass.fromkeys = classmethod(fromkeys)
    for name in ("stack", "cat", "lazy_stack", "maybe_dense_stack"):
        setattr(TensorClass, name, _class_stacker(name))
    for name in ("view", "reshape", "unsqueeze", "squeeze", "flatten", "unflatten"):
        setattr(TensorClass, name, _recording(name))
    TensorClass.permute = _permute
    TensorClass.transpose = _transpose
    TensorClass.__enter__ = _enter
    TensorClass.__exit__ = _exit
    TensorClass.__rand__ = _reflected("__and__")
    TensorClass.__ror__ = _reflected("__or__")
    TensorClass.__rxor__ = _reflected("__xor__")
