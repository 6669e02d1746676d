"""TensorDict methods a data pipeline reaches for, as tensordict 0.14 has them: ``named_apply``,
``masked_fill`` / ``masked_fill_``, ``roll``, the ``isfinite`` / ``isnan`` family,
``max`` / ``min`` / ``amax`` / ``amin`` (with ``reduce``), ``clamp*``, ``filter_non_tensor_data``,
``non_tensor_items``, ``sorted_keys``.

Text leaves (``NonTensorStack``, ``NonTensorData``) are kept as they are by the element-wise
methods (a number cannot fill or test a string), move with the rows in ``roll``; text columns
are left out of the reductions (a string has no maximum; ``chatdata.td.core.reductions``).

Example:
    >>> td = TensorDict({"x": torch.tensor([1.0, float("nan")]), "s": ["a", "b"]}, [2])
    >>> td.isnan()["x"].tolist(), list(td.roll(1)["s"])
    ([False, True], ['b', 'a'])
"""
from __future__ import annotations

import numbers

import torch

from .keys import unravel_key
from .ops import NO_DEFAULT
from ..nontensor import NonTensorData, NonTensorStack, is_non_tensor
from .reductions import reduce_all, reduce_together, without_leaves, without_text_columns

__all__ = ["PipelineMethods"]


