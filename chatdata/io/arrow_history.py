"""History <-> Arrow: one row per conversation, a ``messages`` column of
``large_list<struct<role, content, ...>>`` (the schema Hugging Face datasets uses for chats).

Message struct fields, in this order: ``role``, ``content`` (``large_string``, or Arrow's type
for content parts), then only the ones some message has: ``is_complete`` (bool),
``tool_calls``, ``tool_responses``, every ``extra`` key (``name``, ``tool_call_id``,
``reasoning_content``, ...). A message without a key holds null there, and a null reads back as
an absent key, except ``content`` (null reads as ``None``, as in OpenAI/HF data). Only when some
message holds a key explicitly set to ``None`` (or has no ``content`` key at all) is one more
field written, ``_null_keys`` (the keys of that message which are present with value ``None``),
so that ``History.from_arrow(h.to_arrow())`` gives ``h`` back exactly (a message whose
``_null_keys`` is null, e.g. from a table written without the field, follows the default rule). Values Arrow cannot
type without loss (e.g. tool arguments that are a str in one call and a dict in another, or
dicts whose keys come in different orders: a struct has one field order) are written as JSON
text in a field whose metadata says ``chatdata.encoding: json``, typed as Arrow's ``arrow.json``
where tables may carry it (:func:`~chatdata.io.arrow_columns.json_field`: HF datasets keeps the type
where it drops the metadata), else ``large_string``. A message key
holding NUL is refused (ValueError): HF datasets cuts field names there; nested keys holding NUL
make their value JSON text. A message's extra keys come back in the table's field order (the
order of the fields of ``messages``), not each message's own order; inside their values every
key keeps its order.

From a memory-mapped History with string ``role``/``content`` columns nothing is copied: the
Arrow buffers are the mapped files.

A table made by hand or by another tool is checked before it is read (:mod:`.arrow_check`, on
types only): dictionary-encoded and view strings are read as strings, a type chatdata cannot
read is a TypeError naming the field, a bad value (JSON text that is not JSON, a null role) a
ValueError naming the row.

This module holds the format and the writer's per-message path; the whole-column path of the
writer is :mod:`chatdata.io.arrow_fields`, the reader :mod:`chatdata.io.arrow_read` (whose
``history_from_arrow`` and ``find_bad_rows`` are re-exported here).

Example:
    >>> from chatdata import History
    >>> h = History.from_chats([[{"role": "user", "content": "hi"}]])
    >>> t = h.to_arrow()
    >>> History.from_arrow(t).to_chats() == h.to_chats()
    True
"""
from __future__ import annotations

import torch

from ..history.columns import CONTENT_ABSENT, IS_COMPLETE, TOOL_CALLS, TOOL_RESPONSES
from ..td import FormatError, NonTensorData, NonTensorStack
from .arrow_check import NULL_KEYS
from .arrow_columns import JSON_META, json_field, python_array, string_array, tensor_buffer
from .arrow_fields import DEFAULTS as _DEFAULTS, flag_union, is_default_const as _is_default_const, optional_fields
from .arrow_read import find_bad_rows, history_from_arrow
from .deps import require_pyarrow
from .stitch import as_conversations

__all__ = ["history_to_arrow", "history_from_arrow", "messages_array", "find_bad_rows", "NULL_KEYS"]


def _as_batch(h):
    if h.ndim == 0:  # one message: a conversation of it
        return h.unsqueeze(0).unsqueeze(0)
    return as_conversations(h, "to_arrow")  # one conversation, also without messages (h[i]), is one row


def _values(col, n: int) -> list:
    if isinstance(col, NonTensorData):
        return [col.data] * n
    if isinstance(col, torch.Tensor):
        return col.reshape(-1).tolist()
    return col.reshape(-1).tolist() if col.batch_dims != 1 else col.tolist()



