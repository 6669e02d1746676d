"""Packed JSON columns -> Arrow arrays without a Python object per value.

A History saves values that are not strings (``tool_calls``, ``extra``, ...) as a packed column
of JSON text: one byte buffer plus int64 offsets. Turning it into Arrow takes no Python loop:

- as JSON text (``json="text"``): the buffers *are* a ``large_string`` array (zero-copy), with
  the ``null`` values marked null in a validity bitmap computed with numpy;
- typed (``json="typed"``): the non-null values are wrapped as NDJSON by Arrow's string kernels
  and parsed by Arrow's C++ JSON reader (timestamps it would infer are read back as strings).
  The result is kept only when reading it back is exact, which is decided without looking at
  values one by one: every type is a struct, list, string, int64, bool or null (no float that
  could turn ``1`` into ``1.0``), no value holds a ``null`` (so a null struct field always
  means an absent key), and every object has its keys in its struct's field order (a struct has
  one field order for all rows, so objects whose keys come in different orders would read back
  reordered; checked with ``json.loads`` and a dict lookup per key, only for types holding a
  struct of two fields or more). Otherwise the caller converts the values in Python as before.

Example:
    >>> import torch
    >>> from chatdata import NonTensorStack
    >>> col = NonTensorStack.from_list([None, [{"name": "f", "arguments": {"x": 1}}]]).packed()
    >>> json_array(col, "typed").to_pylist()
    [None, [{'name': 'f', 'arguments': {'x': 1}}]]
    >>> json_array(col, "text").to_pylist()
    [None, '[{"name": "f", "arguments": {"x": 1}}]']
"""
from __future__ import annotations

import functools

import numpy as np

from .arrow_columns import json_field, strip_nulls, tensor_buffer
from .deps import require_pyarrow

__all__ = ["packed_json", "json_array", "json_array_of", "json_text_array", "null_rows", "valid_bits",
           "exact_type", "as_json_text"]

_NULL = np.frombuffer(b"null", dtype=np.uint8)


def packed_json(stack):
    """``(data uint8 numpy, offsets int64 numpy starting at 0)`` of a 1-D stack whose values are
    already packed JSON text (e.g. memory-mapped), else None (values held as Python objects:
    Arrow's own conversion of them is the fast way).

    Example:
        >>> from chatdata import NonTensorStack
        >>> packed_json(NonTensorStack.from_list([{"a": 1}])) is None
        True
    """
    pool = getattr(stack, "_pool", None)
    if pool is None or not getattr(pool, "is_packed", False) or getattr(stack, "batch_dims", 0) != 1:
        return None
    data, off, kind = stack.packed_column()
    if kind != "json":
        return None
    off = off.numpy()
    first = int(off[0]) if len(off) else 0
    return data.numpy()[first:int(off[-1]) if len(off) else 0], off - first if first else off  # no copy at 0


