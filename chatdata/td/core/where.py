"""``TensorDict.where``: element by element, self where a condition over the batch holds, else
``other`` (a TensorDict, a number, a tensor, or a value for the text leaves).

The condition lines up with the leading batch dims (a condition of shape ``(B,)`` picks whole
rows of a ``(B, T)`` TensorDict, as tensordict does). Text leaves (``NonTensorStack``,
``NonTensorData``) are picked element by element like tensors. With ``pad``, a key held by one
side only is kept, ``pad`` standing in for the missing side (tensordict's rule for tensors; a str
pad does it for text leaves too, any other pad keeps such a text leaf whole, as tensordict does);
without ``pad`` such a key is a KeyError.

Example:
    >>> a = TensorDict({"x": torch.zeros(3), "s": ["a", "b", "c"]}, [3])
    >>> b = TensorDict({"x": torch.ones(3), "s": ["A", "B", "C"], "y": torch.ones(3)}, [3])
    >>> r = a.where(torch.tensor([True, False, True]), b, pad=0)
    >>> r["x"].tolist(), list(r["s"]), r["y"].tolist()
    ([0.0, 1.0, 0.0], ['a', 'B', 'c'], [0.0, 1.0, 0.0])
"""
from __future__ import annotations

import numbers

import torch

from .convert import is_collection
from .keys import check_same_keys
from ..nontensor import NonTensorData, is_non_tensor

__all__ = ["WhereMethods"]

_MISSING = object()


def _tensor_cond(cond: torch.Tensor, ndim: int) -> torch.Tensor:
    """``cond`` with trailing 1-dims up to ``ndim``: it broadcasts over the leading dims."""
    return cond.reshape(cond.shape + (1,) * (ndim - cond.ndim)) if ndim > cond.ndim else cond


def _text(v):
    return v.maybe_to_stack() if isinstance(v, NonTensorData) and v.batch_size else v


def _pick(key, a, b, cond, pad, where, td_cls):
    """The leaf (or nested collection) at ``key``: ``a`` where ``cond``, else ``b``; either may be
    ``_MISSING`` (then ``pad``)."""
    side = a if a is not _MISSING else b
    if isinstance(side, torch.Tensor):
        if a is _MISSING or b is _MISSING:
            if not isinstance(pad, (numbers.Number, torch.Tensor)):
                raise TypeError(f"where: {key!r} is a tensor in one TensorDict only, and pad {pad!r} "
                                f"({type(pad).__name__}) cannot fill it; pass a number")
            fill = torch.as_tensor(pad, dtype=side.dtype, device=side.device)
            a, b = (fill, b) if a is _MISSING else (a, fill)
        elif not isinstance(b, (torch.Tensor, numbers.Number)):
            raise TypeError(f"{where}: {key!r} is a tensor in self but a {type(b).__name__} in other")
        return torch.where(_tensor_cond(cond, side.ndim), a, b)
    if is_non_tensor(side):
        if isinstance(a, NonTensorData) and isinstance(b, NonTensorData) and type(a.data) is type(b.data) \
                and a.data == b.data:
            return a  # one value both sides: kept a constant
        wrong = [o for o in (a, b) if isinstance(o, torch.Tensor) or is_collection(o) and not is_non_tensor(o)]
        if wrong:
            other = wrong[0]
            raise TypeError(f"{where}: {key!r} is text in one TensorDict and a {type(other).__name__} in the other")
        if (a is _MISSING or b is _MISSING) and not isinstance(pad, str):
            return side  # a number cannot fill a string column: kept whole, as tensordict keeps it
        bs = side.batch_size
        c = _tensor_cond(cond, len(bs))
        if a is _MISSING:
            return _text(b).where(~c, pad)
        return _text(a).where(c, pad if b is _MISSING else _text(b))
    if isinstance(side, td_cls):
        if any(o is not _MISSING and not isinstance(o, td_cls) for o in (a, b)):
            raise TypeError(f"{where}: {key!r} is a nested TensorDict in one TensorDict only, a leaf in the other")
        return _where(a, b, cond, pad, where, td_cls, template=side)
    if a is _MISSING or b is _MISSING:
        raise KeyError(f"{where}: {key!r} ({type(side).__name__}) is in one TensorDict only")
    return a.where(cond, b, pad=pad)


def _where(a, b, cond, pad, where, td_cls, template=None):
    """TensorDict ``a`` where ``cond`` else TensorDict ``b`` (either may be ``_MISSING``)."""
    ref = template if template is not None else a
    ea = {} if a is _MISSING else a._tensordict
    eb = {} if b is _MISSING else b._tensordict
    out = {}
    for key in [*ea, *(k for k in eb if k not in ea)]:
        out[key] = _pick(key, ea.get(key, _MISSING), eb.get(key, _MISSING), cond, pad, where, td_cls)
    return td_cls._new_unsafe(out, ref.batch_size, ref.device)


class WhereMethods:
    """``where`` of a TensorDict (see the module docstring)."""

    def where(self, condition, other, *, out=None, pad=None):
        """``torch.where(condition, self, other)`` leaf by leaf; ``condition`` covers the leading
        batch dims. ``other``: a TensorDict (or dict) of the same batch size, or a number or
        tensor for every tensor leaf (text leaves are then kept), or a str for every text
        leaf. ``pad``: the value of a key that only one side holds (else such a key is a
        KeyError). ``out``: a TensorDict the result is written into.

        Example:
            >>> td = TensorDict({"x": torch.arange(4).reshape(2, 2)}, [2, 2])
            >>> td.where(torch.tensor([True, False]), 9)["x"].tolist()
            [[0, 1], [9, 9]]
        """
        cond = torch.as_tensor(condition)
        if cond.dtype != torch.bool:  # torch's words; a TensorDict of text leaves only would take it
            raise RuntimeError(f"where expected condition to be a boolean tensor, but got a tensor with dtype {cond.dtype}")
        if isinstance(other, dict):
            other = type(self)(other, batch_size=self.batch_size)
        if is_collection(other):
            if pad is None:  # an entry of one side alone would silently drop out
                check_same_keys(self, other, "where")
            if other.batch_size != self.batch_size:
                raise RuntimeError(f"where: other has batch size {tuple(other.batch_size)}, self "
                                   f"{tuple(self.batch_size)}")
            res = _where(self, other, cond, pad, "where", type(self))
        elif isinstance(other, (numbers.Number, torch.Tensor)):  # tensor leaves only, as tensordict
            res = self.apply(lambda a: torch.where(_tensor_cond(cond, a.ndim), a, other))
        else:  # e.g. a str: the value of every text leaf where the condition does not hold
            def leaf(a):
                raise TypeError(f"where: other is a {type(other).__name__}, which a tensor leaf cannot take; "
                                f"select() the text keys first")
            self.apply(leaf)  # refuses before anything is built
            res = self._new_unsafe({k: v.where(cond, other) if isinstance(v, type(self)) else
                                    _pick(k, v, other, cond, None, "where", type(self)) for k, v in self._tensordict.items()},
                                   self.batch_size, self.device)
        if out is not None:
            mine = set(out.keys(True, True))
            have = [k for k in res.keys(True, True) if k in mine]
            out.update_(res.select(*have))
            out.update(res.exclude(*have))
            return out
        return res
