"""The walk of :func:`chatdata.td.storage.verify.verify` over a saved folder: ``_Verifier``
reads every ``meta.json`` (and the sub-folders it names) and checks each entry's files
(existence, regular file, size), offsets, UTF-8, typed copies and checksums, appending a
:class:`~chatdata.td.storage.verify_report.Problem` to the report for each bad one instead of
stopping at the first.

Example:
    >>> import tempfile, torch
    >>> from pathlib import Path
    >>> from chatdata.td import TensorDict
    >>> path = Path(tempfile.mkdtemp()) / "ds"
    >>> _ = TensorDict({"s": ["a", "b"]}, [2]).memmap(path)
    >>> report = VerifyReport(path)
    >>> _Verifier(report, checksums=True).collection(path)
    [2]
    >>> report.ok, report.files
    (True, 2)
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch

from . import checksum as _checksum
from .fsops import UPDATE_TEMP_PREFIX, FormatError
from .dtypes import parse_dtype
from .typed_copies import mapped_bytes, registered
from .integrity import FORMAT_NAME, FORMAT_VERSION
from .nested_persist import _check_meta, check_sizes
from .reader import _parse_shape
from .utf8_check import _Utf8Check
from .verify_report import Problem, VerifyReport

__all__ = []


def _read_meta(folder: Path) -> dict:
    """The folder's ``meta.json`` as an object (FormatError / FileNotFoundError otherwise)."""
    import json

    path = folder / "meta.json"
    if not path.is_file():
        if not folder.exists():
            raise FileNotFoundError(f"no saved collection at {folder}: the folder does not exist")
        raise FormatError(f"{path} is missing: {folder} is not a saved collection")
    try:
        with open(path, encoding="utf-8") as f:
            meta = json.load(f)
    except (ValueError, UnicodeDecodeError, RecursionError) as err:
        raise FormatError(f"{path} is not valid JSON ({err})") from None
    if not isinstance(meta, dict):
        raise FormatError(f"{path} must hold a JSON object")
    return meta


