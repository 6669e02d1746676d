"""Stitch batches of conversations into one History, column by column.

Pieces read from different shards have string columns in different pools (files). Concatenating
them value by value would decode every string in Python; here each column is joined as a column:

* a string column (``role``, ``content``, JSON columns such as ``tool_calls``) is packed bytes plus
  offsets: the byte ranges are concatenated and the offsets shifted (a memory-mapped piece gives its
  bytes as a view, a gathered piece is packed by a vectorised gather);
* a constant column (one value for every message) stays one constant when every piece has the
  same, and is tiled as packed bytes otherwise;
* a tensor column (``_flags``, a bool ``is_complete``) is ``torch.cat``;
* the conversation offsets are shifted and concatenated.

What cannot be joined as bytes (a string column in one piece and a JSON column in another, parts
content) is joined by chatdata's own ``cat``, which reads the values.

Example:
    >>> from chatdata import History
    >>> a = History.from_chats([[{"role": "user", "content": "hi"}]])
    >>> b = History.from_chats([[{"role": "user", "content": "yo"}, {"role": "assistant", "content": "ok"}]])
    >>> stitch_histories([a, b]).to_chats()[1]
    [{'role': 'user', 'content': 'yo'}, {'role': 'assistant', 'content': 'ok'}]
"""
from __future__ import annotations

import json

import torch

from ..history import History
from ..history.columns import DEFAULTS, FIELDS, FLAGS_KEY
from ..td import NonTensorData, NonTensorStack, RaggedTensorDict, cat

__all__ = ["stitch_histories", "empty_history", "as_conversations"]

COLUMNS = (*FIELDS, FLAGS_KEY)


def empty_history() -> History:
    """A batch of no conversations (batch ``(0, -1)``).

    Example:
        >>> empty_history().batch_size
        torch.Size([0, -1])
    """
    return History.from_chats([[]])[0:0]


def as_conversations(h: History, what: str) -> History:
    """``h`` as a batch of conversations (batch ``(n, -1)``): a 1-D History is one conversation,
    also when it has no messages (``h[i]`` of an empty one: a row, not none). ``what`` names the
    caller in the error for any other batch size.

    Example:
        >>> as_conversations(History.from_chats([[], [{"role": "user", "content": "hi"}]])[0], "x").to_chats()
        [[]]
    """
    if h.ndim == 1:
        return h.unsqueeze(0)
    if h.ndim != 2:
        raise ValueError(f"{what} takes a conversation (batch (n_messages,)) or a batch of them (batch (n, -1)), "
                         f"got a History of batch {tuple(h.batch_size)}"
                         + (" (one message: unsqueeze(0) makes it a conversation)" if h.ndim == 0 else ""))
    return h


def _column(piece: History, name: str, n: int):
    try:
        return piece.message_column(name)
    except KeyError:  # a column a piece lacks holds its default (as History storages are normalised)
        if name == FLAGS_KEY:
            return torch.zeros(n, dtype=torch.int8)
        return NonTensorData(DEFAULTS[name], batch_size=(n,))


def _packed(col, n: int):
    """``(bytes, offsets from 0, kind)`` of a string/JSON column of ``n`` values."""
    if isinstance(col, NonTensorData):  # one value: pack it once, tile it
        value = col.data
        kind = "str" if isinstance(value, str) else "json"
        raw = (value if kind == "str" else json.dumps(value, ensure_ascii=False)).encode("utf-8", "surrogatepass")
        one = torch.frombuffer(bytearray(raw), dtype=torch.uint8) if raw else torch.zeros(0, dtype=torch.uint8)
        return one.repeat(n), torch.arange(n + 1, dtype=torch.int64) * len(raw), kind
    data, off, kind = (col if len(col.batch_size) == 1 else col.reshape(-1)).packed_column()  # a range stays a view
    return data[int(off[0]):int(off[-1])], off - off[0], kind


def _same_constant(cols) -> bool:
    first = cols[0].data
    return all(type(c.data) is type(first) and c.data == first for c in cols[1:])


def _stitch_column(cols: list, sizes: list[int]):
    total = sum(sizes)
    if all(isinstance(c, NonTensorData) for c in cols) and _same_constant(cols):
        return NonTensorData(cols[0].data, batch_size=(total,))
    if any(isinstance(c, torch.Tensor) for c in cols):
        if all(isinstance(c, torch.Tensor) or isinstance(c, NonTensorData) and isinstance(c.data, bool) for c in cols):
            dtype = next(c.dtype for c in cols if isinstance(c, torch.Tensor))
            return torch.cat([c.reshape(-1) if isinstance(c, torch.Tensor) else torch.full((n,), c.data, dtype=dtype)
                              for c, n in zip(cols, sizes)])
        return None
    if all(isinstance(c, (NonTensorStack, NonTensorData)) for c in cols):
        packed = [_packed(c, n) for c, n in zip(cols, sizes)]
        if len({kind for _, _, kind in packed}) == 1:
            offsets, shift = [torch.zeros(1, dtype=torch.int64)], 0
            for _, off, _ in packed:
                offsets.append(off[1:] + shift)
                shift += int(off[-1])
            return NonTensorStack.from_packed(torch.cat([d for d, _, _ in packed]), torch.cat(offsets), packed[0][2])
        return cat([c if isinstance(c, NonTensorStack) else c.maybe_to_stack() for c in cols], 0)
    return None


def stitch_histories(pieces: list) -> History:
    """One History holding the conversations of ``pieces`` (Histories of batch ``(n_i, -1)``) in
    order, equal to extending the first with the others, built column by column (module docstring).

    Example:
        >>> from chatdata import History
        >>> h = History.from_chats([[{"role": "user", "content": str(i)}] for i in range(4)])
        >>> stitch_histories([h[2:], h[:1]]).content
        [['2'], ['3'], ['0']]
    """
    pieces = [p for p in pieces if p.batch_size[0]] or pieces[:1]
    if not pieces:
        return empty_history()
    if len(pieces) == 1 and isinstance(pieces[0]._storage, RaggedTensorDict):
        return pieces[0]
    offs = [p.conversation_offsets() for p in pieces]
    sizes = [int(o[-1]) for o in offs]
    parts, shift = [torch.zeros(1, dtype=torch.int64)], 0
    for o in offs:
        parts.append(o[1:] - o[0] + shift)
        shift += int(o[-1] - o[0])
    columns = {}
    for name in COLUMNS:
        col = _stitch_column([_column(p, name, n) for p, n in zip(pieces, sizes)], sizes)
        if col is None:  # a kind the columns cannot be joined as (a tensor and a JSON column)
            out = pieces[0]
            for p in pieces[1:]:
                out = out.extend(p, inplace=False)
            return out
        columns[name] = col
    return History.from_message_columns(columns, torch.cat(parts))
