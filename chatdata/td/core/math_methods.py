"""Element-wise math of tensordict 0.14.3 on every tensor leaf: the unary functions (``log``,
``sigmoid``, ``round``, ...) and their in-place forms (``log_``, ...), and the binary ones with a
number, a tensor or another TensorDict (``add_``, ``sub_``, ``mul_``, ``div_``, ``pow(_)``,
``maximum(_)``, ``minimum(_)``, ``lerp(_)``, ``addcmul(_)``, ``addcdiv(_)``, ``rsub``, ``mod``,
``clamp_min_``, ``clamp_max_``).

Text leaves are kept as they are (a number cannot be added to a string). Another TensorDict
must hold every tensor leaf of ``self`` (its text leaves are not read). An in-place method
computes every leaf first and writes only when all of them fit: a result whose dtype the leaf
cannot hold (``sub_(0.5)`` on an int leaf) or whose shape does not fit names the leaf and writes
nothing (tensordict writes the leaves before the bad one).

Example:
    >>> td = TensorDict({"x": torch.tensor([1.0, 4.0]), "s": ["a", "b"]}, [2])
    >>> td.sqrt_().add_(1)["x"].tolist(), list(td.log2()["s"])
    ([2.0, 3.0], ['a', 'b'])
"""
from __future__ import annotations

import torch

from .convert import is_collection

__all__ = ["MathMethods"]

_UNARY = ["acos", "asin", "atan", "ceil", "cos", "cosh", "erf", "erfc", "expm1", "floor", "frac", "lgamma",
          "log", "log10", "log1p", "log2", "neg", "reciprocal", "round", "sigmoid", "sign", "sin", "sinh", "tan",
          "tanh", "trunc"]
_UNARY_INPLACE = _UNARY + ["abs", "exp", "sqrt"]  # abs / exp / sqrt themselves: chatdata.td.core.td_methods


def _operand(other, key, what: str):
    """``other`` itself, or its tensor at ``key`` when it is a TensorDict or a (nested) dict."""
    if isinstance(other, dict):
        value = other
        for part in (key if isinstance(key, tuple) else (key,)):
            value = value.get(part) if isinstance(value, dict) else None
    elif is_collection(other):
        value = other.get(key)
    else:
        return other
    if value is None:
        raise KeyError(f"{what}: the other TensorDict has no entry {key!r}; it needs every tensor leaf of this one")
    if not isinstance(value, (torch.Tensor, int, float, bool)):
        raise TypeError(f"{what}: the other TensorDict's entry {key!r} is a {type(value).__name__}, not a tensor")
    return value


def _leaves(td):
    return [(k, v) for k, v in td.items(True, True) if isinstance(v, torch.Tensor)]


def _compute(self, fn, operands, what: str, **kwargs) -> dict:
    """``{key: (leaf, fn(leaf, *operands at key))}`` for every tensor leaf; operands are looked
    up for every leaf before anything is computed."""
    per_leaf = [(k, v, [_operand(o, k, what) for o in operands]) for k, v in _leaves(self)]
    out = {}
    for k, v, ops in per_leaf:
        try:
            out[k] = (v, fn(v, *ops, **kwargs))
        except (RuntimeError, NotImplementedError) as err:  # torch's own words, with the entry's name
            raise type(err)(f"{what}: entry {k!r} ({v.dtype}, shape {tuple(v.shape)}): {err}") from None
    return out


def _write(self, results: dict, what: str):
    for k, (leaf, r) in results.items():
        if not torch.can_cast(r.dtype, leaf.dtype):
            raise TypeError(f"{what}: entry {k!r} is {leaf.dtype} and the result is {r.dtype}, which it cannot "
                            f"hold; nothing was written (cast first, e.g. td.float(), or use the out-of-place form)")
        if torch.broadcast_shapes(r.shape, leaf.shape) != leaf.shape:
            raise RuntimeError(f"{what}: entry {k!r} has shape {tuple(leaf.shape)} and the result "
                               f"{tuple(r.shape)} does not fit it; nothing was written")
    for leaf, r in results.values():
        leaf.copy_(r)
    return self


def _out_of_place(self, fn, operands, what: str, **kwargs):
    results = _compute(self, fn, operands, what, **kwargs)
    out = self.copy()  # new TensorDicts sharing the leaves; each tensor leaf is replaced below
    for k, (_, r) in results.items():
        out.set(k, r)
    return out


def _unary(name: str, inplace: bool):
    torch_fn = getattr(torch, name)
    what = name + "_" * inplace

    def method(self, **kwargs):
        if inplace:
            return _write(self, _compute(self, torch_fn, (), what, **kwargs), what)
        return self.apply(lambda t: torch_fn(t, **kwargs))

    method.__name__ = what
    method.__doc__ = (f"``torch.{name}`` of every tensor leaf{' in place (returns self)' if inplace else ''}; text "
                      f"leaves are kept.\n\n        Example: ``TensorDict(a=torch.tensor([0.5]), batch_size=[1])"
                      f".{what}()['a']``")
    return method


