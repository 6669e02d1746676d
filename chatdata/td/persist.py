"""The on-disk format: one writer and one reader for every collection class.

A saved collection is a folder holding ``meta.json`` and raw little-endian, C-order files.
``meta.json`` keeps the class's own fields (``_type``, ``batch_size``, ...) apart from its
``entries``, so no user key can collide with them. Entries are:

- ``tensor``: ``<key>.memmap`` with ``dtype`` and ``shape`` in the JSON;
- ``strings``: a column: ``<key>.bytes.memmap`` (UTF-8, or JSON text for other values) and
  ``<key>.offsets.memmap`` (int64, n+1) with the stack's ``shape``: two files, however many;
- ``value``: one JSON value for the whole batch (NonTensorData);
- ``collection``: a sub-folder ``<key>/`` with its own ``meta.json`` (nested TensorDict,
  tensorclass, ragged stack), so a sub-folder loads on its own.

Keys become file names through :func:`~chatdata.td.core.keys.key_to_filename` only, so no key
reaches outside the folder. Saves write a temporary sibling folder and swap it into place
atomically. Loading never unpickles or imports anything, maps files lazily and validates sizes.
``docs/format.md`` is the full specification.

Example:
    >>> import tempfile
    >>> td = TensorDict({"a": torch.zeros(3), "s": ["x", "y", "z"]}, [3])
    >>> path = tempfile.mkdtemp()
    >>> _ = save(td, path)
    >>> load(path)["s"].tolist()
    ['x', 'y', 'z']
"""
from __future__ import annotations

import json
import os
from array import array
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

from . import checksum as _checksum
from .folder import Folder
from .fsops import FormatError, atomic_replace, check_overwritable, fsync_dir, fsync_tree, resolve_target
from .integrity import LoadedRagged, check_offsets, check_version, parse_meta
from .tempdirs import WriterTemp, remove_orphans
from .nested_persist import load_nested, nested_meta, nested_parts
from .writethrough import link_value
from .json_values import _SurrogateAt, _check_key_text, _check_surrogates, _entry_value, _first_surrogate, _has_surrogate, _surrogate_message  # noqa: F401
from .core import key_to_filename
from .memmap import MemoryMappedTensor, map_file
from .nontensor import NonTensorData, NonTensorStack
from .nontensor import Pool, to_json
from .core import RaggedTensorDict

__all__ = ["save", "save_and_load", "load", "FormatError", "FORMAT_NAME", "FORMAT_VERSION"]

FORMAT_NAME = "chatdata"
FORMAT_VERSION = 1

from .dtypes import dtype_name, parse_dtype  # noqa: E402  (re-exported: stream, verify)

if sys.byteorder != "little":  # pragma: no cover - every supported platform is little-endian
    raise ImportError("chatdata's on-disk format is little-endian; big-endian hosts are not supported")


# -- writing ------------------------------------------------------------------------------
class _Writer:
    """Writes one collection tree; tensor files may be written by a thread pool. Each folder's
    ``meta.json`` is written last, once its files' checksums are known (``finish``)."""

    def __init__(self, num_threads: int = 0, like: bool = False):
        self.jobs = []
        self.metas = []  # (folder, meta): written by finish() after the data files
        self.num_threads = num_threads
        self.like = like  # memmap_like: allocate files of the right size, copy nothing

    def tensor(self, t: torch.Tensor, path: Path, sums: dict) -> dict:
        t = t.detach()
        if t.device.type != "cpu":
            t = t.cpu()
        meta = {"kind": "tensor", "dtype": dtype_name(t.dtype), "shape": list(t.shape), "file": path.name}
        if self.like:  # no checksum: memmap_like files are meant to be filled in place later
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
            f.write(memoryview(t.contiguous().reshape(-1).view(torch.uint8).numpy()))
        return f.checksum()


