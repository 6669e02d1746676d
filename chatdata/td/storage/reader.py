"""The reader of the on-disk format: a folder -> the collection saved in it, lazily.

Files are mapped, not read; every ``meta.json`` field, file name and file size is checked when
the folder is opened (checks over every offset run on first read, :mod:`.integrity`). A folder
written by tensordict is read by :mod:`.tensordict_folders`. Loading never unpickles and never
imports a module named by the data: a saved tensorclass is found in the registry of the classes
defined in this process. Loaded non-tensor values get a link to their folder
(:mod:`.writethrough`), through which in-place updates are written.

Example:
    >>> import tempfile
    >>> from chatdata.td.storage import save
    >>> path = save(TensorDict({"s": ["x", "y"]}, [2]), tempfile.mkdtemp() + "/ds")
    >>> load(path)["s"].tolist()
    ['x', 'y']
"""
from __future__ import annotations

import os
from pathlib import Path

import torch

from ..core import TensorDict, check_batch
from ..nontensor import NonTensorData, NonTensorStack, Pool
from ..tensorclass.registry import resolve_tensorclass
from .dtypes import parse_dtype
from .folder import Folder
from .fsops import FormatError
from .integrity import FORMAT_NAME, FORMAT_VERSION, LoadedRagged, check_offsets, check_version, parse_meta
from .memmap import MemoryMappedTensor
from .nested_persist import load_nested
from .tensordict_folders import load_foreign
from .typed_copies import registered
from .writethrough import link_value

__all__ = ["load"]


# -- reading ------------------------------------------------------------------------------
def _read_meta(folder: Folder) -> dict:
    if not folder.is_file("meta.json"):
        raise FormatError(f"{folder.path / 'meta.json'} is missing: {folder.path} is not a saved collection")
    return parse_meta(folder.read_bytes("meta.json"), folder.path / "meta.json")


_MAX_ITEMS = 2**62  # more items than any file holds; past 2**63 torch and numpy cannot even count them


def _parse_shape(value, where, what="shape") -> list:
    if not isinstance(value, list) or not all(type(s) is int and s >= 0 for s in value):
        raise FormatError(f"{where}: {what} must be a list of non-negative integers, got {value!r}")
    total = 1
    for s in value:
        total *= s
    if total > _MAX_ITEMS or any(s > _MAX_ITEMS for s in value):
        raise FormatError(f"{where}: {what} {value!r} counts more items than a file can hold")
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


def _typed_copy(folder: Folder, m, where: str, sums):
    """``(format name, mapped uint8 tensor, file path, recorded checksum or None)`` of a column's
    typed copy (:mod:`.typed_copies`), or None when no room registered its format (a copy is
    only a cache)."""
    if not isinstance(m, dict) or not isinstance(m.get("format"), str):
        raise FormatError(f"{where}: 'typed' must be an object with a 'format' and a 'file', got {m!r}")
    if registered(m["format"]) is None:
        return None
    name = _safe_name(m.get("file"), where)
    if not folder.is_file(name):
        raise FormatError(f"{where}: typed copy {folder.path / name} is missing")
    size = folder.size(name)
    recorded = sums.get(name) if isinstance(sums, dict) else None
    return m["format"], folder.map(name, torch.uint8, size, shared=False)[0], str(folder.path / name), recorded


class _Reader:
    """Reads a collection tree through an opened :class:`~chatdata.td.storage.folder.Folder`."""

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

    def strings(self, folder: Folder, m: dict, where: str, sums=None):
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
            if isinstance(sums, dict) and (sums.get(data_name) or sums.get(off_name)):
                pool._recorded = ((str(data_path), sums.get(data_name)), (str(off_path), sums.get(off_name)))
            if kind == "json" and "typed" in m:
                pool._typed = _typed_copy(folder, m["typed"], where, sums)
        pool._source = str(off_path)
        index = range(n) if len(shape) == 1 else torch.arange(n, dtype=torch.long).reshape(shape)
        return NonTensorStack._from_parts(index, pool, None)

    def entry(self, folder: Folder, m, where: str, key=None, sums=None):
        if not isinstance(m, dict) or "kind" not in m:
            raise FormatError(f"{where}: entry description must be an object with a 'kind'")
        kind = m["kind"]
        if kind == "tensor":
            return self.tensor(folder, m, where)
        if kind == "strings":
            return self.strings(folder, m, where, sums)
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
        meta = _read_meta(folder)
        where = str(folder.path / "meta.json")
        if meta.get("format") != FORMAT_NAME:
            return load_foreign(folder, meta, self)
        check_version(meta, where, FORMAT_VERSION)
        typ = meta.get("_type")
        if typ == "TensorDict":
            entries = meta.get("entries")
            if not isinstance(entries, dict):
                raise FormatError(f"{where}: 'entries' must be an object")
            sums = meta.get("checksums")
            values = {k: self.entry(folder, m, f"{where} entry {k!r}", k, sums) for k, m in entries.items()}
            bs = _parse_shape(meta.get("batch_size", []), where, "batch_size")
            device = self.device
            if self.fake:
                device = torch.device("cpu")  # fake tensors stand for CPU tensors here
            elif device is None and meta.get("device") == "cpu":
                device = torch.device("cpu")  # a device saved elsewhere than the CPU is dropped
            td = TensorDict._new_unsafe({}, bs, device)
            for k, v in values.items():
                td._tensordict[k] = v
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


def _load_folder(root: Folder, shown_as: Path, device=None, fake: bool = False):
    """The collection in the opened folder ``root``, reported as ``shown_as`` (closes ``root``)."""
    root.path = Path(shown_as)
    try:
        return _Reader(device, fake=fake).collection(root, close=False)
    finally:
        root.close()


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
