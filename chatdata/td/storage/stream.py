"""Streaming writer: append chunks of a ragged stack of columns straight to disk.

:class:`StreamWriter` builds, chunk by chunk, the same folder that ``obj.memmap(path)`` writes
for a ragged stack (optionally wrapped in a tensorclass such as ``History``), in the format of
``docs/format.md``, without ever holding more than one chunk in memory:

* every string column is two files, ``<key>.bytes.memmap`` and ``<key>.offsets.memmap``, to
  which each chunk's packed bytes and (shifted) offsets are appended;
* every tensor column (e.g. ``_flags`` int8, ``input_ids``) is one raw file, appended to;
* the item (conversation) offsets go to ``_offsets.memmap``;
* a column that holds one constant value (``NonTensorData``) in every chunk stays a ``value``
  entry; once chunks disagree, it becomes a string column (earlier rows written out then);
* a string column's kind (``str`` or ``json``) is the one its values need; a chunk of no values
  keeps its column's kind, so a JSON column that got no value is still saved as JSON;
* ``close()`` writes the ``meta.json`` files (tensorclass -> ``_storage`` ragged -> ``_values``
  TensorDict) and swaps the temporary sibling folder into place atomically. On an error (or
  ``KeyboardInterrupt``) inside a ``with`` block, or on :meth:`abort`, the temporary folder is
  removed and the destination is untouched.

Example:
    >>> import tempfile
    >>> from chatdata.td import TensorDict, RaggedTensorDict, load_memmap
    >>> path = tempfile.mkdtemp() + "/ds"
    >>> with StreamWriter(path) as w:
    ...     for lo in (0, 2):
    ...         vals = TensorDict({"x": torch.arange(lo, lo + 3), "s": ["a", "b", "c"]}, [3])
    ...         w.append(RaggedTensorDict(vals, torch.tensor([0, 1, 3])))
    >>> r = load_memmap(path)
    >>> r.batch_size, r.values["x"].tolist(), r.offsets.tolist()
    (torch.Size([4, -1]), [0, 1, 2, 2, 3, 4], [0, 1, 3, 4, 6])
"""
from __future__ import annotations

import json
from array import array
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import torch

from ..core import RaggedTensorDict, key_to_filename
from ..nontensor import NonTensorData, NonTensorStack, pack_strings, to_json, to_json_texts
from .checksum import HashingFile, record, sorted_checksums
from .dtypes import dtype_name, raw_bytes
from .fsops import durable_replace, resolve_target
from .integrity import FORMAT_NAME, FORMAT_VERSION
from .json_values import _entry_value
from ..tensorclass.registry import registered_tensorclass
from .tempdirs import WriterTemp, remove_orphans
from .typed_copies import column_arrays, write_copy

__all__ = ["StreamWriter"]

_MISSING = object()


def _raw(t) -> memoryview:
    if isinstance(t, (bytes, bytearray, memoryview)):
        return memoryview(t)
    return raw_bytes(t)


def _stack_values(stack: NonTensorStack) -> list:
    """All values of a 1-D string stack, in order (no copy for a plain list-backed column)."""
    pool, index = stack._pool, stack._index_view.reshape(-1)
    lst = pool._list
    if lst is not None and len(lst) == index.numel() and (
        index.numel() == 0 or (int(index[0]) == 0 and int(index[-1]) == len(lst) - 1
                               and bool((index[1:] - index[:-1] == 1).all()))
    ):
        return lst
    return pool.take(index.tolist())


def _pack(values: list, kind: str | None):
    """(bytes, offsets, kind) of ``values``: "str" if all are strings (and kind allows)."""
    if kind != "json":
        try:
            joined = "".join(values)  # a TypeError here means: not all strings
        except TypeError:
            joined = None
        if joined is not None:
            if joined.isascii():
                raw, lengths = joined.encode("ascii"), array("q", map(len, values))
            else:
                enc = [v.encode("utf-8", "surrogatepass") for v in values]
                raw, lengths = b"".join(enc), array("q", map(len, enc))
            del joined
            off = torch.zeros(len(values) + 1, dtype=torch.int64)
            if lengths:
                torch.cumsum(torch.frombuffer(lengths, dtype=torch.int64), 0, out=off[1:])
            return raw, off, "str"
    data, off = pack_strings(to_json_texts(values))
    return data, off, "json"


