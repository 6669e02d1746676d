"""Typed copies of JSON columns: a column's values saved once more, already parsed.

A string column of JSON texts (``"encoding": "json"``, e.g. a History's ``tool_calls``) is what
the format keeps; reading it into a columnar library means parsing every value again. A
tensorclass may ask the writer for a *typed copy* of some of its JSON columns by naming them
in the class attribute ``_typed_json_copies`` (:class:`chatdata.History`: ``tool_calls``,
``tool_responses``, ``extra``, the columns its ``to_arrow()`` reads typed): the writer hands
the column's packed bytes to the registered format's ``make``, and writes what it returns next
to the column, with its checksum, as the column's ``"typed"`` field (``docs/format.md``). Its
file is ``<column>.typed<format suffix>``; a save over the folder counts it as the dataset's
own file:

    "typed": {"format": "arrow-ipc", "file": "tool_calls.typed.arrow"}

The format itself lives in a higher room (:mod:`chatdata.io.arrow_typed_copy` registers Arrow's
IPC file format), so td/ depends on no columnar library. A typed copy is only ever a cache:

- ``make`` returns None when the values cannot be typed exactly; no copy is written then, nor
  when ``make`` fails (a warning says why: the save itself never fails for its copy);
- the reader maps the file when the column is loaded (the column and its copy come from the
  same save, even if the folder is saved over later) and hands it to the column's pool
  (``pool._typed``); a format no registered room knows is ignored;
- a loaded column that changed in memory keeps its values apart (an overflow list), so its
  copy still describes the bytes it was made from, and readers use it only for those; saving
  an unchanged loaded column writes its copy's bytes again when they still hash to the
  checksum its folder recorded, and makes a new copy otherwise;
- ``chatdata verify`` checks the copy's checksum and, with the format registered, that it
  equals what parsing the column gives.

Example:
    >>> registered("no-such-format") is None
    True
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, NamedTuple

import numpy as np

__all__ = ["TypedCopyFormat", "register", "registered", "active", "copy_file_name", "column_arrays",
           "mapped_bytes", "write_copy"]


class TypedCopyFormat(NamedTuple):
    """What a room registers to make and check typed copies.

    ``make(data, offsets)`` gets a packed JSON column (uint8 bytes, int64 offsets from 0, numpy)
    and returns the copy's bytes (any buffer) or None. ``check(data, offsets, copy)`` returns
    None when ``copy`` (the file's bytes, numpy uint8) equals what ``make`` describes, else a
    message saying what differs.
    """

    name: str
    suffix: str
    make: Callable
    check: Callable


_FORMATS: dict = {}
_ACTIVE: list = []  # the format the writer uses (the last one registered)


def register(fmt: TypedCopyFormat, *, write: bool = True) -> None:
    """Make ``fmt`` known to the reader and ``verify`` and, with ``write``, the format the
    writer makes copies in.

    Example:
        >>> register(TypedCopyFormat("demo", ".demo", lambda d, o: None, lambda d, o, c: None), write=False)
        >>> registered("demo").suffix
        '.demo'
    """
    _FORMATS[fmt.name] = fmt
    if write:
        _ACTIVE[:] = [fmt]


def registered(name) -> TypedCopyFormat | None:
    """The registered format called ``name``, or None.

    Example:
        >>> registered(None) is None
        True
    """
    return _FORMATS.get(name) if isinstance(name, str) else None


def active() -> TypedCopyFormat | None:
    """The format the writer makes copies in, or None when no room registered one.

    Example:
        >>> active() is None or isinstance(active(), TypedCopyFormat)
        True
    """
    return _ACTIVE[0] if _ACTIVE else None


def copy_file_name(column_file: str, fmt: TypedCopyFormat) -> str:
    """The file name of a column's typed copy, from the column's data file name.

    Example:
        >>> copy_file_name("tool_calls.bytes.memmap", TypedCopyFormat("f", ".arrow", None, None))
        'tool_calls.typed.arrow'
    """
    stem = column_file[:-len(".bytes.memmap")] if column_file.endswith(".bytes.memmap") else column_file
    return f"{stem}.typed{fmt.suffix}"


def column_arrays(data_path: Path, off_path: Path) -> tuple[np.ndarray, np.ndarray]:
    """``(data, offsets)`` of a column just written to ``data_path`` and ``off_path``, as
    mapped numpy arrays (copy-on-write: writing into them never reaches the files; an empty
    data file gives an empty array).

    Example:
        >>> import tempfile, os
        >>> d = tempfile.mkdtemp()
        >>> _ = open(os.path.join(d, "c.bytes.memmap"), "wb").write(b"[1]")
        >>> np.array([0, 3], dtype="<i8").tofile(os.path.join(d, "c.offsets.memmap"))
        >>> data, offsets = column_arrays(Path(d, "c.bytes.memmap"), Path(d, "c.offsets.memmap"))
        >>> data.tobytes(), offsets.tolist()
        (b'[1]', [0, 3])
    """
    return mapped_bytes(data_path), np.memmap(off_path, dtype="<i8", mode="c")


def mapped_bytes(path: Path) -> np.ndarray:
    """The bytes of the file ``path`` as a copy-on-write mapped uint8 array (numpy cannot map
    an empty file: an empty array then).

    Example:
        >>> import tempfile, os
        >>> p = os.path.join(tempfile.mkdtemp(), "empty"); _ = open(p, "wb").close()
        >>> mapped_bytes(Path(p)).size
        0
    """
    return np.memmap(path, dtype=np.uint8, mode="c") if path.stat().st_size else np.zeros(0, np.uint8)


def write_copy(data: np.ndarray, offsets: np.ndarray, folder: Path, column_file: str, sums: dict,
               reuse=None, where: str = "a JSON column") -> dict | None:
    """Make the active format's typed copy of a packed JSON column and write it to ``folder``
    (its checksum into ``sums``); returns the column's ``"typed"`` field, or None when no
    format is registered or the values cannot be typed exactly. ``reuse`` is the column's copy
    as loaded (``(format name, uint8 tensor, path, recorded checksum)``): written as it is when
    the column is unchanged and the copy's bytes still hash to the checksum its folder recorded
    (a damaged copy is made anew). A copy is a cache: when making it fails, a warning says so
    and the save goes on without it.

    Example:
        >>> import tempfile
        >>> write_copy(np.zeros(0, np.uint8), np.zeros(1, np.int64), Path(tempfile.mkdtemp()), "c.bytes.memmap", {})
    """
    import warnings

    from . import checksum as _checksum

    fmt = active()
    if fmt is None:
        return None
    name = copy_file_name(column_file, fmt)
    if reuse is not None and reuse[0] == fmt.name and reuse[3] is not None:
        old = reuse[1].numpy()
        if _checksum.checksum_bytes(old) == reuse[3]:  # whole: its bytes and its known checksum
            with open(folder / name, "wb") as f:
                f.write(memoryview(old))
            _checksum.record(sums, name, reuse[3])
            return {"format": fmt.name, "file": name}
    try:
        blob = fmt.make(data, offsets)
    except Exception as err:  # noqa: BLE001 - any failure of a cache must leave the save whole
        warnings.warn(f"{where}: saved without its typed copy ({type(err).__name__}: {err}); to_arrow() "
                      "parses the column instead", stacklevel=2)
        return None
    if blob is None:
        return None
    with _checksum.HashingFile.open(folder / name) as f:
        f.write(memoryview(blob).cast("B"))
        _checksum.record(sums, name, f.checksum())
    return {"format": fmt.name, "file": name}