def _packed_strings(col):
    """The zero-copy ``large_string`` array of a 1-D stack of packed strings, else None."""
    if not isinstance(col, NonTensorStack) or col.batch_dims != 1:
        return None
    data, offsets, kind = col.packed_column()
    if kind != "str":
        return None
    pa = require_pyarrow()
    return pa.LargeStringArray.from_buffers(offsets.numel() - 1, tensor_buffer(offsets), tensor_buffer(data), None, 0)


def messages_array(h, json: str = "typed", n: int | None = None):
    """The flat ``struct`` array of all messages of the History ``h`` (see the module docstring);
    ``json="text"`` keeps values that are not strings (``tool_calls``, ...) as JSON text; ``n``
    is the number of messages, when the caller knows it."""
    pa = require_pyarrow()
    if n is None:
        n = int(h.conversation_offsets()[-1])
    cols = {name: h.message_column(name) for name in ("role", "content", "is_complete", "tool_calls",
                                                       "tool_responses", "extra")}
    try:
        flags_col = h.message_column("_flags")
    except KeyError:
        flags_col = torch.zeros(n, dtype=torch.int8)
    flags = flags_col.reshape(-1)
    flags_np = flags.numpy()  # numpy's any() is ~100x faster than torch's on int8 (no thread pool)
    set_bits = flag_union(flags_np) if n else 0
    any_flags = set_bits != 0
    fields, arrays = [], []

    role = cols["role"]
    arr = _packed_strings(role)
    if arr is None:
        arr = string_array(role) if isinstance(role, NonTensorStack) and role.batch_dims == 1 else \
            pa.array(_values(role, n), pa.large_string())
    arrays.append(arr)
    fields.append(pa.field("role", pa.large_string()))

    null_keys = None  # per message: keys present with value None
    content = cols["content"]
    content_absent = bool(set_bits & CONTENT_ABSENT)
    arr = None if content_absent else _packed_strings(content)
    if arr is not None:
        arrays.append(arr)
        fields.append(pa.field("content", pa.large_string()))
    else:
        values = _values(content, n)
        if content_absent:
            fl = flags.tolist()
            null_keys = [[] for _ in range(n)]
            for i, (c, f) in enumerate(zip(values, fl)):
                if f & CONTENT_ABSENT:
                    if c is not None:  # to_chats refuses it too: a table must not carry it on
                        raise FormatError(f"{getattr(flags_col, 'filename', None) or 'History column _flags'}: corrupt "
                                          f"History column '_flags': flags {f} mark message {i} as without "
                                          f"content, but its content is {c!r:.40}")
                    values[i] = None
                elif c is None:
                    null_keys[i].append("content")
        arr, is_json = python_array(values)
        if pa.types.is_null(arr.type):
            arr = pa.nulls(n, pa.large_string())
        field, arr = json_field("content", arr) if is_json else (pa.field("content", arr.type), arr)
        arrays.append(arr)
        fields.append(field)

    simple = not any_flags and all(_is_default_const(cols[k], k) for k in _DEFAULTS)
    fast = None if simple or null_keys is not None else optional_fields(cols, flags_np, set_bits, n, json)
    if fast is not None:
        fields += fast[0]
        arrays += fast[1]
    elif not simple:
        fl = flags.tolist()
        extra_cols: dict[str, list] = {}
        present = {}
        for name, bit in (("is_complete", IS_COMPLETE), ("tool_calls", TOOL_CALLS),
                          ("tool_responses", TOOL_RESPONSES)):
            col = cols[name]
            if _is_default_const(col, name) and not any(f & bit for f in fl):
                continue
            vals = _values(col, n)
            out = [None] * n
            default = _DEFAULTS[name]
            for i, (v, f) in enumerate(zip(vals, fl)):
                if f & bit or v is not default:
                    if v is None:
                        if null_keys is None:
                            null_keys = [[] for _ in range(n)]
                        null_keys[i].append(name)
                    else:
                        out[i] = v
            present[name] = out
        if not _is_default_const(cols["extra"], "extra"):
            for i, ex in enumerate(_values(cols["extra"], n)):
                if not ex:
                    continue
                for k, v in ex.items():
                    if k in ("role", "content", *_DEFAULTS, NULL_KEYS):
                        raise ValueError(f"message {i}: extra key {k!r} clashes with a message field")
                    col = extra_cols.get(k)
                    if col is None:
                        if "\x00" in k:  # HF datasets cuts a column name there and drops every field's metadata
                            raise ValueError(f"message {i}: the key {k!r} holds a NUL character, which a message "
                                             "field of an Arrow table cannot carry safely (HF datasets cuts the "
                                             "name there, losing values); rename the key")
                        col = extra_cols[k] = [None] * n
                    if v is None:
                        if null_keys is None:
                            null_keys = [[] for _ in range(n)]
                        null_keys[i].append(k)
                    else:
                        col[i] = v
        if null_keys is not None and not content_absent:  # the rule with _null_keys: unlisted null = absent
            for i, c in enumerate(_values(content, n)):
                if c is None:
                    null_keys[i].insert(0, "content")
        for name, vals in (*present.items(), *extra_cols.items()):
            if name == "is_complete":
                arr, is_json = pa.array(vals, pa.bool_()), False
            elif json == "text" and name in _DEFAULTS:  # JSON text asked for: plain text, tagged
                arr, is_json = python_array(vals, as_text=True)
                fields.append(pa.field(name, arr.type, metadata=JSON_META))
                arrays.append(arr)
                continue
            else:
                arr, is_json = python_array(vals)
            field, arr = json_field(name, arr) if is_json else (pa.field(name, arr.type), arr)
            fields.append(field)
            arrays.append(arr)
    if null_keys is not None:
        fields.append(pa.field(NULL_KEYS, pa.list_(pa.large_string())))
        arrays.append(pa.array(null_keys, pa.list_(pa.large_string())))
    return pa.StructArray.from_arrays(arrays, fields=fields)


