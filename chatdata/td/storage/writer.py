"""The writer of the on-disk format: one collection tree -> one folder, atomically.

Every collection class is written here: a TensorDict's entries (tensors, string columns,
values, sub-folders), a ragged stack's offsets and values, a tensorclass's storage, a
NonTensorStack saved on its own. Tensor files may be written by a thread pool; each folder's
``meta.json`` comes last, with its files' checksums. :func:`save` writes into a temporary
sibling folder and swaps it into place (``docs/format.md``, section 8). The format itself is
described in :mod:`chatdata.td.storage.persist`; the reader is :mod:`.reader`.

Example:
    >>> import tempfile
    >>> path = save(TensorDict({"s": ["x", "y"]}, [2]), tempfile.mkdtemp() + "/ds")
    >>> sorted(p.name for p in path.iterdir())
    ['meta.json', 's.bytes.memmap', 's.offsets.memmap']
"""
from __future__ import annotations

import json
from array import array
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

from ..core import RaggedTensorDict, TensorDict, key_to_filename
from ..nontensor import NonTensorData, NonTensorStack, to_json_texts
from ..tensorclass import TensorClass
from . import checksum as _checksum, typed_copies as _typed
from .dtypes import dtype_name, raw_bytes
from .fsops import FormatError, atomic_replace, check_overwritable, fsync_dir, fsync_tree, resolve_target
from .integrity import FORMAT_NAME, FORMAT_VERSION
from .json_values import (_SurrogateAt, _check_key_text, _check_surrogates, _entry_value, _first_surrogate,
                          _has_surrogate, _surrogate_message)
from .nested_persist import nested_meta, nested_parts
from .tempdirs import WriterTemp, remove_orphans

__all__ = ["save"]


# -- writing ------------------------------------------------------------------------------
class _Writer:
    """Writes one collection tree; tensor files may be written by a thread pool. Each folder's
    ``meta.json`` is written last, once its files' checksums are known (``finish``)."""

    def __init__(self, num_threads: int = 0, like: bool = False):
        self.jobs = []
        self.metas = []  # (folder, meta): written by finish() after the data files
        self.num_threads = num_threads
        self.like = like  # memmap_like: allocate files of the right size, copy nothing
        self.typed = frozenset()  # inside a class that asks for typed copies: the JSON columns it names

    def tensor(self, t: torch.Tensor, path: Path, sums: dict, structure: bool = False) -> dict:
        """Describe ``t`` and queue its file; ``structure`` (a ragged stack's offsets) is written
        even by ``memmap_like``: it is the shape of the collection, not its data."""
        t = t.detach()
        if t.device.type != "cpu" and not (self.like and t.device.type == "meta"):  # memmap_like needs no data
            t = t.cpu()
        meta = {"kind": "tensor", "dtype": dtype_name(t.dtype), "shape": list(t.shape), "file": path.name}
        if self.like and not structure:  # no checksum: memmap_like files are meant to be filled in place later
            self.jobs.append(lambda: _allocate(path, t.numel() * t.element_size()))
        else:
            self.jobs.append(lambda: _checksum.record(sums, path.name, _write_tensor(t, path)))
        return meta

    def nested(self, t: torch.Tensor, folder: Path, name: str, sums: dict) -> dict:
        flat, sizes, layout = nested_parts(t)  # components concatenated + their shapes
        data_path, sizes_path = folder / f"{name}.memmap", folder / f"{name}.sizes.memmap"
        self.tensor(flat, data_path, sums)
        self.jobs.append(lambda: _checksum.record(sums, sizes_path.name, _write_tensor(sizes, sizes_path)))
        return nested_meta(t, data_path.name, sizes_path.name, layout)

    def run(self) -> None:
        if self.num_threads and len(self.jobs) > 1:
            with ThreadPoolExecutor(self.num_threads) as ex:
                list(ex.map(lambda f: f(), self.jobs))
        else:
            for job in self.jobs:
                job()
        self.finish()

    def finish(self) -> None:
        for folder, meta in self.metas:
            meta["checksums"] = _checksum.sorted_checksums(meta["checksums"])
            _write_meta(folder, meta)


