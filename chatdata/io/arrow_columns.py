"""Columns <-> Arrow arrays without copying: string columns, tensors, Python values (NonTensorStack
and TensorDict use them in :mod:`chatdata.io.arrow_td`).

A packed string column (UTF-8 bytes + int64 offsets) *is* an Arrow ``large_string`` array: the
two buffers are wrapped with ``pyarrow.foreign_buffer``, whose ``base`` keeps the tensors (and so
the memory maps under them) alive. Tensors of shape ``(rows, *inner)`` become (nested)
``fixed_size_list`` arrays over one flat buffer, also without a copy.

Example:
    >>> from chatdata import NonTensorStack
    >>> arr = string_array(NonTensorStack.from_list(["hi", "é"]))
    >>> arr.type, arr.to_pylist()
    (DataType(large_string), ['hi', 'é'])
"""
from __future__ import annotations

import warnings

import numpy as np
import torch

from .deps import arrow_json_type, require_pyarrow

__all__ = ["tensor_buffer", "string_array", "stack_from_strings", "tensor_to_array", "array_to_tensor",
           "python_array", "strip_nulls", "JSON_META", "json_field", "empty_table", "fixed_size_lists"]

# field metadata marking a large_string field whose values are JSON text (values Arrow cannot type)
JSON_META = {b"chatdata.encoding": b"json"}


def json_field(name: str, texts):
    """``(field, array)`` for ``texts``, a ``large_string`` array of JSON text that chatdata chose
    (values Arrow cannot type exactly): the field is tagged :data:`JSON_META`, and where tables may
    carry it (:func:`~chatdata.io.deps.arrow_json_type`) the array is typed ``arrow.json`` too,
    which HF datasets keeps (as its ``Json()`` feature) through ``map``, ``save_to_disk`` and
    Parquet, where it drops field metadata. Its storage is ``string``, HF's own (one of another
    type HF re-encodes); text of 2 GiB or more in one array keeps ``large_string`` and the tag only.

    Example:
        >>> import pyarrow as pa
        >>> f, a = json_field("meta", pa.array(['"x"', "1"], pa.large_string()))
        >>> f.metadata, a.to_pylist()
        ({b'chatdata.encoding': b'json'}, ['"x"', '1'])
    """
    pa = require_pyarrow()
    json_type = arrow_json_type()
    if json_type is not None and texts.nbytes < 2**31 - 1:
        texts = pa.ExtensionArray.from_storage(json_type, texts.cast(pa.string()))
    return pa.field(name, texts.type, metadata=JSON_META), texts


def empty_table(schema):
    """A table of no rows of ``schema`` (``schema.empty_table()`` fails on extension types such as
    ``arrow.json``).

    Example:
        >>> import pyarrow as pa
        >>> empty_table(pa.schema([pa.field("x", pa.int64())])).num_rows
        0
    """
    pa = require_pyarrow()
    return pa.Table.from_arrays([pa.nulls(0, f.type) for f in schema], schema=schema)


def tensor_buffer(t: torch.Tensor):
    """A ``pyarrow.Buffer`` over the memory of the contiguous CPU tensor ``t`` (no copy; the
    buffer keeps ``t`` alive)."""
    pa = require_pyarrow()
    if type(t) is torch.Tensor and not t.requires_grad and t.is_cpu and t.is_contiguous():  # the usual case
        nbytes = t.numel() * t.element_size()
        return pa.foreign_buffer(t.data_ptr(), nbytes, base=t) if nbytes else pa.py_buffer(b"")
    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    if not t.is_contiguous():
        t = t.contiguous()
    nbytes = t.numel() * t.element_size()
    if nbytes == 0:
        return pa.py_buffer(b"")
    return pa.foreign_buffer(t.data_ptr(), nbytes, base=t)


def _buffer_tensor(buf, dtype: torch.dtype, start: int, count: int) -> torch.Tensor:
    """``count`` items of ``dtype`` from item ``start`` of an Arrow buffer (no copy)."""
    if count == 0:
        return torch.zeros(0, dtype=dtype)
    with warnings.catch_warnings():  # read-only memory: chatdata never writes packed data in place
        warnings.simplefilter("ignore", UserWarning)
        np_dtype = torch.empty((), dtype=dtype).numpy().dtype
        return torch.from_numpy(np.frombuffer(buf, dtype=np_dtype, count=count, offset=start * np_dtype.itemsize))