class _Column:
    """One column being appended: constant, strings or tensor."""

    def __init__(self, key: str, folder: Path, write=None):
        self.write = write or (lambda f, buf: f.write(buf))  # may run on the writer thread
        self.key = key
        self.name = key_to_filename(key)
        self.folder = folder
        self.state = None  # "const" | "strings" | "tensor"
        self.const = _MISSING
        self.rows = 0  # rows written (or covered by the constant)
        self.kind = None
        self.nbytes = 0
        self.dtype = None
        self.inner = None
        self._fdata = self._foff = None

    # files ------------------------------------------------------------------------------
    def _open_strings(self, kind: str) -> None:
        self.state, self.kind = "strings", kind
        self._fdata = HashingFile.open(self.folder / f"{self.name}.bytes.memmap")
        self._foff = HashingFile.open(self.folder / f"{self.name}.offsets.memmap")
        self._foff.write(np.zeros(1, dtype=np.int64).tobytes())

    def _write_strings(self, data: torch.Tensor, off: torch.Tensor, n: int) -> None:
        self.write(self._fdata, _raw(data))
        shifted = off[1:] + self.nbytes if self.nbytes else off[1:]
        self.write(self._foff, _raw(shifted))
        self.nbytes += int(off[-1])
        self.rows += n

    def _to_json_kind(self) -> None:
        """Re-encode the strings written so far as JSON text (a later chunk holds non-strings)."""
        self._fdata.close()
        self._foff.close()
        dpath = self.folder / f"{self.name}.bytes.memmap"
        opath = self.folder / f"{self.name}.offsets.memmap"
        old_off = np.fromfile(opath, dtype=np.int64)
        old_data = np.memmap(dpath, dtype=np.uint8, mode="r") if self.nbytes else np.zeros(0, np.uint8)
        tmp_d, tmp_o = dpath.with_suffix(".json-tmp"), opath.with_suffix(".json-tmp")
        write, self.write = self.write, lambda f, buf: f.write(buf)  # synchronous while rewriting
        rows, self.rows, self.nbytes = self.rows, 0, 0
        self._fdata, self._foff = HashingFile.open(tmp_d), HashingFile.open(tmp_o)
        self._foff.write(np.zeros(1, dtype=np.int64).tobytes())
        step = 65536
        for a in range(0, rows, step):
            b = min(rows, a + step)
            mv = memoryview(old_data)
            vals = [json.dumps(str(mv[old_off[i]:old_off[i + 1]], "utf-8", "surrogatepass"), ensure_ascii=False)
                    for i in range(a, b)]
            data, off = pack_strings(vals)
            self._write_strings(data, off, b - a)
        del old_data
        self._fdata.close()
        self._foff.close()
        tmp_d.replace(dpath)
        tmp_o.replace(opath)
        # go on appending (and hashing) after the rewritten content
        self._fdata.file, self._foff.file = open(dpath, "ab"), open(opath, "ab")
        self.kind = "json"
        self.write = write

    def _materialize_const(self) -> None:
        """Turn the constant column into a string column holding it for every row so far."""
        value, rows = self.const, self.rows
        self.rows = 0
        kind = "str" if type(value) is str else "json"
        self._open_strings(kind)
        text = value if kind == "str" else to_json(value)
        step = 65536
        for a in range(0, rows, step):
            k = min(rows, a + step) - a
            data, off = pack_strings([text] * k)
            self._write_strings(data, off, k)
        self.const = _MISSING

    # appending --------------------------------------------------------------------------
    def append(self, value, n: int) -> None:
        where = f"column {self.key!r}"
        if isinstance(value, torch.Tensor):
            if self.state not in (None, "tensor"):
                raise TypeError(f"{where}: a tensor chunk after non-tensor chunks")
            if value.shape[:1] != (n,):
                raise ValueError(f"{where}: {tuple(value.shape)} does not have {n} rows")
            if self.state is None:
                self.state, self.dtype, self.inner = "tensor", value.dtype, tuple(value.shape[1:])
                dtype_name(value.dtype)
                self._fdata = HashingFile.open(self.folder / f"{self.name}.memmap")
            elif value.dtype != self.dtype or tuple(value.shape[1:]) != self.inner:
                raise TypeError(f"{where}: chunk of {value.dtype} {tuple(value.shape[1:])} after "
                                f"{self.dtype} {self.inner}")
            self.write(self._fdata, _raw(value))
            self.rows += n
            return
        if self.state == "tensor":
            raise TypeError(f"{where}: a non-tensor chunk after tensor chunks")
        if isinstance(value, NonTensorData):
            v = value.data
            if self.state is None or (self.state == "const" and _same(self.const, v)):
                if self.state is None:  # kept as a meta.json value: the save's checks, now, not at close
                    _entry_value(v, where)
                self.state, self.const = "const", v
                self.rows += n
                return
            values = [v] * n
        elif isinstance(value, NonTensorStack) and value._pool.is_packed and value.batch_dims == 1:
            # a packed column (e.g. from Arrow / another dataset): its bytes are written as they are
            data, off, kind = value.packed_column()
            if self.state != "const" and not (kind == "str" and self.kind == "json" and self.rows):
                if off.numel() != n + 1:
                    raise ValueError(f"{where}: {off.numel() - 1} values for {n} rows")
                a, b = int(off[0]), int(off[-1])
                self._set_kind(kind, n)
                self._write_strings(data[a:b], off - a if a else off, n)
                return
            values = _stack_values(value)
        elif isinstance(value, NonTensorStack):
            values = _stack_values(value)
            if len(values) != n:
                raise ValueError(f"{where}: {len(values)} values for {n} rows")
        elif isinstance(value, list):
            values = value
        else:
            raise TypeError(f"{where}: cannot stream a {type(value).__name__}")
        if self.state == "const":
            self._materialize_const()
        data, off, kind = _pack(values, self.kind if self.rows else None)
        if not values and isinstance(value, NonTensorStack):
            kind = value.packed_column()[2]  # no value to tell: the column's own kind (json stays json)
        self._set_kind(kind, n)
        self._write_strings(data, off, n)

    def _set_kind(self, kind: str, n: int) -> None:
        """Open the string files, or change their kind for a chunk of ``kind`` with ``n`` values.
        While no value is written the kind is free: a chunk of values decides it, a chunk of none
        can only make it "json" (an empty JSON column stays one on disk: a History needs
        ``tool_calls`` to be JSON also when no message has one). Then a chunk of JSON values turns
        a str column into JSON (the strings so far rewritten as JSON text); an empty chunk changes
        nothing."""
        if self.state is None:
            self._open_strings(kind)
        elif not self.rows:
            if n or kind == "json":
                self.kind = kind
        elif n and kind == "json" and self.kind == "str":
            self._to_json_kind()

    def close_files(self) -> None:
        """Close the files, keeping their checksums for :meth:`record_checksums`."""
        self._sums = {}
        for f in (self._fdata, self._foff):
            if f is not None:
                f.close()
                self._sums[Path(f.file.name).name] = f.checksum()
        self._fdata = self._foff = None

    def record_checksums(self, sums: dict) -> None:
        for name, value in getattr(self, "_sums", {}).items():
            record(sums, name, value)

    def entry(self, total: int) -> dict:
        if self.rows != total:
            raise RuntimeError(f"column {self.key!r} has {self.rows} rows, expected {total}")
        if self.state in (None, "const"):
            return {"kind": "value", "batch_size": [total],
                    "value": None if self.const is _MISSING else self.const}
        if self.state == "tensor":
            return {"kind": "tensor", "dtype": dtype_name(self.dtype), "shape": [total, *self.inner],
                    "file": f"{self.name}.memmap"}
        return {"kind": "strings", "encoding": self.kind, "shape": [total], "nbytes": self.nbytes,
                "data": f"{self.name}.bytes.memmap", "offsets": f"{self.name}.offsets.memmap"}


