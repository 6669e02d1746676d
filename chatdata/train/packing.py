"""Packing plans: which sequences share a bin of at most ``max_tokens`` tokens.

:func:`pack` looks only at the sequence lengths and returns a :class:`PackingPlan`; no token
moves until a batch is collated. The plan is columns (flat int64 sequence indices plus bin
offsets), cheap to recompute each epoch and cheap to save.

The bin-packing runs in vectorised numpy code over *groups* of the length-sorted sequences,
never in a Python loop per sequence. Sequences are sorted by decreasing length and cut into
groups whose lengths lie within 1% of each other (every length below ~100 tokens is its own
group). A group is placed in one step: the candidate bins (those with room for the group's
longest sequence) are ordered by remaining room, ascending for best-fit decreasing (``"bfd"``)
or by creation for first-fit decreasing (``"ffd"``); each candidate takes as many of the
group's sequences as fit its room (``room // longest``), in that order, and what is left
opens new bins. For groups of equal lengths this is exactly what BFD/FFD do one sequence at a
time; for the 1%-wide groups it is a close approximation. On log-normal lengths (mean ~600)
into 8192-token bins it uses < 0.1% more bins than the lower bound ceil(total / max_tokens).

Example:
    >>> plan = pack(torch.tensor([5, 3, 4, 2, 6]), max_tokens=8)
    >>> len(plan), [b.tolist() for b in plan], round(plan.efficiency, 3)
    (3, [[4, 3], [0, 1], [2]], 0.833)
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import torch

from ..td.core import is_integer_dtype

__all__ = ["PackingPlan", "pack", "check_lengths", "check_seed", "as_int", "check_state_keys", "check_max_tokens",
           "STRATEGIES", "OVERFLOWS", "register_planner", "planner"]

STRATEGIES = ("bfd", "ffd", "tree")
OVERFLOWS = ("error", "truncate", "split", "drop")
# strategies planned elsewhere register here (tree_packing.py: "tree"): name -> (index(source), plan(index, ...))
_PLANNERS: dict = {}


def register_planner(strategy: str, index, plan) -> None:
    """Let ``pack(..., strategy=strategy)`` and the sampler use ``plan(index(source), max_tokens, overflow, seed=)``."""
    _PLANNERS[strategy] = (index, plan)


def planner(strategy: str):
    """``(index, plan)`` of a strategy registered with :func:`register_planner`, else None."""
    return _PLANNERS.get(strategy)
_GROUP_RATIO = 1.01  # lengths within 1% of each other are placed together
# TRL's pack_dataset strategies, said in chatdata's terms when one is passed here
_TRL_STRATEGIES = {
    "bfd_split": " (TRL's 'bfd_split' is strategy='bfd', overflow='split': the same pieces)",
    "wrapped": " (TRL's 'wrapped' has no counterpart: it cuts sequences across bins and lets a bin's sequences "
               "attend to each other; chatdata keeps every sequence whole in one bin, overflow='split' aside)",
}


def check_lengths(lengths, name: str = "lengths") -> torch.Tensor:
    """``lengths`` as a 1-D int64 tensor, or a clear error (wrong dtype, shape or a negative length).

    Example:
        >>> check_lengths([3, 1]).dtype
        torch.int64
    """
    if isinstance(lengths, np.ndarray):
        if lengths.dtype.kind not in "iu":
            raise TypeError(f"{name} must hold integers (token counts), got a numpy array of dtype {lengths.dtype}")
        lengths = torch.from_numpy(np.ascontiguousarray(lengths).astype(np.int64, copy=False))
    elif not isinstance(lengths, torch.Tensor):
        if hasattr(lengths, "lengths") and hasattr(lengths, "__getitems__"):  # a dataset, not its lengths
            raise TypeError(f"{name} must be the sequence lengths: pass {type(lengths).__name__}.lengths "
                            "(or the dataset itself with strategy='tree')")
        try:
            lengths = torch.as_tensor(lengths)
        except (TypeError, ValueError, RuntimeError) as err:
            raise TypeError(f"{name} must be a 1-D integer tensor of token counts, got {type(lengths).__name__} ({err})") from None
        if lengths.numel() == 0:  # [] becomes float32: an empty list is a valid (empty) set of lengths
            lengths = lengths.to(torch.int64)
    if not is_integer_dtype(lengths.dtype):
        raise TypeError(f"{name} must hold integers (token counts), got dtype {lengths.dtype}; "
                        "convert with .long() if the values are whole numbers")
    if lengths.ndim != 1:
        raise ValueError(f"{name} must be 1-D (one length per sequence), got shape {tuple(lengths.shape)}")
    lengths = lengths.detach().to(device="cpu", dtype=torch.int64).contiguous()
    if lengths.numel() and int(lengths.numpy().min()) < 0:
        i = int(lengths.numpy().argmin())
        raise ValueError(f"{name}[{i}] is {int(lengths[i])}: a sequence length cannot be negative")
    return lengths


def as_int(value, name: str) -> int:
    """``value`` as a Python int: an int, a numpy integer or a 0-d integer tensor; a bool, a float
    (even a whole one) or anything else is a TypeError naming ``name``.

    Example:
        >>> as_int(np.int32(3), "epoch"), as_int(torch.tensor(4), "epoch")
        (3, 4)
    """
    if isinstance(value, torch.Tensor) and value.ndim == 0 and not (value.dtype.is_floating_point
                                                                     or value.dtype.is_complex or value.dtype == torch.bool):
        return int(value)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {value!r:.100}")
    return int(value)


#: the largest max_tokens: bin rooms and token counts are int64
MAX_TOKENS_LIMIT = 2 ** 63 - 1
#: what torch.Generator().manual_seed takes
SEED_RANGE = (-2 ** 63, 2 ** 64 - 1)


def _int_column(values, name: str) -> torch.Tensor:
    """``values`` as an int64 tensor; floats and bools are refused (they would be cut silently)."""
    t = torch.as_tensor(values)
    if t.numel() and not is_integer_dtype(t.dtype):
        raise TypeError(f"a packing plan's {name} must be integers, got dtype {t.dtype}")
    return t.to(torch.int64)


def check_state_keys(state, keys, what: str) -> None:
    """Refuse a state that is not a dict or lacks one of ``keys`` (truncated or from something else).

    Example:
        >>> check_state_keys({"epoch": 0}, ("epoch",), "PackedBatchSampler")
    """
    if not isinstance(state, Mapping):
        raise TypeError(f"a {what} state must be the dict its state_dict() gave, got {type(state).__name__}")
    missing = [k for k in keys if k not in state]
    if missing:
        raise ValueError(f"not a {what} state: it has no {', '.join(map(repr, missing))} "
                         f"(pass what {what}.state_dict() returned)")


def check_max_tokens(max_tokens) -> int:
    """``max_tokens`` as a Python int in ``[1, 2**63 - 1]``, or a clear error.

    Example:
        >>> check_max_tokens(np.int64(8))
        8
    """
    max_tokens = as_int(max_tokens, "max_tokens")
    if max_tokens <= 0:
        raise ValueError(f"max_tokens must be > 0, got {max_tokens}")
    if max_tokens > MAX_TOKENS_LIMIT:
        raise ValueError(f"max_tokens must be at most 2**63 - 1 (token counts are int64), got {max_tokens}")
    return max_tokens


def check_seed(seed, name: str = "seed") -> int:
    """``seed`` as an int that ``torch.Generator().manual_seed`` takes, or a clear error.

    Example:
        >>> check_seed(np.int64(7))
        7
    """
    seed = as_int(seed, name)
    if not SEED_RANGE[0] <= seed <= SEED_RANGE[1]:
        raise ValueError(f"{name} must be in [-2**63, 2**64 - 1] (a torch generator seed), got {seed}")
    return seed


class PackingPlan(Sequence):
    """Bins of sequence indices: ``plan[i]`` is an int64 tensor, ``len(plan)`` the number of bins.

    Columns: ``indices`` (flat, bin after bin), ``bin_offsets`` (``len(plan) + 1``), and per entry
    the token range ``starts``/``stops`` taken from its sequence (the whole sequence unless
    ``overflow`` truncated or split it). ``dropped`` lists sequences left out by ``overflow="drop"``.

    Example:
        >>> plan = pack([4, 4, 3], max_tokens=8)
        >>> plan.bin_lengths.tolist(), plan.lower_bound, plan.num_tokens
        ([8, 3], 2, 11)
    """

    def __init__(self, indices, bin_offsets, starts, stops, max_tokens: int, dropped=None):
        self.indices = _int_column(indices, "indices")
        self.bin_offsets = _int_column(bin_offsets, "bin_offsets")
        self.starts = _int_column(starts, "starts")
        self.stops = _int_column(stops, "stops")
        self.max_tokens = check_max_tokens(max_tokens)
        self.dropped = torch.zeros(0, dtype=torch.int64) if dropped is None else _int_column(dropped, "dropped")
        n = self.indices.numel()
        if self.indices.ndim != 1 or self.bin_offsets.ndim != 1 or self.bin_offsets.numel() < 1 \
                or int(self.bin_offsets[0]) != 0 or int(self.bin_offsets[-1]) != n \
                or self.starts.shape != (n,) or self.stops.shape != (n,):
            raise ValueError("inconsistent packing plan: bin_offsets must run from 0 to len(indices), "
                             "and starts/stops must have one entry per index")
        # one vectorised pass each: a plan read back from a file must not give bins of negative size
        if n and (int(self.indices.min()) < 0 or int(self.starts.min()) < 0 or bool((self.stops < self.starts).any())):
            raise ValueError("inconsistent packing plan: indices and starts must be >= 0 and stops >= starts")
        if bool((self.bin_offsets[1:] < self.bin_offsets[:-1]).any()):
            raise ValueError("inconsistent packing plan: bin_offsets must not decrease")

    def __len__(self) -> int:
        return self.bin_offsets.numel() - 1

    def _bin(self, i) -> int:
        """``i`` as a bin number in ``[0, len(self))``, negative ones counted from the end."""
        i = as_int(i, "a bin number")
        n = len(self)
        if not -n <= i < n:
            raise IndexError(f"bin {i} is out of range for a plan of {n} bins")
        return i % n

    def __getitem__(self, i):
        """Bin ``i`` (an int tensor of sequence indices); a slice gives a list of bins."""
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        i = self._bin(i)
        return self.indices[int(self.bin_offsets[i]):int(self.bin_offsets[i + 1])]

    def __iter__(self):
        off = self.bin_offsets.tolist()
        for a, b in zip(off[:-1], off[1:]):
            yield self.indices[a:b]

    def spans(self, i: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(indices, starts, stops)`` of bin ``i``: entry ``j`` is tokens ``starts[j]:stops[j]`` of sequence ``indices[j]``."""
        i = self._bin(i)
        a, b = int(self.bin_offsets[i]), int(self.bin_offsets[i + 1])
        return self.indices[a:b], self.starts[a:b], self.stops[a:b]

    @property
    def bin_lengths(self) -> torch.Tensor:
        """Tokens in every bin."""
        per_entry = self.stops - self.starts
        csum = torch.zeros(per_entry.numel() + 1, dtype=torch.int64)
        torch.cumsum(per_entry, 0, out=csum[1:])
        return csum[self.bin_offsets[1:]] - csum[self.bin_offsets[:-1]]

    @property
    def num_tokens(self) -> int:
        return int((self.stops - self.starts).sum())

    @property
    def lower_bound(self) -> int:
        """The fewest bins any packing can use: ceil(num_tokens / max_tokens)."""
        return -(-self.num_tokens // self.max_tokens)

    @property
    def efficiency(self) -> float:
        """tokens / (bins * max_tokens), in [0, 1]."""
        return self.num_tokens / (len(self) * self.max_tokens) if len(self) else 0.0

    def state_dict(self) -> dict:
        """Tensors and ints only (``torch.save`` / ``torch.load(weights_only=True)`` take it)."""
        return {"indices": self.indices, "bin_offsets": self.bin_offsets, "starts": self.starts,
                "stops": self.stops, "max_tokens": self.max_tokens, "dropped": self.dropped}

    @classmethod
    def from_state_dict(cls, state: dict) -> "PackingPlan":
        """The plan ``state_dict()`` described."""
        check_state_keys(state, ("indices", "bin_offsets", "starts", "stops", "max_tokens"), "PackingPlan")
        return cls(state["indices"], state["bin_offsets"], state["starts"], state["stops"],
                   state["max_tokens"], state.get("dropped"))

    def __repr__(self) -> str:
        return (f"PackingPlan(bins={len(self)}, sequences={self.indices.numel()}, tokens={self.num_tokens}, "
                f"max_tokens={self.max_tokens}, efficiency={self.efficiency:.4f}, lower_bound={self.lower_bound})")


def _place_groups(L: np.ndarray, C: int, best_fit: bool) -> tuple[np.ndarray, int]:
    """Bin id of every item of ``L`` (sorted by decreasing length, all in 1..C); see the module docstring."""
    n = L.size
    bin_of = np.empty(n, dtype=np.int64)
    room = np.empty(n, dtype=np.int64)
    if n == 0:
        return bin_of, 0
    key = np.floor(np.log(L) / math.log(_GROUP_RATIO)).astype(np.int64)
    starts = np.flatnonzero(np.concatenate(([True], key[1:] != key[:-1])))
    ends = np.concatenate((starts[1:], [n]))
    nb = 0
    for a, b in zip(starts.tolist(), ends.tolist()):
        longest, k, placed = int(L[a]), b - a, 0
        if nb and 2 * longest <= C:  # a longer one never fits beside the longer ones before it
            cur = room[:nb]
            cand = np.flatnonzero(cur >= longest)
            if cand.size:
                r = cur[cand]
                if best_fit:  # rooms fit in 16 bits for usual bin sizes: numpy then radix-sorts them
                    o = np.argsort(r.astype(np.uint16) if C < 65536 else r, kind="stable")
                    cand, r = cand[o], r[o]
                cum = np.cumsum(r // longest)
                placed = min(k, int(cum[-1]))
                target = cand[np.searchsorted(cum, np.arange(placed), side="right")]
                bin_of[a:a + placed] = target
                np.subtract.at(room, target, L[a:a + placed])
        if placed < k:
            new = nb + np.arange(k - placed) // (C // longest)
            bin_of[a + placed:b] = new
            top = int(new[-1]) + 1
            room[nb:top] = C
            np.subtract.at(room, new, L[a + placed:b])
            nb = top
    return bin_of, nb


def pack(lengths, max_tokens: int, strategy: str = "bfd", overflow: str = "error", *, seed: int | None = None) -> PackingPlan:
    """Plan bins of at most ``max_tokens`` tokens over sequences of the given ``lengths``.

    ``strategy``: ``"bfd"`` (best-fit decreasing), ``"ffd"`` (first-fit decreasing) or
    ``"tree"`` (bins of prefix trees: pass the rows or dataset instead of ``lengths``; see
    :mod:`chatdata.train.tree_packing`).
    ``overflow`` says what happens to a sequence longer than ``max_tokens``: ``"error"`` (a
    ValueError naming it), ``"truncate"`` (keep its first ``max_tokens`` tokens),
    ``"split"`` (cut it into pieces of ``max_tokens``, packed like sequences) or ``"drop"``.
    ``seed`` breaks ties between sequences of similar length at random, so each epoch can get
    other bin mates; without it ties follow the index order (deterministic).

    Example:
        >>> plan = pack(torch.tensor([9, 2, 3]), max_tokens=6, overflow="split")
        >>> [plan.spans(i)[0].tolist() for i in range(len(plan))], plan.stops.tolist()
        ([[0], [0, 2], [1]], [6, 9, 3, 2])
    """
    C = check_max_tokens(max_tokens)
    if seed is not None:
        seed = check_seed(seed)
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {STRATEGIES}, got {strategy!r}{_TRL_STRATEGIES.get(strategy, '')}")
    if strategy in _PLANNERS:  # "tree": the first argument holds the token ids, not only lengths
        return _PLANNERS[strategy][1](lengths, C, overflow, seed=seed)
    if overflow not in OVERFLOWS:
        raise ValueError(f"overflow must be one of {OVERFLOWS}, got {overflow!r}")
    lens = check_lengths(lengths)
    if lens.numel() == 0:
        raise ValueError("nothing to pack: lengths is empty (the dataset holds no sequences)")
    L = lens.numpy()
    idx = np.arange(L.size, dtype=np.int64)
    start = np.zeros(L.size, dtype=np.int64)
    dropped = None
    too_long = L > C
    if too_long.any():
        if overflow == "error":
            bad = np.flatnonzero(too_long)
            raise ValueError(f"sequence {int(bad[0])} has {int(L[bad[0]])} tokens, more than max_tokens={C} "
                             f"({bad.size} sequence(s) are too long); pass overflow='truncate', 'split' or 'drop', "
                             "or raise max_tokens")
        if overflow == "drop":
            dropped = np.flatnonzero(too_long)
            keep = ~too_long
            idx, L, start = idx[keep], L[keep], start[keep]
            if L.size == 0:
                raise ValueError(f"nothing to pack: all {dropped.size} sequences are longer than max_tokens={C} "
                                 "and overflow='drop' dropped them all (the plan would be empty)")
        elif overflow == "truncate":
            L = np.minimum(L, C)
        else:  # split into pieces of C tokens, the last one shorter
            pieces = np.maximum(-(-L // C), 1)
            idx = np.repeat(idx, pieces)
            first = np.repeat(np.cumsum(pieces) - pieces, pieces)
            start = (np.arange(idx.size) - first) * C
            L = np.minimum(np.repeat(L, pieces) - start, C)
    # decreasing length, ties in index order (or a seeded random order); C - L fits in 16 bits for
    # usual bin sizes, and numpy radix-sorts 16-bit keys
    key = (C - L).astype(np.uint16) if C < 65536 else -L
    if seed is not None:  # random order among equal lengths: a random permutation, then a stable sort
        perm = torch.randperm(L.size, generator=torch.Generator().manual_seed(seed)).numpy()
        order = perm[np.argsort(key[perm], kind="stable")]
    else:
        order = np.argsort(key, kind="stable")
    Ls = L[order]
    positive = int(np.count_nonzero(Ls))
    bin_of, nb = _place_groups(Ls[:positive], C, best_fit=(strategy == "bfd"))
    if positive < Ls.size:  # empty sequences fit anywhere: the last bin (or one of their own)
        nb = max(nb, 1)
        bin_of = np.concatenate((bin_of, np.full(Ls.size - positive, nb - 1, dtype=np.int64)))
    by_bin = np.argsort(bin_of, kind="stable")
    entries = order[by_bin]
    offsets = np.zeros(nb + 1, dtype=np.int64)
    np.cumsum(np.bincount(bin_of, minlength=nb), out=offsets[1:])
    return PackingPlan(torch.from_numpy(idx[entries]), torch.from_numpy(offsets), torch.from_numpy(start[entries]),
                       torch.from_numpy(start[entries] + L[entries]), C,
                       None if dropped is None else torch.from_numpy(dropped))
