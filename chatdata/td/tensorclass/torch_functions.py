"""torch functions on collections beyond shape ops: ``torch.full_like`` / ``zeros_like`` / ...,
``torch.gather``, ``torch.autograd.grad``; and torch functions on tensorclasses.

A tensorclass given to a torch function is replaced by its TensorDict, the function runs on
that, and a TensorDict result (or a tuple of them) comes back as the tensorclass. Stacking or
concatenating tensorclasses of different classes is refused the way torch refuses arguments
nobody handles (``TypeError: ... no implementation found ...``).

Example:
    >>> @tensorclass
    ... class Pair:
    ...     a: torch.Tensor
    >>> p = Pair(a=torch.zeros(2, 3), batch_size=[2])
    >>> torch.full_like(p, 7.0).a[0].tolist(), type(torch.stack([p, p])).__name__
    ([7.0, 7.0, 7.0], 'Pair')
"""
from __future__ import annotations

import torch

from ..nontensor import Batched
from ..core import dispatch as _shape_dispatch
from .base import TensorClass

__all__ = ["collection_torch_function", "tensorclass_torch_function", "install"]

_LIKE = (torch.zeros_like, torch.ones_like, torch.empty_like, torch.full_like, torch.rand_like, torch.randn_like,
         torch.randint_like)
_STACKERS = (torch.stack, torch.cat, torch.concat, torch.concatenate)


def _autograd_grad(outputs, inputs, grad_outputs=None, **kwargs):
    """``torch.autograd.grad`` with collections: the gradients of ``outputs``' leaves with
    respect to ``inputs``' leaves, as a collection shaped like ``inputs``."""
    outputs, inputs, grad_outputs = (_single(x) for x in (outputs, inputs, grad_outputs))
    in_keys = [k for k, v in inputs.items(True, True) if isinstance(v, torch.Tensor)]
    out_keys = [k for k, v in outputs.items(True, True) if isinstance(v, torch.Tensor)]
    if not in_keys or not out_keys:
        raise RuntimeError("torch.autograd.grad: the outputs and inputs need tensor entries")
    grad_list = None
    if grad_outputs is not None:
        grad_list = []
        for k in out_keys:
            g = grad_outputs.get(k)
            if g is None:
                raise KeyError(f"torch.autograd.grad: grad_outputs has no entry {k!r}")
            grad_list.append(g)
    grads = torch.autograd.grad([outputs.get(k) for k in out_keys], [inputs.get(k) for k in in_keys],
                                grad_outputs=grad_list, **kwargs)
    result = inputs.apply(lambda t: t)  # new containers with the structure of inputs
    for k, g in zip(in_keys, grads):
        if g is None:
            result.del_(k)
        else:
            result.set(k, g)
    return result


def _single(x):
    """torch.autograd.grad packs its arguments in tuples: ``(td,)`` -> ``td``."""
    if isinstance(x, (tuple, list)) and len(x) == 1 and isinstance(x[0], Batched):
        return x[0]
    return x


def collection_torch_function(func, types, args, kwargs):
    """``__torch_function__`` body for TensorDict-like collections (shape ops first).

    Example: ``torch.full_like(TensorDict(a=torch.zeros(2), batch_size=[2]), 1.0)["a"]`` -> ``tensor([1., 1.])``
    """
    out = _shape_dispatch(func, types, args, kwargs)
    if out is not NotImplemented:
        return out
    if func in _LIKE:
        src, rest = args[0], args[1:]
        return src.apply(lambda t: func(t, *rest, **kwargs))
    if func is torch.gather:
        names = ("input", "dim", "index")
        params = dict(zip(names, args))
        params.update(kwargs)
        src = params.pop("input")
        return src.gather(params.pop("dim"), params.pop("index"), out=params.pop("out", None))
    if func is torch.autograd.grad:
        return _autograd_grad(*args, **kwargs)
    if func in (torch.all, torch.any):
        return getattr(args[0], func.__name__)(*args[1:], **kwargs)
    if func is torch.where and len(args) >= 2 and isinstance(args[1], Batched):  # where(condition, td, other)
        rest = dict(kwargs)
        other = args[2] if len(args) > 2 else rest.pop("other")
        return args[1].where(args[0], other, **rest)
    method = getattr(type(args[0]), getattr(func, "__name__", ""), None) if args and isinstance(args[0], Batched) else None
    if callable(method):  # torch.sum(td), torch.mean(td, 0), torch.narrow(td, ...): the method of that name
        return method(*args, **kwargs)
    return NotImplemented


def _unwrap(obj):
    if isinstance(obj, TensorClass):
        return obj._storage
    if isinstance(obj, (list, tuple)):
        return type(obj)(_unwrap(o) for o in obj)
    return obj


def _first_tensorclass(obj):
    if isinstance(obj, TensorClass):
        return obj
    if isinstance(obj, (list, tuple)):
        for o in obj:
            found = _first_tensorclass(o)
            if found is not None:
                return found
    return None


def _is_storage(obj) -> bool:
    """A TensorDict or ragged stack that can hold a tensorclass's fields."""
    from ..core import is_collection

    return is_collection(obj) and not isinstance(obj, TensorClass) and hasattr(obj, "keys")


def _wrap(out, cls):
    if _is_storage(out) and set(out.keys()) <= set(cls._field_names):
        return cls._from_storage(out)
    if isinstance(out, (tuple, list)) and out and all(_is_storage(o) for o in out):
        return type(out)(_wrap(o, cls) for o in out)
    return out


def tensorclass_torch_function(cls, func, types, args=(), kwargs=None):
    """``__torch_function__`` of tensorclasses (see the module docstring).

    Example: ``torch.gather(tc, dim=-1, index=idx)`` is ``tc.gather(-1, idx)``, as the same class.
    """
    kwargs = kwargs or {}
    if func in _STACKERS:
        items = args[0] if args else kwargs.get("tensors", ())
        if any(not isinstance(i, TensorClass) for i in items):
            return NotImplemented  # a TensorDict among them: its handler explains
        classes = sorted({type(i).__name__ for i in items})
        if len({type(i) for i in items}) > 1:
            raise TypeError(f"{func.__name__}: no implementation found for tensorclasses of different classes "
                            f"{classes}; convert them to one class first")
        return _shape_dispatch(func, types, args, kwargs)  # keeps the class (and ragged stacks)
    first = _first_tensorclass(list(args) + list(kwargs.values()))
    if first is None:
        return NotImplemented
    out = collection_torch_function(func, types, _unwrap(tuple(args)), {k: _unwrap(v) for k, v in kwargs.items()})
    if out is NotImplemented:
        return out
    target = kwargs.get("out")
    if isinstance(target, TensorClass) and out is target._storage:
        return target
    return _wrap(out, type(first))


def install() -> None:
    """Make every collection use :func:`collection_torch_function`, tensorclasses
    :func:`tensorclass_torch_function`. The tensorclass room's face calls it on import.

    Example: ``install()``
    """
    Batched._torch_function_handler = staticmethod(collection_torch_function)
    TensorClass.__torch_function__ = classmethod(tensorclass_torch_function)
