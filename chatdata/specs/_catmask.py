"""The mask of a ``Categorical`` spec: which categories each position may take.

A mask is a bool tensor of shape ``(*safe_shape, n)`` (``True`` = allowed), given as anything
that broadcasts to it (one row of ``n`` for every position, as torchrl takes it). ``rand``
samples only allowed categories, ``zero``/``one`` give allowed ones, ``is_in`` refuses masked
ones and ``project`` moves a masked value to the nearest allowed category. A position where
every category is masked has no value: making or projecting one there is a ValueError.

Example:
    >>> m = as_mask([True, False, True], torch.Size([2]), 3, torch.device("cpu"))
    >>> tuple(m.shape), first_allowed(m).tolist(), nearest_allowed(m, torch.tensor([1, 1])).tolist()
    ((2, 3), [0, 0], [0, 0])
"""
from __future__ import annotations

import torch

__all__ = []


def as_mask(mask, safe: torch.Size, n: int, device) -> torch.Tensor | None:
    """``mask`` as a bool tensor of shape ``(*safe, n)`` on ``device`` (a broadcast view), or None."""
    if mask is None:
        return None
    if not isinstance(mask, torch.Tensor):
        try:
            mask = torch.as_tensor(mask)
        except (TypeError, ValueError, RuntimeError) as err:
            raise TypeError(f"a Categorical mask must be a bool tensor (or nested lists of bools), got {mask!r:.60} ({err})") from None
    if mask.dtype != torch.bool:
        if mask.is_floating_point() or mask.is_complex() or not bool(((mask == 0) | (mask == 1)).all()):
            raise TypeError(f"a Categorical mask must hold bools (True = allowed), got {mask.dtype} values")
        mask = mask.bool()
    want = torch.Size((*safe, n))
    if mask.ndim and mask.numel() == n and all(d == 1 for d in mask.shape[:-1]):
        mask = mask.reshape(n)  # one row of n for every position, as torchrl takes (1, n)
    if not mask.ndim or mask.shape[-1] != n:
        raise ValueError(
            f"a Categorical mask needs a last dim of n={n} (one bool per category), got shape {tuple(mask.shape)}"
        )
    try:
        return mask.to(device).expand(want)
    except RuntimeError:
        raise ValueError(
            f"a Categorical mask of shape {tuple(mask.shape)} does not broadcast to {tuple(want)} (the spec's "
            f"shape, -1 counted as 1, then n={n})"
        ) from None


def _rows(mask: torch.Tensor) -> torch.Tensor:
    """The mask as ``(positions, n)``; ValueError naming the first position with nothing allowed."""
    rows = mask.reshape(-1, mask.shape[-1])
    empty = ~rows.any(-1)
    if bool(empty.any()):
        pos = torch.unravel_index(empty.nonzero()[0, 0], mask.shape[:-1]) if mask.ndim > 1 else ()
        raise ValueError(
            f"every category is masked at index {tuple(int(p) for p in pos)}: no value fits the spec there; "
            "allow at least one category per position (update_mask)"
        )
    return rows


def first_allowed(mask: torch.Tensor) -> torch.Tensor:
    """The smallest allowed category at each position (int64, shape ``mask.shape[:-1]``)."""
    return _rows(mask).to(torch.uint8).argmax(-1).reshape(mask.shape[:-1])


def sample_allowed(mask: torch.Tensor, lead: torch.Size) -> torch.Tensor:
    """Uniform allowed categories, shape ``(*lead, *mask.shape[:-1])`` (int64)."""
    out_shape = torch.Size((*lead, *mask.shape[:-1]))
    rows = _rows(mask)
    k = lead.numel()
    if not k or not rows.shape[0]:
        return torch.zeros(out_shape, dtype=torch.int64, device=mask.device)
    draws = torch.multinomial(rows.float(), k, replacement=True)  # (positions, k)
    return draws.t().reshape(out_shape)


def allowed_at(mask: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    """Whether each category in ``value`` (int64 in ``[0, n)``, the spec's shape with leading
    batch dims; ``-1`` dims of any length) is allowed."""
    m = mask.expand(*value.shape, mask.shape[-1])
    return m.gather(-1, value.unsqueeze(-1)).squeeze(-1)


def nearest_allowed(mask: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    """``value`` (int64 in ``[0, n)``) with each masked category moved to the nearest allowed
    one (the lower one on a tie)."""
    ok = allowed_at(mask, value)
    if bool(ok.all()):
        return value
    _rows(mask)  # a position with nothing allowed has no nearest category
    bad = ~ok
    rows = mask.expand(*value.shape, mask.shape[-1])[bad]
    n = rows.shape[-1]
    dist = (torch.arange(n, device=value.device) - value[bad].unsqueeze(-1)).abs().double()
    dist = dist.masked_fill(~rows, float("inf"))
    out = value.clone()
    out[bad] = dist.argmin(-1)
    return out
