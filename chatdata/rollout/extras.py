"""Side columns of a rollout: per-token data the policy returns with its ids, and each turn's span.

``Rollout.add_response(ids, logprobs=None, extras=None, rows=None)``: ``extras`` maps a name to
one tensor per row of ``rows`` whose first dim is that row's response length (``None`` for a
row without it), e.g. ``{"routed_experts": [int16 (R, layers, top_k), ...]}`` as vLLM returns
for routing replay. Every name keeps one per-token shape and dtype for the whole rollout.
``Rollout.tokens()`` carries each extra aligned with the ids, zeros on every other token.

Storage: an integer extra whose values all fit uint8 (or int8) is stored so, half the bytes of
int16 routed-expert ids (up to 256 experts), and ``tokens()`` records its own dtype in a
``column_dtypes`` entry (``{"routed_experts": "int16"}``). ``TokenDataset`` items and the
collates (``chatdata.train``) give the column back in that dtype, values unchanged, also after
``memmap`` / ``load_memmap``. ``tokens(compact=False)`` gives every column in its own dtype now.

Example:
    >>> side, spec = RowSide(), ExtrasSpec()
    >>> got = check_extras({"e": [torch.tensor([[3], [4]], dtype=torch.int16)]}, [0], [2], spec)
    >>> side.record(5, 7, got[0])
    >>> side.turns, side.extras["e"][0][1].dtype, spec.dtypes
    ([(5, 7)], torch.uint8, {'e': torch.int16})
"""
from __future__ import annotations

from collections.abc import Mapping

import torch

__all__ = ["RowSide", "ExtrasSpec", "check_extras", "narrow_integers", "RESERVED", "COLUMN_DTYPES"]

COLUMN_DTYPES = "column_dtypes"  # the entry chatdata.train reads to widen narrowed columns back
RESERVED = ("input_ids", "assistant_masks", "logprobs", "labels", "attention_mask", "position_ids", COLUMN_DTYPES)


def narrow_integers(t: torch.Tensor) -> torch.Tensor:
    """``t`` as uint8 (or int8) when it is an integer tensor whose values all fit, else ``t``.

    Example:
        >>> narrow_integers(torch.tensor([[0, 255]], dtype=torch.int16)).dtype
        torch.uint8
    """
    if t.dtype in (torch.uint8, torch.int8, torch.bool) or t.dtype.is_floating_point or t.dtype.is_complex \
            or t.numel() == 0:
        return t
    lo, hi = int(t.min()), int(t.max())
    if lo >= 0 and hi <= 255:
        return t.to(torch.uint8)
    if lo >= -128 and hi <= 127:
        return t.to(torch.int8)
    return t


class RowSide:
    """One row's turn spans ``(start, end)`` (its generated ids, in order) and stored extras
    (name -> list of ``(start, tensor)``)."""

    __slots__ = ("turns", "extras")

    def __init__(self) -> None:
        self.turns: list[tuple[int, int]] = []
        self.extras: dict[str, list[tuple[int, torch.Tensor]]] = {}

    def record(self, start: int, end: int, extras: dict) -> None:
        self.turns.append((start, end))
        for name, t in extras.items():
            self.extras.setdefault(name, []).append((start, t))


class ExtrasSpec:
    """Per rollout: each extra's per-token shape and own dtype (fixed by its first use)."""

    __slots__ = ("shapes", "dtypes")

    def __init__(self) -> None:
        self.shapes: dict[str, tuple] = {}
        self.dtypes: dict[str, torch.dtype] = {}

    def storage_dtype(self, name: str, sides: list) -> torch.dtype:
        """The narrow dtype every stored piece of ``name`` has, else its own dtype."""
        kinds = {t.dtype for s in sides for _, t in s.extras.get(name, ())}
        return kinds.pop() if len(kinds) == 1 else self.dtypes[name]

    def flat_columns(self, pieces: list, total: int, compact: bool) -> tuple[dict, dict]:
        """``({name: (total, *shape) column}, {name: own dtype name for narrowed columns})``;
        ``pieces``: ``(flat start, RowSide, lo, hi)`` per output row: the row's extras that start
        in ``[lo, hi)`` go to ``flat start + their start``."""
        cols, narrowed = {}, {}
        for name, shape in self.shapes.items():
            own = self.dtypes[name]
            dtype = self.storage_dtype(name, [p[1] for p in pieces]) if compact else own
            col = torch.zeros((total, *shape), dtype=dtype)
            for at, side, lo, hi in pieces:
                for start, t in side.extras.get(name, ()):
                    if lo <= start < hi:
                        col[at + start:at + start + t.shape[0]] = t
            cols[name] = col
            if dtype != own:
                narrowed[name] = str(own).removeprefix("torch.")
        return cols, narrowed


