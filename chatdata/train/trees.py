"""Prefix-tree batches: rows that share a prefix laid out once, depth-first.

A GRPO group samples one prompt G times; the per-turn rows of a rollout each repeat the turns
before them; forks of a session share everything up to the fork. :func:`collate_prefix_tree`
puts every distinct prefix of the rows once in one sequence of ``T`` tokens (``T`` = the number
of nodes of the rows' trie, exactly), in depth-first order, and says with one int per token what
each token may see: token ``i`` attends to token ``j`` iff ``j <= i < subtree_end[j]`` (``j`` is
``i`` itself or one of its ancestors). ``position_ids`` is each token's depth, its position in
every row that holds it. ``row_index[n, k]`` is the tree position of row ``n``'s token ``k``, so
per-row numbers (logprobs, losses) come back from one forward over the tree; see
:mod:`chatdata.train.tree_attention` for the masks and :func:`~chatdata.train.tree_logprobs`.

How it is built, with work per row and per token column, never a Python step per token: the
rows are sorted lexicographically (a stable sort on their ids' bytes, refined chunk by chunk
only among rows that tie). In that order, rows sharing a prefix are neighbours, and row ``k``
adds exactly its tokens past ``lcp[k]``, its longest common prefix with row ``k - 1`` (found by
comparing numpy slices). ``subtree_end`` of a node is where the first later row that does not
extend it starts, read from a stack of the ``lcp`` minima.

Example:
    >>> b = collate_prefix_tree([{"input_ids": [1, 2, 3]}, {"input_ids": [1, 2, 4, 5]}, {"input_ids": [1, 9]}])
    >>> b["input_ids"].tolist(), b["position_ids"].tolist(), b["subtree_end"].tolist()
    ([[1, 2, 3, 4, 5, 9]], [[0, 1, 2, 2, 3, 1]], [[6, 5, 3, 5, 5, 6]])
    >>> b["row_index"].tolist()
    [[0, 1, 2, -1], [0, 1, 3, 4], [0, 5, -1, -1]]
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from .columns import gather_rows, pad_index, pad_rows

__all__ = ["collate_prefix_tree", "dfs_order", "adjacent_lcp", "TreeLayout", "tree_layout", "TREE_KEYS"]

TREE_KEYS = ("input_ids", "position_ids", "subtree_end", "row_index", "row_lengths")


def dfs_order(row: Callable[[int], np.ndarray], n: int, first_chunk: int = 64) -> np.ndarray:
    """Row indices in lexicographic order of their ids (ties keep their order), which is a
    depth-first order of the rows' trie. ``row(i)`` gives row ``i``'s ids as int64.

    Rows are compared on ``first_chunk`` ids; only rows that tie are compared again, on the
    next, four times longer, chunk. So memory stays at a chunk per row, however long the rows.

    Example:
        >>> rows = [np.array([2, 1]), np.array([1, 2, 3]), np.array([1, 2])]
        >>> dfs_order(rows.__getitem__, 3).tolist()
        [2, 1, 0]
    """
    order = np.arange(n, dtype=np.int64)
    todo = [(0, n, 0, max(1, int(first_chunk)))]
    while todo:
        a, b, d, c = todo.pop()
        idx = order[a:b].tolist()
        keys = [row(i)[d:d + c].tobytes() for i in idx]
        perm = sorted(range(b - a), key=keys.__getitem__)
        order[a:b] = [idx[p] for p in perm]
        full = 8 * c
        k, m = 0, b - a
        while k < m:  # runs of rows that tie on this chunk (a loop over rows, not tokens)
            key, e = keys[perm[k]], k + 1
            while e < m and keys[perm[e]] == key:
                e += 1
            if e - k > 1 and len(key) == full:  # they go on past the chunk: compare the next one
                todo.append((a + k, a + e, d + c, 4 * c))
            k = e
    return order


def _lcp(x: np.ndarray, y: np.ndarray) -> int:
    m = min(x.size, y.size)
    i, c = 0, 64
    while i < m:
        j = min(m, i + c)
        ne = np.flatnonzero(x[i:j] != y[i:j])
        if ne.size:
            return i + int(ne[0])
        i, c = j, 4 * c
    return m


def adjacent_lcp(row: Callable[[int], np.ndarray], order: np.ndarray) -> np.ndarray:
    """``lcp[k]``: the longest common prefix of rows ``order[k - 1]`` and ``order[k]`` (``lcp[0] = 0``).

    Example:
        >>> rows = [np.array([1, 2, 3]), np.array([1, 2, 4]), np.array([7])]
        >>> adjacent_lcp(rows.__getitem__, np.array([0, 1, 2])).tolist()
        [0, 2, 0]
    """
    lcp = np.zeros(len(order), dtype=np.int64)
    prev = row(int(order[0])) if len(order) else None
    for k in range(1, len(order)):
        cur = row(int(order[k]))
        lcp[k] = _lcp(prev, cur)
        prev = cur
    return lcp


class TreeLayout:
    """Where each row's tokens go in the tree: ``order`` (rows depth-first), ``lcp`` (shared with
    the row before in that order), ``base`` (tree position of each of these rows' first new
    token) and ``T`` (nodes); ``lengths`` is per row, in the given order."""

    __slots__ = ("order", "lcp", "base", "lengths", "T")

    def __init__(self, order: np.ndarray, lcp: np.ndarray, lengths: np.ndarray):
        self.order, self.lcp, self.lengths = order, lcp, lengths
        new = lengths[order] - lcp
        self.base = np.zeros(order.size + 1, dtype=np.int64)
        np.cumsum(new, out=self.base[1:])
        self.T = int(self.base[-1])

    def positions(self) -> np.ndarray:
        """Depth of every tree position (the ``position_ids``)."""
        new = self.base[1:] - self.base[:-1]
        return np.arange(self.T, dtype=np.int64) - np.repeat(self.base[:-1] - self.lcp, new)

    def source_index(self, starts: np.ndarray) -> np.ndarray:
        """For every tree position, the flat index of a token it stands for (``starts``: each row's first flat index)."""
        new = self.base[1:] - self.base[:-1]
        return np.arange(self.T, dtype=np.int64) + np.repeat(starts[self.order] + self.lcp - self.base[:-1], new)

    def row_index(self, L: int) -> np.ndarray:
        """``(N, L)``: the tree position of each row's tokens, -1 past its end (rows in the given order)."""
        n = self.order.size
        out = np.full((n, L), -1, dtype=np.int64)
        ramp = np.arange(L, dtype=np.int64)
        lens = self.lengths[self.order].tolist()
        rows, lcps, bases = self.order.tolist(), self.lcp.tolist(), self.base.tolist()
        for k in range(n):  # two slice copies per row
            r, l, c = rows[k], lcps[k], lens[k]
            if l:
                out[r, :l] = out[rows[k - 1], :l]
            out[r, l:c] = ramp[l:c] + (bases[k] - l)
        return out

    def subtree_end(self) -> np.ndarray:
        """``(T,)``: one past the last tree position below each node (its own row's and later rows')."""
        n, T = self.order.size, self.T
        out = np.empty(T, dtype=np.int64)
        lens = self.lengths[self.order].tolist()
        lcps, bases = self.lcp.tolist(), self.base.tolist()
        stack_k: list[int] = []
        stack_v: list[int] = []  # strictly increasing lcp values, bottom to top
        for k in range(n - 1, -1, -1):
            if k + 1 < n:
                v = lcps[k + 1]
                while stack_v and stack_v[-1] >= v:
                    stack_v.pop()
                    stack_k.pop()
                stack_k.append(k + 1)
                stack_v.append(v)
            # node at depth p of row k (p >= lcp[k]) ends where the first later row with lcp <= p starts
            lo_k, hi, shift = lcps[k], lens[k], bases[k] - lcps[k]
            i = len(stack_v) - 1
            while hi > lo_k:
                if i >= 0:
                    lo, val = max(stack_v[i], lo_k), bases[stack_k[i]]
                else:
                    lo, val = lo_k, T
                if lo < hi:
                    out[lo + shift:hi + shift] = val
                    hi = lo
                i -= 1
        return out


def tree_layout(flat_ids: np.ndarray, offsets: np.ndarray, first_chunk: int | None = None) -> TreeLayout:
    """The :class:`TreeLayout` of rows given as flat int64 ids cut by ``offsets``.

    Example:
        >>> lay = tree_layout(np.array([1, 2, 1, 3]), np.array([0, 2, 4]))
        >>> lay.T, lay.positions().tolist(), lay.subtree_end().tolist()
        (3, [0, 1, 1], [3, 2, 3])
    """
    starts, ends = offsets[:-1], offsets[1:]
    lengths = ends - starts

    def row(i: int) -> np.ndarray:
        return flat_ids[starts[i]:ends[i]]

    n = lengths.size
    chunk = first_chunk if first_chunk is not None else max(64, int(lengths.max()) if n else 64)
    order = dfs_order(row, n, chunk)
    return TreeLayout(order, adjacent_lcp(row, order), lengths)


def collate_prefix_tree(rows) -> dict:
    """One prefix-tree batch of ``rows``; see the module docstring.

    ``rows``: a list of dicts (or TensorDict items) with a 1-D ``input_ids`` and any per-token
    columns (see :mod:`chatdata.train.columns`), the ``TokenRows`` a ``TokenDataset`` gives a
    ``DataLoader``, or a ragged token set such as ``Rollout.tokens(per_turn=True)``. Returns:

    - ``input_ids``, ``position_ids`` (depths), ``subtree_end``: int64, ``(1, T)``, ``T`` the
      number of trie nodes; depth-first layout;
    - ``row_index`` ``(N, L)`` int64 (-1 past a row's end) and ``row_lengths`` ``(N,)``;
    - every per-token column, per row, ``(N, L, ...)``: ``assistant_masks``, ``logprobs``,
      ``advantages``, ``loss_weights``, ``routed_experts``, ... padded with 0, and ``labels``
      (when rows carry them) padded with -100, since 0 is a token id.

    Feed a model with :func:`~chatdata.train.tree_model_inputs` (or
    :func:`~chatdata.train.tree_attention_mask`): the batch itself has no mask, and a model
    given only its ``position_ids`` would attend across branches.

    Example:
        >>> b = collate_prefix_tree([{"input_ids": [7, 8, 9], "logprobs": [0.0, -1.0, -2.0]},
        ...                          {"input_ids": [7, 8, 5], "logprobs": [0.0, -1.5, -0.5]}])
        >>> b["input_ids"].tolist(), b["row_index"].tolist(), b["logprobs"].tolist()
        ([[7, 8, 5, 9]], [[0, 1, 3], [0, 1, 2]], [[0.0, -1.0, -2.0], [0.0, -1.5, -0.5]])
    """
    flat = gather_rows(rows, allow_empty=False)
    for name in flat.columns:
        if name in TREE_KEYS[1:]:
            raise ValueError(f"the rows carry a per-token column named {name!r}, which a tree batch uses for its "
                             "own layout: rename that column")
    ids = flat.ids.numpy()
    lay = tree_layout(ids, flat.offsets)
    lengths = flat.lengths
    L = int(lengths.max())
    T = lay.T
    out = {
        "input_ids": torch.from_numpy(ids[lay.source_index(flat.offsets[:-1])]).reshape(1, T),
        "position_ids": torch.from_numpy(lay.positions()).reshape(1, T),
        "subtree_end": torch.from_numpy(lay.subtree_end()).reshape(1, T),
        "row_index": torch.from_numpy(lay.row_index(L)),
        "row_lengths": torch.from_numpy(lengths.copy()),
    }
    if flat.columns:
        index = pad_index(flat.offsets, L)
        for name, col in flat.columns.items():
            out[name] = pad_rows(col, flat.offsets, L, -100 if name == "labels" else 0, index=index)
    return out
