"""Checks of what callers hand a rollout: sampled ids, their logprobs, row names and messages.

Each check raises a ``ValueError`` / ``TypeError`` that names the row and says what to fix,
before anything is stored. They cost O(1) torch calls per response (a min/max reduction, a
comparison), never a Python loop over the ids.

* ``response_ids``: one 1-D integer tensor (or list) per response, every id in
  ``[0, 2**31)`` (:data:`MAX_TOKEN_ID`). Ids at or past ``len(tokenizer)`` are kept verbatim:
  a model's embedding is often larger than its tokenizer (Qwen2.5: 151,936 rows, 151,665
  tokens), a policy can sample those rows, and the ids it sampled are what it trains on (they
  decode to no text);
* ``response_logprobs``: real numbers, one per id; NaN, ``+inf`` and values above
  :data:`MAX_LOGPROB` are refused. A log-probability is ``<= 0``; a backend's rounding can put
  one a little above 0, never near 0.1, so a larger value is probabilities or negated
  logprobs passed by mistake;
* ``row_indices``: ints (numpy integers too), or a bool mask with one entry per row;
* ``chat_messages``: a list of message dicts, each with a str ``role``.

Example:
    >>> import torch
    >>> response_ids(0, [5, 7]).tolist()
    [5, 7]
    >>> response_ids(2, torch.tensor([5, -1]))
    Traceback (most recent call last):
    ...
    ValueError: row 2: sampled id -1 is not a token id (ids are in [0, 2**31)); pass the ids the policy sampled
    >>> response_logprobs(0, [-0.5, float("nan")], 2)
    Traceback (most recent call last):
    ...
    ValueError: row 0: logprobs must be log-probabilities (<= 0 give or take rounding, or -inf); got nan at position 1
"""
from __future__ import annotations

import numbers
from collections.abc import Mapping
from typing import Any

import torch

from ..td.core import is_integer_dtype

__all__ = ["per_row", "response_ids", "response_logprobs", "row_indices", "chat_messages", "MAX_TOKEN_ID",
           "MAX_LOGPROB"]

#: sampled ids are below this (int32 token ids, as inference engines and the gateway's logs hold them)
MAX_TOKEN_ID = 2 ** 31
#: the largest logprob taken: above 0 only by a backend's rounding, which stays far below this
MAX_LOGPROB = 0.1


def _tensor(i: int, value: Any, what: str, dtype: torch.dtype | None = None) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value
    try:
        return torch.as_tensor(value, dtype=dtype)
    except (TypeError, ValueError, RuntimeError, OverflowError) as err:
        raise TypeError(f"row {i}: {what} must be a 1-D tensor or a list of numbers, got {type(value).__name__} "
                        f"({err})") from None


def per_row(value: Any, what: str) -> list:
    """``value`` as one item per row: a list or tuple as it is, a nested tensor unbound, a 1-D
    tensor (or numpy array) as one row's; a 2-D one is refused for ids (its padding would be
    kept) and unbound for logprobs (each row must then have its response's length).

    Example:
        >>> [t.tolist() for t in per_row(torch.tensor([1, 2]), "ids")]
        [[1, 2]]
    """
    if type(value).__module__ == "numpy":
        value = torch.as_tensor(value)
    if isinstance(value, torch.Tensor):
        if value.is_nested:
            return list(value.unbind())
        if value.ndim == 1:
            return [value]
        if value.ndim == 2 and what == "logprob":
            return list(value.unbind())
        raise ValueError(f"add_response takes one 1-D {what} tensor per row (a list, or a nested tensor), got a "
                         f"tensor of shape {tuple(value.shape)}: padding would be kept as generated {what}s")
    if not isinstance(value, (list, tuple)):
        raise TypeError(f"add_response takes a list with one {what} tensor per row, got {type(value).__name__}")
    return list(value)


def response_ids(i: int, ids: Any) -> torch.Tensor:
    """The sampled ids of row ``i`` as a 1-D int64 tensor, checked (see the module docstring).

    Example:
        >>> response_ids(0, [1.0, 2.0])
        Traceback (most recent call last):
        ...
        TypeError: row 0: response ids must be integers, got torch.float32
    """
    t = ids if isinstance(ids, torch.Tensor) else _tensor(i, ids, "a response")
    if t.ndim != 1:
        raise ValueError(f"row {i}: a response must be a 1-D tensor of ids, got shape {tuple(t.shape)}")
    if t.numel() == 0:
        raise ValueError(f"row {i}: the response is empty (a response holds at least one id)")
    dtype = t.dtype
    if not is_integer_dtype(dtype):
        raise TypeError(f"row {i}: response ids must be integers, got {dtype}")
    if t.is_meta:
        raise ValueError(f"row {i}: the response ids are a meta tensor (no values)")
    lo, hi = torch.aminmax(t)  # (.item() is cheaper than int() here: this runs every turn)
    lo, hi = lo.item(), hi.item()
    if lo < 0 or hi >= MAX_TOKEN_ID:
        raise ValueError(f"row {i}: sampled id {lo if lo < 0 else hi} is not a token id (ids are in [0, 2**31)); "
                         "pass the ids the policy sampled")
    return t if dtype == torch.int64 else t.to(torch.int64)