def _write_collection(obj, folder: Path, w: _Writer) -> dict:
    from .tensorclass import TensorClass
    from .core import TensorDict

    folder.mkdir(parents=True, exist_ok=True)
    meta = {"format": FORMAT_NAME, "version": FORMAT_VERSION}
    sums = {}  # file name -> checksum, filled as the files are written
    if isinstance(obj, TensorClass):
        cls = type(obj)
        meta.update({"_type": "tensorclass", "class": f"{cls.__module__}.{cls.__qualname__}"})
        inner = _write_collection(obj._storage, folder / "_storage", w)
        meta["batch_size"] = inner["batch_size"]
        meta["device"] = inner["device"]
        meta["storage"] = "_storage"
    elif isinstance(obj, RaggedTensorDict):
        meta.update({"_type": "ragged", "batch_size": list(obj.batch_size), "device": _dev(obj.device)})
        meta["offsets"] = w.tensor(obj.offsets, folder / "_offsets.memmap", sums)
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
        return w.tensor(value, folder / f"{name}.memmap", sums)
    if isinstance(value, NonTensorData):
        return {"kind": "value", "batch_size": list(value.batch_size), "value": _entry_value(value.data, where)}
    if isinstance(value, NonTensorStack):
        return _write_strings(value, folder, name, where, sums)
    _write_collection(value, folder / name, w)
    return {"kind": "collection", "dir": name}


