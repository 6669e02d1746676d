"""Autograd and reductions on a TensorDict: ``requires_grad``, ``grad``, ``data``, ``backward``,
``sum`` / ``mean`` leaf by leaf.

``td.grad`` and ``td.data`` are collections of the leaves' ``.grad`` / ``.data`` (a leaf
without a gradient is left out); ``td.backward()`` back-propagates every leaf that requires a
gradient (the batch must be empty: one loss per entry, as ``tensor.backward()`` needs a scalar).

Example:
    >>> x = torch.ones(3, requires_grad=True)
    >>> td = TensorDict(a=x * 2, b=x.pow(2))
    >>> td.sum().backward()
    >>> x.grad.tolist()
    [4.0, 4.0, 4.0]
"""
from __future__ import annotations

import torch

from .reductions import reduce_all, reduce_together, without_text_columns

__all__ = ["AutogradMethods"]


def _tensor_items(td):
    return [(k, v) for k, v in td.items(True, True) if isinstance(v, torch.Tensor)]


class AutogradMethods:
    """Mixin of TensorDict; see the module docstring."""

    @property
    def requires_grad(self) -> bool:
        """True when any tensor leaf requires a gradient."""
        return any(v.requires_grad for _, v in _tensor_items(self))

    @property
    def grad(self):
        """The leaves' gradients, as a collection of the same structure (leaves without a
        gradient are left out)."""
        return self.apply(lambda t: t.grad)

    @property
    def data(self):
        """The leaves' ``.data`` (detached, sharing storage)."""
        return self.apply(lambda t: t.data)

    def backward(self, grad=None, retain_graph=None, create_graph: bool = False):
        """Back-propagate every tensor leaf that requires a gradient (``grad``: a collection with
        the matching gradients). The batch size must be empty.

        Example: ``TensorDict(loss=(x ** 2).sum()).backward()``
        """
        if len(self.batch_size):
            raise RuntimeError(
                f"backward() needs an empty batch size (one loss per entry), got {tuple(self.batch_size)}; "
                "reduce first, e.g. td.sum().backward()"
            )
        items = [(k, v) for k, v in _tensor_items(self) if v.requires_grad]
        if not items:
            raise RuntimeError("backward(): no entry requires a gradient")
        grads = None
        if grad is not None:
            grads = [grad.get(k) for k, _ in items]
        torch.autograd.backward([v for _, v in items], grad_tensors=grads, retain_graph=retain_graph,
                                create_graph=create_graph)

    def _reduce(self, op, dim, keepdim: bool, dtype, reduce: bool, what: str = "reduce"):
        """The rules of every reduction (``chatdata.td.core.reductions``): text columns left
        out, constants kept; ``reduce=True`` gives one tensor."""
        cast = (lambda t: t) if dtype is None else (lambda t: t.to(dtype))
        if dim is None:  # every dim of every leaf
            if reduce:  # one value over every element of every leaf
                vals = [cast(v).reshape(-1) for _, v in _tensor_items(self)]
                return op(torch.cat(vals)) if vals else op(torch.zeros(0))
            return reduce_all(self, lambda t: op(cast(t)))
        dims = (dim,) if isinstance(dim, int) else tuple(dim)
        dims = tuple(sorted(self._norm_dim(d) for d in dims))
        if reduce:  # the leaves pooled along the batch dims: one tensor
            return reduce_together(self.apply(cast), op, dims, keepdim, what)
        bs = [s if i not in dims else 1 for i, s in enumerate(self.batch_size)] if keepdim else \
            [s for i, s in enumerate(self.batch_size) if i not in dims]
        return without_text_columns(self).apply(lambda t: op(cast(t), dim=dims, keepdim=keepdim), batch_size=bs)

    def sum(self, dim=None, keepdim: bool = False, *, dtype=None, reduce: bool = False):
        """Sum each leaf (all its dims, or the batch dims ``dim``); ``reduce=True`` sums the
        leaves' sums into one tensor.

        Example: ``TensorDict(a=torch.ones(2, 3), batch_size=[2]).sum(0)["a"]`` -> ``tensor([2., 2., 2.])``
        """
        return self._reduce(torch.sum, dim, keepdim, dtype, reduce, "sum")

    def mean(self, dim=None, keepdim: bool = False, *, dtype=None, reduce: bool = False):
        """Mean of each leaf (all its dims, or the batch dims ``dim``); ``reduce=True``: one tensor."""
        return self._reduce(torch.mean, dim, keepdim, dtype, reduce, "mean")