def _write_meta(folder: Path, meta: dict) -> None:
    with open(folder / "meta.json", "w", encoding="utf-8") as f:
        json.dump(meta, f, ensure_ascii=False, allow_nan=True)


def _allocate(path: Path, nbytes: int) -> None:
    with open(path, "wb") as f:
        f.truncate(nbytes)


def _write_tensor(t: torch.Tensor, path: Path) -> str | None:
    """Write the tensor's bytes; returns their checksum (hashed from memory, not re-read)."""
    with _checksum.HashingFile.open(path) as f:
        if t.numel():
            f.write(raw_bytes(t))
        return f.checksum()


def _write_collection(obj, folder: Path, w: _Writer) -> dict:
    folder.mkdir(parents=True, exist_ok=True)
    meta = {"format": FORMAT_NAME, "version": FORMAT_VERSION}
    sums = {}  # file name -> checksum, filled as the files are written
    if isinstance(obj, TensorClass):
        cls = type(obj)
        meta.update({"_type": "tensorclass", "class": f"{cls.__module__}.{cls.__qualname__}"})
        outer = w.typed
        if not w.like:
            w.typed = outer | frozenset(getattr(cls, "_typed_json_copies", ()))
        try:
            inner = _write_collection(obj._storage, folder / "_storage", w)
        finally:
            w.typed = outer
        meta["batch_size"] = inner["batch_size"]
        meta["device"] = inner["device"]
        meta["storage"] = "_storage"
    elif isinstance(obj, RaggedTensorDict):
        meta.update({"_type": "ragged", "batch_size": list(obj.batch_size), "device": _dev(obj.device)})
        meta["offsets"] = w.tensor(obj.offsets, folder / "_offsets.memmap", sums, structure=True)
        meta["values"] = _collection_or_leaf(obj.values, folder, "_values", w, sums)
    elif isinstance(obj, TensorDict):
        meta.update({"_type": "TensorDict", "batch_size": list(obj.batch_size), "device": _dev(obj.device)})
        entries = {}
        for key, value in obj._tensordict.items():
            _check_key_text(key)
            entries[key] = _collection_or_leaf(value, folder, key_to_filename(key), w, sums, key)
        meta["entries"] = entries
    elif isinstance(obj, NonTensorStack):  # a stack saved on its own: one string column
        meta.update({"_type": "stack", "batch_size": list(obj.batch_size), "device": _dev(obj.device)})
        meta["values"] = _write_strings(obj, folder, "_values", "the stack", sums)
    else:
        raise TypeError(f"cannot save a {type(obj).__name__}")
    meta["checksums"] = sums
    w.metas.append((folder, meta))
    return meta


def _dev(device):
    return None if device is None else str(device)


def _collection_or_leaf(value, folder: Path, name: str, w: _Writer, sums: dict, key=None) -> dict:
    where = f"entry {key if key is not None else name!r}"
    if isinstance(value, torch.Tensor):
        if value.is_nested:
            return w.nested(value, folder, name, sums)
        if value.layout != torch.strided:
            raise TypeError(f"cannot save {where}: it is a {value.layout} tensor and files hold dense tensors; "
                            "convert it with .to_dense() first")
        if value.device.type == "meta" and not w.like:
            raise ValueError(f"cannot save {where}: it is on the meta device and holds no data; use memmap_like() "
                             "to allocate files of its shape, or give it real data first")
        return w.tensor(value, folder / f"{name}.memmap", sums)
    if isinstance(value, NonTensorData):
        return {"kind": "value", "batch_size": list(value.batch_size), "value": _entry_value(value.data, where)}
    if isinstance(value, NonTensorStack):
        return _write_strings(value, folder, name, where, sums, typed=key in w.typed)
    _write_collection(value, folder / name, w)
    return {"kind": "collection", "dir": name}


