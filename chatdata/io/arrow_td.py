"""NonTensorStack and TensorDict <-> Arrow (``NonTensorStack.to_arrow`` / ``TensorDict.to_arrow``).

A NonTensorStack is a ``large_string`` array when it holds strings (zero-copy when packed), else
Arrow's own type for its values when reading it back gives them exactly; values Arrow cannot type
exactly (a str in one row and an int in another, ``{}``) are their JSON text typed as Arrow's
``arrow.json``, which reads back as the values. A TensorDict of batch ``(rows,)`` is a table: one
column per key, tensors as (fixed-size list) numbers, nested TensorDicts as structs (also one
without entries). The field of a non-tensor entry is tagged :data:`NONTENSOR_META`, so that its
dicts (a struct), numbers or bools read back as the NonTensorStack they were, not as a nested
TensorDict or a tensor; a field without the tag (a table from elsewhere) is read by its type.

Example:
    >>> from chatdata import NonTensorStack, TensorDict
    >>> td = TensorDict({"x": torch.zeros(2), "meta": NonTensorStack.from_list([{"a": 1}, {"a": 2}])}, [2])
    >>> TensorDict.from_arrow(td.to_arrow())["meta"].tolist()
    [{'a': 1}, {'a': 2}]
"""
from __future__ import annotations

import json

import torch

from .arrow_check import is_json_type
from .arrow_columns import (array_to_tensor, check_inner, fixed_size_lists, json_field, python_array,
                            stack_from_strings, string_array, strip_nulls, tensor_to_array)
from .deps import require_pyarrow

__all__ = ["nontensor_to_arrow", "nontensor_from_arrow", "tensordict_to_arrow", "tensordict_from_arrow",
           "NONTENSOR_META"]

# field metadata of a TensorDict table's column that holds a non-tensor entry (not a nested TensorDict)
NONTENSOR_META = {b"chatdata.kind": b"nontensor"}


def _values_array(values: list, what: str):
    """An Arrow array of Python values: Arrow's type when it reads back exactly, else their JSON
    text typed ``arrow.json`` (TypeError where this pyarrow / HF datasets cannot carry that type:
    a plain string array would read back as the texts, not the values)."""
    arr, is_json = python_array(values)
    if not is_json:
        return arr
    for i, v in enumerate(values):  # JSON text has no NaN / Infinity: other readers cannot parse it
        try:
            json.dumps(v, allow_nan=False)
        except ValueError:
            raise ValueError(f"{what}: row {i} holds NaN or an infinity among values that must go as JSON text "
                             f"({v!r:.60}), which JSON cannot hold; use None or a finite number") from None
    arr = json_field("", arr)[1]
    if not is_json_type(arr.type):
        raise TypeError(f"{what}: its values have no one Arrow type (e.g. a str in one row and an int in another) and "
                        "their JSON text cannot be marked as JSON here (it needs pyarrow >= 19, and HF datasets "
                        ">= 4.7 if installed); give every row one type of value")
    return arr


def nontensor_to_arrow(stack, what: str = "NonTensorStack.to_arrow"):
    """A 1-D NonTensorStack as an Arrow array: ``large_string`` for strings (zero-copy when
    packed), Arrow's own type for JSON values (``arrow.json`` text for values it cannot type
    exactly). A stack of shape ``(rows, *inner)`` gives rows of ``fixed_size_list``.

    Example:
        >>> from chatdata import NonTensorStack
        >>> NonTensorStack.from_list(["a", "b"]).to_arrow().to_pylist()
        ['a', 'b']
    """
    shape = tuple(stack.batch_size)
    if not shape:
        raise ValueError(f"{what}: a NonTensorStack of batch size () has no rows; give one of batch size (rows, ...)")
    check_inner(shape[1:], f"{what}: a NonTensorStack")
    flat = stack.reshape(-1) if len(shape) != 1 else stack
    data, off, kind = flat.packed_column()
    arr = string_array(flat) if kind == "str" else _values_array(flat.tolist(), what)
    return fixed_size_lists(arr, shape[1:])


def _json_values(arr) -> list:
    return [None if t is None else json.loads(t) for t in arr.storage.to_pylist()]


def nontensor_from_arrow(arr):
    """A NonTensorStack from an Arrow array (strings stay in the Arrow buffers; ``arrow.json``
    text reads as its values)."""
    pa = require_pyarrow()
    from ..td import NonTensorStack

    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type):
        return stack_from_strings(arr)
    if is_json_type(arr.type):
        return NonTensorStack.from_list(_json_values(arr))
    inner, base = [], arr
    while pa.types.is_fixed_size_list(base.type) and not base.null_count:
        inner.append(base.type.list_size)
        base = base.flatten()
    if inner and is_json_type(base.type):  # rows of JSON text: the values, nested back into rows
        rows = _json_values(base)
        for size in reversed(inner):
            rows = [rows[i:i + size] for i in range(0, len(rows), size)]
        return NonTensorStack.from_list(rows)
    return NonTensorStack.from_list(strip_nulls(arr.to_pylist()))


