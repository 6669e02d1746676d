"""The token rows of a rollout: one per conversation, or one per sampled assistant turn.

``Rollout.tokens()`` gives each conversation's kept ids. ``Rollout.tokens(per_turn=True)`` gives
one row per assistant turn, in rollout-row order, then turn order. Row ``(r, t)`` is exactly:

- ``input_ids``: the ids ``prompt_ids(rows=[r])`` returned just before the ``t``-th
  ``add_response`` of row ``r`` (the prompt the policy was given when it sampled that turn),
  followed by the ids passed to that ``add_response``, verbatim;
- ``assistant_masks``: 1 on those sampled ids only;
- ``logprobs`` and every extra: that turn's values on its ids, 0 everywhere else (the earlier
  turns in the row are context here; their own rows train them).

The kept ids before a turn never change afterwards (later text is appended after them), so the
prompt is read back from the row's ids, ``ids[:start]``, where ``(start, end)`` is the turn's span
(``Rollout.turn_spans()``). Use these rows whenever ``drift()`` is not None (the template
rewrites the past, so a fresh render of the conversation is not what the policy saw), and for
losses taken per turn. The rows share their prefixes: ``collate_prefix_tree`` lays them out at
the cost of one conversation.

Example:
    >>> from chatdata.rollout.buffers import TokenRow
    >>> row, side = TokenRow(), RowSide()
    >>> row.set_pending([1, 2]); row.commit_response(torch.tensor([3]), None); side.record(2, 3, {})
    >>> row.set_pending([4]); row.commit_response(torch.tensor([5, 6]), None); side.record(4, 6, {})
    >>> td = build_tokens([row], [side], ExtrasSpec(), per_turn=True, compact=True)
    >>> [td[i]["input_ids"].tolist() for i in range(2)], td[1]["assistant_masks"].tolist()
    ([[1, 2, 3], [1, 2, 3, 4, 5, 6]], [0, 0, 0, 0, 1, 1])
"""
from __future__ import annotations

import numpy as np
import torch

from ..td import NonTensorData, RaggedTensorDict, TensorDict
from .extras import COLUMN_DTYPES, ExtrasSpec, RowSide

__all__ = ["build_tokens", "ExtrasSpec", "RowSide"]


def build_tokens(rows: list, sides: list, spec: ExtrasSpec, per_turn: bool = False, compact: bool = True) -> RaggedTensorDict:
    """The ragged token set of ``rows`` (``TokenRow`` buffers) with their ``sides`` (see the module docstring)."""
    for name, flag in (("per_turn", per_turn), ("compact", compact)):
        if not isinstance(flag, (bool, np.bool_)):  # a string such as "no" would be true
            raise TypeError(f"tokens: {name} must be True or False, got {flag!r}")
    if per_turn:
        # (row, start, end) of every turn: the row's ids up to the turn's end, its mask on [start, end)
        items = [(row, side, s, e) for row, side in zip(rows, sides) for s, e in side.turns]
        lengths = [e for _, _, _, e in items]
    else:
        items = [(row, side, 0, len(row)) for row, side in zip(rows, sides)]
        lengths = [len(row) for row in rows]
    offsets = torch.zeros(len(items) + 1, dtype=torch.int64)
    torch.cumsum(torch.tensor(lengths, dtype=torch.int64), 0, out=offsets[1:])
    total = int(offsets[-1])
    at = offsets[:-1].tolist()
    if not items:
        values = {"input_ids": torch.zeros(0, dtype=torch.int64), "assistant_masks": torch.zeros(0, dtype=torch.int64),
                  "logprobs": torch.zeros(0)}
    elif per_turn:
        values = {"input_ids": torch.cat([row.ids()[:e] for row, _, _, e in items]),
                  "assistant_masks": torch.zeros(total, dtype=torch.int64), "logprobs": torch.zeros(total)}
        mask, logp = values["assistant_masks"], values["logprobs"]
        for a, (row, _, s, e) in zip(at, items):
            mask[a + s:a + e] = 1
            logp[a + s:a + e] = row.logprobs()[s:e]
    else:
        values = {"input_ids": torch.cat([row.ids() for row in rows]),
                  "assistant_masks": torch.cat([row.mask() for row in rows]),
                  "logprobs": torch.cat([row.logprobs() for row in rows])}
    if spec.shapes:
        # per turn, only the extras of the row's own turn (starting at s) land; else all of them
        pieces = [(a, side, s if per_turn else 0, s + 1 if per_turn else e + 1)
                  for a, (_, side, s, e) in zip(at, items)]
        cols, narrowed = spec.flat_columns(pieces, total, compact)
        values.update(cols)
        if narrowed:
            values[COLUMN_DTYPES] = NonTensorData(narrowed, batch_size=[total])
    return RaggedTensorDict(TensorDict(values, [total]), offsets)