def _write_strings(stack: NonTensorStack, folder: Path, name: str, where: str, sums: dict) -> dict:
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
                packed = pool.packed(stack._index_t.reshape(-1))
            _checksum.record(sums, data_path.name, _write_tensor(packed.data, data_path))
            _checksum.record(sums, off_path.name, _write_tensor(packed.offsets, off_path))
            kind, nbytes = packed.kind, int(packed.offsets[-1]) if packed.offsets.numel() else 0
    except TypeError as err:
        raise TypeError(f"cannot save {where}: {err}") from None
    except _SurrogateAt as err:
        index = err.index if err.index is not None else _first_surrogate(stack)
        what = "a value written into it in memory" if index is None else f"item {index}"
        raise ValueError(f"cannot save {where}: {what} {err.message}") from None
    return {
        "kind": "strings",
        "encoding": kind,
        "shape": list(stack.batch_size),
        "nbytes": nbytes,
        "data": data_path.name,
        "offsets": off_path.name,
    }


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
            kind, encoded = "json", [to_json(v, f" #{i}").encode("utf-8") for i, v in enumerate(values)]
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
    """
    return _save(obj, prefix, num_threads=num_threads, like=like, existsok=existsok, load_back=False,
                 durable=durable)[0]


def save_and_load(obj, prefix, *, num_threads: int = 0, like: bool = False, existsok: bool = True,
                  durable: bool = False):
    """:func:`save`, then the saved object, loaded from the files this call wrote (opened
    before they are swapped into place), never from what another writer put at ``prefix``
    since. Returns ``(path, loaded)``."""
    return _save(obj, prefix, num_threads=num_threads, like=like, existsok=existsok, load_back=True,
                 durable=durable)


# -- the save protocol (issue 17 / 15): target checks, locked temp folder, orphans, swap ----
def _save(obj, prefix, *, num_threads: int, like: bool, existsok: bool, load_back: bool, durable: bool = False):
    prefix = resolve_target(prefix)  # a link to a folder: replace the folder it points to
    if prefix.is_dir() and not existsok and any(prefix.iterdir()):
        raise FileExistsError(f"{prefix} already holds data; pass existsok=True to overwrite it")
    check_overwritable(prefix)  # never delete files that are not a dataset's own
    prefix.parent.mkdir(parents=True, exist_ok=True)
    remove_orphans(prefix)  # temp folders of earlier saves to prefix whose writer died
    loaded = None
    with WriterTemp(prefix) as tmp:
        w = _Writer(num_threads, like)
        _write_collection(obj, tmp.data, w)
        w.run()
        if load_back:
            loaded = _load_folder(Folder.open(tmp.data), prefix)
        if durable:
            fsync_tree(tmp.data)
        atomic_replace(tmp.data, prefix)
        if durable:
            fsync_dir(prefix.parent)
    return prefix, loaded


def _load_folder(root: Folder, shown_as: Path, device=None, fake: bool = False):
    root.path = Path(shown_as)
    try:
        return _Reader(device, fake=fake).collection(root, close=False)
    finally:
        root.close()


# -- reading ------------------------------------------------------------------------------
def _read_meta(folder: Folder) -> dict:
    if not folder.is_file("meta.json"):
        raise FormatError(f"{folder.path / 'meta.json'} is missing: {folder.path} is not a saved collection")
    return parse_meta(folder.read_bytes("meta.json"), folder.path / "meta.json")


def _parse_shape(value, where, what="shape") -> list:
    if not isinstance(value, list) or not all(type(s) is int and s >= 0 for s in value):
        raise FormatError(f"{where}: {what} must be a list of non-negative integers, got {value!r}")
    return value


def _safe_name(name, where) -> str:
    if not isinstance(name, str) or not name or "/" in name or "\\" in name or name in (".", "..") or "\x00" in name:
        raise FormatError(f"{where}: file name {name!r} is not a plain name inside the folder")
    return name


def _map_random(path: Path, dtype: torch.dtype, numel: int) -> torch.Tensor:
    """Map a string-column file privately (copy-on-write) with ``MADV_RANDOM`` (by path: only
    for columns read after the load, under fake mode)."""
    import mmap
    import warnings

    if numel == 0:
        return torch.empty(0, dtype=dtype)
    with open(path, "rb") as f:
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
    if hasattr(mm, "madvise") and hasattr(mmap, "MADV_RANDOM"):
        mm.madvise(mmap.MADV_RANDOM)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return torch.frombuffer(mm, dtype=dtype, count=numel)  # keeps ``mm`` alive


class _Reader:
    """Reads a collection tree through an opened :class:`~chatdata.td.folder.Folder`."""

    def __init__(self, device=None, fake: bool = False):
        self.device = None if device is None else torch.device(device)
        self.meta_device = self.device is not None and self.device.type == "meta"
        self.fake = fake

    def tensor(self, folder: Folder, m: dict, where: str):
        try:
            dtype = parse_dtype(m["dtype"], where)
            shape = _parse_shape(m["shape"], where)
            name = _safe_name(m["file"], where)
        except (KeyError, TypeError, ValueError) as err:
            raise FormatError(f"{where}: bad tensor description {m!r} ({err})") from None
        if self.meta_device:
            return torch.empty(shape, dtype=dtype, device="meta")
        if self.fake:
            return torch.empty(shape, dtype=dtype)
        if not folder.is_file(name):
            raise FormatError(f"{where}: data file {folder.path / name} is missing")
        numel = 1
        for s in shape:
            numel *= s
        nbytes = numel * torch.empty((), dtype=dtype).element_size()
        flat, size = folder.map(name, dtype, numel, shared=True)
        if size != nbytes:
            raise FormatError(f"{where}: {folder.path / name} has {size} bytes, expected {nbytes}")
        t = MemoryMappedTensor(flat.view(shape), filename=folder.path / name)
        return t if self.device is None or self.device.type == "cpu" else t.to(self.device)

    def strings(self, folder: Folder, m: dict, where: str):
        try:
            shape = _parse_shape(m["shape"], where)
            kind = m.get("encoding", "str")
            data_name = _safe_name(m["data"], where)
            off_name = _safe_name(m["offsets"], where)
            nbytes = int(m.get("nbytes", -1))
        except (KeyError, TypeError, ValueError) as err:
            raise FormatError(f"{where}: bad string column description ({err})") from None
        if kind not in ("str", "json"):
            raise FormatError(f"{where}: unknown string encoding {kind!r}")
        n = 1
        for s in shape:
            n *= s
        data_path, off_path = folder.path / data_name, folder.path / off_name
        if not self.meta_device:
            for name in (data_name, off_name):
                if not folder.is_file(name):
                    raise FormatError(f"{where}: data file {folder.path / name} is missing")
            if folder.size(off_name) != (n + 1) * 8:
                raise FormatError(f"{where}: {off_path} has {folder.size(off_name)} bytes, expected {(n + 1) * 8}")
            if nbytes >= 0 and folder.size(data_name) != nbytes:
                raise FormatError(f"{where}: {data_path} has {folder.size(data_name)} bytes, expected {nbytes}")
        if self.meta_device or self.fake:
            def loader():
                offsets = _map_random(off_path, torch.int64, n + 1)
                size = os.path.getsize(data_path)
                if int(offsets[-1]) != size or int(offsets[0]) != 0:
                    raise FormatError(f"{where}: offsets in {off_path} do not match {data_path}")
                return _map_random(data_path, torch.uint8, size), offsets

            pool = Pool.from_loader(loader, n, kind)
        else:
            # map now (two O(1) mmaps, through the opened folder): the column keeps the files
            # it was loaded from even if the folder is saved over later; nothing is decoded yet
            offsets, _ = folder.map(off_name, torch.int64, n + 1, shared=False, random=True)
            size = folder.size(data_name)
            if int(offsets[-1]) != size or int(offsets[0]) != 0:
                raise FormatError(f"{where}: offsets in {off_path} do not match {data_path}")
            data, _ = folder.map(data_name, torch.uint8, size, shared=False, random=True)
            pool = Pool.from_packed(data, offsets, kind)
        pool._source = str(off_path)
        index = range(n) if len(shape) == 1 else torch.arange(n, dtype=torch.long).reshape(shape)
        return NonTensorStack._from_parts(index, pool, None)

    def entry(self, folder: Folder, m, where: str, key=None):
        if not isinstance(m, dict) or "kind" not in m:
            raise FormatError(f"{where}: entry description must be an object with a 'kind'")
        kind = m["kind"]
        if kind == "tensor":
            return self.tensor(folder, m, where)
        if kind == "strings":
            return self.strings(folder, m, where)
        if kind == "nested":
            return load_nested(folder, m, where, meta_device=self.meta_device, fake=self.fake)
        if kind == "value":
            nt = NonTensorData(m.get("value"), batch_size=_parse_shape(m.get("batch_size", []), where, "batch_size"))
            if key is not None:
                link_value(nt, folder, key)  # in-place updates write through (writethrough.py)
            return nt
        if kind == "collection":
            name = _safe_name(m.get("dir"), where)
            if not folder.is_dir(name):
                raise FormatError(f"{where}: sub-folder {folder.path / name} is missing")
            return self.collection(folder.sub(name))
        raise FormatError(f"{where}: unknown entry kind {kind!r}")

    def collection(self, folder: Folder, close: bool = True):
        try:
            return self._collection(folder)
        finally:
            if close:
                folder.close()  # every file is mapped by now: no descriptor stays open per sub-folder

    def _collection(self, folder: Folder):
        from .core import TensorDict

        meta = _read_meta(folder)
        where = str(folder.path / "meta.json")
        if meta.get("format") != FORMAT_NAME:
            from .compat import load_foreign

            return load_foreign(folder, meta, self)
        check_version(meta, where, FORMAT_VERSION)
        typ = meta.get("_type")
        if typ == "TensorDict":
            entries = meta.get("entries")
            if not isinstance(entries, dict):
                raise FormatError(f"{where}: 'entries' must be an object")
            values = {k: self.entry(folder, m, f"{where} entry {k!r}", k) for k, m in entries.items()}
            bs = _parse_shape(meta.get("batch_size", []), where, "batch_size")
            device = self.device
            if self.fake:
                device = torch.device("cpu")  # fake tensors stand for CPU tensors here
            elif device is None and meta.get("device") == "cpu":
                device = torch.device("cpu")  # a device saved elsewhere than the CPU is dropped
            td = TensorDict._new_unsafe({}, bs, device)
            for k, v in values.items():
                td._tensordict[k] = v
            from .core import check_batch

            for k, v in values.items():
                try:
                    check_batch(k, v, td.batch_size)
                except ValueError as err:
                    raise FormatError(f"{where}: {err}") from None
            return td
        if typ == "ragged":
            return self._ragged(folder, meta, where)
        if typ == "stack":
            m = meta.get("values")
            if not isinstance(m, dict) or m.get("kind") != "strings":
                raise FormatError(f"{where}: a stack's 'values' must be a 'strings' entry")
            stack = self.strings(folder, m, f"{where} values")
            _check_batch_field(meta, list(stack.batch_size), where)
            link_value(stack, folder, None)  # in-place updates re-save it (writethrough.py)
            return stack
        if typ == "tensorclass":
            storage = self.collection(folder.sub(_safe_name(meta.get("storage", "_storage"), where)))
            _check_batch_field(meta, list(storage.batch_size), where)
            cls = resolve_tensorclass(meta.get("class"))
            if cls is None:
                return storage
            check = getattr(cls, "_check_loaded", None)
            if check is not None and not (self.meta_device or self.fake):
                check(storage, folder.path / meta.get("storage", "_storage"))  # raises FormatError
            return cls._from_storage(storage)
        raise FormatError(f"{where}: unknown collection type {typ!r}")

    def _ragged(self, folder: Folder, meta: dict, where: str):
        """A ragged stack: O(1) checks now, the offsets' one vectorised pass on first read."""
        offsets = self.tensor(folder, meta.get("offsets", {}), f"{where} offsets")
        values = self.entry(folder, meta.get("values"), f"{where} values")
        if self.meta_device or self.fake:
            return values
        vbs = getattr(values, "batch_size", None)
        if isinstance(values, torch.Tensor) or vbs is None or len(vbs) < 1 or (
                isinstance(values, NonTensorData) and not vbs):
            raise FormatError(f"{where}: the values of a ragged stack must be a collection with a batch dim "
                              f"(got a {type(values).__name__} of batch size {list(vbs) if vbs is not None else None})")
        if offsets.dtype != torch.int64 or offsets.ndim != 1:
            raise FormatError(f"{where}: offsets must be a 1-D int64 tensor")
        off_path = getattr(offsets, "filename", None) or where
        offsets = offsets.as_subclass(torch.Tensor)
        total = vbs[0]
        try:
            r = LoadedRagged(values, offsets, [lambda: check_offsets(offsets, total, off_path)])
        except ValueError as err:
            raise FormatError(f"{where}: {err} (offsets in {off_path})") from None
        _check_batch_field(meta, [offsets.numel() - 1, -1, *list(vbs)[1:]], where)
        return r


