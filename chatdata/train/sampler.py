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
``load_state_dict`` the rest of that epoch comes out exactly as it would have. The state also
holds what the plan depends on (seed, max_tokens, world size, ..., a digest of the lengths):
a state from another dataset or setup (world size aside) is refused before anything changes,
since the rest of its epoch would differ (a sample seen twice or never).

A state of another world size resumes too (an elastic restart on fewer or more ranks): the
bins the old ranks had taken (``batches_done`` each, since every rank takes as many) are left
out, and the rest of the epoch's bins, in their order, are dealt out to the new ranks as above
(split, dropped or repeated to make them divide), without a new shuffle. The state then carries
that history (``carry``: the world sizes and steps of the epoch so far), so a later resume
yields the same rest again; the next epoch is packed and dealt for the new world size alone.

Example:
    >>> s = PackedBatchSampler(torch.tensor([5, 3, 4, 2, 6]), max_tokens=8, seed=0)
    >>> sorted(i for b in s for i in b), len(s)
    ([0, 1, 2, 3, 4], 3)
"""
from __future__ import annotations

import hashlib
import heapq

import numpy as np
import torch

from .packing import as_int, check_lengths, check_max_tokens, check_seed, check_state_keys, pack, planner

__all__ = ["PackedBatchSampler", "STATE_VERSION"]

#: the layout of ``state_dict()``; a state of another version is refused. A state whose epoch
#: changed world size (``carry``) is version 2, which a chatdata that would ignore the carry refuses
STATE_VERSION = 2
_READS = (1, 2)
#: what a state must agree on with the sampler that loads it (else the rest of the epoch differs)
_SAME = ("seed", "shuffle", "max_tokens", "strategy", "drop_last", "overflow", "num_sequences", "lengths_digest")


def _dist_default(num_replicas, rank) -> tuple[int, int]:
    import torch.distributed as dist

    ready = dist.is_available() and dist.is_initialized()
    if num_replicas is None:
        num_replicas = dist.get_world_size() if ready else 1
    if rank is None:
        rank = dist.get_rank() if ready else 0
    num_replicas, rank = as_int(num_replicas, "num_replicas"), as_int(rank, "rank")
    if num_replicas <= 0:
        raise ValueError(f"num_replicas must be > 0, got {num_replicas}")
    if not 0 <= rank < num_replicas:
        raise ValueError(f"rank must be in [0, {num_replicas - 1}], got {rank}")
    return num_replicas, rank


class PackedBatchSampler(torch.utils.data.Sampler):
    """A batch sampler for ``DataLoader(batch_sampler=...)``; see the module docstring.

    ``lengths``: int tensor of sequence lengths (``TokenDataset.lengths``). ``max_tokens``:
    tokens per batch. ``num_replicas``/``rank`` default to ``torch.distributed``'s world size
    and rank when it is initialized (else 1 and 0); every rank must get the same lengths, ``seed``
    and settings, since each computes the whole plan (a per-rank seed overlaps the shards, as with
    ``DistributedSampler``). ``overflow``: ``"error"`` or ``"drop"`` for
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
        seed = check_seed(seed)
        # a Python int: a numpy or tensor one would go into state_dict() as it was given, and a numpy
        # int there makes the checkpoint unloadable by torch.load(weights_only=True)
        self.max_tokens, self.strategy, self.overflow = check_max_tokens(max_tokens), strategy, overflow
        for name, v in (("shuffle", shuffle), ("drop_last", drop_last)):
            if not isinstance(v, (bool, np.bool_)) and not (isinstance(v, int) and v in (0, 1)):
                raise TypeError(f"{name} must be True or False, got {v!r:.100}")
        self.shuffle, self.seed, self.drop_last = bool(shuffle), seed, bool(drop_last)
        self.num_replicas, self.rank = _dist_default(num_replicas, rank)
        self.epoch = 0
        self._resume = 0     # batches of the current epoch to skip on the next __iter__
        self._done = 0       # batches of the current epoch handed out so far
        self._carry = ()     # ((world size, batches each rank took), ...) of this epoch before a resize
        self._cache = None   # ((epoch, carry), this rank's bins)
        self._digest = None  # of the lengths (and, for trees, of the prefix index), made on first state_dict()
        self._batches()      # validates max_tokens, strategy and the lengths now, not at the first batch

    def set_epoch(self, epoch: int) -> None:
        """Use the packing and order of ``epoch`` (call it before each epoch, as with DistributedSampler)."""
        epoch = self._check_epoch(epoch)
        if epoch != self.epoch:
            self.epoch = epoch
            self._resume = self._done = 0
            self._carry = ()

    def _check_epoch(self, epoch) -> int:
        epoch = as_int(epoch, "epoch")
        check_seed(self.seed + epoch, f"seed + epoch ({self.seed} + {epoch})")
        return epoch

    def _epoch_bins(self, epoch: int, carry: tuple, R: int) -> list[torch.Tensor]:
        """Every rank's bins of ``epoch`` for ``R`` ranks, in dealing order (same on every rank):
        dealt for the epoch's first world size, then, for each resize in ``carry``, the bins not yet
        taken dealt again for the next one."""
        sizes = [r for r, _ in carry] + [R]
        g_seed = self.seed + epoch
        plan = pack(self.lengths if self._source is None else self._source, self.max_tokens, self.strategy,
                    self.overflow, seed=g_seed if self.shuffle else None)
        bins = list(torch.split(plan.indices, (plan.bin_offsets[1:] - plan.bin_offsets[:-1]).tolist()))
        if len(bins) % sizes[0] and self.drop_last and len(bins) < sizes[0]:
            raise ValueError(f"only {len(bins)} batch(es) for {sizes[0]} replicas with drop_last=True: "
                             "lower max_tokens or use fewer replicas")
        bins = self._deal(bins, sizes[0], g_seed if self.shuffle else None)
        for (r, done), r_next in zip(carry, sizes[1:]):
            bins = self._deal(bins[done * r:], r_next, None)
        return bins

    def _deal(self, bins: list, R: int, seed: int | None) -> list:
        """``bins`` made a multiple of ``R`` (the fullest split in two, or, with ``drop_last``, the
        last few dropped) and, with a ``seed``, shuffled."""
        if len(bins) % R and not self.drop_last:
            self._split_fullest(bins, R - len(bins) % R)
        if seed is not None:
            perm = torch.randperm(len(bins), generator=torch.Generator().manual_seed(seed)).tolist()
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
        key = (self.epoch, self._carry)
        if self._cache is None or self._cache[0] != key:
            self._cache = (key, self._epoch_bins(self.epoch, self._carry, self.num_replicas)[self.rank::self.num_replicas])
        return self._cache[1]

    def _lengths_digest(self) -> str:
        """A digest of what the plan is made from: the lengths (and for trees the rows' prefix order)."""
        if self._digest is None:
            h = hashlib.blake2b(self.lengths.numpy().tobytes(), digest_size=8)
            if self._source is not None:
                for name in ("order", "lcp"):
                    part = getattr(self._source, name, None)
                    if part is not None:
                        h.update(np.ascontiguousarray(part, dtype=np.int64).tobytes())
            self._digest = h.hexdigest()
        return self._digest

    def __len__(self) -> int:
        return len(self._batches())

    def __iter__(self):
        # the bookkeeping runs now, not at the first next(): a state taken between iter() and the
        # first batch (a checkpoint at the top of a pass) said the previous pass's count, and a
        # resume from it skipped the whole epoch when set_epoch had not moved it on
        batches = self._batches()
        start, self._resume = self._resume, 0
        self._done = start
        return self._yield(batches[start:])

    def _yield(self, batches):
        for b in batches:
            self._done += 1
            yield b.tolist()

    def state_dict(self, batches_done: int | None = None) -> dict:
        """Where this rank is: epoch and batches taken (pass ``batches_done`` if a DataLoader with
        workers has prefetched batches the training loop has not used yet: the batches of this
        epoch the loop has trained on, 0 to ``len(self)``)."""
        if batches_done is None:
            done = self._done
        else:
            done = as_int(batches_done, "batches_done")
            if not 0 <= done <= len(self):
                raise ValueError(f"batches_done={done} is not a count of this epoch's batches: epoch {self.epoch} "
                                 f"has {len(self)} on this rank (count the batches since set_epoch, not all steps)")
        state = {"version": STATE_VERSION if self._carry else 1, "epoch": self.epoch, "batches_done": done,
                 "seed": self.seed, "shuffle": self.shuffle, "num_replicas": self.num_replicas, "rank": self.rank,
                 "max_tokens": self.max_tokens, "strategy": self.strategy, "drop_last": self.drop_last,
                 "overflow": self.overflow, "num_sequences": self.lengths.numel(),
                 "lengths_digest": self._lengths_digest()}
        if self._carry:
            state["carry"] = [list(step) for step in self._carry]
        return state

    def load_state_dict(self, state: dict) -> None:
        """Resume where ``state`` was taken: the next ``__iter__`` yields the rest of that epoch.

        A state of another world size resumes the epoch's bins not yet taken, dealt out to this
        world size (see the module docstring). Everything is checked before anything changes: a
        refused state leaves the sampler as it was. Keys the state lacks (a state of an older
        chatdata) are not compared."""
        check_state_keys(state, ("epoch", "batches_done"), "PackedBatchSampler")
        version = state.get("version", 1)
        if version not in _READS:
            raise ValueError(f"cannot resume: the state has version {version!r}, this chatdata reads versions "
                             f"{', '.join(map(str, _READS))}")
        for key in _SAME:
            if key not in state:
                continue
            mine = self.lengths.numel() if key == "num_sequences" else \
                self._lengths_digest() if key == "lengths_digest" else getattr(self, key)
            if state[key] != mine:
                what = "the sequence lengths differ (another dataset, or other max_length)" \
                    if key == "lengths_digest" else f"the saved sampler had {key}={state[key]!r}, this one has {mine!r}"
                raise ValueError(f"cannot resume: {what}; the rest of the epoch would differ")
        epoch = self._check_epoch(state["epoch"])
        done = as_int(state["batches_done"], "batches_done")
        carry = _check_carry(state.get("carry", ()))
        saved_R = as_int(state.get("num_replicas", self.num_replicas), "num_replicas")
        if saved_R <= 0:
            raise ValueError(f"cannot resume: the state has num_replicas={saved_R}")
        n = len(self._epoch_bins(epoch, carry, saved_R)) // saved_R
        if not 0 <= done <= n:
            where = "this rank" if saved_R == self.num_replicas else f"each of the {saved_R} ranks the state was taken on"
            raise ValueError(f"cannot resume at batch {done}: epoch {epoch} has {n} batches on {where}")
        if saved_R != self.num_replicas:  # the bins not taken yet, dealt out to this world size
            carry, done = carry + ((saved_R, done),), 0
        self.epoch, self._carry = epoch, carry
        self._resume = self._done = done


def _check_carry(carry) -> tuple:
    """A state's ``carry`` as a tuple of (world size >= 1, batches >= 0) int pairs, or a ValueError."""
    try:
        steps = tuple((as_int(r, "carry"), as_int(d, "carry")) for r, d in carry)
    except (TypeError, ValueError):
        raise ValueError(f"cannot resume: the state's carry must be [world size, batches] pairs, got {carry!r:.100}") \
            from None
    if any(r < 1 or d < 0 for r, d in steps):
        raise ValueError(f"cannot resume: the state's carry holds a world size below 1 or a negative count: {carry!r:.100}")
    return steps
