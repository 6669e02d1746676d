"""More TensorDict methods of tensordict 0.14: rows (``narrow``, ``masked_select``, ``tile``),
the dict side (``copy``, ``popitem``, ``clear``, ``size``, ``depth``, ``tolist``), dtype casts
(``float32()``, ``int64()``, ...) and reductions (``nansum``, ``nanmean``, ``prod``, ``std``,
``var``). Text leaves move with their rows; casts and reductions leave them as they are (a
reduction over a batch dim leaves text columns out, as ``sum`` does).

Example:
    >>> td = TensorDict({"x": torch.arange(3), "s": ["a", "b", "c"]}, [3])
    >>> list(td.narrow(0, 1, 2)["s"]), td.tile(2)["x"].tolist(), td.float32()["x"].dtype
    (['b', 'c'], [0, 1, 2, 0, 1, 2], torch.float32)
"""
from __future__ import annotations

import torch

from ..nontensor import NonTensorStack
from .convert import is_collection

__all__ = ["RowMethods"]


def _cast(dtype: torch.dtype):
    def method(self):
        return self.apply(lambda t: t.to(dtype))

    name = str(dtype).replace("torch.", "")
    method.__name__ = name
    method.__doc__ = (f"Every tensor leaf cast to ``torch.{name}`` (text leaves are kept).\n\n"
                      f"        Example: ``TensorDict(a=torch.ones(1), batch_size=[1]).{name}()['a'].dtype``")
    return method


