"""Arrow -> History: ``History.from_arrow`` and :func:`find_bad_rows`. A table is checked first
(:mod:`.arrow_check`, on types only), then its bad rows are found in one vectorised pass, and
the messages are read with the null rules of :mod:`chatdata.io.arrow_history` (the format).

Example:
    >>> import pyarrow as pa
    >>> find_bad_rows(pa.table({"messages": [[{"role": "user", "content": None}]]}))
    [(0, "message 0: a 'user' message needs 'content' (got none)")]
"""
from __future__ import annotations

import json

import numpy as np
import torch

from .arrow_check import ENCODING_KEY, NULL_KEYS, check_one_column, checked_messages
from .arrow_columns import stack_from_strings, strip_nulls
from .arrow_valid import invalid_rows
from .deps import require_pyarrow

__all__ = ["history_from_arrow", "find_bad_rows", "read_good_rows"]


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
            obj.combine_chunks() if obj.num_chunks else pa.nulls(0, obj.type))  # pa.array([]) fails on arrow.json
    if not isinstance(obj, pa.Array):
        raise TypeError(f"from_arrow takes a pyarrow Table, RecordBatch, (Chunked)Array or datasets.Dataset, "
                        f"got {type(obj).__name__}{_hint(obj)}")
    return obj


def _hint(obj) -> str:
    """What to pass instead of ``obj``, for the objects users hand to from_arrow most often."""
    if isinstance(obj, (list, tuple)):
        return " (History.from_chats(chats) reads lists of message dicts)"
    if isinstance(obj, dict) and not hasattr(obj, "column_names"):
        return " (pyarrow.table(d) makes a Table of a dict of columns)"
    kind = type(obj).__name__
    if kind == "DatasetDict" and hasattr(obj, "keys"):
        return f" (pass one split, e.g. dataset[{next(iter(obj.keys()), 'train')!r}])"
    if kind == "IterableDataset":
        return " (a streaming dataset has no table: History.from_chats([row['messages'] for row in dataset]))"
    if kind == "RecordBatchReader":
        return " (pass reader.read_all())"
    if kind == "DataFrame" and hasattr(obj, "iloc"):
        return " (pyarrow.Table.from_pandas(df) makes a Table of it)"
    if kind == "Column" and type(obj).__module__.startswith("datasets"):
        return " (pass the Dataset itself, naming the column with column=...)"
    if hasattr(obj, "to_arrow") and callable(obj.to_arrow):  # a polars DataFrame, a ShardedDataset, ...
        return " (pass obj.to_arrow())"
    return ""


def _row_of(flat_index: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    return np.searchsorted(offsets, flat_index, side="right") - 1


def find_bad_rows(obj, column: str = "messages") -> list[tuple[int, str]]:
    """``(row, reason)`` for every row that cannot become a conversation: a null row, a null
    message, a message without a role, a user, system or tool message without content, data that
    is not what its Arrow type says (text that is not UTF-8, from a damaged Parquet file).
    Vectorised; raises TypeError for a column of the wrong type (see :mod:`.arrow_check`)."""
    return _bad_rows(checked_messages(_column_of(obj, column), column), column)


def _bad_rows(arr, column: str) -> list[tuple[int, str]]:
    """:func:`find_bad_rows` of a column :func:`.checked_messages` gave."""
    pa = require_pyarrow()
    bad: dict[int, str] = {}
    # Parquet readers hand over string bytes unchecked: a damaged file would be saved as text that is not text
    for r, why in invalid_rows(arr):
        bad[r] = f"{why}: the file it came from is damaged, or holds text in another encoding"
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
    arr = checked_messages(_column_of(obj, column), column)
    bad = _bad_rows(arr, column)
    if bad:
        row, reason = bad[0]
        raise ValueError(f"row {row}: {reason}" + (f" (and {len(bad) - 1} more bad rows)" if len(bad) > 1 else ""))
    return _history_of(arr)


def read_good_rows(obj, column: str = "messages"):
    """``(history, rows, bad)``: a History of the rows of ``obj`` that are conversations (None when
    none is), their row numbers, and ``(row, reason)`` for the others: :func:`find_bad_rows`'s,
    then rows a History cannot hold (e.g. an ``is_complete`` that is not a bool). Each row is
    checked once (what ``chatdata import`` does per chunk).

    Example:
        >>> import pyarrow as pa
        >>> h, rows, bad = read_good_rows(pa.table({"messages": [[{"role": "user", "content": "hi"}], None]}))
        >>> h.to_chats(), rows.tolist(), bad
        ([[{'role': 'user', 'content': 'hi'}]], [0], [(1, 'messages is null')])
    """
    pa = require_pyarrow()
    arr = checked_messages(_column_of(obj, column), column)
    bad = _bad_rows(arr, column)
    rows = np.arange(len(arr), dtype=np.int64)
    if bad:
        keep = np.ones(len(arr), dtype=bool)
        keep[[r for r, _ in bad]] = False
        arr, rows = arr.filter(pa.array(keep)), rows[keep]
    try:
        return _history_of(arr), rows, bad
    except ValueError:  # find the rows chatdata cannot hold, one by one (each a row already checked)
        pass
    good = []
    for i in range(len(arr)):
        try:
            _history_of(arr.slice(i, 1))
            good.append(i)
        except ValueError as err:
            bad.append((int(rows[i]), str(err).replace("row 0, ", "").replace("row 0: ", "")))
    h = _history_of(arr.take(pa.array(good, pa.int64()))) if good else None
    return h, rows[good], bad


def _history_of(arr):
    """The History of a messages array :func:`_bad_rows` found no bad row in."""
    pa = require_pyarrow()
    from ..history import History

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
    if not chats:  # no rows: a batch of none (batch (0, -1))
        from .stitch import empty_history

        return empty_history()
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