# -- strings ----------------------------------------------------------------------------------
def string_array(stack):
    """A ``large_string`` array of a 1-D NonTensorStack of strings, zero-copy when the stack is a
    packed (e.g. memory-mapped) column. JSON-packed stacks are decoded (see :func:`python_array`)."""
    pa = require_pyarrow()
    data, offsets, kind = stack.packed_column()
    if kind != "str":
        return python_array(stack.tolist())[0]
    n = offsets.numel() - 1
    return pa.LargeStringArray.from_buffers(n, tensor_buffer(offsets), tensor_buffer(data), None, 0)


def _string_parts(arr):
    """(data uint8 tensor, offsets int64 tensor starting at 0) of a string / large_string array
    without nulls; views of the Arrow buffers except for int32 offsets (widened) and rebasing."""
    pa = require_pyarrow()
    if pa.types.is_string(arr.type):
        off_dtype = torch.int32
    elif pa.types.is_large_string(arr.type):
        off_dtype = torch.int64
    else:
        raise TypeError(f"expected a string array, got {arr.type}")
    _, obuf, dbuf = arr.buffers()
    n = len(arr)
    off = _buffer_tensor(obuf, off_dtype, arr.offset, n + 1) if obuf is not None else torch.zeros(1, dtype=off_dtype)
    off = off.to(torch.int64)
    first = int(off[0])
    if first:
        off = off - first
    total = int(off[-1])
    data = _buffer_tensor(dbuf, torch.uint8, first, total) if total else torch.zeros(0, dtype=torch.uint8)
    return data, off


def stack_from_strings(arr):
    """A NonTensorStack over a string array (its bytes stay in Arrow memory); nulls become None."""
    from ..td import NonTensorStack

    if arr.null_count:
        return NonTensorStack.from_list(arr.to_pylist()) if len(arr) else NonTensorStack.from_list([])
    data, off = _string_parts(arr)
    return NonTensorStack.from_packed(data, off, "str")


def strip_nulls(value):
    """``value`` with every None-valued dict key removed, recursively (Arrow fills the keys a
    struct row lacks with null; they read back as absent). A value nested past Python's recursion
    limit is walked without recursion.

    Example:
        >>> strip_nulls([{"a": 1, "b": None}, {"c": [{"d": None}]}])
        [{'a': 1}, {'c': [{}]}]
    """
    try:
        return _strip(value)
    except RecursionError:
        return _strip_deep(value)


def _strip(value):
    if type(value) is dict:
        return {k: _strip(v) for k, v in value.items() if v is not None}
    if type(value) is list:
        return [_strip(v) for v in value]
    return value


def _strip_deep(value):
    """:func:`_strip` with an explicit stack: each container is copied, then its copy filled."""
    def fresh(v):
        return {} if type(v) is dict else [] if type(v) is list else v

    root = fresh(value)
    if root is value:  # not a container
        return value
    stack = [(value, root)]
    while stack:
        src, dst = stack.pop()
        items = ((k, v) for k, v in src.items() if v is not None) if type(src) is dict else enumerate(src)
        for k, v in items:
            new = fresh(v)
            if type(dst) is dict:
                dst[k] = new
            else:
                dst.append(new)
            if new is not v:
                stack.append((v, new))
    return root


def _same(a, b) -> bool:
    """``a == b`` where every value also has the same type (``1`` is not ``1.0``, nor ``True``)
    and every dict its keys in the same order (a struct's fields are in one order for all its
    rows; tool arguments read back reordered would render as other text)."""
    if type(a) is not type(b):
        return False
    if type(a) is dict:
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if type(a) is list:
        return len(a) == len(b) and all(map(_same, a, b))
    return a == b or (type(a) is float and a != a and b != b)  # NaN: an Arrow double holds it as it is


def _has_empty_struct(pa, t) -> bool:
    """A struct without fields (what ``{}`` infers: Parquet cannot write it) or with a field
    name holding NUL (HF datasets cuts the name there and, recasting, drops every field's
    metadata) somewhere in ``t``."""
    if pa.types.is_struct(t):
        return t.num_fields == 0 or any("\x00" in f.name or _has_empty_struct(pa, f.type) for f in t)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return _has_empty_struct(pa, t.value_type)
    return False


