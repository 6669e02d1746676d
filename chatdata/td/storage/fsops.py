"""File-system helpers for saving: an atomic folder swap, the target checks of a save (symlinked
targets, foreign files) and the format error type. Temporary folders and their orphans live in
:mod:`chatdata.td.storage.tempdirs` (``find_orphans`` is re-exported here).

Example:
    >>> import tempfile, pathlib
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> (root / "new").mkdir(); (root / "new" / "f").write_text("1")
    1
    >>> atomic_replace(root / "new", root / "data"); (root / "data" / "f").read_text()
    '1'
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import shutil
import uuid
from pathlib import Path

from .tempdirs import find_orphans, remove_orphans

__all__ = ["atomic_replace", "write_all", "FormatError", "resolve_target", "check_overwritable", "find_orphans",
           "remove_orphans", "durable_replace", "fsync_file", "fsync_dir", "fsync_tree"]


class FormatError(ValueError):
    """A saved folder is unreadable or inconsistent (the message names the file)."""


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _renameat2():
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


_RENAMEAT2 = _renameat2()


def atomic_replace(src: Path, dest: Path) -> None:
    """Put folder ``src`` at ``dest``, replacing what was there in one atomic step.

    On Linux the two folders are exchanged with ``renameat2(RENAME_EXCHANGE)`` and the old one
    is then removed, so at every instant ``dest`` is either the old folder or the new one.
    Elsewhere the old folder is renamed aside first (a crash in between leaves it beside
    ``dest`` as ``.<name>.old-*``).
    """
    src, dest = Path(src), Path(dest)
    if not dest.exists():
        os.rename(src, dest)
        return
    if not dest.is_dir():
        raise FileExistsError(f"{dest} exists and is not a folder; refusing to replace it")
    if _RENAMEAT2 is not None:
        res = _RENAMEAT2(_AT_FDCWD, os.fsencode(src), _AT_FDCWD, os.fsencode(dest), _RENAME_EXCHANGE)
        if res == 0:
            shutil.rmtree(src, ignore_errors=True)  # src now holds the old data
            return
    old = dest.parent / f".{dest.name}.old-{uuid.uuid4().hex[:12]}"
    os.rename(dest, old)
    os.rename(src, dest)
    shutil.rmtree(old, ignore_errors=True)


# -- the target of a save ------------------------------------------------------------------
def resolve_target(path) -> Path:
    """The folder a save to ``path`` must replace: ``path`` itself, or, when ``path`` is a
    symbolic link (or a chain of them, dangling or not), the folder it points to. Saving
    through a link replaces the linked folder atomically and leaves the link as it was.

    Example:
        >>> import tempfile, pathlib
        >>> root = pathlib.Path(tempfile.mkdtemp()); (root / "real").mkdir()
        >>> (root / "link").symlink_to(root / "real")
        >>> resolve_target(root / "link") == (root / "real").resolve()
        True
    """
    path = Path(path).absolute()
    if not path.is_symlink():
        return path
    return Path(os.path.realpath(path))


_OWN_FILES = ("meta.json",)
_OWN_SUFFIXES = (".memmap",)
_OWN_MARK = ".typed."  # a JSON column's typed copy: <column>.typed.<format suffix> (typed_copies.py)
_TD_EXTRA = ("other.pickle", "pickle.pkl")  # tensordict's own files (refused on load, never foreign)
UPDATE_TEMP_PREFIX = ".meta.json.tmp-"  # what a killed in-place value update may leave (writethrough.py)


def _is_dataset_meta(path: Path) -> bool:
    import json

    try:
        with open(path, encoding="utf-8") as f:
            meta = json.load(f)
    except (OSError, ValueError, RecursionError):
        return False
    return isinstance(meta, dict) and (meta.get("format") == "chatdata" or "_type" in meta)


def foreign_entry(folder: Path) -> Path | None:
    """The first path inside ``folder`` that no chatdata or tensordict save writes (a file
    other than ``meta.json`` / ``*.memmap`` / a typed copy ``*.typed.*``, a link, a sub-folder
    holding such), or None.

    Example:
        >>> import tempfile, pathlib
        >>> d = pathlib.Path(tempfile.mkdtemp()); _ = (d / "notes.txt").write_text("mine")
        >>> foreign_entry(d).name
        'notes.txt'
    """
    stack = [Path(folder)]
    while stack:
        d = stack.pop()
        for entry in sorted(os.scandir(d), key=lambda e: e.name):
            p = Path(entry.path)
            if entry.is_symlink():
                return p
            if entry.is_dir():
                stack.append(p)
            elif not (entry.name in _OWN_FILES or entry.name in _TD_EXTRA or entry.name.endswith(_OWN_SUFFIXES)
                      or _OWN_MARK in entry.name or entry.name.startswith(UPDATE_TEMP_PREFIX)):
                return p
    return None


def check_overwritable(path: Path) -> None:
    """Raise ``FileExistsError`` unless a save may replace ``path``: it does not exist, or it
    is an empty folder, or a chatdata / tensordict dataset holding only its own files.

    Example:
        >>> import tempfile, pathlib
        >>> d = pathlib.Path(tempfile.mkdtemp()); _ = (d / "notes.txt").write_text("mine")
        >>> check_overwritable(d)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        FileExistsError: ...notes.txt...
    """
    path = Path(path)
    if not path.exists():
        return
    if not path.is_dir():
        raise FileExistsError(f"{path} exists and is not a folder; refusing to replace it")
    if not any(path.iterdir()):
        return
    if not _is_dataset_meta(path / "meta.json"):
        some = next(iter(sorted(path.iterdir())))
        raise FileExistsError(
            f"{path} is a non-empty folder that is not a chatdata or tensordict dataset (it holds "
            f"{some}); a save replaces the whole folder, so it refuses: save to a new or empty folder"
        )
    bad = foreign_entry(path)
    if bad is not None:
        raise FileExistsError(
            f"{path} holds {bad}, which is not part of a saved dataset; a save replaces the whole "
            "folder, so it refuses: move that file away or save to another folder"
        )


# -- durability (``durable=True``) --------------------------------------------------------
def fsync_file(path) -> None:
    """Flush a file's data and size to the disk (``fsync``).

    Example:
        >>> import tempfile; p = tempfile.mktemp(); open(p, "w").write("x")
        1
        >>> fsync_file(p)
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_all(fd: int, data, durable: bool = False) -> None:
    """Write every byte of ``data`` to the open file ``fd`` (``os.write`` may write fewer), then
    ``fsync`` it when ``durable``.

    Example:
        >>> import os, tempfile
        >>> fd, path = tempfile.mkstemp()
        >>> write_all(fd, b"abc"); os.close(fd); open(path, "rb").read()
        b'abc'
    """
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    if durable:
        os.fsync(fd)