class RowMethods:
    """The methods of the module docstring, mixed into TensorDict."""

    # -- rows -------------------------------------------------------------------------------
    def narrow(self, dim: int, start: int, length: int):
        """Rows ``start:start+length`` along batch dim ``dim`` (a view, as ``Tensor.narrow``).

        Example:
            >>> list(TensorDict({"s": ["a", "b", "c"]}, [3]).narrow(0, 1, 1)["s"])
            ['b']
        """
        d = self._norm_dim(dim)
        return self._batch_op(lambda t: t.narrow(d, start, length))

    def masked_select(self, mask):
        """The rows where ``mask`` (over the leading batch dims) holds, as one batch dim.

        Example:
            >>> list(TensorDict({"s": ["a", "b", "c"]}, [3]).masked_select(torch.tensor([True, False, True]))["s"])
            ['a', 'c']
        """
        mask = torch.as_tensor(mask)
        if mask.dtype != torch.bool or tuple(mask.shape) != tuple(self.batch_size[:mask.ndim]) or not mask.ndim:
            raise RuntimeError(f"masked_select: the mask must be a bool tensor of the leading batch dims "
                               f"{tuple(self.batch_size)}, got {mask.dtype} of shape {tuple(mask.shape)}")
        return self[mask]

    def tile(self, *reps):
        """The batch repeated ``reps`` times per batch dim (as ``torch.tile`` over the batch;
        fewer reps than batch dims repeat the last dims).

        Example:
            >>> list(TensorDict({"s": ["a", "b"]}, [2]).tile(2)["s"])
            ['a', 'b', 'a', 'b']
        """
        if len(reps) == 1 and isinstance(reps[0], (tuple, list, torch.Size)):
            reps = tuple(reps[0])
        nb = self.batch_dims
        if len(reps) > nb or any(not isinstance(r, int) or r < 0 for r in reps):
            raise ValueError(f"tile: reps {reps} must be at most {nb} non-negative ints (one per batch dim)")
        reps = (1,) * (nb - len(reps)) + tuple(reps)
        return self._batch_op(lambda t: t.repeat(*reps, *(1,) * (t.ndim - nb)))

    # -- the dict side ---------------------------------------------------------------------
    def copy(self):
        """A shallow copy: new TensorDicts (nested ones and tensorclasses too) holding the same tensors.

        Example:
            >>> td = TensorDict({"a": torch.zeros(1)}, [1])
            >>> td.copy().get("a") is td.get("a")
            True
        """
        out = self._new_unsafe({}, self.batch_size, self.device)
        for k, v in self._tensordict.items():
            if isinstance(v, type(self)) or (is_collection(v) and hasattr(v, "copy")):  # a tensorclass too
                v = v.copy()
            elif isinstance(v, NonTensorStack):
                v = v.clone()
            out._tensordict[k] = v
        return out

    def popitem(self):
        """Remove and return the last ``(key, value)`` (a KeyError when empty, as ``dict``).

        Example:
            >>> TensorDict({"a": 1, "b": 2}).popitem()[0]
            'b'
        """
        if not self._tensordict:
            raise KeyError("popitem(): the TensorDict is empty")
        key = next(reversed(list(self._tensordict)))
        return key, self.pop(key)

    def clear(self):
        """Remove every entry; returns self.

        Example:
            >>> list(TensorDict({"a": 1}).clear().keys())
            []
        """
        for k in list(self._tensordict):
            del self[k]
        return self

    def size(self, dim: int | None = None):
        """The batch size, or its size along ``dim``.

        Example:
            >>> TensorDict({}, [2, 3]).size(), TensorDict({}, [2, 3]).size(-1)
            (torch.Size([2, 3]), 3)
        """
        return self.batch_size if dim is None else self.batch_size[self._norm_dim(dim)]

    @property
    def depth(self) -> int:
        """How deep the nesting goes: 0 for no nested TensorDict.

        Example:
            >>> TensorDict({"a": {"b": {"c": 1}}}).depth
            2
        """
        return max((v.depth + 1 for v in self._tensordict.values() if isinstance(v, type(self))), default=0)

    def tolist(self, *, convert_tensors: bool = False):
        """The rows as nested lists of dicts (a dict for a batch ``()``); tensors stay tensors
        unless ``convert_tensors=True``, text leaves give their values.

        Example:
            >>> TensorDict({"x": torch.arange(2), "s": ["a", "b"]}, [2]).tolist(convert_tensors=True)
            [{'x': 0, 's': 'a'}, {'x': 1, 's': 'b'}]
        """
        if self.batch_dims:
            return [row.tolist(convert_tensors=convert_tensors) for row in self.unbind(0)]
        out = {}
        for k, v in self._tensordict.items():
            if isinstance(v, type(self)):
                out[k] = v.tolist(convert_tensors=convert_tensors)
            elif isinstance(v, torch.Tensor):
                out[k] = v.tolist() if convert_tensors else v
            else:
                out[k] = self[k]
        return out

    float16, float32, float64 = _cast(torch.float16), _cast(torch.float32), _cast(torch.float64)
    int8, int16, int32, int64 = _cast(torch.int8), _cast(torch.int16), _cast(torch.int32), _cast(torch.int64)
    uint8 = _cast(torch.uint8)

    # -- reductions (the rules of ``sum``: chatdata.td.core.autograd_methods) ---------------------
    def nansum(self, dim=None, keepdim: bool = False, *, dtype=None, reduce: bool = False):
        """``torch.nansum`` of each tensor leaf, as ``sum``.

        Example:
            >>> TensorDict({"a": torch.tensor([1.0, float("nan")])}, [2]).nansum()["a"].item()
            1.0
        """
        return self._reduce(torch.nansum, dim, keepdim, dtype, reduce, "nansum")

    def nanmean(self, dim=None, keepdim: bool = False, *, dtype=None, reduce: bool = False):
        """``torch.nanmean`` of each tensor leaf, as ``mean``.

        Example:
            >>> TensorDict({"a": torch.tensor([1.0, float("nan"), 3.0])}, [3]).nanmean(reduce=True).item()
            2.0
        """
        return self._reduce(torch.nanmean, dim, keepdim, dtype, reduce, "nanmean")

    def prod(self, dim=None, keepdim: bool = False, *, dtype=None, reduce: bool = False):
        """``torch.prod`` of each tensor leaf (``dim``: one batch dim), as ``sum``.

        Example:
            >>> TensorDict({"a": torch.tensor([2, 3])}, [2]).prod(0)["a"].item()
            6
        """
        if dim is not None and not isinstance(dim, int):
            raise TypeError(f"prod: dim must be one int, got {dim!r}")

        def op(t, dim=None, keepdim=False):
            return torch.prod(t) if dim is None else torch.prod(t, dim[0], keepdim=keepdim)

        return self._reduce(op, dim, keepdim, dtype, reduce, "prod")

    def std(self, dim=None, keepdim: bool = False, *, correction: int = 1, reduce: bool = False):
        """``torch.std`` of each tensor leaf (floating point), as ``sum``.

        Example:
            >>> TensorDict({"a": torch.tensor([1.0, 3.0])}, [2]).std(0)["a"].item()
            1.4142135381698608
        """
        return self._reduce(lambda t, **kw: torch.std(t, correction=correction, **kw), dim, keepdim, None, reduce, "std")

    def var(self, dim=None, keepdim: bool = False, *, correction: int = 1, reduce: bool = False):
        """``torch.var`` of each tensor leaf (floating point), as ``sum``.

        Example:
            >>> TensorDict({"a": torch.tensor([1.0, 3.0])}, [2]).var(0)["a"].item()
            2.0
        """
        return self._reduce(lambda t, **kw: torch.var(t, correction=correction, **kw), dim, keepdim, None, reduce, "var")
