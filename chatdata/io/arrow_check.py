"""The checks ``History.from_arrow`` makes on a messages column before reading it.

A table made by hand (or by another tool, or damaged) may hold a messages column Arrow is
happy with but chatdata cannot read as it is. :func:`checked_messages` looks at the column's
*type* only (never at the messages one by one, so the check costs the same for 10 rows or 10
million) and either

* gives the column back in the types the reader takes: ``role`` / ``content`` that are
  dictionary-encoded, ``string_view``, binary (what older Parquet writers store for text;
  checked as UTF-8 by the cast) or of Arrow's ``null`` type become ``large_string``, a
  ``fixed_size_list`` of messages a ``large_list`` (one cast of the column, and only when
  needed; a column already in those types comes back as it is); or
* raises TypeError saying which field has which type and which types are accepted: two
  fields (or columns) of one name, a ``role`` that is not text, ``content`` that is neither text
  nor a list of parts, a ``_null_keys`` field that is not a list of strings, a field tagged
  ``chatdata.encoding`` that is not text or names an encoding other than ``json``.

Example:
    >>> import pyarrow as pa
    >>> roles = pa.array(["user"]).dictionary_encode()
    >>> msgs = pa.StructArray.from_arrays([roles, pa.array(["hi"])], names=["role", "content"])
    >>> col = pa.ListArray.from_arrays(pa.array([0, 1], pa.int32()), msgs)
    >>> checked_messages(col, "messages").type.value_type.field("role").type
    DataType(large_string)
"""
from __future__ import annotations

from .deps import require_pyarrow

__all__ = ["checked_messages", "check_one_column", "encoding_clash", "json_fields", "type_clash", "key_orders",
           "order_clash", "fields_to_join_as_json", "NULL_KEYS", "ENCODING_KEY"]

NULL_KEYS = "_null_keys"
ENCODING_KEY = b"chatdata.encoding"
_EXPECTED = "list<struct<role: string, content: ...>> (one list of messages per row)"
_TEXT = "string, large_string, string_view, binary holding UTF-8, or a dictionary of those"
#: what to do with ShareGPT turns in a table: chatdata reads that shape from JSON records only
SHAREGPT_HINT = ("ShareGPT turns (from/value) are read from JSON records, not from a table's columns: write the "
                 "rows as JSON Lines and import those, e.g. python -c \"import json, sys, pyarrow.parquet as pq; "
                 "[print(json.dumps(r)) for r in pq.read_table(sys.argv[1]).to_pylist()]\" FILE.parquet "
                 "| chatdata import - OUT")


def _is(t, kind: str) -> bool:
    """``pyarrow.types.is_<kind>(t)``; False for a kind this pyarrow does not have (string_view
    and list_view came in pyarrow 16)."""
    test = getattr(require_pyarrow().types, f"is_{kind}", None)
    return bool(test and test(t))


def _duplicate(t, path: str):
    """``(path, name)`` of the first struct in the type ``t`` (``path`` names it) that has two
    fields called ``name``, else None."""
    pa = require_pyarrow()
    if pa.types.is_struct(t):
        seen = set()
        for f in t:
            if f.name in seen:
                return path, f.name
            seen.add(f.name)
        for f in t:
            found = _duplicate(f.type, f"{path}.{f.name}" if path else f.name)
            if found:
                return found
    elif _is_list(t) or pa.types.is_fixed_size_list(t) or _is(t, "list_view") or _is(t, "large_list_view"):
        return _duplicate(t.value_type, f"{path}[]")
    elif pa.types.is_map(t):
        return _duplicate(t.item_type, f"{path}{{}}")
    elif pa.types.is_dictionary(t):
        return _duplicate(t.value_type, path)
    return None


def _as_text(t):
    """The type a text field of type ``t`` is read as (``t`` itself for string / large_string),
    or None when ``t`` holds no text."""
    pa = require_pyarrow()
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return t
    if pa.types.is_null(t) or _is(t, "string_view") or _is_binary(t):  # binary: UTF-8 checked by the cast
        return pa.large_string()
    if pa.types.is_dictionary(t) and _as_text(t.value_type) is not None:
        return pa.large_string()
    return None


