"""Shape helpers shared by every spec: ``-1`` means "any length" along that dim.

A value *fits* a spec shape when its shape ends with the spec's shape (extra leading dims are
batch dims), a ``-1`` in the spec matching any length. Sampling (``zero``/``one``/``rand``)
counts a ``-1`` as 1.

Example:
    >>> shape_mismatch(torch.Size([2, 5]), torch.Size([-1])) is None
    True
    >>> safe_shape(torch.Size([-1, 3]))
    torch.Size([1, 3])
"""
from __future__ import annotations

import operator

import torch

__all__ = ["norm_shape", "safe_shape", "shape_mismatch", "expand_shape", "index_shape", "norm_dim", "parse_shape_args"]


def norm_shape(shape, what: str = "shape") -> torch.Size:
    """A ``torch.Size`` from an int or a sequence of ints >= -1 (TypeError/ValueError otherwise)."""
    if isinstance(shape, torch.Size):
        dims = tuple(shape)
    elif isinstance(shape, (list, tuple)):
        dims = tuple(shape)
    elif isinstance(shape, bool):
        raise TypeError(f"{what} must be an int or a sequence of ints, got {shape!r}")
    else:
        try:
            dims = (operator.index(shape),)
        except TypeError:
            raise TypeError(f"{what} must be an int or a sequence of ints, got {type(shape).__name__} {shape!r}") from None
    out = []
    for d in dims:
        if isinstance(d, bool):
            raise TypeError(f"{what} must hold ints, got {d!r} in {dims!r}")
        try:
            d = operator.index(d)
        except TypeError:
            raise TypeError(f"{what} must hold ints, got {type(d).__name__} {d!r} in {dims!r}") from None
        if d < -1:
            raise ValueError(f"{what} dims must be >= 0, or -1 for 'any length'; got {d} in {dims!r}")
        out.append(d)
    return torch.Size(out)


def parse_shape_args(shape: tuple, what: str = "shape") -> torch.Size:
    """``f(2, 3)`` and ``f((2, 3))`` alike."""
    if len(shape) == 1 and isinstance(shape[0], (list, tuple, torch.Size)):
        shape = shape[0]
    return norm_shape(shape, what)


def safe_shape(shape: torch.Size) -> torch.Size:
    """The shape with every ``-1`` counted as 1 (what sampling produces)."""
    return torch.Size(1 if d == -1 else d for d in shape)


def shape_mismatch(value_shape, spec_shape: torch.Size) -> str | None:
    """Why ``value_shape`` does not fit ``spec_shape``, or None when it does."""
    value_shape = tuple(value_shape)
    n = len(spec_shape)
    if len(value_shape) < n:
        return (
            f"shape {value_shape} has {len(value_shape)} dims but the spec's shape {tuple(spec_shape)} "
            f"needs at least {n}"
        )
    tail = value_shape[len(value_shape) - n :]
    for i, (v, s) in enumerate(zip(tail, spec_shape)):
        if s != -1 and v != s:
            return (
                f"shape {value_shape} does not fit the spec's shape {tuple(spec_shape)}: dim "
                f"{len(value_shape) - n + i} is {'of any length' if v == -1 else v}, expected {s} "
                "(-1 in a spec means any length; extra leading dims are batch dims)"
            )
    return None


def expand_shape(old: torch.Size, new: torch.Size) -> None:
    """Check that a spec of shape ``old`` can be expanded to ``new`` (ValueError otherwise).

    New leading dims are prepended; a trailing dim may stay as it is, grow from 1, or become
    fixed from -1 ("any length").
    """
    if len(new) < len(old):
        raise ValueError(f"cannot expand a spec of shape {tuple(old)} to {tuple(new)}: it has fewer dims")
    for n, o in zip(new[len(new) - len(old) :], old):
        if not (n == o or o in (1, -1)):
            raise ValueError(
                f"cannot expand a spec of shape {tuple(old)} to {tuple(new)}: the trailing dims must "
                "match the spec's dims (or the spec's dim must be 1 or -1)"
            )


def norm_dim(dim: int, ndim: int, what: str = "dim") -> int:
    if not isinstance(dim, int) or isinstance(dim, bool):
        raise TypeError(f"{what} must be an int, got {dim!r}")
    n = max(ndim, 1)  # like torch, a 0-dim spec takes dim 0 or -1
    if not -n <= dim < n:
        raise IndexError(f"{what} {dim} is out of range for a spec with {ndim} dims")
    return dim % n


def index_shape(shape: torch.Size, index):
    """Shape of ``spec[index]`` and the index to apply to tensors of the safe shape.

    Basic indices (int, slice, None, Ellipsis and tuples of them) work on every dim; a
    ``-1`` dim stays ``-1`` under a slice. Lists, tensors and arrays work on fixed-length dims.
    """
    idx = index if isinstance(index, tuple) else (index,)
    if any(isinstance(i, (str, bytes)) for i in idx):
        raise IndexError(f"cannot index a spec of shape {tuple(shape)} by {index!r:.60}: keys index a Composite, "
                         "a leaf spec is indexed by position (ints, slices, None, ..., lists or tensors)")
    if sum(i is Ellipsis for i in idx) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    consumed = sum(1 for i in idx if i is not None and i is not Ellipsis)
    if consumed > len(shape):
        raise IndexError(f"too many indices for a spec of shape {tuple(shape)}: {consumed} given")
    if Ellipsis in [i for i in idx if not isinstance(i, (torch.Tensor, list))]:
        pos = next(k for k, i in enumerate(idx) if i is Ellipsis)
        idx = idx[:pos] + (slice(None),) * (len(shape) - consumed) + idx[pos + 1 :]
    basic = all(isinstance(i, (int, slice)) and not isinstance(i, bool) or i is None for i in idx)
    if not basic:
        if -1 in shape:
            raise IndexError(
                f"cannot index a spec of shape {tuple(shape)} (with -1 dims) by {index!r}: use ints, "
                "slices, None and ... on specs with 'any length' dims"
            )
        try:
            out = torch.empty(shape, device="meta")[index].shape
        except (TypeError, IndexError, ValueError, RuntimeError) as err:
            raise IndexError(
                f"cannot index a spec of shape {tuple(shape)} by {index!r:.60}: {err} (index a spec by position "
                "like its values: ints, slices, None, ..., int/bool lists or tensors; keys index a Composite)"
            ) from None
        return torch.Size(out), index
    new, t_idx, d = [], [], 0
    for i in idx:
        if i is None:
            new.append(1)
            t_idx.append(None)
            continue
        size = shape[d]
        if isinstance(i, int):
            if size != -1 and not -size <= i < size:
                raise IndexError(f"index {i} is out of range for dim {d} of size {size}")
            t_idx.append(0 if size == -1 else i)
        else:
            if i.step is not None and operator.index(i.step) <= 0:
                raise IndexError(f"slice step must be > 0 (as for tensors), got {i.step} in {index!r}")
            if size == -1:
                new.append(-1)
                t_idx.append(slice(None))
            else:
                new.append(len(range(*i.indices(size))))
                t_idx.append(i)
        d += 1
    new.extend(shape[d:])
    return torch.Size(new), tuple(t_idx)
