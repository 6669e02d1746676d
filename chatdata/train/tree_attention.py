"""Attending and scoring over a prefix-tree batch (:func:`~chatdata.train.collate_prefix_tree`).

Token ``i`` may attend to token ``j`` iff ``j <= i < subtree_end[j]``. A stock transformers model
takes that rule in one of two forms, with the tree's ``position_ids`` (each token's depth):

- :func:`tree_attention_mask`: the dense additive ``(1, 1, T, T)`` mask (0 where allowed, the
  dtype's lowest value elsewhere) for ``attn_implementation="sdpa"`` or ``"eager"``.
  transformers passes a 4-D mask through untouched (``masking_utils``: "already prepared").
  It costs ``T * T`` elements: 151 MB in float32 at ``T = 6144``.
- :func:`tree_block_mask`: a flex_attention ``BlockMask`` built from ``subtree_end`` directly, a
  handful of tensor ops over ``(T / block) ** 2`` blocks (no vmap over ``T * T``), for
  ``attn_implementation="flex_attention"``. What torch 2.13 runs on CPU: ``flex_attention``'s
  forward, eager (unfused, with a warning) or compiled (the first compile takes about a minute);
  its backward is refused on CPU (``NotImplementedError`` whenever q, k or v require grad,
  eager or compiled). So on CPU flex serves no-grad forwards (reference logprobs); train with
  the dense mask there, and with the BlockMask on GPU.

:func:`tree_model_inputs` picks the form for a model. :func:`tree_logprobs` maps the logits of
one forward back to rows: ``(N, L)``, the numbers an unpacked forward of each row gives.

Example:
    >>> from chatdata.train import collate_prefix_tree
    >>> b = collate_prefix_tree([{"input_ids": [1, 2, 3]}, {"input_ids": [1, 2, 4]}])
    >>> (tree_attention_mask(b) == 0).int()[0, 0].tolist()
    [[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 0, 1]]
"""
from __future__ import annotations

import numpy as np
import torch

__all__ = ["tree_attention_mask", "tree_block_mask", "tree_logprobs", "tree_parents", "tree_model_inputs"]


def _tree(batch) -> tuple[torch.Tensor, torch.Tensor, int]:
    """(subtree_end (T,), row_index (N, L), T) of a tree batch, or a clear error."""
    missing = [k for k in ("input_ids", "subtree_end", "row_index") if k not in batch]
    if missing:
        raise ValueError(f"not a prefix-tree batch: it has no {', '.join(missing)} (make it with collate_prefix_tree)")
    se = batch["subtree_end"]
    if se.ndim != 2 or se.shape[0] != 1:
        raise ValueError(f"subtree_end must have shape (1, T), got {tuple(se.shape)}")
    return se[0], batch["row_index"], se.shape[1]