def _is_binary(t) -> bool:
    """Bytes that older Parquet writers store for text (no UTF-8 annotation)."""
    pa = require_pyarrow()
    return pa.types.is_binary(t) or pa.types.is_large_binary(t) or _is(t, "binary_view")


def _is_list(t) -> bool:
    pa = require_pyarrow()
    return pa.types.is_list(t) or pa.types.is_large_list(t)


def is_json_type(t) -> bool:
    """Whether ``t`` is Arrow's canonical JSON extension type (``arrow.json``: JSON text in a
    string storage), which HF datasets writes for ``Json()`` features and keeps through ``map``,
    ``save_to_disk`` and Parquet."""
    return getattr(t, "extension_name", None) == "arrow.json"


def _has_json(t) -> bool:
    """Whether the type ``t`` holds :func:`is_json_type` values anywhere inside it."""
    pa = require_pyarrow()
    if is_json_type(t):
        return True
    if pa.types.is_struct(t):
        return any(_has_json(f.type) for f in t)
    inner = getattr(t, "value_type", None) if not pa.types.is_dictionary(t) else None
    return inner is not None and _has_json(inner)


def _hf_json_refusal(where: str, t, column: str) -> TypeError:
    return TypeError(f"{where} has type {t}: it holds JSON text of HF datasets' Json() feature, which from_arrow "
                     f"reads only as a whole message field; HF decodes it: History.from_chats([row[{column!r}] for "
                     "row in dataset])")


def _field_type(f, column: str):
    """The type the message field ``f`` is read as; TypeError for a type chatdata cannot read."""
    pa = require_pyarrow()
    where = f"field {f.name!r} of the messages in column {column!r}"
    if is_json_type(f.type):  # JSON text, tagged by its type: read as a chatdata.encoding: json field
        return _as_text(f.type.storage_type) or pa.large_string()
    if _has_json(f.type):  # read as is, its values would be their JSON text
        raise _hf_json_refusal(where, f.type, column)
    encoding = (f.metadata or {}).get(ENCODING_KEY)
    if encoding is not None:
        if encoding != b"json":
            raise TypeError(f"{where} has metadata chatdata.encoding: {encoding.decode(errors='replace')!r}; the "
                            "only encoding chatdata knows is 'json' (drop the metadata for plain values)")
        text = _as_text(f.type)
        if text is None:
            raise TypeError(f"{where} is tagged chatdata.encoding: json but has type {f.type}; JSON text must be "
                            f"{_TEXT} (drop the metadata for values of Arrow's own types)")
        return text
    if f.name == "role":
        text = _as_text(f.type)
        if text is None:
            raise TypeError(f"{where} has type {f.type}; a role must be text: {_TEXT}")
        return text
    if f.name == "content":
        text = _as_text(f.type)
        if text is None and not _is_list(f.type):
            raise TypeError(f"{where} has type {f.type}; content must be text ({_TEXT}) or a list of parts "
                            "(list<struct<type: string, ...>>)")
        return text or f.type
    if f.name == NULL_KEYS:
        if pa.types.is_null(f.type):
            return f.type
        item = _as_text(f.type.value_type) if _is_list(f.type) else None
        if item is None:
            raise TypeError(f"{where} has type {f.type}; {NULL_KEYS} must be list<string> (per message, the "
                            "keys that hold None), or drop the field")
        return f.type if item == f.type.value_type else pa.large_list(item)
    return f.type


def check_one_column(names: list, column: str) -> None:
    """ValueError when a table's column ``names`` hold ``column`` more than once (reading "the"
    column would pick one of them silently).

    Example:
        >>> check_one_column(["messages", "id"], "messages")
        >>> check_one_column(["messages", "messages"], "messages")
        Traceback (most recent call last):
        ...
        ValueError: 2 columns are named 'messages'; rename or drop all but the messages column
    """
    n = names.count(column)
    if n > 1:
        raise ValueError(f"{n} columns are named {column!r}; rename or drop all but the messages column")