def _check_batch_field(meta: dict, expected: list, where) -> None:
    """The ``batch_size`` a ragged stack or tensorclass records must be the one its parts give."""
    if "batch_size" not in meta:
        return  # optional: the parts give it
    bs = meta["batch_size"]
    if not isinstance(bs, list) or [type(b) for b in bs] != [int] * len(bs) or bs != expected:
        raise FormatError(f"{where}: batch_size {bs!r} is corrupt: the data it describes has batch size {expected}")


def resolve_tensorclass(path):
    """The tensorclass defined (or registered) as ``module.Qualname``; None, with a warning, when
    no such class exists in this process. Loading never imports a module named by the data."""
    import warnings

    from .tensorclass import registered_tensorclass

    cls = registered_tensorclass(path) if isinstance(path, str) else None
    if cls is None:
        warnings.warn(
            f"tensorclass {path} is not defined in this process, so the data loads as a "
            "TensorDict; import the module that defines it before loading to get the class back",
            stacklevel=3,
        )
    return cls


def load(prefix, device=None, *, fake: bool = False):
    """Load the collection saved in ``prefix`` (lazily: files are mapped, not read).

    The folder is opened once and every file is read through it, so a concurrent save to
    ``prefix`` cannot mix two saves into one object; if that save removed the folder being
    read, the load starts again on the new one.
    """
    prefix = Path(prefix)
    for attempt in range(_LOAD_ATTEMPTS):
        root = Folder.open(prefix)
        root.path = prefix
        try:
            return _Reader(device, fake=fake).collection(root, close=False)
        except (FormatError, FileNotFoundError):
            if attempt + 1 < _LOAD_ATTEMPTS and root.replaced():
                continue  # a save swapped the folder (and is deleting the one we opened): again
            raise
        finally:
            root.close()


_LOAD_ATTEMPTS = 50


def _fake_mode_active() -> bool:
    try:
        from torch._guards import detect_fake_mode

        return detect_fake_mode() is not None
    except Exception:  # pragma: no cover - older torch
        return False
