"""PackedBatchSampler: one packed bin per batch, sharded over ``torch.distributed`` ranks.

Each epoch the sampler packs the lengths (:func:`~chatdata.train.pack`; with ``shuffle`` the
tie-breaking among similar lengths and the order of the bins depend on ``seed + epoch``), then
deals the bins out to the ranks: rank ``r`` gets bins ``r, r + R, r + 2R, ...``. So the ranks'
shards are disjoint and together hold every sequence once. To give every rank the same number
of batches, the sampler first splits the fullest bins in two until the bin count is a multiple
of the number of ranks (``drop_last=True`` instead drops the few last bins). Only when every
bin holds a single sequence and the count still does not divide is a bin repeated, the way
``DistributedSampler`` pads.

``state_dict()`` records the epoch and how many batches this rank has taken; after
``load_state_dict`` the rest of that epoch comes out exactly as it would have.

Example:
    >>> s = PackedBatchSampler(torch.tensor([5, 3, 4, 2, 6]), max_tokens=8, seed=0)
    >>> sorted(i for b in s for i in b), len(s)
    ([0, 1, 2, 3, 4], 3)
"""
from __future__ import annotations

import heapq

import torch

from .packing import check_lengths, pack, planner

__all__ = ["PackedBatchSampler"]


def _dist_default(num_replicas, rank) -> tuple[int, int]:
    import torch.distributed as dist

    ready = dist.is_available() and dist.is_initialized()
    if num_replicas is None:
        num_replicas = dist.get_world_size() if ready else 1
    if rank is None:
        rank = dist.get_rank() if ready else 0
    for name, v in (("num_replicas", num_replicas), ("rank", rank)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"{name} must be an int, got {v!r}")
    if num_replicas <= 0:
        raise ValueError(f"num_replicas must be > 0, got {num_replicas}")
    if not 0 <= rank < num_replicas:
        raise ValueError(f"rank must be in [0, {num_replicas - 1}], got {rank}")
    return num_replicas, rank