def tensordict_to_arrow(td):
    """A TensorDict of batch ``(rows,)`` as a ``pyarrow.Table``: one column per key, tensors as
    (fixed-size list) numbers, strings as ``large_string``, nested TensorDicts as struct columns,
    other non-tensor values as :func:`nontensor_to_arrow` writes them, tagged :data:`NONTENSOR_META`.

    Example:
        >>> from chatdata import TensorDict
        >>> TensorDict({"x": torch.zeros(2, 3)}, [2]).to_arrow().schema.field("x").type
        FixedSizeListType(fixed_size_list<item: float>[3])
    """
    pa = require_pyarrow()
    if td.batch_dims != 1:
        raise ValueError("to_arrow needs a TensorDict with one batch dim (rows), got batch size "
                         f"{tuple(td.batch_size)}")
    fields, arrays = _td_arrays(td, pa)
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def _td_arrays(td, pa, where: str = ""):
    from ..td import NonTensorData, NonTensorStack, TensorDict

    n = td.batch_size[0]
    fields, arrays = [], []
    for key in td.keys():
        path = f"{where}.{key}" if where else key
        value = td._get_raw(key) if hasattr(td, "_get_raw") else td.get(key)
        meta = None
        if isinstance(value, torch.Tensor):
            check_inner(tuple(value.shape[1:]), f"entry {path!r}: a tensor")
            arr = tensor_to_array(value)
        elif isinstance(value, NonTensorStack):
            arr, meta = nontensor_to_arrow(value, f"entry {path!r}"), NONTENSOR_META
        elif isinstance(value, NonTensorData):
            arr, meta = _values_array([value.data] * n, f"entry {path!r}"), NONTENSOR_META
        elif isinstance(value, TensorDict):
            sub_fields, sub_arrays = _td_arrays(value, pa, path)
            arr = pa.StructArray.from_arrays(sub_arrays, fields=sub_fields) if sub_arrays else \
                pa.array([{}] * n, pa.struct([]))  # a TensorDict without entries is still one
        else:
            raise TypeError(f"entry {path!r} of type {type(value).__name__} has no Arrow form")
        fields.append(pa.field(key, arr.type, metadata=meta))
        arrays.append(arr)
    return fields, arrays


def tensordict_from_arrow(table):
    """A TensorDict of batch ``(rows,)`` from a ``pyarrow.Table`` (numbers and fixed-size lists
    become tensors without a copy, strings NonTensorStacks, structs nested TensorDicts, a field
    tagged :data:`NONTENSOR_META` a NonTensorStack). Two columns (or struct fields) of one name,
    and nulls where a tensor needs a number (a null struct row too), are errors naming the column."""
    pa = require_pyarrow()
    from ..td import TensorDict

    if isinstance(table, pa.RecordBatch):
        table = pa.Table.from_batches([table])
    if not isinstance(table, pa.Table):
        raise TypeError(f"TensorDict.from_arrow takes a pyarrow Table or RecordBatch, got {type(table).__name__}")
    return _td_from_columns(list(table.schema), [table.column(i) for i in range(table.num_columns)],
                            table.num_rows, pa, TensorDict)


def _td_from_columns(fields, columns, n, pa, TensorDict, where: str = ""):
    out = {}
    for field, col in zip(fields, columns):
        name = field.name
        path = f"{where}.{name}" if where else name
        if name in out:  # a dict keeps the last: the first column would be dropped without a word
            raise ValueError(f"two columns are named {path!r}; rename or drop one of them")
        if isinstance(col, pa.ChunkedArray):
            col = col.combine_chunks()
        t = col.type
        if (field.metadata or {}).get(b"chatdata.kind") == NONTENSOR_META[b"chatdata.kind"]:
            out[name] = nontensor_from_arrow(col)
            continue
        if pa.types.is_struct(t):
            # flatten() gives each field the struct's nulls too (field(i) would read a null row's
            # field as whatever its slot holds, usually 0)
            out[name] = _td_from_columns(list(t), col.flatten(), n, pa, TensorDict, path)
            continue
        base = t
        while pa.types.is_fixed_size_list(base):
            base = base.value_type
        if pa.types.is_integer(base) or pa.types.is_floating(base) or pa.types.is_boolean(base):
            if pa.types.is_unsigned_integer(base) and base.bit_width > 8:
                raise TypeError(f"column {path!r}: {base} has no torch dtype")
            try:
                out[name] = array_to_tensor(col)
            except ValueError as err:  # nulls
                raise ValueError(f"column {path!r}: {err}") from None
        else:
            out[name] = nontensor_from_arrow(col)
    return TensorDict(out, [n])