def null_rows(data: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """A bool per value: its JSON text is ``null``.

    Example:
        >>> null_rows(np.frombuffer(b"null[1]", np.uint8), np.array([0, 4, 7])).tolist()
        [True, False]
    """
    out = (offsets[1:] - offsets[:-1]) == 4
    if out.any():  # the only JSON text of 4 characters that starts with "n" is null
        out[out] = data[offsets[:-1][out]] == _NULL[0]
    return out


def valid_bits(nulls: np.ndarray):
    """``(bitmap, null_count)``: Arrow's validity bitmap (a ``pyarrow.Buffer``) of the values
    that are not null, or ``(None, 0)`` when none is null.

    Example:
        >>> bits, count = valid_bits(np.array([True, False, False]))
        >>> bits.to_pybytes(), count
        (b'\\x06', 1)
    """
    pa = require_pyarrow()
    count = int(nulls.sum())
    return (pa.py_buffer(np.packbits(~nulls, bitorder="little")), count) if count else (None, 0)


def json_text_array(data: np.ndarray, offsets: np.ndarray, nulls: np.ndarray | None, validity=None):
    """The ``large_string`` array of a packed column's text (zero-copy), ``nulls`` marked null
    (``validity`` is their :func:`valid_bits`, when already known).

    Example:
        >>> data, offsets = np.frombuffer(b'null[1]', np.uint8), np.array([0, 4, 7])
        >>> json_text_array(data, offsets, null_rows(data, offsets)).to_pylist()
        [None, '[1]']
    """
    import torch

    pa = require_pyarrow()
    if validity is None:
        validity = valid_bits(nulls) if nulls is not None else (None, 0)
    bits, count = validity
    return pa.LargeStringArray.from_buffers(len(offsets) - 1, tensor_buffer(torch.from_numpy(offsets)),
                                            pa.py_buffer(data), bits, count)


@functools.lru_cache(maxsize=256)  # a column's type is asked again at every load (types are hashable)
def exact_type(t) -> bool:
    """Whether values of Arrow type ``t`` read back as the JSON they came from (struct, list,
    string, int64, bool and null only, every field name valid UTF-8), and Parquet and HF datasets
    can hold them (no struct without fields: ``{}`` is kept as JSON text; no field name holding NUL).

    Example:
        >>> import pyarrow as pa
        >>> exact_type(pa.list_(pa.struct([("a", pa.int64())]))), exact_type(pa.float64())
        (True, False)
    """
    ids = _EXACT_IDS or _exact_ids()
    stack = [t]  # a walk, not a recursion: a type nested 500 levels deep is fine
    while stack:
        t = stack.pop()
        tid = t.id
        if tid == ids[0]:  # struct; one without fields ({}) cannot be written to Parquet
            if not t.num_fields:
                return False
            for i in range(t.num_fields):
                f = t.field(i)
                try:
                    if "\x00" in f.name:  # HF datasets cuts a name at NUL (and drops the fields' metadata)
                        return False
                except UnicodeDecodeError:  # a name read from a file may not be UTF-8
                    return False
                stack.append(f.type)
        elif tid in ids[1]:  # list, large_list
            stack.append(t.value_type)
        elif tid not in ids[2]:
            return False
    return True


_EXACT_IDS: tuple = ()


def _exact_ids() -> tuple:
    """(struct id, list ids, leaf ids) of Arrow's type ids (integers: comparing them costs
    nothing, building a DataType per comparison did)."""
    global _EXACT_IDS
    pa = require_pyarrow()
    _EXACT_IDS = (pa.struct([]).id, frozenset({pa.list_(pa.null()).id, pa.large_list(pa.null()).id}),
                  frozenset(t.id for t in (pa.string(), pa.large_string(), pa.int64(), pa.bool_(), pa.null())))
    return _EXACT_IDS


def _no_timestamps(pa, t):
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _no_timestamps(pa, f.type)) for f in t])
    if pa.types.is_list(t):
        return pa.list_(_no_timestamps(pa, t.value_type))
    return pa.string() if pa.types.is_timestamp(t) or pa.types.is_date(t) or pa.types.is_time(t) else t


def _parse(pa, rows, wrap: bool):
    """Arrow's JSON reader over ``rows`` (a large_string array without nulls), or None."""
    import pyarrow.compute as pc
    import pyarrow.json as pj

    if pc.any(pc.match_substring(rows, "null")).as_py():  # a null inside: absent and None would mix
        return None
    head = pa.scalar('{"v":' if wrap else "", pa.large_string())
    tail = pa.scalar("}\n" if wrap else "\n", pa.large_string())
    lines = pc.binary_join_element_wise(head, rows, tail, pa.scalar("", pa.large_string()))
    offsets = np.frombuffer(lines.buffers()[1], dtype=np.int64)[lines.offset:lines.offset + len(lines) + 1]
    body = lines.buffers()[2][int(offsets[0]):int(offsets[-1])]
    schema = None
    for _ in range(2):  # a second read only when the first inferred timestamps
        options = pj.ParseOptions(newlines_in_values=False, explicit_schema=schema)
        try:
            table = pj.read_json(pa.BufferReader(body), read_options=pj.ReadOptions(block_size=1 << 20),
                                 parse_options=options)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return None
        if table.num_rows != len(rows):
            return None
        arr = table.column("v").combine_chunks() if wrap else table.to_struct_array().combine_chunks()
        fixed = _no_timestamps(pa, arr.type)
        if fixed == arr.type:
            break
        schema = pa.schema([pa.field("v", fixed)]) if wrap else pa.schema(list(fixed))
    else:
        return None
    if not exact_type(arr.type) or not _keys_in_field_order(arr.type, rows):
        return None
    return arr


def _wide_structs(t) -> bool:
    """Whether the type ``t`` holds a struct of two fields or more (whose keys could come in
    another order in some value)."""
    pa = require_pyarrow()
    stack = [t]
    while stack:
        t = stack.pop()
        if pa.types.is_struct(t):
            if t.num_fields > 1:
                return True
            stack.extend(f.type for f in t)
        elif pa.types.is_list(t) or pa.types.is_large_list(t):
            stack.append(t.value_type)
    return False