def python_array(values: list, as_text: bool = False):
    """An Arrow array of Python values (None = null) typed by Arrow's inference, if reading it
    back (with :func:`strip_nulls`) gives ``values`` exactly, types and key order included (an
    int that would read back as a float is not, nor dicts whose keys come in different orders),
    and Parquet and HF datasets can hold it (no ``{}``, a struct without fields; no key holding
    NUL); otherwise (or with ``as_text``) a
    ``large_string`` array of their JSON text (its field carries :data:`JSON_META`). Returns
    ``(array, is_json)``."""
    pa = require_pyarrow()
    try:
        if as_text:
            raise pa.ArrowInvalid("JSON text asked for")
        arr = pa.array(values, from_pandas=False)
        if pa.types.is_string(arr.type):
            arr = arr.cast(pa.large_string())
        if pa.types.is_null(arr.type) or (not _has_empty_struct(pa, arr.type)
                                          and _same(strip_nulls(arr.to_pylist()), values)):
            return arr, False
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OverflowError, RecursionError):
        pass  # RecursionError: a value nested deeper than the typed round-trip check can walk; JSON text keeps it
    import json

    texts = [None if v is None else json.dumps(v, ensure_ascii=False) for v in values]
    return pa.array(texts, pa.large_string()), True


# -- tensors ----------------------------------------------------------------------------------
_TORCH_TO_ARROW = {
    torch.float64: "float64", torch.float32: "float32", torch.float16: "float16",
    torch.int64: "int64", torch.int32: "int32", torch.int16: "int16", torch.int8: "int8",
    torch.uint8: "uint8", torch.bool: "bool",
}


def tensor_to_array(t: torch.Tensor):
    """A ``(rows, *inner)`` tensor as an Arrow array of rows: primitive for 1-D, nested
    ``fixed_size_list`` for more dims (no copy except bool, which Arrow packs into bits)."""
    pa = require_pyarrow()
    name = _TORCH_TO_ARROW.get(t.dtype)
    if name is None:
        raise TypeError(f"tensors of dtype {t.dtype} have no Arrow type; cast to one of "
                        f"{sorted(str(d) for d in _TORCH_TO_ARROW)} first")
    if t.ndim == 0:
        raise ValueError("a 0-d tensor has no rows; give a tensor of shape (rows, ...)")
    inner = tuple(t.shape[1:])
    check_inner(inner, "a tensor")
    flat = t.detach().cpu().contiguous().reshape(-1)
    if t.dtype == torch.bool:
        arr = pa.array(flat.numpy(), pa.bool_())
    else:
        arr = pa.Array.from_buffers(getattr(pa, name)(), flat.numel(), [None, tensor_buffer(flat)])
    return fixed_size_lists(arr, inner)


def check_inner(inner: tuple, what: str) -> None:
    """ValueError if a dimension of ``inner`` (a shape past the rows) is 0: Arrow's
    ``fixed_size_list`` has no size 0, so its rows could not say their shape."""
    if 0 in inner:
        raise ValueError(f"{what} of inner shape {inner} (past the rows) has a dimension of size 0, which an Arrow "
                         "fixed_size_list cannot hold; drop the entry or give it a size")


def fixed_size_lists(arr, inner: tuple):
    """``arr`` (the flat values, C order) as rows of nested ``fixed_size_list`` of the shape
    ``inner`` (checked by :func:`check_inner`)."""
    pa = require_pyarrow()
    for size in reversed(inner):
        arr = pa.FixedSizeListArray.from_arrays(arr, int(size))
    return arr


def array_to_tensor(arr) -> torch.Tensor:
    """The tensor of a primitive or nested ``fixed_size_list`` array (no copy for numbers)."""
    pa = require_pyarrow()
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    shape = [len(arr)]
    while pa.types.is_fixed_size_list(arr.type):
        if arr.null_count:
            raise ValueError("a fixed-size list column with null rows cannot become a tensor")
        size = arr.type.list_size
        shape.append(size)
        arr = arr.values[arr.offset * size:(arr.offset + len(arr)) * size]
    if arr.null_count:
        raise ValueError(f"a {arr.type} column with nulls cannot become a tensor")
    if not (pa.types.is_integer(arr.type) or pa.types.is_floating(arr.type) or pa.types.is_boolean(arr.type)):
        raise TypeError(f"a column of {arr.type} values cannot become a tensor; a tensor holds ints, floats or bools")
    if pa.types.is_boolean(arr.type):
        flat = torch.from_numpy(arr.to_numpy(zero_copy_only=False).astype(np.bool_))
    else:
        np_arr = arr.to_numpy(zero_copy_only=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            flat = torch.from_numpy(np_arr) if np_arr.size else torch.from_numpy(np_arr.copy())
    return flat.reshape(shape)