def _leading(mask: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """``mask`` (over the leading dims of ``t``) broadcast to ``t``."""
    return mask.reshape(mask.shape + (1,) * (t.ndim - mask.ndim)).expand_as(t)


def _unary(torch_fn):
    def method(self):
        return self.apply(torch_fn)

    method.__name__ = torch_fn.__name__
    method.__doc__ = (f"``torch.{torch_fn.__name__}`` of every tensor leaf (text leaves are kept).\n\n"
                      f"        Example: ``TensorDict(a=torch.tensor([1.0]), batch_size=[1]).{torch_fn.__name__}()``")
    return method


class PipelineMethods:
    """The methods of the module docstring, mixed into TensorDict."""

    # -- apply with keys --------------------------------------------------------------------
    def named_apply(self, fn, *others, nested_keys: bool = False, batch_size=None, default=NO_DEFAULT,
                    filter_empty=None, prefix: tuple = (), inplace: bool = False, **kwargs):
        """``fn(key, leaf, *leaves of others)`` for every tensor leaf: ``key`` is the leaf's own
        key, or with ``nested_keys=True`` its full key (``prefix`` + path; a str at the top
        level without a prefix). A ``None`` result drops the entry; text leaves are kept.

        Example:
            >>> td = TensorDict({"a": torch.ones(2), "n": {"b": torch.ones(2)}}, [2])
            >>> sorted(map(str, td.named_apply(lambda k, v: v if k != ("n", "b") else None,
            ...                                nested_keys=True).keys(True)))
            ['a']
        """
        if kwargs:
            raise TypeError(f"named_apply: unexpected arguments {sorted(kwargs)}")
        prefix = unravel_key(prefix) if prefix else ()
        entries = {}
        for k, v in self._tensordict.items():
            full = prefix + (k,)
            name = (full if len(full) > 1 else k) if nested_keys else k
            theirs = []
            for o in others:
                if isinstance(o, type(self)) and k in o.keys():
                    theirs.append(o.get(k))
                elif default is NO_DEFAULT:
                    raise KeyError(f"named_apply: key {full if len(full) > 1 else k!r} is missing from "
                                   f"another TensorDict; pass default= to stand in for it")
                else:  # a leaf, or a whole nested TensorDict, the other lacks
                    theirs.append(default)
            if isinstance(v, torch.Tensor):
                r = fn(name, v, *theirs)
                if inplace and r is not None and r is not v:
                    v.copy_(r)
                    r = v
            elif isinstance(v, type(self)):
                nested_bs = None if batch_size is None else torch.Size(batch_size) + v.batch_size[self.batch_dims:]
                r = v.named_apply(fn, *theirs, nested_keys=nested_keys, batch_size=nested_bs, default=default,
                                  filter_empty=filter_empty, prefix=full, inplace=inplace)
                if not inplace and filter_empty is not False and v._tensordict and not r._tensordict:
                    r = None
            elif isinstance(v, NonTensorData) and batch_size is not None:
                r = NonTensorData(v.data, batch_size=torch.Size(batch_size) + v.batch_size[self.batch_dims:])
            else:
                r = v
            if r is not None:
                entries[k] = r
        if inplace:
            return self
        out = self._new_unsafe({}, torch.Size(batch_size) if batch_size is not None else self.batch_size, self.device)
        for k, v in entries.items():
            out._set_str(k, v, False)
        return out

    # -- masks and shifts ------------------------------------------------------------------
    def _check_mask(self, mask, value, what: str) -> torch.Tensor:
        mask = torch.as_tensor(mask)
        if mask.dtype != torch.bool:
            raise RuntimeError(f"{what} only supports boolean masks, but got mask with dtype {mask.dtype}")
        if tuple(mask.shape) != tuple(self.batch_size[:mask.ndim]):
            raise RuntimeError(f"{what}: the mask has shape {tuple(mask.shape)}; it must be the leading batch dims "
                               f"of {tuple(self.batch_size)}")
        if not isinstance(value, (numbers.Number, torch.Tensor)):
            raise TypeError(f"{what}: value {value!r} is a {type(value).__name__}; it fills tensor leaves only "
                            f"(a number or a 0-dim tensor)")
        return mask

    def masked_fill(self, mask, value):
        """A copy whose tensor leaves hold ``value`` where ``mask`` (over the leading batch dims)
        is True; text leaves are kept.

        Example:
            >>> TensorDict({"a": torch.ones(3)}, [3]).masked_fill(torch.tensor([True, False, True]), 0)["a"].tolist()
            [0.0, 1.0, 0.0]
        """
        mask = self._check_mask(mask, value, "masked_fill")
        return self.apply(lambda t: t.masked_fill(_leading(mask, t), value))

    def masked_fill_(self, mask, value):
        """:meth:`masked_fill` in place; returns self.

        Example:
            >>> td = TensorDict({"a": torch.ones(2)}, [2])
            >>> td.masked_fill_(torch.tensor([True, False]), -1)["a"].tolist()
            [-1.0, 1.0]
        """
        mask = self._check_mask(mask, value, "masked_fill_")
        for _, t in self.items(True, True):
            if isinstance(t, torch.Tensor):
                t.masked_fill_(_leading(mask, t), value)
        return self

    def roll(self, shifts, dims=None):
        """The rows rolled along batch dims ``dims`` (text leaves too); ``dims=None`` rolls the
        flattened batch (tensordict rolls each leaf flattened, features included).

        Example:
            >>> list(TensorDict({"s": ["a", "b", "c"]}, [3]).roll(1)["s"])
            ['c', 'a', 'b']
        """
        if dims is None:
            if not self.batch_dims:
                return self.clone(False)
            nb, bs = self.batch_dims, self.batch_size
            return self._batch_op(lambda t: t.flatten(0, nb - 1).roll(shifts, 0).reshape(bs + t.shape[nb:])
                                  if nb > 1 else t.roll(shifts, 0))
        dims = (dims,) if isinstance(dims, int) else tuple(dims)
        dims = tuple(self._norm_dim(d) for d in dims)
        return self._batch_op(lambda t: torch.roll(t, shifts, dims))

    # -- keys --------------------------------------------------------------------------------
    def filter_non_tensor_data(self):
        """A TensorDict without its text leaves (nested ones included).

        Example:
            >>> list(TensorDict({"x": torch.zeros(1), "s": ["a"]}, [1]).filter_non_tensor_data().keys())
            ['x']
        """
        return without_leaves(self, (NonTensorData, NonTensorStack))

    def non_tensor_items(self, include_nested: bool = False):
        """``(key, leaf)`` of every text leaf (a ``NonTensorData`` or ``NonTensorStack``), as a tuple.

        Example:
            >>> [(k, v.tolist()) for k, v in TensorDict({"x": torch.zeros(1), "s": ["a"]}, [1]).non_tensor_items()]
            [('s', ['a'])]
        """
        return tuple((k, v) for k, v in self.items(include_nested, True) if is_non_tensor(v))

    @property
    def sorted_keys(self) -> list:
        """The top-level keys, sorted.

        Example:
            >>> TensorDict({"b": 1, "a": 2}).sorted_keys
            ['a', 'b']
        """
        return sorted(self.keys())

    # -- element-wise tests and clamps -----------------------------------------------------------
    isfinite = _unary(torch.isfinite)
    isnan = _unary(torch.isnan)
    isneginf = _unary(torch.isneginf)
    isposinf = _unary(torch.isposinf)
    isreal = _unary(torch.isreal)

    def clamp(self, min=None, max=None):  # noqa: A002 - torch's names
        """``torch.clamp`` of every tensor leaf (text leaves are kept).

        Example:
            >>> TensorDict({"a": torch.tensor([-2.0, 5.0])}, [2]).clamp(-1, 1)["a"].tolist()
            [-1.0, 1.0]
        """
        return self.apply(lambda t: torch.clamp(t, min, max))

    def clamp_min(self, min):  # noqa: A002
        """``torch.clamp_min`` of every tensor leaf.

        Example:
            >>> TensorDict({"a": torch.tensor([-2.0, 5.0])}, [2]).clamp_min(0)["a"].tolist()
            [0.0, 5.0]
        """
        return self.apply(lambda t: torch.clamp_min(t, min))

    def clamp_max(self, max):  # noqa: A002
        """``torch.clamp_max`` of every tensor leaf.

        Example:
            >>> TensorDict({"a": torch.tensor([-2.0, 5.0])}, [2]).clamp_max(0)["a"].tolist()
            [-2.0, 0.0]
        """
        return self.apply(lambda t: torch.clamp_max(t, max))

    # -- max / min -------------------------------------------------------------------------------
    def _extreme(self, what: str, dim, keepdim: bool, reduce: bool, return_indices: bool):
        op = {"max": torch.max, "min": torch.min, "amax": torch.amax, "amin": torch.amin}[what]
        tensors = without_text_columns(self)
        if reduce and dim is None:
            vals = [t.reshape(-1) for _, t in tensors.items(True, True) if isinstance(t, torch.Tensor)]
            if not vals or not sum(v.numel() for v in vals):
                raise RuntimeError(f"{what}(reduce=True): the TensorDict holds no tensor value")
            return op(torch.cat(vals))
        if reduce and what in ("max", "min"):
            raise ValueError(f"{what}: reduce=True reduces every element of every leaf; it takes no dim "
                             f"(a{what}(dim=..., reduce=True) pools the leaves along batch dims)")
        if dim is None:
            return reduce_all(self, op)
        if what in ("amax", "amin"):
            dims = (dim,) if isinstance(dim, int) else tuple(dim)
            dims = tuple(sorted(self._norm_dim(d) for d in dims))
        else:
            if not isinstance(dim, int):
                raise TypeError(f"{what}: dim must be one int (use a{what} for several dims), got {dim!r}")
            dims = (self._norm_dim(dim),)
        bs = [1 if i in dims else s for i, s in enumerate(self.batch_size)] if keepdim else \
            [s for i, s in enumerate(self.batch_size) if i not in dims]
        if what in ("amax", "amin"):
            if reduce:
                return reduce_together(self, op, dims, keepdim, what)
            return tensors.apply(lambda t: op(t, dim=dims, keepdim=keepdim), batch_size=bs)
        indices_of = {}  # one reduction per leaf: its indices are kept for the second TensorDict

        def values_of(t):
            r = op(t, dim=dims[0], keepdim=keepdim)
            indices_of[id(t)] = r.indices
            return r.values

        values = tensors.apply(values_of, batch_size=bs)
        if not return_indices:
            return values
        # an index of a constant means nothing: the indices hold tensor leaves only (as tensordict's)
        indices = without_leaves(tensors, NonTensorData).apply(lambda t: indices_of[id(t)], batch_size=bs)
        return getattr(torch.return_types, what)((values, indices))

    def max(self, dim=None, keepdim: bool = False, *, reduce: bool = False, return_indices: bool = True):
        """The maximum of each tensor leaf: over all its elements (``dim=None``, batch ``()``),
        along batch dim ``dim`` (a ``torch.return_types.max`` of values and indices
        TensorDicts, or the values with ``return_indices=False``), or with ``reduce=True`` one
        tensor over every leaf. Text columns are left out; constants stay in the values, not in
        the indices.

        Example:
            >>> td = TensorDict({"a": torch.tensor([[1, 5], [7, 2]])}, [2])
            >>> td.max()["a"].item(), td.max(dim=0).values["a"].tolist(), td.max(reduce=True).item()
            (7, [7, 5], 7)
        """
        return self._extreme("max", dim, keepdim, reduce, return_indices)

    def min(self, dim=None, keepdim: bool = False, *, reduce: bool = False, return_indices: bool = True):
        """The minimum, as :meth:`max`.

        Example:
            >>> TensorDict({"a": torch.tensor([3, 1])}, [2]).min(dim=0).indices["a"].item()
            1
        """
        return self._extreme("min", dim, keepdim, reduce, return_indices)

    def amax(self, dim=None, keepdim: bool = False, *, reduce: bool = False):
        """``torch.amax`` of each tensor leaf (``dim``: batch dims, one or several), as :meth:`max`
        without indices.

        Example:
            >>> TensorDict({"a": torch.tensor([[1, 5], [7, 2]])}, [2, 2]).amax(dim=(0, 1))["a"].item()
            7
        """
        return self._extreme("amax", dim, keepdim, reduce, False)

    def amin(self, dim=None, keepdim: bool = False, *, reduce: bool = False):
        """``torch.amin`` of each tensor leaf, as :meth:`amax`.

        Example:
            >>> TensorDict({"a": torch.tensor([[1, 5], [7, 2]])}, [2]).amin(dim=0)["a"].tolist()
            [1, 2]
        """
        return self._extreme("amin", dim, keepdim, reduce, False)