def checked_messages(arr, column: str = "messages"):
    """The messages array ``arr`` (one list of message structs per row) in the types
    ``History.from_arrow`` reads (see the module docstring); TypeError naming the field, its type
    and the types accepted when ``arr`` cannot be read. Looks at types only; casts (once) only
    when a field needs it.

    Example:
        >>> import pyarrow as pa
        >>> checked_messages(pa.array(["hi"]), "messages")
        Traceback (most recent call last):
        ...
        TypeError: column 'messages' has type string; expected list<struct<role: string, content: ...>> (one list of messages per row)
    """
    pa = require_pyarrow()
    t = arr.type
    fixed = pa.types.is_fixed_size_list(t)
    if (_is_list(t) or fixed) and pa.types.is_null(t.value_type):  # what pa.table / HF from_list infer when
        # every row is empty: read as role/content messages (a row holding null messages stays a bad row)
        t = pa.large_list(pa.struct([pa.field("role", pa.large_string()), pa.field("content", pa.large_string())]))
        arr, fixed = arr.cast(t), False
    if (_is_list(t) or fixed) and is_json_type(t.value_type):  # HF from_list(..., on_mixed_types="use_json")
        raise _hf_json_refusal(f"column {column!r}", t, column)
    if isinstance(t, pa.ExtensionType) and "pickled" in t.extension_name:
        # Ray keeps rows Arrow cannot type as pickled Python objects, which chatdata never unpickles
        raise TypeError(f"column {column!r} holds pickled Python objects ({t.extension_name}): Ray Data could not "
                        "make an Arrow column of these rows: a lone surrogate in a string (fix its encoding), or "
                        "values of one key that Arrow cannot give one type (content as text in one message and a "
                        "list of parts in another: make the blocks with "
                        "ray.data.from_arrow(chatdata.History.from_chats(chats).to_arrow()))")
    if not (_is_list(t) or fixed) or not pa.types.is_struct(t.value_type):
        raise TypeError(f"column {column!r} has type {t}; expected {_EXPECTED}")
    st = t.value_type
    found = _duplicate(st, "")
    if found:
        path, name = found
        inside = f"field {path!r} of the messages" if path else "the message struct"
        raise TypeError(f"column {column!r}: {inside} has two fields named {name!r}; a key appears once in a "
                        "message: rename or drop one of them")
    if st.get_field_index("role") < 0:
        if st.get_field_index("from") >= 0 and st.get_field_index("value") >= 0:
            raise TypeError(f"column {column!r} has type {t}; {SHAREGPT_HINT}")
        raise TypeError(f"column {column!r} has type {t}; its messages have no 'role' field (expected {_EXPECTED})")
    fields = [f.with_type(_field_type(f, column)) for f in st]
    fields = [f.with_metadata({**(g.metadata or {}), ENCODING_KEY: b"json"}) if is_json_type(g.type) else f
              for f, g in zip(fields, st)]
    if not fixed and all(a.type == b.type for a, b in zip(fields, st)):
        return arr
    value = pa.struct(fields)
    try:
        return arr.cast(pa.list_(value) if pa.types.is_list(t) else pa.large_list(value))
    except pa.ArrowInvalid:  # bytes read as text that are not UTF-8
        raise ValueError(f"column {column!r}: field {_not_utf8(arr, fields)!r} of the messages holds bytes that are "
                         "not UTF-8 text; chatdata reads a binary field as UTF-8 text: fix the encoding, or drop "
                         "the field") from None


def _not_utf8(arr, fields) -> str:
    """The name of the first message field whose cast to text fails (the error path only)."""
    pa = require_pyarrow()
    msgs = arr.flatten()
    for f in fields:
        try:
            msgs.field(f.name).cast(f.type)
        except pa.ArrowInvalid:
            return f.name
    return "?"


