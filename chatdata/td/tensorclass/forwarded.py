"""The TensorClass methods that run on the TensorDict holding its fields (``self._storage``)
and give a TensorDict result back as the tensorclass: copies and moves (``clone``, ``to``,
``apply``), comparisons and arithmetic, ``all`` / ``any``, locking and shared memory,
``update``, ``select`` / ``exclude``, and every other TensorDict method through
``__getattr__``.

A mixin: ``TensorClass`` (in :mod:`.base`) is the only class built on it, so an ``isinstance``
check against :class:`ForwardedMethods` asks "is this a tensorclass", without this module
importing the class built from it. ``_from_storage`` and ``_field_names`` come from
``TensorClass``.

Example:
    >>> @tensorclass
    ... class Pair:
    ...     a: torch.Tensor
    ...     b: str
    >>> p = Pair(a=torch.ones(2), b="x", batch_size=[2])
    >>> (p + 1).a.tolist(), type(p.exclude("b")).__name__, p.exclude("b").b
    ([2.0, 2.0], 'Pair', None)
"""
from __future__ import annotations

from ..core import TensorDict, unravel_key

__all__ = ["ForwardedMethods"]


class ForwardedMethods:
    """TensorDict operations of a tensorclass, run on its fields' TensorDict."""

    def __getattr__(self, name):
        # TensorDict methods the class does not define (select, exclude, gather, to_dict, ...):
        # run on the storage; a TensorDict result with our fields comes back as this class
        if name.startswith("__") or name in ("_storage", "_field_names"):
            raise AttributeError(name)
        if name in self.__dict__.get("_deleted", ()):
            raise AttributeError(f"{type(self).__name__}.{name} was deleted (del); set it again to use it")
        try:  # the instance's _storage, or what a subclass's _storage property gives (History's)
            storage = object.__getattribute__(self, "_storage")
        except AttributeError:
            raise AttributeError(name) from None
        attr = getattr(storage, name, None)
        if attr is None or not callable(attr):
            if attr is None:
                raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")
            return self._wrap_result(attr)  # td.grad / td.data: collections come back as this class

        def method(*args, **kwargs):
            args = [a._storage if isinstance(a, ForwardedMethods) else a for a in args]
            kwargs = {k: v._storage if isinstance(v, ForwardedMethods) else v for k, v in kwargs.items()}
            return self._wrap_result(attr(*args, **kwargs))

        return method

    def _wrap_result(self, out):
        if out is self._storage:
            return self
        if isinstance(out, TensorDict) and set(out.keys()) <= {*self._field_names, *self._storage_keys}:
            return self._from_storage(out)
        if isinstance(out, (tuple, list)) and out and all(isinstance(o, TensorDict) for o in out):
            return type(out)(self._wrap_result(o) for o in out)
        return out


    # -- forwarded collection operations --------------------------------------------------------
    def to_tensordict(self, *, retain_none: bool | None = None) -> TensorDict:
        """A copy of the fields as a plain TensorDict."""
        return self._storage.clone()

    def to_dict(self, retain_none: bool = True, **kwargs) -> dict:
        """The fields as nested plain dicts; a field that is None (not stored) is given as None
        unless ``retain_none=False``, so ``type(tc)(**tc.to_dict(), batch_size=...)`` rebuilds it."""
        out = self._storage.to_dict(retain_none=retain_none, **kwargs)
        if not retain_none:
            return out
        return {**{name: out.pop(name, None) for name in self._field_names}, **out}

    def clone(self, recurse: bool = True):
        return self._from_storage(self._storage.clone(recurse))

    def to(self, *args, **kwargs):
        out = self._storage.to(*args, **kwargs)
        return self if out is self._storage else self._from_storage(out)

    def cpu(self):
        return self.to("cpu")

    def apply(self, fn, *others, **kwargs):
        dest = kwargs.get("out")
        if isinstance(dest, ForwardedMethods):  # out=tc: written through its storage, returned as is
            kwargs["out"] = dest._storage
        out = self._storage.apply(fn, *[o._storage if isinstance(o, ForwardedMethods) else o for o in others], **kwargs)
        if dest is not None:
            return dest
        return self if kwargs.get("inplace") else self._from_storage(out)

    def _compare(self, other, op):
        return self._wrap_result(self._storage._compare(other._storage if isinstance(other, ForwardedMethods) else other, op))

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
        other = other._storage if isinstance(other, ForwardedMethods) else other
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

    def _check_update_keys(self, other, keys_to_update, fields) -> None:
        """ValueError, before anything is written, when ``other`` or the keywords would add
        entries that are no field (they would hide in the storage: no attribute reads them, a
        save carries them)."""
        firsts = set(fields)
        if other is not None:
            keys = other._storage.keys() if isinstance(other, ForwardedMethods) else other.keys()
            firsts |= {unravel_key(k)[0] for k in keys}
        if keys_to_update is not None:
            firsts &= {unravel_key(k)[0] for k in keys_to_update} | set(fields)
        extra = sorted(firsts - set(self._field_names))
        if extra:
            raise ValueError(f"{type(self).__name__}.update: {extra} are not fields of {type(self).__name__} "
                             f"(its fields are {sorted(self._field_names)}); select() the fields first")

    def update(self, other=None, **kwargs):
        """Merge ``other`` (a tensorclass, TensorDict or dict), then the fields given as keywords.
        Keys that are no field of this class raise ``ValueError`` and nothing is written."""
        other, fields, opts = self._split_update(other, kwargs)
        self._check_update_keys(other, opts.get("keys_to_update"), fields)
        if other is not None:
            self._storage.update(other._storage if isinstance(other, ForwardedMethods) else other, **opts)
        for k, v in fields.items():
            self.set(k, v, inplace=opts.get("inplace", False))
        return self

    def update_(self, other=None, **kwargs):
        """Like :meth:`update`, writing into the existing entries in place."""
        other, fields, opts = self._split_update(other, kwargs)
        opts.pop("inplace", None)
        if other is not None:
            self._storage.update_(other._storage if isinstance(other, ForwardedMethods) else other, **opts)
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
