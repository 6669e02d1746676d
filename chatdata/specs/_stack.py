"""``torch.stack`` of specs: the spec of ``torch.stack(values, dim)`` for values of each spec.

Specs of one type, shape, device and dtype stack into one spec with a new dim: equal specs
are expanded along it, ``Bounded`` specs stack their bounds, ``Categorical`` specs their masks,
``Composite`` specs (same keys, same ``data_cls``) stack entry by entry. Anything else (a
different shape, ``n``, dtype, or example_data) is a ValueError naming the difference; torchrl
would give a lazy stacked spec there, which chatdata does not have.

Example:
    >>> from chatdata.specs import Bounded
    >>> spec = torch.stack([Bounded(0.0, 1.0, shape=(2,)), Bounded(0.0, 2.0, shape=(2,))])
    >>> tuple(spec.shape), spec.high.tolist()
    ((2, 2), [[1.0, 1.0], [2.0, 2.0]])
"""
from __future__ import annotations

import torch

from ._shape import norm_dim

__all__ = ["spec_torch_function"]


def _why_different(a, b) -> str | None:
    """What keeps ``a`` and ``b`` from stacking (their type, shape, device or dtype), or None."""
    if type(a) is not type(b):
        return f"a {type(a).__name__} and a {type(b).__name__}"
    for field in ("shape", "device", "dtype"):
        if getattr(a, field) != getattr(b, field):
            return f"{field} {getattr(a, field)} and {getattr(b, field)}"
    return None


def stack_specs(specs, dim: int = 0):
    """The spec of ``torch.stack(values, dim)`` (see the module docstring)."""
    specs = list(specs)
    if not specs:
        raise ValueError("torch.stack needs at least one spec")
    first = specs[0]
    d = norm_dim(dim, first.ndim + 1)
    for i, other in enumerate(specs[1:], 1):
        reason = _why_different(first, other)
        if reason is not None:
            raise ValueError(
                f"cannot stack specs 0 and {i}: {reason} (stacked specs need one type, shape, device and dtype)"
            )
    new = torch.Size((*first.shape[:d], len(specs), *first.shape[d:]))
    stacked = first._stacked(specs, d, new)
    if stacked is None:
        i, other = next((i, other) for i, other in enumerate(specs) if other != first)
        if getattr(first, "n", None) != getattr(other, "n", None):
            what = f" in n ({first.n} and {other.n})"
        elif hasattr(first, "example_data"):  # NonTensor: nothing else is left to differ
            what = f" in example_data ({first.example_data!r:.40} and {other.example_data!r:.40})"
        else:
            what = ""
        raise ValueError(f"cannot stack specs 0 and {i}: these {type(first).__name__} specs differ{what}, and one spec cannot hold both")
    return stacked


def spec_torch_function(func, args=(), kwargs=None):
    """``__torch_function__`` body of the specs: ``torch.stack`` only."""
    if func is torch.stack:
        return stack_specs(*args, **(kwargs or {}))
    raise TypeError(f"{getattr(func, '__name__', func)} does not take specs (torch.stack does); call it on values, e.g. spec.rand()")