def response_logprobs(i: int, logprobs: Any, n: int) -> torch.Tensor:
    """The logprobs of row ``i``'s ``n`` sampled ids as a 1-D float32 tensor, checked.

    Example:
        >>> response_logprobs(0, [-0.25, float("-inf")], 2).tolist()
        [-0.25, -inf]
    """
    lp = logprobs if isinstance(logprobs, torch.Tensor) else _tensor(i, logprobs, "logprobs")
    if lp.dtype.is_complex or lp.dtype == torch.bool:
        raise TypeError(f"row {i}: logprobs must be real numbers, got {lp.dtype}")
    if lp.ndim != 1 or lp.numel() != n:
        raise ValueError(f"row {i}: logprobs have shape {tuple(lp.shape)} but the response has {n} ids")
    if lp.dtype != torch.float32:
        lp = lp.to(torch.float32)
    ok = lp.detach().cpu().numpy() <= MAX_LOGPROB  # False for NaN and +inf too
    if not ok.all():
        j = int((~ok).nonzero()[0][0])
        raise ValueError(f"row {i}: logprobs must be log-probabilities (<= 0 give or take rounding, or -inf); got {float(lp[j])} at "
                         f"position {j}")
    return lp


def row_indices(rows: Any, b: int, what: str) -> list[int]:
    """Row numbers of a rollout of ``b`` rows from ``rows`` (None: all; an int; ints; a bool
    mask of ``b`` entries, a tensor, array or list), each once, negatives counted from the end.

    Example:
        >>> row_indices(torch.tensor([True, False, True]), 3, "f"), row_indices([-1], 3, "f")
        ([0, 2], [2])
    """
    if rows is None:
        return list(range(b))
    if isinstance(rows, (list, tuple)) and rows and all(isinstance(r, bool) for r in rows):
        rows = torch.tensor(rows)  # a mask written as a list
    if isinstance(rows, torch.Tensor) or type(rows).__module__ == "numpy":
        t = torch.as_tensor(rows)
        if t.dtype == torch.bool:
            if t.shape != (b,):
                raise ValueError(f"{what}: a bool mask of rows needs one entry per row ({b}), got shape "
                                 f"{tuple(t.shape)}")
            t = t.nonzero().flatten()
        if t.ndim == 0:
            t = t.reshape(1)
        rows = t.tolist()
    elif isinstance(rows, numbers.Integral) and not isinstance(rows, bool):
        rows = [rows]
    idx = []
    for r in rows:
        if not isinstance(r, numbers.Integral) or isinstance(r, bool):
            raise TypeError(f"{what}: rows must be ints, got {r!r}")
        r = int(r)
        if not -b <= r < b:
            raise IndexError(f"{what}: row {r} does not exist (the rollout has {b} rows)")
        idx.append(r % b)
    if len(set(idx)) != len(idx):
        raise ValueError(f"{what}: rows {rows} name a row twice")
    return idx


def chat_messages(i: int, messages: Any, what: str) -> list[dict]:
    """Row ``i``'s messages as a list of fresh dicts, each with a str ``role``.

    Example:
        >>> chat_messages(0, [{"role": "user", "content": "hi"}], "Rollout")
        [{'role': 'user', 'content': 'hi'}]
    """
    if type(messages) is not list and type(messages) is not tuple:  # (exact types first: this is per turn)
        if isinstance(messages, Mapping):
            messages = [messages]
        elif isinstance(messages, (str, bytes)) or not isinstance(messages, (list, tuple)):
            raise TypeError(f"row {i}: {what} takes a list of message dicts per row, got {type(messages).__name__}")
    for j, m in enumerate(messages):
        if not (type(m) is dict or isinstance(m, Mapping)) or not isinstance(m.get("role"), str):
            got = f"a dict without a str 'role' (keys: {sorted(map(str, m))})" if isinstance(m, Mapping) \
                else type(m).__name__
            raise TypeError(f"row {i}: {what} takes a list of message dicts with a str 'role' per row; message {j} is "
                            f"{got}")
    return [dict(m) for m in messages]