def fsync_dir(path) -> None:
    """Flush a folder's entries (names created, renamed or removed in it) to the disk.
    A no-op where folders cannot be opened (Windows).

    Example:
        >>> import tempfile; fsync_dir(tempfile.mkdtemp())
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except (PermissionError, IsADirectoryError):  # pragma: no cover - Windows
        return
    try:
        os.fsync(fd)
    except OSError as err:  # pragma: no cover - file systems that cannot fsync a folder
        import errno

        if err.errno not in (errno.EINVAL, errno.EBADF):
            raise
    finally:
        os.close(fd)


def fsync_tree(root) -> None:
    """fsync every file under ``root``, then every folder, deepest first, ``root`` last: after
    it returns, the whole tree survives a power loss. Call it on a finished temporary folder
    before renaming it into place, then :func:`fsync_dir` on the parent after the rename (what
    ``save(..., durable=True)`` and the stream writer do; a shard writer can do the same).

    Example:
        >>> import tempfile, pathlib
        >>> root = pathlib.Path(tempfile.mkdtemp()); (root / "sub").mkdir()
        >>> (root / "sub" / "f").write_bytes(b"1")
        1
        >>> fsync_tree(root)
    """
    for folder, _dirs, files in os.walk(root, topdown=False):
        for name in files:
            fsync_file(os.path.join(folder, name))
        fsync_dir(folder)


def durable_replace(src: Path, dest: Path, durable: bool = False) -> None:
    """:func:`atomic_replace`, with ``durable=True`` fsyncing ``src``'s files and folders before
    the rename and the parent folder after it (so the rename itself is on disk).

    Example:
        >>> import tempfile, pathlib
        >>> root = pathlib.Path(tempfile.mkdtemp()); (root / "new").mkdir()
        >>> durable_replace(root / "new", root / "data", durable=True); (root / "data").is_dir()
        True
    """
    if durable:
        fsync_tree(src)
    atomic_replace(src, dest)
    if durable:
        fsync_dir(Path(dest).parent)