class _Verifier:
    def __init__(self, report: VerifyReport, checksums: bool):
        self.report = report
        self.checksums = checksums

    def bad(self, path, message: str) -> None:
        self.report.problems.append(Problem(str(path), message))

    # files ------------------------------------------------------------------------------
    def _file(self, folder: Path, name, size: int | None, where: str) -> Path | None:
        """The data file ``name`` if it exists, is a regular file and has ``size`` bytes."""
        if not isinstance(name, str) or not name or "/" in name or "\\" in name or name in (".", "..") \
                or "\x00" in name:
            self.bad(folder / "meta.json", f"{where}: file name {name!r} is not a plain name inside the folder")
            return None
        path = folder / name
        if path.is_symlink():
            self.bad(path, "is a symlink; a dataset holds only regular files")
            return None
        if not path.is_file():
            self.bad(path, f"missing ({where})")
            return None
        actual = path.stat().st_size
        if size is not None and actual != size:
            self.bad(path, f"has {actual} bytes, expected {size} ({where})")
            return None
        return path

    def _read(self, path: Path, sums, utf8: _Utf8Check | None = None) -> bool:
        """Read ``path`` once: hash it (when a checksum is recorded) and feed ``utf8``.
        Returns False (after reporting) on a checksum mismatch."""
        self.report.files += 1
        self.report.bytes += path.stat().st_size
        expected = sums.get(path.name) if isinstance(sums, dict) and self.checksums else None
        parsed = _checksum.parse_checksum(expected)
        if expected is not None and (parsed is None or parsed[0] != _checksum.ALGORITHM):
            self.bad(path.parent / "meta.json", f"checksum of {path.name} is {expected!r}, not "
                     f"'{_checksum.ALGORITHM}:<hex>'")
            expected = None
        hasher = _checksum.new_hasher() if expected is not None else None
        if hasher is None and utf8 is None:
            if self.checksums:
                self.report.unchecked.append(str(path))
            return True
        pos = 0
        for piece in _checksum.iter_file_chunks(path):
            if hasher is not None:
                hasher.update(piece)
            if utf8 is not None:
                utf8.feed(piece, pos)
            pos += len(piece)
        if utf8 is not None:
            utf8.finish()
        if hasher is None:
            if self.checksums:
                self.report.unchecked.append(str(path))
            return True
        got = _checksum.format_checksum(hasher)
        if got != expected:
            self.bad(path, f"checksum mismatch: meta.json records {expected}, the file hashes to {got} (the "
                           "file changed after it was saved: disk corruption, or a write into a memory-mapped "
                           "tensor)")
            return False
        self.report.checksummed += 1
        return True

    @staticmethod
    def _offsets(path: Path, n: int) -> np.ndarray:
        return np.memmap(path, dtype="<i8", mode="r", shape=(n,)) if n else np.zeros(0, np.int64)

    def _check_offsets(self, path: Path, off: np.ndarray, end: int, what: str) -> bool:
        if off.size == 0:
            return True
        if int(off[0]) != 0:
            self.bad(path, f"first offset is {int(off[0])}, not 0")
            return False
        if int(off[-1]) != end:
            self.bad(path, f"last offset is {int(off[-1])}, but there are {end} {what}")
            return False
        step = 1 << 22
        for a in range(0, off.size - 1, step):
            d = np.diff(off[a:a + step + 1])
            if (d < 0).any():
                i = a + int(np.flatnonzero(d < 0)[0])
                self.bad(path, f"offsets decrease at value {i} ({int(off[i])} -> {int(off[i + 1])})")
                return False
        return True

    # entries ----------------------------------------------------------------------------
    def tensor(self, folder: Path, m: dict, sums, where: str):
        """Check a tensor file; returns its shape (or None)."""
        try:
            dtype = parse_dtype(m["dtype"], where)
            shape = _parse_shape(m["shape"], where)
            name = m["file"]
        except (KeyError, TypeError, FormatError) as err:
            self.bad(folder / "meta.json", f"{where}: bad tensor description ({err})")
            return None
        n = int(np.prod(shape, dtype=np.int64)) if shape else 1
        path = self._file(folder, name, n * dtype.itemsize, where)
        if path is not None:
            self._read(path, sums)
        return shape if path is not None else None

    def strings(self, folder: Path, m: dict, sums, where: str):
        try:
            shape = _parse_shape(m["shape"], where)
            data_name, off_name = m["data"], m["offsets"]
            kind = m.get("encoding", "str")
            nbytes = m.get("nbytes")
        except (KeyError, TypeError, FormatError) as err:
            self.bad(folder / "meta.json", f"{where}: bad string column description ({err})")
            return None
        n = int(np.prod(shape, dtype=np.int64)) if shape else 1
        off_path = self._file(folder, off_name, (n + 1) * 8, where)
        data_path = self._file(folder, data_name, nbytes if isinstance(nbytes, int) else None, where)
        if off_path is None or data_path is None:
            return shape
        self._read(off_path, sums)
        size = data_path.stat().st_size
        off = self._offsets(off_path, n + 1)
        offsets_ok = self._check_offsets(off_path, off, size, f"bytes in {data_path.name}")
        utf8 = _Utf8Check() if kind in ("str", "json") else None
        self._read(data_path, sums, utf8)
        if offsets_ok and size and n:
            data = np.memmap(data_path, dtype=np.uint8, mode="r")
            step = 1 << 22
            for a in range(0, n, step):
                starts = np.asarray(off[a:min(n, a + step)])
                inside = starts < size
                mid = (data[starts[inside]] & 0xC0) == 0x80
                if mid.any():
                    i = a + int(np.flatnonzero(inside)[np.flatnonzero(mid)[0]])
                    self.bad(off_path, f"value {i} starts inside a UTF-8 character of {data_path.name} "
                                       f"(offset {int(off[i])})")
                    break
            del data
        if utf8 is not None and utf8.bad is not None:
            where_value = ""
            if offsets_ok and n:
                i = int(np.searchsorted(off, utf8.bad, side="right")) - 1
                where_value = f" (value {max(i, 0)})"
            self.bad(data_path, f"invalid UTF-8 at byte {utf8.bad}{where_value}")
        if "typed" in m and kind == "json":  # (the reader ignores it on a str column, as verify does)
            self._typed_copy(folder, m["typed"], sums, where, data_path, off,
                             offsets_ok and (utf8 is None or utf8.bad is None))
        del off
        return shape

    def _typed_copy(self, folder: Path, m, sums, where: str, data_path: Path, off, comparable: bool) -> None:
        """Check a JSON column's typed copy (:mod:`.typed_copies`): its file and checksum, and,
        when its format is registered and the column itself is sound, that it equals the parse."""
        if not isinstance(m, dict) or not isinstance(m.get("format"), str):
            self.bad(folder / "meta.json", f"{where}: 'typed' must be an object with a 'format' and a 'file'")
            return
        path = self._file(folder, m.get("file"), None, f"{where}, typed copy")
        if path is None or not self._read(path, sums):
            return
        fmt = registered(m["format"])
        if fmt is None:
            self.report.unchecked.append(f"{path} (typed copy in format {m['format']!r}: no installed room reads it)")
            return
        if not comparable:
            return  # the column's own problem is reported; there is nothing sound to compare with
        message = fmt.check(mapped_bytes(data_path), np.array(off), mapped_bytes(path))
        if message is not None:
            self.bad(path, f"{message} ({where}); save the collection again to rewrite it")

    def nested(self, folder: Path, m: dict, sums, where: str):
        """Check a nested tensor's sizes and data files; returns ``[count]`` (or None)."""
        try:
            dtype, count, ndim, _layout, (data_name, sizes_name), _ragged = _check_meta(m, where)
        except FormatError as err:
            self.bad(folder / "meta.json", str(err))
            return None
        sizes_path = self._file(folder, sizes_name, count * ndim * 8, where)
        if sizes_path is None:
            return None
        self._read(sizes_path, sums)
        sizes = torch.from_numpy(np.fromfile(sizes_path, dtype="<i8").reshape(count, ndim))
        try:
            numel = check_sizes(sizes, sizes_path)
        except FormatError as err:
            self.bad(sizes_path, str(err))
            return None
        path = self._file(folder, data_name, numel * dtype.itemsize, where)
        if path is not None:
            self._read(path, sums)
        return [count] if path is not None else None

    def entry(self, folder: Path, m, sums, where: str):
        """Check one entry; returns its leading size (rows) when known."""
        if not isinstance(m, dict):
            self.bad(folder / "meta.json", f"{where}: entry description must be an object")
            return None
        kind = m.get("kind")
        if kind == "tensor":
            shape = self.tensor(folder, m, sums, where)
        elif kind == "strings":
            shape = self.strings(folder, m, sums, where)
        elif kind == "nested":
            shape = self.nested(folder, m, sums, where)
        elif kind == "value":
            shape = m.get("batch_size")
        elif kind == "collection":
            name = m.get("dir")
            if not isinstance(name, str) or not name or "/" in name or "\\" in name or name in (".", ".."):
                self.bad(folder / "meta.json", f"{where}: sub-folder name {name!r} is not a plain name")
                return None
            shape = self.collection(folder / name)
        else:
            self.bad(folder / "meta.json", f"{where}: unknown entry kind {kind!r}")
            return None
        return shape[0] if isinstance(shape, list) and shape and isinstance(shape[0], int) else None

    def collection(self, folder: Path):
        """Check a folder and everything below it; returns its batch size (or None)."""
        meta_path = folder / "meta.json"
        if folder.is_symlink():
            self.bad(folder, "is a symlink; a dataset holds only regular files and folders")
            return None
        if meta_path.is_symlink():
            self.bad(meta_path, "is a symlink; a dataset holds only regular files")
            return None
        try:
            meta = _read_meta(folder)
        except (FormatError, FileNotFoundError) as err:
            self.bad(meta_path, str(err).replace(f"{meta_path} ", "").replace(f"{folder} ", ""))
            return None
        if meta.get("format") != FORMAT_NAME:
            # a tensordict / torchrl folder: no checksums to check; the final load checks what it can
            self.report.unchecked.append(str(folder))
            return None
        for name in sorted(os.listdir(folder)):  # what a killed in-place value update left
            if name.startswith(UPDATE_TEMP_PREFIX):
                self.report.leftovers.append(
                    f"{folder / name} (temporary file of an interrupted in-place value update; safe to delete)")
        if not isinstance(meta.get("version"), int) or meta["version"] > FORMAT_VERSION:
            self.bad(meta_path, f"format version {meta.get('version')!r} is not one this chatdata reads "
                                f"(up to {FORMAT_VERSION}); upgrade chatdata")
            return None
        sums = meta.get("checksums")
        if sums is not None and not isinstance(sums, dict):
            self.bad(meta_path, "'checksums' must be an object mapping file names to checksums")
            sums = None
        where = str(meta_path)
        typ = meta.get("_type")
        if typ == "TensorDict":
            entries = meta.get("entries")
            if not isinstance(entries, dict):
                self.bad(meta_path, "'entries' must be an object")
                return None
            for key, m in entries.items():
                self.entry(folder, m, sums, f"entry {key!r}")
        elif typ == "ragged":
            off_m = meta.get("offsets")
            rows = self.entry(folder, meta.get("values"), sums, "values")
            if not isinstance(off_m, dict) or self.tensor(folder, off_m, sums, "offsets") is None:
                if not isinstance(off_m, dict):
                    self.bad(meta_path, "'offsets' must be a tensor entry")
                return meta.get("batch_size")
            shape = off_m.get("shape")
            if off_m.get("dtype") not in ("int64", "torch.int64"):
                self.bad(folder / str(off_m.get("file")), "ragged offsets must be int64")
            elif rows is not None and isinstance(shape, list) and len(shape) == 1:
                path = folder / off_m["file"]
                self._check_offsets(path, self._offsets(path, shape[0]), rows, "rows in the values")
        elif typ == "stack":
            m = meta.get("values")
            if not isinstance(m, dict) or m.get("kind") != "strings":
                self.bad(meta_path, "a stack's 'values' must be a 'strings' entry")
                return None
            self.strings(folder, m, sums, "values")
        elif typ == "tensorclass":
            name = meta.get("storage", "_storage")
            if not isinstance(name, str) or not name or "/" in name or name in (".", ".."):
                self.bad(meta_path, f"storage {name!r} is not a plain sub-folder name")
                return None
            return self.collection(folder / name)
        else:
            self.bad(meta_path, f"unknown collection type {typ!r} ({where})")
            return None
        return meta.get("batch_size")