def encoding_clash(schemas: list, column: str = "messages") -> str | None:
    """Where tables of ``schemas`` disagree on a message field being JSON text (tagged
    ``chatdata.encoding: json``) or plain text, as ``"field 'content': JSON text in table 1,
    plain in table 0"``; None when they agree. Joining such tables (``pa.concat_tables``, Ray
    Data's batches) keeps the first table's tag for all of them, so the others would be misread:
    ``"hi"`` read as JSON fails, ``"\\"ok\\""`` read as text keeps its quotes. Looks at schemas only.

    Example:
        >>> import pyarrow as pa
        >>> tagged = pa.schema([pa.field("messages", pa.large_list(pa.struct([
        ...     pa.field("role", pa.large_string()),
        ...     pa.field("content", pa.large_string(), metadata={b"chatdata.encoding": b"json"})])))])
        >>> plain = pa.schema([pa.field("messages", pa.large_list(pa.struct([
        ...     pa.field("role", pa.large_string()), pa.field("content", pa.large_string())])))])
        >>> encoding_clash([plain, tagged])
        "field 'content': JSON text in table 1, plain in table 0"
    """
    seen: dict[str, dict[bool, int]] = {}
    for i, schema in enumerate(schemas):
        for name, tagged in _text_fields(schema, column).items():
            seen.setdefault(name, {}).setdefault(tagged, i)
            if len(seen[name]) > 1:
                return f"field {name!r}: JSON text in table {seen[name][True]}, plain in table {seen[name][False]}"
    return None


def type_clash(schemas: list, column: str = "messages") -> set:
    """The names of the message fields of ``column`` whose types in ``schemas`` do not unify
    (``int64`` in one table, ``string`` in another; a list in one, a str in another): one
    schema cannot hold them, so joining such tables exactly takes those fields as JSON text.
    Looks at schemas only.

    Example:
        >>> import pyarrow as pa
        >>> def schema(t):
        ...     return pa.schema([pa.field("messages", pa.large_list(pa.struct([("role", pa.string()), ("a", t)])))])
        >>> sorted(type_clash([schema(pa.int64()), schema(pa.string())]))
        ['a']
        >>> sorted(type_clash([schema(pa.struct([("x", pa.int64())])), schema(pa.struct([("y", pa.string())]))]))
        []
    """
    return {name for name, kinds in _field_types(schemas, column).items()
            if len(kinds) > 1 and _unified(kinds) is None}


def key_orders(table, column: str = "messages") -> dict:
    """``{(field, *path): {keys, ...}}``: for every struct inside the typed message fields of
    ``table``, the tuples of keys its values hold together, in their order (a null struct field
    is an absent key). One pass of numpy over each struct's validity bitmaps; a struct of more
    than 63 fields gives None (every order counts). What :func:`order_clash` compares.

    Example:
        >>> import pyarrow as pa
        >>> t = pa.table({"messages": [[{"role": "user", "a": {"x": 1}}, {"role": "user", "a": {"y": 2}}]]})
        >>> {field: sorted(orders) for field, orders in key_orders(t).items()}
        {('a',): [('x',), ('y',)]}
    """
    import numpy as np

    pa = require_pyarrow()
    out: dict = {}
    if column not in table.column_names:
        return out
    col = table.column(column)
    for chunk in col.chunks:
        msgs = chunk.flatten()
        for i, f in enumerate(msgs.type):
            stack = [((f.name,), msgs.field(i))]
            while stack:
                path, arr = stack.pop()
                if _is_list(arr.type):
                    stack.append((path, arr.flatten()))
                elif pa.types.is_struct(arr.type) and arr.type.num_fields:
                    names = [g.name for g in arr.type]
                    children = [arr.field(j) for j in range(len(names))]
                    valid = ~np.asarray(arr.is_null().to_numpy(zero_copy_only=False), dtype=bool)
                    if len(names) > 63:
                        out[path] = None
                    elif path not in out or out[path] is not None:
                        masks = np.zeros(len(arr), dtype=np.uint64)
                        for j, child in enumerate(children):
                            present = child.is_valid().to_numpy(zero_copy_only=False)
                            masks |= present.astype(np.uint64) << np.uint64(j)
                        found = out.setdefault(path, set())
                        for m in np.unique(masks[valid]).tolist():
                            found.add(tuple(n for j, n in enumerate(names) if m >> j & 1))
                    stack.extend(((*path, n), c) for n, c in zip(names, children))
    return out