def _write_strings(stack: NonTensorStack, folder: Path, name: str, where: str, sums: dict,
                   typed: bool = False) -> dict:
    """Write a string column (and, with ``typed``, its typed copy when it holds JSON values:
    :mod:`.typed_copies`); returns its ``meta.json`` entry."""
    pool = stack._pool
    ids = stack._ids() if stack._idx is None else None
    data_path, off_path = folder / f"{name}.bytes.memmap", folder / f"{name}.offsets.memmap"
    try:
        if ids is not None and ids == range(len(pool)) and not pool.is_packed:
            # a freshly built column: stream its values to the file, no packed copy in memory
            kind, nbytes = _write_values(pool._list, data_path, off_path, sums)
        else:
            # strings added in memory (a list pool, or values appended to a loaded one) must be
            # valid UTF-8 on disk: packing keeps lone surrogates, the format does not
            _check_surrogates(pool._list if pool._list is not None else pool._extras,
                              pool._list is not None and ids is not None and ids == range(len(pool)))
            if ids is not None and ids == range(len(pool)):  # the stack is its pool, in order
                packed = pool.packed()  # a packed pool (e.g. a loaded column) is written as it is
            else:
                packed = pool.packed(stack._index_view.reshape(-1))
            written = (_write_tensor(packed.data, data_path), _write_tensor(packed.offsets, off_path))
            if packed is pool and pool._recorded is not None:  # a loaded column, whole: its bytes as recorded?
                _check_recorded(pool._recorded, written)
            _checksum.record(sums, data_path.name, written[0])
            _checksum.record(sums, off_path.name, written[1])
            kind, nbytes = packed.kind, int(packed.offsets[-1]) if packed.offsets.numel() else 0
    except TypeError as err:
        raise TypeError(f"cannot save {where}: {err}") from None
    except _SurrogateAt as err:
        index = err.index if err.index is not None else _first_surrogate(stack)
        what = "a value written into it in memory" if index is None else f"item {index}"
        raise ValueError(f"cannot save {where}: {what} {err.message}") from None
    entry = {
        "kind": "strings",
        "encoding": kind,
        "shape": list(stack.batch_size),
        "nbytes": nbytes,
        "data": data_path.name,
        "offsets": off_path.name,
    }
    if typed and kind == "json":
        whole = ids is not None and ids == range(len(pool)) and pool.is_packed and not pool._extras
        copy = _typed.write_copy(*_typed.column_arrays(data_path, off_path), folder, data_path.name, sums,
                                 reuse=getattr(pool, "_typed", None) if whole else None, where=where)
        if copy is not None:
            entry["typed"] = copy
    return entry


def _check_recorded(recorded, written) -> None:
    """A loaded string column is never written in place (it is mapped copy-on-write), so saving
    it whole must write the bytes its folder recorded; when it does not, the file changed after
    that save or is damaged, and the save stops rather than record the damage under a new,
    matching checksum."""
    for (path, want), got in zip(recorded, written):
        if want is not None and got is not None and want != got:
            raise FormatError(f"{path}: its bytes do not match the checksum its folder recorded ({want}, now "
                              f"{got}): the file changed after it was saved, or is damaged. Not saved again; "
                              "`chatdata verify` checks the folder")