def _binary(name: str, fn, inplace: bool, doc: str):
    what = name + "_" * inplace

    def method(self, *operands, **kwargs):
        if inplace:
            return _write(self, _compute(self, fn, operands, what, **kwargs), what)
        return _out_of_place(self, fn, operands, what, **kwargs)

    method.__name__ = what
    method.__doc__ = (f"{doc} for every tensor leaf{' in place (returns self)' if inplace else ''}, with a number, a "
                      f"tensor or a TensorDict holding every tensor leaf; text leaves are kept.\n\n"
                      f"        Example: ``TensorDict(a=torch.tensor([0.5]), batch_size=[1]).{what}(...)``")
    return method


def _extreme(op):
    """``torch.maximum`` / ``minimum`` also with a number (type promotion as torch's)."""
    return lambda t, o: op(t, torch.as_tensor(o, device=t.device))


class MathMethods:
    """The methods of the module docstring, mixed into TensorDict."""

    def add_(self, other, *, alpha=None):
        """``self + other * alpha`` in place, leaf by leaf; returns self.

        Example:
            >>> TensorDict({"a": torch.ones(2)}, [2]).add_(1, alpha=2)["a"].tolist()
            [3.0, 3.0]
        """
        return _write(self, _compute(self, lambda t, o: t + (o if alpha is None else o * alpha), (other,), "add_"), "add_")

    def sub_(self, other, *, alpha=None):
        """``self - other * alpha`` in place, leaf by leaf; returns self.

        Example:
            >>> TensorDict({"a": torch.ones(2)}, [2]).sub_(TensorDict({"a": torch.ones(2)}, [2]))["a"].tolist()
            [0.0, 0.0]
        """
        return _write(self, _compute(self, lambda t, o: t - (o if alpha is None else o * alpha), (other,), "sub_"), "sub_")

    def rsub(self, other, *, alpha=None):
        """``other - self * alpha``, leaf by leaf.

        Example:
            >>> TensorDict({"a": torch.ones(2)}, [2]).rsub(3)["a"].tolist()
            [2.0, 2.0]
        """
        return _out_of_place(self, lambda t, o: o - (t if alpha is None else t * alpha), (other,), "rsub")

    mul_ = _binary("mul", torch.mul, True, "``torch.mul``")
    div_ = _binary("div", torch.div, True, "``torch.div``")
    pow = _binary("pow", torch.pow, False, "``torch.pow``")
    pow_ = _binary("pow", torch.pow, True, "``torch.pow``")
    mod = _binary("mod", torch.remainder, False, "``torch.remainder``")
    maximum = _binary("maximum", _extreme(torch.maximum), False,
                      "``torch.maximum``")
    maximum_ = _binary("maximum", _extreme(torch.maximum), True,
                       "``torch.maximum``")
    minimum = _binary("minimum", _extreme(torch.minimum), False,
                      "``torch.minimum``")
    minimum_ = _binary("minimum", _extreme(torch.minimum), True,
                       "``torch.minimum``")
    lerp = _binary("lerp", torch.lerp, False, "``torch.lerp(self, end, weight)``")
    lerp_ = _binary("lerp", torch.lerp, True, "``torch.lerp(self, end, weight)``")
    addcmul = _binary("addcmul", lambda t, a, b, value=1: torch.addcmul(t, a, b, value=value), False,
                      "``torch.addcmul(self, tensor1, tensor2)``")
    addcmul_ = _binary("addcmul", lambda t, a, b, value=1: torch.addcmul(t, a, b, value=value), True,
                       "``torch.addcmul(self, tensor1, tensor2)``")
    addcdiv = _binary("addcdiv", lambda t, a, b, value=1: torch.addcdiv(t, a, b, value=value), False,
                      "``torch.addcdiv(self, tensor1, tensor2)``")
    addcdiv_ = _binary("addcdiv", lambda t, a, b, value=1: torch.addcdiv(t, a, b, value=value), True,
                       "``torch.addcdiv(self, tensor1, tensor2)``")
    clamp_min_ = _binary("clamp_min", torch.clamp_min, True, "``torch.clamp_min``")
    clamp_max_ = _binary("clamp_max", torch.clamp_max, True, "``torch.clamp_max``")


for _name in _UNARY:
    setattr(MathMethods, _name, _unary(_name, False))
for _name in _UNARY_INPLACE:
    setattr(MathMethods, _name + "_", _unary(_name, True))
del _name
