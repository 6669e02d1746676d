"""Flat message columns of a History as plain Python lists and numpy offsets: what every hygiene
check reads. Conversation ``i`` is messages ``offsets[i]:offsets[i+1]`` of each column.

Example:
    >>> from chatdata import History
    >>> h = History.from_chats([[{"role": "user", "content": "hi"}], [{"role": "user", "content": "yo"}]])
    >>> conversation_offsets(h).tolist(), message_values(h, "content")
    ([0, 1, 2], ['hi', 'yo'])
"""
from __future__ import annotations

import json

import numpy as np
import torch

__all__ = ["conversation_offsets", "message_values", "message_texts", "message_media", "extra_values"]


def conversation_offsets(history) -> np.ndarray:
    """int64 offsets of the conversations of ``history`` (a batch, or one conversation) in its
    flat message columns.

    Example:
        >>> from chatdata import History
        >>> conversation_offsets(History.from_chats([[{"role": "user", "content": "a"}], []])).tolist()
        [0, 1, 1]
    """
    return history.conversation_offsets().numpy().astype(np.int64, copy=False)


def message_values(history, name: str) -> list:
    """Column ``name`` (``role``, ``content``, ``tool_calls``, ``extra``, ...) with one value per
    message, flat, as a list (a constant column repeats its value).

    Example:
        >>> from chatdata import History
        >>> message_values(History.from_chats([[{"role": "user", "content": "a"}]]), "tool_calls")
        [None]
    """
    from ..td import NonTensorData

    n = int(history.conversation_offsets()[-1])
    col = history.message_column(name)
    if isinstance(col, NonTensorData):
        return [col.data] * n
    if isinstance(col, torch.Tensor):
        return col.reshape(-1).tolist()
    return col.tolist() if col.batch_dims == 1 else col.reshape(-1).tolist()


def extra_values(history) -> list:
    """The ``extra`` dict of every message (``None`` where the message has no other keys).

    Example:
        >>> from chatdata import History
        >>> extra_values(History.from_chats([[{"role": "tool", "content": "1", "tool_call_id": "c1"}]]))
        [{'tool_call_id': 'c1'}]
    """
    return message_values(history, "extra")


def _part_text(parts) -> str:
    texts = []
    for p in parts:
        if isinstance(p, dict) and isinstance(p.get("text"), str):
            texts.append(p["text"])
    return "\n".join(texts)


def message_texts(history) -> list[str]:
    """The text of every message: its ``content`` when a str, the ``text`` of its parts when a
    list of parts, ``""`` for ``None``.

    Example:
        >>> from chatdata import History
        >>> h = History.from_chats([[{"role": "user", "content": [{"type": "text", "text": "hi"}]},
        ...                          {"role": "assistant", "content": None, "tool_calls": [{"name": "f", "arguments": {}}]}]])
        >>> message_texts(h)
        ['hi', '']
    """
    values = message_values(history, "content")
    if not values or set(map(type, values)) == {str}:
        return values
    return [v if type(v) is str else "" if v is None else _part_text(v) if isinstance(v, list) else json.dumps(v)
            for v in values]


def message_media(history) -> list[str | None] | None:
    """Per message, one key of the parts of its content that are not text (images, audio, files:
    a hex xxh3-128 of their canonical JSON; a History holds JSON values only), ``None`` for a
    message without such parts; ``None`` for the whole list when no message has any. Two
    messages that ask the same about different images differ by it.

    Example:
        >>> from chatdata import History
        >>> h = History.from_chats([[{"role": "user", "content": [{"type": "image", "image": "a.png"},
        ...                                                       {"type": "text", "text": "what is it?"}]}],
        ...                         [{"role": "user", "content": "hi"}]])
        >>> keys = message_media(h)
        >>> len(keys[0]), keys[1]
        (32, None)
    """
    values = message_values(history, "content")
    if not any(type(v) is not str and v is not None for v in values):
        return None
    out = []
    for v in values:
        parts = [p for p in v if not (isinstance(p, dict) and isinstance(p.get("text"), str))] \
            if isinstance(v, (list, tuple)) else []
        # a key set to null names nothing: {"type": "image", "url": null} is {"type": "image"}
        parts = [{k: x for k, x in p.items() if x is not None} if isinstance(p, dict) else p for p in parts]
        out.append(_media_key(parts) if parts else None)
    return out if any(k is not None for k in out) else None


def _media_key(parts: list) -> str:
    import xxhash

    text = json.dumps(parts, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return xxhash.xxh3_128_hexdigest(text.encode("utf-8", "surrogatepass"))

