"""Packing prefix trees: bins whose rows, laid out as one prefix tree, fit ``max_tokens``.

``pack(source, max_tokens, strategy="tree")`` (and ``PackedBatchSampler(source, ...,
strategy="tree")``) need the token ids, not only the lengths, since what a bin costs is the
number of nodes of its rows' trie (what :func:`~chatdata.train.collate_prefix_tree` will lay
out). ``source`` is a ``TokenDataset``, a ``ConcatTokenDataset``, a ragged token set (such as
``Rollout.tokens(per_turn=True)``) or a list of rows.

How: the rows are put in depth-first order once (a lexicographic sort of their ids) with the
common prefix ``lcp`` of each with the one before it (:class:`PrefixIndex`). A run of
neighbours costs ``sum(lengths) - sum(inner lcp)`` tokens. The whole set is cut into *units*,
the largest subtrees that fit a bin: a run too big for one bin is split at its deepest shared
node into the subtrees below it, and so on. So a GRPO group, or the turns of one rollout, stays
in one bin unless it alone is larger than ``max_tokens``; then its subtrees go to bins of their
own, each bin repeating the shared prefix. Only a *row* longer than ``max_tokens`` meets
``overflow``: ``"error"`` (names it), ``"drop"`` or ``"truncate"`` (``"split"`` would cut a row
from its own prefix and is refused). The units are then placed by best-fit decreasing, counting
the prefix that every row shares (a system prompt) once per bin. Each bin lists its rows in
depth-first order.

Example:
    >>> rows = [{"input_ids": [1, 2, 3, 4, 5, k]} for k in (6, 7, 8)] + [{"input_ids": [9, 9, 9]}]
    >>> plan = pack(rows, max_tokens=8, strategy="tree")
    >>> [b.tolist() for b in plan], plan.tree_lengths.tolist(), plan.bin_lengths.tolist()
    ([[0, 1, 2], [3]], [8, 3], [18, 3])
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch

from .concat import ConcatTokenDataset
from .dataset import TokenDataset
from .packing import PackingPlan, _int_column, check_max_tokens, check_seed, check_state_keys, pack, register_planner
from .trees import adjacent_lcp, dfs_order

__all__ = ["PrefixIndex", "TreePackingPlan", "pack_tree"]


def _token_source(source) -> tuple[np.ndarray, object]:
    """(lengths, row getter giving int64 ids) of anything that holds token rows."""
    if isinstance(source, TokenDataset):
        ids, s, e = source._ids_np, source._starts, source._ends
        return (e - s).astype(np.int64), lambda i: ids[s[i]:e[i]].astype(np.int64, copy=False)
    if isinstance(source, ConcatTokenDataset):
        parts = [_token_source(p) for p in source.parts]
        firsts = source._starts

        def row(i: int) -> np.ndarray:
            k = int(np.searchsorted(firsts, i, side="right")) - 1
            return parts[k][1](i - int(firsts[k]))

        return np.concatenate([p[0] for p in parts]), row
    if hasattr(source, "offsets") and hasattr(source, "values") and hasattr(source, "keys"):
        if "input_ids" not in source.keys():
            raise ValueError("the ragged stack has no input_ids column: strategy='tree' needs the token ids")
        ids = source.values.get("input_ids").numpy()
        off = source.offsets.numpy()
        return (off[1:] - off[:-1]).astype(np.int64), lambda i: ids[off[i]:off[i + 1]].astype(np.int64, copy=False)
    if isinstance(source, (list, tuple)) and source and all(isinstance(r, Mapping) or hasattr(r, "keys") for r in source):
        rows = []
        for j, r in enumerate(source):
            if "input_ids" not in r.keys():
                raise ValueError(f"row {j} has no input_ids: strategy='tree' needs the token ids")
            a = np.asarray(r["input_ids"].numpy() if isinstance(r["input_ids"], torch.Tensor) else r["input_ids"])
            if a.ndim != 1 or (a.size and a.dtype.kind not in "iu"):
                raise ValueError(f"row {j}: input_ids must be 1-D integer ids, got shape {a.shape} and dtype {a.dtype}")
            rows.append(a.astype(np.int64))
        return np.array([r.size for r in rows], dtype=np.int64), rows.__getitem__
    raise TypeError("strategy='tree' needs the token ids to see which rows share a prefix: pass the dataset "
                    "(TokenDataset / ConcatTokenDataset), a ragged token set or a list of rows, not only their "
                    f"lengths (got {type(source).__name__})")


class PrefixIndex:
    """The rows of a token source in depth-first order (``order``), the common prefix of each with
    the row before it in that order (``lcp``), and their ``lengths`` (per row, given order).
    Computed once; every epoch's tree plan starts from it.

    Example:
        >>> idx = PrefixIndex([{"input_ids": [1, 2, 3]}, {"input_ids": [0]}, {"input_ids": [1, 2]}])
        >>> idx.order.tolist(), idx.lcp.tolist(), idx.tree_tokens
        ([1, 2, 0], [0, 0, 2], 4)
    """

    def __init__(self, source):
        lengths, row = _token_source(source)
        self.lengths = torch.from_numpy(lengths)
        n = lengths.size
        if n == 0:
            raise ValueError("nothing to pack: the source holds no rows")
        if not lengths.all():  # else a bin holds it and collate_prefix_tree refuses that batch, mid-epoch
            j = int(np.flatnonzero(lengths == 0)[0])
            raise ValueError(f"row {j} has no tokens: a prefix-tree batch cannot hold an empty row "
                             f"({int((lengths == 0).sum())} row(s) are empty); leave them out of the token set, or "
                             "pack by lengths (strategy='bfd') for collate_padding_free, which skips them")
        self.order = dfs_order(row, n, first_chunk=64)
        self.lcp = adjacent_lcp(row, self.order)

    @property
    def tree_tokens(self) -> int:
        """Nodes of the trie of all rows (what one tree of everything would cost)."""
        return int(self.lengths.numpy().sum() - self.lcp.sum())

    def __len__(self) -> int:
        return self.order.size


class TreePackingPlan(PackingPlan):
    """A :class:`PackingPlan` whose bins are prefix trees: ``tree_lengths`` (per bin, the nodes of its
    rows' trie, at most ``max_tokens``) is what a bin costs; ``bin_lengths`` and ``num_tokens``
    still count the rows' tokens. ``efficiency`` and ``lower_bound`` use the tree sizes."""

    def __init__(self, indices, bin_offsets, starts, stops, max_tokens: int, dropped=None, tree_lengths=None,
                 tree_total: int | None = None):
        super().__init__(indices, bin_offsets, starts, stops, max_tokens, dropped)
        self.tree_lengths = _int_column(tree_lengths, "tree_lengths")
        if self.tree_lengths.shape != (len(self),):
            raise ValueError(f"inconsistent tree packing plan: tree_lengths must have one entry per bin ({len(self)}), "
                             f"got shape {tuple(self.tree_lengths.shape)}")
        self.tree_total = int(self.tree_lengths.sum()) if tree_total is None else int(tree_total)

    @property
    def tree_tokens(self) -> int:
        return int(self.tree_lengths.sum())

    @property
    def lower_bound(self) -> int:
        """ceil(nodes of the trie of every planned row / max_tokens)."""
        return -(-self.tree_total // self.max_tokens)

    @property
    def efficiency(self) -> float:
        """Tree tokens / (bins * max_tokens)."""
        return self.tree_tokens / (len(self) * self.max_tokens) if len(self) else 0.0

    def __repr__(self) -> str:
        return (f"TreePackingPlan(bins={len(self)}, sequences={self.indices.numel()}, tree_tokens={self.tree_tokens}, "
                f"tokens={self.num_tokens}, max_tokens={self.max_tokens}, efficiency={self.efficiency:.4f}, "
                f"lower_bound={self.lower_bound})")

    def state_dict(self) -> dict:
        return {**super().state_dict(), "tree_lengths": self.tree_lengths, "tree_total": self.tree_total}

    @classmethod
    def from_state_dict(cls, state: dict) -> "TreePackingPlan":
        check_state_keys(state, ("indices", "bin_offsets", "starts", "stops", "max_tokens", "tree_lengths"),
                         "TreePackingPlan")
        return cls(state["indices"], state["bin_offsets"], state["starts"], state["stops"], state["max_tokens"],
                   state.get("dropped"), state["tree_lengths"], state.get("tree_total"))


def _units(Ls: np.ndarray, lcp: np.ndarray, C: int) -> tuple[np.ndarray, np.ndarray]:
    """(starts, ends) in depth-first positions of the largest subtrees that fit ``C`` tokens."""
    n = Ls.size
    s_len = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(Ls, out=s_len[1:])
    s_lcp = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lcp, out=s_lcp[1:])

    def size(a, b):  # tokens of the run a..b-1: lengths minus the lcps inside it
        return s_len[b] - s_len[a] - (s_lcp[b] - s_lcp[a + 1])

    if n == 1 or size(0, n) <= C:
        return np.array([0]), np.array([n])
    done_a, done_b = [], []
    todo = [(0, n)]
    while todo:  # a loop over split nodes of the trie, each split vectorised over its children
        a, b = todo.pop()
        inner = lcp[a + 1:b]
        cuts = a + 1 + np.flatnonzero(inner == inner.min())
        starts = np.concatenate(([a], cuts))
        ends = np.concatenate((cuts, [b]))
        ok = (size(starts, ends) <= C) | (ends - starts == 1)
        done_a.append(starts[ok])
        done_b.append(ends[ok])
        todo.extend(zip(starts[~ok].tolist(), ends[~ok].tolist()))
    a, b = np.concatenate(done_a), np.concatenate(done_b)
    o = np.argsort(a, kind="stable")
    return a[o], b[o]


def _run_min(lcp: np.ndarray, p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """min(lcp[p + 1 : q + 1]) for each pair (p < q): the common prefix of depth-first rows p and q."""
    if p.size == 0:
        return np.zeros(0, dtype=np.int64)
    ext = np.append(lcp, 0)
    idx = np.empty(2 * p.size, dtype=np.int64)
    idx[0::2], idx[1::2] = p + 1, q + 1
    return np.minimum.reduceat(ext, idx)[0::2]


def pack_tree(source, max_tokens: int, overflow: str = "error", *, seed: int | None = None) -> TreePackingPlan:
    """Plan prefix-tree bins of at most ``max_tokens`` trie nodes; see the module docstring.

    ``source``: rows with their ids (or a :class:`PrefixIndex` of them). ``seed`` breaks ties
    among units of similar size at random, as :func:`~chatdata.train.pack` does.

    Example:
        >>> plan = pack_tree([{"input_ids": [1, 2, 3]}, {"input_ids": [1, 2, 4]}], max_tokens=4)
        >>> len(plan), plan.tree_lengths.tolist()
        (1, [4])
    """
    C = check_max_tokens(max_tokens)
    if seed is not None:
        seed = check_seed(seed)
    if overflow == "split":
        raise ValueError("overflow='split' would cut a row from its own prefix; for strategy='tree' use "
                         "'error', 'truncate' or 'drop'")
    if overflow not in ("error", "truncate", "drop"):
        raise ValueError(f"overflow must be one of ('error', 'truncate', 'drop'), got {overflow!r}")
    index = source if isinstance(source, PrefixIndex) else PrefixIndex(source)
    lengths = index.lengths.numpy()
    order, lcp = index.order, index.lcp.copy()
    Ls = lengths[order]
    dropped = None
    too_long = Ls > C
    if too_long.any():
        if overflow == "error":
            bad = order[too_long]
            first = int(bad.min())
            raise ValueError(f"sequence {first} has {int(lengths[first])} tokens, more than max_tokens={C} "
                             f"({bad.size} sequence(s) are too long); pass overflow='truncate' or 'drop', or raise max_tokens")
        if overflow == "drop":
            keep = ~too_long
            if not keep.any():
                raise ValueError(f"nothing to pack: all {keep.size} sequences are longer than max_tokens={C} "
                                 "and overflow='drop' dropped them all (the plan would be empty)")
            dropped = np.sort(order[too_long])
            kept = np.flatnonzero(keep)
            new_lcp = np.zeros(kept.size, dtype=np.int64)
            new_lcp[1:] = _run_min(lcp, kept[:-1], kept[1:])  # neighbours across the dropped rows
            order, lcp, Ls = order[kept], new_lcp, Ls[kept]
        else:
            Ls = np.minimum(Ls, C)
            lcp = np.minimum(lcp, C)
    n = order.size
    ua, ub = _units(Ls, lcp, C)
    s_len = np.concatenate(([0], np.cumsum(Ls)))
    s_lcp = np.concatenate(([0], np.cumsum(lcp)))
    sizes = s_len[ub] - s_len[ua] - (s_lcp[ub] - s_lcp[ua + 1])
    shared = int(lcp[1:].min()) if n > 1 else 0  # every row starts with these: counted once per bin
    if shared >= C:
        shared = 0
    unit_plan = pack(torch.from_numpy(sizes - shared), C - shared, "bfd", "error", seed=seed)
    # rows of each bin, depth-first: units sorted inside their bin, each unit's rows in order
    bins = unit_plan.indices.numpy()
    bin_of_entry = np.repeat(np.arange(len(unit_plan)), np.diff(unit_plan.bin_offsets.numpy()))
    o = np.lexsort((bins, bin_of_entry))
    units, unit_bin = bins[o], bin_of_entry[o]
    counts = ub[units] - ua[units]
    first = np.repeat(ua[units] - np.concatenate(([0], np.cumsum(counts)[:-1])), counts)
    pos = np.arange(int(counts.sum()), dtype=np.int64) + first  # depth-first positions, bin after bin
    row_bin = np.repeat(unit_bin, counts)
    nb = len(unit_plan)
    offsets = np.zeros(nb + 1, dtype=np.int64)
    np.cumsum(np.bincount(row_bin, minlength=nb), out=offsets[1:])
    same = np.zeros(pos.size, dtype=bool)
    same[1:] = row_bin[1:] == row_bin[:-1]
    shared_prev = np.zeros(pos.size, dtype=np.int64)
    shared_prev[same] = _run_min(lcp, pos[:-1][same[1:]], pos[same])
    tree_lengths = np.bincount(row_bin, weights=Ls[pos] - shared_prev, minlength=nb).astype(np.int64)
    rows = order[pos]
    return TreePackingPlan(torch.from_numpy(rows), torch.from_numpy(offsets), torch.zeros(rows.size, dtype=torch.int64),
                           torch.from_numpy(Ls[pos]), C, None if dropped is None else torch.from_numpy(dropped),
                           torch.from_numpy(tree_lengths), int(Ls.sum() - lcp[1:].sum()))


register_planner("tree", PrefixIndex, pack_tree)
