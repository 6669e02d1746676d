"""Growable per-row token buffers: ids, assistant mask and logprobs, appended in place.

A row's ids live in one preallocated int64 tensor that doubles when full, so appending a turn
costs O(its tokens) and reading the ids so far is a view (no copy). The row keeps a *committed*
part (every id the policy has seen: prompts and its own generations) and a *pending* part after
it (the text the template added since the last response, up to the generation prompt), which
is rewritten when more messages arrive before the next response.

Logprobs: the given values on generated ids; NaN on generated ids whose response came without
logprobs (there is no value: 0.0 would read as probability 1, and a loss using it would be
silently wrong, while NaN makes it NaN); 0.0 on every id the policy did not sample (its mask is 0).

Example:
    >>> import torch
    >>> row = TokenRow()
    >>> row.set_pending([1, 2, 3])
    >>> row.commit_response(torch.tensor([7, 8]), torch.tensor([-0.5, -0.25]))
    >>> row.ids().tolist(), row.mask().tolist(), row.logprobs().tolist()
    ([1, 2, 3, 7, 8], [0, 0, 0, 1, 1], [0.0, 0.0, 0.0, -0.5, -0.25])
    >>> row.set_pending([4]); row.commit_response(torch.tensor([9]), None)
    >>> row.logprobs()[-2:].tolist()  # a response without logprobs: NaN, never a made-up 0.0
    [0.0, nan]
"""
from __future__ import annotations

import numpy as np
import torch

__all__ = ["TokenRow"]


class TokenRow:
    """One conversation's kept ids, mask and logprobs (see the module docstring)."""

    __slots__ = ("_ids", "_mask", "_logp", "_np", "committed", "pending")

    def __init__(self, capacity: int = 256) -> None:
        self._ids = torch.empty(capacity, dtype=torch.int64)
        self._mask = torch.empty(capacity, dtype=torch.int64)
        self._logp = torch.empty(capacity, dtype=torch.float32)
        self._np = (self._ids.numpy(), self._mask.numpy(), self._logp.numpy())  # the same memory: cheap slice writes
        self.committed = 0
        self.pending = 0

    def _reserve(self, n: int) -> None:
        cap = self._ids.numel()
        if n <= cap:
            return
        while cap < n:
            cap *= 2
        for name in ("_ids", "_mask", "_logp"):
            old = getattr(self, name)
            new = torch.empty(cap, dtype=old.dtype)
            new[: self.committed + self.pending] = old[: self.committed + self.pending]
            setattr(self, name, new)
        self._np = (self._ids.numpy(), self._mask.numpy(), self._logp.numpy())

    def set_pending(self, ids) -> None:
        """Replace the pending ids (template text since the last response) with ``ids`` (a list,
        a numpy array or a tensor)."""
        ids = ids.detach().cpu().numpy() if isinstance(ids, torch.Tensor) else np.asarray(ids, dtype=np.int64)
        start, n = self.committed, ids.size
        self._reserve(start + n)
        ids_np, mask_np, logp_np = self._np
        ids_np[start:start + n] = ids
        mask_np[start:start + n] = 0
        logp_np[start:start + n] = 0.0
        self.pending = n

    def commit_response(self, ids: torch.Tensor, logprobs: torch.Tensor | None) -> None:
        """Commit the pending ids, then append generated ``ids`` (mask 1) and their logprobs
        (NaN for each id when ``logprobs`` is None: no value, see the module docstring)."""
        start, n = self.committed + self.pending, ids.numel()
        self._reserve(start + n)
        ids_np, mask_np, logp_np = self._np
        ids_np[start:start + n] = ids.detach().cpu().numpy()
        mask_np[start:start + n] = 1
        if logprobs is None:
            logp_np[start:start + n] = np.nan
        else:
            logp_np[start:start + n] = logprobs.detach().cpu().to(torch.float32).numpy()
        self.committed = start + n
        self.pending = 0

    def __len__(self) -> int:
        return self.committed + self.pending

    def ids(self) -> torch.Tensor:
        """All ids so far (committed + pending) as a view."""
        return self._ids[: len(self)]

    def mask(self) -> torch.Tensor:
        return self._mask[: len(self)]

    def logprobs(self) -> torch.Tensor:
        return self._logp[: len(self)]