def _write_values(values: list, data_path: Path, off_path: Path, sums: dict) -> tuple[str, int]:
    """Write values as a packed column (UTF-8 strings, else JSON texts) straight to the files."""
    if all(type(v) is str for v in values):
        joined = "".join(values)
        if joined.isascii():  # one buffer: one write and one hash, no encode call per string
            return _write_ascii(joined, values, data_path, off_path, sums)
        del joined
    try:  # strict UTF-8: a lone surrogate is refused (docs/format.md, "Integrity")
        if all(type(v) is str for v in values):
            kind, encoded = "str", [v.encode("utf-8") for v in values]
        else:
            kind, encoded = "json", [t.encode("utf-8") for t in to_json_texts(values)]
    except UnicodeEncodeError as err:
        bad = next(i for i, v in enumerate(values) if _has_surrogate(v))
        raise _SurrogateAt(bad, _surrogate_message(err)) from None
    offsets = torch.zeros(len(encoded) + 1, dtype=torch.int64)
    if encoded:
        torch.cumsum(torch.frombuffer(array("q", map(len, encoded)), dtype=torch.int64), 0, out=offsets[1:])
    with _checksum.HashingFile.open(data_path) as f:
        step = 4096  # write (and hash) a few hundred KB at a time, not one call per string
        for a in range(0, len(encoded), step):
            f.write(b"".join(encoded[a:a + step]))
        _checksum.record(sums, data_path.name, f.checksum())
    _checksum.record(sums, off_path.name, _write_tensor(offsets, off_path))
    return kind, int(offsets[-1])


def _write_ascii(joined: str, values: list, data_path: Path, off_path: Path, sums: dict) -> tuple[str, int]:
    raw = joined.encode("ascii")
    offsets = torch.zeros(len(values) + 1, dtype=torch.int64)
    if values:
        torch.cumsum(torch.frombuffer(array("q", map(len, values)), dtype=torch.int64), 0, out=offsets[1:])
    with _checksum.HashingFile.open(data_path) as f:
        f.write(raw)
        _checksum.record(sums, data_path.name, f.checksum())
    _checksum.record(sums, off_path.name, _write_tensor(offsets, off_path))
    return "str", len(raw)


def save(obj, prefix, *, num_threads: int = 0, like: bool = False, existsok: bool = True,
         durable: bool = False) -> Path:
    """Write ``obj`` to the folder ``prefix`` atomically; returns the folder's path.

    The tree is written into a temporary sibling folder, then swapped into place, so a crash
    leaves either the old folder or the new one, whole. See :func:`save_and_load`. Every data
    file's checksum goes into its folder's ``meta.json``. ``durable=True`` also survives a power
    loss: the files and folders are fsynced before the rename, and the parent folder after it.

    Example:
        >>> import tempfile
        >>> save(TensorDict({"a": torch.zeros(2)}, [2]), tempfile.mkdtemp() + "/ds").name
        'ds'
    """
    return _save(obj, prefix, num_threads=num_threads, like=like, existsok=existsok, durable=durable)[0]


# -- the save protocol (issue 17 / 15): target checks, locked temp folder, orphans, swap ----
def _save(obj, prefix, *, num_threads: int, like: bool, existsok: bool, after_write=None, durable: bool = False):
    """Write ``obj`` to ``prefix`` atomically; returns ``(prefix, after_write(folder, prefix))``
    (``prefix`` resolved), where ``after_write`` (when given) receives the written temporary
    folder before it is swapped in: the reader loads it back from there
    (``persist.save_and_load``), write-through takes its identity (``writethrough.write_stack``)."""
    prefix = resolve_target(prefix)  # a link to a folder: replace the folder it points to
    if prefix.is_dir() and not existsok and any(prefix.iterdir()):
        raise FileExistsError(f"{prefix} already holds data; pass existsok=True to overwrite it")
    check_overwritable(prefix)  # never delete files that are not a dataset's own
    prefix.parent.mkdir(parents=True, exist_ok=True)
    remove_orphans(prefix)  # temp folders of earlier saves to prefix whose writer died
    result = None
    with WriterTemp(prefix) as tmp:
        w = _Writer(num_threads, like)
        _write_collection(obj, tmp.data, w)
        w.run()
        if after_write is not None:
            result = after_write(tmp.data, prefix)
        if durable:
            fsync_tree(tmp.data)
        atomic_replace(tmp.data, prefix)
        if durable:
            fsync_dir(prefix.parent)
    return prefix, result