def order_clash(orders: list, schemas: list, column: str = "messages") -> set:
    """The message fields whose values would come back with their keys reordered if tables of
    ``schemas`` (and their :func:`key_orders` ``orders``) were joined under one schema: a struct
    has one field order, and the joined struct's order (Arrow's, from the first table on) puts
    two keys that some value holds together the other way round (``{"unit", "city"}`` in one
    table, ``{"city", ...}`` first in another). Joining such tables exactly takes those fields
    as JSON text."""
    clash = set()
    for name, kinds in _field_types(schemas, column).items():
        joined = _unified(kinds) if len(kinds) > 1 else None
        if joined is None:  # one type: nothing is joined; none: type_clash names it
            continue
        for found in orders:
            for path, tuples in found.items():
                if path[0] != name:
                    continue
                order = _struct_at(joined, path[1:])
                if order is None or tuples is None or any(
                        [n for n in order if n in set(t)] != list(t) for t in tuples):
                    clash.add(name)
    return clash


def fields_to_join_as_json(schemas: list, column: str = "messages", orders: list | None = None) -> set:
    """The message fields that tables of ``schemas`` can only be joined exactly as JSON text: text
    that is JSON in some tables and plain in others (:func:`encoding_clash`), types one schema
    cannot hold (:func:`type_clash`) and, given the tables' :func:`key_orders`, keys one struct
    would reorder (:func:`order_clash`).

    Example:
        >>> import pyarrow as pa
        >>> t = pa.table({"messages": [[{"role": "user", "a": 1}]]})
        >>> fields_to_join_as_json([t.schema, t.schema], orders=[key_orders(t)] * 2)
        set()
    """
    out = json_fields(schemas, column) if encoding_clash(schemas, column) is not None else set()
    out |= type_clash(schemas, column)
    if orders is not None:
        out |= order_clash(orders, schemas, column)
    return out


def _message_struct(schema, column: str):
    """The struct type of the messages of ``schema``'s ``column`` (a list of structs), or None."""
    value = getattr(schema.field(column).type, "value_type", None) if column in schema.names else None
    return value if value is not None and require_pyarrow().types.is_struct(value) else None


def _field_types(schemas: list, column: str) -> dict:
    """``{message field: [its distinct non-null types across schemas]}`` (``role`` and the null-keys
    list left out)."""
    pa = require_pyarrow()
    types: dict[str, list] = {}
    for schema in schemas:
        for f in _message_struct(schema, column) or ():
            if f.name not in ("role", NULL_KEYS) and not pa.types.is_null(f.type):
                seen = types.setdefault(f.name, [])
                if f.type not in seen:
                    seen.append(f.type)
    return types


def _unified(kinds: list):
    """The one type Arrow's permissive promotion gives ``kinds``, or None when they do not unify."""
    pa = require_pyarrow()
    try:
        return pa.unify_schemas([pa.schema([pa.field("v", t)]) for t in kinds],
                                promote_options="permissive").field("v").type
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        return None


def _struct_at(t, path):
    """The field names of the struct at ``path`` (struct field names; lists are passed through)
    inside the type ``t``, or None."""
    pa = require_pyarrow()
    for step in (*path, None):
        while _is_list(t):
            t = t.value_type
        if not pa.types.is_struct(t):
            return None
        if step is None:
            return [f.name for f in t]
        i = t.get_field_index(step)
        if i < 0:
            return None
        t = t.field(i).type
    return None


def json_fields(schemas: list, column: str = "messages") -> set:
    """The names of the message fields that are JSON text (tagged) in any of ``schemas``."""
    return {name for schema in schemas for name, tagged in _text_fields(schema, column).items() if tagged}


def _text_fields(schema, column: str) -> dict:
    """``{name: tagged as JSON}`` of the text fields of the messages of ``schema``'s ``column``."""
    return {f.name: is_json_type(f.type) or (f.metadata or {}).get(ENCODING_KEY) is not None
            for f in _message_struct(schema, column) or () if is_json_type(f.type) or _as_text(f.type) is not None}
