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
text in a ``large_string`` field whose metadata says ``chatdata.encoding: json``. A message key
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

Example:
    >>> from chatdata import History
    >>> h = History.from_chats([[{"role": "user", "content": "hi"}]])
    >>> t = h.to_arrow()
    >>> History.from_arrow(t).to_chats() == h.to_chats()
    True
"""
from __future__ import annotations

import json

import numpy as np
import torch

from ..history.columns import CONTENT_ABSENT, IS_COMPLETE, TOOL_CALLS, TOOL_RESPONSES
from ..td import FormatError, NonTensorData, NonTensorStack
from .arrow_check import ENCODING_KEY, NULL_KEYS, check_one_column, checked_messages
from .arrow_columns import JSON_META, python_array, stack_from_strings, string_array, strip_nulls, tensor_buffer
from .deps import require_pyarrow

__all__ = ["history_to_arrow", "history_from_arrow", "messages_array", "find_bad_rows", "NULL_KEYS"]

_DEFAULTS = {"is_complete": True, "tool_calls": None, "tool_responses": None, "extra": None}


def _as_batch(h):
    if h.ndim == 0:
        return h.unsqueeze(0).unsqueeze(0)
    if h.ndim == 1:  # one conversation; an empty one is ``History.from_chats([])``: no conversations
        return h.unsqueeze(0) if h.batch_size[0] else h.unsqueeze(0)[0:0]
    if h.ndim != 2:
        raise ValueError(f"to_arrow takes a conversation or a batch of them, got batch size {tuple(h.batch_size)}")
    return h


def _values(col, n: int) -> list:
    if isinstance(col, NonTensorData):
        return [col.data] * n
    if isinstance(col, torch.Tensor):
        return col.reshape(-1).tolist()
    return col.reshape(-1).tolist() if col.batch_dims != 1 else col.tolist()


def _is_default_const(col, name: str) -> bool:
    return isinstance(col, NonTensorData) and col.data is _DEFAULTS[name]


def _flag_union(a: np.ndarray) -> int:
    """The bits set in any element of a contiguous int8 array (one pass, 8 bytes at a time)."""
    if not a.flags.c_contiguous:
        a = np.ascontiguousarray(a)
    whole = a.nbytes // 8 * 8
    wide = int(np.bitwise_or.reduce(a[:whole].view(np.uint64))) if whole else 0
    bits = int(np.bitwise_or.reduce(a[whole:].view(np.uint8))) if a.nbytes > whole else 0
    while wide:
        bits |= wide & 0xFF
        wide >>= 8
    return bits


def _typed(col, parse, objects: bool = False):
    """The typed array of a packed JSON column: its saved typed copy when it has one
    (:mod:`.arrow_typed_copy`; for ``objects`` only when its values are objects: the struct
    array the parse would give), else ``parse()``."""
    from .arrow_typed_copy import copy_of

    arr = copy_of(col)
    if arr is None or (objects and not require_pyarrow().types.is_struct(arr.type)):
        return parse()
    return arr


def _null_mask(col, got) -> np.ndarray:
    """A bool per value of a packed JSON column: it is ``null`` (from its typed copy when it
    has one: no pass over the column's offsets and bytes)."""
    from .arrow_json import null_rows
    from .arrow_typed_copy import copy_of

    arr = copy_of(col)
    if arr is None:
        return null_rows(*got)
    if not arr.null_count:
        return np.zeros(len(arr), dtype=bool)
    bits = np.frombuffer(arr.buffers()[0], dtype=np.uint8)  # the validity bitmap: 1 = not null
    return ~np.unpackbits(bits, bitorder="little")[arr.offset:arr.offset + len(arr)].astype(bool)


def _given_as_none(col, given: np.ndarray, nulls) -> bool:
    """Whether a message that has the key (``given``: nonzero, per value of the packed JSON
    column ``col``) holds ``null`` there: read from the validity bitmap of the column's typed
    copy when it has one (8 messages a byte), else from ``nulls()``."""
    valid = _valid_bitmap(col)
    if valid is None:
        return bool(given[nulls()].any())
    packed = np.packbits(given, bitorder="little")  # nonzero = 1; the last byte's padding is 0
    return bool((packed & ~valid).any())


def _valid_bitmap(col):
    """The validity bitmap (1 = not null, little-endian bits, a copy) of a packed JSON column's
    typed copy, once per column; None when it has no copy (or it starts inside a byte)."""
    from .arrow_memo import column_key, memo
    from .arrow_typed_copy import copy_of

    def make():
        arr = copy_of(col)
        if arr is None or arr.offset % 8:
            return None
        if not arr.null_count:
            return np.full((len(arr) + 7) // 8, 0xFF, dtype=np.uint8)
        return np.frombuffer(arr.buffers()[0], dtype=np.uint8)[arr.offset // 8:][:(len(arr) + 7) // 8].copy()
    return memo(column_key(col), "valid bitmap", make)


def _optional_fields(cols: dict, flags_np: np.ndarray, set_bits: int, n: int, json: str):
    """(fields, arrays) of ``is_complete``, ``tool_calls``, ``tool_responses`` and the extra keys,
    computed over whole columns (packed JSON parsed by Arrow, or kept as JSON text), or None when
    a value needs the per-message path (a key present with None, values Arrow cannot type
    exactly, columns held as Python objects)."""
    pa = require_pyarrow()
    from .arrow_json import json_array_of, json_text_array, null_rows, packed_json, valid_bits
    from .arrow_memo import column_key, memo

    fields, arrays = [], []
    for name, bit in (("is_complete", IS_COMPLETE), ("tool_calls", TOOL_CALLS), ("tool_responses", TOOL_RESPONSES)):
        col = cols[name]
        if _is_default_const(col, name) and not set_bits & bit:
            continue
        got = packed_json(col)
        if got is None:
            return None
        key = column_key(col)  # what is parsed from the packed bytes is parsed once per column

        def nulls(key=key, got=got, col=col):  # which values are null: read from a typed copy if any
            return memo(key, "nulls", lambda: _null_mask(col, got))

        if name == "is_complete":
            if nulls().any():
                return None
            given = (flags_np & bit) != 0 if set_bits & bit else np.zeros(n, dtype=bool)
            value = memo(key, "true", lambda: got[0][got[1][:-1]] == ord("t"))  # true / false
            arr, meta = pa.array(value, pa.bool_(), mask=~given & value), None  # True not given: absent
        else:
            if set_bits & bit and _given_as_none(col, flags_np.view(np.uint8) & bit, nulls):
                return None  # a key given as None: the per-message path writes _null_keys
            if json == "text":  # a view of the column: never memoised (see arrow_memo), its bitmap is
                arr = json_text_array(*got, nulls(), memo(key, "valid", lambda: valid_bits(nulls())))
            else:
                arr = memo(key, "typed", lambda: _typed(col, lambda: json_array_of(*got, nulls(), json)))
            if arr is None:
                return None
            meta = JSON_META if json == "text" else None
        fields.append(pa.field(name, arr.type, metadata=meta))
        arrays.append(arr)
    extra = cols["extra"]
    if not _is_default_const(extra, "extra"):
        got = packed_json(extra)
        arr = None if got is None else memo(column_key(extra), "typed objects", lambda: _typed(
            extra, lambda: json_array_of(*got, null_rows(*got), "typed", objects=True), objects=True))
        if arr is None or not pa.types.is_struct(arr.type):
            return None
        reserved = {"role", "content", *_DEFAULTS, NULL_KEYS}
        if reserved & {f.name for f in arr.type}:
            return None  # the per-message path names the clash
        for f, child in zip(arr.type, arr.flatten()):  # a message without extra keys: null in every child
            if pa.types.is_string(child.type):
                child = child.cast(pa.large_string())
            fields.append(pa.field(f.name, child.type))
            arrays.append(child)
    return fields, arrays


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
    set_bits = _flag_union(flags_np) if n else 0
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
        arrays.append(arr)
        fields.append(pa.field("content", arr.type, metadata=JSON_META if is_json else None))

    simple = not any_flags and all(_is_default_const(cols[k], k) for k in _DEFAULTS)
    fast = None if simple or null_keys is not None else _optional_fields(cols, flags_np, set_bits, n, json)
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
            elif json == "text" and name in _DEFAULTS:
                arr, is_json = python_array(vals, as_text=True)
            else:
                arr, is_json = python_array(vals)
            fields.append(pa.field(name, arr.type, metadata=JSON_META if is_json else None))
            arrays.append(arr)
    if null_keys is not None:
        fields.append(pa.field(NULL_KEYS, pa.list_(pa.large_string())))
        arrays.append(pa.array(null_keys, pa.list_(pa.large_string())))
    return pa.StructArray.from_arrays(arrays, fields=fields)


def history_to_arrow(h, column: str = "messages", json: str = "typed"):
    """``h`` (a conversation or a batch) as a ``pyarrow.Table`` with one row per conversation.

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


# -- reading ----------------------------------------------------------------------------------
def _column_of(obj, column: str):
    pa = require_pyarrow()
    data = None if isinstance(obj, (pa.Array, pa.ChunkedArray, pa.Table, pa.RecordBatch)) else getattr(obj, "data", None)
    if data is not None and hasattr(data, "table"):  # a datasets.Dataset
        # its rows: after select/shuffle/filter/sort/train_test_split, ``data.table`` still holds every
        # row of the source and an index mapping picks them; ``[:]`` in Arrow format applies it (a
        # zero-copy slice when there is no mapping, one ``take`` of the column when there is)
        names = getattr(obj, "column_names", None)
        obj = obj.with_format("arrow", columns=[column])[:] if names and column in names else data.table
    if hasattr(obj, "table") and not isinstance(obj, (pa.Table, pa.RecordBatch)):  # datasets' Table wrappers
        obj = obj.table
    if isinstance(obj, (pa.Table, pa.RecordBatch)):
        if column not in obj.schema.names:
            raise ValueError(f"no column {column!r} (columns: {obj.schema.names}); pass column=... to name "
                             "the messages column")
        check_one_column(obj.schema.names, column)
        obj = obj.column(column)
    if isinstance(obj, pa.ChunkedArray):
        obj = obj.chunk(0) if obj.num_chunks == 1 else (
            obj.combine_chunks() if obj.num_chunks else pa.array([], obj.type))
    if not isinstance(obj, pa.Array):
        raise TypeError(f"from_arrow takes a pyarrow Table, RecordBatch, (Chunked)Array or datasets.Dataset, "
                        f"got {type(obj).__name__}")
    return obj


def _row_of(flat_index: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    return np.searchsorted(offsets, flat_index, side="right") - 1


def find_bad_rows(obj, column: str = "messages") -> list[tuple[int, str]]:
    """``(row, reason)`` for every row that cannot become a conversation: a null row, a null
    message, a message without a role, a user, system or tool message without content.
    Vectorised; raises TypeError for a column of the wrong type (see :mod:`.arrow_check`)."""
    return _bad_rows(checked_messages(_column_of(obj, column), column), column)


def _bad_rows(arr, column: str) -> list[tuple[int, str]]:
    """:func:`find_bad_rows` of a column :func:`.checked_messages` gave."""
    pa = require_pyarrow()
    bad: dict[int, str] = {}
    if arr.null_count:
        for i in np.flatnonzero(arr.is_null().to_numpy(zero_copy_only=False)).tolist():
            bad[i] = f"{column} is null"
    offsets = arr.offsets.to_numpy().astype(np.int64)
    offsets = offsets - offsets[0]
    msgs = arr.flatten() if not arr.null_count else arr.values[arr.offsets[0].as_py():arr.offsets[-1].as_py()]
    if msgs.null_count:
        idx = np.flatnonzero(msgs.is_null().to_numpy(zero_copy_only=False))
        for i, r in zip(idx.tolist(), _row_of(idx, offsets).tolist()):
            bad.setdefault(r, f"message {i - offsets[r]} is null")
    role = msgs.field("role")
    if role.null_count:
        idx = np.flatnonzero(role.is_null().to_numpy(zero_copy_only=False))
        for i, r in zip(idx.tolist(), _row_of(idx, offsets).tolist()):
            bad.setdefault(r, f"message {i - offsets[r]} has no role")
    if len(msgs):  # the content rule, as from_chats applies it: a user, system or tool message needs content
        import pyarrow.compute as pc

        no_content = msgs.field("content").is_null() if "content" in msgs.type.names else \
            pa.array(np.ones(len(msgs), dtype=bool))
        needs = pc.and_(no_content, pc.is_in(role, pa.array(["user", "system", "tool"], role.type)))
        if pc.any(needs).as_py():
            idx = np.flatnonzero(needs.to_numpy(zero_copy_only=False))
            for i, r in zip(idx.tolist(), _row_of(idx, offsets).tolist()):
                bad.setdefault(r, f"message {i - offsets[r]}: a {role[i].as_py()!r} message needs 'content' (got none)")
    return sorted(bad.items())


def history_from_arrow(obj, column: str = "messages"):
    """A History (batch ``(rows, -1)``) from a table / array of message lists; see the module
    docstring. Raises ValueError naming the row for a row that is not a conversation.

    Example:
        >>> from chatdata import History
        >>> import pyarrow as pa
        >>> t = pa.table({"messages": [[{"role": "user", "content": "hi"}]]})
        >>> History.from_arrow(t).to_chats()
        [[{'role': 'user', 'content': 'hi'}]]
    """
    pa = require_pyarrow()
    from ..history import History

    arr = checked_messages(_column_of(obj, column), column)
    bad = _bad_rows(arr, column)
    if bad:
        row, reason = bad[0]
        raise ValueError(f"row {row}: {reason}" + (f" (and {len(bad) - 1} more bad rows)" if len(bad) > 1 else ""))
    offsets = torch.from_numpy(arr.offsets.to_numpy().astype(np.int64, copy=True))
    if offsets.numel() and int(offsets[0]):
        offsets -= int(offsets[0])
    msgs = arr.flatten()
    st = msgs.type
    names = [f.name for f in st]
    n = len(msgs)
    live = [nm for nm in names if nm not in ("role", "content") and msgs.field(nm).null_count < n]
    content_t = st.field("content").type if "content" in names else None
    if not live and content_t is not None and (pa.types.is_string(content_t) or pa.types.is_large_string(content_t)) \
            and not (st.field("content").metadata or {}).get(ENCODING_KEY):
        cols = {"role": stack_from_strings(msgs.field("role")), "content": stack_from_strings(msgs.field("content"))}
        return History.from_message_columns(cols, offsets)
    flat = _messages(msgs, st, names, n, offsets.numpy())
    off = offsets.tolist()
    chats = [flat[a:b] for a, b in zip(off[:-1], off[1:])]
    try:
        return History.from_chats(chats)
    except ValueError as err:
        msg = str(err)
        if msg.startswith("chat "):
            msg = "row " + msg[5:]
        raise ValueError(msg) from None


def _messages(msgs, st, names, n, offsets: np.ndarray) -> list[dict]:
    """Message dicts of a struct array, with the null rules of the module docstring (``offsets``:
    where each row's messages start, to name the row of a bad value)."""
    columns = {}
    for nm in names:
        vals = msgs.field(nm).to_pylist()
        if (st.field(nm).metadata or {}).get(ENCODING_KEY) == b"json":
            vals = _parsed_json(vals, nm, offsets)
        elif nm not in ("role", NULL_KEYS):
            vals = strip_nulls(vals)
        columns[nm] = vals
    null_keys = columns.pop(NULL_KEYS, None)
    order = [nm for nm in names if nm != NULL_KEYS]
    out = []
    for i in range(n):
        nk = null_keys[i] if null_keys is not None else None
        m = {}
        for nm in order:
            v = columns[nm][i]
            if v is not None:
                m[nm] = v
            elif nk is None:  # no key list for this message (foreign data): null content is None
                if nm == "content":
                    m[nm] = None
            elif nm in nk:
                m[nm] = None
        if nk:  # a key listed without a field of its own (a hand-made table) holds None too
            for k in nk:
                if k is not None and k != NULL_KEYS and k not in columns:
                    m[k] = None
        out.append(m)
    return out


def _parsed_json(texts: list, name: str, offsets: np.ndarray) -> list:
    """The values of the JSON texts of the field ``name`` (None stays None); ValueError naming
    the row and message of a text that is not JSON."""
    try:
        return [None if v is None else json.loads(v) for v in texts]
    except (ValueError, RecursionError):
        pass
    for i, v in enumerate(texts):  # the error path only: find the first bad text
        try:
            if v is not None:
                json.loads(v)
        except (ValueError, RecursionError) as err:
            row = int(_row_of(np.array([i]), offsets)[0])
            why = "nested too deeply" if isinstance(err, RecursionError) else str(err)
            raise ValueError(f"row {row}, message {i - int(offsets[row])}: field {name!r} is tagged chatdata.encoding: "
                             f"json but its text is not JSON ({why}): {v!r:.60}; fix the text, or drop the field's "
                             "metadata to read it as a string") from None
    raise AssertionError("unreachable: json.loads failed once and never again")