class PackedBatchSampler(torch.utils.data.Sampler):
    """A batch sampler for ``DataLoader(batch_sampler=...)``; see the module docstring.

    ``lengths``: int tensor of sequence lengths (``TokenDataset.lengths``). ``max_tokens``:
    tokens per batch. ``num_replicas``/``rank`` default to ``torch.distributed``'s world size
    and rank when it is initialized (else 1 and 0). ``overflow``: ``"error"`` or ``"drop"`` for
    sequences longer than ``max_tokens`` (to truncate them, build the dataset with
    ``TokenDataset(path, max_length=max_tokens)`` and pass its lengths). ``strategy="tree"``
    packs prefix trees (collate them with ``collate_prefix_tree``): pass the dataset itself
    instead of its lengths, since sharing depends on the ids.

    Example:
        >>> s = PackedBatchSampler(torch.tensor([5, 3, 4, 2, 6]), max_tokens=8, num_replicas=2, rank=1)
        >>> len(s), s.state_dict()["batches_done"]
        (2, 0)
    """

    def __init__(self, lengths, max_tokens: int, shuffle: bool = True, seed: int = 0, num_replicas: int | None = None,
                 rank: int | None = None, drop_last: bool = False, strategy: str = "bfd", overflow: str = "error"):
        tree = planner(strategy)
        self._source = tree[0](lengths) if tree else None  # e.g. the PrefixIndex of strategy="tree"
        self.lengths = self._source.lengths if tree else check_lengths(lengths)
        if self.lengths.numel() == 0:
            raise ValueError("PackedBatchSampler got no lengths: the dataset holds no sequences")
        if overflow not in ("error", "drop"):
            raise ValueError(f"overflow must be 'error' or 'drop' for a sampler, got {overflow!r}; to truncate, "
                             "use TokenDataset(source, max_length=max_tokens) and pass its lengths")
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise TypeError(f"seed must be an int, got {seed!r}")
        self.max_tokens, self.strategy, self.overflow = max_tokens, strategy, overflow
        self.shuffle, self.seed, self.drop_last = bool(shuffle), seed, bool(drop_last)
        self.num_replicas, self.rank = _dist_default(num_replicas, rank)
        self.epoch = 0
        self._resume = 0     # batches of the current epoch to skip on the next __iter__
        self._done = 0       # batches of the current epoch handed out so far
        self._cache = None   # (epoch, this rank's bins)
        self._batches()      # validates max_tokens, strategy and the lengths now, not at the first batch

    def set_epoch(self, epoch: int) -> None:
        """Use the packing and order of ``epoch`` (call it before each epoch, as with DistributedSampler)."""
        if int(epoch) != self.epoch:
            self.epoch = int(epoch)
            self._resume = self._done = 0

    def _epoch_bins(self) -> list[torch.Tensor]:
        """Every rank's bins of this epoch, in dealing order (same on every rank)."""
        g_seed = self.seed + self.epoch
        plan = pack(self.lengths if self._source is None else self._source, self.max_tokens, self.strategy,
                    self.overflow, seed=g_seed if self.shuffle else None)
        bins = list(torch.split(plan.indices, (plan.bin_offsets[1:] - plan.bin_offsets[:-1]).tolist()))
        R = self.num_replicas
        if len(bins) % R and self.drop_last:
            if len(bins) < R:
                raise ValueError(f"only {len(bins)} batch(es) for {R} replicas with drop_last=True: "
                                 "lower max_tokens or use fewer replicas")
        elif len(bins) % R:
            self._split_fullest(bins, R - len(bins) % R)
        if self.shuffle:
            perm = torch.randperm(len(bins), generator=torch.Generator().manual_seed(g_seed)).tolist()
            bins = [bins[i] for i in perm]
        if len(bins) % R:
            if self.drop_last:
                bins = bins[: len(bins) - len(bins) % R]
            else:  # every bin holds one sequence: repeat some, as DistributedSampler pads
                bins += [bins[i % len(bins)] for i in range(R - len(bins) % R)]
        return bins

    @staticmethod
    def _split_fullest(bins: list, extra: int) -> None:
        """Split the bins with the most sequences in two, ``extra`` times (fewer if none has two left)."""
        heap = [(-b.numel(), i) for i, b in enumerate(bins) if b.numel() > 1]
        heapq.heapify(heap)
        for _ in range(extra):
            if not heap:
                return
            _, i = heapq.heappop(heap)
            b = bins[i]
            half = b.numel() // 2
            bins[i], tail = b[:half], b[half:]
            bins.append(tail)
            for j in (i, len(bins) - 1):
                if bins[j].numel() > 1:
                    heapq.heappush(heap, (-bins[j].numel(), j))

    def _batches(self) -> list[torch.Tensor]:
        if self._cache is None or self._cache[0] != self.epoch:
            self._cache = (self.epoch, self._epoch_bins()[self.rank::self.num_replicas])
        return self._cache[1]

    def __len__(self) -> int:
        return len(self._batches())

    def __iter__(self):
        batches = self._batches()
        start, self._resume = self._resume, 0
        self._done = start
        for b in batches[start:]:
            self._done += 1
            yield b.tolist()

    def state_dict(self, batches_done: int | None = None) -> dict:
        """Where this rank is: epoch and batches taken (pass ``batches_done`` if a DataLoader with
        workers has prefetched batches the training loop has not used yet)."""
        done = self._done if batches_done is None else int(batches_done)
        return {"epoch": self.epoch, "batches_done": done, "seed": self.seed, "shuffle": self.shuffle,
                "num_replicas": self.num_replicas, "rank": self.rank, "max_tokens": self.max_tokens,
                "strategy": self.strategy, "drop_last": self.drop_last, "num_sequences": self.lengths.numel()}

    def load_state_dict(self, state: dict) -> None:
        """Resume where ``state`` was taken: the next ``__iter__`` yields the rest of that epoch."""
        for key in ("seed", "shuffle", "num_replicas", "max_tokens", "strategy", "drop_last", "num_sequences"):
            mine = self.lengths.numel() if key == "num_sequences" else getattr(self, key)
            if key in state and state[key] != mine:
                raise ValueError(f"cannot resume: the saved sampler had {key}={state[key]!r}, this one has {mine!r}; "
                                 "the rest of the epoch would differ")
        self.epoch = int(state["epoch"])
        self._resume = self._done = int(state["batches_done"])
        n = len(self)
        if not 0 <= self._resume <= n:
            raise ValueError(f"cannot resume at batch {self._resume}: epoch {self.epoch} has {n} batches on this rank")