def _keys_in_field_order(t, rows) -> bool:
    """Whether every object of the JSON texts ``rows`` (a string array) has its keys in the
    order of its struct's fields in the parsed type ``t``: a struct has one field order for all
    its rows, so an object whose keys came in another order (``{"unit": "C", "city": "Rome"}``
    after ``{"city": "Paris"}``) would read back reordered and a template would render it as
    other text. Values that are objects (a History's ``extra`` column) are the exception at
    their top level only: their keys become a table's message fields, which have one order for
    all rows. Walks the values one nesting level at a time (a dict lookup per key), into the
    fields that hold such structs only."""
    import json
    from itertools import chain

    pa = require_pyarrow()
    if not _wide_structs(t):
        return True
    stack = [(t, list(map(json.loads, rows.to_pylist())), pa.types.is_struct(t))]
    while stack:
        t, values, top = stack.pop()
        if pa.types.is_struct(t):
            names = [f.name for f in t]
            if len(names) > 1 and not top:
                pos = {n: i for i, n in enumerate(names)}.__getitem__
                for d in values:
                    at = list(map(pos, d))
                    if at != sorted(at):
                        return False
            for name, ft in zip(names, (f.type for f in t)):
                if _wide_structs(ft):  # a leaf, or a list of them, has no keys to check
                    stack.append((ft, [d[name] for d in values if name in d], False))
        elif pa.types.is_list(t) or pa.types.is_large_list(t):
            stack.append((t.value_type, list(chain.from_iterable(values)), False))
    return True


def json_array(stack, json: str = "typed", *, objects: bool = False):
    """The Arrow array of a 1-D stack of packed JSON values (``None`` values are null), or None
    when the caller must convert the values in Python: typed (see the module docstring) or as
    ``large_string`` JSON text (``json="text"``, zero-copy). With ``objects`` the values are
    dicts and the typed result is their struct array (one child per key).

    Example:
        >>> from chatdata import NonTensorStack
        >>> json_array(NonTensorStack.from_list([{"a": 1.5}]).packed(), "typed") is None  # floats: not exact
        True
    """
    got = packed_json(stack)
    if got is None:
        return None
    return json_array_of(*got, null_rows(*got), json, objects=objects)


def json_array_of(data: np.ndarray, offsets: np.ndarray, nulls: np.ndarray, json: str = "typed", *,
                  objects: bool = False):
    """:func:`json_array` of a packed column given as ``(data, offsets)`` (:func:`packed_json`)
    and its :func:`null_rows`. Key order is kept inside the values; values that are objects
    come back with their own keys in the struct's field order (a History's ``extra`` keys
    become a table's message fields, which have one order for all rows).

    Example:
        >>> data, offsets = np.frombuffer(b'null[1]', np.uint8), np.array([0, 4, 7])
        >>> json_array_of(data, offsets, null_rows(data, offsets)).to_pylist()
        [None, [1]]
    """
    pa = require_pyarrow()
    if json == "text":
        return json_text_array(data, offsets, nulls)
    keep = np.flatnonzero(~nulls)
    rows = json_text_array(data, offsets, None)
    if len(keep) < len(nulls):
        rows = rows.take(pa.array(keep))
    if not len(keep):
        return None
    parsed = _parse(pa, rows, wrap=not objects)
    if parsed is None:
        return None
    if len(keep) == len(nulls):
        return parsed
    index = np.zeros(len(nulls), dtype=np.int64)
    index[keep] = np.arange(len(keep))
    return parsed.take(pa.array(index, mask=nulls))


def as_json_text(table, column: str, names):
    """``table`` with the message fields ``names`` of ``column`` turned into JSON text (each
    value its JSON, tagged ``chatdata.encoding: json``), so that it joins tables where those
    fields are JSON text (:func:`~chatdata.io.arrow_check.encoding_clash`) or of types one
    schema cannot hold exactly (:func:`~chatdata.io.arrow_check.type_clash`) without being
    misread. Fields already tagged are kept. Costs a ``json.dumps`` per value of those fields:
    it is the fallback for such mixed datasets only.

    Example:
        >>> import pyarrow as pa
        >>> t = as_json_text(pa.table({"messages": [[{"role": "user", "content": "hi"}]]}), "messages", {"content"})
        >>> t.column(0).to_pylist()
        [[{'role': 'user', 'content': '"hi"'}]]
    """
    import json

    pa = require_pyarrow()
    from .arrow_check import ENCODING_KEY

    col = table.column(column)
    col = col.combine_chunks() if col.num_chunks else pa.nulls(0, col.type)  # pa.array([]) fails on arrow.json
    values = col.values
    fields, children = [], []
    for i, f in enumerate(values.type):
        child = values.field(i)
        if f.name in names and (f.metadata or {}).get(ENCODING_KEY) is None:
            # a typed value reads back with strip_nulls (a struct's null field is an absent key)
            items = child.to_pylist() if pa.types.is_string(f.type) or pa.types.is_large_string(f.type) else \
                strip_nulls(child.to_pylist())
            field, child = json_field(f.name, pa.array([None if v is None else json.dumps(v, ensure_ascii=False)
                                                        for v in items], pa.large_string()))
            f = field.with_metadata({**(f.metadata or {}), **field.metadata}).with_nullable(f.nullable)
        fields.append(f)
        children.append(child)
    struct = pa.StructArray.from_arrays(children, fields=fields, mask=values.is_null() if values.null_count else None)
    lists = type(col).from_arrays(col.offsets, struct, mask=col.is_null() if col.null_count else None)
    return table.set_column(table.schema.get_field_index(column), column, lists)