def tree_attention_mask(batch, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The additive ``(1, 1, T, T)`` attention mask of a tree batch, for sdpa or eager attention.

    Pass the model's dtype (``model.dtype``) for half-precision models.

    Example:
        >>> from chatdata.train import collate_prefix_tree
        >>> m = tree_attention_mask(collate_prefix_tree([{"input_ids": [5, 6]}, {"input_ids": [5, 7]}]))
        >>> m.shape, m[0, 0, 2, 1].item() < -1e30
        (torch.Size([1, 1, 3, 3]), True)
    """
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating dtype (the model's, e.g. model.dtype): an additive mask holds "
                        f"the dtype's lowest value where attention is not allowed; got {dtype!r}")
    se, _, T = _tree(batch)
    i = torch.arange(T, device=se.device)
    allowed = (i[None, :] <= i[:, None]) & (i[:, None] < se[None, :])
    out = torch.zeros((T, T), dtype=dtype, device=se.device)
    out.masked_fill_(~allowed, torch.finfo(dtype).min)
    return out.reshape(1, 1, T, T)


def tree_block_mask(batch, block_size: int = 128):
    """A flex_attention ``BlockMask`` of a tree batch (see the module docstring for CPU support).

    Blocks below the diagonal whose keys' subtrees cover the whole query block are marked full,
    blocks that no key's subtree reaches are skipped, and the rest use the mask_mod
    ``kv <= q < subtree_end[kv]``.

    Example:
        >>> from chatdata.train import collate_prefix_tree
        >>> b = collate_prefix_tree([{"input_ids": [5, 6]}, {"input_ids": [5, 7]}])
        >>> tree_block_mask(b).shape
        (1, 1, 3, 3)
    """
    from torch.nn.attention.flex_attention import BlockMask

    if isinstance(block_size, (bool, np.bool_)) or not isinstance(block_size, (int, np.integer)) or block_size <= 0:
        raise ValueError(f"block_size must be a positive int, got {block_size!r}")
    block_size = int(block_size)
    se, _, T = _tree(batch)
    B = block_size
    nb = -(-T // B)
    pad = torch.arange(nb * B, device=se.device)
    se_pad = pad.clone()  # padded keys get an empty subtree: never attended
    se_pad[:T] = se
    blocks = se_pad.reshape(nb, B)
    real = (pad < T).reshape(nb, B)
    max_se = blocks.masked_fill(~real, -1).amax(1)
    min_se = blocks.masked_fill(~real, torch.iinfo(se_pad.dtype).max).amin(1)
    qb = torch.arange(nb, device=se.device)
    q_start, q_last = qb * B, torch.clamp(qb * B + B - 1, max=T - 1)
    kb = qb[None, :]
    nonempty = (kb <= qb[:, None]) & (max_se[None, :] > q_start[:, None])
    full = (kb < qb[:, None]) & (min_se[None, :] > q_last[:, None])
    partial = nonempty & ~full

    def layout(sel: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        count = sel.sum(1).to(torch.int32)
        idx = torch.argsort((~sel).to(torch.int8), dim=1, stable=True).to(torch.int32)
        return count[None, None], idx[None, None]

    kv_num, kv_idx = layout(partial)
    full_num, full_idx = layout(full)

    def mask_mod(b, h, q_idx, kv_idx):
        return (kv_idx <= q_idx) & (q_idx < se_pad[kv_idx])

    return BlockMask.from_kv_blocks(kv_num, kv_idx, full_num, full_idx, BLOCK_SIZE=B, mask_mod=mask_mod,
                                    seq_lengths=(T, T))


def tree_parents(batch) -> torch.Tensor:
    """``(T,)`` int64: the tree position of each token's parent (the token before it in every row
    that holds it), -1 for a row's first token.

    Example:
        >>> from chatdata.train import collate_prefix_tree
        >>> tree_parents(collate_prefix_tree([{"input_ids": [1, 2, 3]}, {"input_ids": [1, 4]}])).tolist()
        [-1, 0, 1, 0]
    """
    _, ri, T = _tree(batch)
    parent = torch.full((T,), -1, dtype=torch.int64, device=ri.device)
    if ri.shape[1] > 1:
        cur, prev = ri[:, 1:], ri[:, :-1]
        valid = cur >= 0
        parent[cur[valid]] = prev[valid]
    return parent


def tree_logprobs(logits: torch.Tensor, batch) -> torch.Tensor:
    """``(N, L)``: the log-prob of each row's token ``k`` given its tokens before ``k``, from the
    logits of one forward over the tree (``(1, T, V)`` or ``(T, V)``); 0 at ``k = 0`` and past a
    row's end. Differentiable; float32 (half-precision logits are scored in float32).

    Each node is scored once (against its parent's logits), then gathered per row, so shared
    prefixes cost nothing extra here either.

    Example:
        >>> from chatdata.train import collate_prefix_tree
        >>> b = collate_prefix_tree([{"input_ids": [0, 1]}, {"input_ids": [0, 2]}])
        >>> lp = tree_logprobs(torch.zeros(1, 3, 4), b)     # uniform over 4 tokens
        >>> lp.shape, round(lp[1, 1].exp().item(), 4), lp[:, 0].tolist()
        (torch.Size([2, 2]), 0.25, [0.0, 0.0])
    """
    _, ri, T = _tree(batch)
    if logits.ndim == 3:
        if logits.shape[0] != 1:
            raise ValueError(f"a tree batch has one sequence: logits must be (1, T, V) or (T, V), got {tuple(logits.shape)}")
        logits = logits[0]
    if logits.ndim != 2 or logits.shape[0] != T:
        raise ValueError(f"logits must be (1, T, V) or (T, V) with T = {T} tree tokens, got {tuple(logits.shape)}")
    if logits.dtype != torch.float32 and logits.dtype != torch.float64:
        logits = logits.float()
    ids = batch["input_ids"].reshape(-1).to(logits.device)
    if ids.numel() and int(ids.max()) >= logits.shape[-1]:  # else a bare torch IndexError from the gather
        raise ValueError(f"the tree holds token id {int(ids.max())} but logits have {logits.shape[-1]} entries per "
                         "token: give the logits of the model whose vocabulary the ids come from")
    parent = tree_parents(batch).to(logits.device)
    has_parent = parent >= 0
    p = parent.clamp(min=0)
    lse = torch.logsumexp(logits, dim=-1)
    node = torch.where(has_parent, logits[p, ids] - lse[p], torch.zeros((), dtype=logits.dtype, device=logits.device))
    ri = ri.to(logits.device)
    valid = ri >= 0
    return torch.where(valid, node[ri.clamp(min=0)], torch.zeros((), dtype=logits.dtype, device=logits.device))


def tree_model_inputs(batch, model=None, attn_implementation: str | None = None, dtype: torch.dtype | None = None) -> dict:
    """``input_ids``, ``position_ids``, the tree's ``attention_mask`` and ``use_cache=False``, for
    ``model(**tree_model_inputs(batch, model))``.

    The mask follows ``attn_implementation`` (default: the model's ``config._attn_implementation``):
    the dense additive mask (in ``dtype``, default the model's) for ``"sdpa"``/``"eager"``, a
    BlockMask for ``"flex_attention"``. Flash-attention kernels take only block-diagonal masks:
    they are refused with a clear error.

    Example:
        >>> from chatdata.train import collate_prefix_tree
        >>> b = collate_prefix_tree([{"input_ids": [5, 6]}, {"input_ids": [5, 7]}])
        >>> sorted(tree_model_inputs(b, attn_implementation="sdpa"))
        ['attention_mask', 'input_ids', 'position_ids', 'use_cache']
    """
    impl = attn_implementation or getattr(getattr(model, "config", None), "_attn_implementation", None) or "sdpa"
    if impl == "flex_attention":
        mask = tree_block_mask(batch)
    elif impl in ("sdpa", "eager"):
        mask = tree_attention_mask(batch, dtype=dtype or getattr(model, "dtype", None) or torch.float32)
    else:
        raise ValueError(f"attention {impl!r} cannot take a prefix-tree mask: load the model with "
                         "attn_implementation='sdpa', 'eager' or 'flex_attention' (flash-attention kernels only "
                         "take block-diagonal masks)")
    return {"input_ids": batch["input_ids"], "position_ids": batch["position_ids"], "attention_mask": mask,
            "use_cache": False}