def _same(a, b) -> bool:
    return type(a) is type(b) and a == b


def _meta(folder: Path, meta: dict, sums: dict) -> None:
    """Write ``meta.json`` with the same fields, in the same order, as ``persist.save``."""
    with open(folder / "meta.json", "w", encoding="utf-8") as f:
        json.dump({"format": FORMAT_NAME, "version": FORMAT_VERSION, **meta, "checksums": sorted_checksums(sums)},
                  f, ensure_ascii=False, allow_nan=True)


class StreamWriter:
    """Append-only writer of a ragged stack of columns; see the module docstring.

    Args:
        path: the destination folder (replaced atomically at :meth:`close`).
        tensorclass: a tensorclass (e.g. ``History``) or its ``module.QualName`` to wrap the
            ragged stack in, as ``History.memmap`` does; ``None`` saves the bare ragged stack.
        columns: column names in the order ``meta.json`` should list them (others follow in
            order of appearance); they are also the columns of an empty dataset.
        durable: fsync the files and folders before the final rename and the parent folder
            after it, so a dataset that :meth:`close` returned survives a power loss.
    """

    def __init__(self, path, *, tensorclass=None, columns=(), durable: bool = False):
        self.path = resolve_target(path)  # through a link: replace the folder it points to
        if self.path.exists() and not self.path.is_dir():
            raise FileExistsError(f"{self.path} exists and is not a folder")
        cls = tensorclass if isinstance(tensorclass, type) else registered_tensorclass(tensorclass)
        # JSON columns of a class that asks for them get typed copies at close (typed_copies.py)
        self.typed = frozenset(getattr(cls, "_typed_json_copies", ()))
        if isinstance(tensorclass, type):
            tensorclass = f"{tensorclass.__module__}.{tensorclass.__qualname__}"
        self.tensorclass = tensorclass
        self.durable = durable
        self._made = [p for p in self.path.parents if not p.exists()]  # abort() removes them if left empty
        self.path.parent.mkdir(parents=True, exist_ok=True)
        remove_orphans(self.path)  # temp folders of earlier writers to this path that died
        self._temp = WriterTemp(self.path)  # short, locked temp folder (tempdirs.py)
        try:  # e.g. Ctrl-C right now (even as the folder appears): no temporary folder is left behind
            self._temp.__enter__()
            self.tmp = self._temp.data
            self.values_dir = self.tmp / "_storage" / "_values" if tensorclass else self.tmp / "_values"
            self.values_dir.mkdir(parents=True)
            self.ragged_dir = self.values_dir.parent
            self._offsets = HashingFile.open(self.ragged_dir / "_offsets.memmap")
            self._offsets.write(np.zeros(1, dtype=np.int64).tobytes())
            # file writes run on one background thread (they release the GIL), overlapping the
            # caller's parsing of the next chunk; at most one chunk's writes are in flight
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="chatdata-stream")
            self._pending: list = []
            self.columns: dict[str, _Column] = {k: _Column(k, self.values_dir, self._submit) for k in columns}
            self.items = 0  # conversations
            self.rows = 0  # messages
        except BaseException:
            offsets = getattr(self, "_offsets", None)
            if offsets is not None and not offsets.closed:
                offsets.close()
            self._temp.__exit__(None, None, None)
            self._remove_made_folders()
            raise
        self.closed = False

    def __enter__(self):
        return self

    def _submit(self, f, buf) -> None:
        self._pending.append(self._pool.submit(f.write, buf))

    def _drain(self, raise_errors: bool = True) -> None:
        pending, self._pending = self._pending, []
        for fut in pending:
            try:
                fut.result()
            except BaseException:
                if raise_errors:
                    raise

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.close()
        else:
            self.abort()
        return False

    def append(self, chunk) -> None:
        """Append a ragged chunk: a ``RaggedTensorDict`` over a flat TensorDict of columns, or
        a tensorclass (``History``) holding one."""
        storage = getattr(chunk, "_storage", chunk)
        if not isinstance(storage, RaggedTensorDict):
            raise TypeError(f"StreamWriter.append takes a ragged stack (batch (n, -1)), got {type(chunk).__name__}")
        self._drain()
        values, offsets = storage.values, storage.offsets
        entries = getattr(values, "_tensordict", None)
        if entries is None or values.batch_dims != 1:
            raise TypeError("StreamWriter.append: the ragged values must be a flat TensorDict of columns")
        n = values.batch_size[0]
        if self.items and set(entries) != set(self.columns):
            raise ValueError(f"chunk columns {sorted(entries)} differ from earlier chunks' {sorted(self.columns)}")
        for key, value in entries.items():
            col = self.columns.get(key)
            if col is None:
                col = self.columns[key] = _Column(key, self.values_dir, self._submit)
            col.append(value, n)
        for key in self.columns.keys() - entries.keys():
            if self.items == 0 and n == 0:
                continue
            raise ValueError(f"chunk lacks column {key!r}")
        off = offsets.to(torch.int64)
        self._submit(self._offsets, _raw(off[1:] + self.rows if self.rows else off[1:]))
        self.items += off.numel() - 1
        self.rows += n

    def close(self) -> Path:
        """Write the ``meta.json`` files and move the folder into place; returns its path."""
        if self.closed:
            return self.path
        try:
            self._drain()
            self._pool.shutdown()
            for col in self.columns.values():
                col.close_files()
            self._offsets.close()
            entries = {k: c.entry(self.rows) for k, c in self.columns.items()}
            value_sums = {}
            for c in self.columns.values():
                c.record_checksums(value_sums)
            for key, m in entries.items():
                if key in self.typed and m["kind"] == "strings" and m["encoding"] == "json":
                    data_path, off_path = self.values_dir / m["data"], self.values_dir / m["offsets"]
                    copy = write_copy(*column_arrays(data_path, off_path), self.values_dir, m["data"], value_sums,
                                      where=f"column {key!r}")
                    if copy is not None:
                        m["typed"] = copy
            _meta(self.values_dir, {"_type": "TensorDict", "batch_size": [self.rows], "device": None,
                                    "entries": entries}, value_sums)
            bs = [self.items, -1]
            ragged_sums = {}
            record(ragged_sums, "_offsets.memmap", self._offsets.checksum())
            _meta(self.ragged_dir, {
                "_type": "ragged", "batch_size": bs, "device": None,
                "offsets": {"kind": "tensor", "dtype": "int64", "shape": [self.items + 1], "file": "_offsets.memmap"},
                "values": {"kind": "collection", "dir": "_values"}}, ragged_sums)
            if self.tensorclass:
                _meta(self.tmp, {"_type": "tensorclass", "class": self.tensorclass, "batch_size": bs,
                                 "device": None, "storage": "_storage"}, {})
            durable_replace(self.tmp, self.path, self.durable)
        except BaseException:
            self.abort()
            raise
        self._temp.__exit__(None, None, None)
        self.closed = True
        return self.path

    def abort(self) -> None:
        """Drop everything written; the destination is left as it was."""
        self._drain(raise_errors=False)
        self._pool.shutdown()
        for col in self.columns.values():
            col.close_files()
        if not self._offsets.closed:
            self._offsets.close()
        self._temp.__exit__(None, None, None)
        self.closed = True
        self._remove_made_folders()

    def _remove_made_folders(self) -> None:
        for folder in self._made:  # the output's parent folders this writer made, innermost first
            try:
                folder.rmdir()
            except OSError:  # not empty (something else wrote there) or already gone
                break
