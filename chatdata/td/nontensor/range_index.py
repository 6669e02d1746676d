"""The index of a ``NonTensorStack`` kept as a Python ``range`` (a column built or loaded in
order), and the views that share it.

Building or loading a column of n values costs O(1) because its index (the pool id of each
element) stays a ``range`` until something writes into it; a slice of it is a smaller range.
A view must still see the writes of its source and the source those of its views, as with a
tensor index. So a range-indexed stack and the range views sliced from it form a group (weak
references, so dead views drop out): the first write into any of them materialises one tensor for the
whole group, and every live member becomes a view of it. Reads never materialise anything. A
shape operation that reads the ids in the same order (``unsqueeze``, ``squeeze``, ``reshape(2, 2)``,
``flatten``) keeps the range, with a shape, and joins the group: O(1). Any other view
(``permute``, ``expand``) and indexing a reshaped one materialise the group first, so that writes
through it reach the stack.

Example:
    >>> from chatdata.td import NonTensorStack
    >>> s = NonTensorStack.from_list(["a", "b", "c"])
    >>> tail = s[1:]                   # both still ranges: no tensor yet
    >>> tail[0] = "B"                  # the write materialises one index for both
    >>> s.tolist(), tail.tolist()
    (['a', 'B', 'c'], ['B', 'c'])
"""
from __future__ import annotations

import weakref

import torch

__all__ = ["share_range", "materialise", "range_tensor", "consecutive_run"]


def share_range(source, view) -> None:
    """Make ``view`` (a stack whose index is a sub-range of ``source``'s range) share its index
    with ``source``."""
    group = source.__dict__.get("_range_group")
    if group is None:  # weak references: a view that dies leaves the group
        group = source._range_group = [weakref.ref(source)]
    group.append(weakref.ref(view))
    if len(group) & (len(group) - 1) == 0:  # at lengths 2, 4, 8, ...: drop the dead (amortised O(1))
        group[:] = [ref for ref in group if ref() is not None]
    view._range_group = group


def range_tensor(r: range) -> torch.Tensor:
    """``r`` as an int64 tensor (an empty range, such as ``range(4, 1)``, as an empty one)."""
    if not len(r):
        return torch.zeros(0, dtype=torch.long)
    return torch.arange(r.start, r.stop, r.step, dtype=torch.long)


def materialise(stack) -> None:
    """Give ``stack`` (whose index is a range) a tensor index, and every live member of its
    group a view of the same tensor (a member with a negative step, which no tensor view can
    have, gets a tensor of its own)."""
    group = stack.__dict__.pop("_range_group", None)
    members = [m for m in (ref() for ref in group or ()) if m is not None and m is not stack and m._idx is None]
    members.append(stack)
    ranges = [m._rng for m in members if m._rng.step > 0 and len(m._rng)]
    base = None
    if ranges:
        lo, hi = min(r.start for r in ranges), max(r[-1] for r in ranges) + 1
        base = torch.arange(lo, hi, dtype=torch.long)
    for m in members:
        r = m._rng
        if r.step > 0 and len(r):
            m._idx = base[r.start - lo:r[-1] - lo + 1:r.step]
        else:
            m._idx = range_tensor(r)
        if m._shape is not None:  # a reshaped range (unsqueeze of a column): a view of that shape
            m._idx = m._idx.view(m._shape)
        m._rng, m._shape = None, None
        m.__dict__.pop("_range_group", None)


def consecutive_run(ids: torch.Tensor) -> range | None:
    """``ids`` (1-D) as a range when they are one run of consecutive ids (a view of a column
    built or loaded in order: ``h[i]``'s messages), else None; one vectorised check.

    Example:
        >>> consecutive_run(torch.tensor([4, 5, 6])), consecutive_run(torch.tensor([4, 6, 6]))
        (range(4, 7), None)
    """
    n = ids.numel()
    if not n:
        return None
    start = int(ids[0])
    if int(ids[-1]) - start != n - 1 or (n > 2 and not bool((ids.diff() == 1).all())):
        return None
    return range(start, start + n)