def _per_row(name: str, value, n: int) -> list:
    if isinstance(value, torch.Tensor):
        if value.is_nested:
            value = list(value.unbind())
        elif n == 1:
            value = [value]
        else:
            raise ValueError(f"extras[{name!r}] must hold one tensor per row ({n} rows), got one tensor of shape "
                             f"{tuple(value.shape)}: pass a list")
    if not isinstance(value, (list, tuple)):
        raise TypeError(f"extras[{name!r}] must be a list with one tensor per row, got {type(value).__name__}")
    if len(value) != n:
        raise ValueError(f"extras[{name!r}] has {len(value)} entries for {n} rows")
    return list(value)


def check_extras(extras, idx: list, lengths: list, spec: ExtrasSpec) -> list[dict]:
    """Per row of ``idx`` (response lengths ``lengths``), ``{name: stored tensor}``, checked
    against the rollout's ``spec`` (which learns new names). Raises before anything is stored.

    Example:
        >>> check_extras({"w": [torch.ones(2)]}, [3], [3], ExtrasSpec())
        Traceback (most recent call last):
        ...
        ValueError: row 3: extras['w'] has 2 entries along its first dim but the response has 3 ids
    """
    out: list[dict] = [{} for _ in idx]
    if extras is None:
        return out
    if not isinstance(extras, Mapping):
        raise TypeError(f"extras must map column names to one tensor per row, got {type(extras).__name__}")
    new_shapes, new_dtypes = {}, {}
    for name, value in extras.items():
        if not isinstance(name, str) or not name:
            raise TypeError(f"extras names must be non-empty strings, got {name!r}")
        if name in RESERVED:
            raise ValueError(f"extras[{name!r}]: {name!r} is a column the rollout writes itself; pick another name")
        for k, (i, n, v) in enumerate(zip(idx, lengths, _per_row(name, value, len(idx)))):
            if v is None:
                continue
            try:
                t = v if isinstance(v, torch.Tensor) else torch.as_tensor(v)
            except (TypeError, ValueError, RuntimeError, OverflowError) as err:
                raise TypeError(f"row {i}: extras[{name!r}] must be a tensor (or nested lists of numbers), got "
                                f"{type(v).__name__} ({err})") from None
            if t.ndim == 0 or t.shape[0] != n:
                raise ValueError(f"row {i}: extras[{name!r}] has {t.shape[0] if t.ndim else 0} entries along its "
                                 f"first dim but the response has {n} ids")
            shape = spec.shapes.get(name, new_shapes.get(name, tuple(t.shape[1:])))
            dtype = spec.dtypes.get(name, new_dtypes.get(name, t.dtype))
            if tuple(t.shape[1:]) != shape or t.dtype != dtype:
                raise ValueError(f"row {i}: extras[{name!r}] has per-token shape {tuple(t.shape[1:])} and dtype "
                                 f"{t.dtype}, but this rollout's {name!r} has {shape} and {dtype}")
            new_shapes.setdefault(name, shape)
            new_dtypes.setdefault(name, dtype)
            t = t.detach()  # values only: a column of tokens() never carries autograd history
            stored = narrow_integers(t)
            out[k][name] = (stored if stored is not t else t.clone()).contiguous()
    for name, shape in new_shapes.items():
        spec.shapes.setdefault(name, shape)
        spec.dtypes.setdefault(name, new_dtypes[name])
    return out