def history_to_arrow(h, column: str = "messages", json: str = "typed"):
    """``h`` (a conversation or a batch) as a ``pyarrow.Table`` with one row per conversation. A
    conversation (a 1-D History, e.g. ``h[i]``) is one row, also when it has no messages
    (``History.from_chats([[]])[0]``); a batch of none (batch ``(0, -1)``, ``History.from_chats([])``)
    is no rows.

    ``json="typed"`` (the default) gives ``tool_calls`` / ``tool_responses`` and extra keys
    Arrow's own types where they read back exactly (what HF datasets and Parquet readers expect;
    parsed by Arrow's C++ JSON reader from a memory-mapped History); ``json="text"`` keeps
    ``tool_calls`` / ``tool_responses`` as JSON text (``chatdata.encoding: json``), which from a
    memory-mapped History costs no work per message.

    Example:
        >>> from chatdata import History
        >>> History.from_chats([[{"role": "user", "content": "hi"}]]).to_arrow().num_rows
        1
    """
    pa = require_pyarrow()
    if json not in ("typed", "text"):
        raise ValueError(f"json must be 'typed' or 'text', got {json!r}")
    if not isinstance(column, str) or not column:
        raise TypeError(f"column must be a non-empty str (the table's column name), got {column!r}")
    h = _as_batch(h)
    offsets = h.conversation_offsets().contiguous()
    ends = offsets.numpy()  # a view: reading two ints from numpy costs less than from torch
    first, n = (int(ends[0]), int(ends[-1])) if len(ends) else (0, 0)
    if first:
        offsets = offsets - first
    off = pa.Array.from_buffers(pa.int64(), offsets.numel(), [None, tensor_buffer(offsets)])
    conversations = pa.LargeListArray.from_arrays(off, messages_array(h, json, n))
    return pa.Table.from_arrays([conversations], names=[column])
